"""Reciprocal-rank fusion: one ranking out of several (here: vector and keyword), using ranks only.

Why ranks and not scores: cosine similarity and BM25 live on unrelated scales (BM25 is unbounded and grows with
the corpus), so adding them needs a calibration that drifts with every add. RRF (Cormack, Clarke and Büttcher,
SIGIR 2009) gives an item ``sum(weight / (k + rank))`` over the rankings it appears in (rank 1 = best); ``k = 60``
damps the head so that an item ranked well by both lists beats one ranked first by only one of them. It needs no
tuning per corpus, which is why most hybrid search engines default to it.

Neither engine ranks by it any more: both use hybrid_convex.py (convex fusion with session context and soft speaker /
time boosts: ~20 points of R@10 more on long conversations, level on the quality set). It stays as the baseline the
benchmarks compare against (benchmarks/quality.py's fusion grid, benchmarks/lab/); see benchmarks/README.md, "How
hybrid was set".
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TypeVar

__all__ = ["FUSION_DEPTH", "reciprocal_rank_fusion"]

K = TypeVar("K", bound=Hashable)

FUSION_DEPTH = 20  # the depth each ranking was cut at when PostgreSQL fused by RRF (benchmarks/lab/ still use it)


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
