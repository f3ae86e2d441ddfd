"""What the contract tests share: the backend under test, and an oracle for the fake embedder's rankings.

The fake embedder (tests/support/fakes.py) is a hashed bag of words, so a ranking can be computed here exactly: the
cosine of a memory to a query depends only on the words they share, once no other word lands in the same hashed
dimension. `distinct_words` hands out words that never do, which is what makes the rankings below deterministic.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from tests.support.fakes import FakeEmbedder

if TYPE_CHECKING:
    # The storage contract is memserver.contract.backend.MemoryBackend; MemoryStore meets it.
    from memserver.local.store import MemoryStore as Backend
else:
    Backend = Any

Opener = Callable[[str, FakeEmbedder], "Backend"]

ID = re.compile(r"^[0-9a-f]{32}$")
CREATED_AT = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}\+00:00$")  # ISO 8601, UTC, microseconds
MODES = ("hybrid", "semantic", "keyword")
# Scores are float32 cosines: equal to the oracle's within this.
SCORE_TOLERANCE = 1e-5

_ORACLE = FakeEmbedder()
_WORD = re.compile(r"\w+")


class BackendUnderTest:
    """One engine's backend on fresh storage, with its fake embedder, and the means to open that storage again."""

    def __init__(self, engine: str, opener: Opener) -> None:
        self.engine = engine
        self._opener = opener
        self._opened: list[Backend] = []
        self.embedder = FakeEmbedder()
        self.store = self._open("main", self.embedder)

    def _open(self, space: str, embedder: FakeEmbedder) -> Backend:
        store = self._opener(space, embedder)
        self._opened.append(store)
        return store

    def reopen(self) -> Backend:
        """Close the backend and open the same storage again, with a new embedder (its counts start at 0)."""
        self.store.close()
        self.embedder = FakeEmbedder()
        self.store = self._open("main", self.embedder)
        return self.store

    def twin(self) -> Backend:
        """A second backend open on the same storage at the same time (another process, another host)."""
        return self._open("main", FakeEmbedder())

    def another(self, space: str = "other") -> tuple[Backend, FakeEmbedder]:
        """A second backend of the same engine on its own, empty storage (an import target), and its embedder."""
        embedder = FakeEmbedder()
        return self._open(space, embedder), embedder

    def close_all(self) -> None:
        for store in self._opened:
            store.close()


# --- the oracle ------------------------------------------------------------------------------------------------------


def cosine(content: str, query: str) -> float:
    """The score a backend must report for `content` against `query` (the fake embedder's cosine)."""
    return float(np.dot(_ORACLE.embed([content])[0], _ORACLE.embed_query(query)))


def vector(text: str) -> list[float]:
    """The fake embedder's vector of `text`, as export(include_vectors=True) writes it."""
    return [float(x) for x in _ORACLE.embed([text])[0]]


def _dims(text: str) -> set[int]:
    return {zlib.crc32(w.encode()) % FakeEmbedder.dim for w in _WORD.findall(text.lower())}


def distinct_words(n: int, avoid: Iterable[str] = (), prefix: str = "w") -> list[str]:
    """`n` words that share no hashed dimension with each other, with the words of `avoid`, or with the constant one.

    Plain lower-case letters and digits: no stopword, no plural, no date, nothing the keyword tokenizer splits.
    """
    taken = {FakeEmbedder.dim - 1}
    for text in avoid:
        taken |= _dims(text)
    out: list[str] = []
    i = 0
    while len(out) < n:
        word = f"{prefix}{i}x"
        dim = zlib.crc32(word.encode()) % FakeEmbedder.dim
        if dim not in taken:
            taken.add(dim)
            out.append(word)
        i += 1
        if i > 100_000:
            raise ValueError(f"only {len(out)} distinct words fit beside {sorted(avoid)}")
    return out


def ids(hits: Sequence[Any]) -> list[str]:
    """The ids of search hits, in order."""
    return [h.memory.id for h in hits]


def records(memories: Iterable[Any]) -> list[dict[str, Any]]:
    """Memories as the plain dicts a client reads back (id, content, created_at, tags, source)."""
    return [m.to_dict() for m in memories]
