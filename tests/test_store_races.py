"""Races between stores sharing one folder, and edge-case input, found in review; each test failed before its fix."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from memserver.errors import InvalidInputError
from memserver.store import MemoryStore, StoreHooks
from tests.fakes import FakeEmbedder


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
