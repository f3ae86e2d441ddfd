"""Retrieval quality through MemoryStore: recall@5, recall@10 and MRR of semantic, keyword and hybrid search.

Loads benchmarks/data/quality.json (built by benchmarks/data/make_quality.py: 722 memories, some tagged, 347 queries
in nine categories (tags, CJK and word forms since issue 23), 20 unanswerable queries, 25 restatements), imports the
memories into a fresh MemoryStore with their created_at, tags and their vectors from the real Embedder, and reports:

- recall@5, recall@10, MRR per mode (`store.search(mode=...)`), overall and per category, and search latency;
- a fusion grid (RRF k, keyword weight, depth, a recency prior) over the store's own semantic and keyword
  rankings, which is where the store's FUSION_* constants come from;
- the score scale (cosine) of the model: relevant hits vs the best hit of unanswerable queries, per mode, and how
  often the "no strong match" note (tool_results.WEAK_MATCH_SCORE) fires on each;
- near-duplicates: `store.add` of each restatement must return the original in `similar`; distinct memories on
  the same topic at NEAR_DUPLICATE_SCORE;
- with --scale N: hybrid vs semantic recall latency on a bulk-loaded store of N memories (benchmarks/_common.py's
  synthetic corpus, cached), search alone and with the query embedding (what a recall call pays);
- conversations (issue 12): the dated multi-session conversation sets of benchmarks/data/conversations/ (several
  speakers, sessions weeks apart, questions of who said what and when), run through benchmarks/conversations.py
  with the turns' fields given (speaker, session, occurred_at, namespace: its hybrid+fields row) beside the plain
  hybrid recall: R@5 / R@10 / MRR overall and R@10 by question type (--no-conversations skips it).

    uv run python -m benchmarks.quality                  # full run, writes benchmarks/results/quality.json
    uv run python -m benchmarks.quality --scale 100000   # plus the latency at 100k (builds a cached store once)
    uv run python -m benchmarks.quality --quick          # smoke test: 60 queries, no grid, scale 2000
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from benchmarks import _common
from memserver.contract import backend
from memserver.features import tool_results
from memserver.local.store import MemoryStore
from memserver.retrieval.hybrid_convex import DEPTH as RANKING_DEPTH
from memserver.retrieval.hybrid_convex import VECTOR_WEIGHT
from memserver.retrieval.hybrid_rrf import reciprocal_rank_fusion

ROOT = Path(__file__).resolve().parent.parent

DATA = ROOT / "benchmarks" / "data" / "quality.json"
RESULTS = ROOT / "benchmarks" / "results" / "quality.json"
MODES = ("semantic", "keyword", "hybrid")
DEPTH = 50  # ranking depth scored (MRR looks this deep)


def load_embedder(fake: bool) -> object:
    """The real model, or the test suite's hashed bag-of-words fake when asked (scores then mean little)."""
    if fake:
        from tests.support.fakes import FakeEmbedder

        return FakeEmbedder()
    from memserver.embedding.embedder import Embedder

    return Embedder()


def store_id(key: str) -> str:
    """The store wants 32-hex ids; the data set's ids are readable names."""
    return hashlib.md5(key.encode()).hexdigest()


def rank_metrics(ranking: Sequence[str], relevant: set[str]) -> dict[str, float]:
    """recall@5, recall@10 (share of the relevant ids found) and reciprocal rank of the first relevant id."""
    rr = next((1.0 / (i + 1) for i, key in enumerate(ranking) if key in relevant), 0.0)
    return {
        "recall@5": len(relevant & set(ranking[:5])) / len(relevant),
        "recall@10": len(relevant & set(ranking[:10])) / len(relevant),
        "mrr": rr,
    }


def mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {key: round(statistics.fmean(r[key] for r in rows), 3) for key in rows[0]}


def percentiles(values: Sequence[float]) -> dict[str, float]:
    array = np.asarray(values, np.float64)
    return {
        name: round(float(np.percentile(array, p)), 3)
        for name, p in (("min", 0), ("p5", 5), ("median", 50), ("p95", 95), ("max", 100))
    }


def share_at_least(values: Sequence[float], t: float) -> float:
    return round(sum(v >= t for v in values) / max(1, len(values)), 3)


def fuse(
    sem: list[str], kw: list[str], created: dict[str, str], *, k: int, w_kw: float, depth: int, recency: float
) -> list[str]:
    """The store's fusion, offline, with a candidate recency prior: newest of the fused set first."""
    rankings: list[list[str]] = [sem[:depth], kw[:depth]]
    weights = [1.0, w_kw]
    if recency:
        pool = list(dict.fromkeys(sem[:depth] + kw[:depth]))
        rankings.append(sorted(pool, key=created.__getitem__, reverse=True))
        weights.append(recency)
    return [key for key, _ in reciprocal_rank_fusion(rankings, k=k, weights=weights)]


def evaluate(data: dict, embedder: object, *, limit: int | None, grid: bool) -> dict:
    memories = data["memories"]
    queries = data["queries"][:limit] if limit else data["queries"]
    name_of = {store_id(m["id"]): m["id"] for m in memories}
    created = {m["id"]: m["created_at"] for m in memories}

    started = time.perf_counter()
    vectors = np.asarray(embedder.embed([m["content"] for m in memories]), np.float32)  # type: ignore[attr-defined]
    embed_seconds = time.perf_counter() - started
    by_name = dict(zip((m["id"] for m in memories), vectors, strict=True))

    with tempfile.TemporaryDirectory(prefix="memserver-quality-") as tmp:
        store = MemoryStore(tmp, "quality", embedder=embedder)  # type: ignore[arg-type]
        records = [
            {
                "id": store_id(m["id"]),
                "content": m["content"],
                "created_at": m["created_at"],
                "tags": m.get("tags", []),
                "vector": v,
            }
            for m, v in zip(memories, vectors, strict=True)
        ]
        store.import_(records)

        per_mode: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
        categories: dict[str, dict[str, list[dict[str, float]]]] = {}
        top_scores: dict[str, list[float]] = {mode: [] for mode in MODES}
        best_relevant: list[float] = []
        search_ms: dict[str, list[float]] = {mode: [] for mode in MODES}
        embed_ms: list[float] = []
        deep: list[tuple[dict, list[str], list[str]]] = []  # (query, semantic@100, keyword@100) for the grid
        for query in queries:
            relevant = set(query["relevant"])
            t0 = time.perf_counter()
            qv = np.asarray(embedder.embed_query(query["query"]), np.float32)  # type: ignore[attr-defined]
            embed_ms.append((time.perf_counter() - t0) * 1000)
            for mode in MODES:
                t0 = time.perf_counter()
                hits = store.search(query["query"], limit=DEPTH, mode=mode, query_vector=qv)
                search_ms[mode].append((time.perf_counter() - t0) * 1000)
                ranking = [name_of[h.memory.id] for h in hits]
                metrics = rank_metrics(ranking, relevant)
                per_mode[mode].append(metrics)
                categories.setdefault(query["category"], {m: [] for m in MODES})[mode].append(metrics)
                # what the recall note looks at: the best score among the results a recall of 5 returns
                top_scores[mode].append(max(h.score for h in hits[:5]) if hits else float("nan"))
            best_relevant.append(max(float(by_name[k] @ qv) for k in relevant))
            if grid:
                sem, kw = (
                    [name_of[h.memory.id] for h in store.search(query["query"], limit=100, mode=m, query_vector=qv)]
                    for m in ("semantic", "keyword")
                )
                deep.append((query, sem, kw))

        unanswerable_top: dict[str, list[float]] = {mode: [] for mode in MODES}
        for text in data["unanswerable"]:
            for mode in MODES:
                hits = store.search(text, limit=5, mode=mode)
                unanswerable_top[mode].append(max(h.score for h in hits) if hits else float("nan"))

        # near-duplicates through the real add(): the restatement is stored and names the original in `similar`
        found, flagged_scores = 0, []
        for dup in data["duplicates"]:
            memory = store.add(dup["content"])
            ids = [mid for mid, _ in memory.similar]
            found += store_id(dup["of"]) in ids
            flagged_scores.extend(score for _, score in memory.similar)
        store.close()

    dup_vectors = _dup_vectors(data, embedder)
    duplicate_cos = [float(by_name[d["of"]] @ v) for d, v in zip(data["duplicates"], dup_vectors, strict=True)]
    related_cos = [float(by_name[a] @ by_name[b]) for a, b in data["related"]]
    weak = tool_results.WEAK_MATCH_SCORE
    result = {
        "memories": len(memories),
        "queries": len(queries),
        "depth": DEPTH,
        # the local store's hybrid ranking (memserver/retrieval/hybrid_convex.py); the grid below explores RRF
        "fusion": {
            "kind": "convex",
            "vector_weight": VECTOR_WEIGHT,
            "depth": RANKING_DEPTH,
        },
        "overall": {mode: mean(rows) for mode, rows in per_mode.items()},
        "by_category": {
            cat: {"n": len(rows["hybrid"]), **{mode: mean(r) for mode, r in rows.items()}}
            for cat, rows in sorted(categories.items())
        },
        "score_scale": {
            "best_relevant_per_query": percentiles(best_relevant),
            **{f"best_of_5_answerable_{m}": percentiles(np.nan_to_num(v, nan=-1.0)) for m, v in top_scores.items()},
            **{
                f"best_of_5_unanswerable_{mode}": percentiles(np.nan_to_num(v, nan=-1.0))
                for mode, v in unanswerable_top.items()
            },
            "min_score_tradeoff": {
                str(t): {
                    "relevant_kept": share_at_least(best_relevant, t),
                    "unanswerable_answered": share_at_least(unanswerable_top["semantic"], t),
                }
                for t in [round(0.05 * i, 2) for i in range(1, 11)]
            },
            # the recall note: share of queries whose top hit scores below WEAK_MATCH_SCORE (or that found nothing)
            "weak_match_note": {
                "threshold": weak,
                **{
                    mode: {
                        "answerable_flagged": round(
                            1 - share_at_least(np.nan_to_num(top_scores[mode], nan=-1), weak), 3
                        ),
                        "unanswerable_flagged": round(
                            1 - share_at_least(np.nan_to_num(unanswerable_top[mode], nan=-1), weak), 3
                        ),
                    }
                    for mode in MODES
                },
            },
        },
        "near_duplicates": {
            "threshold": backend.NEAR_DUPLICATE_SCORE,
            "restatement_pairs": percentiles(duplicate_cos),
            "distinct_related_pairs": percentiles(related_cos),
            "add_similar_found_original": round(found / len(data["duplicates"]), 3),
            "restatements_flagged": share_at_least(duplicate_cos, backend.NEAR_DUPLICATE_SCORE),
            "related_flagged": share_at_least(related_cos, backend.NEAR_DUPLICATE_SCORE),
            "threshold_tradeoff": {
                str(t): {
                    "restatements_flagged": share_at_least(duplicate_cos, t),
                    "related_flagged": share_at_least(related_cos, t),
                }
                for t in (0.75, 0.78, 0.8, 0.82, 0.85, 0.88, 0.9)
            },
        },
        "timing_ms": {
            "embed_corpus_total": round(embed_seconds * 1000, 1),
            "embed_query_p50": round(float(np.median(embed_ms)), 3),
            **{f"search_{mode}_p50": round(float(np.median(v)), 3) for mode, v in search_ms.items()},
            **{f"search_{mode}_p95": round(float(np.percentile(v, 95)), 3) for mode, v in search_ms.items()},
        },
    }
    if grid:
        result["fusion_grid"] = fusion_grid(deep, created)
    return result


def _dup_vectors(data: dict, embedder: object) -> np.ndarray:
    return np.asarray(embedder.embed([d["content"] for d in data["duplicates"]]), np.float32)  # type: ignore[attr-defined]


def fusion_grid(deep: list[tuple[dict, list[str], list[str]]], created: dict[str, str]) -> list[dict]:
    """recall@5 / recall@10 / MRR of the fusion for each (k, keyword weight, depth, recency weight)."""
    rows = []
    for k in (10, 20, 30, 60, 100):
        for w_kw in (0.5, 0.75, 1.0, 1.25, 1.5, 2.0):
            for depth in (10, 20, 30, 50, 100):
                for recency in (0.0, 0.1, 0.25, 0.5):
                    metrics = [
                        rank_metrics(
                            fuse(sem, kw, created, k=k, w_kw=w_kw, depth=depth, recency=recency),
                            set(q["relevant"]),
                        )
                        for q, sem, kw in deep
                    ]
                    changed = [m for (q, _, _), m in zip(deep, metrics, strict=True) if q["category"] == "changed"]
                    rows.append(
                        {
                            "k": k,
                            "w_kw": w_kw,
                            "depth": depth,
                            "recency": recency,
                            **mean(metrics),
                            "changed_mrr": mean(changed)["mrr"] if changed else None,
                        }
                    )
    return rows


def scale(n: int, cache: Path, data: dict, embedder: object, *, repeats: int) -> dict:
    """Hybrid vs semantic latency on a bulk-loaded store of n memories (cached in `cache`)."""
    root = _common.ensure_store(cache, n)
    texts = [q["query"] for q in data["queries"]] + list(data["unanswerable"])
    qvs = np.asarray(embedder.embed(texts), np.float32)  # type: ignore[attr-defined]
    t0 = time.perf_counter()
    store = MemoryStore(root, _common.COLLECTION, embedder=embedder)  # type: ignore[arg-type]
    open_s = time.perf_counter() - t0
    search: dict[str, list[float]] = {"semantic": [], "hybrid": [], "keyword": []}
    full: dict[str, list[float]] = {"semantic": [], "hybrid": []}
    for text, qv in zip(texts * repeats, np.concatenate([qvs] * repeats), strict=True):
        for mode in search:  # interleaved, so load on the machine hits every mode alike
            t0 = time.perf_counter()
            store.search(text, limit=5, mode=mode, query_vector=qv)
            search[mode].append((time.perf_counter() - t0) * 1000)
    for text in texts[:100]:
        for mode in full:  # what a recall call pays: the query embedding plus the search
            t0 = time.perf_counter()
            store.search(text, limit=5, mode=mode)
            full[mode].append((time.perf_counter() - t0) * 1000)
    count = store.stats()["count"]
    store.close()

    def p(values: list[float], q: float) -> float:
        return round(float(np.percentile(values, q)), 3)

    out = {
        "n": count,
        "open_s": round(open_s, 3),
        "search_ms": {m: {"p50": p(v, 50), "p95": p(v, 95)} for m, v in search.items()},
        "recall_ms": {m: {"p50": p(v, 50), "p95": p(v, 95)} for m, v in full.items()},
    }
    out["hybrid_over_semantic"] = {
        "search_p50": round(out["search_ms"]["hybrid"]["p50"] / out["search_ms"]["semantic"]["p50"], 3),
        "recall_p50": round(out["recall_ms"]["hybrid"]["p50"] / out["recall_ms"]["semantic"]["p50"], 3),
        "recall_p95": round(out["recall_ms"]["hybrid"]["p95"] / out["recall_ms"]["semantic"]["p95"], 3),
    }
    return out


def conversation_sets(embedder: object, cache: Path, *, quick: bool) -> dict:
    """The conversation sets through conversations.py, plain hybrid and with the fields (see the module docstring);
    per variant the overall and by-type scores and the search latency (per-question detail: conversations.py)."""
    from benchmarks import convdata, conversations

    sets = conversations.find_sets([convdata.DATA_DIR], None)
    if quick:
        first = next(iter(sets))
        sets = {first: [conversations.shorten(sets[first][0], 8)]}
    fields = conversations.probe_fields(embedder)
    out: dict = {"fields_supported": list(fields), "sets": {}}
    for name, convs in sets.items():
        _common.log(f"conversations: {name}")
        data = conversations.evaluate_set(name, convs, embedder, cache, ["hybrid", "hybrid+fields"], fields)
        variants = {
            variant: {k: v[k] for k in ("overall", "by_type", "search_ms")} if v["available"] else v
            for variant, v in data["variants"].items()
        }
        questions = sum(len(c["questions"]) for c in convs)
        out["sets"][name] = {"conversations": len(convs), "questions": questions, "variants": variants}
    return out


def print_conversations(result: dict) -> None:
    from benchmarks import convdata

    print(f"\nconversations (fields kept by the store: {', '.join(result['fields_supported']) or 'none'}):")
    headers = ["set", "variant", "R@5", "R@10", "MRR", *(f"{t} R@10" for t in convdata.TYPES), "search p50 ms"]
    rows = []
    for name, data in result["sets"].items():
        for variant, v in data["variants"].items():
            if not v.get("available", True):
                rows.append([name, variant, "n/a", "", "", *([""] * len(convdata.TYPES)), ""])
                continue
            o, by = v["overall"], v["by_type"]
            cells = [f"{by[t]['recall@10']} ({by[t]['n']})" if t in by else "-" for t in convdata.TYPES]
            rows.append([f"{name} ({data['questions']} q.)", variant, o["recall@5"], o["recall@10"], o["mrr"], *cells])
            rows[-1].append(v["search_ms"]["p50"])
    print(_common.table(headers, rows))


def print_report(result: dict) -> None:
    f = result["fusion"]
    print(
        f"{result['queries']} queries over {result['memories']} memories "
        f"(hybrid: {f['kind']} fusion, vector weight {f['vector_weight']}, depth {f['depth']} a side; hybrid_convex.py)"
    )
    print(f"{'':14}" + "".join(f"{mode:>27}" for mode in MODES))
    print(f"{'':14}" + "   R@5   R@10    MRR      " * 3)
    rows = [("all", result["queries"], result["overall"])]
    rows += [(cat, v["n"], v) for cat, v in result["by_category"].items()]
    for name, n, values in rows:
        cells = "".join(
            f"   {values[m]['recall@5']:.3f}  {values[m]['recall@10']:.3f}  {values[m]['mrr']:.3f}     " for m in MODES
        )
        print(f"{name:>10} {n:>3}{cells}")
    print("\ncosine scale (min / p5 / median / p95 / max):")
    for name, stats in result["score_scale"].items():
        if "min" in stats:
            print(f"  {name:32} " + " / ".join(f"{stats[k]:.3f}" for k in ("min", "p5", "median", "p95", "max")))
    note = result["score_scale"]["weak_match_note"]
    print(
        f"'no strong match' note (top score < {note['threshold']}), answerable / unanswerable queries flagged: "
        + ", ".join(f"{m} {note[m]['answerable_flagged']}/{note[m]['unanswerable_flagged']}" for m in MODES)
    )
    nd = result["near_duplicates"]
    print(
        f"near-duplicates at {nd['threshold']}: add() named the original for {nd['add_similar_found_original']} of "
        f"the restatements; {nd['related_flagged']} of distinct same-topic pairs would be flagged"
    )
    print("\ntiming (ms): " + ", ".join(f"{k} {v}" for k, v in result["timing_ms"].items()))
    if "fusion_grid" in result:
        best = sorted(result["fusion_grid"], key=lambda r: (-r["recall@10"], -r["mrr"]))[:8]
        print("\nfusion grid, best by recall@10 (of", len(result["fusion_grid"]), "settings):")
        for r in best:
            print("  " + ", ".join(f"{k} {v}" for k, v in r.items()))
    if "scale" in result:
        s = result["scale"]
        print(
            f"\nat {s['n']:,} memories (open {s['open_s']} s): search ms p50/p95 "
            + ", ".join(f"{m} {v['p50']}/{v['p95']}" for m, v in s["search_ms"].items())
            + "; recall (embed + search) ms p50/p95 "
            + ", ".join(f"{m} {v['p50']}/{v['p95']}" for m, v in s["recall_ms"].items())
        )
        print(f"hybrid / semantic: {s['hybrid_over_semantic']}")
    if "conversations" in result:
        print_conversations(result["conversations"])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true", help="smoke test: 60 queries, no grid, --scale 2000")
    parser.add_argument("--fake", action="store_true", help="use the tests' fake embedder (no model; no --scale)")
    parser.add_argument("--scale", type=int, default=0, help="also time hybrid vs semantic at this many memories")
    parser.add_argument("--repeats", type=int, default=3, help="passes over the queries at --scale (default 3)")
    parser.add_argument("--cache", default=None, help="cache of built stores (default: $MEMSERVER_BENCH_CACHE)")
    parser.add_argument("--no-conversations", action="store_true", help="skip the conversation sets")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"result file (default {RESULTS.relative_to(ROOT)})")
    args = parser.parse_args(argv)

    data = json.loads(DATA.read_text(encoding="utf-8"))
    embedder = load_embedder(args.fake)
    result = evaluate(data, embedder, limit=60 if args.quick else None, grid=not args.quick)
    n = 2000 if args.quick and not args.fake else args.scale
    if n:
        result["scale"] = scale(
            n, _common.cache_dir(args.cache), data, embedder, repeats=1 if args.quick else args.repeats
        )
    if not args.no_conversations:
        cache = _common.cache_dir(args.cache) / "conversations"
        cache.mkdir(parents=True, exist_ok=True)
        result["conversations"] = conversation_sets(embedder, cache, quick=args.quick)
    result["embedder"] = getattr(embedder, "model_name", type(embedder).__name__)
    result["machine"] = _common.machine()
    print_report(result)
    if not args.quick or args.out != RESULTS:
        write(result, args.out)
    return 0


def write(result: dict, out: Path) -> None:
    """The result as JSON; the fusion grid goes beside it (<name>_grid.json), one setting per line."""
    out.parent.mkdir(parents=True, exist_ok=True)
    result = dict(result)
    grid = result.pop("fusion_grid", None)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"\nwrote {out}")
    if grid is not None:
        grid_out = out.with_name(out.stem + "_grid.json")
        grid_out.write_text("[\n" + ",\n".join(json.dumps(row) for row in grid) + "\n]\n", encoding="utf-8")
        print(f"wrote {grid_out}")


if __name__ == "__main__":
    sys.exit(main())
