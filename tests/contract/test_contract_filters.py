"""Filters restrict the candidates before ranking: a filtered search is the true top-k of the memories that match.

Each scenario stores three weak matches (the query word among 4, 6 or 8 others) and many strong memories that
miss the filter in one way each (the query word beside 2 others: a higher cosine and a higher BM25 score). A
backend that ranks first and filters after (an index scan cut at k, then a WHERE) returns fewer than k, or none.
"""

from __future__ import annotations

from itertools import combinations
from typing import Any

import pytest

from tests.contract.harness import MODES, SCORE_TOLERANCE, Backend, cosine, distinct_words, ids

QUERY = "harbour"
WEAK_WORDS = distinct_words(18, avoid=[QUERY], prefix="w")
STRONG_WORDS = distinct_words(40, avoid=[QUERY], prefix="s")
STRONG_PER_KIND = 40

# The three weak matches, best first (cosine 0.45, 0.38, 0.33); the best is also the newest, so the hybrid
# ranking's recency prior agrees with both rankings.
WEAK = [
    {
        "content": " ".join([QUERY, *WEAK_WORDS[0:4]]),
        "tags": ["blue", "misc"],
        "source": "chat",
        "created_at": "2025-03-31T23:59:59.999999Z",
    },
    {
        "content": " ".join([QUERY, *WEAK_WORDS[4:10]]),
        "tags": ["red"],
        "source": "chat",
        "created_at": "2025-03-15T12:00:00Z",
    },
    {
        "content": " ".join([QUERY, *WEAK_WORDS[10:18]]),
        "tags": ["red", "blue"],
        "source": "chat",
        "created_at": "2025-03-01T00:00:00Z",
    },
]
# How a strong memory misses each filter (everything else about it matches every filter).
MISSES: dict[str, list[dict[str, Any]]] = {
    "tags": [{"tags": []}, {"tags": ["green"]}, {"tags": ["Red"]}, {"tags": ["BLUE", "misc"]}],
    "source": [{"source": ""}, {"source": "Chat"}, {"source": "chat2"}],
    "since": [{"created_at": "2025-02-28T23:59:59.999999Z"}, {"created_at": "2024-06-01T08:00:00Z"}],
    "until": [{"created_at": "2025-04-01T00:00:00Z"}, {"created_at": "2026-01-01T00:00:00Z"}],
}
MATCHING = {"tags": ["red"], "source": "chat", "created_at": "2025-03-10T09:00:00Z"}
FILTERS: dict[str, dict[str, Any]] = {
    "tags": {"tags": ["red", "blue"]},
    "source": {"source": "chat"},
    "since": {"since": "2025-03-01T00:00:00Z"},
    "until": {"until": "2025-03-31"},  # a date-only until: the whole day
    "since+until": {"since": "2025-03-01", "until": "2025-03-31"},
    "all": {"tags": ["blue", "red"], "source": "chat", "since": "2025-03-01T00:00:00+00:00", "until": "2025-03-31"},
}
MISSED_BY = {"since+until": ["since", "until"], "all": list(MISSES)}


def _population(scenario: str) -> list[dict[str, Any]]:
    strong = []
    pairs = combinations(STRONG_WORDS, 2)
    for kind in MISSED_BY.get(scenario, [scenario]):
        for i in range(STRONG_PER_KIND):
            a, b = next(pairs)
            miss = MISSES[kind][i % len(MISSES[kind])]
            strong.append({**MATCHING, **miss, "content": f"{QUERY} {a} {b}"})
    # Strong first, weak last (the weak are the newest in insertion order too).
    return strong + WEAK


def _load(store: Backend, scenario: str) -> list[dict[str, Any]]:
    population = _population(scenario)
    assert store.import_(population) == len(population)
    return population


@pytest.mark.parametrize("limit", [2, 10])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("scenario", list(FILTERS))
def test_a_filtered_search_is_the_top_k_of_the_matching_memories(
    store: Backend, scenario: str, mode: str, limit: int
) -> None:
    """Exactly min(limit, matching) hits, all matching, best first, each scored by its cosine to the query."""
    _load(store, scenario)
    hits = store.search(QUERY, limit=limit, mode=mode, **FILTERS[scenario])
    expected = [w["content"] for w in WEAK][:limit]
    assert [h.memory.content for h in hits] == expected
    assert [h.score for h in hits] == pytest.approx([cosine(c, QUERY) for c in expected], abs=SCORE_TOLERANCE)


@pytest.mark.parametrize("mode", MODES)
def test_without_the_filter_the_strong_memories_win(store: Backend, mode: str) -> None:
    """The same population searched without a filter ranks none of the weak matches in the top 10."""
    _load(store, "all")
    hits = store.search(QUERY, limit=10, mode=mode)
    assert len(hits) == 10
    assert not {h.memory.content for h in hits} & {w["content"] for w in WEAK}


@pytest.mark.parametrize("mode", MODES)
def test_tags_match_any_of_the_given_tags(store: Backend, mode: str) -> None:
    """A tag filter selects the memories carrying at least one of the tags (names compared exactly)."""
    ms = store.add_many(
        [
            {"content": f"{QUERY} one", "tags": ["red"]},
            {"content": f"{QUERY} two", "tags": ["blue", "red"]},
            {"content": f"{QUERY} three", "tags": ["blue"]},
            {"content": f"{QUERY} four", "tags": ["Red", "green"]},
            {"content": f"{QUERY} five"},
        ]
    )

    def found(tags: list[str]) -> set[str]:
        return set(ids(store.search(QUERY, limit=10, mode=mode, tags=tags)))

    assert found(["red"]) == {ms[0].id, ms[1].id}
    assert found(["blue"]) == {ms[1].id, ms[2].id}
    assert found(["red", "green"]) == {ms[0].id, ms[1].id, ms[3].id}
    assert found([" blue "]) == {ms[1].id, ms[2].id}  # filter tags are trimmed like stored ones
    assert found(["purple"]) == set()
    assert found([]) == {m.id for m in ms}  # no tags: no tag filter


@pytest.mark.parametrize("mode", MODES)
def test_source_matches_exactly(store: Backend, mode: str) -> None:
    """A source filter selects the memories with exactly that source; "" selects those stored without one."""
    ms = store.add_many(
        [
            {"content": f"{QUERY} one", "source": "chat"},
            {"content": f"{QUERY} two", "source": "Chat"},
            {"content": f"{QUERY} three", "source": "chat/2"},
            {"content": f"{QUERY} four"},
        ]
    )

    def found(source: str) -> set[str]:
        return set(ids(store.search(QUERY, limit=10, mode=mode, source=source)))

    assert found("chat") == {ms[0].id}
    assert found(" chat ") == {ms[0].id}  # trimmed like a stored source
    assert found("Chat") == {ms[1].id}
    assert found("") == {ms[3].id}
    assert found("cha") == set()


@pytest.mark.parametrize("mode", MODES)
def test_a_filter_that_matches_nothing_returns_nothing(store: Backend, mode: str) -> None:
    """When no memory passes the filters the result is [], however good the other matches are."""
    _load(store, "all")
    assert store.search(QUERY, mode=mode, tags=["red"], source="nowhere") == []
    assert store.search(QUERY, mode=mode, since="2030-01-01") == []


@pytest.mark.parametrize("mode", MODES)
def test_filters_combine_with_min_score(store: Backend, mode: str) -> None:
    """min_score applies after the filters: of the matching memories, those scoring below it are dropped."""
    _load(store, "all")
    floor = cosine(WEAK[1]["content"], QUERY) - 1e-4
    hits = store.search(QUERY, limit=10, mode=mode, min_score=floor, **FILTERS["all"])
    assert [h.memory.content for h in hits] == [WEAK[0]["content"], WEAK[1]["content"]]


def test_list_recent_with_tags_is_the_newest_of_the_tagged(store: Backend) -> None:
    """list_recent(tags=...) returns the newest memories carrying any of the tags, however many others are newer."""
    store.import_(
        [{"content": f"tagged {i}", "tags": ["keep"], "created_at": f"2025-01-{i + 1:02d}T00:00:00Z"} for i in range(5)]
        + [{"content": f"other {i}", "tags": ["drop"], "created_at": f"2025-02-01T00:{i:02d}:00Z"} for i in range(50)]
    )
    assert [m.content for m in store.list_recent(limit=3, tags=["keep"])] == ["tagged 4", "tagged 3", "tagged 2"]
    assert [m.content for m in store.list_recent(limit=10, tags=["keep", "nothing"])] == [
        f"tagged {i}" for i in range(4, -1, -1)
    ]
    assert store.list_recent(tags=["nothing"]) == []
