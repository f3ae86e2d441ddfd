"""Recovery paths: unsynced vector rows lost to power loss, the metadata snapshot, compaction beside writers."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memserver.store
from memserver.store import Memory, MemoryStore, StoreHooks
from tests.fakes import FakeEmbedder, RecordingHooks
from tests.file_layers import RecordingFiles
from tests.readback import readback

ROW = 384 * 4


def _open(tmp_path: Path, embedder: FakeEmbedder | None = None, **kw: Any) -> MemoryStore:
    return MemoryStore(tmp_path, "test", embedder=embedder or FakeEmbedder(), **kw)


def _fill(tmp_path: Path, n: int = 300) -> list[Memory]:
    with _open(tmp_path) as s:  # >= CHECKPOINT_RECORDS uncovered: checkpoint (index + snapshot) on close
        ms = s.add_many([{"content": f"fact {i} about item{i}", "tags": [f"t{i % 3}"]} for i in range(n)])
        s.delete(ms[0].id)
    return ms


# --- vector rows are written unsynced: power loss may lose them; the journal's vcrc catches it -----------------


def test_rows_lost_to_power_loss_are_reembedded_once_and_rewritten(tmp_path: Path) -> None:
    """Rows past the last checkpoint that never reached the disk (absent, torn) are re-embedded from the journal's
    content on open, written back with a `vfix` line, and trusted (no re-embedding) on every later open."""
    _fill(tmp_path)
    with _open(tmp_path) as s:  # 5 adds after the checkpoint: below the threshold, so no checkpoint on close
        late = [s.add(f"late note {i} on zebras", tags=["late"]) for i in range(5)]
    folder = tmp_path / "test"
    vec = next(folder.glob("vectors-*.f32"))
    # Power loss: the journal lines were synced, the vector file only partly: rows 300-301 made it, row 302 is torn
    # (half its bytes), rows 303-304 are absent.
    with open(vec, "r+b") as f:
        f.truncate(302 * ROW + ROW // 2)
    counting = FakeEmbedder()
    with _open(tmp_path, counting) as s:
        assert counting.texts == 3  # rows 302, 303, 304 only
        for m in late:
            assert s.search(m.content, limit=1)[0].memory.id == m.id  # through the index
            hit = s.search(m.content, limit=1, tags=["late"])[0]  # exact ranking over the row file
            assert hit.memory.id == m.id and hit.score > 0.99
    assert b'"op":"vfix"' in (folder / "journal.jsonl").read_bytes()
    again = FakeEmbedder()
    with _open(tmp_path, again) as s:
        for m in late:
            hit = s.search(m.content, limit=1, tags=["late"])[0]
            assert hit.memory.id == m.id and hit.score > 0.99
        assert again.texts == len(late) * 1  # the queries only: nothing re-embedded on open
    for p in folder.glob("meta-*.snap"):  # and the same without the snapshot (full replay sees the vfix lines)
        p.unlink()
    for p in folder.glob("index*"):
        p.unlink()
    third = FakeEmbedder()
    with _open(tmp_path, third) as s:
        assert third.texts == 0 and s.stats()["count"] == 299 + 5


def test_checkpoint_syncs_the_vector_file(tmp_path: Path) -> None:
    """Rows a checkpoint covers are not re-checked on open, so the checkpoint syncs the row file before it saves
    the indexes."""
    files = RecordingFiles()
    with _open(tmp_path, files=files) as s:
        s.add_many([f"x {i} words" for i in range(10)])
        files.calls.clear()
        s.checkpoint()
    assert files.index("fsync", "vectors-*.f32") < files.index("replace", "index.json.tmp-* -> index.json")


# --- the metadata snapshot -----------------------------------------------------------------------------------------


def test_open_restores_the_snapshot_instead_of_replaying(tmp_path: Path) -> None:
    """With a checkpoint at the journal's end, open replays no journal line, and answers exactly as after a full
    replay."""
    _fill(tmp_path)
    hooks = RecordingHooks()
    with _open(tmp_path, hooks=hooks) as s:
        assert hooks.opens == [(0, True)]
        snapped = readback(s)
    for p in (tmp_path / "test").glob("meta-*.snap"):
        p.unlink()
    with _open(tmp_path, hooks=hooks) as s:
        assert hooks.opens[1] == (301, False)  # 300 adds and 1 delete
        assert readback(s) == snapped


def _snapshot(tmp_path: Path) -> Path:
    return next((tmp_path / "test").glob("meta-*.snap"))


def _edit_head(path: Path, **changes) -> None:
    data = path.read_bytes()
    magic_end = data.index(b"\n") + 1
    nl = data.index(b"\n", magic_end)
    head = json.loads(data[magic_end:nl])
    head.update(changes)
    path.write_bytes(data[:magic_end] + json.dumps(head).encode() + data[nl:])


@pytest.mark.parametrize("damage", ["corrupt", "truncated", "python", "line_crc", "older", "both_older", "newer"])
def test_damaged_or_stale_snapshot_falls_back_to_replay(tmp_path: Path, damage: str) -> None:
    """A snapshot that fails a check, or is newer than the index checkpoint, is ignored (the whole journal is
    replayed); an older one is used and the tail past it replayed. The state is exact either way, no re-embedding."""
    ms = _fill(tmp_path)
    snap = _snapshot(tmp_path)
    folder = tmp_path / "test"
    if damage == "corrupt":
        data = bytearray(snap.read_bytes())
        data[-10] ^= 0xFF
        snap.write_bytes(bytes(data))
    elif damage == "truncated":
        snap.write_bytes(snap.read_bytes()[:-100])
    elif damage == "python":
        _edit_head(snap, python=[2, 7])
    elif damage == "line_crc":  # the journal at that offset is not the one the snapshot was taken from
        _edit_head(snap, line_crc="00000000")
    else:
        old_snap = snap.read_bytes()
        old_index = {p.name: p.read_bytes() for p in folder.glob("index*")}
        with _open(tmp_path) as s:  # another checkpointed batch: newer index and snapshot
            s.add_many([f"more {i}" for i in range(250)])
            s.delete(ms[1].id)
        if damage in ("both_older", "newer"):
            for p in folder.glob("index*"):
                p.unlink()
            for name, data in old_index.items():
                (folder / name).write_bytes(data)
        if damage != "newer":
            snap.write_bytes(old_snap)
    hooks = RecordingHooks()
    counting = FakeEmbedder()
    with _open(tmp_path, counting, hooks=hooks) as s:
        if damage in ("older", "both_older"):
            assert hooks.opens == [(251, True)]  # the tail past the old snapshot only
        elif damage == "newer":
            assert hooks.opens == [(552, False)]  # everything: 550 adds, 2 deletes
        else:
            assert hooks.opens == [(301, False)]
        assert counting.texts == 0
        state = readback(s)
        assert s.search("fact 7 about item7", limit=1)[0].memory.id == ms[7].id
    for p in folder.glob("meta-*.snap"):
        p.unlink()
    with _open(tmp_path) as s:  # a full replay agrees
        assert readback(s) == state


# --- compaction does not hold the lock while it copies and rebuilds -------------------------------------------------


class _HeldAfterCopy(StoreHooks):
    """Holds a compaction between its unlocked copy and its switch until `proceed` is set."""

    def __init__(self) -> None:
        self.copied = threading.Event()
        self.proceed = threading.Event()

    def compaction_copied(self) -> None:
        self.copied.set()
        assert self.proceed.wait(30)


def test_compaction_lets_other_writers_proceed(tmp_path: Path) -> None:
    """While compact() has copied the live memories and not yet switched (held there), another store (its own
    lock file handle, so flock excludes it like another process) with a 1 s lock timeout adds and deletes:
    compaction holds no lock meanwhile (else those writes would time out), and keeps what they wrote."""
    ms = _fill(tmp_path)
    held = _HeldAfterCopy()
    a = _open(tmp_path, hooks=held)
    b = _open(tmp_path, lock_timeout=1.0)
    for m in ms[1:100]:
        a.delete(m.id)
    result: dict[str, Any] = {}
    t = threading.Thread(target=lambda: result.update(a.compact()))
    t.start()
    assert held.copied.wait(10)
    added = []
    try:
        for i in range(10):
            added.append(b.add(f"written during compaction {i}"))
            if i % 3 == 0:
                b.delete(ms[150 + i].id)
    finally:
        held.proceed.set()
    t.join(30)
    assert not t.is_alive()
    deleted_during = {ms[150 + i].id for i in range(0, 10, 3)}
    expected = {m.id for m in ms[100:]} - deleted_during | {m.id for m in added}
    assert result["count"] == len(expected)
    for s in (a, b):
        assert {m["id"] for m in s.export()} == expected
        assert s.search("written during compaction 4", limit=1)[0].memory.id == added[4].id
        assert not {h.memory.id for h in s.search("fact about item", limit=1000)} & deleted_during
    a.close()
    b.close()
    folder = tmp_path / "test"
    assert len(list(folder.glob("vectors-*.f32"))) == 1 and not list(folder.glob("compacting-*"))
    counting = FakeEmbedder()
    with _open(tmp_path, counting) as s:
        exported = list(s.export(include_vectors=True))
        assert {m["id"] for m in exported} == expected and counting.texts == 0
        stored = np.asarray([m["vector"] for m in exported], dtype=np.float32)
        own = FakeEmbedder().embed([m["content"] for m in exported])
        assert np.allclose(stored, own, atol=1e-6)  # the copied rows are the memories' own vectors


# --- bulk import ---------------------------------------------------------------------------------------------------


def test_import_spaces_checkpoints_geometrically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint rewrites whole indexes, so import_ does not take one every WRITE_CHECKPOINT_RECORDS (O(N^2)
    bytes at 1M) but when the uncovered records reach half the store; ordinary writes keep the fixed spacing."""
    monkeypatch.setattr(memserver.store, "IMPORT_BATCH", 100)
    monkeypatch.setattr(memserver.store, "WRITE_CHECKPOINT_RECORDS", 200)
    hooks = RecordingHooks()
    sizes = hooks.checkpoints
    emb = FakeEmbedder()
    vecs = emb.embed([f"imported {i}" for i in range(6400)])
    with _open(tmp_path, hooks=hooks) as s:
        assert s.import_({"content": f"imported {i}", "vector": vecs[i]} for i in range(6400)) == 6400
        assert sizes == [200, 400, 800, 1600, 3200, 6400]  # the last one: import_'s own, at its end
        sizes.clear()
        s.add_many([f"after {i}" for i in range(400)])
        for i in range(200):
            s.add(f"single {i}")
        assert sizes == [6800, 7000]  # every 200 records again
    with _open(tmp_path) as s:
        assert s.stats()["count"] == 6400 + 400 + 200
