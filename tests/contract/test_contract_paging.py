"""list_page: everything, newest first, exactly once, a page at a time, also while memories are added; and the bulk
selection behind "forget all of this": select (count, sample, ids) and delete_many."""

from __future__ import annotations

import pytest

from memserver.contract.backend import MemoryFilter, Page
from memserver.errors import InvalidInputError
from tests.contract.harness import Backend, BackendUnderTest


def _all_pages(store: Backend, limit: int, cursor: str | None = None, **filters: object) -> list[Page]:
    pages = [store.list_page(limit=limit, cursor=cursor, **filters)]  # type: ignore[arg-type]
    while pages[-1].next_cursor is not None:
        pages.append(store.list_page(limit=limit, cursor=pages[-1].next_cursor, **filters))  # type: ignore[arg-type]
        assert len(pages) < 100
    return pages


def _dated(n: int, prefix: str = "memory", **fields: object) -> list[dict[str, object]]:
    """n records, several sharing each occurred_at (ties are ordered by storage order)."""
    return [
        {"content": f"{prefix} {i}", "occurred_at": f"2025-01-{1 + i // 3:02d}T10:00:00Z", **fields} for i in range(n)
    ]


@pytest.mark.parametrize("limit", [1, 4, 7, 25, 100])
def test_paging_returns_everything_once_newest_first(store: Backend, limit: int) -> None:
    store.import_(_dated(25))
    pages = _all_pages(store, limit)
    listed = [m.content for p in pages for m in p.memories]
    assert listed == [m.content for m in store.list_recent(limit=25)]
    assert sorted(listed) == sorted(f"memory {i}" for i in range(25))
    assert [len(p.memories) for p in pages[:-1]] == [limit] * (len(pages) - 1)
    assert pages[-1].next_cursor is None and 0 < len(pages[-1].memories) <= limit
    assert listed[0] == "memory 24" and listed[-1] == "memory 0"  # a tie: the later-stored first


def test_an_empty_store_has_one_empty_page(store: Backend) -> None:
    assert store.list_page() == Page([], None)


def test_paging_while_memories_are_added(store: Backend) -> None:
    """Memories added between pages: older than the cursor (and ties stored later, placed below it) are listed
    once on a later page, newer ones not at all; none listed before comes again, none is skipped."""
    store.import_(_dated(30))
    seen: list[str] = []
    page = store.list_page(limit=6)
    extra = 0
    while True:
        seen += [m.content for m in page.memories]
        if page.next_cursor is None:
            break
        store.add(f"older {extra}", occurred_at="2024-12-01T00:00:00Z")  # below every cursor: listed later
        store.add(f"newer {extra}", occurred_at="2026-01-01T00:00:00Z")  # above every cursor: not listed
        extra += 1
        page = store.list_page(limit=6, cursor=page.next_cursor)
    assert len(seen) == len(set(seen))
    assert {f"memory {i}" for i in range(30)} <= set(seen)
    assert {f"older {i}" for i in range(extra)} <= set(seen)
    assert not any(s.startswith("newer") for s in seen)


def test_paging_with_filters(store: Backend) -> None:
    """The filters of list_page (tags, session, speaker, role) page the same way."""
    store.import_(_dated(12, "alpha", session="a", speaker="Ana", role="user", tags=["x"]))
    store.import_(_dated(9, "beta", session="b", speaker="Ben", role="assistant"))
    for filters, n in (({"session": "a"}, 12), ({"speaker": "Ben"}, 9), ({"role": "user"}, 12), ({"tags": ["x"]}, 12)):
        listed = [m for p in _all_pages(store, 5, **filters) for m in p.memories]
        assert len(listed) == len({m.id for m in listed}) == n
    assert _all_pages(store, 5, session="nothing") == [Page([], None)]


def test_a_cursor_survives_a_compaction_and_a_reopen(backend: BackendUnderTest) -> None:
    """A cursor stays usable after compaction (the storage renumbered) and in another process (a reopen)."""
    store = backend.store
    store.import_(_dated(20))
    first = store.list_page(limit=8)
    doomed = store.add("to forget", occurred_at="2024-01-01")
    store.delete(doomed.id)
    store.compact()
    store = backend.reopen()
    rest = _all_pages(store, 8, cursor=first.next_cursor)
    listed = [m.content for m in first.memories] + [m.content for p in rest for m in p.memories]
    assert listed == [f"memory {i}" for i in range(19, -1, -1)]


@pytest.mark.parametrize("cursor", ["c1.", "c1.bm9wZQ", "not-a-cursor", "x" * 600])
def test_a_bad_cursor_is_refused(store: Backend, cursor: str) -> None:
    store.add("something")
    with pytest.raises(InvalidInputError) as exc:
        store.list_page(cursor=cursor)
    assert str(exc.value).startswith("cursor must be a next_cursor returned by list_page, got ")


def test_paging_by_source_and_time(store: Backend) -> None:
    """source, since and until filter list_page as they filter search (until: a date is that whole day)."""
    store.import_(_dated(9, "mail", source="mail"))
    store.import_(_dated(6, "chat", source=""))
    by_source = [m.content for p in _all_pages(store, 4, source="mail") for m in p.memories]
    assert sorted(by_source) == sorted(f"mail {i}" for i in range(9))
    assert {m.content for p in _all_pages(store, 4, source="") for m in p.memories} == {f"chat {i}" for i in range(6)}
    window = [m.content for p in _all_pages(store, 2, since="2025-01-02", until="2025-01-02") for m in p.memories]
    assert window == ["chat 5", "chat 4", "chat 3", "mail 5", "mail 4", "mail 3"]  # a tie: the later-stored first
    with pytest.raises(InvalidInputError, match="since"):
        store.list_page(since="2025-02-01", until="2025-01-01")


def test_order_stored_lists_by_storage_time(store: Backend) -> None:
    """order="stored": newest created_at first, so a just-added backdated memory comes first; paging covers
    everything once; the time filters still bound occurred_at."""
    store.import_([{**r, "created_at": f"2025-03-{1 + i:02d}T00:00:00Z"} for i, r in enumerate(_dated(12))])
    backdated = store.add("backdated", occurred_at="2020-01-01")
    assert store.list_page(limit=1).memories[0].content == "memory 11"
    assert store.list_page(limit=1, order="stored").memories[0].id == backdated.id
    for limit in (1, 5, 13):
        listed = [m.content for p in _all_pages(store, limit, order="stored") for m in p.memories]
        assert listed == ["backdated", *(f"memory {i}" for i in range(11, -1, -1))]
    old = [m.content for p in _all_pages(store, 5, order="stored", until="2024-12-31") for m in p.memories]
    assert old == ["backdated"]


def test_order_stored_ties_and_a_cursor_of_the_other_order(store: Backend) -> None:
    """Equal created_at: the later-stored first. A cursor belongs to its order."""
    store.import_([{**r, "created_at": "2025-03-01T00:00:00Z"} for r in _dated(6)])
    listed = [m.content for p in _all_pages(store, 4, order="stored") for m in p.memories]
    assert listed == [f"memory {i}" for i in range(5, -1, -1)]
    by_time = store.list_page(limit=2).next_cursor
    by_storage = store.list_page(limit=2, order="stored").next_cursor
    assert by_time is not None and by_storage is not None
    for cursor, order in ((by_time, "stored"), (by_storage, "occurred")):
        with pytest.raises(InvalidInputError, match=r"^cursor must be"):
            store.list_page(cursor=cursor, order=order)
    with pytest.raises(InvalidInputError, match="order"):
        store.list_page(order="newest")


def test_order_stored_survives_a_compaction(backend: BackendUnderTest) -> None:
    store = backend.store
    store.import_([{**r, "created_at": f"2025-03-{1 + i:02d}T00:00:00Z"} for i, r in enumerate(_dated(10))])
    first = store.list_page(limit=4, order="stored")
    store.delete(store.add("to forget").id)
    store.compact()
    store = backend.reopen()
    rest = _all_pages(store, 4, cursor=first.next_cursor, order="stored")
    listed = [m.content for m in first.memories] + [m.content for p in rest for m in p.memories]
    assert listed == [f"memory {i}" for i in range(9, -1, -1)]


# --- select and delete_many ------------------------------------------------------------------------------------


@pytest.fixture
def filled(store: Backend) -> Backend:
    store.import_(
        [
            *_dated(9, "work", tags=["work"], session="s1", speaker="Ana", created_at="2025-02-01T00:00:00Z"),
            *_dated(6, "home", tags=["home"], session="s2", speaker="Ben", role="user"),
            *_dated(3, "elsewhere", tags=["work"], namespace="other"),
        ]
    )
    return store


@pytest.mark.parametrize(
    ("criterion", "count"),
    [
        ({"tags": ["work"]}, 9),
        ({"tags": ["work", "home"]}, 15),
        ({"session": "s2"}, 6),
        ({"speaker": "Ana"}, 9),
        ({"role": "user"}, 6),
        ({"since": "2025-01-03"}, 3),  # occurred_at: work 6..8
        ({"until": "2025-01-01"}, 6),
        ({"before": "2025-03-01"}, 9),
        ({"tags": ["work"], "namespace": "other"}, 3),
        ({"everything": True}, 15),
        ({"everything": True, "namespace": "other"}, 3),
        ({"tags": ["nothing"]}, 0),
    ],
)
def test_select_counts_the_matching_memories(filled: Backend, criterion: dict[str, object], count: int) -> None:
    """The count, every id, and a sample of the newest (newest occurred_at first) of the matching memories."""
    selection = filled.select(MemoryFilter(**criterion), limit=4)  # type: ignore[arg-type]
    assert selection.count == count == len(selection.ids) == len(set(selection.ids))
    space = str(criterion.get("namespace", "default"))
    newest = filled.list_recent(limit=1000, namespace=space)
    wanted = [m for m in newest if m.id in set(selection.ids)]
    assert selection.sample == wanted[:4]
    assert selection.ids == [m.id for m in wanted]
    assert filled.select(MemoryFilter(**criterion)).sample == []  # type: ignore[arg-type]


def test_select_takes_history_only_when_asked(store: Backend) -> None:
    old = store.add("the standup is at 9:30", session="team")
    new = store.add("the standup is at 10:00", session="team", replaces=old.id)
    assert store.select(MemoryFilter(session="team")).ids == [new.id]
    assert sorted(store.select(MemoryFilter(session="team", include_replaced=True)).ids) == sorted([old.id, new.id])


def test_delete_many_forgets_the_selection_in_one_call(filled: Backend) -> None:
    """delete_many returns how many of the ids were there; only those are forgotten; repeats count once."""
    chosen = filled.select(MemoryFilter(session="s2"))
    assert filled.delete_many([*chosen.ids, chosen.ids[0], "f" * 32]) == 6
    assert filled.select(MemoryFilter(session="s2")).count == 0
    assert filled.stats()["count"] == 12
    assert filled.delete_many(chosen.ids) == 0
    assert filled.delete_many([]) == 0
    assert filled.delete_many(iter(filled.select(MemoryFilter(tags=["work"], namespace="other")).ids)) == 0
    assert (
        filled.delete_many(filled.select(MemoryFilter(everything=True, namespace="other")).ids, namespace="other") == 3
    )


def test_a_bad_id_forgets_nothing(filled: Backend) -> None:
    ids = filled.select(MemoryFilter(everything=True)).ids
    with pytest.raises(InvalidInputError):
        filled.delete_many([*ids[:3], "not an id"])
    assert filled.stats()["count"] == 18
