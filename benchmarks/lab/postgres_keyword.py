"""Keyword and hybrid recall on PostgreSQL before and after the review's S1 and S2 (a review of the engine), in
one run, alternating: S1, the keyword branch of the HNSW/probe plans joined its scored rows to memories with a
plain join, which the planner answered by reading the tenant's whole time index; now a LATERAL lookup by
(tenant, seq) per scored row. S2, BM25 was computed with numeric literals (numeric arithmetic); now float8.

In process (PostgresBackend.search with the query's vector: no model in the timing), on N synthetic memories
(benchmarks/_common.py, imported by benchmarks/postgres.py's bulk recipe) in a throwaway PostgreSQL 18 +
pgvector 0.8. After an untimed warm-up pass of both, each round times every query in both variants, the variant
that goes first alternating by round; prints medians per mode (semantic is the control: its SQL is the same in
both) and whether both variants returned the same memories in the same order.

    uv run python -m benchmarks.lab.postgres_keyword                      # 100k memories, 60 queries, 5 rounds
    uv run python -m benchmarks.lab.postgres_keyword --n 20000 --rounds 3

Writes benchmarks/results/postgres_keyword.json.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from typing import Any

from benchmarks import _common as C
from benchmarks.postgres import import_postgres, query_vectors
from memserver.postgres import search, terms
from memserver.postgres.backend import PostgresBackend
from tests.support.pg_cluster import Cluster

# terms.BM25_SCORES as it was before S2 (numeric literals), verbatim.
BM25_BEFORE_S2 = f"""
    SELECT p.seq, sum(ln(1 + (st.n - p.df + 0.5) / (p.df + 0.5)) * {terms.K1 + 1} * p.tf
                      / (p.tf + {terms.K1} * (1 - {terms.B} + {terms.B} * p.doc_len / st.avgdl))) AS bm25
    FROM (SELECT seq, tf, doc_len, count(*) OVER (PARTITION BY term) AS df
          FROM memserver.postings WHERE tenant = %(tenant)s AND term = ANY(%(terms)s)) p,
         (SELECT coalesce(sum(docs), 0)::float8 AS n,
                 CASE WHEN sum(length) > 0 THEN sum(length)::float8 / sum(docs) ELSE 1 END AS avgdl
          FROM memserver.tenant_stats WHERE tenant = %(tenant)s) st
    GROUP BY p.seq
"""
SQL_AFTER = search.search_sql
BM25_AFTER = terms.BM25_SCORES
MODES = ("keyword", "hybrid", "semantic")


class NoModel:
    model_name, dim = "sentence-transformers/all-MiniLM-L6-v2", 384


def use(variant: str) -> None:
    """Switch the SQL the backend sends (module globals read at each call)."""
    if variant == "before":
        search.search_sql = functools.partial(SQL_AFTER, lateral=False)  # type: ignore[assignment]
        search.BM25_SCORES = BM25_BEFORE_S2
    else:
        search.search_sql = SQL_AFTER  # type: ignore[assignment]
        search.BM25_SCORES = BM25_AFTER


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--queries", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args(argv)
    _, queries = C.corpus()
    queries = queries[: args.queries]
    vectors = query_vectors(C.embedder(), queries)
    cluster = Cluster.start()
    try:
        url = cluster.create_database("keyword")
        C.log(f"importing {args.n:,} memories (bulk recipe) ...")
        ingest = import_postgres(url, args.n, bulk=True)
        times: dict[tuple[str, str], list[float]] = {(v, m): [] for v in ("before", "after") for m in MODES}
        answers: dict[tuple[str, str, int], list[str]] = {}
        with PostgresBackend(url, tenant=C.COLLECTION, embedder=NoModel()) as b:  # type: ignore[arg-type]
            for variant in ("before", "after"):  # warm-up, untimed: caches and plans for both
                use(variant)
                for q, v in zip(queries, vectors, strict=True):
                    for mode in MODES:
                        b.search(q, limit=10, mode=mode, query_vector=v)
            for r in range(args.rounds):
                for variant in ("before", "after") if r % 2 == 0 else ("after", "before"):
                    use(variant)
                    for i, (q, v) in enumerate(zip(queries, vectors, strict=True)):
                        for mode in MODES:
                            t0 = time.perf_counter()
                            hits = b.search(q, limit=10, mode=mode, query_vector=v)
                            times[(variant, mode)].append((time.perf_counter() - t0) * 1000)
                            answers[(variant, mode, i)] = [h.memory.id for h in hits]
                C.log(f"round {r + 1}/{args.rounds} done")
        use("after")
    finally:
        cluster.remove()
    rows: list[list[Any]] = []
    out: dict[str, Any] = {"n": args.n, "queries": len(queries), "rounds": args.rounds, "ingest": ingest, "modes": {}}
    for mode in MODES:
        before = statistics.median(times[("before", mode)])
        after = statistics.median(times[("after", mode)])
        same = sum(answers[("before", mode, i)] == answers[("after", mode, i)] for i in range(len(queries)))
        rows.append([mode, f"{before:.2f}", f"{after:.2f}", f"{before / after:.2f}", f"{same}/{len(queries)}"])
        out["modes"][mode] = {"before_ms_p50": before, "after_ms_p50": after, "same_results": same}
    print(f"PostgreSQL recall, {args.n:,} memories, {len(queries)} queries x {args.rounds} rounds, limit 10")
    print(C.table(["mode", "before S1+S2 p50 ms", "after p50 ms", "before/after", "same results"], rows))
    out["machine"] = C.machine()
    C.write_json(C.RESULTS / "postgres_keyword.json", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
