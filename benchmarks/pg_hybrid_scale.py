"""Hybrid search in process at 100k memories: the local store, PostgreSQL, and PostgreSQL as another revision's code
(by default main's) has it, in one run on the same data, queries and query vectors (issue 25, item 2).

The local side is the cached store of benchmarks/_common.py (`ensure_store`: 100k synthetic memories, one tenant);
PostgreSQL (throwaway 18.6 + pgvector, tests/support/pg_cluster.py, shared_buffers 1 GB) gets the same records by
the bulk-load recipe of docs/scale-out.md (import without the HNSW index, CREATE INDEX, VACUUM ANALYZE), as
benchmarks/postgres.py's `mcp` section does. Each of the real queries of benchmarks/data/quality.json is searched
`search(text, mode="hybrid", limit=k, query_vector=v)` (v: the Embedder's vector, embedded once, cached), k 5 and
10; the passes alternate local, this tree, the baselines (pg_hybrid.py's child mechanism: `git archive <rev>
memserver` in a child process, on the same database: neither revision changes the schema).

Then, this tree only, the split of a search (`--split` queries, limit 5): wall time of the context statement's round
trip, of decoding its rows (ranking.context_rankings less the round trip), of the ranking (hybrid.hits: the fusion
and the hits' Memory objects), and the rest; and EXPLAIN (ANALYZE, FORMAT JSON) of the same statement with the same
settings: planning, execution and each materialised CTE / index scan (median over the queries, ms). The round trip
less execution (and planning) is the wire: sending, the server's output, the client's receiving.

With `--floor N`, the floor under any hybrid statement, N queries, the passes alternating query by query: the local
store's hybrid search (limit 10), this tree's, and alone through the same pool and settings: `SELECT 1` (a round
trip), the HNSW top 50 (the vector side at ef_search 256, nothing else) and the BM25 top 100 (the keyword side's
depth, nothing else); then EXPLAIN ANALYZE of the last two (the server's time alone). A hybrid statement does both
walks, so their times bound it from below whatever its SQL.

And the vector side's recall at the ef_search values `--ef` (semantic, limit 50 = the hybrid pool's depth, against
the exact top 50 of the same float32 vectors), beside the local store's (hnswlib, ef 256).

    uv run python -m benchmarks.pg_hybrid_scale                      # writes benchmarks/results/pg_hybrid_scale.json
    uv run python -m benchmarks.pg_hybrid_scale --baseline ''        # without a baseline
    uv run python -m benchmarks.pg_hybrid_scale --ef 400 256                 # ... and the vector side's recall
    uv run python -m benchmarks.pg_hybrid_scale --baseline '' --repeat 1 --split 0 --floor 367   # the floor
    uv run python -m benchmarks.pg_hybrid_scale --quick                      # smoke run: 300 memories
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _common as C

RESULTS = C.RESULTS / "pg_hybrid_scale.json"
LIMITS = (5, 10)


class NoModel:
    """An embedder that is never asked: every vector is given."""

    model_name, dim = "sentence-transformers/all-MiniLM-L6-v2", 384


def records(n: int, cache: Path, quick: bool) -> Iterator[dict[str, Any]]:
    """The records of the cached local store of `n` (_common.ensure_store: synthetic, the same base vectors)."""
    base, _ = C.corpus()
    base = base[:128] if quick else base
    yield from C.synthetic(n, base, C.base_vectors(cache, base))


def load(url: str, n: int, cache: Path, quick: bool) -> dict[str, float]:
    """The bulk-load recipe into the empty database at `url`: import without the HNSW index, build it, analyze."""
    import psycopg

    from benchmarks.postgres import build_hnsw
    from memserver.postgres.backend import PostgresBackend

    out: dict[str, float] = {}
    with PostgresBackend(url, tenant=C.COLLECTION, embedder=NoModel()) as pg:  # type: ignore[arg-type]
        with psycopg.connect(url, autocommit=True) as owner:
            owner.execute("DROP INDEX memserver.memories_hnsw")
        t0 = time.perf_counter()
        pg.import_(records(n, cache, quick))
        out["import_s"] = round(time.perf_counter() - t0, 1)
    out["index_build_s"] = build_hnsw(url)
    return out


def one_pass(store: Any, queries: list[str], vecs: np.ndarray) -> dict[str, list[float]]:
    """Milliseconds of each query's hybrid search at each limit (after one search, to warm up)."""
    times: dict[str, list[float]] = {}
    for limit in LIMITS:
        store.search(queries[0], limit=limit, mode="hybrid", query_vector=vecs[0])
        ms = times[f"limit {limit}"] = []
        for text, v in zip(queries, vecs, strict=True):
            t0 = time.perf_counter()
            store.search(text, limit=limit, mode="hybrid", query_vector=v)
            ms.append((time.perf_counter() - t0) * 1000)
    return times


def child_pass(url: str, queries: list[str], vectors: list[list[float]]) -> dict[str, list[float]]:
    """The baseline child's pass (pg_hybrid.child, step "scale"): its PostgresBackend on the loaded database."""
    from memserver.postgres.backend import PostgresBackend

    with PostgresBackend(url, tenant=C.COLLECTION, embedder=NoModel()) as pg:  # type: ignore[arg-type]
        return one_pass(pg, queries, np.asarray(vectors, np.float32))


def _timed(spent: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += (time.perf_counter() - t0) * 1000

    return wrapper


def _plan_times(node: dict[str, Any], out: dict[str, float]) -> None:
    """Each materialised CTE's and each index scan's actual time in a plan tree (loops included), ms."""
    total = float(node.get("Actual Total Time", 0.0)) * float(node.get("Actual Loops", 1) or 1)
    if str(node.get("Subplan Name", "")).startswith("CTE "):
        out[node["Subplan Name"]] += total
    if node.get("Index Name"):
        out[f"{node['Node Type']} {node['Index Name']}"] += total
    for child in node.get("Plans", []):
        _plan_times(child, out)


def split(url: str, queries: list[str], vecs: np.ndarray, limit: int, **filters: Any) -> dict[str, Any]:
    """Where a search's time goes, this tree's PostgresBackend (see the module's docstring); medians, ms."""
    from memserver.postgres import hybrid, ranking
    from memserver.postgres.backend import PostgresBackend
    from memserver.postgres.pool import Database

    spent: dict[str, float] = defaultdict(float)
    captured: list[tuple[Any, str, Any, Any]] = []
    run = Database.run

    def run_timed(self: Any, tenant: str, statements: Any, **kw: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return run(self, tenant, statements, **kw)
        finally:
            spent["round trip"] += (time.perf_counter() - t0) * 1000
            if (kw.get("settings") or {}).get("plan_cache_mode"):
                captured.append((self, statements[0][0], statements[0][1], kw["settings"]))

    patched = [(Database, "run", run), (ranking, "context_rankings", ranking.context_rankings)]
    patched.append((hybrid, "hits", hybrid.hits))
    per: dict[str, list[float]] = defaultdict(list)
    explained: dict[str, list[float]] = defaultdict(list)
    try:
        Database.run = run_timed  # type: ignore[method-assign]
        ranking.context_rankings = _timed(spent, "statement + decoding", ranking.context_rankings)
        hybrid.hits = _timed(spent, "ranking (hybrid.hits)", hybrid.hits)
        with PostgresBackend(url, tenant=C.COLLECTION, embedder=NoModel()) as pg:  # type: ignore[arg-type]
            for text, v in zip(queries[:10], vecs[:10], strict=True):  # warm: prepared statements, pages
                pg.search(text, limit=limit, mode="hybrid", query_vector=v, **filters)
            for text, v in zip(queries, vecs, strict=True):
                spent.clear()
                captured.clear()
                t0 = time.perf_counter()
                pg.search(text, limit=limit, mode="hybrid", query_vector=v, **filters)
                total = (time.perf_counter() - t0) * 1000
                per["search"].append(total)
                per["round trip"].append(spent["round trip"])
                per["decoding"].append(spent["statement + decoding"] - spent["round trip"])
                per["ranking (hybrid.hits)"].append(spent["ranking (hybrid.hits)"])
                per["rest"].append(total - spent["statement + decoding"] - spent["ranking (hybrid.hits)"])
                if not captured:
                    continue
                db, sql, params, settings = captured[0]
                plan_sql = "EXPLAIN (ANALYZE, FORMAT JSON) " + sql
                doc = run(db, C.COLLECTION, [(plan_sql, params)], settings=settings)[0].fetchone()[0]
                top = doc[0]
                explained["planning"].append(float(top["Planning Time"]))
                explained["execution"].append(float(top["Execution Time"]))
                parts: dict[str, float] = defaultdict(float)
                _plan_times(top["Plan"], parts)
                for name, ms in parts.items():
                    explained[name].append(ms)
    finally:
        for owner, attr, original in patched:
            setattr(owner, attr, original)
    med = {k: round(statistics.median(v), 3) for k, v in per.items()}
    plan = {k: round(statistics.median(v), 3) for k, v in explained.items() if len(v) >= len(queries) // 2}
    wire = statistics.median(
        [rt - ex for rt, ex in zip(per["round trip"], explained["execution"], strict=False)] or [0.0]
    )
    return {"queries": len(queries), "limit": limit, "client": med, "explain": plan, "wire_ms": round(wire, 3)}


def floor(url: str, root: Path, queries: list[str], vecs: np.ndarray) -> dict[str, Any]:
    """The floor under a hybrid search on PostgreSQL (see the module's docstring): p50 / p95 of each, ms."""
    from memserver.contract.requests import SearchFilter
    from memserver.embedding.embedder import Embedder
    from memserver.local.store import MemoryStore
    from memserver.postgres import search
    from memserver.postgres.backend import PostgresBackend, open_database
    from memserver.postgres.ranking import GENERIC
    from memserver.postgres.rows import CURRENT
    from memserver.postgres.terms import BM25_SCORES, query_terms

    where, base = search.filter_sql(SearchFilter())
    statements = {
        "SELECT 1 (a round trip)": "SELECT 1",
        "HNSW top 50 alone": f"SELECT m.seq, m.embedding <=> %(q)b AS dist FROM memserver.memories m WHERE {where} "
        "ORDER BY m.embedding <=> %(q)b LIMIT 50",
        "BM25 top 100 alone": f"SELECT seq, bm25 FROM ({BM25_SCORES}) s ORDER BY bm25 DESC, seq LIMIT 100",
    }
    assert CURRENT in where  # the HNSW index's predicate: the partial index serves the statement
    settings = {
        "hnsw.ef_search": str(search.ef_search(50)),
        "hnsw.iterative_scan": "strict_order",
        "plan_cache_mode": GENERIC,
    }
    ms: dict[str, list[float]] = defaultdict(list)
    server: dict[str, list[float]] = defaultdict(list)
    db = open_database(url, NoModel.model_name, NoModel.dim, migrate=False)
    try:
        with (
            MemoryStore(root, C.COLLECTION, embedder=Embedder()) as local,
            PostgresBackend(url, tenant=C.COLLECTION, embedder=NoModel()) as pg,  # type: ignore[arg-type]
        ):
            for warm in (True, False):  # the first pass warms pages and prepared statements, untimed
                for text, v in zip(queries, vecs, strict=True):
                    params = base | {"tenant": C.COLLECTION, "q": v, "terms": query_terms(text)}
                    for name, store in (("local hybrid limit 10", local), ("PostgreSQL hybrid limit 10", pg)):
                        t0 = time.perf_counter()
                        store.search(text, limit=10, mode="hybrid", query_vector=v)
                        ms[name].append((time.perf_counter() - t0) * 1000)
                    for name, sql in statements.items():
                        t0 = time.perf_counter()
                        db.run(C.COLLECTION, [(sql, params)], settings=settings)[0].fetchall()
                        ms[name].append((time.perf_counter() - t0) * 1000)
                    if warm:
                        continue
                    for name, sql in list(statements.items())[1:]:
                        plan_sql = "EXPLAIN (ANALYZE, FORMAT JSON) " + sql
                        doc = db.run(C.COLLECTION, [(plan_sql, params)], settings=settings)[0].fetchone()[0]
                        server[f"{name}: execution (EXPLAIN ANALYZE)"].append(float(doc[0]["Execution Time"]))
                if warm:
                    ms.clear()
    finally:
        db.close()
    names = list(statements)
    ms["both walks, one round trip (HNSW + BM25 - SELECT 1, per query)"] = [
        h + k - r for r, h, k in zip(*(ms[n] for n in names), strict=True)
    ]
    out: dict[str, dict[str, Any]] = {
        name: {"p50": round(C.pct(v, 50), 3), "p95": round(C.pct(v, 95), 3)} for name, v in (ms | server).items()
    }
    local50 = out["local hybrid limit 10"]["p50"]
    out["3x local hybrid p50"] = {"p50": round(3 * local50, 3), "p95": ""}
    return {"queries": len(queries), "ms": out}


def ef_recall(
    url: str, root: Path, rows: np.ndarray, queries: list[str], vecs: np.ndarray, efs: list[int]
) -> dict[str, Any]:
    """Recall@50 and @10 of the vector side (semantic, limit 50) against the exact top 50: PostgreSQL at each ef,
    the local store at its own; and PostgreSQL's p50 at each ef."""
    from memserver.embedding.embedder import Embedder
    from memserver.local.store import MemoryStore
    from memserver.postgres import search
    from memserver.postgres.backend import PostgresBackend

    exact = [np.argsort(-(rows @ q), kind="stable")[:50] for q in vecs]

    def row(content: str) -> int:  # content ends with "(#i)": the row number of the synthetic record
        return int(content.rsplit("(#", 1)[1].rstrip(")"))

    def recall(found: list[list[int]], k: int) -> float:
        return round(
            statistics.fmean(len(set(f[:k]) & set(e[:k].tolist())) / k for f, e in zip(found, exact, strict=True)), 4
        )

    out: dict[str, Any] = {}
    with MemoryStore(root, C.COLLECTION, embedder=Embedder()) as local:
        found = [
            [row(h.memory.content) for h in local.search(t, limit=50, mode="semantic", query_vector=v)]
            for t, v in zip(queries, vecs, strict=True)
        ]
        out["local (ef 256)"] = {"recall@50": recall(found, 50), "recall@10": recall(found, 10), "p50": ""}
    floor = search.EF_SEARCH
    try:
        with PostgresBackend(url, tenant=C.COLLECTION, embedder=NoModel()) as pg:  # type: ignore[arg-type]
            for ef in efs:
                search.EF_SEARCH = ef
                found, ms = [], []
                for t, v in zip(queries, vecs, strict=True):
                    t0 = time.perf_counter()
                    hits = pg.search(t, limit=50, mode="semantic", query_vector=v)
                    ms.append((time.perf_counter() - t0) * 1000)
                    found.append([row(h.memory.content) for h in hits])
                out[f"postgresql ef {ef}"] = {
                    "recall@50": recall(found, 50),
                    "recall@10": recall(found, 10),
                    "semantic limit 50 p50_ms": round(C.pct(ms, 50), 2),
                }
    finally:
        search.EF_SEARCH = floor
    return out


def main(argv: Sequence[str] | None = None) -> int:
    from benchmarks.hybrid_profile import query_vectors
    from benchmarks.pg_hybrid import Baseline, engine_table, figures

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000, help="memories (default 100000: the cached store)")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the queries (default 3)")
    parser.add_argument("--baseline", default="main", help="revisions whose PostgresBackend runs beside, a,b ('' none)")
    parser.add_argument("--split", type=int, default=100, help="queries of the split (0: none)")
    parser.add_argument("--ef", type=int, nargs="*", default=[], help="ef_search values of the recall study")
    parser.add_argument("--floor", type=int, default=0, help="queries of the floor study (0: none)")
    parser.add_argument("--url", help="a database this benchmark loaded before (skips the cluster and the load)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 300 memories, 20 queries, 1 pass")
    parser.add_argument("--cache", default=None, help="where built stores are kept (default /tmp/memserver-bench)")
    parser.add_argument("--out", default=str(RESULTS), help="result file")
    args = parser.parse_args(argv)

    from memserver.embedding.embedder import Embedder
    from memserver.local.store import MemoryStore
    from memserver.postgres.backend import PostgresBackend
    from tests.support.pg_cluster import Cluster

    cache = C.cache_dir(args.cache)
    queries = C.corpus()[1][: 20 if args.quick else None]
    vecs = query_vectors(queries, cache)
    if args.quick:
        args.size, args.repeat, args.split, args.ef = 300, 1, min(args.split, 10), args.ef or [40]
        args.floor = min(args.floor, 10)
    root = C.ensure_store(cache, args.size, quick=args.quick)
    result: dict[str, Any] = {
        "command": "uv run python -m benchmarks.pg_hybrid_scale " + " ".join(sys.argv[1:] if argv is None else argv),
        "memories": args.size,
        "queries": len(queries),
        "repeat": args.repeat,
        "engines": {},
    }
    times: dict[str, dict[str, list[float]]] = {}
    cluster = None
    try:
        url = args.url
        if url is None:
            cluster = Cluster.start(settings={"shared_buffers": "1GB", "maintenance_work_mem": "1GB"})
            url = cluster.create_database("scale")
            C.log(f"loading {args.size:,} memories into PostgreSQL ({url}) ...")
            result["load"] = load(url, args.size, cache, args.quick)
            C.log(f"  {result['load']}")
        with tempfile.TemporaryDirectory(prefix="memserver-pgscale-") as tmp:
            baselines = {}
            for rev in filter(None, args.baseline.split(",")):
                baseline = Baseline(rev, Path(tmp))
                baselines[f"postgresql {rev} ({baseline.commit})"] = baseline
            spec = {"step": "scale", "url": url, "queries": queries, "vectors": vecs.tolist()}
            for n in range(args.repeat):
                C.log(f"pass {n + 1} of {args.repeat}")
                with MemoryStore(root, C.COLLECTION, embedder=Embedder()) as local:
                    passes = {"local": one_pass(local, queries, vecs)}
                with PostgresBackend(url, tenant=C.COLLECTION, embedder=NoModel()) as pg:  # type: ignore[arg-type]
                    passes["postgresql"] = one_pass(pg, queries, vecs)
                for label, baseline in baselines.items():
                    passes[label] = baseline.run(**spec)
                for engine, cases in passes.items():
                    for case, ms in cases.items():
                        times.setdefault(engine, {}).setdefault(case, []).extend(ms)
        if args.split:
            C.log(f"split of {args.split} searches ...")
            result["split"] = split(url, queries[: args.split], vecs[: args.split], 5)
        if args.floor:
            C.log(f"floor of {args.floor} searches ...")
            result["floor"] = floor(url, root, queries[: args.floor], vecs[: args.floor])
        if args.ef:
            C.log(f"vector side's recall at ef_search {args.ef} ...")
            rows = np.stack([r["vector"] for r in records(args.size, cache, args.quick)])
            result["ef_recall"] = ef_recall(url, root, rows, queries, vecs, args.ef)
    finally:
        if cluster is not None:
            cluster.remove()
    result["engines"] = figures(times)
    table = engine_table(result["engines"], "hybrid", [f"limit {k}" for k in LIMITS])
    print(f"\n{args.size:,} memories, {len(queries)} queries x {args.repeat}, ms")
    print(table)
    if "split" in result:
        s = result["split"]
        print(f"\nsplit (this tree, limit 5, {s['queries']} queries, median ms): wire {s['wire_ms']}")
        print(C.table(["part", "ms"], [[k, v] for k, v in [*s["client"].items(), *s["explain"].items()]]))
    if "floor" in result:
        print(f"\nfloor (limit 10, {result['floor']['queries']} queries, ms)")
        print(C.table(["", "p50", "p95"], [[k, v["p50"], v["p95"]] for k, v in result["floor"]["ms"].items()]))
    if "ef_recall" in result:
        rows = [[k, *v.values()] for k, v in result["ef_recall"].items()]
        print(C.table(["vector side", "recall@50", "recall@10", "p50 ms"], rows))
    result["machine"] = C.machine()
    C.write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
