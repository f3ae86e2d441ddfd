"""Ordering: list_recent newest first, search best first (scores are cosines in every mode), limits, min_score,
the keyword ranking's words, and ties broken the same way every time."""

from __future__ import annotations

import pytest

from tests.contract.harness import MODES, SCORE_TOLERANCE, Backend, BackendUnderTest, cosine, distinct_words, ids

QUERY = "lantern"
WORDS = distinct_words(45, avoid=[QUERY])
# Ten memories with the query word among 1..10 others: cosines 0.71 down to 0.30, stored worst first (the best
# is the newest: the hybrid ranking's recency prior agrees with both rankings).
LADDER = [" ".join([QUERY, *WORDS[:n]]) for n in range(10, 0, -1)]


@pytest.fixture
def ladder(store: Backend) -> Backend:
    store.add_many(LADDER)
    return store


# --- list_recent ---------------------------------------------------------------------------------------------------


def test_list_recent_is_newest_first(store: Backend) -> None:
    """list_recent orders by created_at, newest first, whatever the order of insertion."""
    store.import_(
        [
            {"content": "middle", "created_at": "2025-01-02T00:00:00Z"},
            {"content": "newest", "created_at": "2025-01-03T00:00:00Z"},
            {"content": "oldest", "created_at": "2025-01-01T00:00:00Z"},
        ]
    )
    assert [m.content for m in store.list_recent()] == ["newest", "middle", "oldest"]


def test_list_recent_ties_put_the_later_insertion_first(store: Backend) -> None:
    """Memories with the same created_at come newest-inserted first."""
    same = "2025-01-01T00:00:00Z"
    store.import_([{"content": f"tie {i}", "created_at": same} for i in range(4)] + [{"content": "later"}])
    assert [m.content for m in store.list_recent()] == ["later", "tie 3", "tie 2", "tie 1", "tie 0"]


def test_list_recent_after_a_batch_is_the_batch_reversed(store: Backend) -> None:
    """The items of one add_many count as added in order: the last item is the newest."""
    store.add("before")
    store.add_many([f"item {i}" for i in range(5)])
    assert [m.content for m in store.list_recent()] == [f"item {i}" for i in range(4, -1, -1)] + ["before"]


def test_list_recent_returns_whole_memories_up_to_limit(store: Backend) -> None:
    """list_recent returns min(limit, count) memories with every field; the default limit is 10."""
    ms = store.add_many([{"content": f"note {i}", "tags": [f"t{i % 3}"], "source": "s"} for i in range(15)])
    assert [m.to_dict() for m in store.list_recent(limit=3)] == [m.to_dict() for m in ms[::-1][:3]]
    assert len(store.list_recent()) == 10
    assert len(store.list_recent(limit=1000)) == 15


# --- search: best first ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_search_is_best_first(ladder: Backend, mode: str) -> None:
    """When both rankings agree, every mode returns the memories in descending cosine order."""
    hits = ladder.search(QUERY, limit=10, mode=mode)
    assert [h.memory.content for h in hits] == LADDER[::-1]


@pytest.mark.parametrize("mode", MODES)
def test_scores_are_cosine_similarities_in_every_mode(ladder: Backend, mode: str) -> None:
    """Hit.score is the cosine similarity between the query and the memory, whichever ranking put it there."""
    for query in (QUERY, f"{WORDS[0]} {WORDS[5]}", f"{QUERY} {WORDS[9]} unrelated"):
        hits = ladder.search(query, limit=10, mode=mode)
        assert hits
        assert [h.score for h in hits] == pytest.approx(
            [cosine(h.memory.content, query) for h in hits], abs=SCORE_TOLERANCE
        )


@pytest.mark.parametrize("limit", [1, 3, 10, 11, 1000])
@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
def test_limit_bounds_the_hits(ladder: Backend, mode: str, limit: int) -> None:
    """Hybrid and semantic search return min(limit, count) hits, each memory once, the first ones unchanged."""
    hits = ladder.search(QUERY, limit=limit, mode=mode)
    assert [h.memory.content for h in hits] == LADDER[::-1][:limit]


def test_a_hit_is_the_memory_and_its_score(ladder: Backend) -> None:
    """A hit carries the whole memory, and to_dict() is the memory's fields plus "score" and "rank_score"."""
    (hit,) = ladder.search(QUERY, limit=1, mode="semantic")
    stored = ladder.get(hit.memory.id)
    assert stored is not None and hit.memory.to_dict() == stored.to_dict()
    assert hit.to_dict() == {**stored.to_dict(), "score": hit.score, "rank_score": hit.rank_score}
    assert isinstance(hit.score, float) and isinstance(hit.rank_score, float)


# Queries whose word ranking and meaning ranking disagree over LADDER (a rare word of a long memory, two words of
# different memories), so that the order is not the cosine's.
DISAGREEING = (QUERY, f"{WORDS[0]} {WORDS[5]}", f"{QUERY} {WORDS[9]} unrelated", f"{WORDS[8]} {WORDS[1]} {WORDS[1]}")


@pytest.mark.parametrize("mode", MODES)
def test_hits_are_sorted_by_their_rank_score(ladder: Backend, mode: str) -> None:
    """Hit.rank_score is what orders the list, descending, in every mode: the cosine in "semantic", the BM25 score
    (positive) in "keyword", the engine's fused score in "hybrid"."""
    orders_differ = False
    for query in DISAGREEING:
        for min_score in (None, -1.0):
            hits = ladder.search(query, limit=10, mode=mode, min_score=min_score)
            assert hits, query
            ranks = [h.rank_score for h in hits]
            assert ranks == sorted(ranks, reverse=True), (query, ranks)
            orders_differ |= [h.score for h in hits] != sorted((h.score for h in hits), reverse=True)
            if mode == "semantic":
                assert ranks == [h.score for h in hits]
            elif mode == "keyword":
                assert all(r > 0 for r in ranks)
    assert orders_differ or mode == "semantic"  # the test saw an order that is not the cosine's


def test_default_limit_is_five_and_default_mode_hybrid(ladder: Backend) -> None:
    """search(query) is search(query, limit=5, mode="hybrid")."""
    default = [(h.memory.id, h.score) for h in ladder.search(QUERY)]
    assert default == [(h.memory.id, h.score) for h in ladder.search(QUERY, limit=5, mode="hybrid")]
    assert len(default) == 5


@pytest.mark.parametrize("mode", MODES)
def test_min_score_drops_weaker_hits(ladder: Backend, mode: str) -> None:
    """min_score drops every hit whose cosine is below it; a hit exactly at it is kept."""
    hits = ladder.search(QUERY, limit=10, mode=mode)
    floor = hits[3].score
    kept = ladder.search(QUERY, limit=10, mode=mode, min_score=floor)
    assert [(h.memory.id, h.score) for h in kept] == [(h.memory.id, h.score) for h in hits[:4]]
    assert ladder.search(QUERY, mode=mode, min_score=0.99) == []
    assert len(ladder.search(QUERY, limit=10, mode=mode, min_score=-1)) == 10


# Six texts with one bag of words: the same vector under the fake embedder (as case variants are under the
# uncased MiniLM), and the same keyword score.
TIED = ["alpha beta", "beta alpha", "Alpha beta", "alpha Beta", "ALPHA beta", "beta ALPHA"]
FILTERS = {"unfiltered": {}, "filtered": {"since": "2000-01-01", "tags": ["t"]}}


@pytest.mark.parametrize("filtered", list(FILTERS))
@pytest.mark.parametrize("mode", MODES)
def test_ties_come_oldest_first(backend: BackendUnderTest, mode: str, filtered: str) -> None:
    """Memories with equal scores come oldest first, and a limit that cuts through them keeps the oldest. (Past
    search.UNFILTERED_EXACT memories the local store's unfiltered semantic ranking is HNSW's, whose top k may
    pick any of tied memories.)"""
    ms = backend.store.add_many([{"content": text, "tags": ["t"]} for text in TIED])
    for limit in range(1, 7):
        hits = backend.store.search("alpha beta", limit=limit, mode=mode, **FILTERS[filtered])
        assert ids(hits) == [m.id for m in ms[:limit]], limit


@pytest.mark.parametrize("filtered", list(FILTERS))
@pytest.mark.parametrize("mode", MODES)
def test_ties_go_to_the_earlier_stored_however_dated(backend: BackendUnderTest, mode: str, filtered: str) -> None:
    """Equal scores go to the earlier-stored memory (the order of import), whatever created_at the memories carry,
    before and after reopening and compacting: both engines break ties alike (issue 25's parity)."""
    stamps = ["2025-01-05", "2025-01-03", "2025-01-04", "2025-01-01", "2025-01-03", "2025-01-02"]
    backend.store.import_(
        [{"content": t, "tags": ["t"], "created_at": f"{d}T00:00:00Z"} for t, d in zip(TIED, stamps, strict=True)]
    )
    expected = TIED
    for step in ("fresh", "reopened", "compacted"):
        if step == "reopened":
            backend.reopen()
        elif step == "compacted":
            backend.store.compact()
        for limit in (2, 6):
            hits = backend.store.search("alpha beta", limit=limit, mode=mode, **FILTERS[filtered])
            assert [h.memory.content for h in hits] == expected[:limit], (step, limit)


def test_an_empty_backend_finds_nothing(store: Backend) -> None:
    """Every read of an empty backend returns nothing, without error."""
    for mode in MODES:
        assert store.search("anything at all", mode=mode) == []
    assert store.list_recent() == [] and store.tag_counts() == {} and list(store.export()) == []
    assert store.stats()["count"] == 0


# --- the keyword ranking -------------------------------------------------------------------------------------------


def test_keyword_mode_returns_only_memories_sharing_a_word(ladder: Backend) -> None:
    """Keyword mode returns the memories that share a word with the query, and [] when none does."""
    hits = ladder.search(WORDS[9], limit=10, mode="keyword")  # WORDS[9] is in the first memory only
    assert [h.memory.content for h in hits] == [LADDER[0]]
    assert ladder.search("zebra xylophone", mode="keyword") == []
    assert ladder.search("the and of", mode="keyword") == []  # stopwords only


@pytest.mark.parametrize("mode", ["hybrid", "semantic"])
def test_meaning_ranks_everything_when_no_word_matches(ladder: Backend, mode: str) -> None:
    """Hybrid and semantic search return `limit` hits even when no memory shares a word with the query."""
    assert len(ladder.search("zebra xylophone", limit=4, mode=mode)) == 4


def test_hybrid_puts_a_memory_first_in_both_rankings_first(store: Backend) -> None:
    """The memory that is best by meaning and by words leads the hybrid ranking."""
    ms = store.add_many(
        [
            "Invoice INV-2024-0173 from Hetzner was paid on 3 March",
            "The user prefers green tea in the morning",
            "Standup moved to 10:30 because of the new team in Lisbon",
            "The staging database password rotates every Monday",
        ]
    )
    assert store.search("when does the staging database password rotate", limit=4)[0].memory.id == ms[3].id


def test_keyword_matching_folds_case_accents_and_plurals(store: Backend) -> None:
    """Keyword terms match across letter case, accents and English plurals."""
    ms = store.add_many(["Zoë ordered two invoices at the Café", "nothing in common here"])
    for query in ("zoe", "ZOË", "cafe", "invoice", "INVOICES"):
        assert ids(store.search(query, mode="keyword")) == [ms[0].id], query


def test_keyword_matching_keeps_ids_whole(store: Backend) -> None:
    """An id-like word (letters and digits joined by -, @, :, ...) matches that id above memories sharing a part."""
    ms = store.add_many(["ticket INV-2024-0173 is paid", "ticket INV-2024-0999 is open", "year 2024 report"])
    hits = store.search("INV-2024-0173", limit=3, mode="keyword")
    assert ids(hits)[0] == ms[0].id


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_keyword_search_matches_the_day_a_memory_was_stored(store: Backend, mode: str) -> None:
    """A date named in the query ("14 March 2025", "2025-03-14") matches memories created that day."""
    store.import_(
        [
            {"content": "weekly review: ship the beta", "created_at": "2025-03-14T10:00:00Z"},
            {"content": "weekly review: hire a designer", "created_at": "2025-03-21T10:00:00Z"},
        ]
    )
    for query in ("weekly review on 14 March 2025", "weekly review March 14", "weekly review 2025-03-14"):
        assert store.search(query, limit=1, mode=mode)[0].memory.content.endswith("beta"), query


# --- exactness of an unfiltered search -------------------------------------------------------------------------------


def test_an_unfiltered_search_of_a_small_store_is_exact(backend: BackendUnderTest) -> None:
    """In a store of a few hundred memories, an unfiltered semantic search returns the true best match (HNSW's
    neighbour heuristic can leave a memory unlike a tight cluster of 300 others with no in-link: the local store
    ranks a store this small exactly)."""
    store = backend.store
    store.add_many([f"filler {i} words here" for i in range(300)])
    target = store.add("alpha beta")
    assert ids(store.search("alpha beta", limit=1, mode="semantic")) == [target.id]


# --- explain ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_explain_says_why_and_changes_no_ranking(ladder: Backend, mode: str) -> None:
    """explain=True returns the same hits in the same order, each with an explanation that names its rank and the
    sides it was ranked on; without it no hit carries one."""
    plain = ladder.search(QUERY, limit=5, mode=mode)
    explained = ladder.search(QUERY, limit=5, mode=mode, explain=True)
    assert ids(explained) == ids(plain) and len(plain) == 5
    assert all(hit.explanation is None for hit in plain)
    for rank, hit in enumerate(explained, 1):
        why = hit.explanation
        assert why is not None and why["rank"] == rank
        assert ("semantic" in why) is (mode != "keyword") and ("keyword" in why) is (mode != "semantic")
        assert why["query"]["mode"] == mode
    if mode != "keyword":
        assert all(
            h.explanation and h.explanation["semantic"]["cosine"] == pytest.approx(h.score, abs=1e-3) for h in explained
        )
