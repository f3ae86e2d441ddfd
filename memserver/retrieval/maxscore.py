"""Exact BM25 top-k without scoring every posting: MaxScore, term at a time, in numpy.

Why: at 1M memories a 3-word query reaches ~40k postings (one common word alone 135k), and scoring all of them
then keeping 20 was most of a hybrid search (benchmarks/README.md, "BM25 top-k"). Per-document WAND or block-max
WAND is a loop per document, which costs more in Python than numpy spends scoring everything; this is MaxScore
(Turtle & Flood 1995) run a whole posting list at a time, where numpy is fast:

1. Each term has a `bound`: no document gets more than that from it (its weight at the largest term frequency and
   the shortest document in its list). Terms are read in decreasing bound, i.e. rarest first.
2. OR phase: a term's whole list is scored and merged into the candidates while the bounds of the terms not yet
   read add up to the threshold θ or more, i.e. while a document in none of the lists read so far could still
   reach the top k. θ is a lower bound on the k-th best score: the k best candidates so far, completed by looking
   up the unread terms for just those k.
3. AND phase: the remaining (common) terms only complete the candidates, by binary search of the candidates in
   their lists (or of their lists in the candidates, whichever is shorter); before each, a candidate whose score so
   far plus the unread bounds is below θ is dropped.
4. Exactness: the candidates within rounding of the k-th are scored again term by term in query order, adding the
   same float32 weights in the same order as the exhaustive scorer (bm25.KeywordIndex.search_exhaustive), and
   ranked by `ranked`. Every pruning test is strict (a document tied with the k-th can still win on its slot) and
   has a slack far above float rounding, so pruning only ever skips documents that score strictly below k others.

The weights come from the caller (`TermPostings.weigh`), so k1, b and the formula live in one place; the bounds
only need the weight to grow with term frequency and shrink with document length, as BM25's does for k1 >= 0 and
0 <= b <= 1. Pure functions of numpy arrays, plus `BoundsCache`, what an index keeps of its lists between merges
for their bounds (peaks, dead postings): knows nothing of terms, stores or keys (a list is an int id).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

__all__ = ["BOUND_SLACK", "BoundsCache", "TermPostings", "peaks", "ranked", "top_k"]

Slots = npt.NDArray[np.int32]
Weights = npt.NDArray[np.float32]
Sums = npt.NDArray[np.float64]
Ints = npt.NDArray[np.intp]
Mask = npt.NDArray[np.bool_]

# Bounds are inflated and θ deflated by this: the weights of a document are the same float32 numbers on every path,
# only their float64 sum is taken in another order (~1e-16 relative), and a bound's float32 rounding is ~1e-7.
BOUND_SLACK = 1e-5


class TermPostings(NamedTuple):
    """One query term's postings, as the index holds them, and how to weigh them."""

    parts: Sequence[tuple[Slots, Weights]]  # (slots ascending, term frequencies); parts hold disjoint slot ranges
    size: int  # postings in all parts (dead ones included)
    bound: float  # no live document gets a larger weight from this term (BOUND_SLACK included)
    weigh: Callable[[Slots, Weights], Weights]  # the weights of postings (slots, term frequencies)


class BoundsCache:
    """What the bounds need of an index's posting lists, kept until its next merge (which starts a new cache).

    Between merges a list's frozen part only loses documents (their slots, `removed`, stay listed) and its delta
    part only grows; so the frozen part's peaks hold, and each removed slot needs checking once per list.
    """

    def __init__(self) -> None:
        self.removed: list[int] = []  # slots removed since the last merge: their postings may still be listed
        self._dead_seen: dict[int, tuple[int, int]] = {}  # list id -> (`removed` checked, dead postings found)
        self._frozen_peaks: dict[int, tuple[Weights, Weights]] = {}  # list id -> its frozen part's peaks

    def dead(self, list_id: int, parts: Sequence[tuple[Slots, Weights]]) -> int:
        """Postings of removed slots in a list's parts (frozen first): only the slots removed since it was last
        asked about are looked up."""
        if not self.removed:
            return 0
        checked, dead = self._dead_seen.get(list_id, (0, 0))
        if checked < len(self.removed):
            news = np.asarray(self.removed[checked:], np.int32)
            for slots, _ in parts:
                if len(slots):
                    at = np.minimum(np.searchsorted(slots, news), len(slots) - 1)
                    dead += int(np.count_nonzero(slots[at] == news))
            self._dead_seen[list_id] = (len(self.removed), dead)
        return dead

    def peaks(self, list_id: int, parts: Sequence[tuple[Slots, Weights]], lengths: Weights) -> tuple[Weights, Weights]:
        """The `peaks` of a list's parts (frozen first: its peaks are cached; a delta part's are computed afresh)."""
        found = self._frozen_peaks.get(list_id)
        if found is None:
            found = self._frozen_peaks[list_id] = peaks(*parts[0], lengths)
        if len(parts) > 1:
            more = peaks(*parts[1], lengths)
            found = (np.concatenate([found[0], more[0]]), np.concatenate([found[1], more[1]]))
        return found


def peaks(slots: Slots, tfs: Weights, lengths: Weights) -> tuple[Weights, Weights]:
    """(tf, shortest length with that tf) for each distinct tf of a list: the postings no other one outweighs.

    A BM25 weight grows with tf and shrinks with length, so its largest value over the list is one of these,
    whatever idf and the average length are when the list is searched: the bound is exact and stays valid.
    """
    if not len(slots):
        return np.zeros(0, np.float32), np.zeros(0, np.float32)
    values, which = np.unique(tfs, return_inverse=True)
    shortest = np.full(len(values), np.inf, np.float32)
    np.minimum.at(shortest, which, lengths[slots])
    return values.astype(np.float32), shortest


def ranked(slots: npt.NDArray[Any], scores: npt.NDArray[Any], k: int) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """The `k` best (slot, score) pairs, best first, ties by slot: always the first k of the full order."""
    if len(scores) > k:
        kth = np.partition(scores, len(scores) - k)[len(scores) - k]  # the k-th largest
        keep = np.flatnonzero(scores >= kth)  # everything above it and every tie with it
        slots, scores = slots[keep], scores[keep]
    order = np.lexsort((slots, -scores))[:k]
    return slots[order], scores[order]


def top_k(terms: Sequence[TermPostings], k: int, allowed: Mask | None) -> tuple[Slots, Sums]:
    """The `k` best slots by the sum of their terms' weights (`terms` in query order), as `ranked` orders them.

    `allowed` (a mask over slots), when given, keeps out every slot where it is False: a filter, dead documents.
    """
    order = sorted(range(len(terms)), key=lambda i: -terms[i].bound)
    unread = [sum(terms[j].bound for j in order[i + 1 :]) for i in range(len(order))]  # after reading order[:i+1]
    slots, partial = _scan(terms[order[0]], allowed)
    theta = -np.inf
    read = 1
    while read < len(order):
        theta = max(theta, _threshold(slots, partial, [terms[j] for j in order[read:]], k))
        if unread[read - 1] < theta * (1.0 - BOUND_SLACK):
            break  # a document outside every list read so far scores below k others
        new_slots, new_weights = _scan(terms[order[read]], allowed)
        slots, partial = _union(slots, partial, new_slots, new_weights)
        read += 1
    for i in range(read, len(order)):  # the other terms only complete the candidates that can still make it
        keep = partial >= theta * (1.0 - BOUND_SLACK) - unread[i - 1]
        if not keep.all():
            slots, partial = slots[keep], partial[keep]
        partial = partial + _lookup(terms[order[i]], slots)
        if len(partial) >= k:
            theta = max(theta, float(np.partition(partial, len(partial) - k)[len(partial) - k]))
    if len(partial) > k:  # only the candidates within rounding of the k-th can be in the top k
        kth = float(np.partition(partial, len(partial) - k)[len(partial) - k])
        slots = slots[partial >= kth - abs(kth) * BOUND_SLACK]
    exact = np.zeros(len(slots), np.float64)
    for term in terms:  # query order, float32 weights added in float64: what the exhaustive scorer computes
        exact += _lookup(term, slots)
    return ranked(slots, exact, k)


def _scan(term: TermPostings, allowed: Mask | None) -> tuple[Slots, Sums]:
    """Every (allowed) posting of a term with its weight."""
    if len(term.parts) == 1:
        slots, tfs = term.parts[0]
    else:
        slots = np.concatenate([p[0] for p in term.parts])
        tfs = np.concatenate([p[1] for p in term.parts])
    if allowed is not None:
        keep = allowed[slots]
        slots, tfs = slots[keep], tfs[keep]
    return slots, term.weigh(slots, tfs).astype(np.float64)


def _union(slots: Slots, partial: Sums, new_slots: Slots, new_weights: Sums) -> tuple[Slots, Sums]:
    """Merge two sorted posting lists, adding the scores of slots in both (a stable sort of two runs is linear)."""
    both = np.concatenate([slots, new_slots])
    order = np.argsort(both, kind="stable")
    both = both[order]
    weights = np.concatenate([partial, new_weights])[order]
    first = np.ones(len(both), bool)
    np.not_equal(both[1:], both[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    return both[starts], np.add.reduceat(weights, starts) if len(starts) else weights


def _lookup(term: TermPostings, slots: Slots) -> Weights:
    """The term's weight for each of `slots` (sorted, distinct), 0 where it is absent."""
    out = np.zeros(len(slots), np.float32)
    for part_slots, tfs in term.parts:
        mine, theirs = _matches(slots, part_slots)
        if len(mine):
            out[mine] = term.weigh(part_slots[theirs], tfs[theirs])
    return out


def _matches(a: Slots, b: Slots) -> tuple[Ints, Ints]:
    """Positions (in a, in b) of the slots in both of two sorted, distinct arrays."""
    if not len(a) or not len(b):
        return np.zeros(0, np.intp), np.zeros(0, np.intp)
    if len(a) * 8 <= len(b) or len(b) * 8 <= len(a):  # one is short: binary search it in the other (~70 ns each)
        short, long = (a, b) if len(a) <= len(b) else (b, a)
        at = np.searchsorted(long, short)
        np.minimum(at, len(long) - 1, out=at)
        hit = np.flatnonzero(long[at] == short)
        return (hit, at[hit]) if short is a else (at[hit], hit)
    both = np.concatenate([a, b])  # else merge the two runs (a stable sort of two runs is linear, ~12 ns each)
    order = np.argsort(both, kind="stable")
    same = np.flatnonzero(both[order[1:]] == both[order[:-1]])  # a's slot, then the same one of b
    return order[same], order[same + 1] - len(a)


def _threshold(slots: Slots, partial: Sums, unread: Sequence[TermPostings], k: int) -> float:
    """A lower bound on the k-th best final score: the k best candidates so far, completed; -inf with fewer."""
    if len(partial) < k:
        return -np.inf
    best = np.argpartition(-partial, k - 1)[:k]
    best = best[np.argsort(slots[best])]  # _lookup wants sorted slots
    complete = partial[best]
    for term in unread:
        complete += _lookup(term, slots[best])
    return float(complete.min())
