"""A deterministic fake of the TextEmbedder protocol, so store tests run without the model.

Hashed bag of words: each lower-cased word adds 1 to one of 384 dimensions (by CRC-32, stable across processes),
so texts sharing words score high and unrelated texts score near 0. Rows are unit-norm float32. It counts calls,
which lets tests prove that a rebuild did not re-embed. RecordingHooks records what a store reports through its
hooks (hooks.py).
"""

from __future__ import annotations

import re
import threading
import zlib
from collections.abc import Sequence

import numpy as np

from memserver.local.hooks import StoreHooks

_WORD = re.compile(r"\w+")


class FakeEmbedder:
    """Implements TextEmbedder: dim, model_name, embed, embed_query; and the Embedder's load(), which the server
    calls at start (there is nothing to load), so a `memserver serve` child can run on it."""

    dim = 384
    model_name = "fake/hashed-bag-of-words"

    def __init__(self) -> None:
        self.calls = 0  # embed() + embed_query() calls
        self.texts = 0  # texts embedded, queries included
        self._lock = threading.Lock()

    def load(self) -> FakeEmbedder:
        return self

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(self.dim, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            v[zlib.crc32(word.encode()) % self.dim] += 1.0
        v[self.dim - 1] += 0.05  # never the zero vector, even for text without words
        return v / np.linalg.norm(v)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            self.calls += 1
            self.texts += len(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([self._one(t) for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        with self._lock:
            self.calls += 1
            self.texts += 1
        return self._one(text)


class RecordingHooks(StoreHooks):
    """StoreHooks that record what the store reports: each open as (records replayed, from its snapshot), each
    vector ranking's plan as (plan, candidates), each checkpoint's live count."""

    def __init__(self) -> None:
        self.opens: list[tuple[int, bool]] = []
        self.plans: list[tuple[str, int | None]] = []
        self.checkpoints: list[int] = []

    def opened(self, replayed: int, from_snapshot: bool) -> None:
        self.opens.append((replayed, from_snapshot))

    def planned(self, plan: str, candidates: int | None) -> None:
        self.plans.append((plan, candidates))

    def checkpointed(self, count: int) -> None:
        self.checkpoints.append(count)
