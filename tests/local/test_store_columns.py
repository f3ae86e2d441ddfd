"""The store's metadata columns (ids, contents, created_at by row; hashed id and content keys; row sets per tag and
source): a snapshot restores exactly what a replay builds, keys that collide are told apart by their values, and
values that do not fit a fixed-width column still round-trip."""

from __future__ import annotations

from pathlib import Path

import pytest

import memserver.local.writes
from memserver.contract import inputs
from memserver.local import columns
from memserver.local.catalog import Catalog
from memserver.local.journal import Journal
from memserver.local.replay import AddRecord
from memserver.local.store import Memory, MemoryStore
from tests.support.fakes import FakeEmbedder, RecordingHooks
from tests.support.readback import readback


def _open(tmp_path: Path, hooks: RecordingHooks | None = None) -> MemoryStore:
    return MemoryStore(tmp_path, "test", embedder=FakeEmbedder(), hooks=hooks)


def _drop_snapshots(tmp_path: Path) -> None:
    for p in (tmp_path / "test").glob("meta-*.snap"):
        p.unlink()


def _fill(s: MemoryStore) -> list[str]:
    records = [
        {
            "content": f"fact {i} about item{i}" + (" café Zoë 日本語 😀" if i % 5 == 0 else ""),
            "tags": [f"t{i % 3}"] + (["extra"] if i % 4 == 0 else []),
            "source": "notes" if i % 2 else "",
            "created_at": f"2024-01-{1 + i % 9:02d}T{i % 24:02d}:00:00Z",
        }
        for i in range(260)
    ]
    assert s.import_(records) == 260
    ids = [m["id"] for m in s.export()]
    for mid in ids[::11]:
        assert s.delete(mid)
    s.add("a memory added after the import, tagged", tags=["t1", "fresh"], source="notes")
    return ids


def test_snapshot_reopens_with_the_same_results_as_a_replay(tmp_path: Path) -> None:
    with _open(tmp_path) as s:
        _fill(s)
        live = readback(s)
        s.checkpoint()
    hooks = RecordingHooks()
    with _open(tmp_path, hooks) as s:  # from the snapshot
        assert hooks.opens == [(0, True)] and readback(s) == live
    _drop_snapshots(tmp_path)
    with _open(tmp_path) as s:  # from a full replay
        assert readback(s) == live
        s.add("one more after the replay", tags=["t0"])
        s.checkpoint()
        after = readback(s)
    with _open(tmp_path) as s:
        assert readback(s) == after


def test_duplicates_are_found_after_reopen_and_not_after_delete(tmp_path: Path) -> None:
    with _open(tmp_path) as s:
        first = s.add("The staging DB password rotates every Monday", tags=["ops"])
        s.add_many([f"filler {i}" for i in range(250)])  # enough for a snapshot on close
    with _open(tmp_path) as s:
        again = s.add("  The staging DB   password rotates every Monday ")
        assert again.duplicate and again.id == first.id
        batch = s.add_many(["filler 7", "new one", "new one"])
        assert [m.duplicate for m in batch] == [True, False, True]
        assert batch[0].content == "filler 7" and batch[1].id == batch[2].id
        assert s.add("new one").id == batch[1].id
        assert s.delete(first.id)
        fresh = s.add("The staging DB password rotates every Monday")
        assert not fresh.duplicate and fresh.id != first.id
        s.checkpoint()
    with _open(tmp_path) as s:
        assert s.add("The staging DB password rotates every Monday").id == fresh.id
        assert s.import_([{"content": "The staging DB password rotates every Monday"}]) == 0


def test_colliding_content_keys_are_told_apart_by_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(inputs, "content_key", lambda content: 42)
    with _open(tmp_path) as s:
        a = s.add("alpha")
        b = s.add("beta")
        assert not b.duplicate and a.id != b.id
        assert s.add("alpha").id == a.id and s.add("beta").id == b.id
        s.add_many([f"filler {i}" for i in range(250)])
        batch = s.add_many(["gamma", "gamma", "alpha"])
        assert [m.duplicate for m in batch] == [False, True, True]
        assert batch[0].id == batch[1].id and batch[2].id == a.id
    with _open(tmp_path) as s:
        assert s.add("beta").id == b.id and not s.add("delta").duplicate


def test_colliding_id_keys_are_told_apart_by_id(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(columns, "id_key", lambda mid: 7)
    with _open(tmp_path) as s:
        made = s.add_many([f"memory number {i}" for i in range(300)])
        for m in made[:5]:
            assert s.get(m.id) == m
        assert s.delete(made[3].id) and not s.delete(made[3].id)
        assert s.get(made[3].id) is None and s.get(made[4].id) == made[4]
    with _open(tmp_path) as s:
        assert s.get(made[3].id) is None and s.get(made[299].id) == made[299]
        assert s.stats()["count"] == 299


def test_values_that_do_not_fit_the_fixed_columns_round_trip(tmp_path: Path) -> None:
    """created_at (and ids) are kept as 32-byte ASCII; a journal line with a longer or non-ASCII value (not written
    by this store, but possible in a journal) switches that column to objects, through snapshot and replay."""
    with _open(tmp_path) as s:
        s.add_many([f"plain memory {i}" for i in range(250)])
        stats = s.stats()
        row = stats["count"] + stats["deleted_pending_compaction"]  # the next row: one past every row handed out
    folder = tmp_path / "test"
    j = Journal(folder / "journal.jsonl")
    odd_id = "not-a-hex-id-and-longer-than-32-characters"
    odd_time = "2030-01-01T00:00:00.000000+00:00:00"  # valid ISO 8601, 35 characters
    j.append(
        [
            {
                "op": "add",
                "id": odd_id,
                "content": "odd line",
                "created_at": odd_time,
                "tags": ["odd"],
                "source": "",
                "row": row,
            }
        ]
    )
    j.close()
    # a snapshot of fixed columns + the odd line replayed; the snapshot of object columns; a full replay
    for attempt in range(3):
        if attempt == 2:
            _drop_snapshots(tmp_path)
        hooks = RecordingHooks()
        with _open(tmp_path, hooks) as s:
            assert hooks.opens[0][1] == (attempt < 2)  # from a snapshot, the first two times
            assert s.list_recent(limit=1)[0] == Memory(odd_id, "odd line", odd_time, ("odd",), "")
            assert [h.memory.id for h in s.search("odd line", limit=1, since="2029-12-31")] == [odd_id]
            assert s.search("plain memory", limit=300, until="2029-12-31")[0].memory.id != odd_id
            assert [h.memory.id for h in s.search("line", tags=["odd"], since="2029-12-31")] == [odd_id]
            assert s.search("line", tags=["odd"], until="2029-12-31") == []
            assert s.stats()["count"] == 251 + attempt
            assert not s.add(f"after the odd line, attempt {attempt}").duplicate
            s.checkpoint()


@pytest.mark.parametrize("deleted", [False, True], ids=["live row", "deleted row"])
@pytest.mark.parametrize("snapshot", [True, False], ids=["from snapshot", "full replay"])
def test_a_journal_line_reusing_a_row_is_ignored(tmp_path: Path, deleted: bool, snapshot: bool) -> None:
    """The write path hands out each row once; a journal line that reuses a row (live or deleted) is ignored, alike
    whether the metadata comes from a snapshot or from a replay (the row sets and key indexes rely on it)."""
    with _open(tmp_path) as s:
        first = s.add_many([{"content": f"plain memory {i}", "tags": ["old"], "source": "src-old"} for i in range(250)])
        if deleted:
            assert s.delete(first[3].id)
    if not snapshot:
        _drop_snapshots(tmp_path)
    j = Journal(tmp_path / "test" / "journal.jsonl")
    line = {"op": "add", "id": "f" * 32, "content": "intruder", "created_at": "2030-01-01T00:00:00.000000+00:00"}
    j.append([{**line, "tags": ["x"], "source": "src-new", "row": 3}])
    j.close()
    live = 249 if deleted else 250
    for _ in range(2):  # the second open reads the snapshot the first one wrote
        with _open(tmp_path) as s:
            assert s.get("f" * 32) is None
            assert (s.get(first[3].id) is None) == deleted
            assert s.stats()["count"] == live and s.list_recent(limit=1)[0].id == first[-1].id
            assert s.tag_counts() == {"old": live}
            assert s.search("intruder", limit=3, tags=["x"]) == []
            assert s.search("intruder", limit=3, source="src-new") == []
            assert all(h.memory.id != "f" * 32 for h in s.search("intruder", limit=300, tags=["old"]))
            s.checkpoint()


def test_export_is_a_snapshot_at_its_first_item(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Deletes, adds and a checkpoint (which compacts the text buffer) after the first item change nothing."""
    monkeypatch.setattr(memserver.local.writes, "IMPORT_BATCH", 7)
    with _open(tmp_path) as s:
        made = s.add_many([{"content": f"memory {i} ü", "tags": [f"t{i % 2}"]} for i in range(40)])
        expected = list(s.export())
        it = s.export()
        got = [next(it)]
        for m in made[5:30]:
            s.delete(m.id)
        s.add_many([f"later {i}" for i in range(10)])
        s.checkpoint()  # (it also compacts the text buffer the export is reading)
        got += list(it)
        assert got == expected


def test_a_checkpoint_after_every_memory_was_deleted(tmp_path: Path) -> None:
    """The snapshot of a store whose texts are all dead holds no text; the store then takes new memories."""
    with _open(tmp_path) as s:
        for m in s.add_many(["one fact", "another fact", "a third fact"]):
            assert s.delete(m.id)
        s.checkpoint()
    with _open(tmp_path) as s:
        assert s.stats()["count"] == 0 and s.list_recent() == []
        kept = s.add("a fact after the purge")
        s.checkpoint()
    with _open(tmp_path) as s:
        assert [m.id for m in s.list_recent()] == [kept.id] and s.get(kept.id).content == "a fact after the purge"  # type: ignore[union-attr]


def test_created_at_of_a_row_the_catalog_does_not_hold_is_empty() -> None:
    """The hybrid ranking asks created_at of every row a ranking returns; a row past the catalog's columns is
    "" (like id_at's None), not an IndexError."""
    catalog = Catalog()
    assert catalog.created_at(0) == "" and catalog.created_at(-1) == ""
    catalog.add(AddRecord("a" * 32, "one fact", "2024-01-01T00:00:00.000000+00:00", (), "", 0))
    assert catalog.created_at(0) == "2024-01-01T00:00:00.000000+00:00"
    assert catalog.created_at(1 << 20) == ""
