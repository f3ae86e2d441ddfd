"""The PostgreSQL backend against a real PostgreSQL 18 + pgvector (the session's `postgres` fixture): what the
contract suite cannot see from one engine's point of view. Row-level security as the second wall, migrations under
concurrency, filtered top-k on the HNSW and probe plans, and faults: SIGKILL of writers, the database restarting
under a running backend, a database that is not there, several processes on one database."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
import pytest

from memserver.errors import ModelMismatchError, StoreError
from memserver.postgres import backend as pg_backend
from memserver.postgres import schema as pg_schema
from memserver.postgres import search as pg_search
from memserver.postgres.backend import PostgresBackend
from memserver.postgres.pool import Database, DatabaseUnavailableError
from tests.conftest import PostgresForTests
from tests.support.fakes import FakeEmbedder
from tests.support.pg_cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def url(postgres: PostgresForTests) -> str:
    return postgres.database("backend")


@pytest.fixture
def tenant(request: pytest.FixtureRequest) -> str:
    return f"test/{request.node.name}"


@pytest.fixture
def backend(url: str, tenant: str) -> Iterator[PostgresBackend]:
    with PostgresBackend(url, tenant=tenant, embedder=FakeEmbedder()) as b:
        yield b


# --- isolation --------------------------------------------------------------------------------------------------


def test_row_level_security_hides_other_tenants_even_from_sql_without_a_tenant_condition(url: str) -> None:
    """As memserver_app, a statement that names no tenant sees only the transaction's tenant, and none unset."""
    with PostgresBackend(url, "rls/a", FakeEmbedder()) as a, PostgresBackend(url, "rls/b", FakeEmbedder()) as b:
        a.add("Alice's locker code is 4711.")
        b.add("Bob's locker code is 1234.")
        with psycopg.connect(url, autocommit=True, options="-c role=memserver_app") as conn:

            def visible(tenant: str | None) -> list[str]:
                with conn.transaction():
                    if tenant is not None:
                        conn.execute("SELECT set_config('memserver.tenant', %s, true)", [tenant])
                    rows = conn.execute("SELECT content FROM memserver.memories WHERE content LIKE '%%locker%%'")
                    return [r[0] for r in rows]

            assert visible("rls/a") == ["Alice's locker code is 4711."]
            assert visible("rls/b") == ["Bob's locker code is 1234."]
            assert visible(None) == []
            with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
                conn.execute("SELECT set_config('memserver.tenant', 'rls/a', true)")
                conn.execute("DELETE FROM memserver.postings")  # allowed, but only rls/a's rows ...
                conn.execute("UPDATE memserver.memories SET content = 'x'")  # ... and no UPDATE at all
        assert [m.content for m in b.list_recent()] == ["Bob's locker code is 1234."]


def test_row_level_security_hides_other_tenants_in_every_tenant_bearing_table(url: str) -> None:
    """Every table with a tenant column (read from the schema, so a new table is covered): as memserver_app,
    another tenant's rows never come back, even when the statement asks for them by name."""
    with PostgresBackend(url, "rls2/a", FakeEmbedder()) as a:
        a.add("Alice keeps the spare key under the blue pot.", tags=["home"], speaker="Alice")
    with psycopg.connect(url, autocommit=True) as owner:
        tables = [
            r[0]
            for r in owner.execute(
                "SELECT c.table_name FROM information_schema.columns c JOIN information_schema.tables t "
                "USING (table_schema, table_name) WHERE c.table_schema = 'memserver' AND c.column_name = 'tenant' "
                "AND t.table_type = 'BASE TABLE' ORDER BY 1"
            )
        ]
    assert {"memories", "postings", "memory_tags"} <= set(tables), tables
    with psycopg.connect(url, autocommit=True, options="-c role=memserver_app") as conn:

        def rows_of_a(table: str, as_tenant: str) -> int:
            with conn.transaction():
                conn.execute("SELECT set_config('memserver.tenant', %s, true)", [as_tenant])
                found = conn.execute(f"SELECT count(*) FROM memserver.{table} WHERE tenant = 'rls2/a'").fetchone()
                return int(found[0]) if found else 0

        seen_by_a = {table: rows_of_a(table, "rls2/a") for table in tables}
        assert all(seen_by_a[t] > 0 for t in ("memories", "postings", "memory_tags")), seen_by_a
        assert {table: rows_of_a(table, "rls2/b") for table in tables} == dict.fromkeys(tables, 0)


# --- schema -----------------------------------------------------------------------------------------------------


def test_migrations_are_idempotent_under_concurrency_and_refuse_another_model(postgres: PostgresForTests) -> None:
    """Eight processes' worth of starts racing on a fresh database migrate it once; another model is refused."""
    url = postgres.database("migrate")
    applied: list[int] = []
    errors: list[BaseException] = []

    def start() -> None:
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                applied.append(pg_schema.ensure_schema(conn, FakeEmbedder.model_name, 384))
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=start) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(applied) == [0] * 7 + [pg_schema.latest_version()]
    with psycopg.connect(url, autocommit=True) as conn:
        assert pg_schema.current_version(conn) == pg_schema.latest_version()
    other = FakeEmbedder()
    other.model_name = "another/model"  # type: ignore[misc]
    with pytest.raises(ModelMismatchError, match="another/model"):
        PostgresBackend(url, "t", other)


# --- search: the true top-k on every plan ---------------------------------------------------------------------


def _exact_top(backend: PostgresBackend, query: str, keep: set[str], k: int) -> list[float]:
    """The scores of the exact top k (ids differ only among float-noise ties, so scores are what is compared)."""
    q = FakeEmbedder().embed_query(query)
    scores = [float(np.dot(r["vector"], q)) for r in backend.export(include_vectors=True) if r["id"] in keep]
    return [round(s, 5) for s in sorted(scores, reverse=True)[:k]]


def test_filtered_semantic_search_is_the_true_top_k_at_every_selectivity(backend: PostgresBackend) -> None:
    """4,000 memories; tags on 0.5% .. 50% of them: a semantic search returns k rows, the exact top k."""
    rng = random.Random(7)
    words = [f"w{i}" for i in range(300)]
    shares = {"rare": 0.005, "few": 0.05, "half": 0.5}
    items = []
    for i in range(4000):
        tags = [name for name, share in shares.items() if rng.random() < share]
        items.append({"content": " ".join(rng.choices(words, k=8)) + f" n{i}", "tags": tags})
    stored = [m for start in range(0, len(items), 1000) for m in backend.add_many(items[start : start + 1000])]
    by_tag = {name: {m.id for m, it in zip(stored, items, strict=True) if name in it["tags"]} for name in shares}
    for name, ids in by_tag.items():
        for query in ("w1 w2 w3", "w250 w17"):
            k = min(10, len(ids))
            hits = backend.search(query, limit=10, tags=[name], mode="semantic")
            assert [round(h.score, 5) for h in hits] == _exact_top(backend, query, ids, k), name
            assert {h.memory.id for h in hits} <= ids
    hits = backend.search("w1 w2 w3", limit=10, mode="semantic")  # unfiltered: HNSW
    assert len(hits) == 10
    assert [round(h.score, 5) for h in hits][:3] == _exact_top(backend, "w1 w2 w3", {m.id for m in stored}, 3)


class ShortHnsw(Database):
    """A database whose HNSW answers come back short (as when an iterative scan gives up at max_scan_tuples):
    every statement run with the hnsw settings loses its vector rows after the first three."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.plans: list[str] = []

    def run(self, tenant: str, statements: Any, *, write: bool = False, settings: Any = None) -> Any:
        cursors = super().run(tenant, statements, write=write, settings=settings)
        if write or not statements or "FROM info i" not in statements[0][0]:
            return cursors
        self.plans.append("exact" if settings is None else "hnsw")
        rows = cursors[0].fetchall()
        if settings is not None:
            vector = [r for r in rows if r[pg_search.RANKING] == 1]
            rows = [r for r in rows if r[pg_search.RANKING] != 1] + vector[:3]
        return [_Rows(rows), *cursors[1:]]


class _Rows:
    def __init__(self, rows: list[Any]) -> None:
        self.rows = rows

    def fetchall(self) -> list[Any]:
        return self.rows


@contextlib.contextmanager
def _backend_on(
    postgres: PostgresForTests, monkeypatch: pytest.MonkeyPatch, name: str, database: type[Database]
) -> Iterator[tuple[Any, PostgresBackend]]:
    """A backend whose pool is `database` (what open_database builds), on a fresh database `name`."""
    url = postgres.database(name)
    monkeypatch.setattr(pg_backend, "Database", database)
    db = pg_backend.open_database(url, FakeEmbedder.model_name, FakeEmbedder.dim)
    assert isinstance(db, database)
    try:
        backend = PostgresBackend(tenant="mine", embedder=FakeEmbedder(), database=db)
        yield db, backend
        backend.close()
    finally:
        db.close()


def test_a_short_hnsw_result_is_ranked_again_exactly(
    postgres: PostgresForTests, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The HNSW plan returning fewer than k rows (backend.py's fallback): the search runs again exactly and
    returns the true top k, in one more statement."""
    monkeypatch.setattr(pg_search, "EXACT_MIN", 10)  # a tenant of 60 rows is then "large": the HNSW plan
    with _backend_on(postgres, monkeypatch, "fallback", ShortHnsw) as (db, backend):
        rng = random.Random(3)
        words = [f"w{i}" for i in range(40)]
        stored = backend.add_many([" ".join(rng.choices(words, k=6)) + f" n{i}" for i in range(60)])
        backend.search("w1 w2", limit=10, mode="semantic")  # (the plan follows the counts the last search found)
        db.plans.clear()
        hits = backend.search("w1 w2 w3", limit=10, mode="semantic")
        assert db.plans == ["hnsw", "exact"]
        assert [round(h.score, 5) for h in hits] == _exact_top(backend, "w1 w2 w3", {m.id for m in stored}, 10)


class CapturedContext(Database):
    """A database that keeps the context statements it runs (those with a plan_cache_mode setting)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.context: list[tuple[str, str, Any, dict[str, str]]] = []

    def run(self, tenant: str, statements: Any, *, write: bool = False, settings: Any = None) -> Any:
        if settings and "plan_cache_mode" in settings:
            self.context.append((tenant, statements[0][0], statements[0][1], dict(settings)))
        return super().run(tenant, statements, write=write, settings=settings)


def _nodes(node: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield node
    for child in node.get("Plans", []):
        yield from _nodes(child)


def test_the_generic_plan_of_a_hybrid_search_walks_the_hnsw_index(
    postgres: PostgresForTests, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The context statement runs with a generic plan (ranking.GENERIC); at 10,000 memories that plan must still
    take the vector side's top list from the HNSW index. With the list's depth a parameter (LIMIT $n) the planner
    guessed "10% of the rows" and scanned and sorted all 10,000 instead (hybrid p50 16.4 -> 6.5 ms when the depth
    became a literal: benchmarks/README.md, "PostgreSQL + pgvector")."""
    with _backend_on(postgres, monkeypatch, "generic_plan", CapturedContext) as (db, backend):
        url = db.url
        rng = random.Random(5)
        words = [f"w{i}" for i in range(300)]
        for start in range(0, 10_000, 1000):
            backend.add_many([" ".join(rng.choices(words, k=8)) + f" n{i}" for i in range(start, start + 1000)])
        with psycopg.connect(url, autocommit=True) as owner:
            owner.execute("ANALYZE memserver.memories")
        backend.search("w1 w2", limit=10, mode="hybrid")  # (the plan follows the counts the last search found)
        backend.search("w1 w2 w3", limit=10, mode="hybrid")
        tenant, sql, params, settings = db.context[-1]
        assert settings["plan_cache_mode"] == "force_generic_plan"
        notices: list[str] = []
        with psycopg.connect(url, autocommit=True) as conn:
            from pgvector.psycopg import register_vector

            register_vector(conn)
            conn.add_notice_handler(lambda d: notices.append(d.message_primary or ""))
            with conn.transaction():  # the statement as the backend ran it, prepared: its generic plan, logged
                for name, value in {"memserver.tenant": tenant, **settings}.items():
                    conn.execute("SELECT set_config(%s, %s, true)", [name, value])
                conn.execute("LOAD 'auto_explain'")
                for name, value in {"log_min_duration": "0", "log_level": "notice", "log_format": "json"}.items():
                    conn.execute(f"SET LOCAL auto_explain.{name} = {value}")
                conn.execute(sql, params, prepare=True).fetchall()
        logged = [n for n in notices if '"Plan"' in n]
        assert len(logged) == 1, notices
        plan = json.loads(logged[0][logged[0].index("{") :])["Plan"]
        near = next(n for n in _nodes(plan) if n.get("Subplan Name") == "CTE near")
        scans = [(n["Node Type"], n.get("Index Name")) for n in _nodes(near) if n.get("Relation Name") == "memories"]
        assert scans and all(scan == ("Index Scan", "memories_hnsw") for scan in scans), scans


# --- faults -----------------------------------------------------------------------------------------------------

WRITER = r"""
import random, sys
from memserver.postgres.backend import PostgresBackend
from tests.support.fakes import FakeEmbedder
rng = random.Random(int(sys.argv[3]))
backend = PostgresBackend(sys.argv[1], tenant=sys.argv[2], embedder=FakeEmbedder())
print("ready", flush=True)
mine = []
i = 0
while True:
    i += 1
    if rng.random() < 0.2 and mine:
        victim = mine.pop(rng.randrange(len(mine)))
        print("X", victim, flush=True)
        backend.delete(victim)
        print("D", victim, flush=True)
    elif rng.random() < 0.3:
        for m in backend.add_many([f"batch {sys.argv[3]} {i} {j} {rng.random()}" for j in range(5)]):
            print("A", m.id, flush=True)
            mine.append(m.id)
    else:
        m = backend.add(f"memory {sys.argv[3]} {i} {rng.random()}", tags=[f"t{i % 5}"])
        print("A", m.id, flush=True)
        mine.append(m.id)
"""


@pytest.mark.slow
def test_sigkill_of_writers_loses_nothing_acknowledged(url: str, tenant: str) -> None:
    """Kill -9 a writing process at random moments: every acknowledged add is there, no acknowledged delete."""
    rng = random.Random(99)
    added: set[str] = set()
    deleted: set[str] = set()
    attempted: set[str] = set()
    for kill in range(8):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, url, tenant, str(kill)],
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.1, 0.6))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        lines = out.splitlines()
        for n, line in enumerate(lines):
            parts = line.split()
            if len(parts) != 2 or len(parts[1]) != 32:
                assert n == len(lines) - 1, line
                continue
            {"A": added, "D": deleted, "X": attempted}[parts[0]].add(parts[1])
    assert len(added) > 50
    with PostgresBackend(url, tenant=tenant, embedder=FakeEmbedder()) as b:
        live = {r["id"] for r in b.export()}
        assert not (added - deleted - attempted) - live, "acknowledged adds lost"
        assert not deleted & live, "acknowledged deletes came back"
        assert b.stats()["count"] == len(live)
        assert {h.memory.id for h in b.search("memory batch", limit=1000, mode="keyword")} <= live


@pytest.mark.slow
def test_a_database_restart_gives_clear_errors_then_recovers_by_itself() -> None:
    """PostgreSQL stops under a running backend: calls fail with a message naming the server; once it is back,
    the same backend works again with no reopen, and every acknowledged write is there."""
    cluster = Cluster.start()
    try:
        db_url = cluster.create_database("restart")
        with PostgresBackend(db_url, tenant="r", embedder=FakeEmbedder()) as b:
            before = [b.add(f"before the restart {i}").id for i in range(5)]
            cluster.stop("fast")
            where = f"127.0.0.1:{cluster.port}/restart"
            for call in (lambda: b.add("while it is down"), lambda: b.search("before"), b.list_recent):
                with pytest.raises(DatabaseUnavailableError, match=where):
                    call()
            cluster.start_again()
            after = b.add("after the restart")
            assert {m.id for m in b.list_recent(limit=100)} == {*before, after.id}
            cluster.kill()  # a crash this time: the server recovers from its WAL
            with pytest.raises(DatabaseUnavailableError):
                b.search("before")
            cluster.start_again()
            assert len(b.search("restart", limit=10, mode="keyword")) == 6
    finally:
        cluster.remove()


def test_an_unreachable_database_is_one_clear_error_naming_the_host() -> None:
    with pytest.raises(DatabaseUnavailableError, match=r"cannot connect to PostgreSQL at 127\.0\.0\.1:1/nothing"):
        PostgresBackend("postgresql://memserver:secret@127.0.0.1:1/nothing", tenant="t", embedder=FakeEmbedder())
    try:
        PostgresBackend("postgresql://memserver:secret@127.0.0.1:1/nothing", tenant="t", embedder=FakeEmbedder())
    except StoreError as exc:
        assert "secret" not in str(exc) and "\n" not in str(exc)


PEER = r"""
import sys
from memserver.postgres.backend import PostgresBackend
from tests.support.fakes import FakeEmbedder
url, tenant, me, n, peers = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
backend = PostgresBackend(url, tenant=tenant, embedder=FakeEmbedder())
for i in range(n):
    m = backend.add(f"peer{me} note {i}")
    assert backend.get(m.id) is not None
    print("mine", m.id, flush=True)
    shared = backend.add(f"the shared fact number {i}")  # every peer adds it, at about the same time
    print("shared", i, shared.id, shared.duplicate, flush=True)
print("written", flush=True)
assert sys.stdin.readline().strip() == "go"  # every peer has written by now
seen = set()
for other in range(peers):
    seen |= {h.memory.id for h in backend.search(f"peer{other}", limit=1000, mode="keyword")}
print("seen", len(seen), flush=True)
"""


@pytest.mark.slow
def test_processes_writing_one_database_lose_nothing_and_see_each_other(url: str, tenant: str) -> None:
    """Four processes add at once, their own notes and the same shared facts: none of theirs lost, each shared
    fact stored once (the same id in every process), and each process then finds every other's notes."""
    n, peers = 40, 4
    children = [
        subprocess.Popen(
            [sys.executable, "-c", PEER, url, tenant, str(me), str(n), str(peers)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        for me in range(peers)
    ]
    lines: list[list[list[str]]] = [[] for _ in children]
    for child, out in zip(children, lines, strict=True):  # until every peer has written all of its memories
        assert child.stdout is not None
        for line in child.stdout:
            if line.strip() == "written":
                break
            out.append(line.split())
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    ends = [child.communicate(timeout=120)[0].split() for child in children]
    assert all(child.returncode == 0 for child in children)
    assert all(end == ["seen", str(n * peers)] for end in ends), ends  # each sees all 4 x 40 notes
    mine = {parts[1] for out in lines for parts in out if parts[0] == "mine"}
    assert len(mine) == n * peers
    shared: dict[str, set[str]] = {}
    for out in lines:
        for parts in out:
            if parts[0] == "shared":
                shared.setdefault(parts[1], set()).add(parts[2])
    assert len(shared) == n and all(len(ids) == 1 for ids in shared.values())  # one id per fact, in every peer
    duplicates = sum(parts[3] == "True" for out in lines for parts in out if parts[0] == "shared")
    assert duplicates == n * (peers - 1)  # stored by one peer, found a duplicate by the three others
    with PostgresBackend(url, tenant=tenant, embedder=FakeEmbedder()) as b:
        assert {r["id"] for r in b.export()} == mine | {i for ids in shared.values() for i in ids}
        assert b.stats()["count"] == n * peers + n
        # a duplicate added by many threads at once is stored once
        results: list[str] = []
        threads = [threading.Thread(target=lambda: results.append(b.add("the same fact").id)) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert len(set(results)) == 1


def test_db_migrate_is_idempotent_and_stats_reads_the_database(postgres: PostgresForTests, tmp_path: Path) -> None:
    """`memserver db migrate --database URL` creates the schema once; `stats --database` reports the engine."""
    url = postgres.database("cli")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_MEMORY_PATH": str(tmp_path)}
    env.pop("MEMSERVER_DATABASE_URL", None)

    def memserver(*args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "memserver", *args]
        return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)

    first, second = memserver("db", "migrate", "--database", url), memserver("db", "migrate", "--database", url)
    latest = pg_schema.latest_version()
    expected = f"schema version {latest} ({latest} migration(s) applied)"
    assert first.returncode == 0 and expected in first.stdout, first.stderr
    assert second.returncode == 0 and "(already current)" in second.stdout
    stats = memserver("stats", "--database", url, "--json")
    assert stats.returncode == 0, stats.stderr
    assert json.loads(stats.stdout) | {"engine": "postgresql", "count": 0} == json.loads(stats.stdout)
    assert "bytes_on_disk" not in json.loads(stats.stdout)  # one collection's figures: the database's are db stats
    whole = memserver("db", "stats", "--database", url)
    assert whole.returncode == 0, whole.stderr
    figures = json.loads(whole.stdout)
    assert figures["scope"] == "the whole database: every tenant" and figures["schema_version"] == latest
    assert figures["bytes_on_disk"] > 0 and figures["tenants"] == 0  # (tenants that stored something; none did)
    missing = memserver("db", "migrate")
    assert missing.returncode == 1 and "needs --database URL" in missing.stderr
