"""Retrieval quality: recall@5, recall@10 and MRR of semantic, keyword and hybrid ranking, per query category.

Loads benchmarks/data/quality.json (built by benchmarks/data/make_quality.py), embeds every memory with the real
Embedder, ranks each query three ways over the whole set, and reports:

- recall@5, recall@10, MRR per mode (semantic = exact cosine, keyword = BM25, hybrid = RRF of the two), overall
  and per category;
- the score scale of the model: cosine of unrelated (query, memory) pairs vs relevant ones, and the best score
  an unanswerable query reaches, to choose a default `min_score` from data;
- cosine of restatements (near-duplicates) vs distinct memories on the same topic, to choose the threshold at
  which `remember` reports `similar`.

    uv run python benchmarks/quality.py            # full run, writes benchmarks/results/quality.json
    uv run python benchmarks/quality.py --quick    # smoke test: 60 queries, fake embedder allowed
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from memserver.fusion import reciprocal_rank_fusion  # noqa: E402
from memserver.keyword import KeywordIndex, date_text  # noqa: E402

DATA = ROOT / "benchmarks" / "data" / "quality.json"
RESULTS = ROOT / "benchmarks" / "results" / "quality.json"
MODES = ("semantic", "keyword", "hybrid")
DEPTH = 50  # how deep each ranking goes into the fusion (the store fetches the same)


def load_embedder(fake: bool) -> object:
    """The real model, or the test suite's hashed bag-of-words fake when asked (scores then mean little)."""
    if fake:
        sys.path.insert(0, str(ROOT / "tests"))
        from fakes import FakeEmbedder

        return FakeEmbedder()
    from memserver.embedder import Embedder

    return Embedder()


def rank_metrics(ranking: Sequence[str], relevant: set[str]) -> dict[str, float]:
    """recall@5, recall@10 (share of the relevant ids found) and reciprocal rank of the first relevant id."""
    rr = next((1.0 / (i + 1) for i, key in enumerate(ranking) if key in relevant), 0.0)
    return {
        "recall@5": len(relevant & set(ranking[:5])) / len(relevant),
        "recall@10": len(relevant & set(ranking[:10])) / len(relevant),
        "mrr": rr,
    }


def percentiles(values: Sequence[float]) -> dict[str, float]:
    array = np.asarray(values, np.float64)
    return {
        name: round(float(np.percentile(array, p)), 3)
        for name, p in (("min", 0), ("p5", 5), ("median", 50), ("p95", 95), ("p99", 99), ("max", 100))
    }


def evaluate(data: dict, embedder: object, *, limit: int | None, use_date: bool, rrf_k: int) -> dict:
    memories = data["memories"]
    ids = [m["id"] for m in memories]
    queries = data["queries"][:limit] if limit else data["queries"]

    started = time.perf_counter()
    vectors = embedder.embed([m["content"] for m in memories])  # type: ignore[attr-defined]
    embed_seconds = time.perf_counter() - started

    index = KeywordIndex()
    started = time.perf_counter()
    index.add_many((m["id"], m["content"] + (" " + date_text(m["created_at"]) if use_date else "")) for m in memories)
    build_ms = (time.perf_counter() - started) * 1000

    per_mode: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    categories: dict[str, dict[str, list[dict[str, float]]]] = {}
    relevant_cos: list[float] = []
    unrelated_cos: list[float] = []
    timing: dict[str, list[float]] = {"embed_query": [], "semantic": [], "keyword": [], "fusion": []}

    def semantic(query_vector: np.ndarray) -> tuple[list[str], np.ndarray]:
        scores = vectors @ query_vector
        order = np.argsort(-scores, kind="stable")[:DEPTH]
        return [ids[i] for i in order], scores

    for query in queries:
        relevant = set(query["relevant"])
        t0 = time.perf_counter()
        qv = embedder.embed_query(query["query"])  # type: ignore[attr-defined]
        t1 = time.perf_counter()
        sem, scores = semantic(qv)
        t2 = time.perf_counter()
        kw = [key for key, _ in index.search(query["query"], DEPTH)]
        t3 = time.perf_counter()
        hyb = [key for key, _ in reciprocal_rank_fusion([sem, kw], k=rrf_k)]
        t4 = time.perf_counter()
        for name, value in zip(timing, (t1 - t0, t2 - t1, t3 - t2, t4 - t3), strict=True):
            value_ms = value * 1000
            timing[name].append(value_ms)
        by_mode = {"semantic": sem, "keyword": kw, "hybrid": hyb}
        for mode, ranking in by_mode.items():
            metrics = rank_metrics(ranking, relevant)
            per_mode[mode].append(metrics)
            categories.setdefault(query["category"], {m: [] for m in MODES})[mode].append(metrics)
        mask = np.isin(np.asarray(ids), list(relevant))
        relevant_cos.extend(scores[mask].tolist())
        unrelated_cos.extend(scores[~mask].tolist())

    def mean(rows: list[dict[str, float]]) -> dict[str, float]:
        return {key: round(statistics.fmean(r[key] for r in rows), 3) for key in rows[0]}

    by_id = dict(zip(ids, vectors, strict=True))
    unanswerable_top = [float(np.max(vectors @ embedder.embed_query(q))) for q in data["unanswerable"]]  # type: ignore[attr-defined]
    answerable_top_relevant = []
    for query in queries:
        qv = embedder.embed_query(query["query"])  # type: ignore[attr-defined]
        answerable_top_relevant.append(max(float(by_id[k] @ qv) for k in query["relevant"]))
    dup_vectors = embedder.embed([d["content"] for d in data["duplicates"]])  # type: ignore[attr-defined]
    duplicate_cos = [float(v @ by_id[d["of"]]) for v, d in zip(dup_vectors, data["duplicates"], strict=True)]
    related_cos = [float(by_id[a] @ by_id[b]) for a, b in data["related"]]

    def share_at_least(values: list[float], t: float) -> float:
        return round(sum(v >= t for v in values) / len(values), 3)

    floors = [round(0.05 * i, 2) for i in range(1, 11)]
    thresholds = [round(0.75 + 0.025 * i, 3) for i in range(9)]

    return {
        "memories": len(memories),
        "queries": len(queries),
        "use_date": use_date,
        "rrf_k": rrf_k,
        "depth": DEPTH,
        "overall": {mode: mean(rows) for mode, rows in per_mode.items()},
        "by_category": {
            cat: {"n": len(rows["hybrid"]), **{mode: mean(r) for mode, r in rows.items()}}
            for cat, rows in sorted(categories.items())
        },
        "score_scale": {
            "non_relevant_pairs": percentiles(unrelated_cos),
            "relevant_pairs": percentiles(relevant_cos),
            "best_relevant_per_query": percentiles(answerable_top_relevant),
            "top1_of_unanswerable_queries": percentiles(unanswerable_top),
            # min_score t: share of queries whose best relevant memory survives, share of unanswerable queries
            # that still return something
            "min_score_tradeoff": {
                str(t): {
                    "relevant_kept": share_at_least(answerable_top_relevant, t),
                    "unanswerable_answered": share_at_least(unanswerable_top, t),
                }
                for t in floors
            },
        },
        "near_duplicates": {
            "restatement_pairs": percentiles(duplicate_cos),
            "distinct_related_pairs": percentiles(related_cos),
            # threshold t: share of restatements flagged as similar, share of distinct related memories flagged
            "threshold_tradeoff": {
                str(t): {
                    "restatements_flagged": share_at_least(duplicate_cos, t),
                    "related_flagged": share_at_least(related_cos, t),
                }
                for t in thresholds
            },
        },
        "timing_ms": {
            "embed_corpus_total": round(embed_seconds * 1000, 1),
            "keyword_build": round(build_ms, 2),
            **{f"{name}_p50": round(float(np.percentile(v, 50)), 3) for name, v in timing.items()},
        },
    }


def print_report(result: dict) -> None:
    print(
        f"{result['queries']} queries over {result['memories']} memories "
        f"(date in keyword text: {result['use_date']}, rrf k={result['rrf_k']}, depth {result['depth']})"
    )
    header = f"{'':14}" + "".join(f"{mode:>27}" for mode in MODES)
    print(header)
    print(f"{'':14}" + "   R@5   R@10    MRR      " * 3)
    rows = [("all", len(result["by_category"]) and result["queries"], result["overall"])]
    rows += [(cat, v["n"], v) for cat, v in result["by_category"].items()]
    for name, n, values in rows:
        cells = "".join(
            f"   {values[m]['recall@5']:.3f}  {values[m]['recall@10']:.3f}  {values[m]['mrr']:.3f}     " for m in MODES
        )
        print(f"{name:>10} {n:>3}{cells}")
    print("\ncosine scale (min / p5 / median / p95 / p99 / max):")
    for name, stats in {**result["score_scale"], **result["near_duplicates"]}.items():
        if name.endswith("tradeoff"):
            continue
        print(f"  {name:32} " + " / ".join(f"{stats[k]:.3f}" for k in ("min", "p5", "median", "p95", "p99", "max")))
    print("\nmin_score t: share of queries keeping their best relevant hit / of unanswerable queries answered")
    print(
        "  "
        + ", ".join(
            f"{t}: {v['relevant_kept']}/{v['unanswerable_answered']}"
            for t, v in result["score_scale"]["min_score_tradeoff"].items()
        )
    )
    print("near-duplicate threshold t: share of restatements flagged / of distinct related pairs flagged")
    print(
        "  "
        + ", ".join(
            f"{t}: {v['restatements_flagged']}/{v['related_flagged']}"
            for t, v in result["near_duplicates"]["threshold_tradeoff"].items()
        )
    )
    print("\ntiming (ms): " + ", ".join(f"{k} {v}" for k, v in result["timing_ms"].items()))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke test: the first 60 queries only")
    parser.add_argument("--fake", action="store_true", help="use the tests' fake embedder (no model needed)")
    parser.add_argument("--no-date", action="store_true", help="do not add the memory's date to the keyword text")
    parser.add_argument("--rrf-k", type=int, default=60, help="reciprocal-rank fusion constant (default 60)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"result file (default {RESULTS.relative_to(ROOT)})")
    args = parser.parse_args(argv)

    data = json.loads(DATA.read_text(encoding="utf-8"))
    embedder = load_embedder(args.fake)
    result = evaluate(data, embedder, limit=60 if args.quick else None, use_date=not args.no_date, rrf_k=args.rrf_k)
    result["embedder"] = getattr(embedder, "model_name", type(embedder).__name__)
    result["machine"] = {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "cpu": platform.processor() or platform.machine(),
    }
    print_report(result)
    if not args.quick:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
