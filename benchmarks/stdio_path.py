"""The stdio path between the pipe and the handler (issue 26, item 3), two checkouts side by side.

    uv run python -m benchmarks.stdio_path --old OLD            # OLD: another checkout, e.g. `git archive main`
    uv run python -m benchmarks.stdio_path --old OLD --rounds 2000 --size 2000

A raw JSON-RPC client (benchmarks.recall_mcp.RawClient: blocking writes and reads on the pipes, no SDK) talks to one
`python -m memserver serve` of each checkout ("old", "new") on the same cached store. Each round asks each server,
in alternating order, for an MCP `ping` and for a `tools/call recall` of a query it has answered before (the
query-embedding cache is on, so no model runs), GAP_S apart: the load of a shared machine hits both sides alike,
which only an interleaving like this makes comparable at the scale of 0.1 ms. Per side: ping p50, recall p50, and
"outside the handler" (the client's latency minus the handler's own `_meta["memserver/timing"].handler_ms`: the
pipes, the wake-ups, parsing, the SDK's dispatch and the answer's way back).
Prints a table and writes benchmarks/results/stdio_path.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks import _common as C
from benchmarks.recall_mcp import RawClient

GAP_S = 0.005  # between two requests: a client that is not in a tight loop (and a wake-up each time)
QUERY = "what did I say about the garden"


def _p50(xs: list[float]) -> float:
    return round(statistics.median(xs), 3)


def run(root: Path, trees: dict[str, Path], rounds: int) -> dict[str, Any]:
    clients = {name: RawClient(root, tree=tree) for name, tree in trees.items()}
    call = {"name": "recall", "arguments": {"query": QUERY, "limit": 5}}
    ping: dict[str, list[float]] = {n: [] for n in trees}
    recall: dict[str, list[float]] = {n: [] for n in trees}
    outside: dict[str, list[float]] = {n: [] for n in trees}
    try:
        for client in clients.values():  # warm-up: the query's embedding cached, the index paged in
            for _ in range(20):
                client.request("tools/call", call)
                client.request("ping", {})
        names = list(trees)
        for r in range(rounds):
            for name in names if r % 2 == 0 else names[::-1]:
                client = clients[name]
                time.sleep(GAP_S)
                t0 = time.perf_counter()
                client.request("ping", {})
                ping[name].append((time.perf_counter() - t0) * 1000)
                time.sleep(GAP_S)
                t0 = time.perf_counter()
                result = client.request("tools/call", call)
                ms = (time.perf_counter() - t0) * 1000
                recall[name].append(ms)
                outside[name].append(ms - result["_meta"]["memserver/timing"]["handler_ms"])
    finally:
        for client in clients.values():
            client.close()
    return {
        name: {
            "ping_p50_ms": _p50(ping[name]),
            "ping_p95_ms": C.summary(ping[name])["p95"],
            "recall_cached_p50_ms": _p50(recall[name]),
            "outside_handler_p50_ms": _p50(outside[name]),
            "handler_p50_ms": _p50([a - b for a, b in zip(recall[name], outside[name], strict=True)]),
        }
        for name in trees
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="another checkout, timed against this one")
    parser.add_argument("--rounds", type=int, default=1000, help="rounds (each: ping + recall per side)")
    parser.add_argument("--size", type=int, default=2000, help="memories in the store (built once, cached)")
    parser.add_argument("--cache", default=None, help="where built stores are kept (default /tmp/memserver-bench)")
    parser.add_argument("--out", default=str(C.RESULTS / "stdio_path.json"))
    args = parser.parse_args(argv)
    root = C.ensure_store(C.cache_dir(args.cache), args.size)
    trees = {"old": Path(args.old).resolve(), "new": C.ROOT}
    started = C.machine()
    C.log(f"stdio path, {args.rounds} rounds, old vs new, {args.size:,} memories ...")
    sides = run(root, trees, args.rounds)
    rows = [
        [
            name,
            s["ping_p50_ms"],
            s["ping_p95_ms"],
            s["recall_cached_p50_ms"],
            s["handler_p50_ms"],
            s["outside_handler_p50_ms"],
        ]
        for name, s in sides.items()
    ]
    print(f"stdio path, raw JSON-RPC client, {args.rounds} interleaved rounds (ms, medians)")
    headers = ["side", "ping p50", "ping p95", "cached recall p50", "handler", "outside handler"]
    print(C.table(headers, rows))
    results = {
        "machine": started,
        "loadavg_at_end": C.machine()["loadavg"],
        "settings": {"rounds": args.rounds, "size": args.size, "gap_s": GAP_S, "old": str(trees["old"])},
        "sides": sides,
    }
    C.write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
