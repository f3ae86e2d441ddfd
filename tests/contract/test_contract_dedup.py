"""Exact duplicates (the same content, whitespace aside) are stored once; near-duplicates are stored and named."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tests.contract.harness import Backend, BackendUnderTest, cosine, distinct_words, records


def test_the_same_content_returns_the_existing_memory(store: Backend) -> None:
    """Adding a stored content again returns the stored memory with duplicate=True and stores nothing."""
    a = store.add("Buy milk and eggs", tags=["shop"])
    d = store.add("Buy milk and eggs", tags=["shop"])
    assert (d.to_dict(), d.duplicate, d.similar) == (a.to_dict(), True, ())
    assert store.stats()["count"] == 1


def test_whitespace_differences_are_duplicates(store: Backend) -> None:
    """Content equal after trimming and collapsing runs of whitespace is a duplicate."""
    a = store.add("Buy milk and eggs")
    for text in ("  Buy   milk\nand\teggs ", "Buy milk and eggs\n", "Buy\u00a0milk and eggs"):
        d = store.add(text)
        assert (d.id, d.duplicate) == (a.id, True), repr(text)
    assert store.stats()["count"] == 1


def test_a_duplicate_keeps_the_first_tags_and_source(store: Backend) -> None:
    """A duplicate add changes nothing: the stored memory keeps its own tags, source and created_at."""
    a = store.add("Alice prefers tea", tags=["people"], source="chat")
    d = store.add("Alice prefers tea", tags=["drinks"], source="email")
    assert d.to_dict() == a.to_dict() and d.duplicate
    assert store.get(a.id).to_dict() == a.to_dict()  # type: ignore[union-attr]
    assert store.tag_counts() == {"people": 1}


def test_different_case_is_not_a_duplicate(store: Backend) -> None:
    """Content that differs only in letter case is a new memory (reported as similar by the case-blind embedder)."""
    a = store.add("Buy milk")
    b = store.add("buy milk")
    assert not b.duplicate and b.id != a.id and b.content == "buy milk"
    assert b.similar == ((a.id, 1.0),)
    assert store.stats()["count"] == 2


def test_duplicates_within_one_add_many_batch(store: Backend) -> None:
    """Within one batch, a repeat returns the first item's memory marked duplicate; only one is stored."""
    ms = store.add_many(["new one", "new  one", {"content": "other one"}, {"content": " new one "}])
    assert [m.duplicate for m in ms] == [False, True, False, True]
    assert ms[1].to_dict() == ms[0].to_dict() == ms[3].to_dict()
    assert store.stats()["count"] == 2


def test_add_many_finds_duplicates_of_stored_memories(store: Backend) -> None:
    """add_many returns an already stored memory (duplicate=True) for an item with its content."""
    a = store.add("Buy milk and eggs", tags=["shop"])
    ms = store.add_many(["fresh item", {"content": "Buy  milk and eggs", "tags": ["other"]}])
    assert [m.duplicate for m in ms] == [False, True]
    assert ms[1].to_dict() == a.to_dict()
    assert store.stats()["count"] == 2


def test_a_duplicate_is_found_after_reopening(backend: BackendUnderTest) -> None:
    """Duplicates are detected against memories written before the backend was reopened."""
    a = backend.store.add("Buy milk and eggs")
    b = backend.store.add_many(["stored in a batch"])[0]
    store = backend.reopen()
    assert (store.add(" Buy milk and eggs").id, store.add("stored in a  batch").id) == (a.id, b.id)
    assert store.stats()["count"] == 2


def test_deleted_content_can_be_added_again(store: Backend) -> None:
    """Once a memory is deleted its content is no longer a duplicate: adding it stores a new memory."""
    a = store.add("temporary fact")
    assert store.delete(a.id)
    b = store.add("temporary fact")
    assert not b.duplicate and b.id != a.id
    assert records(store.list_recent()) == [b.to_dict()]


# --- near-duplicates ---------------------------------------------------------------------------------------------

BASE = distinct_words(20, prefix="n")


def _minus(k: int, base: list[str] = BASE) -> str:
    """The base text without its last k words: cosine sqrt((n - k) / n) to the whole base."""
    return " ".join(base[: len(base) - k])


def test_add_reports_a_near_duplicate_as_similar(store: Backend) -> None:
    """A new memory close to a live one (cosine >= 0.82) is stored, and names it with its rounded cosine."""
    base = BASE[:10]
    old = store.add(_minus(2, base))  # cosine to the whole base: sqrt(0.8) = 0.894
    new = store.add(_minus(0, base))
    assert not new.duplicate and new.id != old.id and store.get(new.id) is not None
    assert [mid for mid, _ in new.similar] == [old.id]
    assert new.similar[0][1] == pytest.approx(round(cosine(_minus(2, base), _minus(0, base)), 4), abs=1e-4)


def test_a_distant_memory_is_not_similar(store: Backend) -> None:
    """A memory at cosine 0.77 to the new one is not reported, nor is unrelated text."""
    base = BASE[:10]
    store.add(_minus(4, base))  # sqrt(0.6) = 0.775
    store.add("something unrelated entirely")
    assert store.add(_minus(0, base)).similar == ()


def test_similar_names_at_most_three_best_first(store: Backend) -> None:
    """Of five close memories, add names the three closest, best first."""
    close = {k: store.add(_minus(k)) for k in (5, 1, 4, 2, 3)}  # cosines 0.866 .. 0.975
    new = store.add(_minus(0))
    assert [mid for mid, _ in new.similar] == [close[1].id, close[2].id, close[3].id]
    assert [score for _, score in new.similar] == pytest.approx(
        [round(cosine(_minus(k), _minus(0)), 4) for k in (1, 2, 3)], abs=1e-4
    )


def test_similar_ignores_deleted_memories(store: Backend) -> None:
    """A deleted memory is never named as similar."""
    gone = store.add(_minus(1))
    store.delete(gone.id)
    assert store.add(_minus(0)).similar == ()


def test_add_many_and_import_report_no_similar(store: Backend) -> None:
    """Bulk writes skip the near-duplicate check: every memory they return has similar == ()."""
    store.add(_minus(1))
    ms = store.add_many([_minus(0), _minus(2)])
    assert [(m.duplicate, m.similar) for m in ms] == [(False, ()), (False, ())]
    assert store.import_([{"content": _minus(3)}]) == 1


def test_a_duplicate_reports_no_similar(store: Backend) -> None:
    """An exact duplicate returns the stored memory, with similar == () even when close memories exist."""
    store.add(_minus(1))
    a = store.add(_minus(0))
    assert a.similar != ()
    again = store.add(_minus(0))
    assert (again.id, again.duplicate, again.similar) == (a.id, True, ())


def test_concurrent_adds_of_one_content_store_it_once(backend: BackendUnderTest) -> None:
    """Threads adding one content at once (spelt with other whitespace), through two backends on one storage, get
    one memory between them: one add stores it, the others return it as a duplicate."""
    stores = [backend.store, backend.twin()]
    spellings = ["raced content", "  raced   content ", "raced\ncontent", "raced\tcontent"]
    start = threading.Barrier(8)
    results: list[Any] = [None] * 8

    def add(i: int) -> None:
        start.wait()
        results[i] = stores[i % 2].add(spellings[i % 4])

    threads = [threading.Thread(target=add, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len({m.id for m in results}) == 1
    assert sorted(m.duplicate for m in results) == [False] + [True] * 7
    assert [m.id for m in backend.store.list_recent()] == [results[0].id]
