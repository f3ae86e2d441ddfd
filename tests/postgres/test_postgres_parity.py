"""Both engines rank hybrid search the same (issue 25): the same memories and questions through MemoryStore and
PostgresBackend give the same ranked ids, fused scores within float tolerance, and the same explanations.

A small conversation (four sessions of 20 turns, three speakers, dated turns, a question answered in the next
turn) and a few undated notes, with the fake embedder's bag-of-words vectors: the questions name speakers, months and
"when", so the session context and every boost take part. Unfiltered (each side's best 50 and the turns that follow
them) at limit 10; filtered by a tag (every candidate ranked with its context) at 10 and 60 (the deeper pass).
benchmarks/engine_parity.py is the full-size form (the quality set and the conversation sets, the real model).
"""

from __future__ import annotations

import logging
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memserver.local.store import MemoryStore
from memserver.postgres import search as pg_search
from memserver.postgres.backend import PostgresBackend
from tests.support.fakes import FakeEmbedder

SPEAKERS = ["Maya", "Tom", "Priya"]
TIE = 1e-6
TOPICS = [
    "the harbour lantern festival",
    "a new sailing boat",
    "pottery class on Tuesday",
    "moving to Lisbon next month",
    "the garden tomatoes",
    "a job interview at the library",
    "grandmother's birthday dinner",
    "running the city marathon",
]
SESSIONS, TURNS = 4, 20  # 80 turns: more than a side's 50, so the unfiltered pools cut and the tagged do not
WORDS = [
    f"{a}{b}{c}{d}"
    for d in ("", "ba", "ke", "mo", "ti")
    for a in ("bel", "cor", "dun", "fal")
    for b in ("ak", "em", "ir", "oth", "un")
    for c in "aoiu"
]  # 400: one a turn of WIDE
QUESTIONS = [
    "When did Maya go to the lantern festival?",
    "What did Tom say about the sailing boat?",
    "Priya pottery class",
    "Who is moving to Lisbon?",
    "what happened in March with the garden",
    "When is the marathon?",
    "interview library Tom",
    "birthday dinner last year",
    "tomatoes",
    "What did Maya ask about?",
]


def _records(sessions: int = SESSIONS) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    start = datetime(2024, 2, 20, 18, 0, tzinfo=timezone.utc)
    for s in range(sessions):
        day = start + timedelta(days=17 * s)
        for t in range(TURNS):
            topic = TOPICS[(s * 3 + t // 2) % len(TOPICS)]
            asks = t % 2 == 0
            text = f"Did you hear about {topic}?" if asks else f"Yes, {topic} was last week, on the {t}th"
            text = f"{text} {WORDS[s * TURNS + t]}"  # no two turns alike: no exact ties that float rounding could flip
            when = day + timedelta(minutes=t)
            out.append(
                {
                    "id": f"{s:02x}{t:02x}" + "0" * 28,
                    "content": text,
                    "created_at": when.isoformat(),
                    "occurred_at": when.isoformat(),
                    "speaker": SPEAKERS[(s + t) % 3],
                    "session": f"session-{s}",
                    "tags": ["chat"],
                }
            )
    for i, topic in enumerate(TOPICS):
        out.append({"id": f"ff{i:02x}" + "0" * 28, "content": f"note: {topic}", "created_at": "2024-01-05T10:00:00Z"})
    return out


def _ranked(backend: Any, query: str, limit: int, **filters: Any) -> list[tuple[str, float, dict[str, Any]]]:
    hits = backend.search(query, limit=limit, mode="hybrid", explain=True, **filters)
    return [(h.memory.id, h.rank_score, h.explanation) for h in hits]


def _without_engine(why: dict[str, Any]) -> dict[str, Any]:
    return {**why, "query": {k: v for k, v in why["query"].items() if k != "engine"}}


@pytest.fixture(scope="module")
def engines(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    embedder = FakeEmbedder()
    local = MemoryStore(Path(tmp_path_factory.mktemp("parity")), "parity", embedder=embedder)  # type: ignore[arg-type]
    pg = PostgresBackend(postgres.database("parity"), tenant="parity", embedder=embedder)  # type: ignore[arg-type]
    for engine in (local, pg):
        engine.import_(_records())
    yield local, pg
    local.close()
    pg.close()


def _groups(ranked: list[tuple[str, float, dict[str, Any]]]) -> list[set[str]]:
    """The ids in runs of equal fused score (within float rounding: the engines add the same terms in another
    order), in order; the last run may continue past the cut, so it is left out."""
    runs: list[set[str]] = []
    last = None
    for memory_id, score, _ in ranked:
        if last is None or abs(score - last) > TIE:
            runs.append(set())
        runs[-1].add(memory_id)
        last = score
    return runs[:-1]


# Unfiltered, each side's pool is cut at 50 of the 88 memories: past the first ~15, the fake embedder's cosines are
# noise (~1e-3, float32 here and float8 there), so a deeper unfiltered list is not compared.
@pytest.mark.parametrize(
    ("filters", "limit"), [({}, 10), ({"tags": ["chat"]}, 10), ({"tags": ["chat"]}, 60)], ids=["all", "tag", "tag-60"]
)
def test_hybrid_ranks_alike_on_both_engines(engines: Any, limit: int, filters: dict[str, Any]) -> None:
    _assert_alike(*engines, limit, filters)


@pytest.fixture
def thinned(postgres: Any, tmp_path: Path) -> Any:
    """Both engines with some answers (turns that follow a question) archived and others deleted: following turns
    that do not pass the filters (archived: still context, not candidates) or are gone (deleted: neither)."""
    embedder = FakeEmbedder()
    local = MemoryStore(tmp_path, "thinned", embedder=embedder)  # type: ignore[arg-type]
    pg = PostgresBackend(postgres.database("thinned"), tenant="thinned", embedder=embedder)  # type: ignore[arg-type]
    answers = [r["id"] for r in _records() if r.get("session") and int(r["id"][2:4], 16) % 2]
    for engine in (local, pg):
        engine.import_(_records())
        for memory_id in answers[::4]:
            assert engine.archive(memory_id) is not None
        assert engine.delete_many(answers[1::4]) == len(answers[1::4])
    yield local, pg
    local.close()
    pg.close()


def test_hybrid_ranks_alike_when_following_turns_are_archived_or_deleted(thinned: Any) -> None:
    _assert_alike(*thinned, 10, {})


WIDE = 20  # sessions: 400 turns, so an unfiltered search ranks a fraction of each session and reads its context


@pytest.fixture
def wide(postgres: Any, tmp_path: Path) -> Any:
    """Both engines with 20 sessions: the pools leave gaps inside sessions, so the ranked turns' neighbours, the
    turns that follow them and those turns' own neighbours are each read from the sessions (PostgreSQL: the chain of
    search.py), not found among the ranked rows."""
    embedder = FakeEmbedder()
    local = MemoryStore(tmp_path, "wide", embedder=embedder)  # type: ignore[arg-type]
    pg = PostgresBackend(postgres.database("wide"), tenant="wide", embedder=embedder)  # type: ignore[arg-type]
    for engine in (local, pg):
        engine.import_(_records(WIDE))
    yield local, pg
    local.close()
    pg.close()


def test_hybrid_ranks_alike_when_the_pools_are_a_fraction_of_the_sessions(wide: Any) -> None:
    _assert_alike(*wide, 10, {})


def _assert_alike(local: Any, pg: Any, limit: int, filters: dict[str, Any]) -> None:
    for query in QUESTIONS:
        mine, theirs = _ranked(local, query, limit, **filters), _ranked(pg, query, limit, **filters)
        assert [s for _, s, _ in theirs] == pytest.approx([s for _, s, _ in mine], abs=TIE), query
        # The first 10 in the same order (but within ties); deeper, where a pool's cut may fall inside a tie of the
        # fake embedder's look-alike turns, the same scores position by position and the same memories.
        assert _groups(theirs[:10]) == _groups(mine[:10]), query
        assert set().union(*_groups(theirs)) == set().union(*_groups(mine)), query
        by_id = {i: why for i, _, why in theirs}
        for memory_id, _, why in mine:
            if memory_id in by_id:  # the same parts, the same boosts, the same context
                assert _rounded(by_id[memory_id]) == _rounded(why), query
        assert _without_engine(theirs[0][2])["query"] == _without_engine(mine[0][2])["query"], query


def _rounded(why: dict[str, Any]) -> dict[str, Any]:
    """An explanation without what ties may reorder (the ranks) and with its numbers to 3 places."""
    out: dict[str, Any] = {}
    for key, value in why.items():
        if key in ("rank", "query"):
            continue
        out[key] = (
            _rounded(value) if isinstance(value, dict) else round(value, 3) if isinstance(value, float) else value
        )
    return out


@pytest.fixture(scope="module")
def tied(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Both engines holding 30 notes alike to BM25 (one shared word, the same length), imported newest first: the
    order they were stored in is the reverse of their created_at."""
    embedder = FakeEmbedder()
    local = MemoryStore(Path(tmp_path_factory.mktemp("tied")), "tied", embedder=embedder)  # type: ignore[arg-type]
    pg = PostgresBackend(postgres.database("tied"), tenant="tied", embedder=embedder)  # type: ignore[arg-type]
    start = datetime(2024, 5, 1, tzinfo=timezone.utc)
    notes = [
        {"content": f"quartz {WORDS[i]}", "created_at": (start - timedelta(days=i)).isoformat()} for i in range(30)
    ]
    for engine in (local, pg):
        engine.import_(notes)
    yield local, pg
    local.close()
    pg.close()


@pytest.mark.parametrize("limit", [5, 25])
def test_keyword_ties_go_to_the_earlier_stored_memory_on_both_engines(tied: Any, limit: int) -> None:
    local, pg = tied
    mine = [h.memory.content for h in local.search("quartz", limit=limit, mode="keyword")]
    theirs = [h.memory.content for h in pg.search("quartz", limit=limit, mode="keyword")]
    assert mine == [f"quartz {WORDS[i]}" for i in range(limit)]  # the contract: ties to the earlier-stored
    assert theirs == mine


@pytest.mark.parametrize("limit", [5, 25])
def test_keyword_ties_at_the_hnsw_plans_cut_go_to_the_earlier_stored_memory(
    tied: Any, limit: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unfiltered on a tenant past the exact plan's floor (the `ann` plan), the keyword ranking is cut at its
    depth-th score with every row tied with it (search.py: FETCH FIRST ... WITH TIES) before the filter and the
    order by seq: 30 notes tied, a depth of 20 or 25, and still the earliest-stored first."""
    monkeypatch.setattr(pg_search, "EXACT_MIN", 10)  # the tenant's 30 memories are then past it
    _, pg = tied
    pg.search("quartz", limit=1)  # the plans' counts are the tenant's as the backend opened (empty) till then
    theirs = [h.memory.content for h in pg.search("quartz", limit=limit, mode="keyword")]
    assert theirs == [f"quartz {WORDS[i]}" for i in range(limit)]


# A tenant past the exact plan's floor (search.EXACT_MIN = 1,000 memories): unfiltered, PostgreSQL ranks by HNSW (the
# `ann` plan), and a tag on nearly every memory takes the `probe` plan's HNSW branch; the local store ranks these few
# rows exactly, so only the clear top of each list (the special sessions below, far above the filler's noise: CLEAR) is
# compared. FILLER sessions of pseudo-words that share no word with the questions.
FILLER, FILLER_TURNS = 60, 18
SYLLABLES = ["ka", "lo", "mi", "ne", "pu", "ra", "si", "to", "vu", "ze", "qa", "wo"]
CLEAR = 0.5  # a fused score the filler never reaches (its best ~0.26): the special sessions' turns
LARGE_QUESTIONS = ["Where did Ines hide the brass compass?", "When is the glassblowing workshop with Oskar?"]


def _large_records() -> list[dict[str, Any]]:
    """The filler, then two sessions whose question is followed by an answer that shares none of its words: in
    `compass` the answer is archived (a following turn that is no candidate), in `glass` the answer's own next
    turn is archived and repeats the question (context only: neither ranking holds it, yet the answer's vector
    side counts it as its next turn)."""
    out: list[dict[str, Any]] = []
    start = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)

    def turn(session: str, i: int, text: str, archived: bool = False) -> dict[str, Any]:
        when = start + timedelta(minutes=len(out))
        record = {
            "id": f"{len(out):032x}",
            "content": text,
            "created_at": when.isoformat(),
            "session": session,
            "speaker": SPEAKERS[i % 3],
            "tags": ["bulk"],
        }
        return record | ({"archived": True} if archived else {})

    for s in range(FILLER):
        for t in range(FILLER_TURNS):
            n = s * FILLER_TURNS + t
            words = ["".join(SYLLABLES[x // 12**d % 12] for d in range(3)) for x in (n, n * 7 + 3, n * 11 + 5)]
            out.append(turn(f"filler-{s}", t, " ".join(words)))  # (n < 12**3: no two turns alike)
    for i, text in enumerate(["good morning", LARGE_QUESTIONS[0], "under the loose floorboard, she said"]):
        out.append(turn("compass", i, text, archived=i == 2))
    glass = ["hello again", LARGE_QUESTIONS[1], "next thursday at noon", "the glassblowing workshop with Oskar moved"]
    for i, text in enumerate(glass):
        out.append(turn("glass", i, text, archived=i == 3))
    return out


@pytest.fixture(scope="module")
def large(postgres: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    embedder = FakeEmbedder()
    local = MemoryStore(Path(tmp_path_factory.mktemp("large")), "large", embedder=embedder)  # type: ignore[arg-type]
    pg = PostgresBackend(postgres.database("large"), tenant="large", embedder=embedder)  # type: ignore[arg-type]
    for engine in (local, pg):
        engine.import_(_large_records())
    pg.search("good morning", limit=1)  # the plans' counts are the tenant's as the backend opened (empty) till then
    yield local, pg
    local.close()
    pg.close()


@pytest.mark.parametrize("filters", [{}, {"tags": ["bulk"]}], ids=["ann", "probe"])
def test_hybrid_ranks_alike_on_a_tenant_past_the_exact_plan(
    large: Any, filters: dict[str, Any], caplog: pytest.LogCaptureFixture
) -> None:
    """The top of the ranking and the answers' explanations match the local store's; an archived answer is no hit
    (the following turns' filter check on the HNSW plans); the answer whose next turn is archived counts that turn
    (the chain reads two turns past a session's last ranked turn); and HNSW's rows sufficed: no search ran again
    exactly (ranking.py's check counts the turns with a vector distance, which a context statement's rows are)."""
    local, pg = large
    answers = {text: r["id"] for r in _large_records() for text in [r["content"]]}
    with caplog.at_level(logging.INFO, "memserver.postgres.ranking"):
        for query in LARGE_QUESTIONS:
            mine, theirs = _ranked(local, query, 10, **filters), _ranked(pg, query, 10, **filters)
            top, their_top = [h for h in mine if h[1] > CLEAR], [h for h in theirs if h[1] > CLEAR]
            assert [i for i, _, _ in their_top] == [i for i, _, _ in top], query
            assert [s for _, s, _ in their_top] == pytest.approx([s for _, s, _ in top], abs=TIE), query
            assert answers["under the loose floorboard, she said"] not in {i for i, _, _ in theirs}, query
        # (mine, theirs: the glass question's) its answer ranks by the archived turn after it too
        why = {i: w for i, _, w in theirs}[answers["next thursday at noon"]]
        assert "next_turn" in why["semantic"], query
        assert _rounded(why) == _rounded({i: w for i, _, w in mine}[answers["next thursday at noon"]]), query
    reruns = [r.getMessage() for r in caplog.records if r.name == "memserver.postgres.ranking"]
    assert not [m for m in reruns if "ranking exactly" in m], reruns
