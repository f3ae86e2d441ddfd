"""Retrieval lab (issue 15): the store's hybrid ranking rebuilt from public pieces, and variants of it, measured.

Offline, no store: each conversation of benchmarks/data/conversations/<set>/ (and benchmarks/data/quality.json's
703 memories) becomes one candidate set, as the store's search path sees it after the conversation filter: the turn
vectors (the real all-MiniLM-L6-v2, cached like conversations.py), `memserver.retrieval.bm25.KeywordIndex` over the
memory text plus `terms.date_text(created_at)`, numpy cosine, `memserver.retrieval.hybrid_rrf.reciprocal_rank_fusion`.
The
conversation fields of issue 12 are simulated from the data as the store will keep them: speaker, session (the
previous turn of the same session), occurred_at (the session's date plus a minute per turn).

1. `store`: the store's hybrid of issue 15 exactly, i.e. PostgreSQL's ranking (KeywordIndex top 20 with its
   argpartition cut, RRF of each side's top 20, k 60, recency 0.1; a recall of 10 and a recall of 50 combined as
   conversations.py does), checked question by question
   against benchmarks/results/conversations.json (`--check`), plus `semantic` and `keyword`.
2. Variants (`lab/ranking.Config`), by question type and set, single changes and combinations; a tuned constant is
   chosen by leave-one-conversation-out over the 6 conversations (pick on 5, score the 6th), and the quality set
   is scored with the constant chosen on all 6 (it never tunes anything).
3. `--latency`: microbenchmarks of the pieces at 100k memories (hnswlib + KeywordIndex, no store), today's path
   against the recommended one, alternating.

    uv run --with PyStemmer python -m benchmarks.lab.retrieval_lab            # all; writes results/retrieval_lab.json
    uv run --with PyStemmer python -m benchmarks.lab.retrieval_lab --latency  # plus the 100k microbenchmarks (~3 min)
    uv run --with PyStemmer python -m benchmarks.lab.retrieval_lab --quick    # smoke test: one conversation
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _common, convdata, conversations
from benchmarks.lab import ranking as lr
from benchmarks.lab.experiments import EXPERIMENTS, QUICK, Experiment
from memserver.retrieval.bm25 import KeywordIndex
from memserver.retrieval.hybrid_rrf import reciprocal_rank_fusion
from memserver.retrieval.terms import date_text

ROOT = Path(__file__).resolve().parents[2]

RESULTS = ROOT / "benchmarks" / "results" / "retrieval_lab.json"
CONV_RESULTS = ROOT / "benchmarks" / "results" / "conversations.json"
TYPES = convdata.TYPES
QUALITY_TYPES = ("paraphrase", "ident", "changed", "distractor", "exact", "date")


# --- data ----------------------------------------------------------------------------------------------------------


class Item:
    """One question of a candidate set: id, type, text, vector, relevant rows."""

    def __init__(self, qid: str, kind: str, text: str, vector: np.ndarray, relevant: set[int]) -> None:
        self.qid, self.kind, self.text, self.vector, self.relevant = qid, kind, text, vector, relevant


class Set:
    """A candidate set and its questions (one conversation, or the quality set)."""

    def __init__(self, group: str, corpus: lr.Corpus, items: list[Item]) -> None:
        self.group, self.corpus, self.items = group, corpus, items
        self._analysed: dict[tuple[str, str], lr.Analysed] = {}

    def analysed(self, item: Item, stem: str) -> lr.Analysed:
        key = (item.qid, stem)
        if key not in self._analysed:
            self._analysed[key] = lr.analyse(self.corpus, item.text, stem)
        return self._analysed[key]


def conversation_set(
    conv: dict[str, Any], group: str, embedder: Any, cache: Path, *, bare: bool = False, keys: bool = True
) -> Set:
    """One conversation; `bare`: the memory text without the `Speaker: ` prefix (the speaker only as a field);
    `keys`: also embed the second keys (dated, previous turn + turn)."""
    rows = conversations.turn_rows(conv)
    pairs = convdata.turns(conv)
    if bare:
        for r, (_, turn) in zip(rows, pairs, strict=True):
            r["plain"] = convdata.memory_text({**turn, "speaker": ""})[2:]  # "Speaker: text" -> "text"
            r["dated"] = conversations.dated(r["plain"], datetime.fromisoformat(r["at"][:10]))
    speakers = list(conv["speakers"])
    prev = np.full(len(rows), -1)
    for i in range(1, len(pairs)):
        if pairs[i][0]["id"] == pairs[i - 1][0]["id"]:
            prev[i] = i - 1
    plain = [r["plain"] for r in rows]
    joint = [plain[i] if prev[i] < 0 else f"{plain[prev[i]]} {plain[i]}" for i in range(len(rows))]
    vectors = {}
    variants = (("plain", plain), ("dated", [r["dated"] for r in rows]), ("joint", joint))
    for key, texts in variants if keys else variants[:1]:
        v, seconds = conversations.cached_vectors(cache, embedder, texts, query=False)
        if seconds is not None:
            _common.log(f"  {conv['id']}: embedded {len(texts)} {key} turns in {seconds:.1f} s")
        vectors[key] = unit(v)
    at = [r["at"] for r in rows]
    last = datetime.fromisoformat(conv["sessions"][-1]["date"])
    corpus = lr.Corpus(
        name=conv["id"],
        texts=plain,
        vectors=vectors["plain"],
        created=at,
        occurred=np.array([lr.day_number(datetime.fromisoformat(t)) for t in at]),
        speaker=np.array([speakers.index(t["speaker"]) for _, t in pairs]),
        speakers=speakers,
        prev=prev,
        timeword=np.array([bool(lr.TIME_WORDS.search(t)) for t in plain]),
        now=last + timedelta(days=1),  # the questions come after the last session; they carry no date
        extra_vectors={k: v for k, v in vectors.items() if k != "plain"},
        index_texts=[f"{t} {date_text(c)}" for t, c in zip(plain, at, strict=True)],
    )
    row_of = {r["turn"]: i for i, r in enumerate(rows)}
    texts = [q["question"] for q in conv["questions"]]
    qv, _ = conversations.cached_vectors(cache, embedder, texts, query=True)
    items = [
        Item(f"{conv['id']}/{q['id']}", q["type"], q["question"], v, {row_of[e] for e in q["evidence"]})
        for q, v in zip(conv["questions"], qv, strict=True)
    ]
    return Set(group, corpus, items)


def quality_set(embedder: Any, cache: Path) -> Set:
    data = json.loads(_common.QUALITY.read_text())
    mems = data["memories"]
    texts = [m["content"] for m in mems]
    v, _ = conversations.cached_vectors(cache, embedder, texts, query=False)
    created = [m["created_at"] for m in mems]
    dated = [conversations.dated(t, datetime.fromisoformat(c)) for t, c in zip(texts, created, strict=True)]
    vd, _ = conversations.cached_vectors(cache, embedder, dated, query=False)
    n = len(mems)
    latest = max(datetime.fromisoformat(c) for c in created)
    corpus = lr.Corpus(
        name="quality",
        texts=texts,
        vectors=unit(v),
        created=created,
        occurred=np.array([lr.day_number(datetime.fromisoformat(c)) for c in created]),
        speaker=np.full(n, -1),
        speakers=[],
        prev=np.full(n, -1),
        timeword=np.array([bool(lr.TIME_WORDS.search(t)) for t in texts]),
        now=latest.replace(tzinfo=None),
        extra_vectors={"dated": unit(vd), "joint": unit(v)},  # no sessions: the joint key is the turn itself
        index_texts=[f"{t} {date_text(c)}" for t, c in zip(texts, created, strict=True)],
    )
    row_of = {m["id"]: i for i, m in enumerate(mems)}
    qtexts = [q["query"] for q in data["queries"]]
    qv, _ = conversations.cached_vectors(cache, embedder, qtexts, query=True)
    items = [
        Item(f"quality/{q['id']}", q["category"], q["query"], vec, {row_of[r] for r in q["relevant"]})
        for q, vec in zip(data["queries"], qv, strict=True)
    ]
    return Set("quality", corpus, items)


def unit(v: np.ndarray) -> np.ndarray:
    v = np.asarray(v, np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)  # what the store keeps (_check_vector)


# --- the store's hybrid, rebuilt -------------------------------------------------------------------------------------


def store_rankings(s: Set, item: Item, kindex: KeywordIndex, limits: Sequence[int]) -> dict[str, list[int]]:
    """Today's semantic, keyword and hybrid rankings as the store returns them, for a recall of 10 then 50."""
    c = s.corpus
    cos = np.einsum("ij,j->i", c.vectors, item.vector)
    near_all = lr.top_k(cos, lr.DEEP).tolist()  # the store's _exact: best first, ties by row
    out: dict[str, list[int]] = {}
    for mode in ("semantic", "keyword", "hybrid"):
        ranking: list[int] = []
        for limit in limits:
            depth = max(limit, 20)  # store.FUSION_DEPTH
            words = [int(k) for k, _ in kindex.search(item.text, depth)]
            if mode == "semantic":
                got = near_all[:limit]
            elif mode == "keyword":
                got = words[:limit]
            else:
                near = near_all[:depth]
                order = _fuse(c, near[:20], words[:20])
                if depth > 20:
                    head = set(order)
                    order += [r for r in _fuse(c, near, words) if r not in head]
                got = order[:limit]
            ranking += [r for r in got if r not in ranking]
        out[mode] = ranking
    return out


def _fuse(c: lr.Corpus, near: list[int], words: list[int]) -> list[int]:
    """The store's fusion: RRF (k 60, weights 1, 1) plus the recency ranking of the pool (weight 0.1)."""
    pool = list(dict.fromkeys(near + words))
    rankings = [near, words, sorted(pool, key=c.created.__getitem__, reverse=True)]
    return [r for r, _ in reciprocal_rank_fusion(rankings, k=60, weights=[1.0, 1.0, 0.1])]


def keyword_index(c: lr.Corpus) -> KeywordIndex:
    # The research-phase store's BM25 constants (the lab's baseline, `Config()`); the store now uses bm25.K1/B.
    index = KeywordIndex(k1=1.2, b=0.75)
    index.add_many(enumerate(c.index_texts))  # keys = rows, as the store's KeywordDerivedIndex
    return index


# --- scoring -------------------------------------------------------------------------------------------------------


def metrics(ranking: Sequence[int], relevant: set[int]) -> dict[str, float]:
    first = next((i + 1 for i, r in enumerate(ranking[: lr.DEEP]) if r in relevant), 0)
    return {
        "r5": len(relevant & set(ranking[:5])) / len(relevant),
        "r10": len(relevant & set(ranking[:10])) / len(relevant),
        "mrr": 1.0 / first if first else 0.0,
        "first": first,
    }


Scored = dict[str, dict[str, float]]  # question id -> metrics


_SCORE_CACHE: dict[tuple[lr.Config, tuple[str, ...]], Scored] = {}


def score_config(cfg: lr.Config, sets: Sequence[Set]) -> Scored:
    key = (lr.replace(cfg, name=""), tuple(s.corpus.name for s in sets))
    if key not in _SCORE_CACHE:
        _SCORE_CACHE[key] = _score(cfg, sets)
    return _SCORE_CACHE[key]


def _score(cfg: lr.Config, sets: Sequence[Set]) -> Scored:
    out: Scored = {}
    for s in sets:
        for item in s.items:
            ranking = lr.rank(cfg, s.corpus, lr.Query(item.text, item.vector), s.analysed(item, cfg.stem))
            out[item.qid] = metrics(ranking, item.relevant)
    return out


def summary(scored: Scored, sets: Sequence[Set]) -> dict[str, Any]:
    """{group: {"all": {...}, type: {...}}} with R@5 / R@10 / MRR in percent and n."""
    out: dict[str, Any] = {}
    for group in dict.fromkeys(s.group for s in sets):
        items = [it for s in sets if s.group == group for it in s.items if it.qid in scored]
        if not items:
            continue
        types = QUALITY_TYPES if group == "quality" else TYPES
        cells = {"all": items, **{t: [it for it in items if it.kind == t] for t in types}}
        out[group] = {k: _mean([scored[it.qid] for it in v]) for k, v in cells.items() if v}
    return out


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {
        "n": len(rows),
        **{k: round(100 * statistics.fmean(r[k] for r in rows), 1) for k in ("r5", "r10", "mrr")},
    }


def objective(scored: Scored, qids: Sequence[str]) -> tuple[float, float]:
    """What leave-one-out maximises: mean R@10, then MRR."""
    return (
        statistics.fmean(scored[q]["r10"] for q in qids),
        statistics.fmean(scored[q]["mrr"] for q in qids),
    )


def leave_one_out(grid: list[lr.Config], convs: list[Set], quality: Set | None) -> dict[str, Any]:
    """Pick the grid's best config on 5 conversations, score the 6th with it; the quality set gets the pick on all."""
    per_cfg = [score_config(cfg, convs) for cfg in grid]
    scored: Scored = {}
    picks: dict[str, str] = {}
    for held in convs:
        train = [it.qid for s in convs if s is not held or len(convs) == 1 for it in s.items]  # --quick: 1
        best = max(range(len(grid)), key=lambda i: (objective(per_cfg[i], train), -i))
        picks[held.corpus.name] = grid[best].name
        scored.update({it.qid: per_cfg[best][it.qid] for it in held.items})
    everything = [it.qid for s in convs for it in s.items]
    best_all = max(range(len(grid)), key=lambda i: (objective(per_cfg[i], everything), -i))
    if quality is not None:
        scored.update(score_config(grid[best_all], [quality]))
    return {"scored": scored, "picks": picks, "chosen_on_all": grid[best_all].name, "config": grid[best_all]}


def greedy(
    base: lr.Config, steps: Sequence[tuple[str, Sequence[object]]], convs: list[Set], train: list[str]
) -> tuple[lr.Config, list[str]]:
    """Forward selection: each step tries its values with the earlier picks fixed, keeps the best on `train`."""
    cfg, path = base, []
    for key, values in steps:
        keys = key.split("+")  # "k1+b": values are tuples
        options = [lr.replace(cfg, **dict(zip(keys, v if isinstance(v, tuple) else (v,), strict=True))) for v in values]
        scores = [objective(score_config(o, convs), train) for o in options]
        best = max(range(len(options)), key=lambda i: (scores[i], -i))
        cfg = options[best]
        path.append(f"{key}={values[best]}")
    return lr.replace(cfg, name=", ".join(path)), path


def nested_loo(
    base: lr.Config, steps: Sequence[tuple[str, Sequence[object]]], convs: list[Set], quality: Set | None
) -> dict[str, Any]:
    """The whole forward selection redone on 5 conversations for each held-out 6th (nothing tuned on what it scores);
    the quality set gets the selection made on all 6."""
    scored: Scored = {}
    picks: dict[str, list[str]] = {}
    for held in convs:
        train = [it.qid for s in convs if s is not held or len(convs) == 1 for it in s.items]
        cfg, path = greedy(base, steps, convs, train)
        picks[held.corpus.name] = path
        scored.update({it.qid: score_config(cfg, convs)[it.qid] for it in held.items})
    cfg_all, path_all = greedy(base, steps, convs, [it.qid for s in convs for it in s.items])
    if quality is not None:
        scored.update(score_config(cfg_all, [quality]))
    return {"scored": scored, "picks": picks, "chosen_on_all": path_all, "config": cfg_all}


# --- running the experiments ---------------------------------------------------------------------------------------


def run_store(sets: list[Set]) -> dict[str, Scored]:
    out: dict[str, Scored] = {"store": {}, "store-semantic": {}, "store-keyword": {}, "store-limit50": {}}
    for s in sets:
        kindex = keyword_index(s.corpus)
        limits = (lr.DEEP,) if s.group == "quality" else (10, lr.DEEP)  # quality.py ranks with limit 50
        for item in s.items:
            got = store_rankings(s, item, kindex, limits)
            out["store"][item.qid] = metrics(got["hybrid"], item.relevant)
            out["store-semantic"][item.qid] = metrics(got["semantic"], item.relevant)
            out["store-keyword"][item.qid] = metrics(got["keyword"], item.relevant)
            if s.group != "quality":
                only50 = store_rankings(s, item, kindex, (lr.DEEP,))["hybrid"]
                out["store-limit50"][item.qid] = metrics(only50, item.relevant)
    return out


def check_store(scored: dict[str, Scored], sets: list[Set]) -> dict[str, Any]:
    """Compare the rebuilt store rankings with conversations.py's per-question results and quality.json's means."""
    report: dict[str, Any] = {}
    if CONV_RESULTS.exists():
        saved = json.loads(CONV_RESULTS.read_text())
        for mode, key in (("hybrid", "store"), ("semantic", "store-semantic"), ("keyword", "store-keyword")):
            same, diff = 0, []
            for data in saved["sets"].values():
                per_q = data["variants"].get(mode, {}).get("per_question", {})
                for qid, (first, r10) in per_q.items():
                    mine = scored[key].get(qid)
                    if mine is None:
                        continue
                    if mine["first"] == first and abs(mine["r10"] - r10) < 1e-3:
                        same += 1
                    else:
                        diff.append(qid)
            report[f"conversations_{mode}"] = {"same": same, "different": diff}
    qfile = _common.RESULTS / "quality.json"
    quality = [s for s in sets if s.group == "quality"]
    if qfile.exists() and quality:
        saved_q = json.loads(qfile.read_text())["overall"]
        mine_q = summary(scored["store"], quality)["quality"]["all"]
        report["quality_hybrid"] = {
            "saved": saved_q["hybrid"],
            "lab": {"recall@5": mine_q["r5"], "recall@10": mine_q["r10"], "mrr": mine_q["mrr"]},
        }
    return report


def run_experiments(experiments: list[Experiment], sets: list[Set]) -> dict[str, Any]:
    convs = [s for s in sets if s.group != "quality"]
    quality = next((s for s in sets if s.group == "quality"), None)
    results: dict[str, Any] = {}
    for exp in experiments:
        t0 = time.perf_counter()
        if exp.steps and exp.train_group:
            train = [it.qid for s in convs if s.group == exp.train_group for it in s.items]
            cfg, path = greedy(exp.grid[0], exp.steps, convs, train)
            scored = {q: m for q, m in score_config(cfg, sets).items() if q not in set(train)}
            entry = {"tuned": True, "trained_on": exp.train_group, "chosen": path, "config": cfg}
        elif exp.steps:
            loo = nested_loo(exp.grid[0], exp.steps, convs, quality)
            scored = loo.pop("scored")
            entry = {**loo, "tuned": True, "steps": [[k, list(v)] for k, v in exp.steps]}
            entry["in_sample"] = summary(score_config(loo["config"], convs), convs)
        elif len(exp.grid) == 1:
            cfg = exp.grid[0]
            scored = score_config(cfg, sets)
            entry: dict[str, Any] = {"config": cfg, "tuned": False}
        else:
            loo = leave_one_out(exp.grid, convs, quality)
            scored = loo.pop("scored")
            entry = {**loo, "tuned": True, "grid": [c.name for c in exp.grid]}
            # the constant picked on all 6 conversations, scored on them (in-sample: for reference only)
            entry["in_sample"] = summary(score_config(loo["config"], convs), convs)
        entry["summary"] = summary(scored, sets)
        entry["per_question"] = {q: [m["first"], round(m["r10"], 3)] for q, m in scored.items()}
        entry["seconds"] = round(time.perf_counter() - t0, 1)
        entry["note"] = exp.note
        results[exp.label] = entry
        _common.log(f"  {exp.label}: {line(entry['summary'])} ({entry['seconds']} s)")
    return results


def line(summ: dict[str, Any]) -> str:
    return "  ".join(f"{g} {v['all']['r5']}/{v['all']['r10']}/{v['all']['mrr']}" for g, v in summ.items())


def print_table(results: dict[str, Any], group: str, base: str) -> None:
    types = QUALITY_TYPES if group == "quality" else TYPES
    ref = results[base]["summary"][group]
    headers = ["variant", "all R@5/R@10/MRR", *(f"{t} R@10" for t in types), "worst type Δ"]
    rows = []
    for label, entry in results.items():
        summ = entry["summary"].get(group)
        if summ is None:
            continue
        a = summ["all"]
        cells = [f"{summ[t]['r10']}" for t in types if t in summ]
        worst = min(summ[t]["r10"] - ref[t]["r10"] for t in types if t in summ and t in ref)
        rows.append([label, f"{a['r5']} / {a['r10']} / {a['mrr']}", *cells, f"{worst:+.1f}"])
    n = ref["all"]["n"]
    print(f"\n{group} ({n} questions), R@10 by type; worst type Δ against {base}")
    print(_common.table(headers, rows))


def markdown(results: dict[str, Any], labels: Sequence[str], base: str = "store") -> str:
    """README tables from a results JSON: per set, R@5 / R@10 / MRR overall and R@10 by type (Δ against base)."""
    out = []
    for group in ("harbour", "lantern", "quality"):
        types = QUALITY_TYPES if group == "quality" else TYPES
        ref = results[base]["summary"].get(group)
        if ref is None:
            continue
        n = {t: ref[t]["n"] for t in types if t in ref}
        head = ["variant", f"all ({ref['all']['n']}) R@5 / R@10 / MRR", *(f"{t} ({n[t]})" for t in n)]
        rows = []
        for label in labels:
            summ = results.get(label, {}).get("summary", {}).get(group)
            if summ is None:
                continue
            a = summ["all"]
            cells = (
                [f"{a['r5']} / **{a['r10']}** / {a['mrr']}"]
                if label != base
                else [f"{a['r5']} / {a['r10']} / {a['mrr']}"]
            )
            for t in n:
                d = summ[t]["r10"] - ref[t]["r10"]
                cells.append(f"{summ[t]['r10']}" if label == base else f"{summ[t]['r10']} ({d:+.1f})")
            rows.append([label, *cells])
        out.append(f"**{group}** (R@10 by type, Δ against `{base}`)\n\n" + _common.table(head, rows))
    return "\n\n".join(out)


def to_json(results: dict[str, Any]) -> dict[str, Any]:
    def clean(v: Any) -> Any:
        if isinstance(v, lr.Config):
            return {k: getattr(v, k) for k in v.__dataclass_fields__}
        if isinstance(v, dict):
            return {k: clean(x) for k, x in v.items()}
        if isinstance(v, (list, tuple)):
            return [clean(x) for x in v]
        return v

    return clean(results)  # type: ignore[no-any-return]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__)
    parser.add_argument("--quick", action="store_true", help="smoke test: one conversation, a few variants")
    parser.add_argument("--latency", action="store_true", help="also run the 100k microbenchmarks")
    parser.add_argument("--only", nargs="+", default=None, help="run only the experiments whose label starts so")
    parser.add_argument("--bare", action="store_true", help="turns stored without the `Speaker: ` prefix")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument("--cache", type=Path, default=None, help="embedding cache (default: as conversations.py)")
    parser.add_argument("--markdown", nargs="*", default=None, help="print README tables of --out's labels and stop")
    parser.add_argument("--latency-only", action="store_true", help="run the microbenchmarks into --out's JSON")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    if args.markdown is not None:
        saved = json.loads(args.out.read_text())["results"]
        print(markdown(saved, args.markdown or list(saved)))
        return 0
    if args.latency_only:
        from benchmarks.lab import latency as lab_latency

        saved = json.loads(args.out.read_text()) if args.out.exists() else {}
        saved["latency"] = lab_latency.run()
        saved["latency"]["command"] = "uv run --with PyStemmer python -m benchmarks.lab.retrieval_lab --latency-only"
        saved["latency"]["machine"] = _common.machine()
        _common.write_json(args.out, saved)
        return 0

    from memserver.embedding.embedder import Embedder

    embedder = Embedder().load()
    cache = _common.cache_dir(None) / "conversations" if args.cache is None else args.cache
    cache.mkdir(parents=True, exist_ok=True)
    found = convdata.load()
    sets: list[Set] = []
    if args.quick:  # the first 8 sessions of one conversation, no second keys, no quality set
        group, convs = next(iter(found.items()))
        sets.append(conversation_set(conversations.shorten(convs[0], 8), group, embedder, cache, keys=False))
    else:
        for group, convs in found.items():
            sets += [conversation_set(c, group, embedder, cache, bare=args.bare) for c in convs]
        sets.append(quality_set(embedder, cache))
    _common.log(f"{len(sets)} candidate sets, {sum(len(s.items) for s in sets)} questions")

    store = run_store(sets)
    check = check_store(store, sets)
    results: dict[str, Any] = {
        label: {"summary": summary(sc, sets), "tuned": False, "note": "the store today, rebuilt"}
        for label, sc in store.items()
        if sc
    }
    for label, sc in store.items():
        if sc:
            results[label]["per_question"] = {q: [m["first"], round(m["r10"], 3)] for q, m in sc.items()}
    experiments = QUICK if args.quick else EXPERIMENTS
    if args.only:
        experiments = [e for e in experiments if any(e.label.startswith(o) for o in args.only)]
    results.update(run_experiments(experiments, sets))
    for group in dict.fromkeys(s.group for s in sets):
        print_table(results, group, "store")
    print(
        "\nstore check:",
        json.dumps(
            {
                k: (v if "different" not in v else {"same": v["same"], "different": len(v["different"])})
                for k, v in check.items()
            }
        ),
    )
    out: dict[str, Any] = {
        "command": "uv run --with PyStemmer python -m benchmarks.lab.retrieval_lab " + " ".join(argv or sys.argv[1:]),
        "store_check": check,
        "results": to_json(results),
    }
    if args.latency:
        from benchmarks.lab import latency as lab_latency

        out["latency"] = lab_latency.run()
    from benchmarks.lab import latency as lab_latency

    out["ingest_cost"] = lab_latency.ingest_pieces([t for s in sets for t in s.corpus.texts])
    _common.log(f"ingest: {out['ingest_cost']}")
    out["seconds"] = round(time.perf_counter() - started, 1)
    out["machine"] = _common.machine()
    if not args.quick or args.out != RESULTS:
        _common.write_json(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
