"""Write-path checkpoints written outside the exclusive lock (checkpoint_job.py): other stores and this store's
other threads read and write while one is written; one that another store's checkpoint or compaction overtakes
is dropped; a crash while one is written leaves only temp files, removed by the next open."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from memserver.local import checkpoint_job
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder, RecordingHooks
from tests.support.readback import readback

ROOT = Path(__file__).resolve().parents[2]


class HeldWhileWriting(RecordingHooks):
    """Holds a write-path checkpoint after it copied its state out and before it writes its files."""

    def __init__(self) -> None:
        super().__init__()
        self.writing = threading.Event()
        self.proceed = threading.Event()

    def checkpoint_writing(self) -> None:
        self.writing.set()
        assert self.proceed.wait(30)


def _open(tmp_path: Path, **kw: Any) -> MemoryStore:
    return MemoryStore(tmp_path, "test", embedder=FakeEmbedder(), **kw)


def _temp_files(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in (tmp_path / "test").iterdir() if ".tmp" in p.name or p.name.startswith("checkpoint-"))


def _held_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[MemoryStore, HeldWhileWriting, threading.Thread]:
    """A store whose write path checkpoints every 50 records, held inside one (60 adds by a thread), after a
    checkpointed first memory (so that another store opening restores checkpoints rather than rebuilding and
    checkpointing them) and a forgotten one."""
    with _open(tmp_path) as s:
        s.add("the first fact")
        s.delete(s.add("a fact to forget").id)
        s.checkpoint()
    monkeypatch.setenv("MEMSERVER_CHECKPOINT_EVERY", "50")
    held = HeldWhileWriting()
    store = _open(tmp_path, hooks=held)
    writer = threading.Thread(target=store.add_many, args=([f"fact {i} about item{i}" for i in range(60)],))
    writer.start()
    assert held.writing.wait(30)
    return store, held, writer


def _other(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> MemoryStore:
    """Another store on the same folder (its own lock file handle: flock excludes it like another process), with
    a 1 s lock timeout (a write of it would fail if the checkpoint held the lock) and the default spacing."""
    monkeypatch.delenv("MEMSERVER_CHECKPOINT_EVERY")
    return _open(tmp_path, lock_timeout=1.0)


def _release(held: HeldWhileWriting, writer: threading.Thread) -> None:
    held.proceed.set()
    writer.join(30)
    assert not writer.is_alive()


@pytest.mark.parametrize("graph", ["copied", "saved by hnswlib"])
def test_other_stores_and_threads_write_and_read_while_a_checkpoint_is_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, graph: str
) -> None:
    """While a write-path checkpoint writes its files, another store (its own lock file handle: flock excludes it
    like another process) with a 1 s lock timeout writes and searches, and the store's other threads do too;
    then the checkpoint commits, covering what it copied out, and the next open replays only the rest. (Both ways
    of staging the graph: copied in memory, or, past checkpoint_job.COPY_MAX_ELEMENTS, saved by hnswlib.)"""
    if graph != "copied":
        monkeypatch.setattr(checkpoint_job, "COPY_MAX_ELEMENTS", 0)
    a, held, writer = _held_checkpoint(tmp_path, monkeypatch)
    with _other(tmp_path, monkeypatch) as b:
        other = b.add("written by another store during the checkpoint")
        assert b.search("another store during the checkpoint", limit=1)[0].memory.id == other.id
        same = a.add("written by another thread of the same store")  # due again: not a second checkpoint
        got = a.get(other.id)
        assert got is not None and got.content == other.content
        assert held.checkpoints == []
        _release(held, writer)
        assert held.checkpoints == [61]
    a.close()
    assert _temp_files(tmp_path) == []
    reopened = RecordingHooks()
    with _open(tmp_path, hooks=reopened) as s:
        assert reopened.opens == [(2, True)]  # the snapshot at 61 memories, then the two adds made meanwhile
        assert s.stats()["count"] == 63 and s.get(same.id) is not None
        assert s.search("fact 7 about item7", limit=1)[0].memory.content == "fact 7 about item7"


def test_a_checkpoint_overtaken_by_another_stores_checkpoint_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another store checkpoints further while this one's checkpoint writes: this one is dropped at its commit
    (the checkpoint in force covers more), its files are gone, and the next open replays nothing."""
    a, held, writer = _held_checkpoint(tmp_path, monkeypatch)
    with _other(tmp_path, monkeypatch) as b:
        b.add("written by another store during the checkpoint")
        b.checkpoint()
        _release(held, writer)
    assert held.checkpoints == []
    a.close()
    assert _temp_files(tmp_path) == []
    reopened = RecordingHooks()
    with _open(tmp_path, hooks=reopened) as s:
        assert reopened.opens == [(0, True)] and s.stats()["count"] == 62


def test_a_checkpoint_overtaken_by_another_stores_compaction_is_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another store compacts while this one's checkpoint writes: the checkpoint (of the old generation) is
    dropped, the store goes on in the new generation, and a fresh open reads back the same as it."""
    a, held, writer = _held_checkpoint(tmp_path, monkeypatch)
    with _other(tmp_path, monkeypatch) as b:
        assert b.compact()["removed"] == 1
        _release(held, writer)
    assert held.checkpoints == []
    late = a.add("written after the compaction")
    state = readback(a)
    a.close()
    assert _temp_files(tmp_path) == []
    with _open(tmp_path) as s:
        assert readback(s) == state and s.get(late.id) is not None and s.stats()["count"] == 62


# The child writes 40 memories (acknowledged: "A <id>"), then 20 more whose write-path checkpoint holds inside its
# unlocked write ("writing"), where the parent kills it.
CHILD = r"""
import os, sys, threading
os.environ["MEMSERVER_CHECKPOINT_EVERY"] = "50"
from memserver.local.store import MemoryStore, StoreHooks
from tests.support.fakes import FakeEmbedder

class Held(StoreHooks):
    def checkpoint_writing(self):
        print("writing", flush=True)
        threading.Event().wait()

store = MemoryStore(sys.argv[1], "test", embedder=FakeEmbedder(), hooks=Held())
for m in store.add_many([f"fact {i} about item{i}" for i in range(40)]):
    print("A", m.id, flush=True)
store.add_many([f"late fact {i}" for i in range(20)])
"""


@pytest.mark.skipif(os.name != "posix", reason="SIGKILL")
def test_a_crash_while_a_checkpoint_is_written_loses_nothing_and_leaves_no_files(tmp_path: Path) -> None:
    """Killed inside the unlocked write, a store leaves the journal whole and temp files only; the next open
    loads every memory (the 60 were durable before the checkpoint began) and removes the temp files."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=ROOT,
        text=True,
    )
    assert child.stdout is not None
    acked = []
    for line in child.stdout:
        if line.strip() == "writing":
            break
        acked.append(line.split()[1])
    child.send_signal(signal.SIGKILL)
    child.communicate()
    assert len(acked) == 40
    assert _temp_files(tmp_path)  # the kill landed inside the checkpoint's write
    with _open(tmp_path) as s:
        assert _temp_files(tmp_path) == []
        assert s.stats()["count"] == 60 and all(s.get(mid) is not None for mid in acked)
        assert s.search("late fact 7", limit=1, mode="keyword")[0].memory.content == "late fact 7"
