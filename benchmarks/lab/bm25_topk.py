"""BM25 top-k: the pruned search (maxscore.py) against the exhaustive scorer it replaced, alternated in one run.

Two views, old and new timed query by query in alternation (the load of a shared machine hits both alike), every
result compared (they must be equal, key for key and score for score):

1. The keyword index alone at each `--sizes` (default 100k and 1M): a `KeywordIndex` fed the texts a benchmark
   store of that size holds (`_common.synthetic`: two real sentences per memory, plus the date words the store
   indexes), searched for the 339 real queries at k = 20 (fusion.FUSION_DEPTH, what a hybrid recall asks for;
   `--k`, and `--k1`/`--b` for other BM25 parameters):
   unfiltered, with a 10% filter (the rows of one tag), and after 1% of the memories were deleted.
2. The store's keyword and hybrid search (`MemoryStore.search(query_vector=...)`, limit 10, no filters, the query
   embedded beforehand) on the cached benchmark store of `--store-size` (default 100k; 0 skips it), old and new
   being `KeywordIndex.search_exhaustive` and `KeywordIndex.search`.

    uv run python -m benchmarks.lab.bm25_topk                     # 100k and 1M index, 100k store (~4 min)
    uv run python -m benchmarks.lab.bm25_topk --quick             # smoke run: 5k index, no store
"""

from __future__ import annotations

import argparse
import platform
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _common as C
from memserver.retrieval.bm25 import KeywordIndex
from memserver.retrieval.hybrid_rrf import FUSION_DEPTH
from memserver.retrieval.terms import date_text

ROOT = Path(__file__).resolve().parents[2]

Search = Callable[[str, int, "np.ndarray | None"], list[tuple[int, float]]]


def build(n: int, base: list[str], vecs: np.ndarray, params: dict[str, float]) -> tuple[KeywordIndex, float]:
    """The keyword index of the benchmark store of n memories (same texts and dates), and its build time."""
    texts = [f"{r['content']} {date_text(r['created_at'])}" for r in C.synthetic(n, base, vecs)]
    index = KeywordIndex(**params)
    started = time.perf_counter()
    index.add_many(enumerate(texts))
    return index, time.perf_counter() - started


def alternate(
    old: Search, new: Search, queries: list[str], k: int, cand: np.ndarray | None, rounds: int
) -> dict[str, Any]:
    """Time old and new on every query, alternately (which goes first alternates too); check they agree."""
    times: dict[str, list[float]] = {"old": [], "new": []}
    ratios = []
    for r in range(rounds):
        for i, query in enumerate(queries):
            pair = [("old", old), ("new", new)] if (r + i) % 2 == 0 else [("new", new), ("old", old)]
            got = {}
            took = {}
            for name, fn in pair:
                started = time.perf_counter()
                got[name] = fn(query, k, cand)
                took[name] = time.perf_counter() - started
            if got["old"] != got["new"]:
                raise AssertionError(f"pruned and exhaustive disagree on {query!r} (k {k})")
            for name in took:
                times[name].append(took[name])
            ratios.append(took["new"] / took["old"])
    row: dict[str, Any] = {}
    for name, xs in times.items():
        row[name] = {f"p{p}_ms": round(C.pct(xs, p) * 1000, 3) for p in (50, 95, 99)}
    row["new/old p50"] = round(row["new"]["p50_ms"] / row["old"]["p50_ms"], 2)
    row["median per-query ratio"] = round(float(np.median(ratios)), 2)
    row["queries"] = len(queries) * rounds
    return row


def index_view(
    n: int, base: list[str], vecs: np.ndarray, queries: list[str], rounds: int, k: int, params: dict[str, float]
) -> dict[str, Any]:
    index, build_s = build(n, base, vecs, params)
    C.log(f"{n:,}: index built in {build_s:.1f} s")
    out: dict[str, Any] = {"n": n, "build_s": round(build_s, 1)}
    terms = [index.query_terms(q) for q in queries]
    out["query terms (mean)"] = round(sum(map(len, terms)) / len(queries), 2)
    out["unfiltered"] = alternate(index.search_exhaustive, index.search, queries, k, None, rounds)
    one_tag = np.arange(3, n, 10, dtype=np.int64)  # the rows of one of the ten tags
    out["10% filter"] = alternate(index.search_exhaustive, index.search, queries, k, one_tag, rounds)
    for key in random.Random(1).sample(range(n), n // 100):
        index.remove(key)
    out["after 1% deleted"] = alternate(index.search_exhaustive, index.search, queries, k, None, rounds)
    return out


def store_view(n: int, cache: Path, queries: list[str], rounds: int) -> dict[str, Any]:
    """Keyword and hybrid search through the store, on a private copy of the cached benchmark store."""
    from memserver.embedding.embedder import Embedder
    from memserver.local.store import MemoryStore

    qvecs = C.embedder().embed(queries)
    source = C.ensure_store(cache, n)
    with tempfile.TemporaryDirectory(prefix="bm25-topk-") as tmp:
        root = Path(tmp) / "store"
        shutil.copytree(source, root)  # opening may checkpoint: never in the shared cache
        exhaustive, pruned = KeywordIndex.search_exhaustive, KeywordIndex.search
        out: dict[str, Any] = {"n": n}
        vec = dict(zip(queries, qvecs, strict=True))
        with MemoryStore(root, C.COLLECTION, embedder=Embedder()) as store:
            for mode in ("keyword", "hybrid"):

                def run(query: str, k: int, cand: np.ndarray | None, mode: str = mode) -> list[tuple[int, float]]:
                    hits = store.search(query, limit=k, mode=mode, query_vector=vec[query])
                    return [(hash(h.memory.id), h.score) for h in hits]

                def old(query: str, k: int, cand: np.ndarray | None) -> list[tuple[int, float]]:
                    KeywordIndex.search = exhaustive  # type: ignore[method-assign]
                    try:
                        return run(query, k, cand)
                    finally:
                        KeywordIndex.search = pruned  # type: ignore[method-assign]

                for q in queries[:20]:
                    run(q, 10, None)  # warm-up
                out[mode] = alternate(old, run, queries, 10, None, rounds)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000, 1_000_000], help="keyword index sizes")
    parser.add_argument("--store-size", type=int, default=100_000, help="cached store for keyword/hybrid (0: none)")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the queries per measurement")
    parser.add_argument("--k", type=int, default=FUSION_DEPTH, help=f"keyword top k (default {FUSION_DEPTH})")
    parser.add_argument("--k1", type=float, default=None, help="BM25 k1 of the index view (default: the index's)")
    parser.add_argument("--b", type=float, default=None, help="BM25 b of the index view (default: the index's)")
    parser.add_argument("--cache", default=None, help="benchmark store cache (default: _common.cache_dir)")
    parser.add_argument("--quick", action="store_true", help="smoke run: a 5k index, one round, no store")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "bm25_topk.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.sizes, args.store_size, args.rounds = [5_000], 0, 1
    cache = C.cache_dir(args.cache)
    base, queries = C.corpus()
    vecs = C.base_vectors(cache, base)
    params = {name: v for name, v in (("k1", args.k1), ("b", args.b)) if v is not None}
    result: dict[str, Any] = {"machine": C.machine(), "python": platform.python_version(), "k": args.k}
    result["bm25"] = {"k1": KeywordIndex(**params).k1, "b": KeywordIndex(**params).b}
    result["index"] = [index_view(n, base, vecs, queries, args.rounds, args.k, params) for n in args.sizes]
    if args.store_size:
        result["store"] = store_view(args.store_size, cache, queries, args.rounds)
    result["machine_end"] = C.machine()
    rows = []
    for view in result["index"]:
        for name in ("unfiltered", "10% filter", "after 1% deleted"):
            r = view[name]
            rows.append(_row(f"index {C.size_label(view['n'])}, {name}", r))
    if "store" in result:
        for mode in ("keyword", "hybrid"):
            rows.append(_row(f"store {C.size_label(result['store']['n'])}, {mode} search", result["store"][mode]))
    print(
        C.table(
            ["what", "old p50", "new p50", "old p95", "new p95", "old p99", "new p99", "new/old p50", "per-query"], rows
        )
    )
    print(f"JSON: {C.write_json(args.out, result)}")
    return 0


def _row(label: str, r: dict[str, Any]) -> list[Any]:
    old, new = r["old"], r["new"]
    return [
        label,
        old["p50_ms"],
        new["p50_ms"],
        old["p95_ms"],
        new["p95_ms"],
        old["p99_ms"],
        new["p99_ms"],
        f"{r['new/old p50']}×",
        f"{r['median per-query ratio']}×",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
