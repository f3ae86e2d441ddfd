"""Compaction never grows a store with nothing to purge beyond its journal header's new field (issue 23, item 4).

The store grows as a person's does: a first memory in one session, the rest in a later one, then a new session
compacts. Before the fix a small store kept checkpoints written at its first reopen, and compaction rewrote them in
full: 10 memories went from 23 kB to 41 kB (benchmarks/compaction.py).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder

# What a compaction adds with nothing to purge: the journal header's `compacted_at` (and a longer generation field
# never: the generation is a uuid4 hex either way).
HEADER_BOUND = 64


def _grown(tmp_path: Path, n: int) -> None:
    texts = [f"fact {i} of the week: the people and places of day {i % 7}" for i in range(n)]
    with MemoryStore(tmp_path, "c", embedder=FakeEmbedder()) as store:
        store.add(texts[0])
    with MemoryStore(tmp_path, "c", embedder=FakeEmbedder()) as store:
        store.add_many(texts[1:])


@pytest.mark.parametrize("n", [10, 150, 260])
def test_compact_with_nothing_to_purge_does_not_grow_the_store(tmp_path: Path, n: int) -> None:
    """Below CHECKPOINT_RECORDS (200) a store keeps no checkpoints, before or after; above, the checkpoints are
    current on close and compaction writes the same ones again. Either way: at most HEADER_BOUND bytes more."""
    _grown(tmp_path, n)
    with MemoryStore(tmp_path, "c", embedder=FakeEmbedder()) as store:
        report = store.compact()
        hits = store.search("fact 3 of the week", limit=3)
    assert report["count"] == n and report["removed"] == 0
    assert report["bytes_after"] <= report["bytes_before"] + HEADER_BOUND, report
    assert hits and hits[0].memory.content.startswith("fact 3 ")


def test_a_small_store_keeps_only_its_journal_and_vectors(tmp_path: Path) -> None:
    """After compaction a small store is its journal, its vector file and its lock: reopened, it finds its
    memories (the indexes rebuilt in memory) and still writes no checkpoint."""
    _grown(tmp_path, 12)
    with MemoryStore(tmp_path, "c", embedder=FakeEmbedder()) as store:
        store.compact()
    with MemoryStore(tmp_path, "c", embedder=FakeEmbedder()) as store:
        assert store.search("fact 5 of the week", limit=1)[0].memory.content.startswith("fact 5 ")
        kinds = sorted(p.name.split("-")[0].split(".")[0] for p in store.folder.iterdir())
    assert kinds == ["journal", "lock", "vectors"]
