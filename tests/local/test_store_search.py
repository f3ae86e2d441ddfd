"""MemoryStore search modes (hybrid, semantic, keyword), near-duplicates, and the keyword index as derived data."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import memserver.contract.backend
import memserver.errors
import memserver.local.folder
import memserver.local.store
import memserver.local.vectors
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder

ROOT = Path(__file__).resolve().parents[2]
MODES = ("hybrid", "semantic", "keyword")


@pytest.fixture
def store(tmp_path: Path):
    with MemoryStore(tmp_path, "test", embedder=FakeEmbedder()) as s:
        yield s


def _open(tmp_path: Path) -> MemoryStore:
    return MemoryStore(tmp_path, "test", embedder=FakeEmbedder())


def _cosine(store: MemoryStore, content: str, query: str) -> float:
    return float(np.dot(store.embedder.embed([content])[0], store.embedder.embed_query(query)))


FACTS = [
    "Invoice INV-2024-0173 from Hetzner was paid on 3 March",
    "The user prefers green tea in the morning",
    "Standup moved to 10:30 because of the new team in Lisbon",
    "Marta's birthday is 17 April; she loves dark chocolate",
    "The staging database password rotates every Monday",
]


def _ids(hits: list) -> list[str]:
    return [h.memory.id for h in hits]


# --- modes -----------------------------------------------------------------------------------------------------------


def test_every_mode_finds_an_exact_id_and_scores_by_cosine(store: MemoryStore) -> None:
    """In all three modes the id's memory comes first, and every score is the cosine similarity to the query."""
    ms = store.add_many(FACTS)
    for mode in MODES:
        hits = store.search("INV-2024-0173", limit=3, mode=mode)
        assert hits[0].memory.id == ms[0].id, mode
        for h in hits:
            assert h.score == pytest.approx(_cosine(store, h.memory.content, "INV-2024-0173"), abs=1e-5), mode


def test_keyword_mode_returns_only_word_matches(store: MemoryStore) -> None:
    """Keyword mode returns memories sharing a word with the query, and [] when none does."""
    ms = store.add_many(FACTS)
    assert _ids(store.search("chocolate please", mode="keyword", limit=5)) == [ms[3].id]
    assert store.search("zebra xylophone", mode="keyword") == []
    assert len(store.search("zebra xylophone", mode="hybrid", limit=3)) == 3  # meaning still ranks everything


def test_hybrid_fuses_both_rankings_and_fills_the_limit(store: MemoryStore) -> None:
    """Hybrid returns `limit` hits when enough memories exist, each once, keyword-only matches included."""
    ms = store.add_many(FACTS + [f"filler note number {i}" for i in range(40)])
    hits = store.search("when is Marta's birthday", limit=10)
    assert len(hits) == 10 == len(set(_ids(hits)))
    assert hits[0].memory.id == ms[3].id


def test_keyword_search_matches_the_date_a_memory_was_stored(store: MemoryStore) -> None:
    """A date named in the query matches memories created that day (date words are indexed with the content)."""
    store.import_(
        [
            {"content": "weekly review: ship the beta", "created_at": "2025-03-14T10:00:00Z"},
            {"content": "weekly review: hire a designer", "created_at": "2025-03-21T10:00:00Z"},
        ]
    )
    for mode in ("keyword", "hybrid"):
        assert store.search("weekly review on 14 March 2025", limit=1, mode=mode)[0].memory.content.endswith("beta")


def test_filters_restrict_both_rankings(store: MemoryStore) -> None:
    """A keyword-only match outside the filter never appears; the filtered set is ranked in full."""
    outside = store.add("Invoice INV-2024-0173 was paid", tags=["finance"])
    inside = [store.add(f"holiday plan number {i}", tags=["travel"], source="chat") for i in range(3)]
    for mode in MODES:
        for kwargs in ({"tags": ["travel"]}, {"source": "chat"}, {"since": "2000-01-01", "tags": ["travel"]}):
            hits = store.search("INV-2024-0173", limit=10, mode=mode, **kwargs)
            assert outside.id not in _ids(hits), (mode, kwargs)
            if mode != "keyword":
                assert sorted(_ids(hits)) == sorted(m.id for m in inside), (mode, kwargs)
        assert store.search("INV-2024-0173", tags=["finance"], mode=mode)[0].memory.id == outside.id


def test_min_score_applies_to_the_cosine_in_every_mode(store: MemoryStore) -> None:
    """min_score drops hits whose cosine is below it, whatever ranked them."""
    store.add_many(FACTS)
    for mode in MODES:
        everything = store.search("green tea morning", limit=5, mode=mode)
        floor = sorted(h.score for h in everything)[len(everything) // 2]
        kept = store.search("green tea morning", limit=5, mode=mode, min_score=floor)
        assert kept and all(h.score >= floor for h in kept), mode
        assert _ids(kept) == [h.memory.id for h in everything if h.score >= floor], mode
        assert store.search("green tea morning", mode=mode, min_score=0.99) == []


def test_search_by_vector_is_a_semantic_search_with_that_vector(store: MemoryStore) -> None:
    """search_by_vector(v, ...) answers what search(mode="semantic", query_vector=v, ...) does, filters and all."""
    for i, fact in enumerate(FACTS):
        store.add(fact, tags=["even" if i % 2 == 0 else "odd"])
    v = store.embedder.embed_query("tea or chocolate")
    for kw in ({}, {"tags": ["even"]}, {"min_score": 0.1}):
        expected = store.search("ignored", limit=3, mode="semantic", query_vector=v, **kw)
        assert store.search_by_vector(v, limit=3, **kw) == expected
    with pytest.raises(memserver.errors.InvalidInputError, match="384"):
        store.search_by_vector([0.5, 0.5])


def test_bad_mode_is_refused(store: MemoryStore) -> None:
    with pytest.raises(memserver.errors.InvalidInputError, match="mode must be one of"):
        store.search("x", mode="fuzzy")


# --- near-duplicates -------------------------------------------------------------------------------------------------


def test_near_duplicate_is_stored_and_names_the_close_memories(store: MemoryStore) -> None:
    """A restatement is stored, and add() returns the close memory in `similar`; unrelated text has none."""
    old = store.add("Marta lives in Lisbon at Rua da Rosa 41 and works as a freelancer")
    new = store.add("Marta now lives in Lisbon at Rua da Rosa 41 and works as a freelancer")
    assert not new.duplicate and new.id != old.id and store.get(new.id) is not None
    assert [mid for mid, _ in new.similar] == [old.id]
    assert new.similar[0][1] >= memserver.contract.backend.NEAR_DUPLICATE_SCORE
    assert store.add("The staging database password rotates every Monday").similar == ()
    again = store.add("Marta lives in Lisbon at Rua da Rosa 41 and works as a freelancer")
    assert again.duplicate and again.id == old.id and again.similar == ()


# --- the keyword index as derived data -------------------------------------------------------------------------------


def test_keyword_index_follows_another_store_on_the_same_folder(tmp_path: Path) -> None:
    """Adds and deletes through one store show up in the other's keyword search on its next call."""
    with _open(tmp_path) as a, _open(tmp_path) as b:
        m = a.add("Locker code for the gym is 4471")
        assert _ids(b.search("4471", mode="keyword")) == [m.id]
        b.delete(m.id)
        assert a.search("4471", mode="keyword") == []


CHILD = r"""
import sys
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder
with MemoryStore(sys.argv[1], "test", embedder=FakeEmbedder()) as s:
    print(s.add("Parcel tracking number ZX-99812-QR arrives Friday").id)
"""


@pytest.mark.skipif(os.name != "posix", reason="flock")
def test_keyword_index_follows_another_process(tmp_path: Path) -> None:
    """Another process's add is found by this process's keyword search on its next call."""
    with _open(tmp_path) as s:
        s.add("something else entirely")
        assert s.search("ZX-99812-QR", mode="keyword") == []
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(tmp_path)],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            timeout=60,
            check=True,
        )
        assert _ids(s.search("ZX-99812-QR", mode="keyword")) == [out.stdout.strip()]


def test_keyword_checkpoint_is_loaded_then_the_tail_replayed(tmp_path: Path, caplog) -> None:
    """Past CHECKPOINT_RECORDS a keyword checkpoint is saved; reopening loads it and replays only the tail."""
    with _open(tmp_path) as s:
        first = s.add_many([f"note {i} code K{i:04d}X" for i in range(memserver.local.folder.CHECKPOINT_RECORDS + 10)])
    meta = json.loads((tmp_path / "test" / "keyword.json").read_text())
    assert meta["count"] == len(first)
    with _open(tmp_path) as s:
        tail = s.add("a later note with code TAIL-7")
        s.delete(first[3].id)
    with caplog.at_level(logging.INFO), _open(tmp_path) as s:
        assert "rebuilt the keyword index" not in caplog.text
        assert _ids(s.search("K0005X", mode="keyword", limit=1)) == [first[5].id]
        assert _ids(s.search("TAIL-7", mode="keyword", limit=1)) == [tail.id]
        assert s.search("K0003X", mode="keyword") == []


@pytest.mark.parametrize("damage", ["garbage", "missing", "wrong-count"])
def test_damaged_keyword_checkpoint_is_rebuilt(tmp_path: Path, damage: str, caplog) -> None:
    """A damaged, missing or inconsistent keyword checkpoint is not trusted: the index is rebuilt from the journal."""
    with _open(tmp_path) as s:
        ms = s.add_many([f"entry {i} ref R{i:04d}Q" for i in range(memserver.local.folder.CHECKPOINT_RECORDS + 5)])
    folder = tmp_path / "test"
    meta_path = folder / "keyword.json"
    meta = json.loads(meta_path.read_text())
    npz = folder / meta["file"]
    if damage == "garbage":
        data = bytearray(npz.read_bytes())
        data[len(data) // 2] ^= 0xFF
        npz.write_bytes(bytes(data))
    elif damage == "missing":
        npz.unlink()
    else:
        meta_path.write_text(json.dumps({**meta, "count": meta["count"] + 1}))
    with caplog.at_level(logging.INFO), _open(tmp_path) as s:
        assert "rebuilt the keyword index" in caplog.text
        assert _ids(s.search("R0042Q", mode="keyword", limit=1)) == [ms[42].id]
        assert s.stats()["keyword_index"] == {"documents": len(ms)}


def test_keyword_index_after_compaction_here_and_elsewhere(tmp_path: Path) -> None:
    """After compact() (rows renumbered) both this store and another one find by keyword exactly the live memories."""
    with _open(tmp_path) as a, _open(tmp_path) as b:
        ms = a.add_many([f"item {i} tag T{i:03d}Z" for i in range(30)])
        for m in ms[:20]:
            a.delete(m.id)
        b.search("anything", mode="keyword")  # b is caught up before the compaction
        a.compact()
        for s in (a, b):
            assert s.search("T005Z", mode="keyword") == []
            assert _ids(s.search("T025Z", mode="keyword", limit=1)) == [ms[25].id]
            assert sorted(_ids(s.search("item", mode="keyword", limit=100))) == sorted(m.id for m in ms[20:])
    with _open(tmp_path) as s:
        assert _ids(s.search("T025Z", mode="keyword", limit=1)) == [ms[25].id]


# --- search_nowait: the same answer, or None when it would wait ----------------------------------------------------


def test_search_nowait_answers_exactly_what_search_answers_on_a_fresh_store(store: MemoryStore) -> None:
    """search_nowait (backend.SearchesNowait) gives the very hits search gives, for every mode, filter and
    explanation, as long as nothing changed since the store last caught up."""
    assert isinstance(store, memserver.contract.backend.SearchesNowait)
    store.add_many(
        [
            {"content": f, "tags": ["t"] if i % 2 else [], "speaker": "Ana" if i < 3 else None}
            for i, f in enumerate(FACTS)
        ]
    )
    store.add("Marta's party is at the office", namespace="work")
    cases = [
        {"query": "when does the password change?"},
        {"query": "tea", "limit": 2, "mode": "semantic"},
        {"query": "Lisbon team", "mode": "keyword", "explain": True},
        {"query": "birthday", "tags": ["t"], "min_score": -1.0},
        {"query": "birthday", "speaker": "Ana", "explain": True},
        {"query": "Marta", "namespace": "work"},
        {"query": "nothing like this at all", "limit": 1},
    ]
    for case in cases:
        assert store.search_nowait(**case) == store.search(**case), case
    with pytest.raises(memserver.errors.InvalidInputError):  # bad arguments fail as search's do, not with None
        store.search_nowait("tea", limit=0)


def test_search_nowait_says_none_when_another_process_wrote_and_answers_again_once_caught_up(tmp_path: Path) -> None:
    """After another store's write (the journal grew: catching up would take the shared file lock), and for
    as_of (an exact ranking over every candidate), search_nowait answers None instead of waiting; once a search
    has caught up it answers again, the new memory included."""
    with _open(tmp_path) as reader, _open(tmp_path) as writer:
        reader.add_many(FACTS[:3])
        assert reader.search_nowait("invoice") is not None
        new = writer.add("Invoice INV-2025-0001 from Scaleway is overdue")
        assert reader.search_nowait("invoice") is None
        assert reader.search_nowait("invoice", as_of="2100-01-01") is None
        caught_up = reader.search("invoice", limit=5)
        assert new.id in _ids(caught_up)
        assert reader.search_nowait("invoice", limit=5) == caught_up


def test_scores_stay_exact_as_rows_grow_and_the_read_map_drops_its_pages(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Vector rows are read through a map of the row file: rows added after it was made, and rows read again after
    its resident pages were dropped (a budget of 0 drops them after every read), still give each hit its cosine."""
    monkeypatch.setattr(memserver.local.vectors, "MAP_RSS_BUDGET", 0)
    store.add_many(FACTS[:3])
    checked = 0
    for round_ in range(3):
        if round_:
            store.add(f"{FACTS[2 + round_]} (round {round_})")
        for mode in MODES:
            for query in ("tea in the morning", "database password Monday", "birthday chocolate"):
                for h in store.search(query, limit=5, mode=mode):
                    assert h.score == pytest.approx(_cosine(store, h.memory.content, query), abs=1e-6)
                    checked += 1
    assert checked >= 3 * 3 * 2 * 3  # semantic and hybrid return every memory (3 or more) for each query
