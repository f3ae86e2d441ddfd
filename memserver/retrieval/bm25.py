"""BM25 over short texts keyed by non-negative ints: finds the names, ids, numbers and exact words embeddings blur.

Why hand-written numpy postings and not SQLite FTS5 (stdlib, and the first choice on paper). Measured at 100k
memories with a Zipf vocabulary, 3-term OR queries: FTS5 `bm25()` ... `ORDER BY rank LIMIT 50` took 46 ms p50 and
167 ms p95, because FTS5 scores every row that matches any term before it sorts; restricting it to a candidate set
needs a temp table or `rowid IN (...)` per query, and its bulk insert was no faster (0.8-1.0 s per 100k). Here a
query term costs one vectorised gather over its posting list, with a filter (`candidates`) applied before the
top-k (figures: `benchmarks/keyword_speed.py`). bm25s and rank-bm25 have no incremental add/remove; tantivy is a
large native dependency with its own files and writer lock, which the journal makes unnecessary.

Layout: a frozen CSR (`term -> slots, term frequencies`) plus a small delta for recent adds, merged into the CSR
when it grows past 1/16 of it (a large batch merges in one step). Removal clears a slot's `alive` bit; dead
postings are dropped at the next merge. Document frequency and the average length are computed over live
documents only, so scores do not drift. Keys map to slots through a table as large as the largest key (the
store's keys are its vector rows: dense), so a filter is one vectorised lookup. Terms: see terms.py.

Search: a query with enough postings is ranked by MaxScore (maxscore.py), exactly as `search_exhaustive` ranks it
(scoring every posting) but reading the common terms' lists only for the candidates that can still win. For its
bounds each term's list keeps its peaks, and for live document frequencies the slots removed since the last
merge (maxscore.BoundsCache: cached until the next merge, checked once per term and removal).

The index as plain arrays (`state` / `load_state`) is what the store checkpoints (keyword.py).

Not thread-safe: callers serialise `add`/`remove` against `search` (the store's lock does).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable
from itertools import chain
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from memserver.retrieval.maxscore import BOUND_SLACK, BoundsCache, TermPostings, ranked, top_k
from memserver.retrieval.terms import normalise, query_terms, raw_tokens

__all__ = ["K1", "B", "KeywordIndex", "bm25_weights"]

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float32]
_MAX_KEY = 1 << 40  # a checkpoint with a larger key is refused (the key table is as large as the largest key)
# When `search` prunes (maxscore.py) rather than scores every posting; tests set them to 0 to prune everywhere.
PRUNE_MIN_POSTINGS = 16_384  # fewer postings in the query's lists: scoring them all is as quick (bm25_topk.py)
PRUNE_MAX_K_SHARE = 8  # k * this >= the postings: nothing to prune


_NO_KEYS = np.zeros(0, np.int64)
_NO_SCORES = np.zeros(0, np.float64)


def bm25_weights(idf: float, tfs: Floats, lengths: Floats, avg_length: float, k1: float, b: float) -> Floats:
    """BM25 weights of one term's postings (term frequencies, document lengths): the one place of the formula.

    Both scorers (exhaustive and pruned) and the pruning bounds call this, so they round alike; the bounds need it
    to grow with the term frequency and shrink with the length (KeywordIndex.prunable).
    """
    norm = k1 * (1.0 - b + b * lengths / avg_length)
    return cast("Floats", (idf * (k1 + 1.0)) * tfs / (tfs + norm))


# BM25's constants, tuned by leave-one-conversation-out on the conversation sets (benchmarks/README.md, "Retrieval
# II"): short chat turns want little length normalisation and early tf saturation (inside the final ranking,
# 1.2 / 0.75 measured 1.3 / 1.6 points of R@10 lower on harbour / lantern, 0.3 lower on the quality set).
K1 = 0.6  # term-frequency saturation
B = 0.1  # length normalisation


def _weighted_bincount(
    bins: npt.NDArray[np.integer[Any]], weights: npt.NDArray[np.floating[Any]], minlength: int
) -> npt.NDArray[np.float64]:
    """np.bincount with weights, typed as what it returns (numpy's stubs say ints)."""
    return cast("npt.NDArray[np.float64]", np.bincount(bins, weights=weights, minlength=minlength))


class _Vocabulary(dict[bytes, int]):
    """Raw token -> term id (-1 for a stopword); a new token is normalised on its first lookup, and only then."""

    def __init__(self, term_ids: dict[str, int]) -> None:
        super().__init__()
        self.term_ids = term_ids

    def __missing__(self, token: bytes) -> int:
        term = normalise(token)
        term_id = -1 if term is None else self.term_ids.setdefault(term, len(self.term_ids))
        self[token] = term_id
        return term_id


class KeywordIndex:
    """BM25 with incremental add/remove and candidate filtering; keys are non-negative ints (the store's rows).

    Args:
        k1: term-frequency saturation (K1; 1.2 is the usual default elsewhere).
        b: length normalisation (B; 0.75 is the usual default elsewhere).
    """

    def __init__(self, *, k1: float = K1, b: float = B) -> None:
        self.k1 = k1
        self.b = b
        self._term_ids: dict[str, int] = {}  # normalised term -> term id
        self._term_of = _Vocabulary(self._term_ids)  # raw token -> term id, -1 for a stopword
        self.clear()

    # -- state -------------------------------------------------------------------------------------------------

    def clear(self) -> None:
        """Forget every document (the vocabulary is kept: it is a pure function of the words)."""
        self._slot_of: Ints = np.full(0, -1, np.int64)  # key -> slot, -1 when absent
        self._keys: Ints = np.full(1024, -1, np.int64)  # slot -> key, -1 for a removed document
        self._slots = 0  # slots in use (live and dead)
        self._length: Floats = np.zeros(1024, np.float32)
        self._alive = np.zeros(1024, bool)
        self._live = 0
        self._dead = 0
        self._total_length = 0.0
        # frozen postings: term id t owns _docs[_indptr[t]:_indptr[t+1]] and the same slice of _tfs
        self._indptr: Ints = np.zeros(1, np.int64)
        self._docs = np.zeros(0, np.int32)
        self._tfs: Floats = np.zeros(0, np.float32)
        self._frozen_slots = 0  # slots below this are in the frozen arrays, the others in _delta
        self._delta: dict[int, tuple[array[int], array[float]]] = {}  # term id -> (slots, tfs) added since
        self._bounds = BoundsCache()  # what the pruned search keeps per term until the next merge

    def __len__(self) -> int:
        return self._live

    def __contains__(self, key: int) -> bool:
        return 0 <= key < len(self._slot_of) and self._slot_of.item(key) >= 0

    # -- writing -----------------------------------------------------------------------------------------------

    def add(self, key: int, text: str) -> None:
        """Index `text` under `key`, replacing what `key` had."""
        self.add_many([(key, text)])

    def add_many(self, items: Iterable[tuple[int, str]]) -> None:
        """Index many documents, replacing what their keys had; a large batch (a rebuild) is one vectorised merge."""
        batch = dict(items)  # a key repeated in the batch: the last text wins
        if not batch:
            return
        n = len(batch)
        keys = np.fromiter(batch, np.int64, n)
        if n < 64:  # the store's own writes: a few keys, where numpy's per-call cost would dominate
            if min(batch) < 0:
                raise ValueError("keyword index keys must be non-negative ints")
            for key in batch:
                self.remove(key)
        else:
            if int(keys.min()) < 0:
                raise ValueError("keyword index keys must be non-negative ints")
            known = keys[keys < len(self._slot_of)]
            for key in known[self._slot_of[known] >= 0].tolist():
                self.remove(key)
        raws = [raw_tokens(text) for text in batch.values()]
        flat = list(chain.from_iterable(raws))
        first = self._slots
        terms = np.fromiter(map(self._term_of.__getitem__, flat), np.int64, len(flat))
        docs = np.repeat(np.arange(n, dtype=np.int64), np.fromiter(map(len, raws), np.int64, n))
        keep = terms >= 0
        terms, docs = terms[keep], docs[keep]
        lengths = np.bincount(docs, minlength=n)
        self._register(keys, first, lengths)
        pairs, tfs = np.unique(terms * n + docs, return_counts=True)
        terms, docs = pairs // n, pairs % n + first
        if n >= max(256, self._frozen_slots // 8):
            self._merge(terms, docs, tfs.astype(np.float32))
            return
        delta = self._delta
        for term, doc, tf in zip(terms.tolist(), docs.tolist(), tfs.tolist(), strict=True):
            entry = delta.get(term)
            if entry is None:
                entry = delta[term] = (array("i"), array("f"))
            entry[0].append(doc)
            entry[1].append(tf)
        if self._slots - self._frozen_slots > max(1024, self._frozen_slots // 16):
            self._merge()

    def remove(self, key: int) -> bool:
        """Drop `key` from the index; False when it was not there."""
        if not 0 <= key < len(self._slot_of):
            return False
        slot: int = self._slot_of.item(key)  # .item(): no numpy scalar (remove is per key)
        if slot < 0:
            return False
        self._slot_of[key] = -1
        self._keys[slot] = -1
        self._alive[slot] = False
        self._live -= 1
        self._dead += 1
        self._bounds.removed.append(slot)
        self._total_length -= self._length.item(slot)
        return True

    def _register(self, keys: Ints, first: int, lengths: Ints) -> None:
        """Give new documents their slots, lengths and live bits."""
        end = first + len(keys)
        if end > len(self._alive):
            size = max(end, 2 * len(self._alive))
            self._length = np.concatenate([self._length, np.zeros(size - len(self._length), np.float32)])
            self._alive = np.concatenate([self._alive, np.zeros(size - len(self._alive), bool)])
            self._keys = np.concatenate([self._keys, np.full(size - len(self._keys), -1, np.int64)])
        self._keys[first:end] = keys
        largest = int(keys.max())
        if largest >= len(self._slot_of):
            grown = np.full(max(largest + 1, 2 * len(self._slot_of), 1024), -1, np.int64)
            grown[: len(self._slot_of)] = self._slot_of
            self._slot_of = grown
        self._slot_of[keys] = np.arange(first, end)
        self._slots = end
        self._length[first:end] = lengths
        self._alive[first:end] = True
        self._live += len(keys)
        self._total_length += float(lengths.sum())

    def _merge(self, terms: Ints | None = None, docs: Ints | None = None, tfs: Floats | None = None) -> None:
        """Rebuild the frozen CSR from itself, the delta and a new batch; drop dead postings, renumber slots."""
        n_terms = len(self._term_ids)
        counts = np.diff(self._indptr)
        parts_term = [np.repeat(np.arange(len(counts), dtype=np.int64), counts)]
        parts_doc = [self._docs.astype(np.int64)]
        parts_tf = [self._tfs]
        for term_id, (slots, freqs) in self._delta.items():
            parts_term.append(np.full(len(slots), term_id, np.int64))
            parts_doc.append(np.frombuffer(slots, np.int32).astype(np.int64))
            parts_tf.append(np.frombuffer(freqs, np.float32).copy())
        if terms is not None and docs is not None and tfs is not None:
            parts_term.append(terms)
            parts_doc.append(docs)
            parts_tf.append(tfs)
        term = np.concatenate(parts_term)
        doc = np.concatenate(parts_doc)
        tf = np.concatenate(parts_tf)
        n_slots = self._slots
        if self._dead:
            alive = self._alive[:n_slots]
            keep = alive[doc]
            term, doc, tf = term[keep], doc[keep], tf[keep]
            if self._dead > n_slots // 4:  # renumber slots so that dead ones stop costing memory and time
                live_slots = np.flatnonzero(alive)
                doc = (np.cumsum(alive) - 1)[doc]
                live = len(live_slots)
                keys = self._keys[live_slots]
                self._keys[:] = -1
                self._keys[:live] = keys
                self._slot_of[:] = -1
                self._slot_of[keys] = np.arange(live)
                length = self._length[live_slots]
                self._length[:] = 0
                self._length[:live] = length
                self._alive[:] = False
                self._alive[:live] = True
                self._slots = live
                self._dead = 0
        if len(parts_term) > 2 or len(self._docs):  # a lone new batch comes sorted by term from np.unique
            order = np.argsort(term, kind="stable")
            term, doc, tf = term[order], doc[order], tf[order]
        self._docs = doc.astype(np.int32)
        self._tfs = tf.astype(np.float32)
        self._indptr = np.zeros(n_terms + 1, np.int64)
        np.cumsum(np.bincount(term, minlength=n_terms), out=self._indptr[1:])
        self._delta = {}
        self._frozen_slots = self._slots
        self._bounds = BoundsCache()  # every posting is live and in the CSR now

    # -- reading -----------------------------------------------------------------------------------------------

    def query_terms(self, query: str) -> list[int]:
        """Distinct known term ids of a query, in query order: its terms, their variants and the dates it names
        (terms.query_terms)."""
        ids = (self._term_ids.get(term, -1) for term in query_terms(query))
        return list(dict.fromkeys(term for term in ids if term >= 0))

    def _postings(self, term: int) -> tuple[npt.NDArray[np.int32], Floats]:
        if term + 1 < len(self._indptr):
            lo, hi = int(self._indptr[term]), int(self._indptr[term + 1])
            docs, tfs = self._docs[lo:hi], self._tfs[lo:hi]
        else:
            docs, tfs = self._docs[:0], self._tfs[:0]
        extra = self._delta.get(term)
        if extra:
            docs = np.concatenate([docs, np.frombuffer(extra[0], np.int32)])
            tfs = np.concatenate([tfs, np.frombuffer(extra[1], np.float32)])
        return docs, tfs

    @property
    def prunable(self) -> bool:
        """Whether the pruned search's bounds hold: a weight that grows with tf and shrinks with the length."""
        return 0.0 <= self.k1 < math.inf and 0.0 <= self.b <= 1.0

    def search(self, query: str, k: int = 10, candidates: Ints | None = None) -> list[tuple[int, float]]:
        """The `k` best keys for `query` by BM25 (OR semantics), best first, as (key, score).

        `candidates` (an int array of keys), when given, restricts the ranking to those keys *before* the top-k
        is taken, so a filter never empties the result. Ties keep insertion order, also at the k-th place.
        Exactly `search_exhaustive`, without scoring every posting (maxscore.py) when there are enough of them.
        """
        keys, scores = self.search_arrays(query, k, candidates)
        return list(zip(keys.tolist(), scores.tolist(), strict=True))

    def search_arrays(
        self, query: str, k: int = 10, candidates: Ints | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """`search` as two arrays (keys, scores), for a caller that computes with them: no pair per match."""
        terms = self.query_terms(query) if k > 0 and self._live else []
        if not terms:
            return _NO_KEYS, _NO_SCORES
        n = self._live
        avg_length = self._average_length()
        total = sum(map(self._list_size, terms))  # the cheap test first: most small queries stop here
        if len(terms) < 2 or total < PRUNE_MIN_POSTINGS or k * PRUNE_MAX_K_SHARE >= total or not self.prunable:
            return self._exhaustive(terms, k, candidates)
        postings = [p for p in (self._term_postings(t, n, avg_length) for t in terms) if p is not None]
        if len(postings) < 2:
            return self._exhaustive(terms, k, candidates)
        allowed = None
        if candidates is not None:
            allowed = self._candidate_slots(candidates)  # live slots only
        elif self._bounds.removed:
            allowed = self._alive
        slots, scores = top_k(postings, k, allowed)
        return self._keys[slots], scores.astype(np.float64, copy=False)

    def _list_size(self, term: int) -> int:
        """Postings of a term, dead ones included."""
        frozen = int(self._indptr[term + 1] - self._indptr[term]) if term + 1 < len(self._indptr) else 0
        extra = self._delta.get(term)
        return frozen + (len(extra[0]) if extra else 0)

    def _average_length(self) -> float:
        return self._total_length / self._live if self._total_length > 0 else 1.0

    def _term_postings(self, term: int, n: int, avg_length: float) -> TermPostings | None:
        """A term's postings for maxscore.top_k (None when no live document has it): live df, idf, bound."""
        lo, hi = (int(self._indptr[term]), int(self._indptr[term + 1])) if term + 1 < len(self._indptr) else (0, 0)
        parts = [(self._docs[lo:hi], self._tfs[lo:hi])]
        extra = self._delta.get(term)
        if extra:
            parts.append((np.frombuffer(extra[0], np.int32), np.frombuffer(extra[1], np.float32)))
        size = sum(len(p[0]) for p in parts)
        size_live = size - self._bounds.dead(term, parts)
        if size_live == 0:
            return None
        peaks = self._bounds.peaks(term, parts, self._length)
        idf = math.log(1.0 + (n - size_live + 0.5) / (size_live + 0.5))
        k1, b, length = self.k1, self.b, self._length
        top = bm25_weights(idf, peaks[0], peaks[1], avg_length, k1, b).max()
        return TermPostings(
            parts=parts,
            size=size,
            bound=float(top) * (1.0 + BOUND_SLACK),
            weigh=lambda slots, tfs: bm25_weights(idf, tfs, length[slots], avg_length, k1, b),
        )

    def search_exhaustive(self, query: str, k: int = 10, candidates: Ints | None = None) -> list[tuple[int, float]]:
        """`search` by scoring every posting of the query's terms: the reference the pruned search must equal."""
        terms = self.query_terms(query) if k > 0 and self._live else []
        keys, scores = self._exhaustive(terms, k, candidates) if terms else (_NO_KEYS, _NO_SCORES)
        return list(zip(keys.tolist(), scores.tolist(), strict=True))

    def _exhaustive(
        self, terms: list[int], k: int, candidates: Ints | None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        n = self._live
        avg_length = self._average_length()
        k1, b = self.k1, self.b
        all_docs: list[npt.NDArray[np.int32]] = []
        all_scores: list[npt.NDArray[np.floating[Any]]] = []
        for term in terms:
            docs, tfs = self._postings(term)
            if self._dead and len(docs):
                live = self._alive[docs]
                docs, tfs = docs[live], tfs[live]
            df = len(docs)
            if df == 0:
                continue
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            all_docs.append(docs)
            all_scores.append(bm25_weights(idf, tfs, self._length[docs], avg_length, k1, b))
        if not all_docs:
            return _NO_KEYS, _NO_SCORES
        found: npt.NDArray[np.integer[Any]]
        scores: npt.NDArray[np.floating[Any]]
        if len(all_docs) == 1:
            found, scores = all_docs[0], all_scores[0]
        else:
            postings, weights = np.concatenate(all_docs), np.concatenate(all_scores)
            if len(postings) * 16 > self._slots:  # many postings: a dense accumulator beats sorting them
                dense = _weighted_bincount(postings, weights, self._slots)
                found = np.flatnonzero(dense)
                scores = dense[found]
            else:
                found, inverse = np.unique(postings, return_inverse=True)
                scores = _weighted_bincount(inverse, weights, len(found))
        if candidates is not None:
            keep = self._candidate_slots(candidates)[found]
            found, scores = found[keep], scores[keep]
        found, scores = ranked(found, scores, k)  # best first; ties by slot, i.e. insertion order
        return self._keys[found], scores.astype(np.float64, copy=False)

    def _candidate_slots(self, candidates: Ints) -> npt.NDArray[np.bool_]:
        """A mask over slots: True where the slot's key is one of `candidates`."""
        wanted = np.asarray(candidates, np.int64)
        wanted = wanted[(wanted >= 0) & (wanted < len(self._slot_of))]
        slots = self._slot_of[wanted]
        mask = np.zeros(self._slots, bool)
        mask[slots[slots >= 0]] = True
        return mask

    # -- persistence -------------------------------------------------------------------------------------------

    def state(self) -> dict[str, npt.NDArray[Any]]:
        """The index as plain arrays (delta merged first); see `load_state`."""
        if self._delta or self._slots != self._frozen_slots:
            self._merge()
        terms = sorted(self._term_ids, key=self._term_ids.__getitem__)
        n = self._slots
        return {
            "params": np.asarray([self.k1, self.b], np.float64),
            "terms": np.frombuffer("\n".join(terms).encode("utf-8"), np.uint8),
            "n_terms": np.asarray([len(terms)], np.int64),
            "keys": self._keys[:n].copy(),
            "length": self._length[:n].copy(),
            "alive": self._alive[:n].copy(),
            "indptr": self._indptr,
            "docs": self._docs,
            "tfs": self._tfs,
        }

    def load_state(self, arrays: dict[str, npt.NDArray[Any]]) -> None:
        """Replace the index with one saved by `state`; raises ValueError if the arrays are inconsistent."""
        n_terms = int(arrays["n_terms"][0])
        raw = arrays["terms"].tobytes().decode("utf-8")
        terms = raw.split("\n") if n_terms else []
        keys, length, alive = arrays["keys"], arrays["length"], arrays["alive"]
        indptr, docs, tfs = arrays["indptr"], arrays["docs"], arrays["tfs"]
        n = len(keys)
        if (
            len(terms) != n_terms
            or tuple(arrays["params"].tolist()) != (self.k1, self.b)
            or len(length) != n
            or len(alive) != n
            or indptr.shape != (n_terms + 1,)
            or indptr[0] != 0
            or (n_terms and np.any(np.diff(indptr) < 0))
            or int(indptr[-1]) != len(docs)
            or len(tfs) != len(docs)
            or (len(docs) and (int(docs.min()) < 0 or int(docs.max()) >= n))
            or not np.array_equal(keys >= 0, alive)
            or (n and int(keys.max()) >= _MAX_KEY)
        ):
            raise ValueError("inconsistent keyword index arrays")
        keys = keys.astype(np.int64)
        alive = alive.astype(bool)
        live_keys = keys[alive]
        # Live keys must be distinct: a table as large as the largest key (the store's rows: dense), not a sort.
        slot_of = np.full(max(int(keys.max()) + 1 if n else 0, 1024), -1, np.int64)
        slot_of[live_keys] = np.flatnonzero(alive)
        if np.count_nonzero(slot_of >= 0) != len(live_keys):
            raise ValueError("inconsistent keyword index arrays (a key appears twice)")
        self.clear()
        self._term_ids.clear()
        self._term_ids.update(zip(terms, range(n_terms), strict=True))
        self._term_of.clear()
        capacity = max(1024, n)
        self._keys = np.full(capacity, -1, np.int64)
        self._keys[:n] = keys
        self._length = np.zeros(capacity, np.float32)
        self._length[:n] = length
        self._alive = np.zeros(capacity, bool)
        self._alive[:n] = alive
        self._slots = n
        self._slot_of = slot_of
        self._live = len(live_keys)
        self._dead = n - self._live
        self._total_length = float(length[alive].sum(dtype=np.float64))
        self._indptr = indptr.astype(np.int64)
        self._docs = docs.astype(np.int32)
        self._tfs = tfs.astype(np.float32)
        self._frozen_slots = n
        if self._dead and not self._alive[self._docs].all():  # postings of removed documents: see _term_postings
            self._bounds.removed = np.flatnonzero(~alive).tolist()
