"""Reciprocal-rank fusion: one ranking out of several (here: vector and keyword), using ranks only.

Why ranks and not scores: cosine similarity and BM25 live on unrelated scales (BM25 is unbounded and grows with
the corpus), so adding them needs a calibration that drifts with every add. RRF (Cormack, Clarke and Büttcher,
SIGIR 2009) gives an item ``sum(weight / (k + rank))`` over the rankings it appears in (rank 1 = best); ``k = 60``
damps the head so that an item ranked well by both lists beats one ranked first by only one of them. It needs no
tuning per corpus, which is why most hybrid search engines default to it.

`hybrid_order` is the hybrid ranking of engines that have only the two rankings (a database engine). The local
store ranks by hybrid_convex.py instead (convex fusion with session context and soft speaker / time boosts: ~20 points
of R@10 more on long conversations, level on the quality set); engines may therefore order near-ties differently.
Its constants were chosen on benchmarks/quality.py: see benchmarks/README.md, "How hybrid was set".
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

__all__ = ["FUSION_DEPTH", "FUSION_K", "FUSION_RECENCY", "FUSION_WEIGHTS", "hybrid_order", "reciprocal_rank_fusion"]

K = TypeVar("K", bound=Hashable)

FUSION_DEPTH = 20  # each ranking is cut here before fusing (a deeper `limit` is filled after, see hybrid_order)
FUSION_K = 60  # the RRF constant
FUSION_WEIGHTS = (1.0, 1.0)  # (vector, keyword)
FUSION_RECENCY = 0.1  # weight of a third ranking, the fused keys newest first: a tie-breaker, kept small


def reciprocal_rank_fusion(
    rankings: Sequence[Sequence[K]], k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[K, float]]:
    """Fuse rankings (each best first, keys unique within a ranking) into one list of (key, fused score).

    Best first. Ties keep the order in which keys first appear, reading the rankings in the order given, so
    the first ranking breaks ties. An item missing from a ranking gets nothing from it.
    """
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if weights is None:
        weights = [1.0] * len(rankings)
    elif len(weights) != len(rankings):
        raise ValueError(f"got {len(weights)} weights for {len(rankings)} rankings")
    fused: dict[K, float] = {}
    for ranking, weight in zip(rankings, weights, strict=True):
        for rank, key in enumerate(ranking, start=1):
            fused[key] = fused.get(key, 0.0) + weight / (k + rank)
    return sorted(fused.items(), key=lambda item: item[1], reverse=True)  # stable: first appearance breaks ties


def hybrid_order(near: Sequence[K], words: Sequence[K], created_at: Callable[[K], str]) -> list[tuple[K, float]]:
    """The hybrid ranking of the vector ranking `near` and the keyword ranking `words` (keys, best first), as
    (key, fused RRF score).

    RRF of the top FUSION_DEPTH of each, plus the recency prior (`created_at` of a key, in the stored format).
    Keys past that come from the fusion of the whole rankings, after it (with their scores there), so the first
    results never depend on how deep the caller ranked (`limit`).
    """
    order = _fuse(near[:FUSION_DEPTH], words[:FUSION_DEPTH], created_at)
    if len(near) > FUSION_DEPTH or len(words) > FUSION_DEPTH:
        head = {key for key, _ in order}
        order += [(key, score) for key, score in _fuse(near, words, created_at) if key not in head]
    return order


def _fuse(near: Sequence[K], words: Sequence[K], created_at: Callable[[K], str]) -> list[tuple[K, float]]:
    rankings: list[Sequence[K]] = [near, words]
    weights = list(FUSION_WEIGHTS)
    if FUSION_RECENCY:
        pool = list(dict.fromkeys([*near, *words]))
        rankings.append(sorted(pool, key=created_at, reverse=True))
        weights.append(FUSION_RECENCY)
    return reciprocal_rank_fusion(rankings, k=FUSION_K, weights=weights)
