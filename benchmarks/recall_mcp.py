"""End-to-end recall latency over MCP stdio, against the bare embedding floor of the same queries.

    uv run python benchmarks/recall_mcp.py                      # 1k, 10k, 100k memories
    uv run python benchmarks/recall_mcp.py --with-1m            # ... and 1M (builds a 1M store once: minutes)
    uv run python benchmarks/recall_mcp.py --quick              # smoke run (a 300-memory store, 20 queries)

For each store size, an MCP SDK client spawns `python -m memserver serve` over stdio (as a desktop client does)
and times `tools/call recall` client-side for the real queries of benchmarks/data/quality.json (p50/p95/p99).
The server runs with MEMSERVER_TIMING=1, so each result carries `_meta["memserver/timing"]`; from it the time of
one call is split into:
  - embed     the query embedding inside the server (Embedder.embed_query);
  - search    the rest of the store call (filters, HNSW, hits);
  - server    argument validation, the worker-thread hop, building the result (handler minus store call);
  - protocol  JSON-RPC framing, pydantic (de)serialisation on both sides, the stdio pipes (client minus handler);
              for scale, an MCP `ping` (the cheapest request there is) is timed before each recall.
Interleaved with every MCP call, the same query is embedded in this process by the bare onnxruntime pipeline of
benchmarks/embed.py (tokenise, run, pool, normalise; same model file and thread count): the floor. The headline
is the ratio recall p50 / floor p50. A 20 ms pause separates the measurements (see GAP_S). Stores are filled by
the bulk-load path described in benchmarks/_common.py.
Prints a table and writes benchmarks/results/recall_mcp.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))

import _common as C

# onnxruntime's intra-op threads keep spinning for a moment after each run; on 2 cores, one side's spinning threads
# would slow the other side down. A short pause between the measurements keeps them apart.
GAP_S = 0.02


async def measure(root: Path, queries: list[str], bare: Any, emb: Any, limit: int, repeat: int) -> dict[str, Any]:
    lat: list[float] = []
    floor_bare: list[float] = []
    floor_emb: list[float] = []
    ping: list[float] = []
    parts: dict[str, list[float]] = {"embed": [], "search": [], "server": [], "protocol": []}
    t_spawn = time.perf_counter()
    async with C.mcp_client(root) as (client, pid):
        init_s = time.perf_counter() - t_spawn
        t0 = time.perf_counter()
        first = await client.call_tool("recall", {"query": queries[0], "limit": limit})
        first_ms = (time.perf_counter() - t0) * 1000
        if first.is_error:
            raise RuntimeError(f"recall failed: {first.content}")
        for q in queries[:10]:  # warm-up: thread pools, allocator arenas, page cache of the index
            await client.call_tool("recall", {"query": q, "limit": limit})
            bare.embed([q])
            emb.embed_query(q)
        for _ in range(repeat):
            for q in queries:
                t0 = time.perf_counter()
                bare.embed([q])
                floor_bare.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                emb.embed_query(q)
                floor_emb.append((time.perf_counter() - t0) * 1000)
                await anyio.sleep(GAP_S)  # let this process's onnxruntime threads stop spinning
                t0 = time.perf_counter()
                await client.send_ping()
                ping.append((time.perf_counter() - t0) * 1000)
                t0 = time.perf_counter()
                result = await client.call_tool("recall", {"query": q, "limit": limit})
                ms = (time.perf_counter() - t0) * 1000
                if result.is_error:
                    raise RuntimeError(f"recall failed: {result.content}")
                lat.append(ms)
                await anyio.sleep(GAP_S)  # ... and the server's
                t = C.timing_meta(result)
                if t:
                    parts["embed"].append(t["embed_ms"])
                    parts["search"].append(t["work_ms"] - t["embed_ms"])
                    parts["server"].append(t["handler_ms"] - t["work_ms"])
                    parts["protocol"].append(ms - t["handler_ms"])
        rss = C.rss_mb(pid) if pid else {}
        hits = len(result.structured_content["results"])  # type: ignore[index]
    recall = C.summary(lat)
    floor = C.summary(floor_bare)
    return {
        "spawn_to_initialize_s": round(init_s, 3),
        "first_recall_ms": round(first_ms, 1),
        "recall_ms": recall,
        "floor_bare_ms": floor,
        "floor_embedder_ms": C.summary(floor_emb),
        "ping_ms": C.summary(ping),
        "breakdown_p50_ms": {k: round(statistics.median(v), 3) for k, v in parts.items() if v},
        "ratio_p50_to_floor": round(recall["p50"] / floor["p50"], 3),
        "server_rss_mb": rss,
        "hits_per_recall": hits,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000], help="store sizes")
    parser.add_argument("--with-1m", action="store_true", help="add the 1,000,000-memory store")
    parser.add_argument("--queries", type=int, default=339, help="distinct real queries (default: all 339)")
    parser.add_argument("--repeat", type=int, default=1, help="passes over the queries per size (default 1)")
    parser.add_argument("--limit", type=int, default=5, help="recall limit (default 5, the tool's default)")
    parser.add_argument("--quick", action="store_true", help="smoke run: one 300-memory store, 20 queries")
    parser.add_argument("--cache", default=None, help="where built stores are kept (default /tmp/memserver-bench)")
    parser.add_argument("--out", default=str(C.RESULTS / "recall_mcp.json"))
    args = parser.parse_args(argv)
    sizes = [300] if args.quick else list(args.sizes) + ([1_000_000] if args.with_1m else [])
    nq = 20 if args.quick else args.queries

    from embed import BarePipeline

    warnings.filterwarnings("ignore", message="ping is removed")  # ping still works in the legacy mode used here

    host = C.machine()
    cache = C.cache_dir(args.cache)
    emb = C.embedder()
    bare = BarePipeline(emb.files.model, emb.files.tokenizer, emb.threads)
    queries = C.corpus()[1][:nq]
    results: dict[str, Any] = {
        "machine": host,
        "settings": {"queries": len(queries), "repeat": args.repeat, "limit": args.limit, "threads": emb.threads},
        "sizes": {},
    }
    for n in sizes:
        root = C.ensure_store(cache, n, quick=args.quick)
        C.log(f"recall over MCP at {n:,} memories ...")
        r = anyio.run(measure, root, queries, bare, emb, args.limit, args.repeat)
        r["store_build"] = C.build_info(root)
        results["sizes"][str(n)] = r
        C.log(
            f"  p50 {r['recall_ms']['p50']} ms, floor {r['floor_bare_ms']['p50']} ms, ratio {r['ratio_p50_to_floor']}"
        )
    results["machine"]["loadavg_at_end"] = C.machine()["loadavg"]

    rows = []
    for n, r in results["sizes"].items():
        b = r["breakdown_p50_ms"]
        rows.append(
            [
                C.size_label(int(n)),
                r["recall_ms"]["p50"],
                r["recall_ms"]["p95"],
                r["recall_ms"]["p99"],
                r["floor_bare_ms"]["p50"],
                f"{r['ratio_p50_to_floor']:.2f}x",
                b.get("embed", float("nan")),
                b.get("search", float("nan")),
                b.get("server", float("nan")),
                b.get("protocol", float("nan")),
                r["ping_ms"]["p50"],
                r["server_rss_mb"].get("rss", float("nan")),
            ]
        )
    print(f"recall over MCP stdio, {len(queries)} real queries x {args.repeat}, limit {args.limit} (ms)")
    print(
        C.table(
            [
                "memories",
                "p50",
                "p95",
                "p99",
                "floor p50",
                "p50/floor",
                "embed",
                "search",
                "server",
                "protocol",
                "ping",
                "server RSS MB",
            ],
            rows,
        )
    )
    C.write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
