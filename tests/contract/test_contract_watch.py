"""revision and ids_with_prefix: what resource subscriptions poll, and what completing a memory id asks for.

revision() must change on every write, seen from this backend or from another one open on the same storage (another
process), and must not change on reads: a subscriber is told of a change only when there was one.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

from memserver.errors import InvalidInputError, StoreError
from tests.contract.harness import Backend, BackendUnderTest

IDS = [  # in ascending order
    "00000000000000000000000000000001",
    "0a000000000000000000000000000000",
    "0abc0000000000000000000000000000",
    "0abcffffffffffffffffffffffffffff",
    "0abd0000000000000000000000000000",
    "f0000000000000000000000000000000",
]


@pytest.fixture
def stored(store: Backend) -> list[str]:
    store.import_([{"id": memory_id, "content": f"memory number {n}"} for n, memory_id in enumerate(IDS)])
    return IDS


READS: dict[str, Callable[[Backend], Any]] = {
    "get": lambda s: s.get(IDS[0]),
    "search": lambda s: s.search("memory number", limit=3),
    "list_recent": lambda s: s.list_recent(limit=3, tags=["none"]),
    "tag_counts": lambda s: s.tag_counts(),
    "stats": lambda s: s.stats(),
    "export": lambda s: list(s.export(include_vectors=True)),
    "ids_with_prefix": lambda s: s.ids_with_prefix("0a", 10),
}


# --- revision ------------------------------------------------------------------------------------------------------


def test_revision_is_an_opaque_string_that_reads_do_not_change(store: Backend, stored: list[str]) -> None:
    before = store.revision()
    assert isinstance(before, str) and before
    for read in READS.values():
        read(store)
    assert store.revision() == before


WRITES: dict[str, Callable[[Backend], Any]] = {
    "add": lambda s: s.add("a new memory about the harbour"),
    "add_many": lambda s: s.add_many(["one more", "and another"]),
    "import_": lambda s: s.import_([{"content": "an imported memory"}]),
    "delete": lambda s: s.delete(IDS[2]),
}


@pytest.mark.parametrize("write", list(WRITES), ids=list(WRITES))
def test_every_write_changes_the_revision(store: Backend, stored: list[str], write: str) -> None:
    before = store.revision()
    WRITES[write](store)
    after = store.revision()
    assert after != before
    assert store.revision() == after  # and it stays put until the next change


@pytest.mark.parametrize("write", list(WRITES), ids=list(WRITES))
def test_a_write_by_another_backend_on_the_same_storage_changes_the_revision(
    backend: BackendUnderTest, stored: list[str], write: str
) -> None:
    """The watcher's case: the write comes from another process, and this backend makes no call in between."""
    other = backend.twin()
    before = backend.store.revision()
    WRITES[write](other)
    assert backend.store.revision() != before
    assert backend.store.revision() == other.revision()


def test_each_of_several_writes_changes_the_revision(store: Backend) -> None:
    """Every write moves the revision on from the one before (a state seen before may bring its token back: the
    store holds the same memories then, so a watcher that missed both writes missed nothing)."""
    seen = [store.revision()]
    for n in range(5):
        memory = store.add(f"fact number {n}")
        seen.append(store.revision())
        store.delete(memory.id)
        seen.append(store.revision())
    assert all(before != after for before, after in itertools.pairwise(seen))
    kept = [store.add(f"kept fact {n}").id for n in range(3)]
    tokens = [store.revision()]
    for memory_id in kept:
        store.delete(memory_id)
        tokens.append(store.revision())
    assert len(set(tokens)) == len(tokens)  # different memories, different tokens


def test_revision_of_a_closed_backend_is_a_store_error(store: Backend) -> None:
    store.close()
    with pytest.raises(StoreError):
        store.revision()


# --- ids_with_prefix -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("prefix", "limit", "expected"),
    [
        ("0a", 10, IDS[1:5]),
        ("0abc", 10, IDS[2:4]),
        ("0A", 2, IDS[1:3]),  # any case, the lowest first
        ("  0ab ", 10, IDS[2:5]),  # trimmed
        ("", 3, IDS[:3]),  # nothing typed yet: the lowest ids
        ("", 100, IDS),
        (IDS[5], 10, [IDS[5]]),  # a whole id
        ("1", 10, []),
    ],
)
def test_ids_with_prefix_are_the_live_ids_starting_with_it_in_order(
    store: Backend, stored: list[str], prefix: str, limit: int, expected: list[str]
) -> None:
    assert store.ids_with_prefix(prefix, limit) == expected


def test_ids_with_prefix_leave_out_deleted_memories_and_include_new_ones(backend: BackendUnderTest) -> None:
    store = backend.store
    store.import_([{"id": memory_id, "content": f"memory number {n}"} for n, memory_id in enumerate(IDS)])
    store.delete(IDS[2])
    added = backend.twin().add("stored by another process")
    assert store.ids_with_prefix("0abc", 10) == [IDS[3]]
    assert store.ids_with_prefix(added.id[:6], 10) == [added.id]
    assert sorted([*IDS[:2], *IDS[3:], added.id]) == store.ids_with_prefix("", 10)


def test_ids_with_prefix_of_an_empty_backend(store: Backend) -> None:
    assert store.ids_with_prefix("", 10) == []


@pytest.mark.parametrize(
    ("prefix", "limit", "named"),
    [
        ("0x12", 10, "prefix"),
        ("g", 10, "prefix"),
        ("0" * 33, 10, "prefix"),
        (None, 10, "prefix"),
        ("0a", 0, "limit"),
        ("0a", 10_000, "limit"),
    ],
)
def test_a_bad_prefix_or_limit_is_an_input_error_naming_it(
    store: Backend, stored: list[str], prefix: Any, limit: int, named: str
) -> None:
    with pytest.raises(InvalidInputError) as caught:
        store.ids_with_prefix(prefix, limit)
    assert str(caught.value).startswith(f"{named} must be")


def test_ids_with_prefix_agree_with_sorting_every_id(store: Backend) -> None:
    """Many ids, some sharing their first 8 characters: every prefix and limit gives the head of the sorted ids."""
    made = [f"{n % 7:08x}{n:024x}" for n in range(300)] + [f"ff{n:030x}" for n in range(40)]
    store.import_([{"id": memory_id, "content": f"fact {n}"} for n, memory_id in enumerate(made)])
    for prefix in ("", "0", "00000003", "000000030000", "f", "1"):
        for limit in (1, 5, 50, 1000):
            expected = sorted(i for i in made if i.startswith(prefix))[:limit]
            assert store.ids_with_prefix(prefix, limit) == expected, (prefix, limit)


def test_ids_with_prefix_see_one_namespace_and_include_replaced_memories(store: Backend) -> None:
    """Completion offers what get() can read in that namespace: current memories and the ones they replaced."""
    if not hasattr(store, "namespaces"):
        pytest.skip("this engine has no namespaces yet (issue 12)")
    mine = store.add("the office is on the third floor", namespace="work")
    newer = store.add("the office moved to the fifth floor", namespace="work", replaces=mine.id)
    home = store.add("the spare key is with the neighbour")
    assert store.ids_with_prefix("", 10, namespace="work") == sorted([mine.id, newer.id])
    assert store.ids_with_prefix("", 10) == [home.id]
    assert store.ids_with_prefix(home.id[:4], 10, namespace="work") == [
        i for i in [mine.id, newer.id] if i[:4] == home.id[:4]
    ]
    assert store.ids_with_prefix("", 10, namespace="nobody") == []
    with pytest.raises(InvalidInputError) as caught:
        store.ids_with_prefix("", 10, namespace="not a namespace!")
    assert "namespace" in str(caught.value)
