"""Namespaces: memories of different namespaces never meet. Every read, write, delete and count sees one namespace;
dedup is per namespace; export (a backup) and namespaces() see them all."""

from __future__ import annotations

import pytest

from memserver.contract.backend import MemoryFilter
from memserver.errors import InvalidInputError
from tests.contract.harness import MODES, Backend, BackendUnderTest, ids

QUERY = "lantern"


def _fill(store: Backend) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for space, n in (("default", 3), ("user:alice", 4), ("user:bob", 2)):
        items = [
            {"content": f"{QUERY} note {i}", "tags": ["shared", f"only-{n}"], "session": "s1", "namespace": space}
            for i in range(n)
        ]
        out[space] = [m.id for m in store.add_many(items)]
    return out


@pytest.mark.parametrize("mode", MODES)
def test_search_sees_one_namespace(store: Backend, mode: str) -> None:
    """The same query in each namespace finds that namespace's memories only; the default is "default"."""
    by_space = _fill(store)
    for space, wanted in by_space.items():
        assert sorted(ids(store.search(QUERY, limit=50, mode=mode, namespace=space))) == sorted(wanted)
    assert sorted(ids(store.search(QUERY, limit=50, mode=mode))) == sorted(by_space["default"])
    assert store.search(QUERY, mode=mode, namespace="nobody") == []


def test_the_same_content_in_two_namespaces_is_two_memories(store: Backend) -> None:
    """Dedup is per namespace: the same text is stored once in each, and a repeat in one is its duplicate."""
    a = store.add("Our wifi password is on the fridge", namespace="home")
    b = store.add("Our wifi password is on the fridge", namespace="office")
    assert a.id != b.id and not a.duplicate and not b.duplicate
    again = store.add("  Our wifi   password is on the fridge", namespace="home")
    assert again.duplicate and again.id == a.id and again.namespace == "home"
    assert (
        store.add_many([{"content": "Our wifi password is on the fridge", "namespace": "cafe"}])[0].duplicate is False
    )
    assert store.namespaces() == {"cafe": 1, "home": 1, "office": 1}


def test_similar_stays_in_the_namespace(store: Backend) -> None:
    """add's `similar` names near duplicates of the same namespace only."""
    store.add("the spare key is under the blue flower pot", namespace="home")
    near = "the spare key is under the blue flower pot now"
    assert store.add(near, namespace="office").similar == ()
    assert len(store.add(near, namespace="home").similar) == 1


def test_get_and_delete_see_one_namespace(store: Backend) -> None:
    """Another namespace's memory is not there: get gives None, delete False and leaves it."""
    by_space = _fill(store)
    alice = by_space["user:alice"][0]
    assert store.get(alice) is None and store.get(alice, namespace="user:bob") is None
    assert store.get(alice, namespace="user:alice") is not None
    assert store.delete(alice) is False and store.delete(alice, namespace="user:bob") is False
    assert store.get(alice, namespace="user:alice") is not None
    assert store.delete(alice, namespace="user:alice") is True
    assert store.get(alice, namespace="user:alice") is None


def test_listings_and_counts_see_one_namespace(store: Backend) -> None:
    """list_recent, list_page, tag_counts and sessions count one namespace; namespaces() counts each."""
    by_space = _fill(store)
    for space, wanted in by_space.items():
        assert sorted(m.id for m in store.list_recent(limit=50, namespace=space)) == sorted(wanted)
        assert sorted(m.id for m in store.list_page(limit=50, namespace=space).memories) == sorted(wanted)
        n = len(wanted)
        assert store.tag_counts(namespace=space) == {"shared": n, f"only-{n}": n}
        assert store.sessions(namespace=space) == {"s1": n}
    assert store.tag_counts() == {"only-3": 3, "shared": 3}
    assert store.namespaces() == {"default": 3, "user:alice": 4, "user:bob": 2}
    assert store.stats()["count"] == 9 and store.stats()["namespaces"] == 3


def test_bulk_forget_sees_one_namespace(store: Backend) -> None:
    """select and delete_many take the memories of the namespace named only."""
    by_space = _fill(store)
    chosen = store.select(MemoryFilter(namespace="user:alice", tags=["shared"]))
    assert (chosen.count, sorted(chosen.ids)) == (4, sorted(by_space["user:alice"]))
    everything = [i for wanted in by_space.values() for i in wanted]
    assert store.delete_many(everything, namespace="user:bob") == 2
    assert store.namespaces() == {"default": 3, "user:alice": 4}
    assert store.delete_many(everything) == 3
    assert store.namespaces() == {"user:alice": 4}


def test_replaces_never_crosses_a_namespace(store: Backend) -> None:
    """A memory of another namespace cannot be replaced: it is refused as if it did not exist."""
    old = store.add("the meeting is on Monday", namespace="team")
    with pytest.raises(InvalidInputError) as exc:
        store.add("the meeting is on Tuesday", replaces=old.id)
    assert str(exc.value) == f"replaces: no memory with id {old.id} in namespace 'default'"
    assert store.get(old.id, namespace="team") == old
    assert store.stats()["count"] == 1


def test_export_is_a_backup_of_every_namespace(backend: BackendUnderTest) -> None:
    """export() yields every namespace (the namespace in each record), export(namespace=...) one; importing the
    backup restores each memory into its own namespace."""
    store = backend.store
    by_space = _fill(store)
    exported = list(store.export())
    assert len(exported) == 9
    assert {r.get("namespace", "default") for r in exported} == {"default", "user:alice", "user:bob"}
    assert sorted(r["id"] for r in store.export(namespace="user:bob")) == sorted(by_space["user:bob"])
    target, _ = backend.another()
    assert target.import_(exported) == 9
    assert target.namespaces() == store.namespaces()
    for space, wanted in by_space.items():
        assert sorted(ids(target.search(QUERY, limit=50, namespace=space))) == sorted(wanted)


def test_a_namespace_survives_reopening(backend: BackendUnderTest) -> None:
    by_space = _fill(backend.store)
    store = backend.reopen()
    assert store.namespaces() == {"default": 3, "user:alice": 4, "user:bob": 2}
    assert sorted(ids(store.search(QUERY, limit=50, namespace="user:alice"))) == sorted(by_space["user:alice"])
