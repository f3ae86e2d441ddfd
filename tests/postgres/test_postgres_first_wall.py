"""The first wall on its own: every statement of PostgresBackend names its tenant (`m.tenant = %(tenant)s` and
the like), whatever row-level security would hide besides (issue 27, item 5). With RLS disabled on every table of
this test's database, a tenant still never sees, counts, exports, gets or forgets another tenant's memories."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import psycopg
import pytest

from memserver.contract.backend import MemoryFilter
from memserver.postgres.backend import PostgresBackend
from tests.conftest import PostgresForTests
from tests.support.fakes import FakeEmbedder

TEXT = "the locker code is {code}; the spare key is under the blue pot"
FIELDS: dict[str, Any] = {"tags": ["home"], "speaker": "Sam", "session": "s1", "occurred_at": "2026-11-30"}
QUERY = "locker code spare key blue pot"
MODES = ["semantic", "keyword", "hybrid"]


@dataclass
class Walls:
    a: PostgresBackend
    b: PostgresBackend
    bobs_id: str
    alone: dict[str, tuple[float, float]]  # a's hit (score, rank_score) per mode before b stored anything


@pytest.fixture(scope="module")
def walls(postgres: PostgresForTests) -> Iterator[Walls]:
    """Tenants a and b with alike memories (same words, tags, speaker, session), with RLS disabled first."""
    url = postgres.database("first_wall")
    with PostgresBackend(url, "wall/a", FakeEmbedder()) as a, PostgresBackend(url, "wall/b", FakeEmbedder()) as b:
        a.add(TEXT.format(code=4711), **FIELDS)
        with psycopg.connect(url, autocommit=True) as owner:
            tables = [
                r[0]
                for r in owner.execute(
                    "SELECT relname FROM pg_class WHERE relnamespace = 'memserver'::regnamespace "
                    "AND relkind = 'r' AND relrowsecurity"
                )
            ]
            assert {"memories", "postings", "memory_tags"} <= set(tables), tables
            for table in tables:
                owner.execute(f'ALTER TABLE memserver."{table}" DISABLE ROW LEVEL SECURITY')
        alone = {mode: _scores(a, mode) for mode in MODES}
        bobs = b.add(TEXT.format(code=1234), **FIELDS)
        b.add_many([{"content": f"locker {i}: the code of locker {i} is kept apart", **FIELDS} for i in range(20)])
        with psycopg.connect(url, autocommit=True, options="-c role=memserver_app") as conn, conn.transaction():
            conn.execute("SELECT set_config('memserver.tenant', 'wall/a', true)")
            seen = conn.execute("SELECT count(*) FROM memserver.memories WHERE tenant = 'wall/b'").fetchone()
            assert seen == (21,), "the second wall is still up: this test would prove nothing"
        yield Walls(a, b, bobs.id, alone)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "filters",
    [{}, {"tags": ["home"]}, {"speaker": "Sam"}, {"session": "s1"}, {"since": "2026-11-01"}, {"as_of": "2099-01-01"}],
    ids=["unfiltered", "tags", "speaker", "session", "since", "as_of"],
)
def test_search_never_returns_another_tenants_memory(walls: Walls, mode: str, filters: dict[str, Any]) -> None:
    hits = walls.a.search(QUERY, limit=10, mode=mode, **filters)
    assert [h.memory.content for h in hits] == [TEXT.format(code=4711)]


@pytest.mark.parametrize("mode", MODES)
def test_another_tenants_memories_do_not_move_the_scores(walls: Walls, mode: str) -> None:
    """BM25's statistics (document frequencies, lengths) are the tenant's own: b's 21 memories about lockers
    leave a's score where it was before b stored anything."""
    assert _scores(walls.a, mode) == pytest.approx(walls.alone[mode], abs=1e-9)


def _scores(backend: PostgresBackend, mode: str) -> tuple[float, float]:
    [hit] = backend.search(QUERY, mode=mode)
    return hit.score, hit.rank_score


def test_reads_counts_and_exports_stay_in_the_tenant(walls: Walls) -> None:
    a, bobs_id = walls.a, walls.bobs_id
    mine = [TEXT.format(code=4711)]
    assert [m.content for m in a.list_recent(limit=10)] == mine
    assert [m.content for m in a.list_page(10).memories] == mine
    assert a.select(MemoryFilter(everything=True), limit=10).count == 1
    assert a.tag_counts() == {"home": 1}
    assert a.namespaces() == {"default": 1}
    assert a.sessions() == {"s1": 1}
    assert a.stats()["count"] == 1
    assert [m["content"] for m in a.export()] == mine
    assert a.get(bobs_id) is None


def test_a_tenant_cannot_forget_another_tenants_memory(walls: Walls) -> None:
    assert walls.a.delete_many([walls.bobs_id]) == 0
    assert walls.b.get(walls.bobs_id) is not None
