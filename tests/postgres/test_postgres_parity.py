"""Both engines rank hybrid search the same (issue 25): the same memories and questions through MemoryStore and
PostgresBackend give the same ranked ids, fused scores within float tolerance, and the same explanations.

A small conversation (four sessions of 20 turns, three speakers, dated turns, a question answered in the next
turn) and a few undated notes, with the fake embedder's bag-of-words vectors: the questions name speakers, months and
"when", so the session context and every boost take part. Unfiltered (each side's best 50 and the turns that follow
them) at limit 10; filtered by a tag (every candidate ranked with its context) at 10 and 60 (the deeper pass).
benchmarks/engine_parity.py is the full-size form (the quality set and the conversation sets, the real model).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from memserver.local.store import MemoryStore
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
