"""Filtered hybrid search on PostgreSQL in process, several checkouts on one database, passes alternating.

Issue 25's 1% tag regression (benchmarks/README.md, "Regression, open: the 1% tag"): the statement that ranks every
candidate of a selective filter with its context costs more than the one that fused the top 50 of each side by RRF.
This script loads one throwaway PostgreSQL with the 100k synthetic records of benchmarks/postgres.py (the same bulk
recipe: every 100th memory tagged "rare", 1%; the fixture's "work" tag, ~10%), embeds the queries once, and then
times each checkout's own `PostgresBackend.search(text, limit=10, mode="hybrid", query_vector=v, tags=...)` in a
child process run from that checkout (`uv run`, so its own code and environment), checkouts alternating pass by
pass: the same rows, queries and vectors for all of them. Then, with this tree's code, the split of the 1% tag's
search (benchmarks/pg_hybrid_scale.py's `split`: the statement's round trip, decoding, ranking; EXPLAIN ANALYZE's
planning, execution and each CTE; medians).

    uv run python benchmarks/lab/tag_filter_checkouts.py --checkout ../old --checkout . --out F

The first checkout is the baseline of the printed ratios. The checkouts' code must read this database (schema 2772e78
and later do: the statement differs, the tables do not). Writes F (JSON: every checkout's commit and each case's
p50 / p95).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

CASES: dict[str, dict[str, Any]] = {"hybrid": {}, "tag 1%": {"tags": ["rare"]}, "tag 10%": {"tags": ["work"]}}
WARM = 10


def child(url: str, vectors: Path, queries: Path, out: Path) -> None:
    """One pass of the checkout in the working directory: every case over every query, milliseconds each."""
    sys.path.insert(0, os.getcwd())
    import numpy as np

    from memserver.postgres.backend import PostgresBackend

    class NoModel:  # the vectors are given: the backend never embeds
        model_name, dim = "sentence-transformers/all-MiniLM-L6-v2", 384

    texts: list[str] = json.loads(queries.read_text())
    vecs = np.load(vectors)
    ms: dict[str, list[float]] = {}
    with PostgresBackend(url, tenant="bench", embedder=NoModel()) as pg:  # type: ignore[arg-type]
        for case, filters in CASES.items():
            for text, v in zip(texts[:WARM], vecs[:WARM], strict=True):
                pg.search(text, limit=10, mode="hybrid", query_vector=v, **filters)
            for text, v in zip(texts, vecs, strict=True):
                t0 = time.perf_counter()
                pg.search(text, limit=10, mode="hybrid", query_vector=v, **filters)
                ms.setdefault(case, []).append((time.perf_counter() - t0) * 1000)
    out.write_text(json.dumps(ms))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkout", action="append", type=Path, required=True)
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", required=True)
    parser.add_argument("--child", nargs=4, metavar=("URL", "VECTORS", "QUERIES", "OUT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, vectors, queries, out = args.child
        child(url, Path(vectors), Path(queries), Path(out))
        return 0

    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import numpy as np

    from benchmarks import _common as C
    from benchmarks.pg_hybrid_scale import split
    from benchmarks.postgres import import_postgres
    from memserver.embedding.embedder import Embedder
    from tests.support.pg_cluster import Cluster

    checkouts = [c.resolve() for c in args.checkout]
    commits = [
        subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=c, capture_output=True, text=True).stdout.strip()
        for c in checkouts
    ]
    dirty = [
        bool(
            subprocess.run(
                ["git", "status", "--porcelain", "memserver"], cwd=c, capture_output=True, text=True
            ).stdout.strip()
        )
        for c in checkouts
    ]
    texts = C.corpus()[1][: args.queries]
    embedder = Embedder()
    scratch = Path(tempfile.mkdtemp(prefix="tag-filter-"))
    np.save(scratch / "vectors.npy", np.asarray([embedder.embed_query(t) for t in texts], np.float32))
    (scratch / "queries.json").write_text(json.dumps(texts))
    times: list[dict[str, list[float]]] = [{} for _ in checkouts]
    cluster = Cluster.start(
        durable=True, settings={"shared_buffers": "1GB", "maintenance_work_mem": "1GB", "work_mem": "16MB"}
    )
    try:
        url = cluster.create_database("tagfilter")
        C.log(f"loading {args.size:,} memories into PostgreSQL ...")
        load = import_postgres(url, args.size, bulk=True)
        C.log(f"  {load}")
        for n in range(args.repeat):
            for i, checkout in enumerate(checkouts):
                C.log(f"pass {n + 1} of {args.repeat}: {commits[i]} ({checkout.name})")
                out = scratch / f"{i}-{n}.json"
                child_args = [url, str(scratch / "vectors.npy"), str(scratch / "queries.json"), str(out)]
                cmd = ["uv", "run", "python", str(Path(__file__).resolve()), "--checkout", ".", "--out", "-"]
                env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}  # the checkout's own environment
                subprocess.run([*cmd, "--child", *child_args], cwd=checkout, check=True, env=env)
                for case, ms in json.loads(out.read_text()).items():
                    times[i].setdefault(case, []).extend(ms)
        C.log(f"this tree's split of the 1% tag's search ({len(texts)} queries) ...")
        split_1 = split(url, texts, np.load(scratch / "vectors.npy"), 10, tags=["rare"])
    finally:
        cluster.remove()
    result = {
        "memories": args.size,
        "queries": len(texts),
        "repeat": args.repeat,
        "load": load,
        "machine": C.machine(),
        "checkouts": [
            {"commit": commit, "uncommitted_changes": d, "hybrid_ms": {c: C.summary(ms) for c, ms in t.items()}}
            for commit, d, t in zip(commits, dirty, times, strict=True)
        ],
        "split_tag_1%_this_tree": split_1,
    }
    rows = []
    for case in CASES:
        base = C.summary(times[0][case])["p50"]
        for commit, t in zip(commits, times, strict=True):
            s = C.summary(t[case])
            rows.append([case, commit, s["p50"], s["p95"], f"{s['p50'] / base:.2f}x"])
    print(C.table(["case", "checkout", "p50 ms", "p95 ms", "p50 vs first"], rows))
    parts = [[part, ms] for section in ("client", "explain") for part, ms in split_1[section].items()]
    print(C.table(["this tree, tag 1%: part of a search", "median ms"], parts))
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
