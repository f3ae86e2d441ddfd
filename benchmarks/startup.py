"""Start-up: spawn -> initialize / tools/list answered, the first recall, a warm recall, memserver's own imports.

    uv run python -m benchmarks.startup                 # 0 and 100k memories, 5 spawns of each kind
    uv run python -m benchmarks.startup --old OLD       # A/B: that checkout and this one, spawns alternated
    uv run python -m benchmarks.startup --with-1m       # ... and 1M (builds the 1M store once if missing)
    uv run python -m benchmarks.startup --quick         # smoke run (0 and 300 memories, 1 spawn each)

An MCP SDK client spawns `python -m memserver serve` over stdio, as a desktop client does, and records (wall
clock, client side) when `initialize` and `tools/list` are answered. Two kinds of spawn, alternated:
  - "at once": the first `recall` follows tools/list at once, as when a client calls a tool straight away; it
    waits for the model and the index still loading (spawn -> first recall answered; RSS then, from /proc);
  - "loaded": the client first reads memory://stats (which waits for the store, model included), then times
    the first recall (a store and model that have answered nothing yet) and WARM more recalls (their p50).
    The target (issue 26, item 5): that first recall <= 2x the warm p50.
The server's query cache is off, so every recall embeds its query; the queries are quality.json's.
memserver's own imports: in a fresh interpreter that has imported the SDK's server side, the CPU time of
importing the CLI, the stdio transport and the server, and building the server (what `memserver serve` needs to
answer initialize and tools/list); median of --repeat runs, twice: as this environment runs it (if it sets
PYTHONDONTWRITEBYTECODE, every module is compiled from source on every start) and from bytecode caches (written
to a temporary PYTHONPYCACHEPREFIX by one run first: what an installed memserver does from its second start on).
The baseline is the cost of the same interpreter importing the SDK's server side
(`python -c "import anyio, mcp.server.lowlevel, mcp.server.stdio, mcp_types"`, spawn to exit).
Medians over --repeat spawns. Stores are the cached synthetic stores of benchmarks/_common.py.
Prints a table and writes benchmarks/results/startup.json (with --old: startup-ab.json).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks import _common as C

WARM = 20  # recalls after the first one of a "loaded" spawn: their p50 is the warm latency
NO_QUERY_CACHE = {"MEMSERVER_QUERY_CACHE": "0"}
# What `memserver serve` imports and builds to answer initialize and tools/list, once the SDK's server side is in.
OWN_IMPORTS = """
import time
import anyio, mcp.server.lowlevel, mcp.server.stdio, mcp_types
started = time.process_time()
import memserver.cli.command, memserver.cli.serve, memserver.transports.stdio
from memserver.server import build_server
build_server(data_dir="unused")
print((time.process_time() - started) * 1000)
"""


async def recall_ms(client: Any, query: str) -> float:
    t0 = time.perf_counter()
    result = await client.call_tool("recall", {"query": query})
    if result.is_error:
        raise RuntimeError(f"recall failed: {result.content}")
    return (time.perf_counter() - t0) * 1000


async def one_spawn(root: Path, queries: list[str], tree: Path, loaded: bool) -> dict[str, Any]:
    t0 = time.perf_counter()
    async with C.mcp_client(root, timing=False, extra_env=NO_QUERY_CACHE, tree=tree) as (client, pid):
        out: dict[str, Any] = {"initialize_s": time.perf_counter() - t0}
        tools = await client.list_tools()
        out["tools_list_s"] = time.perf_counter() - t0
        assert {"remember", "recall", "list_recent", "forget"} <= {tool.name for tool in tools.tools}
        if not loaded:
            out["first_recall_ms"] = await recall_ms(client, queries[0])
            out["first_recall_s"] = time.perf_counter() - t0
            out.update(C.rss_mb(pid) if pid else {})
            return out
        await client.read_resource("memory://stats")  # waits until the store and the model are loaded
        out["loaded_s"] = time.perf_counter() - t0
        out["loaded_first_ms"] = await recall_ms(client, queries[1])
        out["warm_p50_ms"] = statistics.median([await recall_ms(client, q) for q in queries[2 : 2 + WARM]])
    return out


def own_imports_ms(tree: Path, env: dict[str, str] | None = None) -> float:
    command = [sys.executable, "-c", OWN_IMPORTS]
    done = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=True, env=env)
    return float(done.stdout.split()[-1])


def cached_env(prefix: str) -> dict[str, str]:
    """This environment, with bytecode written to and read from `prefix` (PYTHONPYCACHEPREFIX)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, "PYTHONPYCACHEPREFIX": prefix}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[0, 100_000], help="store sizes (default 0 100000)")
    parser.add_argument("--with-1m", action="store_true", help="add the 1,000,000-memory store")
    parser.add_argument("--repeat", type=int, default=5, help="spawns per size and kind (default 5; medians)")
    parser.add_argument("--old", metavar="PATH", help="another checkout, measured alternately with this one")
    parser.add_argument("--quick", action="store_true", help="smoke run: sizes 0 and 300, one spawn each")
    parser.add_argument("--cache", default=None, help="where built stores are kept (default /tmp/memserver-bench)")
    parser.add_argument("--out", default=None, help="JSON file (default results/startup.json, -ab with --old)")
    args = parser.parse_args(argv)
    sizes = [0, 300] if args.quick else list(args.sizes) + ([1_000_000] if args.with_1m else [])
    repeat = 1 if args.quick else args.repeat
    trees = {"old": Path(args.old).resolve(), "new": C.ROOT} if args.old else {"new": C.ROOT}
    out = args.out or str(C.RESULTS / ("startup-ab.json" if args.old else "startup.json"))

    host = C.machine()
    cache = C.cache_dir(args.cache)
    roots = {n: (C.ensure_store(cache, n, quick=args.quick) if n else cache / "store-0") for n in sizes}
    if 0 in roots:
        (roots[0] / C.COLLECTION).mkdir(parents=True, exist_ok=True)
    _, queries = C.corpus()
    baseline = C.sdk_import_s(1 if args.quick else 5)
    results: dict[str, Any] = {"machine": host, "baseline_s": baseline, "repeat": repeat, "sizes": {}}
    imports: dict[str, list[float]] = {name: [] for name in trees}
    cached: dict[str, list[float]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as prefix:
        for tree in trees.values():
            own_imports_ms(tree, cached_env(prefix))  # writes the bytecode caches
        for _ in range(repeat):
            for name, tree in trees.items():
                imports[name].append(own_imports_ms(tree))
                cached[name].append(own_imports_ms(tree, cached_env(prefix)))
    results["own_imports_ms"] = {name: round(statistics.median(v), 1) for name, v in imports.items()}
    results["own_imports_cached_ms"] = {name: round(statistics.median(v), 1) for name, v in cached.items()}
    for n in sizes:
        C.log(f"start-up at {n:,} memories ...")
        runs: dict[str, list[dict[str, Any]]] = {
            f"{name}/{kind}": [] for name in trees for kind in ("at once", "loaded")
        }
        for _ in range(repeat):
            for kind in ("at once", "loaded"):
                for name, tree in trees.items():
                    runs[f"{name}/{kind}"].append(anyio.run(one_spawn, roots[n], queries, tree, kind == "loaded"))
        med = {key: {k: round(statistics.median(r[k] for r in rs), 3) for k in rs[0]} for key, rs in runs.items()}
        results["sizes"][str(n)] = {"median": med, "runs": runs}
    results["machine"]["loadavg_at_end"] = C.machine()["loadavg"]

    rows = []
    for n, r in results["sizes"].items():
        for name in trees:
            now, loaded = r["median"][f"{name}/at once"], r["median"][f"{name}/loaded"]
            rows.append(
                [
                    C.size_label(int(n)),
                    name,
                    now["initialize_s"],
                    round(now["initialize_s"] - baseline["sdk_import"], 3),
                    now["tools_list_s"],
                    now["first_recall_s"],
                    loaded["loaded_s"],
                    round(loaded["loaded_first_ms"], 1),
                    round(loaded["warm_p50_ms"], 1),
                    round(loaded["loaded_first_ms"] / loaded["warm_p50_ms"], 2),
                    now.get("rss", float("nan")),
                ]
            )
    print(
        f"start-up over MCP stdio, median of {repeat} spawns of each kind; baseline: python alone "
        f"{baseline['python']} s, python + SDK import {baseline['sdk_import']} s; memserver's own imports (CPU ms): "
        + ", ".join(f"{name} {ms}" for name, ms in results["own_imports_ms"].items())
        + "; from bytecode caches: "
        + ", ".join(f"{name} {ms}" for name, ms in results["own_imports_cached_ms"].items())
    )
    headers = ["memories", "checkout", "spawn->initialize s", "minus SDK import", "spawn->tools/list s"]
    headers += ["spawn->first recall s", "spawn->loaded s", "first recall, loaded ms", "warm p50 ms", "first/warm"]
    print(C.table([*headers, "RSS MB"], rows))
    C.write_json(out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
