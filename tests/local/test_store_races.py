"""Races between stores sharing one folder, and edge-case input, found in review; each test failed before its fix."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pytest

from memserver.durable import FILE_MODE, FileLayer, StrPath
from memserver.errors import InvalidInputError, StoreLockedError
from memserver.local.journal import FileLock
from memserver.local.store import MemoryStore, StoreHooks
from tests.support.fakes import FakeEmbedder
from tests.support.readback import readback


def _open(path: Path, hooks: StoreHooks | None = None) -> MemoryStore:
    # Each MemoryStore has its own lock file descriptor, so two in one process exclude each other like two processes.
    return MemoryStore(path, "c", embedder=FakeEmbedder(), hooks=hooks)


class _HeldAtSwitch(StoreHooks):
    """Holds a compaction at its switch (exclusive lock held) until `proceed` is set."""

    def __init__(self) -> None:
        self.switching = threading.Event()
        self.proceed = threading.Event()

    def compaction_switching(self) -> None:
        self.switching.set()
        assert self.proceed.wait(30)


class _SignalsLockWait(StoreHooks):
    """Sets `waiting` when a write is about to take the exclusive lock (armed by `arm`)."""

    def __init__(self) -> None:
        self.armed = False
        self.waiting = threading.Event()

    def taking_exclusive_lock(self) -> None:
        if self.armed:
            self.waiting.set()


def test_a_write_waiting_on_another_stores_compaction_lands_in_the_new_journal(tmp_path: Path) -> None:
    """An add and a delete acknowledged while another process compacts are in the store afterwards: the add waits
    for the lock the compaction holds at its switch, then finds the journal replaced and writes to the new one."""
    held, waits = _HeldAtSwitch(), _SignalsLockWait()
    compacting, writer = _open(tmp_path, held), _open(tmp_path, waits)
    gone = compacting.add("old fact to be deleted")
    compacting.delete(gone.id)
    kept = compacting.add("kept fact")
    writer.list_recent(1)  # the writer is caught up, like a client that has just made a call

    thread = threading.Thread(target=compacting.compact)
    thread.start()
    assert held.switching.wait(10)
    waits.armed = True
    # The writer's add reaches the lock while the compaction holds it; the compaction then switches journals.
    threading.Thread(target=lambda: waits.waiting.wait(10) and held.proceed.set(), daemon=True).start()
    added = writer.add("acknowledged while the other store switched journals")
    assert writer.delete(kept.id)
    thread.join(30)
    assert not thread.is_alive()

    with _open(tmp_path) as fresh:
        assert fresh.get(added.id) is not None
        assert fresh.get(kept.id) is None
        assert fresh.get(gone.id) is None
    compacting.close()
    writer.close()


def test_import_with_one_id_twice_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    """Two records with one id cannot both be "added": the import names the id and writes nothing."""
    same = "0123456789abcdef0123456789abcdef"
    with _open(tmp_path) as store:
        with pytest.raises(InvalidInputError, match=same):
            store.import_([{"id": same, "content": "first"}, {"id": same, "content": "second"}])
        assert store.stats()["count"] == 0
        assert store.add("after the refused import").content == "after the refused import"
    with _open(tmp_path) as store:
        assert store.stats()["count"] == 1


@pytest.mark.parametrize(
    "kwargs",
    [{"until": "9999-12-31"}, {"since": "0001-01-01T00:00:00+01:00"}, {"since": "9999-12-31T23:59:59-01:00"}],
)
def test_dates_at_the_edge_of_the_calendar_are_input_errors(tmp_path: Path, kwargs: dict[str, str]) -> None:
    """A date the calendar cannot shift to UTC is an InvalidInputError naming the argument, not a crash."""
    with _open(tmp_path) as store:
        store.add("something")
        with pytest.raises(InvalidInputError, match=next(iter(kwargs))):
            store.search("something", **kwargs)


@pytest.mark.parametrize("field", ["tags", "source"])
def test_lone_surrogates_in_tags_or_source_are_input_errors(tmp_path: Path, field: str) -> None:
    """Text that cannot be written as UTF-8 is refused up front, wherever it appears."""
    value: object = ["bad\ud800tag"] if field == "tags" else "bad\ud800source"
    with _open(tmp_path) as store:
        with pytest.raises(InvalidInputError, match=field):
            store.add("content", **{field: value})
        assert store.stats()["count"] == 0


def test_a_reload_that_times_out_on_the_lock_leaves_nothing_half_built(tmp_path: Path) -> None:
    """A store reloading after another store's compaction while a third process holds the lock past its
    lock_timeout fails that one call; its next call loads the new generation whole, and a checkpoint it writes
    then is sound: its answers, and a fresh open's before and after that checkpoint, are the same."""
    reloading = MemoryStore(tmp_path, "c", embedder=FakeEmbedder(), lock_timeout=0.2)
    compacting = _open(tmp_path)
    ms = reloading.add_many([{"content": f"fact {i} about item{i}", "tags": [f"t{i % 3}"]} for i in range(40)])
    for m in ms[:20]:
        reloading.delete(m.id)
    compacting.compact()  # rows renumbered: the reloading store must rebuild everything it holds
    other = FileLock(tmp_path / "c" / "lock")
    with other.hold(exclusive=True), pytest.raises(StoreLockedError):
        reloading.get(ms[30].id)
    other.close()
    state = readback(reloading)
    assert state["count"] == 20 and reloading.search("fact 30 about item30", limit=1)[0].memory.id == ms[30].id
    with _open(tmp_path) as fresh:
        assert readback(fresh) == state
    reloading.checkpoint()
    reloading.close()
    compacting.close()
    with _open(tmp_path) as fresh:
        assert readback(fresh) == state


class _AfterCopy(StoreHooks):
    """Runs `action` between a compaction's unlocked copy and its switch."""

    def __init__(self) -> None:
        self.action = lambda: None

    def compaction_copied(self) -> None:
        self.action()


def test_a_memory_deleted_and_imported_again_during_a_compaction_keeps_the_import(tmp_path: Path) -> None:
    """Between a compaction's copy and its switch another store deletes memory X and imports X again under its id
    with new content, both acknowledged: after the switch X has the new content everywhere, and a memory deleted
    meanwhile stays deleted."""
    hooks = _AfterCopy()
    compacting, other = _open(tmp_path, hooks), _open(tmp_path)
    x = compacting.add("version A of the note", tags=["t1"])
    gone = compacting.add("fact 1 about item1")
    compacting.add_many([f"fact {i} about item{i}" for i in range(2, 12)])

    def replace_x() -> None:
        assert other.delete(x.id) and other.delete(gone.id)
        assert other.import_([{"id": x.id, "content": "version B of the note", "tags": ["t2"]}]) == 1

    hooks.action = replace_x
    assert compacting.compact()["count"] == 11
    for s in (compacting, other):
        got = s.get(x.id)
        assert got is not None and (got.content, got.tags) == ("version B of the note", ("t2",))
        assert s.get(gone.id) is None
    state = readback(compacting)
    assert readback(other) == state
    compacting.close()
    other.close()
    with _open(tmp_path) as fresh:
        assert readback(fresh) == state


class _ActsOnceJournalIsOpen(FileLayer):
    """The real file system; runs `action` once, right after the store opened its journal (before any lock)."""

    def __init__(self, action: Callable[[], object]) -> None:
        self.action = action
        self.fired = False

    def open(self, path: StrPath, flags: int, mode: int = FILE_MODE) -> int:
        fd = super().open(path, flags, mode)
        if Path(path).name == "journal.jsonl" and not self.fired:
            self.fired = True
            self.action()
        return fd


def test_a_store_opening_while_another_compacts_reembeds_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Another process's compaction switches journals (and removes the old vector file) just after a store
    opened the old journal: the store opens the new generation instead, re-embeds nothing, reports no damage and
    leaves no vector file of the old generation behind."""
    compacting = _open(tmp_path)
    ms = compacting.add_many([f"fact {i} about item{i}" for i in range(300)])
    for m in ms[:30]:
        compacting.delete(m.id)
    compacting.checkpoint()
    counting = FakeEmbedder()
    with caplog.at_level(logging.INFO, logger="memserver"):
        opening = MemoryStore(tmp_path, "c", embedder=counting, files=_ActsOnceJournalIsOpen(compacting.compact))
    assert counting.texts == 0
    assert not [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert opening.stats()["count"] == 270 and opening.get(ms[100].id) is not None
    assert len(list((tmp_path / "c").glob("vectors-*.f32"))) == 1
    assert readback(opening) == readback(compacting)
    opening.close()
    compacting.close()


def test_a_reader_that_saw_a_torn_tail_sees_the_write_that_replaced_it(tmp_path: Path) -> None:
    """A reader catches up while the journal ends in a crashed writer's torn line of L bytes; another writer cuts
    it off and appends a line of exactly L bytes, so the journal's size is what the reader saw: the reader still
    sees that acknowledged write on its next call."""
    with MemoryStore(tmp_path / "scratch", "c", embedder=FakeEmbedder()) as scratch:  # the next line's length
        scratch.add("first memory")
        before = (tmp_path / "scratch" / "c" / "journal.jsonl").stat().st_size
        scratch.add("second memory")
        length = (tmp_path / "scratch" / "c" / "journal.jsonl").stat().st_size - before
    reader, writer = _open(tmp_path), _open(tmp_path)
    reader.add("first memory")
    journal = tmp_path / "c" / "journal.jsonl"
    with open(journal, "ab") as f:
        f.write(b"z" * length)  # a crashed writer's torn last line
    assert reader.stats()["count"] == 1  # caught up on everything but the torn tail (a writer repairs it)
    size = journal.stat().st_size
    added = writer.add("second memory")
    assert journal.stat().st_size == size  # the repair and the new line left the size as the reader saw it
    assert reader.get(added.id) is not None
    reader.close()
    writer.close()


class _ActsOnFirstEmbed(FakeEmbedder):
    """A FakeEmbedder that runs `action` once, when first asked to embed texts (queries aside)."""

    def __init__(self, action: Callable[[], object]) -> None:
        super().__init__()
        self.action = action
        self.fired = False

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not self.fired:
            self.fired = True
            self.action()
        return super().embed(texts)


def test_an_open_does_not_set_aside_a_torn_tail_of_a_journal_replaced_meanwhile(tmp_path: Path) -> None:
    """A store opening a journal with a torn tail rebuilds an index (re-embedding a damaged row) between its
    shared and exclusive locks; meanwhile another store repairs that tail and compacts, and the old journal file
    gets torn bytes again: the opener does not copy those to a torn-* file (the tail of a journal no longer in
    use) but opens the new generation."""
    with _open(tmp_path) as first:
        first.add_many([f"fact {i} about item{i}" for i in range(300)])
    folder = tmp_path / "c"
    for p in folder.glob("index*"):  # no vector index checkpoint: rebuilt on open, from the rows
        p.unlink()
    vec = next(folder.glob("vectors-*.f32"))
    with open(vec, "r+b") as f:  # one damaged row: re-embedded by that rebuild
        f.seek(5 * 384 * 4)
        f.write(b"\xff" * 16)
    journal = folder / "journal.jsonl"
    old = folder / "old-journal.jsonl"
    os.link(journal, old)  # the old journal file, reachable after the switch
    with open(journal, "ab") as f:
        f.write(b'{"op":"add","torn')
    others: list[MemoryStore] = []

    def compact_meanwhile() -> None:
        other = _open(tmp_path)  # repairs the torn tail (one torn-* file, rightly), then compacts
        other.compact()
        others.append(other)
        with open(old, "ab") as f:
            f.write(b'{"op":"add","torn again')

    with MemoryStore(tmp_path, "c", embedder=_ActsOnFirstEmbed(compact_meanwhile)) as opening:
        assert others and opening.stats()["count"] == 300
        assert readback(opening) == readback(others[0])
    assert len(list(folder.glob("journal.jsonl.torn-*"))) == 1
    others[0].close()


class _CompactsBeforeTheSwitch(StoreHooks):
    """When compact() is about to take the lock for its switch, runs `action` once; notes whether it switched."""

    def __init__(self) -> None:
        self.action: Callable[[], object] = lambda: None
        self.copied = self.switched = False

    def compaction_copied(self) -> None:
        self.copied = True

    def taking_exclusive_lock(self) -> None:
        if self.copied:
            self.copied = False
            self.action()

    def compaction_switching(self) -> None:
        self.switched = True


def test_a_compaction_beaten_to_its_switch_drops_itself_and_repairs_nothing_old(tmp_path: Path) -> None:
    """compact() copies, then before it takes the lock for its switch another store compacts and the old journal
    file gets torn bytes: it drops itself (the other's generation stands), copies no torn-* file from the old
    journal, and answers from the new generation."""
    hooks = _CompactsBeforeTheSwitch()
    compacting, other = _open(tmp_path, hooks), _open(tmp_path)
    ms = compacting.add_many([f"fact {i} about item{i}" for i in range(40)])
    for m in ms[:10]:
        compacting.delete(m.id)
    folder = tmp_path / "c"
    old = folder / "old-journal.jsonl"
    os.link(folder / "journal.jsonl", old)

    def compact_first() -> None:
        other.compact()
        with open(old, "ab") as f:
            f.write(b'{"op":"add","torn')

    hooks.action = compact_first
    assert compacting.compact()["count"] == 30
    assert not hooks.switched and not list(folder.glob("journal.jsonl.torn-*"))
    assert readback(compacting) == readback(other)
    compacting.close()
    other.close()


class _ProbesTheLock(FakeEmbedder):
    """A FakeEmbedder that notes, at each embed call, whether another process could take the store's lock."""

    def __init__(self, lock_path: Path) -> None:
        super().__init__()
        self.lock_path = lock_path
        self.lock_free: list[bool] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        probe = FileLock(self.lock_path, timeout=0)
        try:
            with probe.hold(exclusive=False):
                self.lock_free.append(True)
        except StoreLockedError:
            self.lock_free.append(False)
        finally:
            probe.close()
        return super().embed(texts)


class _ActsBeforeTheLock(StoreHooks):
    """Runs `action` once, the next time a write is about to take the exclusive lock."""

    def __init__(self) -> None:
        self.action: Callable[[], object] | None = None

    def taking_exclusive_lock(self) -> None:
        action, self.action = self.action, None
        if action is not None:
            action()


def test_an_add_whose_duplicate_was_deleted_meanwhile_embeds_outside_the_locks(tmp_path: Path) -> None:
    """An add of content stored already needs no embedding; when another store deletes that memory before the
    add takes the lock, the add must embed after all: it does so with the lock released, then writes."""
    (tmp_path / "c").mkdir()
    embedder, hooks = _ProbesTheLock(tmp_path / "c" / "lock"), _ActsBeforeTheLock()
    writer, other = MemoryStore(tmp_path, "c", embedder=embedder, hooks=hooks), _open(tmp_path)
    original = writer.add("the staging password rotates on Mondays")
    embedder.lock_free.clear()
    hooks.action = lambda: other.delete(original.id)
    again = writer.add("the staging password rotates on Mondays")
    assert not again.duplicate and again.id != original.id and other.get(again.id) is not None
    assert embedder.lock_free and all(embedder.lock_free)
    writer.close()
    other.close()
