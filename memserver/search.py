"""Ranking in the local store: which rows best match a query among the candidates that pass the filters.

The filters come first (catalog.candidates): both rankings see only the rows that pass them, so a selective
filter still yields the true top-k. The vector ranking is exact (numpy over the stored rows) for a small
candidate set, HNSW with a filter otherwise (exact again if that finds too few); the keyword ranking is BM25
(keyword.py); hybrid fuses the two (fusion.hybrid_order). Every hit's score is its cosine to the query.

Exact vs HNSW: exact costs ~c_e per candidate; HNSW under a filter passing m of N rows visits ~ef*N/m nodes at
~c_h each (a Python predicate per node), so they cost the same at m* = sqrt((c_h/c_e) * ef * N): the threshold
grows as the square root of the store. The ratio is measured by benchmarks/store.py (benchmarks/README.md,
"Exact-ranking threshold").
"""

from __future__ import annotations

import math

import numpy as np

from memserver import inputs
from memserver.backend import NEAR_DUPLICATE_SCORE, SIMILAR_MAX, Hit
from memserver.bm25 import KeywordIndex
from memserver.catalog import Catalog
from memserver.fusion import FUSION_DEPTH, hybrid_order
from memserver.hooks import StoreHooks
from memserver.index import VectorIndex
from memserver.keyword import KeywordDerivedIndex, indexed_text
from memserver.vectors import VectorFile

BRUTE_FORCE_COST_RATIO = 4.0  # c_h / c_e, from the crossovers measured by benchmarks/store.py
BRUTE_FORCE_MIN = 2_000  # a candidate set this small is always ranked exactly
BRUTE_FORCE_MAX = 60_000  # ... and one this large never

_NO_ROWS = np.empty(0, dtype=np.int64)
_NO_SCORES = np.empty(0, dtype=np.float32)


def exact_limit(live: int, ef: int) -> int:
    """The largest candidate set ranked exactly in a store of `live` memories searched at `ef`."""
    m = math.sqrt(BRUTE_FORCE_COST_RATIO * ef * max(live, 1))
    return int(min(BRUTE_FORCE_MAX, max(BRUTE_FORCE_MIN, m)))


def top_k(matrix: np.ndarray, q: np.ndarray, k: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The `k` best of `rows` (their vectors in `matrix`) by cosine to `q`, best first; ties: lower row first."""
    # einsum, not `@`: a matrix-vector product through multi-threaded BLAS took 10-30x longer on a busy 2-core
    # machine (thread oversubscription); einsum stays single-threaded and is as fast when idle.
    scores = np.einsum("ij,j->i", matrix, q)
    top = np.argpartition(-scores, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
    top = top[np.lexsort((rows[top], -scores[top]))]
    return rows[top], scores[top]


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

    def search(
        self, q: np.ndarray, text: str, mode: str, limit: int, f: inputs.SearchFilter, min_score: float | None
    ) -> list[Hit]:
        """The hits of a checked search (`q`: the unit query vector; `text` "" ranks by vector only)."""
        catalog = self.catalog
        past = f.as_of is not None
        # Filters first: both rankings see only these rows. As of a past time the candidates may include history
        # and tombstones, which no index holds: they are ranked exactly.
        cand = catalog.candidates_as_of(f) if past else catalog.candidates(f)
        if mode == "semantic" or not text:
            rows, scores = self.rank(q, limit, cand, exact=past)
        else:
            rows, scores = self._ranked_by_words(q, text, limit, cand, mode == "keyword", min_score is not None, past)
        hits: list[Hit] = []
        for row, score in zip(rows.tolist(), scores.tolist(), strict=True):
            if (min_score is not None and score < min_score) or (not past and not catalog.is_current(row)):
                continue
            hits.append(Hit(catalog.memory(row), float(score)))
            if len(hits) == limit:
                break
        return hits

    def similar(self, q: np.ndarray, exclude: str, namespace: str) -> tuple[tuple[str, float], ...]:
        """Current memories of `namespace` (other than `exclude`) with cosine >= NEAR_DUPLICATE_SCORE to `q`,
        best first."""
        rows, scores = self.rank(q, SIMILAR_MAX + 1, self.catalog.namespace_rows(namespace))
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
        if cand is not None and (exact or total <= exact_limit(len(self.catalog), self.vindex.ef)):
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

    def _ranked_by_words(
        self,
        q: np.ndarray,
        text: str,
        limit: int,
        cand: np.ndarray | None,
        keyword_only: bool,
        deep: bool,
        exact: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows in keyword (BM25) or hybrid order, each with its cosine to `q` (from the stored vectors, also for
        keyword-only rows); `limit` of them, or with `deep` all (min_score will drop some). With `exact`, the
        candidates may hold rows the indexes do not (history, tombstones)."""
        depth = max(limit, FUSION_DEPTH)
        words = [row for row, _ in self._keyword(text, depth, cand, exact) if isinstance(row, int)]  # keys are rows
        if keyword_only:
            order = words
        else:
            near = self.rank(q, depth, cand, exact)[0].tolist()
            order = hybrid_order(near, words, self.catalog.occurred_at)
        rows = np.asarray(order if deep else order[:limit], dtype=np.int64)
        if len(rows) == 0:
            return rows, _NO_SCORES
        return rows, np.einsum("ij,j->i", self.vectors.matrix(rows), q)

    def _keyword(self, text: str, k: int, cand: np.ndarray | None, exact: bool) -> list[tuple[int, float]]:
        """BM25 over the candidates: the store's keyword index, or, when some candidates are not current (so not
        in it), an index built for the candidates alone (its term statistics are theirs: an as_of ranking)."""
        if not exact or cand is None or self.catalog.alive[cand].all():
            return self.kindex.search(text, k, cand)
        scratch = KeywordIndex()
        scratch.add_many((row, indexed_text(self.catalog.record(row))) for row in cand.tolist())
        return scratch.search(text, k)
