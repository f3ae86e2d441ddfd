"""A small LRU of recent query vectors: agents repeat their questions, and a repeated recall should not pay for the
model again.

Keyed by the exact text the embedder is given (the store has already trimmed it); nothing else is normalised here,
because two texts that differ in any character may tokenise differently. Bounded by entries, and by the length of
a key: a text longer than MAX_KEY_CHARS is never cached, so the cache holds at most
`max_entries * (384 * 4 B + MAX_KEY_CHARS characters)`. Thread-safe: one lock around each lookup and insert.
Lookups return a copy, so no caller can change what the next caller gets.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

from memserver.errors import ConfigError

if TYPE_CHECKING:  # numpy is not imported here: the loader reads the setting on the server's start-up path
    import numpy as np

DEFAULT_ENTRIES = 1024
MAX_KEY_CHARS = 2048  # longer query texts are embedded every time (rare, and the bound stays small)


def entries_from_env() -> int:
    """MEMSERVER_QUERY_CACHE as a number of entries (0 disables the cache); DEFAULT_ENTRIES when unset."""
    value = os.environ.get("MEMSERVER_QUERY_CACHE", "").strip()
    if not value:
        return DEFAULT_ENTRIES
    try:
        entries = int(value)
    except ValueError:
        entries = -1
    if entries < 0:
        raise ConfigError(
            f"MEMSERVER_QUERY_CACHE must be a whole number of entries >= 0 (0 disables the cache), got {value!r}"
        )
    return entries


class QueryCache:
    """Least-recently-used map from query text to its (dim,) float32 vector, at most `max_entries` long."""

    def __init__(self, max_entries: int) -> None:
        if max_entries < 0:
            raise ValueError(f"max_entries must be >= 0, got {max_entries}")
        self.max_entries = max_entries
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, text: object) -> bool:
        return text in self._entries

    def get(self, text: str) -> np.ndarray | None:
        """A copy of the cached vector of `text` (now the most recently used), or None."""
        if self.max_entries == 0:
            return None
        with self._lock:
            vector = self._entries.get(text)
            if vector is None:
                self.misses += 1
                return None
            self._entries.move_to_end(text)
            self.hits += 1
        copy: np.ndarray = vector.copy()
        return copy

    def put(self, text: str, vector: np.ndarray) -> None:
        """Remember a copy of `vector` for `text`, evicting the least recently used entry when full."""
        if self.max_entries == 0 or len(text) > MAX_KEY_CHARS:
            return
        import numpy

        stored = numpy.array(vector, dtype=numpy.float32, copy=True)
        stored.flags.writeable = False
        with self._lock:
            if text in self._entries:
                self._entries.move_to_end(text)
            else:  # evict first, so the length read without the lock never exceeds the bound
                while len(self._entries) >= self.max_entries:
                    self._entries.popitem(last=False)
            self._entries[text] = stored

    def keys(self) -> list[str]:
        """The cached texts, least recently used first (a snapshot)."""
        with self._lock:
            return list(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
