"""The same hybrid search in the settings a server runs it in: why the store call costs more over MCP than in process.

    uv run python -m benchmarks.search_context --sizes 100000      # the cached 100k store (_common.py)
    uv run python -m benchmarks.search_context --sizes 100000 --spinning   # onnxruntime's threads spinning
    uv run python -m benchmarks.search_context --quick             # smoke run: a 300-memory store

Issue 26, item 1: over MCP the recall's store call minus its embedding took 2.1 ms, in process
(hybrid_profile.py) the same hybrid search 0.8 ms. This opens the store as `memserver serve` does
(loader.DefaultStoreFactory: the shared Embedder, MEMSERVER_TIMING=1, no query cache) in a fresh process and times
the real queries under six conditions, query by query in turn (query i under condition i mod 6, so each condition
meets fresh queries and the load alike):
  - back to back   `search(query_vector=v)` right after another search (hybrid_profile's setting);
  - busy           the same after GAP_S of a busy loop (the thread keeps its core; other processes share caches);
  - idle           the same after GAP_S asleep (recall_mcp.py's pace between recalls);
  - after embed    idle, then the query embedded (untimed), then the search with its vector;
  - server work    idle, then the recall tool's work as the server runs it on the event loop
                   (tool_work.recall_nowait on validated arguments), minus its embedding: recall_mcp's "search";
  - server, warm   the same, the query's search run once (untimed) just before: its pages mapped, its rows cached.
Minor page faults (getrusage) are counted over each timed part ("server work": over the whole call, embedding
included). Pass 1 meets every query for the first time, as a fresh server does; passes 2.. repeat them.
Prints a table and writes benchmarks/results/search_context.json.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from benchmarks import _common as C

GAP_S = 0.05  # recall_mcp.py's pause between two recalls
CONDITIONS = ("back to back", "busy", "idle", "after embed", "server work", "server, warm")


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def measure(root: Any, queries: list[str], vecs: np.ndarray, passes: int, limit: int) -> dict[str, Any]:
    os.environ["MEMSERVER_TIMING"] = "1"  # read when memserver.loader is imported: the Embedder's time is counted
    os.environ["MEMSERVER_QUERY_CACHE"] = "0"  # as recall_mcp.py's servers: every recall embeds its query
    from memserver import loader
    from memserver.features import tool_work, tools

    factory = loader.DefaultStoreFactory(root, C.COLLECTION)
    store: Any = factory(None)
    embedder = factory.embedder()
    try:
        args = [tools.validate_arguments(tools.RECALL, {"query": q, "limit": limit}) for q in queries]

        def search(i: int) -> None:
            store.search(queries[i], limit=limit, mode="hybrid", query_vector=vecs[i])

        def server_work(i: int) -> float:
            """recall_nowait, timed as server._timed times it: the call minus its embedding (ms)."""
            with loader.embedding_seconds() as embedded:
                t0 = time.perf_counter()
                if tool_work.recall_nowait(store, args[i]) is None:
                    raise RuntimeError("the store could not answer at once")
                return (time.perf_counter() - t0 - embedded()) * 1e3

        def timed(before: Callable[[], None] | None, i: int) -> tuple[float, int]:
            if before is not None:
                before()
            f0, t0 = _faults(), time.perf_counter()
            search(i)
            return (time.perf_counter() - t0) * 1e3, _faults() - f0

        def timed_work(warm: bool, i: int) -> tuple[float, int]:
            time.sleep(GAP_S)
            if warm:
                search(i)
            f0 = _faults()
            ms = server_work(i)
            return ms, _faults() - f0

        def back_to_back(i: int) -> tuple[float, int]:
            return timed(lambda: search(i - 1), i)

        def busy() -> None:  # the thread keeps its core, other processes still share the caches
            end = time.perf_counter() + GAP_S
            while time.perf_counter() < end:
                pass

        def after_embed(i: int) -> None:
            time.sleep(GAP_S)
            embedder.embed_query(queries[i])

        run: dict[str, Callable[[int], tuple[float, int]]] = {
            "back to back": back_to_back,
            "busy": partial(timed, busy),
            "idle": partial(timed, partial(time.sleep, GAP_S)),
            "after embed": lambda i: timed(partial(after_embed, i), i),
            "server work": partial(timed_work, False),
            "server, warm": partial(timed_work, True),
        }
        for i in range(10):  # warm-up, as recall_mcp.py's: thread pools, allocator arenas, the first numpy calls
            server_work(i)
        ms: dict[str, dict[str, list[float]]] = {name: defaultdict(list) for name in CONDITIONS}
        for p in range(passes):
            key = "pass 1" if p == 0 else "passes 2+"
            for i in range(10, len(queries)):
                name = CONDITIONS[i % len(CONDITIONS)]
                t, faults = run[name](i)
                ms[name][key].append(t)
                ms[name][key + " faults"].append(faults)
        count = store.stats().get("count")
    finally:
        store.close()
    return {
        "memories": count,
        "conditions": {
            name: {
                key: C.summary(xs) if not key.endswith("faults") else round(statistics.median(xs), 1)
                for key, xs in parts.items()
            }
            for name, parts in ms.items()
        },
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000], help="store sizes (cached stores)")
    parser.add_argument("--fields", action="store_true", help="the stores with conversation fields")
    parser.add_argument("--passes", type=int, default=3, help="passes over the queries (default 3)")
    parser.add_argument("--limit", type=int, default=5, help="recall limit (default 5, the tool's default)")
    parser.add_argument("--spinning", action="store_true", help="onnxruntime's intra-op threads spin (not default)")
    parser.add_argument("--quick", action="store_true", help="smoke run: a 300-memory store, 30 queries, 2 passes")
    parser.add_argument("--cache", default=None, help="where built stores are kept (default /tmp/memserver-bench)")
    parser.add_argument("--out", default=None, help="default results/search_context.json")
    args = parser.parse_args(argv)
    from benchmarks.hybrid_profile import query_vectors

    queries = C.corpus()[1][: 30 if args.quick else None]
    cache = C.cache_dir(args.cache)
    vecs = query_vectors(queries, cache)
    if args.spinning:
        from memserver.embedding import embedder as embedder_module

        embedder_module.load_session = partial(embedder_module.load_session, spinning=True)  # type: ignore[assignment]
    results: dict[str, Any] = {"machine": C.machine(), "settings": vars(args), "sizes": {}}
    for n in [300] if args.quick else args.sizes:
        root = C.ensure_store(cache, n, quick=args.quick, fields=args.fields)
        C.log(f"hybrid search in the server's settings at {n:,} memories ...")
        passes = 2 if args.quick else args.passes
        results["sizes"][str(n)] = measure(root, queries, vecs, passes, args.limit)
    results["machine"]["loadavg_at_end"] = C.machine()["loadavg"]
    rows = []
    for n, r in results["sizes"].items():
        for name, parts in r["conditions"].items():
            first, later = parts.get("pass 1", {}), parts.get("passes 2+", {})
            rows.append(
                [
                    C.size_label(int(n)),
                    name,
                    first.get("p50", float("nan")),
                    parts.get("pass 1 faults", float("nan")),
                    later.get("p50", float("nan")),
                    later.get("p95", float("nan")),
                    parts.get("passes 2+ faults", float("nan")),
                ]
            )
    headers = ["memories", "condition", "pass 1 p50", "faults", "passes 2+ p50", "p95", "faults"]
    print("hybrid search (ms) and minor page faults (median per call), query vector given but in 'server work'")
    print(C.table(headers, rows))
    C.write_json(args.out or str(C.RESULTS / "search_context.json"), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
