"""Kinds, due dates, done tasks, pinned and archived memories (issue 24): stored and returned, filtered by search,
the listings and select, changed by new versions that keep history, and old records read as unpinned notes."""

from __future__ import annotations

import pytest

from memserver.contract import lifecycle
from memserver.contract.backend import KINDS, MemoryFilter
from memserver.errors import InvalidInputError
from tests.contract.harness import Backend, BackendUnderTest

UNKNOWN = "0123456789abcdef0123456789abcdef"


def test_kind_and_due_are_stored_and_returned(store: Backend) -> None:
    m = store.add("Renew the passport", kind="Task", due="2026-12-31")
    assert (m.kind, m.due, m.done, m.pinned, m.archived) == ("task", "2026-12-31", False, False, False)
    assert {"kind": "task", "due": "2026-12-31"}.items() <= m.to_dict().items()
    got = store.get(m.id)
    assert got is not None and (got.kind, got.due) == ("task", "2026-12-31")
    plain = store.add("The sky was grey")
    assert (plain.kind, plain.due) == ("note", None)
    assert not {"kind", "due", "done", "pinned", "archived"} & plain.to_dict().keys()
    assert "task" in KINDS and "note" in KINDS


def test_bad_kind_and_due_are_refused(store: Backend) -> None:
    with pytest.raises(InvalidInputError, match="kind must be one of fact, preference"):
        store.add("x", kind="chore")
    with pytest.raises(InvalidInputError, match="due must be an ISO date"):
        store.add("x", due="next week")
    with pytest.raises(InvalidInputError, match=r"kinds\[0\] must be one of"):
        store.search("x", kinds=["chore"])


def test_kinds_filter_search_listings_and_select(store: Backend) -> None:
    fact = store.add("Alice likes green tea", kind="fact")
    pref = store.add("Alice prefers tea in the morning", kind="preference")
    note = store.add("Tea notes from the market")
    assert {h.memory.id for h in store.search("tea", limit=10, kinds=["fact"])} == {fact.id}
    assert {m.id for m in store.list_recent(10, kinds=["fact", "preference"])} == {fact.id, pref.id}
    assert {m.id for m in store.list_page(10, kinds=["note"]).memories} == {note.id}
    assert set(store.select(MemoryFilter(kinds=["preference"])).ids) == {pref.id}


def test_archive_hides_until_asked_and_unarchive_restores(store: Backend) -> None:
    kept = store.add("The boat is blue")
    old = store.add("The boat is red")
    archived = store.archive(old.id)
    assert archived is not None and archived.archived and archived.replaces == old.id
    assert [h.memory.id for h in store.search("boat", limit=10)] == [kept.id]
    assert {h.memory.id for h in store.search("boat", limit=10, include_archived=True)} == {kept.id, archived.id}
    assert [m.id for m in store.list_recent(10)] == [kept.id]
    assert archived.id in {m.id for m in store.list_recent(10, include_archived=True)}
    assert store.select(MemoryFilter(everything=True)).ids == [kept.id]
    history = store.get(old.id)
    assert history is not None and history.replaced_by == archived.id and not history.archived
    back = store.archive(archived.id, False)
    assert back is not None and not back.archived
    assert {h.memory.id for h in store.search("boat", limit=10)} == {kept.id, back.id}


def test_pin_and_done_are_new_versions_with_history(store: Backend) -> None:
    task = store.add("Call the plumber", kind="task", due="2026-12-03", tags=["home"])
    pinned = store.pin(task.id)
    assert pinned is not None and pinned.pinned and pinned.replaces == task.id
    assert (pinned.kind, pinned.due, pinned.tags, pinned.occurred_at) == (
        "task",
        "2026-12-03",
        ("home",),
        task.occurred_at,
    )
    assert store.pin(pinned.id) == pinned  # already pinned: nothing new
    done = store.mark_done(pinned.id)
    assert done is not None and done.done and done.pinned
    assert [m.id for m in store.list_recent(10)] == [done.id]
    unpinned = store.pin(done.id, False)
    assert unpinned is not None and not unpinned.pinned and unpinned.done
    then = store.list_page(10, as_of=pinned.created_at).memories
    assert [(m.id, m.pinned, m.done) for m in then] == [(pinned.id, True, False)]


def test_lifecycle_calls_on_unknown_or_replaced_ids(store: Backend) -> None:
    assert store.pin(UNKNOWN) is None
    assert store.archive(UNKNOWN) is None
    assert store.mark_done(UNKNOWN) is None
    m = store.add("Spare key under the mat")
    store.pin(m.id)
    with pytest.raises(InvalidInputError, match=r"memory_id \w+ is history"):
        store.archive(m.id)
    other = store.add("In another namespace", namespace="user:bob")
    assert store.pin(other.id) is None


def test_lifecycle_fields_survive_reopen_and_export(backend: BackendUnderTest) -> None:
    store = backend.store
    m = store.add("Standup at nine", kind="event", due="2026-12-04")
    p = store.pin(m.id)
    assert p is not None
    reopened = backend.reopen()
    got = reopened.get(p.id)
    assert got is not None and (got.kind, got.due, got.pinned) == ("event", "2026-12-04", True)
    exported = {r["id"]: r for r in reopened.export()}
    assert exported[p.id]["pinned"] is True and exported[p.id]["kind"] == "event"


def test_old_records_read_as_unpinned_notes(store: Backend) -> None:
    """An import record written before kinds existed (no lifecycle keys) reads as a plain note."""
    assert store.import_([{"content": "An old memory", "id": UNKNOWN, "created_at": "2024-01-01T00:00:00Z"}]) == 1
    old = store.get(UNKNOWN)
    assert old is not None and (old.kind, old.due, old.done, old.pinned, old.archived) == (
        "note",
        None,
        False,
        False,
        False,
    )
    assert [m.id for m in store.list_recent(10, kinds=["note"])] == [UNKNOWN]


def test_pinned_memories_are_found_and_kept_up_to_date(store: Backend) -> None:
    """lifecycle.pinned: this process's pins and archives show at once; after other writes the kept pins are
    checked (a forgotten one drops out, an edited one follows its new version); a pin it did not see (an import)
    shows once RESCAN_SECONDS have passed."""
    now = [0.0]

    def clock() -> float:
        return now[0]

    a = store.pin(store.add("Always answer in metric units").id)
    b = store.pin(store.add("The user is vegetarian").id)
    c = store.pin(store.add("The dog is called Pixel").id)
    store.add("Not pinned")
    assert a is not None and b is not None and c is not None
    assert {m.id for m in lifecycle.pinned(store, clock=clock)} == {a.id, b.id, c.id}
    archived = store.archive(b.id)  # this process's change: a fresh scan
    assert archived is not None and archived.pinned
    assert {m.id for m in lifecycle.pinned(store, clock=clock)} == {a.id, c.id}
    store.import_([{"content": "Pinned by an import", "pinned": True}])  # unseen until the next scan
    assert store.delete(a.id)
    edited = store.add_many([lifecycle.new_version(c, content="The dog is called Pixel; she is four")])[0]
    assert edited.pinned and [m.id for m in lifecycle.pinned(store, clock=clock)] == [edited.id]
    now[0] += lifecycle.RESCAN_SECONDS
    found = [m.content for m in lifecycle.pinned(store, clock=clock)]
    assert sorted(found) == ["Pinned by an import", "The dog is called Pixel; she is four"]
    assert lifecycle.pinned(store, "elsewhere") == []
