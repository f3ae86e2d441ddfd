"""Ranking in the local store: which rows best match a query among the candidates that pass the filters.

The filters come first (filters.py): both rankings see only the rows that pass them, so a selective filter still
yields the true top-k. The vector ranking is exact (numpy over the stored rows) for a small candidate set, HNSW with a
filter otherwise (exact again if that finds too few); the keyword ranking is BM25 (keyword.py); hybrid fuses the two
with the session context and the soft boosts of retrieval/hybrid_convex.py (`_fused` gathers what that needs: each
side's pool, the neighbours' cosines and BM25 scores, the boost masks). Every hit's score is its cosine to the query;
its rank_score what ordered it (the cosine, the BM25 score, the fused score).
With `explain`, each hit also says why it ranked (hybrid_convex.explain_row).

A keyword or hybrid query that names a tag (terms.named_tags: "project falcon" names `project-falcon`) ranks that
tag's memories first, each group in the mode's own order: the person's own label is the strongest evidence there is.

Exact vs HNSW: exact costs ~c_e per candidate; HNSW under a filter passing m of N rows visits ~ef*N/m nodes at
~c_h each (a Python predicate per node), so they cost the same at m* = sqrt((c_h/c_e) * ef * N): the threshold
grows as the square root of the store. The ratio is measured by benchmarks/store.py (benchmarks/README.md,
"Exact-ranking threshold").
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import date, datetime, timezone
from typing import Any

import numpy as np

from memserver.contract import requests
from memserver.contract.backend import NEAR_DUPLICATE_SCORE, SIMILAR_MAX, Hit
from memserver.local.catalog import Catalog
from memserver.local.hooks import StoreHooks
from memserver.local.index import VectorIndex
from memserver.local.keyword import KeywordDerivedIndex, indexed_text
from memserver.local.row_context import RowContext
from memserver.local.vectors import VectorFile
from memserver.retrieval import hybrid_convex
from memserver.retrieval.bm25 import KeywordIndex
from memserver.retrieval.hybrid_convex import DEPTH, Fused, QueryAnalysis
from memserver.retrieval.terms import named_tags, query_words, tokenize, variants

BRUTE_FORCE_COST_RATIO = 4.0  # c_h / c_e, from the crossovers measured by benchmarks/store.py
BRUTE_FORCE_MIN = 2_000  # a candidate set this small is always ranked exactly
BRUTE_FORCE_MAX = 60_000  # ... and one this large never
# A store this small is ranked exactly even without a filter: HNSW's neighbour heuristic can leave a memory unlike
# a tight cluster with no in-link, so its exact match goes missing. The price at 1,000 memories: semantic search
# p50 0.29 -> 0.41 ms, hybrid 0.85 -> 0.95 ms (fake embedder, /tmp script, loaded machine, 1 Dec).
UNFILTERED_EXACT = 1_000

# A candidate set this small gets every keyword match scored (so the previous turn's BM25 is exact); a larger one
# takes the best 2 x DEPTH matches, and a row beyond them counts as unmatched.
KEYWORD_ALL = BRUTE_FORCE_MIN

_NO_ROWS = np.empty(0, dtype=np.int64)
_NO_SCORES = np.empty(0, dtype=np.float32)

Explainer = Callable[[int, int], dict[str, Any]]  # (position in the ranking, rank among the hits) -> explanation
# rows best first, their cosines, their ordering scores (rank_score), their explainer
Ranking = tuple[np.ndarray, np.ndarray, np.ndarray, Explainer | None]


def exact_limit(live: int, ef: int) -> int:
    """The largest candidate set ranked exactly in a store of `live` memories searched at `ef`."""
    m = math.sqrt(BRUTE_FORCE_COST_RATIO * ef * max(live, 1))
    return int(min(BRUTE_FORCE_MAX, max(BRUTE_FORCE_MIN, m)))


def top_k(matrix: np.ndarray, q: np.ndarray, k: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The `k` best of `rows` (their vectors in `matrix`) by cosine to `q`, best first; ties: lower row first."""
    # einsum, not `@`: a matrix-vector product through multi-threaded BLAS took 10-30x longer on a busy 2-core
    # machine (thread oversubscription); einsum stays single-threaded and is as fast when idle.
    scores = np.einsum("ij,j->i", matrix, q)
    if k < len(rows):  # the k-th score's ties are cut by row too (argpartition alone keeps any of them)
        kth = np.partition(scores, len(rows) - k)[len(rows) - k]
        tied = np.flatnonzero(scores == kth)
        above = np.flatnonzero(scores > kth)
        top = np.concatenate([above, tied[np.argsort(rows[tied], kind="stable")][: k - len(above)]])
    else:
        top = np.arange(len(rows))
    top = top[np.lexsort((rows[top], -scores[top]))]
    return rows[top], scores[top]


def _admitted(rows: np.ndarray, cand: np.ndarray | None) -> np.ndarray:
    """Those of `rows` (current rows) that pass the filters (`cand`, sorted; None: every current row)."""
    if cand is None or not len(rows) or not len(cand):
        return rows if cand is None else _NO_ROWS
    at = np.minimum(np.searchsorted(cand, rows), len(cand) - 1)
    picked: np.ndarray = rows[cand[at] == rows]
    return picked


class Searcher:
    """The rankings over one generation's catalog, vector rows and indexes (made anew when the store loads)."""

    def __init__(
        self,
        catalog: Catalog,
        vectors: VectorFile,
        vindex: VectorIndex,
        kindex: KeywordDerivedIndex,
        hooks: StoreHooks,
    ) -> None:
        self.catalog = catalog
        self.vectors = vectors
        self.vindex = vindex
        self.kindex = kindex
        self.hooks = hooks
        self.context = RowContext(catalog)

    def search(
        self,
        q: np.ndarray,
        text: str,
        mode: str,
        limit: int,
        f: requests.SearchFilter,
        min_score: float | None,
        explain: bool = False,
    ) -> list[Hit]:
        """The hits of a checked search (`q`: the unit query vector; `text` "" ranks by vector only)."""
        catalog = self.catalog
        past = f.as_of is not None
        # Filters first: both rankings see only these rows. As of a past time the candidates may include history
        # and tombstones, which no index holds: they are ranked exactly.
        cand = catalog.filters.candidates_as_of(f) if past else catalog.filters.candidates(f)
        ranking = self._ranking(q, text, mode, limit, cand, f, min_score is not None, explain)
        named = [] if mode == "semantic" or not text or past else named_tags(text, catalog.tag_names())
        if named:  # the query names a tag: that tag's memories first, in the same order among themselves
            tagged = catalog.filters.tagged_rows(named)
            tagged = tagged if cand is None else np.intersect1d(tagged, cand, assume_unique=True)
            if len(tagged):
                first = self._ranking(q, text, mode, limit, tagged, f, min_score is not None, explain)
                ranking = _first_then(first, ranking, named)
        rows, scores, order_scores, why = ranking
        hits: list[Hit] = []
        ranked = zip(rows.tolist(), scores.tolist(), order_scores.tolist(), strict=True)
        for i, (row, score, rank_score) in enumerate(ranked):
            if (min_score is not None and score < min_score) or (not past and not catalog.is_current(row)):
                continue
            explanation = None if why is None else why(i, len(hits) + 1)
            hits.append(Hit(catalog.memory(row), float(score), float(rank_score), explanation))
            if len(hits) == limit:
                break
        return hits

    def _ranking(
        self,
        q: np.ndarray,
        text: str,
        mode: str,
        limit: int,
        cand: np.ndarray | None,
        f: requests.SearchFilter,
        deep: bool,
        explain: bool,
    ) -> Ranking:
        """The rows of `mode`'s ranking among `cand` (None: every current row), their cosines, their ordering scores
        and their explainer."""
        past = f.as_of is not None
        if mode == "semantic" or not text:
            rows, scores = self.rank(q, limit, cand, exact=past)
            return rows, scores, scores, _semantic_explainer(scores) if explain else None
        if mode == "keyword":
            return self._keyword_ranking(q, text, limit, cand, deep, past, explain)
        return self._hybrid(q, text, limit, cand, deep, f, explain)

    def similar(self, q: np.ndarray, exclude: str, namespace: str) -> tuple[tuple[str, float], ...]:
        """Current memories of `namespace` (other than `exclude`) with cosine >= NEAR_DUPLICATE_SCORE to `q`,
        best first."""
        rows, scores = self.rank(q, SIMILAR_MAX + 1, self.catalog.filters.namespace_rows(namespace))
        out = []
        for row, score in zip(rows.tolist(), scores.tolist(), strict=True):
            memory_id = self.catalog.id_at(row)
            if memory_id is not None and memory_id != exclude and score >= NEAR_DUPLICATE_SCORE:
                out.append((memory_id, round(float(score), 4)))
        return tuple(out[:SIMILAR_MAX])

    def rank(
        self, q: np.ndarray, limit: int, cand: np.ndarray | None, exact: bool = False
    ) -> tuple[np.ndarray, np.ndarray]:
        """Top rows among `cand` (None = every current row): exact for small sets (or when asked: rows no index
        holds), HNSW otherwise, never fewer than possible."""
        total = len(self.catalog) if cand is None else len(cand)
        k = min(limit, total)
        if k == 0:
            return _NO_ROWS, _NO_SCORES
        if cand is None and total <= UNFILTERED_EXACT:
            self.hooks.planned("exact", None)
            every = self.catalog.live_rows()
            return top_k(self.vectors.matrix(every), q, k, every)
        if cand is not None and (exact or self._exact(cand)):
            self.hooks.planned("exact", total)
            return top_k(self.vectors.matrix(cand), q, k, cand)
        allowed = None if cand is None else set(cand.tolist())
        try:
            rows, scores = self.vindex.search(q, k, None if allowed is None else allowed.__contains__)
        except RuntimeError:  # hnswlib found fewer than k (a sparse filter): rank exactly instead
            rows, scores = _NO_ROWS, _NO_SCORES
        if len(rows) < k:
            self.hooks.planned("hnsw+exact", None if cand is None else total)
            every = cand if cand is not None else self.catalog.live_rows()
            return top_k(self.vectors.matrix(every), q, k, every)
        self.hooks.planned("hnsw", None if cand is None else total)
        return rows, scores

    def _exact(self, cand: np.ndarray) -> bool:
        return len(cand) <= exact_limit(len(self.catalog), self.vindex.ef)

    # --- keyword ----------------------------------------------------------------------------------------------------

    def _keyword_ranking(
        self,
        q: np.ndarray,
        text: str,
        limit: int,
        cand: np.ndarray | None,
        deep: bool,
        past: bool,
        explain: bool,
    ) -> Ranking:
        """Rows in BM25 order with their cosines to `q` and their BM25 scores; `limit` of them, or with `deep` all
        (min_score will drop some)."""
        matched_rows, matched_bm25 = self._keyword(text, max(limit, DEPTH), cand, past)
        rows, bm25 = (matched_rows, matched_bm25) if deep else (matched_rows[:limit], matched_bm25[:limit])
        scores = np.einsum("ij,j->i", self.vectors.matrix(rows), q) if len(rows) else _NO_SCORES
        if not explain:
            return rows, scores, bm25, None
        terms = _query_terms(text)

        def why(i: int, rank: int) -> dict[str, Any]:
            matched = self._matched(terms, int(rows[i]))
            bm25_i = round(float(matched_bm25[i]), 4)
            return {"rank": rank, "keyword": {"rank": i + 1, "bm25": bm25_i, "terms": matched}}

        return rows, scores, bm25, _with_query(why, {"mode": "keyword", "terms": terms})

    def _keyword(self, text: str, k: int, cand: np.ndarray | None, exact: bool) -> tuple[np.ndarray, np.ndarray]:
        """BM25 over the candidates, (rows, scores) best first: the store's keyword index, or, when some candidates
        are not current (so not in it), an index built for the candidates alone (its term statistics are theirs:
        an as_of ranking)."""
        if not exact or cand is None or self.catalog.alive[cand].all():
            return self.kindex.search_arrays(text, k, cand)
        scratch = KeywordIndex()
        scratch.add_many((row, indexed_text(self.catalog.record(row))) for row in cand.tolist())
        return scratch.search_arrays(text, k)

    def _matched(self, terms: list[str], row: int) -> list[str]:
        """The query terms the memory at `row` is indexed under, itself or by a variant (explain only)."""
        held = set(tokenize(indexed_text(self.catalog.record(row))))
        return [t for t in terms if t in held or not held.isdisjoint(variants(t))]

    # --- hybrid -----------------------------------------------------------------------------------------------------

    def _hybrid(
        self,
        q: np.ndarray,
        text: str,
        limit: int,
        cand: np.ndarray | None,
        deep: bool,
        f: requests.SearchFilter,
        explain: bool,
    ) -> Ranking:
        """Rows in hybrid order (retrieval/hybrid_convex.py) with their cosines to `q` and their fused scores. The
        first DEPTH come from pools of DEPTH a side whatever `limit` is; a larger `limit` is filled from deeper pools,
        after them (each with its score in the deeper pass: the order is descending within each part)."""
        past = f.as_of is not None
        today = date.fromisoformat(f.as_of[:10]) if f.as_of else datetime.now(timezone.utc).date()  # "last week"
        a = QueryAnalysis.of(text, self.context.named_speakers(text)[0], today)
        passes = [self._fused(q, text, DEPTH, cand, past, a)]
        order = passes[0].pool[passes[0].order]
        fused_scores = passes[0].score[passes[0].order]
        if limit > DEPTH:
            passes.append(self._fused(q, text, limit, cand, past, a))
            deeper = passes[1].order[~np.isin(passes[1].pool[passes[1].order], order)]
            order = np.concatenate([order, passes[1].pool[deeper]])
            fused_scores = np.concatenate([fused_scores, passes[1].score[deeper]])
        rows = order if deep else order[:limit]
        fused_scores = fused_scores[: len(rows)]
        scores = _NO_SCORES if not len(rows) else np.einsum("ij,j->i", self.vectors.matrix(rows), q)
        if not explain:
            return rows, scores, fused_scores, None
        terms = _query_terms(text)

        def why(i: int, rank: int) -> dict[str, Any]:
            row = int(rows[i])
            for fused in passes:
                at = int(np.searchsorted(fused.pool, row))
                if at < len(fused.pool) and fused.pool[at] == row:
                    break
            prev = int(fused.prev_row[at])
            speaker = self.catalog.speakers.get(row)
            prev_terms = self._matched(terms, prev) if prev >= 0 and fused.prev_bm[at] > 0 else []
            return hybrid_convex.explain_row(fused, at, rank, self._matched(terms, row), prev_terms, speaker)

        query = {"mode": "hybrid", **hybrid_convex.describe_query(terms, a)}
        return rows, scores, fused_scores, _with_query(why, query)

    def _fused(
        self, q: np.ndarray, text: str, depth: int, cand: np.ndarray | None, past: bool, a: QueryAnalysis
    ) -> Fused:
        """The hybrid ranking over pools of `depth` rows a side (hybrid_convex.fused), over this store's rows."""
        # The vector side's rows: every candidate when they are few (the filtered case), else HNSW's best `depth`.
        exact = cand is not None and (past or self._exact(cand))
        if exact:
            assert cand is not None
            vrows, vcos = cand, np.einsum("ij,j->i", self.vectors.matrix(cand), q)
        else:
            found, found_cos = self.rank(q, depth, cand, past)
            by_row = np.argsort(found)
            vrows, vcos = found[by_row], found_cos[by_row]
        # The keyword side's: the BM25 matches (all of them among few candidates).
        k = len(cand) if cand is not None and len(cand) <= KEYWORD_ALL else 2 * depth
        keys, values = self._keyword(text, max(k, 1), cand, past)
        by_row = np.argsort(keys)
        source = _Rows(self, q, cand)
        return hybrid_convex.fused(source, a, depth, (vrows, vcos), (keys[by_row], values[by_row]), exact)


class _Rows:
    """hybrid_convex.RowSource over one generation's rows, for one query and its candidates."""

    def __init__(self, searcher: Searcher, q: np.ndarray, cand: np.ndarray | None) -> None:
        self.searcher, self.q, self.cand = searcher, q, cand
        self.context = searcher.context

    def has_sessions(self) -> bool:
        return self.context.has_sessions()

    def neighbours(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return self.context.neighbours(rows)

    def admitted(self, rows: np.ndarray) -> np.ndarray:
        return _admitted(rows, self.cand)

    def cosines(self, rows: np.ndarray) -> np.ndarray:
        cos: np.ndarray = np.einsum("ij,j->i", self.searcher.vectors.matrix(rows), self.q)
        return cos

    def speakers(self, rows: np.ndarray) -> list[str]:
        names = self.searcher.catalog.speakers.names
        return [names[c] for c in self.context.speaker_codes(rows).tolist()]

    def occurred(self, rows: np.ndarray) -> list[str]:
        return [self.searcher.catalog.occurred_at(r) for r in rows.tolist()]

    def timewords(self, rows: np.ndarray) -> np.ndarray:
        return self.context.timewords(rows)


def _first_then(first: Ranking, rest: Ranking, tags: list[str]) -> Ranking:
    """`first`'s rows, then those of `rest` that `first` lacks; explained hits of `first` name the tags. (rank_score
    then orders each group, the tagged first: Hit.rank_score.)"""
    rows1, scores1, order1, why1 = first
    rows2, scores2, order2, why2 = rest
    keep = np.flatnonzero(~np.isin(rows2, rows1))
    rows = np.concatenate([rows1, rows2[keep]])
    scores = np.concatenate([scores1, scores2[keep]])
    order_scores = np.concatenate([order1, order2[keep]])
    if why1 is None or why2 is None:
        return rows, scores, order_scores, None
    n = len(rows1)

    def why(i: int, rank: int) -> dict[str, Any]:
        return {**why1(i, rank), "tagged": tags} if i < n else why2(int(keep[i - n]), rank)

    return rows, scores, order_scores, why


def _query_terms(text: str) -> list[str]:
    """The index terms of a query, dates it names included, each once (explain only)."""
    return query_words(text)


def _semantic_explainer(scores: np.ndarray) -> Explainer:
    def why(i: int, rank: int) -> dict[str, Any]:
        return {"rank": rank, "semantic": {"rank": i + 1, "cosine": round(float(scores[i]), 4)}}

    return _with_query(why, {"mode": "semantic"})


def _with_query(why: Explainer, query: dict[str, Any]) -> Explainer:
    """`why` with the query's side of the explanation added (one dict, shared by the hits)."""

    def explained(i: int, rank: int) -> dict[str, Any]:
        return {**why(i, rank), "query": query}

    return explained
