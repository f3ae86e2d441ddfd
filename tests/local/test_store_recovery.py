"""Recovery paths: unsynced vector rows lost to power loss, the metadata snapshot, compaction beside writers."""

from __future__ import annotations

import errno
import json
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memserver.local.compaction
import memserver.local.store
import memserver.local.writes
from memserver.local.store import Memory, MemoryStore, StoreHooks
from tests.support.fakes import FakeEmbedder, RecordingHooks
from tests.support.file_layers import FailingFiles, RecordingFiles, ShortWrites, SimulatedCrash
from tests.support.readback import readback

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


def test_a_checkpoint_whose_snapshot_failed_is_taken_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A write-path checkpoint whose metadata snapshot cannot be written (disk full) is not counted as done: the
    store checkpoints again on close, and the next open restores that snapshot instead of replaying. (The
    snapshot file: meta-*.snap, or checkpoint-*.snap while a write-path checkpoint writes it.)"""
    monkeypatch.setenv("MEMSERVER_CHECKPOINT_EVERY", "200")
    files = FailingFiles(lambda op, name: op == "create" and ".snap" in name, errno.ENOSPC)
    hooks = RecordingHooks()
    s = _open(tmp_path, files=files, hooks=hooks)
    s.add_many([f"fact {i} about item{i}" for i in range(250)])  # the write path checkpoints: its snapshot fails
    assert files.failures == 1 and hooks.checkpoints == []
    files.armed = False
    s.close()
    assert hooks.checkpoints == [250]
    reopened = RecordingHooks()
    with _open(tmp_path, hooks=reopened):
        assert reopened.opens == [(0, True)]


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


def test_a_compaction_running_for_hours_keeps_its_files(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Another store's open removes the files of dead compactions; those of one still running (held after its
    copy, as if it had run for longer than COMPACTING_STALE_S) stay, and it switches in."""
    monkeypatch.setattr(memserver.local.compaction, "COMPACTING_STALE_S", 0)
    ms = _fill(tmp_path)
    held = _HeldAfterCopy()
    a = _open(tmp_path, hooks=held)
    result: dict[str, Any] = {}
    t = threading.Thread(target=lambda: result.update(a.compact()))
    t.start()
    try:
        assert held.copied.wait(10)
        with _open(tmp_path) as b:  # its open removes what other generations and dead compactions left
            b.delete(ms[5].id)
    finally:
        held.proceed.set()
    t.join(30)
    assert result["count"] == 298
    a.close()
    folder = tmp_path / "test"
    assert len(list(folder.glob("vectors-*.f32"))) == 1 and not list(folder.glob("compacting-*"))


def test_files_of_a_compaction_that_died_after_its_switch_go_at_the_next_open(tmp_path: Path) -> None:
    """A crash after the journals were switched but before the new index was named leaves a compacting-* graph
    file; it belongs to the generation in force, so the next open removes it (not hours later)."""
    _fill(tmp_path)
    crashed: list[str] = []

    def crash(op: str, name: str) -> bool:
        if op == "replace" and name == "compacting-*.hnsw -> index-*.hnsw":
            crashed.append(name)
        return bool(crashed)  # the process is dead from then on: nothing it would do next happens

    files = FailingFiles(crash, error=None)
    a = _open(tmp_path, files=files)
    with pytest.raises(SimulatedCrash):
        a.compact()
    folder = tmp_path / "test"
    assert crashed and list(folder.glob("compacting-*.hnsw"))
    with _open(tmp_path) as s:
        assert s.stats()["count"] == 299
    assert not list(folder.glob("compacting-*"))
    files.armed = False
    a.close()


# --- bulk import ---------------------------------------------------------------------------------------------------


def test_import_spaces_checkpoints_geometrically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint rewrites whole indexes, so import_ does not take one every MEMSERVER_CHECKPOINT_EVERY records
    (O(N^2) bytes at 1M) but when the uncovered records reach half the store; ordinary writes keep the fixed
    spacing."""
    monkeypatch.setattr(memserver.local.writes, "IMPORT_BATCH", 100)
    monkeypatch.setenv("MEMSERVER_CHECKPOINT_EVERY", "200")
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


# --- vector rows are written through the file layer, every byte of them ------------------------------------------


def test_vector_rows_are_written_with_pwrite_through_the_file_layer(tmp_path: Path) -> None:
    """The file layer sees where each vector write lands (pwrite at its offset), as a power-loss recorder must."""
    files = RecordingFiles()
    with _open(tmp_path, files=files) as s:
        files.calls.clear()
        s.add_many([f"x {i} words" for i in range(3)])
        assert ("pwrite", "vectors-*.f32") in files.calls
        assert ("write", "vectors-*.f32") not in files.calls


def _rows_are_whole(tmp_path: Path, count: int) -> None:
    """A fresh open re-embeds nothing (every row's CRC good), and the stored vectors are the memories' own."""
    counting = FakeEmbedder()
    with _open(tmp_path, counting) as s:
        exported = list(s.export(include_vectors=True))
        assert counting.texts == 0 and len(exported) == count
        stored = np.asarray([m["vector"] for m in exported], dtype=np.float32)
        assert np.allclose(stored, FakeEmbedder().embed([m["content"] for m in exported]), atol=1e-6)


def test_short_writes_of_vector_rows_are_completed(tmp_path: Path) -> None:
    """With every write and pwrite cut short, each vector row still reaches the file whole: rows re-embedded
    after power loss and written back by a checkpoint, and rows added while a compaction copies."""
    _fill(tmp_path)
    with _open(tmp_path) as s:  # 5 rows past the checkpoint, then lost to power loss (the file cut short)
        for i in range(5):
            s.add(f"late note {i} on zebras")
    vec = next((tmp_path / "test").glob("vectors-*.f32"))
    with open(vec, "r+b") as f:
        f.truncate(302 * ROW)
    with _open(tmp_path, files=ShortWrites()):  # re-embeds rows 302-304 and writes them back (vfix)
        pass
    _rows_are_whole(tmp_path, 299 + 5)
    hooks = _HeldAfterCopy()
    compacting = FakeEmbedder()
    with _open(tmp_path, compacting, files=ShortWrites(), hooks=hooks) as s:
        other = _open(tmp_path)
        t = threading.Thread(target=s.compact)
        t.start()
        assert hooks.copied.wait(10)
        try:  # rows the compaction's switch writes into the new generation
            other.add_many([f"written during compaction {i}" for i in range(4)])
        finally:
            hooks.proceed.set()
        t.join(30)
        assert not t.is_alive()
        other.close()
        assert compacting.texts == 0  # (a row found short after the switch would be re-embedded on reload)
    _rows_are_whole(tmp_path, 299 + 5 + 4)
