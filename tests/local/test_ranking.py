"""The local store's hybrid ranking (retrieval/hybrid_convex.py, local/row_context.py, retrieval/timewords.py) through
MemoryStore.search: session context, the soft speaker and time boosts, the deterministic cut, and `explain`."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import numpy as np
import pytest

from memserver.local.store import MemoryStore
from memserver.retrieval.timewords import Window, is_when, time_windows
from tests.support.fakes import FakeEmbedder


@pytest.fixture
def store(tmp_path: Path):
    with MemoryStore(tmp_path, "test", embedder=FakeEmbedder()) as s:
        yield s


def _chat(store: MemoryStore, namespace: str = "chat") -> dict[str, str]:
    """Two sessions of a chat between Maya and Tom; returns id by short name."""
    turns = [
        ("q", "Tom", "S1", "2024-05-03T10:00:00", "When does the pottery course start?"),
        ("a", "Maya", "S1", "2024-05-03T10:01:00", "A week on Tuesday, at the community hall."),
        ("x", "Tom", "S1", "2024-05-03T10:02:00", "Nice, I never got round to anything like that."),
        ("m", "Maya", "S2", "2024-06-20T18:00:00", "I finally bought a kayak, a red one."),
        ("t", "Tom", "S2", "2024-06-20T18:01:00", "I bought a kayak too last year, a blue one."),
        ("n", "Tom", "S2", "2024-06-20T18:02:00", "We should paddle up the river together."),
    ]
    ids = {}
    for name, speaker, session, at, text in turns:
        m = store.add(text, speaker=speaker, session=f"{namespace}/{session}", occurred_at=at, namespace=namespace)
        ids[name] = m.id
    return ids


def _ids(hits: list) -> list[str]:
    return [h.memory.id for h in hits]


def test_a_short_answer_is_found_through_the_question_before_it(store: MemoryStore) -> None:
    """ "A week on Tuesday" shares no word with the question; the turn before it does, so it ranks second, above
    turns that share nothing, and explain says the previous turn matched."""
    ids = _chat(store)
    hits = store.search("When does the pottery course start?", limit=3, namespace="chat", explain=True)
    assert _ids(hits)[:2] == [ids["q"], ids["a"]]
    why = hits[1].explanation
    assert why is not None and why["keyword"]["bm25"] == 0
    assert why["keyword"]["previous_turn"]["terms"] == ["potteri", "cours", "start"]


def test_the_speaker_the_query_names_is_boosted_softly(store: MemoryStore) -> None:
    """'Maya's kayak' puts Maya's kayak turn above Tom's (both say "I bought a kayak"); explain names the boost.
    The boost is soft: asked about Tom's blue kayak, Tom's turn still wins over Maya's."""
    ids = _chat(store)
    hits = store.search("What colour is Maya's kayak?", limit=2, namespace="chat", explain=True)
    assert _ids(hits) == [ids["m"], ids["t"]]
    assert hits[0].explanation is not None and hits[0].explanation["boosts"]["speaker"]["name"] == "Maya"
    assert hits[0].explanation["query"]["speakers"] == ["Maya"]
    assert "boosts" not in (hits[1].explanation or {}) or "speaker" not in hits[1].explanation["boosts"]
    blue = store.search("Maya asked who bought a blue kayak last year too", limit=1, namespace="chat")
    assert _ids(blue) == [ids["t"]]


def test_a_period_the_query_names_boosts_what_happened_then(store: MemoryStore) -> None:
    """Two memories equally close to the query; the one that happened in the month it names comes first, and
    explain says so."""
    a = store.add("Went to the dentist for a check-up", occurred_at="2024-03-12T09:00:00")
    b = store.add("Went to the dentist for a check-up again", occurred_at="2024-07-02T09:00:00")
    first = store.search("dentist check-up in July 2024", limit=2, explain=True)
    assert _ids(first) == [b.id, a.id]
    assert first[0].explanation is not None and first[0].explanation["boosts"]["time_window"] > 0
    assert _ids(store.search("dentist check-up in March 2024", limit=2)) == [a.id, b.id]


def test_when_questions_prefer_memories_that_carry_a_time(store: MemoryStore) -> None:
    """Asked "when", the memory that says a time comes before an equally matching one that does not."""
    plain = store.add("The team offsite is planned, venue booked")
    timed = store.add("The team offsite is planned for next Friday")
    assert _ids(store.search("When is the team offsite planned?", limit=2))[0] == timed.id
    assert _ids(store.search("Is the team offsite planned?", limit=2))[0] == plain.id


def test_neighbours_are_the_same_session_of_the_same_namespace(store: MemoryStore) -> None:
    """A session id reused in another namespace is another conversation: its turns are not context here."""
    _chat(store, "chat")
    other = store.add("When does the pottery course start?", session="chat/S1", namespace="other")
    hits = store.search("pottery course", limit=5, namespace="other", explain=True)
    assert _ids(hits) == [other.id]
    assert hits[0].explanation is not None and "previous_turn" not in hits[0].explanation["semantic"]


def test_a_deleted_turn_is_no_context_any_more(store: MemoryStore) -> None:
    """Forgetting the question takes away the answer's context (it no longer ranks through it)."""
    ids = _chat(store)
    assert store.delete(ids["q"], namespace="chat")
    hits = store.search("When does the pottery course start?", limit=6, namespace="chat", explain=True)
    answer = next(h for h in hits if h.memory.id == ids["a"])
    assert answer.explanation is not None and "previous_turn" not in answer.explanation["keyword"]


def test_a_smaller_limit_is_a_prefix_of_a_larger_one_whatever_ties(store: MemoryStore) -> None:
    """60 memories that tie on BM25 (same words, same length): a recall of 10 is the first 10 of a recall of 50,
    and of a recall of 80 (appended from deeper pools after the first 50)."""
    store.add_many([f"note {i}: the backup ran fine" for i in range(80)])
    for mode in ("hybrid", "keyword"):
        deep = _ids(store.search("backup", limit=80, mode=mode))
        assert _ids(store.search("backup", limit=10, mode=mode)) == deep[:10]
        assert _ids(store.search("backup", limit=50, mode=mode)) == deep[:50]


def test_explain_is_off_by_default_and_changes_no_ranking(store: MemoryStore) -> None:
    _chat(store)
    plain = store.search("kayak river", limit=6, namespace="chat")
    explained = store.search("kayak river", limit=6, namespace="chat", explain=True)
    assert [(h.memory, h.score) for h in plain] == [(h.memory, h.score) for h in explained]
    assert all(h.explanation is None for h in plain)
    assert [h.explanation["rank"] for h in explained if h.explanation] == [1, 2, 3, 4, 5, 6]


def test_a_keyword_only_hit_has_no_semantic_rank(store: MemoryStore) -> None:
    """A memory far from the query in meaning (cosine 0.05) but holding its rare word, behind 60 memories closer
    in meaning (cosine 0.2-0.3) that share no word: it is not in the vector side's best 50, yet its keyword match
    ranks it among the results; explain shows semantic rank null, keyword rank 1."""
    rng = np.random.default_rng(3)
    q = store.embedder.embed_query("zanzibar trip").astype(np.float64)

    def at_cosine(c: float) -> list[float]:
        u = rng.standard_normal(len(q))
        u -= u.dot(q) * q
        return (c * q + np.sqrt(1 - c * c) * u / np.linalg.norm(u)).tolist()

    records = [
        {"content": f"holiday plans number {i}", "vector": at_cosine(c)}
        for i, c in enumerate(np.linspace(0.2, 0.3, 60))
    ]
    records.append({"content": "zanzibar", "vector": at_cosine(0.05)})
    store.import_(records)
    hits = store.search("zanzibar trip", limit=50, explain=True)
    rare = next(h for h in hits if h.memory.content == "zanzibar")
    assert rare.explanation is not None
    assert rare.explanation["semantic"]["rank"] is None and rare.explanation["keyword"]["rank"] == 1
    assert rare.explanation["keyword"]["terms"] == ["zanzibar"]


def test_semantic_and_keyword_modes_explain_their_one_side(store: MemoryStore) -> None:
    store.add("The staging database password rotates every Monday")
    (s,) = store.search("password rotation", limit=1, mode="semantic", explain=True)
    (k,) = store.search("password rotation", limit=1, mode="keyword", explain=True)
    assert s.explanation is not None and set(s.explanation) == {"rank", "semantic", "query"}
    assert k.explanation is not None and k.explanation["keyword"]["terms"] == ["password", "rotat"]


@pytest.mark.parametrize(
    ("query", "windows"),
    [
        ("What did we do in May 2024?", [Window(date(2024, 5, 1), date(2024, 5, 31))]),
        ("the gig on 14 March 2025", [Window(date(2025, 3, 14), date(2025, 3, 14))]),
        ("between March and June 2024", [Window(date(2024, 3, 1), date(2024, 6, 30))]),
        ("what happened yesterday", [Window(date(2024, 11, 13), date(2024, 11, 13))]),
        ("the call last Tuesday", [Window(date(2024, 11, 12), date(2024, 11, 12))]),
        ("photos from last month", [Window(date(2024, 10, 1), date(2024, 10, 31))]),
        ("you may be right", []),
        ("in May", [Window(date(2000, 5, 1), date(2000, 5, 1), any_year=True)]),
    ],
)
def test_time_windows_resolve_against_the_day_of_the_question(query: str, windows: list[Window]) -> None:
    """Relative times count back from the question's day (here Thursday 14 November 2024)."""
    assert time_windows(query, date(2024, 11, 14)) == windows


def test_when_questions_are_recognised() -> None:
    assert is_when("When did Tom propose?") and is_when("what date is the wedding")
    assert not is_when("Where did Tom propose?")
