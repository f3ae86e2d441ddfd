"""tag_counts, stats, compact, close, and what survives closing and reopening the backend."""

from __future__ import annotations

from typing import Any

import pytest

from memserver.errors import StoreError
from tests.contract.harness import MODES, Backend, BackendUnderTest, distinct_words

EXTRA = "Zoë 日本語 שלום"
POOL = distinct_words(90, avoid=[EXTRA], prefix="p")


def _fill(store: Backend, n: int = 40) -> list[dict[str, Any]]:
    """n memories with tags, sources, unicode and times out of insertion order; every third deleted. Returns the
    live ones as exported. Memory i holds the first 2 + 2i words of POOL (plus three words of EXTRA when i % 5 == 0),
    so every query below ranks them without ties."""
    store.import_(
        [
            {
                "content": " ".join(POOL[: 2 + 2 * i]) + (f" {EXTRA}" if i % 5 == 0 else ""),
                "tags": [f"t{i % 3}"] + (["extra", "café"] if i % 4 == 0 else []),
                "source": "notes" if i % 2 else "",
                "created_at": f"2024-01-{1 + i % 9:02d}T{i % 24:02d}:00:00Z",
            }
            for i in range(n)
        ]
    )
    for r in list(store.export())[::3]:
        store.delete(r["id"])
    return list(store.export())


def _state(store: Backend) -> dict[str, Any]:
    """Everything a client can read back."""

    def hits(query: str, **kw: Any) -> list[tuple[str, float]]:
        return [(h.memory.id, round(h.score, 5)) for h in store.search(query, limit=10, **kw)]

    exported = list(store.export(include_vectors=True))
    return {
        "count": store.stats()["count"],
        "export": [{**r, "vector": [round(x, 6) for x in r["vector"]]} for r in exported],
        "get": [store.get(r["id"]).to_dict() for r in exported[::5]],  # type: ignore[union-attr]
        "recent": [m.to_dict() for m in store.list_recent(limit=15)],
        "recent_tagged": [m.to_dict() for m in store.list_recent(limit=15, tags=["t1", "extra"])],
        "tag_counts": store.tag_counts(),
        **{mode: hits(POOL[0], mode=mode) for mode in MODES},
        **{f"{mode} zoë": hits(f"{POOL[3]} zoë", mode=mode) for mode in MODES},
        "filtered": hits(POOL[1], tags=["t0", "café"], source="", since="2024-01-03", until="2024-01-05"),
    }


# --- tag_counts and stats ------------------------------------------------------------------------------------------


def test_tag_counts_are_most_used_first_then_by_name(store: Backend) -> None:
    """tag_counts maps each tag to its live memories, most used first, ties in name order."""
    store.add_many(
        [
            {"content": "one", "tags": ["b", "a"]},
            {"content": "two", "tags": ["c", "b"]},
            {"content": "three", "tags": ["z", "a", "b"]},
            {"content": "four", "tags": ["y"]},
            {"content": "five"},
        ]
    )
    counts = store.tag_counts()
    assert list(counts.items()) == [("b", 3), ("a", 2), ("c", 1), ("y", 1), ("z", 1)]


def test_tag_counts_follow_deletes(store: Backend) -> None:
    """A delete lowers its tags' counts, and a tag left on no live memory disappears."""
    a, b = store.add_many([{"content": "one", "tags": ["x", "only"]}, {"content": "two", "tags": ["x"]}])
    store.delete(a.id)
    assert store.tag_counts() == {"x": 1}
    store.delete(b.id)
    assert store.tag_counts() == {}


def test_stats_count_is_the_number_of_live_memories(store: Backend) -> None:
    """stats()["count"] counts live memories: duplicates are not counted, deletes are subtracted."""
    ms = store.add_many(["one", "two", "three"])
    store.add("one")
    store.import_([{"content": "four"}, {"content": "two"}])
    assert store.stats()["count"] == 4
    store.delete(ms[0].id)
    assert store.stats()["count"] == 3


# --- compact -------------------------------------------------------------------------------------------------------


def test_compact_keeps_every_live_memory_and_what_reads_return(store: Backend) -> None:
    """After compact, every read returns what it returned before; compact reports the live count."""
    _fill(store)
    before = _state(store)
    assert store.compact()["count"] == before["count"] == 26
    assert _state(store) == before


def test_compact_then_write_and_reopen(backend: BackendUnderTest) -> None:
    """A compacted backend takes new writes, finds duplicates, and reads the same after reopening."""
    live = _fill(backend.store)
    backend.store.compact()
    assert backend.store.add(live[0]["content"]).id == live[0]["id"]
    new = backend.store.add("written after compaction", tags=["t0"])
    assert backend.store.delete(live[1]["id"])
    state = _state(backend.store)
    assert _state(backend.reopen()) == state
    assert backend.store.get(new.id) is not None and backend.store.get(live[1]["id"]) is None


def test_compact_of_an_empty_backend(store: Backend) -> None:
    """Compacting an empty backend, or one whose memories were all deleted, leaves it empty and usable."""
    assert store.compact()["count"] == 0
    m = store.add("soon deleted")
    store.delete(m.id)
    assert store.compact()["count"] == 0
    assert list(store.export()) == [] and store.search("soon deleted") == []
    assert not store.add("soon deleted").duplicate


def test_compact_is_seen_by_another_backend_on_the_same_storage(backend: BackendUnderTest) -> None:
    """Another backend open on the same storage reads the same before and after a compaction by the first."""
    other = backend.twin()
    _fill(backend.store)
    before = _state(other)
    backend.store.compact()
    assert _state(other) == before
    m = other.add("written by the other after the compaction")
    assert backend.store.get(m.id) is not None


# --- persistence, close ----------------------------------------------------------------------------------------------


def test_everything_survives_reopening(backend: BackendUnderTest) -> None:
    """Closing and reopening the backend changes no read: memories, deletes, tags, times, rankings."""
    _fill(backend.store)
    state = _state(backend.store)
    assert _state(backend.reopen()) == state
    assert _state(backend.reopen()) == state


def test_many_writes_survive_reopening(backend: BackendUnderTest) -> None:
    """Hundreds of adds and deletes in small and large batches read back the same after reopening."""
    store = backend.store
    for i in range(0, 600, 50):
        store.add_many([f"batch item {j} of {i}" for j in range(i, i + 50)])
        store.add(f"single add {i}", tags=[f"k{i % 7}"])
    for r in list(store.export())[::4]:
        store.delete(r["id"])
    state = _state(store)
    assert state["count"] == 612 - 153
    assert _state(backend.reopen()) == state


def test_close_twice_is_safe(store: Backend) -> None:
    """close() may be called again; it does nothing the second time."""
    store.add("something")
    store.close()
    store.close()


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.add("x"),
        lambda s: s.add_many(["x"]),
        lambda s: s.search("x"),
        lambda s: s.get("0" * 32),
        lambda s: s.list_recent(),
        lambda s: s.delete("0" * 32),
        lambda s: s.tag_counts(),
        lambda s: s.stats(),
        lambda s: list(s.export()),
        lambda s: s.import_([{"content": "x"}]),
        lambda s: s.compact(),
    ],
    ids=[
        "add",
        "add_many",
        "search",
        "get",
        "list_recent",
        "delete",
        "tag_counts",
        "stats",
        "export",
        "import_",
        "compact",
    ],
)
def test_a_closed_backend_refuses_every_call(store: Backend, call: Any) -> None:
    """After close(), every method raises StoreError (and writes nothing)."""
    store.add("before closing")
    store.close()
    with pytest.raises(StoreError, match="closed"):
        call(store)


def test_a_backend_is_a_context_manager(backend: BackendUnderTest) -> None:
    """`with backend as b` yields the backend itself and closes it on the way out."""
    store = backend.store
    with store as entered:
        assert entered is store
        m = entered.add("inside the with block")
    with pytest.raises(StoreError):
        store.get(m.id)
    assert backend.reopen().get(m.id) is not None
