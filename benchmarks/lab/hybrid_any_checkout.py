"""Hybrid search in process at 100k memories, local store beside PostgreSQL, in whatever checkout runs it.

Issue 25's before (2772e78, the commit before the shared ranking) has another schema than main, so the baseline child
of benchmarks/pg_hybrid_scale.py (old code on main's database) cannot run it. This script uses only what both
revisions have (benchmarks._common, benchmarks.postgres.import_postgres, tests/support/pg_cluster.py, and the
engines' `search(text, limit=, mode="hybrid", query_vector=)`): each checkout loads its own throwaway PostgreSQL
with the same 100k synthetic records, by the same bulk recipe as benchmarks/postgres.py's `mcp` section, and times
the same queries with the same vectors on both engines, passes alternating local / PostgreSQL.

    cd CHECKOUT && MEMSERVER_BENCH_CACHE=/tmp/bench-CHECKOUT uv run python /path/to/hybrid_any_checkout.py --out F

(a cache per checkout: the local store's files may differ between revisions). Prints p50/p95 per engine and limit
and writes F (JSON). Issue 25's figures: benchmarks/README.md, "Issue 25's before and after, one run each with the
local store beside it".
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

sys.path.insert(0, os.getcwd())  # the checkout's benchmarks/ and tests/, not this file's

import numpy as np

from benchmarks import _common as C

LIMITS = (5, 10)


def one_pass(store: Any, queries: list[str], vecs: np.ndarray, out: dict[str, list[float]]) -> None:
    for limit in LIMITS:
        store.search(queries[0], limit=limit, mode="hybrid", query_vector=vecs[0])  # warm-up
        ms = out.setdefault(f"limit {limit}", [])
        for text, v in zip(queries, vecs, strict=True):
            t0 = time.perf_counter()
            store.search(text, limit=limit, mode="hybrid", query_vector=v)
            ms.append((time.perf_counter() - t0) * 1000)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    from benchmarks.postgres import import_postgres
    from memserver.embedding.embedder import Embedder
    from memserver.local.store import MemoryStore
    from memserver.postgres.backend import PostgresBackend
    from tests.support.pg_cluster import Cluster

    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    embedder = Embedder()
    queries = C.corpus()[1]
    vecs = np.asarray([embedder.embed_query(q) for q in queries], np.float32)
    root = C.ensure_store(C.cache_dir(None), args.size)
    cluster = Cluster.start(
        durable=True, settings={"shared_buffers": "1GB", "maintenance_work_mem": "1GB", "work_mem": "16MB"}
    )
    times: dict[str, dict[str, list[float]]] = {"local": {}, "postgresql": {}}
    try:
        url = cluster.create_database("inproc")
        C.log(f"{commit}: loading {args.size:,} memories into PostgreSQL ...")
        load = import_postgres(url, args.size, bulk=True)
        C.log(f"  {load}")
        for n in range(args.repeat):
            C.log(f"pass {n + 1} of {args.repeat}")
            with MemoryStore(root, C.COLLECTION, embedder=embedder) as local:
                one_pass(local, queries, vecs, times["local"])
            with PostgresBackend(url, tenant=C.COLLECTION, embedder=embedder) as pg:
                one_pass(pg, queries, vecs, times["postgresql"])
    finally:
        cluster.remove()
    result = {
        "commit": commit,
        "memories": args.size,
        "queries": len(queries),
        "repeat": args.repeat,
        "load": load,
        "machine": C.machine(),
        "hybrid_ms": {e: {case: C.summary(ms) for case, ms in cases.items()} for e, cases in times.items()},
    }
    rows = [
        [engine, case, s["p50"], s["p95"]] for engine, cases in result["hybrid_ms"].items() for case, s in cases.items()
    ]
    print(C.table(["engine", "case", "p50 ms", "p95 ms"], rows))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
