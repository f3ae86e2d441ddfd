"""End-to-end recall latency over MCP stdio, against the bare embedding floor of the same queries.

    uv run python -m benchmarks.recall_mcp                      # 1k, 10k, 100k memories
    uv run python -m benchmarks.recall_mcp --with-1m            # ... and 1M (builds a 1M store once: minutes)
    uv run python -m benchmarks.recall_mcp --quick              # smoke run (a 300-memory store, 20 queries)
    uv run python -m benchmarks.recall_mcp --sizes 10000 --queries 100 --repeat-queries   # + repeated queries
    uv run python -m benchmarks.recall_mcp --sizes 100000 --old OLD   # A/B: that checkout vs this

For each store size, an MCP SDK client spawns `python -m memserver serve` over stdio (as a desktop client does)
and times `tools/call recall` client-side for the real queries of benchmarks/data/quality.json (p50/p95/p99).
The server runs with MEMSERVER_TIMING=1, so each result carries `_meta["memserver/timing"]`; from it the time of
one call is split into:
  - embed     the query embedding inside the server (Embedder.embed_query);
  - search    the rest of the store call (filters, HNSW, hits);
  - server    argument validation, the worker-thread hop, building the result (handler minus store call);
  - protocol  JSON-RPC framing, pydantic (de)serialisation on both sides, the stdio pipes (client minus handler);
              for scale, MCP `ping`s (the cheapest request there is) are timed after the recalls.
The same queries are embedded in this process by the bare onnxruntime pipeline of benchmarks/embed.py (tokenise,
run, pool, normalise; same model file, thread count and session options as the server): the floor. The headline is
the ratio recall p50 / floor p50. Floor and recalls alternate in blocks of BLOCK queries, so that load from other
processes hits both alike while neither side's onnxruntime threads (which spin ~40 ms after each run) are busy
while the other is timed; queries are GAP_S apart. Stores are filled by the bulk-load path described in
benchmarks/_common.py.
The server's query-embedding cache is off (MEMSERVER_QUERY_CACHE=0), so every timed recall embeds its query, as
a first-time question does. With --repeat-queries, one more server per size runs with the cache on (its default
size), is asked every query once untimed, then timed by the raw client on the same queries again: the cost of a
question an agent repeats (no model run; what remains is the search, the handler and the protocol).
With --old PATH (another checkout, e.g. `git worktree add --detach OLD main`), each size is
measured side by side instead: a server of that checkout ("old") and one of this ("new") on the same cached store
(stores are not built then), first both with an SDK client, then both with a raw client; each block of queries is
timed on the floor, then on old and new in alternating order, so the load hits all three alike. Per side: p50 over
the floor, and the median of each part: embed, search, server (handler minus the store call) and outside the
handler (the client's latency minus the handler: the protocol on both sides, the pipes, the wake-ups).
Also per side: the server's minor page faults per recall (/proc/PID/stat) and the search part's median over the
first and the last third of the calls (does a fresh server converge?).
Prints a table and writes benchmarks/results/recall_mcp.json (with --old: recall_mcp-ab.json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from benchmarks import _common as C

# onnxruntime's intra-op threads keep spinning for ~40 ms after each run (one core busy; measured: CPU time of an
# idle process after one query). The floor and the MCP calls are therefore measured in alternating blocks, each
# side idle while the other is timed, and consecutive queries of a block are GAP_S apart, longer than the spin (a
# client asks a memory server one question at a time, seconds apart, not in a tight loop).
GAP_S = 0.05
SETTLE_S = 0.2  # between blocks: the other side's threads have stopped spinning
BLOCK = 20  # queries per block
NO_QUERY_CACHE = {"MEMSERVER_QUERY_CACHE": "0"}  # every timed recall runs the model (warm-up queries included)


async def measure(root: Path, queries: list[str], bare: Any, limit: int, repeat: int, mode: str) -> dict[str, Any]:
    lat: list[float] = []
    floor: list[float] = []
    ping: list[float] = []
    parts: dict[str, list[float]] = {"embed": [], "search": [], "server": [], "protocol": []}
    args = {"limit": limit} if mode == "hybrid" else {"limit": limit, "mode": mode}
    t_spawn = time.perf_counter()
    async with C.mcp_client(root, extra_env=NO_QUERY_CACHE) as (client, pid):
        init_s = time.perf_counter() - t_spawn
        t0 = time.perf_counter()
        first = await client.call_tool("recall", {"query": queries[0], **args})
        first_ms = (time.perf_counter() - t0) * 1000
        if first.is_error:
            raise RuntimeError(f"recall failed: {first.content}")
        for q in queries[:10]:  # warm-up: thread pools, allocator arenas, page cache of the index
            await client.call_tool("recall", {"query": q, **args})
            bare.embed([q])
        for _ in range(repeat):
            for start in range(0, len(queries), BLOCK):
                block = queries[start : start + BLOCK]
                await anyio.sleep(SETTLE_S)  # the server's threads stop spinning
                for q in block:
                    t0 = time.perf_counter()
                    bare.embed([q])
                    floor.append((time.perf_counter() - t0) * 1000)
                    await anyio.sleep(GAP_S)
                await anyio.sleep(SETTLE_S)  # ... and this process's
                for q in block:
                    t0 = time.perf_counter()
                    result = await client.call_tool("recall", {"query": q, **args})
                    ms = (time.perf_counter() - t0) * 1000
                    if result.is_error:
                        raise RuntimeError(f"recall failed: {result.content}")
                    lat.append(ms)
                    t = C.timing_meta(result)
                    if t:
                        parts["embed"].append(t["embed_ms"])
                        parts["search"].append(t["work_ms"] - t["embed_ms"])
                        parts["server"].append(t["handler_ms"] - t["work_ms"])
                        parts["protocol"].append(ms - t["handler_ms"])
                    await anyio.sleep(GAP_S)
        for _ in range(100):  # for scale: an MCP `ping`, the cheapest request there is, paced like the recalls
            t0 = time.perf_counter()
            await client.send_ping()
            ping.append((time.perf_counter() - t0) * 1000)
            await anyio.sleep(GAP_S)
        rss = C.rss_mb(pid) if pid else {}
        hits = len(result.structured_content["results"])  # type: ignore[index]
    recall = C.summary(lat)
    floor_s = C.summary(floor)
    return {
        "mode": mode,
        "spawn_to_initialize_s": round(init_s, 3),
        "first_recall_ms": round(first_ms, 1),
        "recall_ms": recall,
        "floor_bare_ms": floor_s,
        "ping_ms": C.summary(ping),
        "breakdown_p50_ms": {k: round(statistics.median(v), 3) for k, v in parts.items() if v},
        "ratio_p50_to_floor": round(recall["p50"] / floor_s["p50"], 3),
        "server_rss_mb": rss,
        "hits_per_recall": hits,
    }


class RawClient:
    """A minimal MCP client over stdio without the SDK: JSON-RPC lines written and read with blocking calls.

    It shows what the server costs end to end: the SDK client's own work (pydantic models, output-schema validation,
    its task and stream hand-offs) is not in its timings.
    """

    def __init__(self, root: Path, extra_env: dict[str, str] | None = None, tree: Path = C.ROOT) -> None:
        params = C.server_params(root, extra_env=extra_env, tree=tree)
        self.proc = subprocess.Popen(
            [params.command, *params.args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=params.env,
            cwd=params.cwd,
        )
        self.next_id = 0
        self.request(
            "initialize",
            {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
        )
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        assert self.proc.stdout is not None
        while True:
            message = json.loads(self.proc.stdout.readline())
            if message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method} failed: {message['error']}")
                return message["result"]

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def measure_raw(
    root: Path, queries: list[str], bare: Any, limit: int, repeat: int, mode: str, repeated: bool = False
) -> dict[str, Any]:
    """measure(), with RawClient in place of the SDK client (same blocks, gaps and floor).

    repeated: the server keeps its query cache and is asked every query once before the timed passes, so each timed
    recall repeats a question (a cache hit); otherwise the cache is off.
    """
    lat: list[float] = []
    floor: list[float] = []
    handler: list[float] = []
    embed: list[float] = []
    args = {"limit": limit} if mode == "hybrid" else {"limit": limit, "mode": mode}
    client = RawClient(root, extra_env=None if repeated else NO_QUERY_CACHE)
    try:
        for q in queries if repeated else queries[:10]:
            client.request("tools/call", {"name": "recall", "arguments": {"query": q, **args}})
            bare.embed([q])
        for _ in range(repeat):
            for start in range(0, len(queries), BLOCK):
                block = queries[start : start + BLOCK]
                time.sleep(SETTLE_S)
                for q in block:
                    t0 = time.perf_counter()
                    bare.embed([q])
                    floor.append((time.perf_counter() - t0) * 1000)
                    time.sleep(GAP_S)
                time.sleep(SETTLE_S)
                for q in block:
                    t0 = time.perf_counter()
                    result = client.request("tools/call", {"name": "recall", "arguments": {"query": q, **args}})
                    lat.append((time.perf_counter() - t0) * 1000)
                    if result.get("isError"):
                        raise RuntimeError(f"recall failed: {result['content']}")
                    handler.append(result["_meta"]["memserver/timing"]["handler_ms"])
                    embed.append(result["_meta"]["memserver/timing"]["embed_ms"])
                    time.sleep(GAP_S)
    finally:
        client.close()
    recall = C.summary(lat)
    floor_s = C.summary(floor)
    return {
        "mode": mode,
        "recall_ms": recall,
        "floor_bare_ms": floor_s,
        "outside_handler_p50_ms": round(statistics.median(a - b for a, b in zip(lat, handler, strict=True)), 3),
        "embed_p50_ms": round(statistics.median(embed), 3),
        "ratio_p50_to_floor": round(recall["p50"] / floor_s["p50"], 3),
        "query_cache": "on, every query asked once before" if repeated else "off",
    }


# --- --old: two checkouts side by side -----------------------------------------------------------------------------

Call = Callable[[str, str], Awaitable[tuple[float, dict[str, float]]]]  # (side, query) -> (ms, timing meta)


def minor_faults(pid: int | None) -> int:
    """The minor page faults process `pid` has taken so far (/proc/PID/stat, field 10); 0 where unknown."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return int(f.read().rsplit(")", 1)[1].split()[7])
    except (OSError, ValueError, IndexError):
        return 0


class Side:
    """One server's timings in an A/B run: client latency, the parts from `_meta["memserver/timing"]` and the
    server's minor page faults during the call (`faults`, set by the caller)."""

    def __init__(self) -> None:
        self.lat: list[float] = []
        self.parts: dict[str, list[float]] = {
            "embed": [],
            "search": [],
            "server": [],
            "handler": [],
            "outside": [],
            "faults": [],
        }

    def add(self, ms: float, t: dict[str, float]) -> None:
        self.lat.append(ms)
        for name, value in (
            ("embed", t["embed_ms"]),
            ("search", t["work_ms"] - t["embed_ms"]),
            ("server", t["handler_ms"] - t["work_ms"]),
            ("handler", t["handler_ms"]),
            ("outside", ms - t["handler_ms"]),
            ("faults", t.get("faults", 0.0)),
        ):
            self.parts[name].append(value)

    def summary(self, floor_p50: float) -> dict[str, Any]:
        recall = C.summary(self.lat)
        search = self.parts["search"]
        third = max(1, len(search) // 3)
        return {
            "recall_ms": recall,
            "ratio_p50_to_floor": round(recall["p50"] / floor_p50, 3),
            "parts_p50_ms": {k: round(statistics.median(v), 3) for k, v in self.parts.items()},
            # does a fresh server converge? the search part's median over the first and the last third of calls
            "search_p50_first_last_third_ms": [
                round(statistics.median(search[:third]), 3),
                round(statistics.median(search[-third:]), 3),
            ],
            "faults_p50_first_last_third": [
                statistics.median(self.parts["faults"][:third]),
                statistics.median(self.parts["faults"][-third:]),
            ],
        }


async def alternate(call: Call, names: list[str], queries: list[str], bare: Any, repeat: int) -> dict[str, Any]:
    """Blocks of BLOCK queries: the floor, then each side (their order swapped every block)."""
    sides = {name: Side() for name in names}
    floor: list[float] = []
    for q in queries[:10]:  # warm-up
        for name in names:
            await call(name, q)
        bare.embed([q])
    blocks = [queries[i : i + BLOCK] for _ in range(repeat) for i in range(0, len(queries), BLOCK)]
    for b, block in enumerate(blocks):
        await anyio.sleep(SETTLE_S)
        for q in block:
            t0 = time.perf_counter()
            bare.embed([q])
            floor.append((time.perf_counter() - t0) * 1000)
            await anyio.sleep(GAP_S)
        for name in names if b % 2 == 0 else names[::-1]:
            await anyio.sleep(SETTLE_S)
            for q in block:
                ms, t = await call(name, q)
                sides[name].add(ms, t)
                await anyio.sleep(GAP_S)
    floor_s = C.summary(floor)
    out: dict[str, Any] = {"floor_bare_ms": floor_s}
    out.update({name: side.summary(floor_s["p50"]) for name, side in sides.items()})
    return out


async def measure_ab(
    root: Path, queries: list[str], bare: Any, limit: int, repeat: int, mode: str, trees: dict[str, Path]
) -> dict[str, Any]:
    """The SDK client, then the raw client, each against a server of every checkout in `trees` (same store)."""
    args = {"limit": limit} if mode == "hybrid" else {"limit": limit, "mode": mode}
    names = list(trees)
    out: dict[str, Any] = {"mode": mode}
    async with contextlib.AsyncExitStack() as stack:
        sdk = {
            n: await stack.enter_async_context(C.mcp_client(root, extra_env=NO_QUERY_CACHE, tree=t))
            for n, t in trees.items()
        }

        async def sdk_call(name: str, q: str) -> tuple[float, dict[str, float]]:
            client, pid = sdk[name]
            f0 = minor_faults(pid)
            t0 = time.perf_counter()
            result = await client.call_tool("recall", {"query": q, **args})
            ms = (time.perf_counter() - t0) * 1000
            if result.is_error:
                raise RuntimeError(f"recall failed: {result.content}")
            return ms, {**C.timing_meta(result), "faults": minor_faults(pid) - f0}

        out["sdk_client"] = await alternate(sdk_call, names, queries, bare, repeat)
    raw = {n: RawClient(root, extra_env=NO_QUERY_CACHE, tree=t) for n, t in trees.items()}
    try:

        async def raw_call(name: str, q: str) -> tuple[float, dict[str, float]]:
            pid = raw[name].proc.pid
            f0 = minor_faults(pid)
            t0 = time.perf_counter()
            result = raw[name].request("tools/call", {"name": "recall", "arguments": {"query": q, **args}})
            ms = (time.perf_counter() - t0) * 1000
            if result.get("isError"):
                raise RuntimeError(f"recall failed: {result['content']}")
            return ms, {**result["_meta"]["memserver/timing"], "faults": minor_faults(pid) - f0}

        out["raw_client"] = await alternate(raw_call, names, queries, bare, repeat)
    finally:
        for client in raw.values():
            client.close()
    return out


def print_ab(results: dict[str, Any]) -> None:
    headers = [
        "memories",
        "client",
        "side",
        "p50",
        "p95",
        "floor p50",
        "p50/floor",
        "embed",
        "search",
        "server",
        "handler",
        "outside handler",
        "faults",
        "search, 1st / last third",
    ]
    rows = []
    for n, r in results["sizes"].items():
        for client in ("raw_client", "sdk_client"):
            w = r[client]
            for side in ("old", "new"):
                s, parts = w[side], w[side]["parts_p50_ms"]
                rows.append(
                    [
                        C.size_label(int(n.split("/")[0])),
                        client.split("_")[0],
                        side,
                        s["recall_ms"]["p50"],
                        s["recall_ms"]["p95"],
                        w["floor_bare_ms"]["p50"],
                        f"{s['ratio_p50_to_floor']:.2f}x",
                        parts["embed"],
                        parts["search"],
                        parts["server"],
                        parts["handler"],
                        parts["outside"],
                        parts["faults"],
                        " / ".join(str(x) for x in s["search_p50_first_last_third_ms"]),
                    ]
                )
    print("recall over MCP stdio, old vs new checkout side by side (ms; parts are per-call medians)")
    print(C.table(headers, rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000], help="store sizes")
    parser.add_argument("--with-1m", action="store_true", help="add the 1,000,000-memory store")
    parser.add_argument("--queries", type=int, default=339, help="distinct real queries (default: all 339)")
    parser.add_argument("--repeat", type=int, default=1, help="passes over the queries per size (default 1)")
    parser.add_argument("--limit", type=int, default=5, help="recall limit (default 5, the tool's default)")
    parser.add_argument(
        "--modes",
        nargs="+",
        choices=["hybrid", "semantic", "keyword"],
        default=["hybrid"],
        help="recall modes to time, one server per mode and size (default: hybrid, the tool's default)",
    )
    parser.add_argument(
        "--no-raw", action="store_true", help="skip the second pass with a raw JSON-RPC client (no SDK client)"
    )
    parser.add_argument(
        "--repeat-queries",
        action="store_true",
        help="also time repeated queries (raw client, the server's query cache on, each query asked once before)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: one 300-memory store, 20 queries")
    parser.add_argument(
        "--fields", action="store_true", help="stores with conversation fields (session, speaker, occurred_at)"
    )
    parser.add_argument("--cache", default=None, help="where built stores are kept (default /tmp/memserver-bench)")
    parser.add_argument("--old", default=None, help="another checkout: time its server against this one's (A/B)")
    parser.add_argument("--out", default=None, help="default results/recall_mcp.json (--old: recall_mcp-ab.json)")
    args = parser.parse_args(argv)
    sizes = [300] if args.quick else list(args.sizes) + ([1_000_000] if args.with_1m else [])
    nq = 20 if args.quick else args.queries

    from benchmarks.embed import BarePipeline

    warnings.filterwarnings("ignore", message="ping is removed")  # ping still works in the legacy mode used here

    host = C.machine()
    cache = C.cache_dir(args.cache)
    from memserver.embedding.embedder import default_threads
    from memserver.embedding.sources import resolve_model

    files = resolve_model(None)
    threads = default_threads()
    bare = BarePipeline(files.model, files.tokenizer, threads)
    queries = C.corpus()[1][:nq]
    results: dict[str, Any] = {
        "machine": host,
        "settings": {
            "queries": len(queries),
            "repeat": args.repeat,
            "limit": args.limit,
            "fields": args.fields,
            "threads": threads,
            "gap_s": GAP_S,
            "block": BLOCK,
        },
        "sizes": {},
    }
    if args.old:
        trees = {"old": Path(args.old).resolve(), "new": C.ROOT}
        results["settings"]["old"] = str(trees["old"])
        for n in sizes:
            root = C.ensure_store(cache, n, quick=True) if args.quick else C.store_root(cache, n, fields=args.fields)
            if not (root / "BUILT").exists():  # never build (or rebuild) a large store here: another may be at it
                C.log(f"skipping {n:,}: no built store at {root}")
                continue
            for mode in args.modes:
                C.log(f"recall over MCP at {n:,} memories, mode {mode}, old vs new ...")
                r = anyio.run(measure_ab, root, queries, bare, args.limit, args.repeat, mode, trees)
                results["sizes"][f"{n}" if mode == "hybrid" else f"{n}/{mode}"] = r
        results["machine"]["loadavg_at_end"] = C.machine()["loadavg"]
        print_ab(results)
        C.write_json(args.out or str(C.RESULTS / "recall_mcp-ab.json"), results)
        return 0
    for n in sizes:
        root = C.ensure_store(cache, n, quick=args.quick, fields=args.fields)
        for mode in args.modes:
            C.log(f"recall over MCP at {n:,} memories, mode {mode} ...")
            r = anyio.run(measure, root, queries, bare, args.limit, args.repeat, mode)
            r["store_build"] = C.build_info(root)
            if not args.no_raw:
                r["raw_client"] = measure_raw(root, queries, bare, args.limit, args.repeat, mode)
            if args.repeat_queries:
                r["raw_client_repeated"] = measure_raw(root, queries, bare, args.limit, args.repeat, mode, True)
            results["sizes"][f"{n}" if mode == "hybrid" else f"{n}/{mode}"] = r
            C.log(
                f"  p50 {r['recall_ms']['p50']} ms, floor {r['floor_bare_ms']['p50']} ms,"
                f" ratio {r['ratio_p50_to_floor']}"
                + (f"; raw client p50 {r['raw_client']['recall_ms']['p50']} ms" if "raw_client" in r else "")
            )
    results["machine"]["loadavg_at_end"] = C.machine()["loadavg"]

    rows = []
    for n, r in results["sizes"].items():
        b = r["breakdown_p50_ms"]
        rows.append(
            [
                C.size_label(int(n.split("/")[0])),
                r["mode"],
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
                "mode",
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
    raw_rows = [
        [
            C.size_label(int(n.split("/")[0])),
            r["mode"],
            w["recall_ms"]["p50"],
            w["recall_ms"]["p95"],
            w["floor_bare_ms"]["p50"],
            f"{w['ratio_p50_to_floor']:.2f}x",
            w["outside_handler_p50_ms"],
            r["recall_ms"]["p50"],
        ]
        for n, r in results["sizes"].items()
        if (w := r.get("raw_client"))
    ]
    if raw_rows:
        print("the same server and queries, timed by a raw JSON-RPC client (no SDK client) (ms)")
        headers = ["memories", "mode", "p50", "p95", "floor p50", "p50/floor", "outside handler", "SDK client p50"]
        print(C.table(headers, raw_rows))
    repeated_rows = [
        [
            C.size_label(int(n.split("/")[0])),
            r["mode"],
            w["recall_ms"]["p50"],
            w["recall_ms"]["p95"],
            w["embed_p50_ms"],
            w["floor_bare_ms"]["p50"],
            f"{w['ratio_p50_to_floor']:.2f}x",
            r["raw_client"]["recall_ms"]["p50"] if "raw_client" in r else float("nan"),
        ]
        for n, r in results["sizes"].items()
        if (w := r.get("raw_client_repeated"))
    ]
    if repeated_rows:
        print("repeated queries (query cache on, each asked once before), raw JSON-RPC client (ms)")
        headers = ["memories", "mode", "p50", "p95", "embed p50", "floor p50", "p50/floor", "first-time p50"]
        print(C.table(headers, repeated_rows))
    C.write_json(args.out or str(C.RESULTS / "recall_mcp.json"), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
