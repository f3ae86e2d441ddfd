"""SIGKILL inside PostgreSQL's long operations (issue 27 item 3), with the kill tool of tests/support/kill_points.py.

Migrations: a client migrating a fresh database to the latest schema is killed before each statement it sends and
before each COMMIT (counted first), and after the last. The database is then at one schema version exactly (its
objects are those of a database migrated to that version and no further: nothing half-applied), and the next open
finishes the migrations and works.

Import: `memserver import` of 3,000 records into a database is killed with each batch written but not committed,
then before each next batch (the earlier ones committed), and after the last, each run resuming what the one before
left. Each time the database holds whole batches only, the first ones of the file, agreeing in every answer and in
its derived tables; a run to the end then adds the rest and no duplicates.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memserver.postgres import schema, tenants
from memserver.postgres.backend import IMPORT_BATCH, PostgresBackend
from tests.conftest import PostgresForTests
from tests.support import kill_points
from tests.support.fakes import FakeEmbedder

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="SIGKILL")]

# --- migrations -------------------------------------------------------------------------------------------------

MIGRATE = """
import sys
import psycopg
from memserver.postgres import schema
from tests.support.fakes import FakeEmbedder
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    kill_point.start()
    schema.ensure_schema(conn, FakeEmbedder.model_name, FakeEmbedder.dim)
    kill_point.stop()
print("migrated")
"""
# Every statement the runner sends (autocommit, or inside a migration's transaction) and every COMMIT.
STATEMENTS = "psycopg:Connection.execute,psycopg:Transaction.__exit__"

# What a schema version is made of: memserver's objects, their definitions, the app role's grants, the meta rows
# the migrations write (the model's rows are written after them, on open).
CATALOG = {
    "relations": "SELECT c.relname, c.relkind::text, c.relrowsecurity FROM pg_class c "
    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'memserver' ORDER BY 1",
    "columns": "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, a.attstorage::text, "
    "pg_get_expr(d.adbin, d.adrelid) FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid "
    "AND d.adnum = a.attnum WHERE n.nspname = 'memserver' AND a.attnum > 0 AND NOT a.attisdropped ORDER BY 1, 2",
    "indexes": "SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'memserver' ORDER BY 1",
    "constraints": "SELECT c.conrelid::regclass::text, c.conname, pg_get_constraintdef(c.oid) FROM pg_constraint c "
    "JOIN pg_namespace n ON n.oid = c.connamespace WHERE n.nspname = 'memserver' ORDER BY 1, 2",
    "triggers": "SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger t JOIN pg_class c ON c.oid = t.tgrelid "
    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'memserver' AND NOT t.tgisinternal ORDER BY 1",
    "functions": "SELECT p.proname, md5(p.prosrc) FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace "
    "WHERE n.nspname = 'memserver' ORDER BY 1",
    "policies": "SELECT tablename, policyname, qual, with_check FROM pg_policies WHERE schemaname = 'memserver' "
    "ORDER BY 1, 2",
    "grants": "SELECT table_name, column_name, privilege_type FROM information_schema.column_privileges "
    "WHERE table_schema = 'memserver' AND grantee = 'memserver_app' ORDER BY 1, 2, 3",
}
META_KEYS = ("schema_version", "dim", "keyword")


def _catalog(url: str) -> dict[str, Any]:
    """The database's memserver schema as data (see CATALOG), and its meta rows the migrations write."""
    with psycopg.connect(url, autocommit=True) as conn:
        found: dict[str, Any] = {name: conn.execute(sql).fetchall() for name, sql in CATALOG.items()}  # type: ignore[call-overload]
        found["meta"] = []
        if schema.current_version(conn):
            rows = conn.execute(
                "SELECT key, value FROM memserver.meta WHERE key = ANY(%s) ORDER BY 1", [list(META_KEYS)]
            )
            found["meta"] = rows.fetchall()
    return found


def _check_backend(url: str) -> None:
    """The backend opens on the database and works: add, search both ways, list, count."""
    with PostgresBackend(url, tenant="t", embedder=FakeEmbedder()) as b:
        first = b.add("The boiler was serviced by Ravi", tags=["house"])
        second = b.add("The staging password rotates every Monday")
        assert b.add("The boiler was serviced by Ravi").duplicate
        assert [h.memory.id for h in b.search("boiler serviced", limit=1, mode="keyword")] == [first.id]
        assert [h.memory.id for h in b.search("staging password rotates", limit=1, mode="semantic")] == [second.id]
        assert [m.id for m in b.list_recent()] == [second.id, first.id]
        assert b.stats()["count"] == 2 and b.tag_counts() == {"house": 1}


def test_a_migration_killed_at_each_statement_leaves_one_version_and_the_next_open_finishes(
    postgres: PostgresForTests,
) -> None:
    latest = schema.latest_version()
    versions: dict[int, dict[str, Any]] = {0: {name: [] for name in [*CATALOG, "meta"]}}
    for version in range(1, latest + 1):  # (also creates the app role, so that every run below takes one path)
        url = postgres.database(f"v{version}")
        with psycopg.connect(url, autocommit=True) as conn:
            assert schema.migrate(conn, FakeEmbedder.dim, upto=version) == version
        versions[version] = _catalog(url)
    url = postgres.database("killed")
    run = kill_points.run(MIGRATE, url, label=STATEMENTS, at=None)
    assert run.returncode == 0 and run.lines("migrated") == [""], run.stderr[-2000:]
    points = [(n, "before") for n in range(1, run.calls + 1)] + [(run.calls, "after")]
    seen = set()
    for n, when in points:
        where = f"killed {when} migration step {n} of {run.calls}"
        with psycopg.connect(url, autocommit=True) as conn:  # a fresh database again (pgvector, the role stay)
            conn.execute("DROP SCHEMA IF EXISTS memserver CASCADE")
        killed = kill_points.run(MIGRATE, url, label=STATEMENTS, at=n, when=when)
        assert killed.killed, f"{where}: not killed ({killed.returncode}) {killed.stderr[-2000:]}"
        found = _catalog(url)
        with psycopg.connect(url, autocommit=True) as conn:
            version = schema.current_version(conn)
        assert found == versions[version], f"{where}: the schema is not version {version}'s"
        seen.add(version)
        _check_backend(url)
        assert _catalog(url) == versions[latest], where
    assert seen == set(range(latest + 1)), seen


# --- bulk import ------------------------------------------------------------------------------------------------

RECORDS = 3 * IMPORT_BATCH
CLI = "import sys\nfrom memserver.cli import main\nsys.exit(main(sys.argv[1:]))\n"
BATCHES = "memserver.postgres.writer:Writer.import_batch"  # before each batch (and after the last)
WRITES = "memserver.postgres.writes:write"  # each batch's transaction: after it, the rows are in, not committed


def _export(tmp_path: Path) -> tuple[Path, list[str]]:
    """A JSON-lines export of RECORDS memories with their vectors (the bulk-load path), oldest first, and their
    ids in order."""
    texts = [f"fact {i} about item{i}" for i in range(RECORDS)]
    vectors = FakeEmbedder().embed(texts)
    ids = [uuid.UUID(int=i + 1).hex for i in range(RECORDS)]
    path = tmp_path / "export.jsonl"
    with path.open("w") as out:
        for i, (mid, text, vector) in enumerate(zip(ids, texts, vectors, strict=True)):
            created = f"2024-01-01T{i // 3600:02d}:{i // 60 % 60:02d}:{i % 60:02d}+00:00"
            record = {"id": mid, "content": text, "created_at": created, "vector": vector.tolist()}
            out.write(json.dumps(record) + "\n")
    return path, ids


def _import(url: str, export: Path, **kw: Any) -> kill_points.Run:
    args = ["import", str(export), "--database", url, "--collection", "c"]
    return kill_points.run(CLI, *args, started=True, **kw)


def _check_import(url: str, ids: list[str], count: int, where: str) -> None:
    """The first `count` records stored, whole batches only, and every answer (kill_points.check_store) and the
    derived tables (postings, tags, BM25's statistics) agreeing with them."""
    assert count % IMPORT_BATCH == 0
    with psycopg.connect(url, autocommit=True) as conn:  # (as the import does at its end: see the test below)
        conn.execute("ANALYZE memserver.memories, memserver.postings, memserver.memory_tags, memserver.tenant_stats")
    with PostgresBackend(url, tenant="c", embedder=FakeEmbedder()) as store:
        stored = store.stats()["count"]
        assert stored == count, f"{where}: {stored} memories stored, expected {count}"
        kill_points.check_store(store, set(ids[:count]), set(ids[count:]))
    with psycopg.connect(url, autocommit=True) as conn:  # (the owner: no row-level security)
        derived = conn.execute(
            "SELECT (SELECT count(*) FROM memserver.memories), (SELECT count(DISTINCT seq) FROM memserver.postings), "
            "(SELECT coalesce(sum(docs), 0) FROM memserver.tenant_stats), "
            "(SELECT count(*) FROM (SELECT content_hash FROM memserver.memories GROUP BY 1 HAVING count(*) > 1) d)"
        ).fetchone()
    assert derived == (count, count, count, 0), f"{where}: memories, postings, statistics, duplicates {derived}"


def test_an_import_killed_at_each_batch_keeps_whole_batches_and_runs_again(
    postgres: PostgresForTests, tmp_path: Path
) -> None:
    export, ids = _export(tmp_path)
    url = postgres.database("import_kills")
    batches = RECORDS // IMPORT_BATCH
    for n in range(1, batches + 1):  # each run resumes what the killed one before it left
        killed = _import(url, export, label=WRITES, at=n, when="after")
        assert killed.killed, f"batch {n} uncommitted: not killed ({killed.returncode}) {killed.stderr[-2000:]}"
        _check_import(url, ids, (n - 1) * IMPORT_BATCH, f"killed with batch {n} written, not committed")
        killed = _import(url, export, label=BATCHES, at=n + 1)
        assert killed.killed, f"before batch {n + 1}: not killed ({killed.returncode}) {killed.stderr[-2000:]}"
        _check_import(url, ids, n * IMPORT_BATCH, f"killed before batch {n + 1}")
    killed = _import(url, export, label=BATCHES, at=batches + 1, when="after")
    assert killed.killed and "imported" not in killed.stderr, killed.stderr[-2000:]
    _check_import(url, ids, RECORDS, "killed after the last batch")
    again = _import(url, export, label=BATCHES, at=None)
    assert again.returncode == 0 and "imported 0 new memories" in again.stderr, again.stderr[-2000:]
    assert again.calls == batches + 1  # (the kills above were at every batch there is)
    _check_import(url, ids, RECORDS, "run again to the end")


def test_an_import_leaves_the_planner_statistics_of_what_it_stored(postgres: PostgresForTests) -> None:
    """An import adding more than autovacuum's threshold ANALYZEs. Without it, until autovacuum's next round, the
    planner takes the new thousands of rows for one, and a keyword search joins its candidates in a nested loop,
    n x n (seconds each at 3,000 memories: found by the test above)."""
    url = postgres.database("import_analyzed")
    texts = [f"note {i} on topic{i}" for i in range(320)]
    records = [{"content": t, "vector": v.tolist()} for t, v in zip(texts, FakeEmbedder().embed(texts), strict=True)]
    with PostgresBackend(url, tenant="c", embedder=FakeEmbedder()) as store:
        assert tenants.database_stats(url)["table_rows_estimate"] == 0
        assert store.import_(records[:300]) == 300
        assert tenants.database_stats(url)["table_rows_estimate"] == 300
        assert store.import_(records[300:]) == 20  # (below autovacuum's threshold: left to it)
        assert tenants.database_stats(url)["table_rows_estimate"] == 300
