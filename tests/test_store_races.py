"""Races between stores sharing one folder, and edge-case input, found in review; each test failed before its fix."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from memserver.errors import InvalidInputError
from memserver.store import MemoryStore
from tests.fakes import FakeEmbedder


def _open(path: Path) -> MemoryStore:
    # Each MemoryStore has its own lock file descriptor, so two in one process exclude each other like two processes.
    return MemoryStore(path, "c", embedder=FakeEmbedder())


def test_a_write_waiting_on_another_stores_compaction_lands_in_the_new_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An add and a delete acknowledged while another process compacts are in the store afterwards."""
    compacting, writer = _open(tmp_path), _open(tmp_path)
    gone = compacting.add("old fact to be deleted")
    compacting.delete(gone.id)
    kept = compacting.add("kept fact")
    writer.list_recent(1)  # the writer is caught up, like a client that has just made a call

    # Widen the window in which the compacting store holds the lock and switches journals.
    switch = MemoryStore._compact_switch
    in_switch = threading.Event()

    def slow_switch(self: MemoryStore, *args: object, **kwargs: object) -> object:
        in_switch.set()
        time.sleep(0.5)
        return switch(self, *args, **kwargs)

    monkeypatch.setattr(compacting, "_compact_switch", slow_switch.__get__(compacting))
    thread = threading.Thread(target=compacting.compact)
    thread.start()
    assert in_switch.wait(10)
    added = writer.add("acknowledged while the other store switched journals")
    assert writer.delete(kept.id)
    thread.join(30)

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
