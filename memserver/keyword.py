"""Keyword (BM25) index over memory content: finds the names, ids, numbers and exact words that embeddings blur.

Derived data, like the vector index: the store feeds it from the journal replay (`add` / `remove` per record), so
every process that replays the same journal holds the same index, and nothing the journal kept can be missing from
it. A full rebuild costs ~1.0-1.5 s of CPU per 100k memories of ~17 words (`benchmarks/keyword_speed.py`, loaded
2-core machine; creating the token objects is most of it), so the store checkpoints it (see the end of this text).

Why hand-written numpy postings and not SQLite FTS5 (stdlib, and the first choice on paper). Measured at 100k
memories with a Zipf vocabulary, 3-term OR queries: FTS5 `bm25()` ... `ORDER BY rank LIMIT 50` took 46 ms p50 and
167 ms p95, because FTS5 scores every row that matches any term before it sorts; restricting it to a candidate set
needs a temp table or `rowid IN (...)` per query, and its bulk insert was no faster (0.8-1.0 s per 100k). Here a
query term costs one vectorised gather over its posting list: ~1.3 ms p50 on those Zipf queries, and 0.3 ms p50 /
1.0 ms p95 for the evaluation set's queries at 100k, with a filter (`candidates`) applied before the top-k.
bm25s and rank-bm25 have no incremental add/remove; tantivy is a large native dependency with its own files and
writer lock, which the journal makes unnecessary.

Layout: a frozen CSR (`term -> slots, term frequencies`) plus a small delta for recent adds, merged into the CSR
when it grows past 1/16 of it (a large batch merges in one step). Removal clears a slot's `alive` bit; dead
postings are dropped at the next merge. Document frequency and the average length are computed over live
documents only, so scores do not drift.

Tokens: lower-cased, accents folded ("Zoë" = "zoe", "São" = "sao"), split at punctuation, English stopwords and
possessive "'s" dropped, plurals folded by a light S-stemmer ("invoices" = "invoice"). A token with inner
connectors (`INV-2024-0173`, `anna@example.com`, `10:30`, `snake_case`) is also indexed glued (`inv20240173`),
so an exact id scores far above documents that share only its parts. Folding and stemming run once per distinct
word, not per occurrence, which is what keeps the bulk build fast. Dates: see `date_text`.

Not thread-safe: callers serialise `add`/`remove` against `search` (the store's lock does).

In the store (`KeywordDerivedIndex` below) the keys are vector rows and the text is the content plus `date_text`
of created_at. Rebuilding 100k memories costs ~1-1.5 s, over the store's open budget, so the index is
checkpointed with the vector index: `keyword.json` names a `keyword-<nonce>.npz` of the postings, written with the
same temp + fsync + rename discipline and checked (generation, size, CRC-32, array shapes) before it is trusted;
it loads in well under 0.1 s per 100k. The journal tail past the checkpoint is replayed as usual.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import math
import os
import re
import string
import unicodedata
import uuid
import zlib
from array import array
from collections.abc import Collection, Hashable, Iterable, Sequence
from datetime import datetime
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from memserver.journal import AddRecord, atomic_write, fsync_dir, fsync_fd

__all__ = ["KeywordDerivedIndex", "KeywordIndex", "date_text", "tokenize"]

log = logging.getLogger(__name__)

# ASCII punctuation becomes a space; on UTF-8 bytes this leaves multi-byte letters alone (all bytes >= 0x80).
_ASCII_PUNCT = string.punctuation.encode("ascii")
_BYTES_TABLE = bytes.maketrans(_ASCII_PUNCT, b" " * len(_ASCII_PUNCT))
_UNICODE_PUNCT = re.compile("[‘’‚‛“”„‟«»‹›–—―‐‑…·•°§¶†‡€£¥₹¢©®™×÷¿¡、。，：；！？（）「」]")  # re: 10x str.translate
# An id-like word: alphanumeric runs joined by connectors, e.g. INV-2024-0173, anna@example.com, 10:30, a_b.
# '.' alone is not a hint (it ends every sentence): "v2.3.1" is indexed by its parts only.
_COMPOUND_HINTS = "-@/#_+&:"
_NOT_HINT_BYTES = bytes(sorted(set(range(256)) - set(_COMPOUND_HINTS.encode("ascii"))))
_COMPOUND = re.compile(r"[^\W_]+(?:[-_.@/:+#&][^\W_]+)+")
_CONNECTOR_RUN = re.compile(r"[-_.@/:+#&]")

# Small on purpose: BM25's idf already discounts common words; these only cost time and add noise.
_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could d did do does doing down during each few for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just ll m me more most my myself no nor
    not now of off on once only or other our ours ourselves out over own re s same she should so some such t than
    that the their theirs them themselves then there these they this those through to too under until up ve very
    was we were what when where which while who whom why will with would you your yours yourself yourselves""".split()  # noqa: SIM905
)


def _fold(word: str) -> str:
    """Lower-case and strip accents, so that "Café", "CAFE" and "cafe" index the same."""
    word = word.casefold()
    if not word.isascii():
        word = "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))
    return word


def _stem(word: str) -> str:
    """Harman's S-stemmer: folds English plurals and nothing else (a full stemmer conflates names and ids)."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


def _normalise(raw: bytes) -> str | None:
    """The indexed form of one raw token, or None for a stopword."""
    word = _fold(raw.decode("utf-8", "replace"))
    if not word or word in _STOPWORDS:
        return None
    return _stem(word)


def _hinted_words(lower: str) -> list[str]:
    """The space-separated words that contain a connector, found with str.find (a regex scan is 5x slower)."""
    spans: dict[tuple[int, int], None] = {}
    last = len(lower) - 1
    for hint in _COMPOUND_HINTS:
        at = lower.find(hint)
        while at != -1:
            if 0 < at < last and lower[at + 1].isalnum() and lower[at - 1].isalnum():  # not "Note:" or " - "
                end = lower.find(" ", at)
                end = len(lower) if end == -1 else end
                spans[(lower.rfind(" ", 0, at) + 1, end)] = None
                at = lower.find(hint, end)
            else:
                at = lower.find(hint, at + 1)
    return [lower[start:end] for start, end in spans]


def _raw_tokens(text: str) -> list[bytes]:
    """Split text into raw lower-case tokens, plus glued forms of id-like words.

    Bytes, not str, and only C string methods on the common path: creating the token objects is most of the
    cost of a rebuild, so nothing per token happens in Python here.
    """
    lower = text.lower()
    if not lower.isascii():
        lower = _UNICODE_PUNCT.sub(" ", lower)
    data = lower.encode("utf-8", "replace")
    tokens = data.translate(_BYTES_TABLE).split()
    if data.translate(None, _NOT_HINT_BYTES):
        for word in _hinted_words(lower):
            tokens.extend(_CONNECTOR_RUN.sub("", m).encode("utf-8") for m in _COMPOUND.findall(word))
    return tokens


def tokenize(text: str) -> list[str]:
    """The terms `text` is indexed (or queried) under, in order; for tests and for debugging a ranking."""
    return [t for t in map(_normalise, _raw_tokens(text)) if t is not None]


_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH_NUMBER = {name: i for i, name in enumerate(_MONTHS, 1)} | {name[:3]: i for i, name in enumerate(_MONTHS, 1)}
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:tember)?|oct(?:ober)?"
    r"|nov(?:ember)?|dec(?:ember)?)\b"
)
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATE_PATTERNS = (  # (regex, group of day, month, year) over a lower-cased query
    (re.compile(_DAY + r"\s+(?:of\s+)?" + _MONTH + r"(?:,?\s+(\d{4}))?"), (1, 2, 3)),
    (re.compile(_MONTH + r"\s+" + _DAY + r"\b(?:,?\s+(\d{4}))?"), (2, 1, 3)),
    (re.compile(_MONTH + r",?\s+(\d{4})"), (0, 1, 2)),
    (re.compile(r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b"), (1, 2, 3)),
)


def date_text(created_at: str) -> str:
    """Date words to append to a memory's indexed text: "2025-03-14T..." -> "20250314 202503 march14".

    Glued, so they are rare terms: a query naming that day ("14 March 2025", "March 14", "2025-03-14") or month
    ("March 2025", "2025-03") matches them through `_date_terms`, and a year or month name alone, which would
    match a third of the store, adds nothing.
    """
    day = datetime.fromisoformat(created_at).date()
    return f"{day:%Y%m%d} {day:%Y%m} {_MONTHS[day.month - 1]}{day.day}"


def _date_terms(query: str) -> list[bytes]:
    """The glued date terms (see `date_text`) for the dates a query names; queries are short, so a regex is fine."""
    lower = query.lower()
    out: list[bytes] = []
    for pattern, (day_group, month_group, year_group) in _DATE_PATTERNS:
        for match in pattern.finditer(lower):
            month_text = match.group(month_group)
            month = int(month_text) if month_text.isdigit() else _MONTH_NUMBER[month_text[:3]]
            day = int(match.group(day_group)) if day_group else 0
            year = match.group(year_group)
            if not 1 <= month <= 12 or day > 31:
                continue
            if day and year:
                out.append(f"{year}{month:02d}{day:02d}".encode())
            if year:
                out.append(f"{year}{month:02d}".encode())
            if day:
                out.append(f"{_MONTHS[month - 1]}{day}".encode())
    return out


class _Vocabulary(dict):
    """Raw token -> term id (-1 for a stopword); a new token is normalised on its first lookup, and only then."""

    def __init__(self, term_ids: dict[str, int]) -> None:
        super().__init__()
        self.term_ids = term_ids

    def __missing__(self, token: bytes) -> int:
        term = _normalise(token)
        term_id = -1 if term is None else self.term_ids.setdefault(term, len(self.term_ids))
        self[token] = term_id
        return term_id


class KeywordIndex:
    """BM25 over short texts with incremental add/remove and candidate filtering.

    Keys are any hashable ids. When they are non-negative ints (e.g. the store's vector labels), `search` also
    takes `candidates` as a numpy int array and filters without a Python loop.

    Args:
        k1: term-frequency saturation (1.2 is the usual default).
        b: length normalisation (0.75 is the usual default).
    """

    def __init__(self, *, k1: float = 1.2, b: float = 0.75) -> None:
        self.k1 = k1
        self.b = b
        self._term_ids: dict[str, int] = {}  # normalised term -> term id
        self._term_of = _Vocabulary(self._term_ids)  # raw token -> term id, -1 for a stopword
        self.clear()

    # -- state -------------------------------------------------------------------------------------------------

    def clear(self) -> None:
        """Forget every document (the vocabulary is kept: it is a pure function of the words)."""
        self._slot_of: dict[Hashable, int] = {}
        self._keys: list[Hashable | None] = []
        self._int_slot: np.ndarray | None = np.full(0, -1, np.int64)  # int key -> slot; None once a key isn't
        self._length = np.zeros(1024, np.float32)
        self._alive = np.zeros(1024, bool)
        self._live = 0
        self._dead = 0
        self._total_length = 0.0
        # frozen postings: term id t owns _docs[_indptr[t]:_indptr[t+1]] and the same slice of _tfs
        self._indptr = np.zeros(1, np.int64)
        self._docs = np.zeros(0, np.int32)
        self._tfs = np.zeros(0, np.float32)
        self._frozen_slots = 0  # slots below this are in the frozen arrays, the others in _delta
        self._delta: dict[int, tuple[array, array]] = {}  # term id -> (slots, tfs) added since

    def __len__(self) -> int:
        return self._live

    def __contains__(self, key: object) -> bool:
        return key in self._slot_of

    # -- writing -----------------------------------------------------------------------------------------------

    def add(self, key: Hashable, text: str) -> None:
        """Index `text` under `key`, replacing what `key` had."""
        self.add_many([(key, text)])

    def add_many(self, items: Iterable[tuple[Hashable, str]]) -> None:
        """Index many documents, replacing what their keys had; a large batch (a rebuild) is one vectorised merge."""
        batch = dict(items)  # a key repeated in the batch: the last text wins
        if not batch:
            return
        for key in self._slot_of.keys() & batch.keys():
            self.remove(key)
        raws = [_raw_tokens(text) for text in batch.values()]
        flat = list(chain.from_iterable(raws))
        n = len(batch)
        first = len(self._keys)
        terms = np.fromiter(map(self._term_of.__getitem__, flat), np.int64, len(flat))
        docs = np.repeat(np.arange(n, dtype=np.int64), np.fromiter(map(len, raws), np.int64, n))
        keep = terms >= 0
        terms, docs = terms[keep], docs[keep]
        lengths = np.bincount(docs, minlength=n)
        self._register(list(batch), first, lengths)
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
        if len(self._keys) - self._frozen_slots > max(1024, self._frozen_slots // 16):
            self._merge()

    def remove(self, key: Hashable) -> bool:
        """Drop `key` from the index; False when it was not there."""
        slot = self._slot_of.pop(key, None)
        if slot is None:
            return False
        self._keys[slot] = None
        self._alive[slot] = False
        if self._int_slot is not None:
            self._int_slot[key] = -1
        self._live -= 1
        self._dead += 1
        self._total_length -= float(self._length[slot])
        return True

    def _register(self, keys: list[Hashable], first: int, lengths: np.ndarray) -> None:
        """Give new documents their slots, lengths and live bits."""
        end = first + len(keys)
        if end > len(self._alive):
            size = max(end, 2 * len(self._alive))
            self._length = np.concatenate([self._length, np.zeros(size - len(self._length), np.float32)])
            self._alive = np.concatenate([self._alive, np.zeros(size - len(self._alive), bool)])
        self._slot_of.update(zip(keys, range(first, end), strict=True))
        self._keys.extend(keys)
        self._length[first:end] = lengths
        self._alive[first:end] = True
        self._live += len(keys)
        self._total_length += float(lengths.sum())
        if self._int_slot is not None:
            if all(isinstance(key, (int, np.integer)) and not isinstance(key, bool) and key >= 0 for key in keys):
                self._int_slot = self._grown_int_slot(max(keys))
                self._int_slot[np.asarray(keys, np.int64)] = np.arange(first, end)
            else:
                self._int_slot = None

    def _grown_int_slot(self, largest: int) -> np.ndarray:
        table = self._int_slot
        assert table is not None
        if largest < len(table):
            return table
        grown = np.full(max(largest + 1, 2 * len(table), 1024), -1, np.int64)
        grown[: len(table)] = table
        return grown

    def _merge(
        self, terms: np.ndarray | None = None, docs: np.ndarray | None = None, tfs: np.ndarray | None = None
    ) -> None:
        """Rebuild the frozen CSR from itself, the delta and a new batch; drop dead postings, renumber slots."""
        n_terms = len(self._term_ids)
        counts = np.diff(self._indptr)
        parts_term = [np.repeat(np.arange(len(counts), dtype=np.int64), counts)]
        parts_doc = [self._docs.astype(np.int64)]
        parts_tf = [self._tfs]
        for term, (slots, freqs) in self._delta.items():
            parts_term.append(np.full(len(slots), term, np.int64))
            parts_doc.append(np.frombuffer(slots, np.int32).astype(np.int64))
            parts_tf.append(np.frombuffer(freqs, np.float32).copy())
        if terms is not None and docs is not None and tfs is not None:
            parts_term.append(terms)
            parts_doc.append(docs)
            parts_tf.append(tfs)
        term = np.concatenate(parts_term)
        doc = np.concatenate(parts_doc)
        tf = np.concatenate(parts_tf)
        n_slots = len(self._keys)
        if self._dead:
            alive = self._alive[:n_slots]
            keep = alive[doc]
            term, doc, tf = term[keep], doc[keep], tf[keep]
            if self._dead > n_slots // 4:  # renumber slots so that dead ones stop costing memory and time
                live_slots = np.flatnonzero(alive)
                doc = (np.cumsum(alive) - 1)[doc]
                self._keys = [self._keys[s] for s in live_slots.tolist()]
                self._slot_of = {key: i for i, key in enumerate(self._keys)}
                length = self._length[live_slots]
                self._length[:] = 0
                self._length[: len(live_slots)] = length
                self._alive[:] = False
                self._alive[: len(live_slots)] = True
                self._dead = 0
                if self._int_slot is not None:
                    self._int_slot[:] = -1
                    if self._keys:
                        self._int_slot[np.asarray(self._keys, np.int64)] = np.arange(len(self._keys))
        if len(parts_term) > 2 or len(self._docs):  # a lone new batch comes sorted by term from np.unique
            order = np.argsort(term, kind="stable")
            term, doc, tf = term[order], doc[order], tf[order]
        self._docs = doc.astype(np.int32)
        self._tfs = tf.astype(np.float32)
        self._indptr = np.zeros(n_terms + 1, np.int64)
        np.cumsum(np.bincount(term, minlength=n_terms), out=self._indptr[1:])
        self._delta = {}
        self._frozen_slots = len(self._keys)

    # -- reading -----------------------------------------------------------------------------------------------

    def query_terms(self, query: str) -> list[int]:
        """Distinct known term ids of a query, in query order, dates it names included (see `date_text`)."""
        seen: dict[int, None] = {}
        for token in _raw_tokens(query) + _date_terms(query):
            term = self._term_of.get(token)
            if term is None:
                normalised = _normalise(token)
                term = -1 if normalised is None else self._term_ids.get(normalised, -1)
            if term >= 0:
                seen[term] = None
        return list(seen)

    def _postings(self, term: int) -> tuple[np.ndarray, np.ndarray]:
        if term + 1 < len(self._indptr):
            lo, hi = self._indptr[term], self._indptr[term + 1]
            docs, tfs = self._docs[lo:hi], self._tfs[lo:hi]
        else:
            docs, tfs = self._docs[:0], self._tfs[:0]
        extra = self._delta.get(term)
        if extra:
            docs = np.concatenate([docs, np.frombuffer(extra[0], np.int32)])
            tfs = np.concatenate([tfs, np.frombuffer(extra[1], np.float32)])
        return docs, tfs

    def search(
        self, query: str, k: int = 10, candidates: Collection[Hashable] | np.ndarray | None = None
    ) -> list[tuple[Hashable, float]]:
        """The `k` best keys for `query` by BM25 (OR semantics), best first, as (key, score).

        `candidates`, when given, restricts the ranking to those keys *before* the top-k is taken, so a filter
        never empties the result. Pass a set when it is large, or a numpy int array when keys are ints.
        Ties keep insertion order.
        """
        if k <= 0 or self._live == 0:
            return []
        terms = self.query_terms(query)
        if not terms:
            return []
        n = self._live
        avg_length = self._total_length / n if self._total_length > 0 else 1.0
        k1, b = self.k1, self.b
        all_docs: list[np.ndarray] = []
        all_scores: list[np.ndarray] = []
        for term in terms:
            docs, tfs = self._postings(term)
            if self._dead and len(docs):
                live = self._alive[docs]
                docs, tfs = docs[live], tfs[live]
            df = len(docs)
            if df == 0:
                continue
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            norm = k1 * (1.0 - b + b * self._length[docs] / avg_length)
            all_docs.append(docs)
            all_scores.append((idf * (k1 + 1.0)) * tfs / (tfs + norm))
        if not all_docs:
            return []
        if len(all_docs) == 1:
            docs, scores = all_docs[0], all_scores[0]
        else:
            docs, scores = np.concatenate(all_docs), np.concatenate(all_scores)
            if len(docs) * 16 > len(self._keys):  # many postings: a dense accumulator beats sorting them
                dense = np.bincount(docs, weights=scores, minlength=len(self._keys))
                docs = np.flatnonzero(dense)
                scores = dense[docs]
            else:
                docs, inverse = np.unique(docs, return_inverse=True)
                scores = np.bincount(inverse, weights=scores, minlength=len(docs))
        if candidates is not None:
            docs, scores = self._restrict(docs, scores, candidates)
        if len(docs) > k:
            top = np.argpartition(-scores, k - 1)[:k]
            docs, scores = docs[top], scores[top]
        order = np.lexsort((docs, -scores))  # best first; ties by slot, i.e. insertion order
        keys = self._keys
        return [(keys[docs[i]], float(scores[i])) for i in order]

    def _restrict(
        self, docs: np.ndarray, scores: np.ndarray, candidates: Collection[Hashable] | np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """Keep the scored documents whose key is a candidate, walking whichever side is cheaper."""
        if isinstance(candidates, np.ndarray) and self._int_slot is not None:
            wanted = candidates[(candidates >= 0) & (candidates < len(self._int_slot))]
            slots = self._int_slot[wanted]
            mask = np.zeros(len(self._keys), bool)
            mask[slots[slots >= 0]] = True
            keep = mask[docs]
        elif len(candidates) < len(docs):
            found = [s for s in map(self._slot_of.get, candidates) if s is not None]
            keep = np.isin(docs, np.asarray(found, np.int64))
        else:
            if not isinstance(candidates, (set, frozenset, dict)):
                candidates = set(candidates.tolist() if isinstance(candidates, np.ndarray) else candidates)
            keys = self._keys
            keep = np.fromiter((keys[d] in candidates for d in docs.tolist()), bool, len(docs))
        return docs[keep], scores[keep]

    # -- persistence (int keys only: the store's rows) -------------------------------------------------------

    def state(self) -> dict[str, np.ndarray]:
        """The index as plain arrays (delta merged first); keys must be non-negative ints. See `load_state`."""
        if self._int_slot is None:
            raise ValueError("only an index keyed by non-negative ints can be saved")
        if self._delta or len(self._keys) != self._frozen_slots:
            self._merge()
        terms = sorted(self._term_ids, key=self._term_ids.__getitem__)
        n = len(self._keys)
        return {
            "params": np.asarray([self.k1, self.b], np.float64),
            "terms": np.frombuffer("\n".join(terms).encode("utf-8"), np.uint8),
            "n_terms": np.asarray([len(terms)], np.int64),
            "keys": np.asarray([-1 if k is None else k for k in self._keys], np.int64),
            "length": self._length[:n].copy(),
            "alive": self._alive[:n].copy(),
            "indptr": self._indptr,
            "docs": self._docs,
            "tfs": self._tfs,
        }

    def load_state(self, arrays: dict[str, np.ndarray]) -> None:
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
            or (n and int(keys.max()) >= 1 << 40)
        ):
            raise ValueError("inconsistent keyword index arrays")
        live_keys = keys[alive]
        # Live keys must be distinct: a table as large as the largest key (the store's rows: dense), not a sort.
        int_slot = np.full(max(int(keys.max()) + 1 if n else 0, 1024), -1, np.int64)
        int_slot[live_keys] = np.flatnonzero(alive)
        if np.count_nonzero(int_slot >= 0) != len(live_keys):
            raise ValueError("inconsistent keyword index arrays (a key appears twice)")
        self.clear()
        self._term_ids.clear()
        self._term_ids.update(zip(terms, range(n_terms), strict=True))
        self._term_of.clear()
        capacity = max(1024, n)
        self._length = np.zeros(capacity, np.float32)
        self._length[:n] = length
        self._alive = np.zeros(capacity, bool)
        self._alive[:n] = alive
        key_list = keys.tolist()
        if len(live_keys) == n:
            self._keys = key_list
            self._slot_of = dict(zip(key_list, range(n), strict=True))
        else:
            self._keys = [k if k >= 0 else None for k in key_list]
            self._slot_of = {k: slot for slot, k in enumerate(key_list) if k >= 0}
        self._live = len(self._slot_of)
        self._dead = n - self._live
        self._total_length = float(length[alive].sum(dtype=np.float64))
        self._int_slot = int_slot
        self._indptr = indptr.astype(np.int64)
        self._docs = docs.astype(np.int32)
        self._tfs = tfs.astype(np.float32)
        self._frozen_slots = n


KEYWORD_META = "keyword.json"


def indexed_text(record: AddRecord) -> str:
    """What the store indexes for a memory: its content and the date words of its created_at."""
    return f"{record.content} {date_text(record.created_at)}"


class KeywordDerivedIndex:
    """The store's keyword index: a `KeywordIndex` keyed by vector row, fed like every journal.DerivedIndex.

    Checkpointed beside the vector index (see the module docstring); `load` returns None for a missing, foreign
    or damaged checkpoint, and the store then rebuilds it from the journal.
    """

    name = "keyword"
    persistent = True

    def __init__(self) -> None:
        self.index = KeywordIndex()

    def reset(self) -> None:
        self.index.clear()

    def add(self, records: Sequence[AddRecord], vectors: np.ndarray) -> None:
        self.index.add_many((r.row, indexed_text(r)) for r in records)

    def remove(self, records: Sequence[AddRecord]) -> None:
        for r in records:
            self.index.remove(r.row)

    def search(self, query: str, k: int, candidates: np.ndarray | None = None) -> list[tuple[Hashable, float]]:
        return self.index.search(query, k, candidates)

    def save(self, folder: Path, stamp: dict[str, Any]) -> None:
        """Write `keyword-<nonce>.npz` (fsync'd), then name it in keyword.json (atomic); old files go after."""
        buffer = io.BytesIO()
        np.savez(buffer, **self.index.state())
        data = buffer.getbuffer()
        name = f"keyword-{uuid.uuid4().hex[:12]}.npz"
        path = folder / name
        tmp = folder / (name + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            fsync_fd(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        meta = {**stamp, "file": name, "size": len(data), "crc32": zlib.crc32(data), "live": len(self.index)}
        atomic_write(folder / KEYWORD_META, json.dumps(meta).encode())
        for old in folder.glob("keyword-*.npz*"):
            if old.name != name:
                with contextlib.suppress(OSError):
                    old.unlink()
        fsync_dir(folder)

    def load(self, folder: Path, generation: str) -> dict[str, Any] | None:
        """Load the checkpoint if it is for `generation` and passes every check; else None (the store rebuilds)."""
        try:
            meta = json.loads((folder / KEYWORD_META).read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            log.warning("keyword checkpoint %s is unreadable (%s); rebuilding it", folder / KEYWORD_META, exc)
            return None
        try:
            if not isinstance(meta, dict) or meta.get("generation") != generation:
                return None  # another journal generation (compacted since): rebuilt, quietly
            name = str(meta["file"])
            if "/" in name or os.sep in name or not name.startswith("keyword-"):
                raise ValueError(f"bad file name {name!r}")
            data = (folder / name).read_bytes()
            if len(data) != meta["size"] or zlib.crc32(data) != meta["crc32"]:
                raise ValueError("size or CRC-32 mismatch (damaged on disk)")
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {key: npz[key] for key in npz.files}
            self.index.load_state(arrays)
            if len(self.index) != meta["live"] or len(self.index) != meta["count"]:
                raise ValueError("live count disagrees with the checkpoint")
        except (KeyError, TypeError, ValueError, OSError, EOFError) as exc:
            log.warning("keyword checkpoint in %s not used: %s; rebuilding it from the journal", folder, exc)
            self.index.clear()
            return None
        return meta
