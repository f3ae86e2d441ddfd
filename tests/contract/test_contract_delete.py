"""delete: a deleted memory is gone from every read, for good; deleting twice or an unknown id is not an error."""

from __future__ import annotations

import pytest

from tests.contract.harness import MODES, Backend, BackendUnderTest, ids, records


@pytest.fixture
def three(store: Backend) -> list:
    return store.add_many(
        [
            {"content": "keep the lantern lit", "tags": ["home", "light"], "source": "chat"},
            {"content": "the lantern needs oil", "tags": ["home", "oil"], "source": "chat"},
            {"content": "buy a second lantern", "tags": ["shop"]},
        ]
    )


def test_delete_returns_true_and_get_returns_none(store: Backend, three: list) -> None:
    """Deleting a live memory returns True; get of its id then returns None."""
    assert store.delete(three[1].id) is True
    assert store.get(three[1].id) is None


def test_delete_again_returns_false(store: Backend, three: list) -> None:
    """A second delete of the same id, or a delete of an id never stored, returns False."""
    assert store.delete(three[1].id) is True
    assert store.delete(three[1].id) is False
    assert store.delete("0123456789abcdef0123456789abcdef") is False


def test_delete_accepts_an_id_in_upper_case_or_with_spaces(store: Backend, three: list) -> None:
    """delete normalises the id as get does."""
    assert store.delete(f" {three[0].id.upper()} ") is True
    assert store.get(three[0].id) is None


@pytest.mark.parametrize("mode", MODES)
def test_a_deleted_memory_is_not_found_by_search(store: Backend, three: list, mode: str) -> None:
    """No search, filtered or not, returns a deleted memory, even one matching the query exactly."""
    store.delete(three[1].id)
    for kwargs in ({}, {"tags": ["oil"]}, {"tags": ["home"]}, {"source": "chat"}, {"since": "2000-01-01"}):
        hits = store.search("the lantern needs oil", limit=10, mode=mode, **kwargs)
        assert three[1].id not in ids(hits), kwargs
    assert ids(store.search("lantern oil", limit=10, mode=mode, tags=["oil"])) == []


def test_a_deleted_memory_leaves_list_recent_tag_counts_export_and_count(store: Backend, three: list) -> None:
    """After a delete, list_recent, tag_counts, export and stats()["count"] describe only the others."""
    store.delete(three[1].id)
    kept = [three[0], three[2]]
    assert records(store.list_recent()) == records(kept[::-1])
    assert records(store.list_recent(tags=["oil", "home"])) == [three[0].to_dict()]
    assert store.tag_counts() == {"home": 1, "light": 1, "shop": 1}
    assert list(store.export()) == records(kept)
    assert store.stats()["count"] == 2


def test_a_delete_leaves_the_other_memories_as_they_were(store: Backend, three: list) -> None:
    """Only the deleted memory changes: the others read back exactly as before."""
    store.delete(three[0].id)
    assert [store.get(m.id).to_dict() for m in three[1:]] == records(three[1:])  # type: ignore[union-attr]


def test_a_delete_lasts_after_reopening(backend: BackendUnderTest, three: list) -> None:
    """A deleted memory stays deleted when the backend is reopened."""
    backend.store.delete(three[2].id)
    store = backend.reopen()
    assert store.get(three[2].id) is None
    assert set(ids(store.search("buy a second lantern", limit=10))) == {three[0].id, three[1].id}
    assert [m["id"] for m in store.export()] == [three[0].id, three[1].id]
    assert store.delete(three[2].id) is False


def test_a_delete_through_one_backend_is_seen_by_another(backend: BackendUnderTest, three: list) -> None:
    """A memory deleted through one open backend is gone at once for another open on the same storage."""
    other = backend.twin()
    assert other.get(three[0].id) is not None
    assert backend.store.delete(three[0].id)
    assert other.get(three[0].id) is None
    assert other.delete(three[0].id) is False


def test_deleting_everything_leaves_an_empty_backend(store: Backend, three: list) -> None:
    """With every memory deleted, reads answer as an empty backend does, and new adds work."""
    for m in three:
        assert store.delete(m.id)
    assert store.search("lantern") == [] and store.list_recent() == [] and store.tag_counts() == {}
    assert list(store.export()) == [] and store.stats()["count"] == 0
    again = store.add("keep the lantern lit")
    assert not again.duplicate and ids(store.search("lantern")) == [again.id]
