"""MemoryStore: the API, validation, filters before ranking, rebuilds without re-embedding, threads."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np
import pytest

import memserver.local.search
from memserver.errors import InvalidInputError, ModelMismatchError
from memserver.local.store import Hit, Memory, MemoryStore, StoreHooks
from tests.support.fakes import FakeEmbedder


@pytest.fixture
def embedder() -> FakeEmbedder:
    return FakeEmbedder()


@pytest.fixture
def store(tmp_path: Path, embedder: FakeEmbedder):
    with MemoryStore(tmp_path, "test", embedder=embedder) as s:
        yield s


def _reopen(tmp_path: Path, embedder: FakeEmbedder | None = None) -> MemoryStore:
    return MemoryStore(tmp_path, "test", embedder=embedder or FakeEmbedder())


# --- the basics ---------------------------------------------------------------------------------------------------


def test_add_get_search_list_delete(store: MemoryStore) -> None:
    """The round trip: add, find by meaning, list newest first, delete."""
    a = store.add("  The staging database password rotates every Monday ", tags=["ops", "db", "ops"], source="chat")
    b = store.add("Alice prefers tea over coffee", tags=["people"])
    assert isinstance(a, Memory) and len(a.id) == 32 and not a.duplicate
    assert a.content == "The staging database password rotates every Monday"
    assert a.tags == ("ops", "db") and a.source == "chat" and a.created_at.endswith("+00:00")
    assert store.get(a.id) == a
    hits = store.search("when does the database password rotate", limit=2)
    assert isinstance(hits[0], Hit) and hits[0].memory.id == a.id and hits[0].score > hits[1].score
    assert hits[0].to_dict()["score"] == hits[0].score and hits[0].to_dict()["tags"] == ["ops", "db"]
    assert [m.id for m in store.list_recent()] == [b.id, a.id]
    assert store.delete(a.id) is True and store.delete(a.id) is False
    assert store.get(a.id) is None
    assert [h.memory.id for h in store.search("database password", limit=5)] == [b.id]


def test_exact_duplicate_returns_the_existing_memory(store: MemoryStore, embedder: FakeEmbedder) -> None:
    """Same content after trimming and collapsing whitespace is not stored twice (and not embedded again)."""
    a = store.add("Buy milk and eggs")
    calls = embedder.texts
    d = store.add("  Buy   milk\nand eggs ")
    assert d.duplicate and d.id == a.id and embedder.texts == calls
    many = store.add_many(["new one", "new  one", {"content": "Buy milk and eggs"}])
    assert [m.duplicate for m in many] == [False, True, True] and many[1].id == many[0].id
    assert store.stats()["count"] == 2


def test_k_is_clamped_to_the_live_count(store: MemoryStore) -> None:
    """Asking for more than exists returns what exists, without error."""
    store.add_many(["one apple", "two pears", "three plums"])
    assert len(store.search("fruit", limit=1000)) == 3
    assert len(store.list_recent(limit=1000)) == 3


def test_empty_store(store: MemoryStore) -> None:
    """An empty store answers every read with nothing."""
    assert store.search("anything") == [] and store.list_recent() == [] and store.tag_counts() == {}
    assert store.stats()["count"] == 0 and list(store.export()) == []


def test_stats_and_tag_counts(store: MemoryStore) -> None:
    """stats() reports count, collection, path, model, dim, index parameters and bytes on disk."""
    store.add("x one", tags=["a", "b"])
    store.add("x two", tags=["a"])
    st = store.stats()
    assert st["count"] == 2 and st["collection"] == "test" and st["model"] == FakeEmbedder.model_name
    assert st["dim"] == 384 and st["bytes_on_disk"] > 0 and Path(st["path"]).is_absolute()
    assert set(st["index"]) == {"M", "ef_construction", "ef", "max_elements"}
    assert store.tag_counts() == {"a": 2, "b": 1}


# --- validation -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.add(""), "content must not be empty"),
        (lambda s: s.add("   \n"), "content must not be empty"),
        (lambda s: s.add(42), "content must be a string"),
        (lambda s: s.add("x" * 20_001), "limit is 20000"),
        (lambda s: s.add("x", tags="ops"), "tags must be a list"),
        (lambda s: s.add("x", tags=[""]), "empty"),
        (lambda s: s.add("x", tags=["t" * 65]), "limit is 64"),
        (lambda s: s.add("x", tags=[f"t{i}" for i in range(21)]), "limit is 20"),
        (lambda s: s.add("x", tags=[1]), "list of strings"),
        (lambda s: s.add("x", source=3), "source must be a string"),
        (lambda s: s.add("x", source="a\nb"), "control"),
        (lambda s: s.add("bad \ud800 surrogate"), "Unicode"),
        (lambda s: s.add_many(["ok", ""]), r"items\[1\]\.content"),
        (lambda s: s.get("nope"), "memory_id must be 32 hexadecimal"),
        (lambda s: s.delete(None), "memory_id"),
        (lambda s: s.search("q", limit=0), "limit must be between 1 and 1000"),
        (lambda s: s.search("q", limit=1001), "limit must be between"),
        (lambda s: s.search("q", limit=True), "limit must be an integer"),
        (lambda s: s.search("q", min_score=2), "min_score"),
        (lambda s: s.search("q", since="last week"), "since must be an ISO 8601"),
        (lambda s: s.search("q", since="2026-02-01", until="2026-01-01"), "must not be later"),
        (lambda s: s.search("q", mode="fuzzy"), "mode must be one of"),
        (lambda s: s.search(""), "query must not be empty"),
        (lambda s: s.list_recent(limit=-1), "limit"),
    ],
)
def test_bad_input_names_the_argument_and_rule(store: MemoryStore, call, message: str) -> None:
    """Each bad argument raises InvalidInputError saying which argument and which rule."""
    with pytest.raises(InvalidInputError, match=message):
        call(store)


def test_invalid_batch_writes_nothing(store: MemoryStore, embedder: FakeEmbedder) -> None:
    """add_many validates every item before embedding or writing any of them."""
    with pytest.raises(InvalidInputError):
        store.add_many(["fine", "also fine", {"content": "x", "tags": "notalist"}])
    assert store.stats()["count"] == 0 and embedder.calls == 0


def test_model_mismatch_is_refused(tmp_path: Path) -> None:
    """Opening a collection with another model raises instead of mixing vector spaces."""
    with _reopen(tmp_path) as s:
        s.add("hello")
    other = FakeEmbedder()
    other.model_name = "another/model"
    with pytest.raises(ModelMismatchError, match="fake/hashed-bag-of-words"):
        _reopen(tmp_path, other)


# --- filters restrict before ranking ------------------------------------------------------------------------------


def test_one_matching_tag_among_thousands_is_found(store: MemoryStore) -> None:
    """A rare tag's only memory is returned even when thousands of closer memories lack the tag."""
    store.add_many([{"content": f"project alpha status report {i}", "tags": ["work"]} for i in range(3000)])
    rare = store.add("a recipe for lemon cake", tags=["cooking"])
    hits = store.search("project alpha status report", tags=["cooking", "nonexistent"], limit=5)
    assert [h.memory.id for h in hits] == [rare.id]


def test_filtered_search_returns_limit_when_enough_match(store: MemoryStore, monkeypatch) -> None:
    """Through HNSW with a filter (threshold lowered), a sparse filter still yields `limit` results."""
    monkeypatch.setattr(memserver.local.search, "BRUTE_FORCE_MAX", 10)
    items = [
        {"content": f"note number {i} about topic {i % 7}", "tags": ["even" if i % 50 == 0 else "x"]}
        for i in range(2000)
    ]
    store.add_many(items)
    hits = store.search("note about topic 3", tags=["even"], limit=20, mode="semantic")
    assert len(hits) == 20 and all("even" in h.memory.tags for h in hits)
    exact = sorted(
        (
            float(np.dot(store.embedder.embed([i["content"]])[0], store.embedder.embed_query("note about topic 3"))),
            i["content"],
        )
        for i in items
        if i["tags"] == ["even"]
    )[::-1][:20]
    assert abs(hits[-1].score - exact[-1][0]) < 1e-4


def test_source_and_time_filters(store: MemoryStore) -> None:
    """source and since/until restrict candidates; a date-only until includes that whole day."""
    store.import_(
        [
            {"content": "old meeting notes", "created_at": "2026-01-05T10:00:00Z", "source": "slack"},
            {"content": "new meeting notes", "created_at": "2026-03-05T10:00:00+00:00", "source": "email"},
            {"content": "meeting on the last day", "created_at": "2026-03-31T23:59:00Z", "source": "email"},
        ]
    )
    contents = lambda hits: sorted(h.memory.content for h in hits)  # noqa: E731
    assert contents(store.search("meeting notes", source="slack")) == ["old meeting notes"]
    assert contents(store.search("meeting", since="2026-03-01")) == ["meeting on the last day", "new meeting notes"]
    assert contents(store.search("meeting", until="2026-03-31", since="2026-03-06")) == ["meeting on the last day"]
    assert contents(store.search("meeting", until="2026-03-05T10:00:00Z")) == ["new meeting notes", "old meeting notes"]
    assert store.search("meeting", since="2027-01-01") == []


def test_min_score_drops_weak_hits(store: MemoryStore) -> None:
    """Hits scoring below min_score are dropped; an unrelated query returns nothing."""
    store.add_many(["red apples are sweet", "quantum chromodynamics lecture"])
    hits = store.search("red apples", min_score=0.5)
    assert [h.memory.content for h in hits] == ["red apples are sweet"]
    assert store.search("zebra xylophone", min_score=0.5) == []


def test_list_recent_with_tags(store: MemoryStore) -> None:
    """list_recent with tags returns the newest memories sharing any tag."""
    ms = store.add_many([{"content": f"m{i}", "tags": ["a" if i % 2 else "b"]} for i in range(10)])
    assert [m.id for m in store.list_recent(limit=3, tags=["a"])] == [ms[9].id, ms[7].id, ms[5].id]


# --- persistence and rebuilds -------------------------------------------------------------------------------------


def _fill(tmp_path: Path, n: int = 300) -> list[Memory]:
    with _reopen(tmp_path) as s:
        ms = s.add_many([f"fact {i} about item{i}" for i in range(n)])
        s.delete(ms[0].id)
    return ms


def _assert_intact(s: MemoryStore, ms: list[Memory]) -> None:
    assert s.stats()["count"] == len(ms) - 1
    assert s.search("fact 7 about item7", limit=1)[0].memory.id == ms[7].id
    assert ms[0].id not in {h.memory.id for h in s.search("fact 0 about item0", limit=50)}


@pytest.mark.parametrize("damage", ["none", "missing", "stale", "corrupt", "meta"])
def test_index_rebuilt_without_reembedding(tmp_path: Path, damage: str) -> None:
    """A missing, stale or corrupt checkpoint is rebuilt from journal + stored vectors: zero embed calls."""
    ms = _fill(tmp_path)
    folder = tmp_path / "test"
    graph = next(folder.glob("index-*.hnsw"))
    if damage == "missing":
        graph.unlink()
    elif damage == "stale":  # a checkpoint that covers less than the journal holds: the tail is replayed
        (folder / "index.json").write_text((folder / "index.json").read_text().replace('"offset": ', '"offset": 1'))
    elif damage == "corrupt":
        graph.write_bytes(b"\x00" * graph.stat().st_size)
    elif damage == "meta":
        (folder / "index.json").write_text("garbage")
    counting = FakeEmbedder()
    with _reopen(tmp_path, counting) as s:
        calls_after_open = counting.texts
        _assert_intact(s, ms)
    assert calls_after_open == 0


def test_checkpoint_plus_tail_replay(tmp_path: Path) -> None:
    """Writes after the last checkpoint are replayed from the journal tail on open."""
    ms = _fill(tmp_path)
    with _reopen(tmp_path) as s:  # a few writes: below the checkpoint threshold, so only in the journal
        extra = s.add("late addition about zebras")
        s.delete(ms[1].id)
    with _reopen(tmp_path) as s:
        assert s.search("late addition about zebras", limit=1)[0].memory.id == extra.id
        assert s.get(ms[1].id) is None
        assert ms[1].id not in {h.memory.id for h in s.search("fact 1 about item1", limit=100)}


def test_torn_tail_is_set_aside_on_open(tmp_path: Path, caplog) -> None:
    """A half-written last line is moved to a .torn file with a warning; everything before it is kept."""
    ms = _fill(tmp_path, 20)
    journal = tmp_path / "test" / "journal.jsonl"
    with open(journal, "ab") as f:
        f.write(b'{"op":"add","id":"abc","content":"half writ')
    with _reopen(tmp_path) as s:
        assert s.stats()["count"] == 19 and s.get(ms[5].id) is not None
        s.add("after the repair")
    torn = list((tmp_path / "test").glob("journal.jsonl.torn-*"))
    assert len(torn) == 1 and torn[0].read_bytes().endswith(b"half writ")
    assert "torn" in caplog.text
    with _reopen(tmp_path) as s:
        assert s.stats()["count"] == 20


def test_damaged_vector_row_is_reembedded_not_trusted(tmp_path: Path) -> None:
    """A vector row that fails its CRC is re-embedded from its content when the index is rebuilt."""
    ms = _fill(tmp_path, 20)
    folder = tmp_path / "test"
    for p in folder.glob("index*"):
        p.unlink()
    vec = next(folder.glob("vectors-*.f32"))
    data = bytearray(vec.read_bytes())
    data[5 * 1536 : 6 * 1536] = b"\x00" * 1536  # row 5
    vec.write_bytes(bytes(data))
    counting = FakeEmbedder()
    with _reopen(tmp_path, counting) as s:
        assert counting.texts == 1
        assert s.search(ms[5].content, limit=1)[0].memory.id == ms[5].id


def test_export_import_round_trip(tmp_path: Path) -> None:
    """export -> import_ keeps ids and created_at; with vectors nothing is embedded; re-import adds nothing."""
    ms = _fill(tmp_path, 50)
    with _reopen(tmp_path) as s:
        plain = list(s.export())
        with_vectors = list(s.export(include_vectors=True))
    assert len(plain) == 49 and set(plain[0]) == {"id", "content", "created_at", "occurred_at", "tags", "source"}
    assert len(with_vectors[0]["vector"]) == 384
    target = tmp_path / "other"
    counting = FakeEmbedder()
    with MemoryStore(target, "test", embedder=counting) as t:
        assert t.import_(with_vectors) == 49 and counting.texts == 0
        assert t.import_(with_vectors) == 0
        assert t.get(ms[3].id).created_at == ms[3].created_at
    with MemoryStore(tmp_path / "third", "test", embedder=counting) as t:
        assert t.import_(plain) == 49 and counting.texts == 49 and counting.calls == 1


def test_compact_drops_deleted_and_other_processes_follow(tmp_path: Path) -> None:
    """compact() removes deleted records; another open store notices the new generation and reloads."""
    ms = _fill(tmp_path, 100)
    with _reopen(tmp_path) as a, _reopen(tmp_path) as b:
        for m in ms[1:50]:
            a.delete(m.id)
        result = a.compact()
        assert result["count"] == 50 and result["removed"] == 50
        assert b.stats()["count"] == 50 and b.get(ms[10].id) is None
        assert b.search("fact 70 about item70", limit=1)[0].memory.id == ms[70].id
        new = b.add("written after compaction")
        assert a.get(new.id) is not None
    assert len(list((tmp_path / "test").glob("vectors-*.f32"))) == 1


# --- threads ------------------------------------------------------------------------------------------------------


def test_threads_search_and_add_concurrently(store: MemoryStore) -> None:
    """Searches and adds from several threads at once: no errors, every add present and findable."""
    store.add_many([f"seed memory {i}" for i in range(200)])
    added: list[str] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def writer(w: int) -> None:
        try:
            for i in range(150):
                added.append(store.add(f"thread {w} wrote item {i}", tags=[f"w{w}"]).id)
        except BaseException as exc:
            errors.append(exc)

    def reader() -> None:
        try:
            while not stop.is_set():
                for h in store.search("thread wrote item", limit=10):
                    assert h.memory.id
                store.list_recent(5)
        except BaseException as exc:
            errors.append(exc)

    writers = [threading.Thread(target=writer, args=(w,)) for w in range(3)]
    readers = [threading.Thread(target=reader) for _ in range(3)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    stop.set()
    for t in readers:
        t.join()
    assert not errors
    assert len(set(added)) == 450 and store.stats()["count"] == 650
    assert all(store.get(i) for i in added)
    assert len(store.search("thread 2 wrote item", tags=["w2"], limit=1000)) == 150


def test_store_imports_neither_mcp_nor_onnxruntime() -> None:
    """Importing the store (and opening one with a given embedder) loads no mcp and no onnxruntime."""
    import subprocess
    import sys

    code = (
        "import sys, tempfile; from memserver import MemoryStore; from tests.support.fakes import FakeEmbedder;"
        "MemoryStore(tempfile.mkdtemp(), 'c', embedder=FakeEmbedder()).add('x');"
        "bad = [m for m in ('mcp', 'onnxruntime') if m in sys.modules]; sys.exit(1 if bad else 0)"
    )
    assert subprocess.run([sys.executable, "-c", code], cwd=Path(__file__).resolve().parents[2]).returncode == 0


def test_exact_ranking_threshold_grows_as_the_square_root_of_the_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """The candidate-set size ranked exactly is sqrt(ratio * ef * N), clamped: a shrinking fraction of a growing
    store, where exact ranking and HNSW with a filter cost the same."""
    monkeypatch.setattr(memserver.local.search, "BRUTE_FORCE_MIN", 1)
    small = memserver.local.search.exact_limit(400, 256)
    assert memserver.local.search.exact_limit(1600, 256) == pytest.approx(2 * small, rel=0.01)  # 4x the store, 2x
    assert memserver.local.search.exact_limit(400, 1024) == pytest.approx(2 * small, rel=0.01)  # 4x the ef, 2x
    monkeypatch.setattr(memserver.local.search, "BRUTE_FORCE_MAX", 50)
    assert memserver.local.search.exact_limit(10**6, 256) == 50


class _Plans(StoreHooks):
    def __init__(self) -> None:
        self.plans: list[tuple[str, int | None]] = []

    def planned(self, plan: str, candidates: int | None) -> None:
        self.plans.append((plan, candidates))


def test_an_unfiltered_search_of_a_small_store_is_ranked_exactly(tmp_path: Path) -> None:
    """Up to search.UNFILTERED_EXACT memories an unfiltered search is exact (no HNSW miss); one more, HNSW."""
    hooks = _Plans()
    with MemoryStore(tmp_path, "test", embedder=FakeEmbedder(), hooks=hooks) as store:
        store.add_many([f"note {i}" for i in range(memserver.local.search.UNFILTERED_EXACT)])
        assert store.search("note 7", limit=1, mode="semantic")[0].score == pytest.approx(1.0)  # its own vector
        assert hooks.plans == [("exact", None)]
        store.add("one more note")
        hooks.plans.clear()  # (the add's near-duplicate check ranks too)
        store.search("note 7", limit=1, mode="semantic")
        assert hooks.plans == [("hnsw", None)]


def test_a_filtered_search_below_the_threshold_is_ranked_exactly(tmp_path: Path) -> None:
    """100 of 1,600 memories pass the filter, below the threshold: ranked exactly, not through HNSW; without a
    filter, through HNSW."""
    hooks = _Plans()
    with MemoryStore(tmp_path, "test", embedder=FakeEmbedder(), hooks=hooks) as store:
        store.add_many([{"content": f"note {i}", "tags": ["a" if i % 16 else "b"]} for i in range(1600)])
        hits = store.search("note 16", tags=["b"], limit=5, mode="semantic")
        assert hits[0].memory.content == "note 16" and hooks.plans == [("exact", 100)]
        store.search("note 16", limit=5, mode="semantic")
        assert hooks.plans[1:] == [("hnsw", None)]
