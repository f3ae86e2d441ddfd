"""Recovery paths: unsynced vector rows lost to power loss, the metadata snapshot, compaction beside writers."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from memserver.store import MemoryStore
from tests.fakes import FakeEmbedder

ROW = 384 * 4


def _state(s: MemoryStore) -> dict[str, object]:
    """The store's metadata as plain values, to compare a snapshot's restore with a full replay."""
    n = s._next_row
    alive = s._alive[:n]
    live = np.flatnonzero(alive).tolist()
    s._keys.merge(alive)
    s._rows.index.merge(alive)
    return {
        "next_row": n,
        "count": len(s._rows),
        "records": [s._record(row) for row in live],
        "ids": s._rows.ids.a[:n].tolist(),
        "id_keys": (s._rows.index._h.tolist(), s._rows.index._r.tolist()),
        "created": s._created.a[:n].tolist(),
        "columns": (s._tags[:n], s._sources[:n]),
        "alive": alive.tolist(),
        "times": list(s._times),
        "vcrc": s._vcrc[:n].tolist(),
        "keys": (s._keys._h.tolist(), s._keys._r.tolist()),
        "tags": {t: rows for t in s._tag_rows.names() if (rows := s._tag_rows.rows(t, alive).tolist())},
        "sources": {t: rows for t in s._source_rows.names() if (rows := s._source_rows.rows(t, alive).tolist())},
    }


def _open(tmp_path: Path, embedder: FakeEmbedder | None = None, **kw) -> MemoryStore:
    return MemoryStore(tmp_path, "test", embedder=embedder or FakeEmbedder(), **kw)


def _fill(tmp_path: Path, n: int = 300) -> list:
    with _open(tmp_path) as s:  # >= CHECKPOINT_RECORDS uncovered: checkpoint (index + snapshot) on close
        ms = s.add_many([{"content": f"fact {i} about item{i}", "tags": [f"t{i % 3}"]} for i in range(n)])
        s.delete(ms[0].id)
    return ms


def _count_replayed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    replayed = [0]
    original = MemoryStore._apply

    def counting(self, entries):
        replayed[0] += len(entries)
        return original(self, entries)

    monkeypatch.setattr(MemoryStore, "_apply", counting)
    return replayed


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


def test_checkpoint_syncs_the_vector_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows a checkpoint covers are not re-checked on open, so the checkpoint must sync the row file first."""
    import memserver.store as ms

    synced: list[int] = []
    original = ms.fsync_fd
    monkeypatch.setattr(ms, "fsync_fd", lambda fd: (synced.append(fd), original(fd)))
    with _open(tmp_path) as s:
        s.add_many([f"x {i}" for i in range(10)])
        synced.clear()
        s._checkpoint()
        assert s._vfd in synced


# --- the metadata snapshot -----------------------------------------------------------------------------------------


def test_open_restores_the_snapshot_instead_of_replaying(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a checkpoint at the journal's end, open replays no journal line, and ends in the very state a full
    replay builds."""
    _fill(tmp_path)
    replayed = _count_replayed(monkeypatch)
    with _open(tmp_path) as s:
        assert replayed[0] == 0
        snapped = _state(s)
    for p in (tmp_path / "test").glob("meta-*.snap"):
        p.unlink()
    with _open(tmp_path) as s:
        assert replayed[0] == 301  # 300 adds and 1 delete
        assert _state(s) == snapped


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
def test_damaged_or_stale_snapshot_falls_back_to_replay(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
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
    replayed = _count_replayed(monkeypatch)
    counting = FakeEmbedder()
    with _open(tmp_path, counting) as s:
        if damage in ("older", "both_older"):
            assert replayed[0] == 251  # the tail past the old snapshot only
        elif damage == "newer":
            assert replayed[0] == 552  # everything: 550 adds, 2 deletes
        else:
            assert replayed[0] == 301
        assert counting.texts == 0
        state = _state(s)
        assert s.search("fact 7 about item7", limit=1)[0].memory.id == ms[7].id
    for p in folder.glob("meta-*.snap"):
        p.unlink()
    with _open(tmp_path) as s:  # a full replay agrees
        assert _state(s) == state


# --- compaction does not hold the lock while it copies and rebuilds -------------------------------------------------


def test_compaction_lets_other_writers_proceed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """While compact() copies and builds the new index (made slow here), another store (own lock file handle, so
    flock excludes it like another process) with a 1 s lock timeout adds and deletes; compaction keeps those."""
    ms = _fill(tmp_path)
    original = MemoryStore._compact_copy
    copying = threading.Event()

    def slow_copy(self, *args, **kwargs):
        copying.set()
        out = original(self, *args, **kwargs)
        time.sleep(2.0)
        return out

    monkeypatch.setattr(MemoryStore, "_compact_copy", slow_copy)
    a = _open(tmp_path)
    b = _open(tmp_path, lock_timeout=1.0)
    for m in ms[1:100]:
        a.delete(m.id)
    result: dict = {}
    t = threading.Thread(target=lambda: result.update(a.compact()))
    t.start()
    assert copying.wait(10)
    slowest, added = 0.0, []
    for i in range(10):
        t0 = time.perf_counter()
        added.append(b.add(f"written during compaction {i}"))
        if i % 3 == 0:
            b.delete(ms[150 + i].id)
        slowest = max(slowest, time.perf_counter() - t0)
    t.join(30)
    assert not t.is_alive() and slowest < 1.0
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
        assert {m["id"] for m in s.export()} == expected and counting.texts == 0
        vecs = np.stack([s._vindex.get_vectors([row])[0] for row in np.flatnonzero(s._alive)[:5].tolist()])
        assert np.allclose(np.linalg.norm(vecs, axis=1), 1, atol=1e-3)


# --- bulk import ---------------------------------------------------------------------------------------------------


def test_import_spaces_checkpoints_geometrically(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint rewrites whole indexes, so import_ does not take one every WRITE_CHECKPOINT_RECORDS (O(N^2)
    bytes at 1M) but when the uncovered records reach half the store; ordinary writes keep the fixed spacing."""
    import memserver.store as ms

    monkeypatch.setattr(ms, "IMPORT_BATCH", 100)
    monkeypatch.setattr(ms, "WRITE_CHECKPOINT_RECORDS", 200)
    sizes: list[int] = []
    original = MemoryStore._checkpoint_locked

    def counting(self):
        sizes.append(len(self._rows))
        return original(self)

    monkeypatch.setattr(MemoryStore, "_checkpoint_locked", counting)
    emb = FakeEmbedder()
    vecs = emb.embed([f"imported {i}" for i in range(6400)])
    with _open(tmp_path) as s:
        assert s.import_({"content": f"imported {i}", "vector": vecs[i]} for i in range(6400)) == 6400
        assert sizes == [200, 400, 800, 1600, 3200, 6400]  # the last one: import_'s own, at its end
        sizes.clear()
        s.add_many([f"after {i}" for i in range(400)])
        for i in range(200):
            s.add(f"single {i}")
        assert sizes == [6800, 7000]  # every 200 records again
    with _open(tmp_path) as s:
        assert s.stats()["count"] == 6400 + 400 + 200
