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
With --trace, each side's server instead runs under benchmarks/_stdio_trace.py, which stamps each boundary of the
path (the line read, parsed, handed to the SDK's dispatcher, its task started, the middleware, the handler, the
result shaped, encoded, written); the table then gives the median of each segment in µs, client send and receive
included (one clock for both processes).
Prints a table and writes benchmarks/results/stdio_path.json (--trace: stdio_path-trace.json).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
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


STAGES = [
    "line",
    "inspected",
    "sdk_dispatch",
    "sdk_task",
    "sdk_on_request",
    "our_middleware",
    "handler",
    "handler_done",
    "sdk_serialized",
    "sdk_write_result",
    "encode",
    "encoded",
    "written",
]


class TracedClient(RawClient):
    """RawClient whose server runs under _stdio_trace.py; keeps each request's send and receive times."""

    def __init__(self, root: Path, tree: Path, out: Path) -> None:
        # not super().__init__(): that spawns `python -m memserver serve`
        params = C.server_params(root, tree=tree)
        script = str(Path(__file__).with_name("_stdio_trace.py"))
        self.proc = subprocess.Popen(
            [sys.executable, script, str(root), str(out)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=params.env,
            cwd=params.cwd,
        )
        self.next_id = 0
        self.times: dict[int, tuple[str, int, int]] = {}
        self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        sent = time.perf_counter_ns()
        result = super().request(method, params)
        self.times[self.next_id] = (method, sent, time.perf_counter_ns())
        return result


def trace(root: Path, trees: dict[str, Path], rounds: int) -> dict[str, Any]:
    """Per side and method: the median µs of each segment between two stamps (client send ... client receive)."""
    segments: dict[str, dict[str, dict[str, list[float]]]] = {n: {"ping": {}, "tools/call": {}} for n in trees}
    call = {"name": "recall", "arguments": {"query": QUERY, "limit": 5}}
    with tempfile.TemporaryDirectory() as tmp:
        for half in range(2):  # old, new, old, new: the load of a shared machine on both alike
            for name, tree in trees.items():
                out = Path(tmp) / f"{name}-{half}.jsonl"
                client = TracedClient(root, tree, out)
                for _ in range(20):
                    client.request("tools/call", call)
                    client.request("ping", {})
                first = client.next_id + 1
                for _ in range(rounds // 2):
                    time.sleep(GAP_S)
                    client.request("ping", {})
                    time.sleep(GAP_S)
                    client.request("tools/call", call)
                client.close()
                stamps = {}
                for line in out.read_text().splitlines():
                    record = json.loads(line)
                    if isinstance(record["id"], int) and record["id"] >= first:
                        stamps[record["id"]] = record["stamps"]
                for request_id, (method, sent, received) in client.times.items():
                    if request_id not in stamps:
                        continue
                    seen = segments[name][method]
                    previous, at = "client send", sent
                    for stage in STAGES:
                        if stage in stamps[request_id]:
                            t = stamps[request_id][stage]
                            seen.setdefault(f"{previous} -> {stage}", []).append((t - at) / 1000)
                            previous, at = stage, t
                    seen.setdefault(f"{previous} -> client receive", []).append((received - at) / 1000)
                    seen.setdefault("total", []).append((received - sent) / 1000)
    return {
        name: {method: {k: round(statistics.median(v), 1) for k, v in seen.items()} for method, seen in by.items()}
        for name, by in segments.items()
    }


def print_trace(traced: dict[str, Any], rounds: int) -> None:
    print(f"stdio path, traced, {rounds} rounds per side (µs, medians per segment; 'total' is its own median)")
    for method in ("ping", "tools/call"):
        keys = list(traced["new"][method])
        rows = [[k, traced["old"][method].get(k, float("nan")), traced["new"][method][k]] for k in keys]
        print(f"{method}:")
        print(C.table(["segment", "old", "new"], rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", required=True, help="another checkout, timed against this one")
    parser.add_argument("--rounds", type=int, default=1000, help="rounds (each: ping + recall per side)")
    parser.add_argument("--size", type=int, default=2000, help="memories in the store (built once, cached)")
    parser.add_argument("--cache", default=None, help="where built stores are kept (default /tmp/memserver-bench)")
    parser.add_argument("--trace", action="store_true", help="stamp each boundary in the servers (segments, µs)")
    parser.add_argument("--out", default=None, help="default results/stdio_path.json (--trace: stdio_path-trace.json)")
    args = parser.parse_args(argv)
    root = C.ensure_store(C.cache_dir(args.cache), args.size)
    trees = {"old": Path(args.old).resolve(), "new": C.ROOT}
    started = C.machine()
    C.log(f"stdio path, {args.rounds} rounds, old vs new, {args.size:,} memories ...")
    settings = {"rounds": args.rounds, "size": args.size, "gap_s": GAP_S, "old": str(trees["old"])}
    if args.trace:
        traced = trace(root, trees, args.rounds)
        print_trace(traced, args.rounds)
        out = args.out or str(C.RESULTS / "stdio_path-trace.json")
        end = C.machine()["loadavg"]
        C.write_json(out, {"machine": started, "loadavg_at_end": end, "settings": settings, **traced})
        return 0
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
        "settings": settings,
        "sides": sides,
    }
    C.write_json(args.out or str(C.RESULTS / "stdio_path.json"), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
