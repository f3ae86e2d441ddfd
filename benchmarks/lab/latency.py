"""Microbenchmarks for retrieval_lab.py --latency: what the recommended ranking adds to a hybrid search at 100k.

No store: the pieces the store's search path runs, on 100k synthetic memories (benchmarks/_common.synthetic: real
sentences mixed, with their vectors), with hnswlib (M 16, ef 256 as the store; ef_construction 100 to build
faster, which changes the graph, not the cost per query much) and memserver.retrieval.bm25.KeywordIndex over the
contents
plus date words. Fields as the catalog will hold them: speaker codes (8 speakers), sessions of 20 turns (previous
turn = the row before), occurred_at one minute apart, a time-word flag. Unfiltered queries (the +1 ms budget is
about the unfiltered hybrid search at 100k), the quality set's 339 queries, three passes, today and new alternating
query by query, medians (and the median of per-query ratios).

Today (PostgreSQL's ranking, the store's at the time): HNSW top 20, KeywordIndex top 20, RRF with the recency
ranking, cosine of the first 10.
New: HNSW top D, KeywordIndex top D, the deterministic tie cut (`lab/ranking.top_k` on the matches' scores), the
previous turn's BM25 and cosine for every pool row, speaker / window / when boosts as vectorised lookups over the
pool, convex or RRF fusion, cosine of the first 10; optional Rocchio second pass (one more HNSW query).
"""

from __future__ import annotations

import statistics
import time
from datetime import datetime
from typing import Any

import hnswlib
import numpy as np

from benchmarks import _common
from benchmarks.lab import ranking as lr
from memserver.retrieval.bm25 import KeywordIndex
from memserver.retrieval.terms import date_text

N = 100_000
SPEAKERS = 8
SESSION = 20


def build(n: int = N) -> dict[str, Any]:
    cache = _common.cache_dir(None)
    base, queries = _common.corpus()
    base_vecs = _common.base_vectors(cache, base)
    contents, created, vecs = [], [], np.empty((n, 384), np.float32)
    for i, rec in enumerate(_common.synthetic(n, base, base_vecs)):
        contents.append(rec["content"])
        created.append(rec["created_at"])
        vecs[i] = rec["vector"]
    t0 = time.perf_counter()
    kindex = KeywordIndex()
    kindex.add_many((i, f"{c} {date_text(t)}") for i, (c, t) in enumerate(zip(contents, created, strict=True)))
    t1 = time.perf_counter()
    index = hnswlib.Index(space="cosine", dim=384)
    index.init_index(max_elements=n, M=16, ef_construction=100)
    index.set_num_threads(1)
    index.add_items(vecs, np.arange(n))
    index.set_ef(256)
    t2 = time.perf_counter()
    _common.log(f"latency: keyword index {t1 - t0:.1f} s, hnsw {t2 - t1:.1f} s for {n} memories")
    rng = np.random.default_rng(3)
    prev = np.arange(n) - 1
    prev[::SESSION] = -1
    nxt = np.arange(n) + 1
    nxt[SESSION - 1 :: SESSION] = -1
    nxt[-1] = -1
    from benchmarks import conversations
    from memserver.embedding.embedder import Embedder

    qv, _ = conversations.cached_vectors(cache / "conversations", Embedder().load(), queries, query=True)
    return {
        "kindex": kindex,
        "hnsw": index,
        "vecs": vecs,
        "created": created,
        "occurred": np.arange(n, dtype=np.float64) / 1440.0 + 19358.0,
        "speaker": rng.integers(0, SPEAKERS, n).astype(np.int32),
        "prev": prev,
        "next": nxt,
        "timeword": rng.random(n) < 0.2,
        "queries": queries,
        "qvecs": np.asarray(qv, np.float32),
        "index_build_s": [round(t1 - t0, 1), round(t2 - t1, 1)],
    }


def today(d: dict[str, Any], text: str, q: np.ndarray) -> list[int]:
    labels, _ = d["hnsw"].knn_query(q, k=20)
    near = labels[0].tolist()
    words = [int(k) for k, _ in d["kindex"].search(text, 20)]
    pool = list(dict.fromkeys(near + words))
    created = d["created"]
    rankings = [near, words, sorted(pool, key=created.__getitem__, reverse=True)]
    fused: dict[int, float] = {}
    for ranking, w in zip(rankings, (1.0, 1.0, 0.1), strict=True):
        for r, row in enumerate(ranking, 1):
            fused[row] = fused.get(row, 0.0) + w / (60 + r)
    rows = [r for r, _ in sorted(fused.items(), key=lambda kv: kv[1], reverse=True)][:10]
    np.einsum("ij,j->i", d["vecs"][rows], q)
    return rows


def new(
    d: dict[str, Any],
    text: str,
    q: np.ndarray,
    matches: tuple[np.ndarray, np.ndarray],
    cfg: lr.Config,
    named: list[int],
    windows: list[tuple[float, float, bool]],
    when: bool,
) -> list[int]:
    """The recommended path; `matches` stands for the keyword index's own (docs, scores) of every matching row,
    which the search computes anyway before its cut (bm25.py would hand them over instead of only the top k)."""
    depth = cfg.depth
    labels, _ = d["hnsw"].knn_query(q, k=depth)
    near = labels[0]
    words_all = d["kindex"].search(text, depth)  # the cost of today's keyword search at depth D
    docs, scores = matches
    cut = lr.top_k(scores, min(depth, len(scores))) if len(scores) else np.empty(0, np.int64)
    words = docs[cut] if len(cut) else np.asarray([k for k, _ in words_all], np.int64)
    after = d["next"][near]  # the turns after the vector hits: their previous turn matched
    pool = np.unique(np.concatenate([near.astype(np.int64), after[after >= 0], words]))
    vecs = d["vecs"]
    cos = np.einsum("ij,j->i", vecs[pool], q)
    prev = d["prev"][pool]
    has = prev >= 0
    cos_prev = np.zeros(len(pool), np.float32)
    if cfg.prev_vec:
        cos_prev[has] = np.einsum("ij,j->i", vecs[prev[has]], q)
    vec = cos + cfg.prev_vec * cos_prev
    if cfg.next_vec:
        nxt = d["next"][pool]
        has_n = nxt >= 0
        cos_next = np.zeros(len(pool), np.float32)
        cos_next[has_n] = np.einsum("ij,j->i", vecs[nxt[has_n]], q)
        vec = vec + cfg.next_vec * cos_next

    def bm_of(rows: np.ndarray) -> np.ndarray:  # the BM25 score of any row: a binary search in the sorted matches
        out = np.zeros(len(rows))
        if len(docs):
            at = np.minimum(np.searchsorted(docs, rows), len(docs) - 1)
            hit = docs[at] == rows
            out[hit] = scores[at[hit]]
        return out

    kw = bm_of(pool)
    if cfg.prev_kw:
        kw_prev = np.zeros(len(pool))
        kw_prev[has] = bm_of(prev[has])
        kw = kw + cfg.prev_kw * kw_prev
    boost = np.zeros(len(pool))
    if named and cfg.speaker:  # a lookup table over the speaker codes, not np.isin (which sorts)
        table = np.zeros(SPEAKERS, bool)
        table[named] = True
        boost += cfg.speaker * table[d["speaker"][pool]]
    if windows and cfg.window:
        t = d["occurred"][pool]
        for lo, hi, _ in windows:
            boost += cfg.window * ((t >= lo) & (t < hi + 1 + cfg.window_after))
    if when and cfg.when:
        boost += cfg.when * d["timeword"][pool]
    if cfg.fusion == "convex":
        span = vec.max() - vec.min()
        nv = (vec - vec.min()) / span if span > 0 else np.ones_like(vec)
        nk = kw / kw.max() if kw.max() > 0 else kw
        score = cfg.weight * nv + (1 - cfg.weight) * nk + boost
        if cfg.recency:
            t = d["occurred"][pool]
            st = t.max() - t.min()
            score = score + cfg.recency * ((t - t.min()) / st if st > 0 else 0.0)
    else:
        rv = np.empty(len(pool))
        rv[np.lexsort((pool, -vec))] = np.arange(1, len(pool) + 1)
        rk = np.empty(len(pool))
        rk[np.lexsort((pool, -kw))] = np.arange(1, len(pool) + 1)
        score = 1 / (cfg.rrf_k + rv) + np.where(kw > 0, 1 / (cfg.rrf_k + rk), 0) + boost / (cfg.rrf_k + 1)
    top = pool[np.lexsort((pool, -score))[:10]]
    if cfg.prf:
        q2 = q + cfg.prf * vecs[top[: cfg.prf_m]].mean(axis=0)
        d["hnsw"].knn_query(q2 / np.linalg.norm(q2), k=depth)
    np.einsum("ij,j->i", vecs[top], q)
    return top.tolist()


def all_matches(kindex: KeywordIndex, text: str) -> tuple[np.ndarray, np.ndarray]:
    hits = kindex.search(text, len(kindex))
    docs = np.asarray([k for k, _ in hits], np.int64)
    scores = np.asarray([s for _, s in hits])
    order = np.argsort(docs)
    return docs[order], scores[order]


def run(cfgs: dict[str, lr.Config] | None = None, passes: int = 3) -> dict[str, Any]:
    from benchmarks.lab.experiments import RECOMMENDED

    cfgs = cfgs or {
        "recommended": RECOMMENDED,
        "recommended, depth 20": lr.replace(RECOMMENDED, depth=20),
        "recommended + PRF (a second HNSW query)": lr.replace(RECOMMENDED, prf=0.2, prf_m=3),
    }
    d = build()
    speakers = [f"Person{i}" for i in range(SPEAKERS)]
    prepared = []
    for text, q in zip(d["queries"], d["qvecs"], strict=True):
        prepared.append(
            (
                text,
                q,
                all_matches(d["kindex"], text),
                lr.named_speakers(text, speakers),
                lr.time_windows(text, datetime(2025, 1, 1)),
                lr.is_when(text),
            )
        )
    out: dict[str, Any] = {
        "memories": N,
        "queries": len(prepared),
        "passes": passes,
        "index_build_s": d["index_build_s"],
    }
    for label, cfg in cfgs.items():
        t_old, t_new, ratios = [], [], []
        for _ in range(passes):
            for text, q, matches, named, windows, when in prepared:
                t0 = time.perf_counter()
                today(d, text, q)
                t1 = time.perf_counter()
                new(d, text, q, matches, cfg, named or [0], windows, when)  # every query pays the speaker lookup
                t2 = time.perf_counter()
                t_old.append((t1 - t0) * 1000)
                t_new.append((t2 - t1) * 1000)
                ratios.append((t2 - t1) / (t1 - t0))
        out[label] = {
            "today_p50_ms": round(statistics.median(t_old), 3),
            "new_p50_ms": round(statistics.median(t_new), 3),
            "delta_p50_ms": round(statistics.median(t_new) - statistics.median(t_old), 3),
            "ratio_median": round(statistics.median(ratios), 3),
            "today_p95_ms": round(float(np.percentile(t_old, 95)), 3),
            "new_p95_ms": round(float(np.percentile(t_new, 95)), 3),
        }
        _common.log(f"latency {label}: {out[label]}")
    out["pieces"] = pieces(d, prepared)
    return out


def pieces(d: dict[str, Any], prepared: list[Any]) -> dict[str, Any]:
    """Single pieces, p50 µs over the queries: deeper lists, the tie cut, lookups over a 100-row pool."""
    rng = np.random.default_rng(5)
    timings: dict[str, list[float]] = {}

    def timed(name: str, fn: Any, *args: Any) -> None:
        t0 = time.perf_counter()
        fn(*args)
        timings.setdefault(name, []).append((time.perf_counter() - t0) * 1e6)

    hnsw, kindex, vecs, speaker, prev = d["hnsw"], d["kindex"], d["vecs"], d["speaker"], d["prev"]
    named_table = np.zeros(SPEAKERS, bool)
    named_table[1] = True
    for text, q, (docs, scores), _, _, _ in prepared:
        pool = rng.choice(N, 100, replace=False)
        for k in (20, 50, 100):
            timed(f"hnsw k={k}", hnsw.knn_query, q, k)
        for k in (20, 50):
            timed(f"keyword search k={k}", kindex.search, text, k)
        if len(scores) > 50:
            timed("cut: argpartition k=50", np.argpartition, -scores, 49)
            timed("cut: top_k (ties by row) k=50", lr.top_k, scores, 50)
        timed("cosine of 100 pool rows", lambda p, v: np.einsum("ij,j->i", vecs[p], v), pool, q)
        timed("speaker boost over 100 rows, np.isin", lambda p: np.isin(speaker[p], [1]), pool)
        timed("speaker boost over 100 rows, table lookup", lambda p, t: t[speaker[p]], pool, named_table)
        timed("prev link + prev cosine, 100 rows", lambda p, v: np.einsum("ij,j->i", vecs[prev[p]], v), pool, q)
        if len(docs):
            timed("BM25 lookup of 100 rows (searchsorted)", np.searchsorted, docs, pool)
    return {k: {"p50_us": round(statistics.median(v), 1), "n": len(v)} for k, v in timings.items()}


def ingest_pieces(texts: list[str], repeat: int = 3) -> dict[str, Any]:
    """What the recommended ranking adds per memory at ingest, against today's tokenisation of the same texts.

    Today the keyword index tokenises each memory (`terms.tokenize` here, the same normalisation); new: the
    time-word flag (one regex search), the Snowball stem of each term (PyStemmer, cached per distinct word as the
    index's vocabulary does), and one more term (the speaker's name). Best of `repeat` passes, µs per memory.
    """
    from memserver.retrieval.terms import tokenize

    def best(fn: Any) -> float:
        runs = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            runs.append(time.perf_counter() - t0)
        return round(min(runs) / len(texts) * 1e6, 2)

    toks = [tokenize(t) for t in texts]
    out: dict[str, Any] = {
        "memories": len(texts),
        "tokenize (today), us per memory": best(lambda: [tokenize(t) for t in texts]),
        "time-word flag, us per memory": best(lambda: [lr.TIME_WORDS.search(t) is not None for t in texts]),
    }
    try:
        import Stemmer
    except ImportError:
        return out
    stem = Stemmer.Stemmer("english")

    def stem_cached() -> None:
        cache: dict[str, str] = {}
        for words in toks:
            for w in words:
                if w not in cache:
                    cache[w] = stem.stemWord(w) if w.isalpha() else w

    out["Snowball stem, cached per distinct word, us per memory"] = best(stem_cached)
    out["Snowball stem, every word (no cache), us per memory"] = best(lambda: [stem.stemWords(w) for w in toks])
    out["distinct words"] = len({w for words in toks for w in words})
    return out
