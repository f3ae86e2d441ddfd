"""History: `replaces` keeps the older memory (replaced_by) out of search and the listings; a forget leaves a
tombstone; `as_of` answers as the collection stood then; compaction purges forgotten memories for good.

Storage times are set through import_ (created_at is kept), so "then" can be placed between them; forgets happen
now, so a time before a forget is any imported time."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from memserver.errors import InvalidInputError
from tests.contract.harness import MODES, Backend, BackendUnderTest, ids

A, B, C, X = (f"{n:032x}" for n in (0xA, 0xB, 0xC, 0xF))
CHAIN = [
    {"id": A, "content": "Maya lives in Porto", "created_at": "2024-01-10T09:00:00Z", "speaker": "Maya"},
    {"id": B, "content": "Maya lives in Lisbon", "created_at": "2024-06-01T09:00:00Z", "replaces": A},
    {"id": C, "content": "Maya lives in Madrid", "created_at": "2025-02-01T09:00:00Z", "replaces": B},
]
OTHER = {"id": X, "content": "Ravi lives in Pune", "created_at": "2023-06-01T09:00:00Z"}
QUERY = "where does Maya live lives"


def _contents(hits: list[Any]) -> set[str]:
    return {h.memory.content for h in hits}


@pytest.fixture
def chain(store: Backend) -> Backend:
    assert store.import_([OTHER, *CHAIN]) == 4
    return store


def test_add_replaces_keeps_the_old_memory_as_history(store: Backend) -> None:
    """The new memory names the old in `replaces`; the old, still returned by get, names the new in replaced_by."""
    old = store.add("the standup is at 9:30", tags=["team"], session="s1")
    new = store.add("the standup is at 10:00", tags=["team"], replaces=old.id)
    assert new.replaces == old.id and new.to_dict()["replaces"] == old.id and new.replaced_by == ""
    got = store.get(old.id)
    assert got is not None and got.replaced_by == new.id and got.to_dict()["replaced_by"] == new.id
    assert (got.content, got.session) == ("the standup is at 9:30", "s1")
    assert store.get(new.id) == new
    for mode in MODES:
        assert ids(store.search("standup", limit=10, mode=mode)) == [new.id]
    assert [m.id for m in store.list_recent()] == [new.id]
    assert [m.id for m in store.list_page().memories] == [new.id]
    assert store.tag_counts() == {"team": 1}
    assert store.stats()["count"] == 1 and store.stats()["replaced"] == 1
    assert [r["id"] for r in store.export()] == [old.id, new.id]


def test_a_chain_links_both_ways(chain: Backend) -> None:
    a, b, c = (chain.get(i) for i in (A, B, C))
    assert a is not None and b is not None and c is not None
    assert (a.replaces, a.replaced_by) == ("", B)
    assert (b.replaces, b.replaced_by) == (A, C)
    assert (c.replaces, c.replaced_by) == (B, "")
    assert _contents(chain.search(QUERY, limit=10)) == {"Maya lives in Madrid", "Ravi lives in Pune"}


def test_replacing_history_or_twice_is_refused(chain: Backend) -> None:
    """Only a current memory can be replaced: the message names the newer version to replace instead."""
    with pytest.raises(InvalidInputError) as exc:
        chain.add("Maya lives in Faro", replaces=A)
    assert str(exc.value) == f"replaces: memory {A} is already replaced by {B}; replace that one instead"
    with pytest.raises(InvalidInputError) as exc:
        chain.add_many([{"content": "in Faro", "replaces": C}, {"content": "in Braga", "replaces": C}])
    assert str(exc.value) == f"items[1].replaces: memory {C} is replaced by an earlier item of this call too"
    assert chain.stats()["count"] == 2 and chain.get(C).replaced_by == ""  # type: ignore[union-attr]


def test_a_duplicate_replaces_nothing(store: Backend) -> None:
    """An add that duplicates a current memory stores nothing, so the memory it names stays current."""
    old = store.add("the gate code is 1234")
    same = store.add("the gate code is 1234", replaces=old.id)
    assert same.duplicate and same.id == old.id
    assert store.get(old.id).replaced_by == ""  # type: ignore[union-attr]


def test_the_same_content_with_other_fields_is_a_new_version(store: Backend) -> None:
    """Replacing a memory with its own content but other tags (or speaker, time, ...) stores a new version."""
    old = store.add("the gate code is 1234", tags=["home"], speaker="Sam")
    new = store.add("the gate code is 1234", tags=["home", "codes"], speaker="Sam", replaces=old.id)
    assert not new.duplicate and new.id != old.id and new.tags == ("home", "codes")
    assert store.get(old.id).replaced_by == new.id  # type: ignore[union-attr]
    later = store.add("the gate code is 1234", tags=["home", "codes"], speaker="Sam", occurred_at="2025-01-01",
                      replaces=new.id)  # fmt: skip
    assert not later.duplicate and later.occurred_at.startswith("2025-01-01")
    assert [m.id for m in store.list_recent(limit=5)] == [later.id]


def test_forgetting_a_link_of_a_chain_forgets_just_that_one(chain: Backend) -> None:
    """The neighbours keep naming the forgotten memory; the older one stays history."""
    assert chain.delete(B) is True
    assert chain.get(B) is None
    assert chain.get(A).replaced_by == B  # type: ignore[union-attr]
    assert chain.get(C).replaces == B  # type: ignore[union-attr]
    assert _contents(chain.search(QUERY, limit=10)) == {"Maya lives in Madrid", "Ravi lives in Pune"}
    assert chain.delete(A) is True and chain.get(A) is None  # history can be forgotten too


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("as_of", "expected"),
    [
        ("2023-01-01", set()),  # before anything was stored
        ("2023-06-01T09:00:00Z", {"Ravi lives in Pune"}),  # the instant it was stored: included
        ("2024-01-10T08:59:59.999999Z", {"Ravi lives in Pune"}),
        ("2024-03-01", {"Ravi lives in Pune", "Maya lives in Porto"}),
        ("2024-06-01T09:00:00Z", {"Ravi lives in Pune", "Maya lives in Lisbon"}),  # replaced at that instant
        ("2024-06-01", {"Ravi lives in Pune", "Maya lives in Lisbon"}),  # a date: the end of that day
        ("2024-05-31", {"Ravi lives in Pune", "Maya lives in Porto"}),
        ("2025-12-31T23:00:00-05:00", {"Ravi lives in Pune", "Maya lives in Madrid"}),
    ],
)
def test_as_of_answers_as_the_memories_stood_then(chain: Backend, mode: str, as_of: str, expected: set[str]) -> None:
    """Stored by then, and not yet replaced by a memory stored by then."""
    assert _contents(chain.search(QUERY, limit=10, mode=mode, as_of=as_of)) == expected
    assert {m.content for m in chain.list_page(limit=10, as_of=as_of).memories} == expected


def test_as_of_before_and_after_a_forget(chain: Backend) -> None:
    """A forgotten memory is found as of a time before the forget (its tombstone), not after."""
    assert chain.delete(X) and chain.delete(C)
    after = (datetime.now(timezone.utc) + timedelta(seconds=1)).isoformat()
    for mode in MODES:
        assert _contents(chain.search(QUERY, limit=10, mode=mode)) == set()  # C's chain: all history or gone
        assert _contents(chain.search(QUERY, limit=10, mode=mode, as_of="2025-06-01")) == {
            "Ravi lives in Pune",
            "Maya lives in Madrid",
        }
        assert _contents(chain.search(QUERY, limit=10, mode=mode, as_of=after)) == set()
    hit = chain.search(QUERY, limit=1, as_of="2025-06-01", speaker="Maya")
    assert hit == []  # (speaker filters apply as of then too: Madrid has no speaker)
    old = chain.search(QUERY, limit=5, as_of="2024-03-01", speaker="Maya")
    assert [h.memory.id for h in old] == [A] and old[0].memory.replaced_by == B


def test_as_of_filters_apply_before_ranking(chain: Backend) -> None:
    """as_of combines with every other filter (tags, time bounds on occurred_at, session...)."""
    chain.import_(
        [{"content": f"lives in town {i}", "created_at": "2024-02-01T00:00:00Z", "tags": ["noise"]} for i in range(30)]
    )
    hits = chain.search(QUERY, limit=3, as_of="2024-03-01", since="2024-01-01", tags=None)
    assert "Maya lives in Porto" in _contents(hits)
    assert chain.search(QUERY, limit=3, as_of="2024-03-01", tags=["nothing"]) == []


def test_compaction_purges_forgotten_history_and_keeps_replaced(backend: BackendUnderTest) -> None:
    """After compact(), a forgotten memory is gone also as of before its forget; replaced ones stay history,
    with their links, through a reopen."""
    store = backend.store
    store.import_([OTHER, *CHAIN])
    assert store.delete(X)
    assert _contents(store.search(QUERY, limit=10, as_of="2024-03-01")) == {"Ravi lives in Pune", "Maya lives in Porto"}
    result = store.compact()
    assert result["count"] == 1
    assert _contents(store.search(QUERY, limit=10, as_of="2024-03-01")) == {"Maya lives in Porto"}
    store = backend.reopen()
    assert store.get(A).replaced_by == B and store.get(B).replaced_by == C  # type: ignore[union-attr]
    assert _contents(store.search(QUERY, limit=10)) == {"Maya lives in Madrid"}
    assert _contents(store.search(QUERY, limit=10, as_of="2024-07-01")) == {"Maya lives in Lisbon"}


def test_history_whose_newer_version_is_forgotten_stays_history(backend: BackendUnderTest) -> None:
    """Forgetting the newest of a chain does not bring the older back: not now, not after compaction, not in a
    restored backup."""
    store = backend.store
    store.import_(CHAIN)
    store.delete(C)
    assert _contents(store.search(QUERY, limit=10)) == set()
    store.compact()
    assert _contents(store.search(QUERY, limit=10)) == set()
    assert store.get(B).replaced_by == C  # type: ignore[union-attr]
    exported = list(store.export(include_vectors=True))
    target, _ = backend.another()
    assert target.import_(exported) == 2
    assert _contents(target.search(QUERY, limit=10)) == set()
    assert target.get(B).replaced_by == C and target.get(A).replaced_by == B  # type: ignore[union-attr]


def test_an_import_resolves_replaces_within_itself(store: Backend) -> None:
    """`replaces` may name a record further on in the same import: it is written after it."""
    assert store.import_(list(reversed(CHAIN))) == 3
    assert store.get(A).replaced_by == B and store.get(B).replaced_by == C  # type: ignore[union-attr]
    assert _contents(store.search(QUERY, limit=10)) == {"Maya lives in Madrid"}


def test_an_import_replacing_nothing_is_refused_naming_the_record(store: Backend) -> None:
    """A record replacing an id that neither the store nor the import holds: the records before it stay."""
    with pytest.raises(InvalidInputError) as exc:
        store.import_([OTHER, {"content": "orphan update", "replaces": C}, CHAIN[0]])
    assert str(exc.value) == f"records[1].replaces: no memory with id {C} in namespace 'default'"
    assert sorted(r["id"] for r in store.export()) == [A, X]


def test_a_round_trip_keeps_the_chains(backend: BackendUnderTest) -> None:
    store = backend.store
    store.import_([OTHER, *CHAIN])
    exported = list(store.export(include_vectors=True))
    assert [r.get("replaced_by") for r in exported] == [None, B, C, None]
    target, _ = backend.another()
    assert target.import_(exported) == 4
    assert list(target.export()) == list(store.export())


class _FrozenClock(datetime):
    """datetime whose now() is one fixed instant, so the test knows the exact time of a forget."""

    instant = datetime(2025, 9, 1, 12, 0, 0, 123456, tzinfo=timezone.utc)

    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return cls.instant if tz is None else cls.instant.astimezone(tz)


def test_as_of_the_exact_instant_of_a_forget(chain: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """Forgotten at T: found as of a microsecond before T, gone as of T itself (as a replace takes effect at its
    instant)."""
    import datetime as datetime_module

    with monkeypatch.context() as frozen:
        frozen.setattr(datetime_module, "datetime", _FrozenClock)  # the clock the engines read through inputs.now
        assert chain.delete(X)
    for mode in MODES:
        before = chain.search(QUERY, limit=10, mode=mode, as_of="2025-09-01T12:00:00.123455Z")
        assert "Ravi lives in Pune" in _contents(before)
        at = chain.search(QUERY, limit=10, mode=mode, as_of="2025-09-01T12:00:00.123456Z")
        assert _contents(at) == {"Maya lives in Madrid"}
    listed = chain.list_page(limit=10, as_of="2025-09-01T12:00:00.123456Z").memories
    assert {m.content for m in listed} == {"Maya lives in Madrid"}
