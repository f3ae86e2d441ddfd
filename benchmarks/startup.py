"""Start-up: spawn -> initialize answered, spawn -> first recall answered, at 0, 100k (and 1M) memories; RSS.

    uv run python -m benchmarks.startup                 # 0 and 100k memories, 5 spawns each
    uv run python -m benchmarks.startup --with-1m       # ... and 1M (builds the 1M store once if missing)
    uv run python -m benchmarks.startup --quick         # smoke run (0 and 300 memories, 1 spawn each)

An MCP SDK client spawns `python -m memserver serve` over stdio, as a desktop client does, and records (wall
clock, client side) when `initialize` is answered and when the first `recall` is answered; then the server's RSS
(now and peak, from /proc). The baseline is the cost of the same interpreter importing the SDK's server side
(`python -c "import anyio, mcp.server.lowlevel, mcp.server.stdio, mcp_types"`, spawn to exit): the target is
spawn -> initialize <= that + 100 ms. Medians over --repeat spawns. Stores are the cached synthetic stores of
benchmarks/_common.py. Prints a table and writes benchmarks/results/startup.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks import _common as C

QUERY = "Where does Marta live these days?"


async def one_spawn(root: Path) -> dict[str, Any]:
    t0 = time.perf_counter()
    async with C.mcp_client(root, timing=False) as (client, pid):
        init = time.perf_counter() - t0
        tools = await client.list_tools()
        tools_s = time.perf_counter() - t0
        result = await client.call_tool("recall", {"query": QUERY})
        first = time.perf_counter() - t0
        if result.is_error:
            raise RuntimeError(f"recall failed: {result.content}")
        rss = C.rss_mb(pid) if pid else {}
        assert {"remember", "recall", "list_recent", "forget"} <= {tool.name for tool in tools.tools}
    return {"initialize_s": init, "tools_list_s": tools_s, "first_recall_s": first, **rss}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 100_000], help="store sizes (default 0 100000)")
    parser.add_argument("--with-1m", action="store_true", help="add the 1,000,000-memory store")
    parser.add_argument("--repeat", type=int, default=5, help="spawns per size (default 5; medians reported)")
    parser.add_argument("--quick", action="store_true", help="smoke run: sizes 0 and 300, one spawn each")
    parser.add_argument("--cache", default=None, help="where built stores are kept (default /tmp/memserver-bench)")
    parser.add_argument("--out", default=str(C.RESULTS / "startup.json"))
    args = parser.parse_args(argv)
    sizes = [0, 300] if args.quick else list(args.sizes) + ([1_000_000] if args.with_1m else [])
    repeat = 1 if args.quick else args.repeat

    host = C.machine()
    cache = C.cache_dir(args.cache)
    roots = {n: (C.ensure_store(cache, n, quick=args.quick) if n else cache / "store-0") for n in sizes}
    if 0 in roots:
        (roots[0] / C.COLLECTION).mkdir(parents=True, exist_ok=True)
    baseline = C.sdk_import_s(1 if args.quick else 5)
    results: dict[str, Any] = {"machine": host, "baseline_s": baseline, "repeat": repeat, "sizes": {}}
    for n in sizes:
        C.log(f"start-up at {n:,} memories ...")
        runs = [anyio.run(one_spawn, roots[n]) for _ in range(repeat)]
        med = {k: round(statistics.median(r[k] for r in runs), 3) for k in runs[0]}
        results["sizes"][str(n)] = {"median": med, "runs": runs}
    results["machine"]["loadavg_at_end"] = C.machine()["loadavg"]

    rows = []
    for n, r in results["sizes"].items():
        m = r["median"]
        rows.append(
            [
                C.size_label(int(n)),
                m["initialize_s"],
                round(m["initialize_s"] - baseline["sdk_import"], 3),
                m["tools_list_s"],
                m["first_recall_s"],
                m.get("rss", float("nan")),
                m.get("peak", float("nan")),
            ]
        )
    print(
        f"start-up over MCP stdio, median of {repeat} spawns (s); baseline: python alone {baseline['python']} s, "
        f"python + SDK import {baseline['sdk_import']} s"
    )
    print(
        C.table(
            [
                "memories",
                "spawn->initialize",
                "minus SDK import",
                "spawn->tools/list",
                "spawn->first recall",
                "RSS MB",
                "peak RSS MB",
            ],
            rows,
        )
    )
    C.write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
