"""What the hybrid ranking knows about a row beyond its text and vector: its session neighbours, whether it
carries time words, and the speakers a query names.

All of it is derived from the catalog on demand and kept for the generation (rows are never reused within one, and
a row's content, speaker and session never change), so it costs nothing to store, nothing at ingest, and nothing
at all in a store without sessions or speakers:

- neighbours: a turn's previous and next turn in the same session and namespace, in stored order (an imported
  history is stored in its order). Linked incrementally as rows arrive (from this process or another one);
  a neighbour that is no longer current counts as none.
- time words: `timewords.TIME_WORDS` over a row's content, tested the first time a "when" question meets it.
- speakers: one case-insensitive whole-name pattern over the distinct speaker names, rebuilt when a new one
  appears; names that are stopwords or shorter than 2 letters are left out ("Will", "May" would fire on words).
"""

from __future__ import annotations

import re

import numpy as np

from memserver.local.catalog import Catalog
from memserver.retrieval.hybrid_convex import speaker_matcher
from memserver.retrieval.timewords import TIME_WORDS

__all__ = ["RowContext"]

_NONE = -1


class RowContext:
    """The derived per-row facts of one generation's catalog (see the module docstring)."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog
        self._prev = np.full(0, _NONE, np.int64)
        self._next = np.full(0, _NONE, np.int64)
        self._linked = 0  # rows below this are linked
        self._last: dict[int, int] = {}  # (namespace code, session code) as one int -> its last row so far
        self._timeword = np.zeros(0, np.int8)  # 0: not tested yet, 1: no, 2: yes
        self._names_seen = 0
        self._speaker_pattern: re.Pattern[str] | None = None
        self._codes_of: dict[str, list[int]] = {}

    # --- session neighbours ---------------------------------------------------------------------------------------

    def has_sessions(self) -> bool:
        return len(self.catalog.sessions.names) > 1

    def neighbours(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(previous, next) current turn of each of `rows` in its session, -1 for none."""
        if not self.has_sessions():
            none = np.full(len(rows), _NONE, np.int64)
            return none, none
        self._link()
        prev, nxt = self._prev[rows], self._next[rows]
        alive = self.catalog.alive
        prev = np.where((prev >= 0) & alive[np.maximum(prev, 0)], prev, _NONE)
        nxt = np.where((nxt >= 0) & alive[np.maximum(nxt, 0)], nxt, _NONE)
        return prev, nxt

    def _link(self) -> None:
        """Link the rows added since the last call (vectorised within the batch, then joined to what came before)."""
        catalog = self.catalog
        lo, hi = self._linked, catalog.next_row
        if hi <= lo:
            return
        if hi > len(self._prev):
            size = max(hi, 2 * len(self._prev), 1024)
            self._prev = np.concatenate([self._prev, np.full(size - len(self._prev), _NONE, np.int64)])
            self._next = np.concatenate([self._next, np.full(size - len(self._next), _NONE, np.int64)])
        sessions = catalog.sessions.codes[lo:hi].astype(np.int64)
        spaces = catalog.namespaces.codes[lo:hi].astype(np.int64)
        rows = np.flatnonzero(sessions) + lo
        if len(rows):
            keys = spaces[rows - lo] * (1 << 31) + sessions[rows - lo]
            order = np.lexsort((rows, keys))
            rows, keys = rows[order], keys[order]
            same = np.flatnonzero(keys[1:] == keys[:-1])
            self._prev[rows[same + 1]] = rows[same]
            self._next[rows[same]] = rows[same + 1]
            firsts = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
            lasts = np.concatenate((firsts[1:] - 1, [len(keys) - 1]))
            groups = zip(keys[firsts].tolist(), rows[firsts].tolist(), rows[lasts].tolist(), strict=True)
            for key, first, last in groups:
                before = self._last.get(key)
                if before is not None:
                    self._prev[first] = before
                    self._next[before] = first
                self._last[key] = last
        self._linked = hi

    # --- time words -------------------------------------------------------------------------------------------------

    def timewords(self, rows: np.ndarray) -> np.ndarray:
        """Which of `rows` carry time words in their content: a mask."""
        catalog = self.catalog
        if catalog.next_row > len(self._timeword):
            grown = np.zeros(max(catalog.next_row, 2 * len(self._timeword), 1024), np.int8)
            grown[: len(self._timeword)] = self._timeword
            self._timeword = grown
        flags = self._timeword
        for row in rows[flags[rows] == 0].tolist():
            flags[row] = 2 if TIME_WORDS.search(catalog.contents.get(row)) else 1
        tested: np.ndarray = flags[rows] == 2
        return tested

    # --- speakers -----------------------------------------------------------------------------------------------

    def named_speakers(self, query: str) -> tuple[list[str], list[int]]:
        """(names, speaker codes) of the speakers `query` names by their whole name, any case."""
        names = self.catalog.speakers.names
        if len(names) != self._names_seen:
            self._compile(names)
        if self._speaker_pattern is None:
            return [], []
        found: dict[str, None] = {}
        for m in self._speaker_pattern.finditer(query):
            found[m.group(0).casefold()] = None
        codes = [code for name in found for code in self._codes_of[name]]
        return [names[c] for c in codes], codes

    def speaker_codes(self, rows: np.ndarray) -> np.ndarray:
        codes: np.ndarray = self.catalog.speakers.codes[rows]
        return codes

    def _compile(self, names: list[str]) -> None:
        self._speaker_pattern, self._codes_of = speaker_matcher(names)
        self._names_seen = len(names)
