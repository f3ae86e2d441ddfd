"""The PostgreSQL backend, beyond the contract suite: a schema-1 database migrating in place to the conversation
schema, and the review's MUST FIX items (/work/reviews/postgres.md): concurrent overlapping writes (M1), a
malformed URL (M2), closing one backend of a shared pool (M3), a server that stops answering (M4); and a pool
whose connections are all lent out (S6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memserver.contract.backend import MemoryFilter
from memserver.errors import ConfigError, StoreError
from memserver.postgres import rows, terms
from memserver.postgres import schema as pg_schema
from memserver.postgres.backend import PostgresBackend, open_database
from memserver.postgres.pool import Database, DatabaseUnavailableError
from memserver.postgres.tenants import open_tenant
from tests.conftest import PostgresForTests
from tests.support.fakes import FakeEmbedder
from tests.support.pg_cluster import Cluster

ROOT = Path(__file__).resolve().parents[2]
SECRET_URL = "postgresql//memserver:S3cretPw@db.internal/memories"  # "://" lost: not a URL


@pytest.fixture(scope="module")
def url(postgres: PostgresForTests) -> str:
    return postgres.database("faults")


# --- schema 1 -> 2 in place -------------------------------------------------------------------------------------


def _insert_as_schema_1(conn: psycopg.Connection[Any], tenant: str, content: str, created_at: str) -> str:
    """A row as memserver's schema-1 code wrote it: no occurred_at, no labels, namespace ''."""
    model_id = pg_schema.check_model(conn, FakeEmbedder.model_name, FakeEmbedder.dim)
    indexed = terms.indexed(content, created_at)
    memory_id = uuid.uuid4()
    vector = "[" + ",".join(map(str, FakeEmbedder().embed([content])[0])) + "]"
    conn.execute(
        "INSERT INTO memserver.memories (id, created_at, doc_len, model_id, tenant, content_hash, content, tags, "
        "source, terms, tfs, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, '', %s, %s, %s::vector)",
        [memory_id, created_at, indexed.length, model_id, tenant, rows.content_hash(content), content, ["old"],
         indexed.terms, indexed.tfs, vector],
    )  # fmt: skip
    return memory_id.hex


def test_a_schema_1_database_migrates_in_place(postgres: PostgresForTests) -> None:
    """Rows written before the conversation fields read as occurred_at = created_at in the default namespace, and
    take part in everything: search (their date words too), listings, dedup, replace, namespaces()."""
    url = postgres.database("schema1")
    with psycopg.connect(url, autocommit=True) as conn:
        assert pg_schema.migrate(conn, FakeEmbedder.dim, upto=1) == 1
        assert pg_schema.current_version(conn) == 1
        older = _insert_as_schema_1(conn, "t", "The boiler was serviced by Ravi", "2024-03-14T10:00:00+00:00")
        newer = _insert_as_schema_1(conn, "t", "The gutter needs cleaning", "2024-05-02T10:00:00+00:00")
    with PostgresBackend(url, tenant="t", embedder=FakeEmbedder()) as b:
        with psycopg.connect(url, autocommit=True) as conn:
            assert pg_schema.current_version(conn) == pg_schema.latest_version() == 5
        got = b.get(older)
        assert got is not None and got.occurred_at == got.created_at == "2024-03-14T10:00:00.000000+00:00"
        assert (got.namespace, got.speaker, got.session, got.tags) == ("default", "", "", ("old",))
        assert [m.id for m in b.list_recent()] == [newer, older]
        assert [h.memory.id for h in b.search("what happened on 14 March 2024", limit=1, mode="keyword")] == [older]
        assert b.namespaces() == {"default": 2} and b.tag_counts() == {"old": 2}
        assert b.add("  The boiler was serviced   by Ravi ").duplicate
        update = b.add("The boiler was serviced by Ana", replaces=older)
        assert b.get(older).replaced_by == update.id  # type: ignore[union-attr]
        assert {h.memory.id for h in b.search("boiler serviced", limit=10, mode="keyword")} == {update.id}
        assert b.stats()["count"] == 2 and b.stats()["replaced"] == 1
        assert b.select(MemoryFilter(until="2024-12-31")).ids == [newer]


# --- M1: concurrent overlapping writes ------------------------------------------------------------------------


def _add_many(
    backend: PostgresBackend, batch: list[str], results: dict[str, list[Any]], name: str, errors: list[BaseException]
) -> None:
    try:
        results[name] = backend.add_many(batch)
    except BaseException as exc:  # reported by the caller
        errors.append(exc)


def test_concurrent_overlapping_add_many_neither_deadlocks_nor_duplicates(url: str) -> None:
    """Two writers add the same 200 memories at once, one in reverse order, 20 times: every call succeeds, each
    content is stored once, and both writers get the same id for it (one stored it, the other a duplicate)."""
    with (
        PostgresBackend(url, tenant="m1", embedder=FakeEmbedder()) as a,
        PostgresBackend(url, tenant="m1", embedder=FakeEmbedder()) as b,
    ):
        for round_ in range(20):
            items = [f"round {round_} overlapping memory {i}" for i in range(200)]
            results: dict[str, list[Any]] = {}
            errors: list[BaseException] = []

            threads = [
                threading.Thread(target=_add_many, args=(a, items, results, "a", errors)),
                threading.Thread(target=_add_many, args=(b, list(reversed(items)), results, "b", errors)),
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert not errors, errors
            by_a = {m.content: m.id for m in results["a"]}
            by_b = {m.content: m.id for m in results["b"]}
            assert by_a == by_b
            assert sum(not m.duplicate for m in results["a"] + results["b"]) == 200
        assert a.stats()["count"] == 20 * 200


# --- M2: a malformed URL --------------------------------------------------------------------------------------


def test_a_malformed_url_is_a_config_error_that_never_shows_the_password(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as exc:
        Database(SECRET_URL)
    assert "S3cretPw" not in str(exc.value) and "postgresql://user@host:port/db" in str(exc.value)
    env = {**os.environ, "PYTHONPATH": str(ROOT), "MCP_MEMORY_PATH": str(tmp_path)}
    env.pop("MEMSERVER_DATABASE_URL", None)
    for args in (["stats", "--database", SECRET_URL], ["db", "migrate", "--database", SECRET_URL]):
        run = subprocess.run(
            [sys.executable, "-m", "memserver", *args], capture_output=True, text=True, env=env, timeout=120, cwd=ROOT
        )
        assert run.returncode == 1, run.stderr
        assert "S3cretPw" not in run.stderr + run.stdout
        assert "Traceback" not in run.stderr and len(run.stderr.strip().splitlines()) == 1, run.stderr


# --- M3: closing one backend of a shared pool -----------------------------------------------------------------

CALLS: list[Callable[[PostgresBackend], object]] = [
    lambda b: b.add("after close"),
    lambda b: b.get("0" * 32),
    lambda b: b.search("anything"),
    lambda b: b.list_page(),
    lambda b: b.delete_many([]),
    lambda b: b.revision(),
    lambda b: b.stats(),
    lambda b: list(b.export()),
]


def test_a_closed_backend_refuses_calls_while_its_shared_pool_serves_the_others(url: str) -> None:
    embedder = FakeEmbedder()
    alice = open_tenant(url, "notes", user="alice", embedder=embedder)
    bob = open_tenant(url, "notes", user="bob", embedder=embedder)
    try:
        alice.add("alice's note")
        alice.close()
        alice.close()  # twice is fine
        for call in CALLS:
            with pytest.raises(StoreError, match="closed"):
                call(alice)
        assert bob.add("bob's note").content == "bob's note"  # the pool is still open for bob
        assert [m.content for m in bob.list_recent()] == ["bob's note"]
    finally:
        bob.close()
    with pytest.raises(StoreError, match="closed"):
        bob.search("bob")


# --- M4: a server that stops answering ------------------------------------------------------------------------


def _server_pids(cluster: Cluster) -> list[int]:
    """The postmaster and every process it started (its backends, checkpointer, walwriter ...)."""
    postmaster = int((cluster.data / "postmaster.pid").read_text().split()[0])
    pids = [postmaster]
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == postmaster:
                pids.append(int(entry.name))
    return pids


def _finishes(call: Callable[[], object], within: float = 120.0) -> BaseException | None:
    """Run `call` in a thread; the exception it raised (None if none). Fails the test if it does not return."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(within)
    assert outcome, f"the call did not return within {within} s"
    return outcome[0]


@pytest.mark.slow
def test_a_frozen_server_fails_calls_at_the_deadline_then_recovers() -> None:
    """SIGSTOP every server process (the host still answers TCP): a call fails with a message naming the server
    once the client's deadline passes, instead of blocking forever; after SIGCONT the same backend works again.
    The server-side timeouts are set on every pooled connection."""
    cluster = Cluster.start()
    try:
        db_url = cluster.create_database("frozen")
        db = open_database(db_url, FakeEmbedder.model_name, FakeEmbedder.dim, call_deadline=2.0)
        backend = PostgresBackend(tenant="f", embedder=FakeEmbedder(), database=db)
        backend.add("before the freeze")
        settings = db.run("f", [("SELECT current_setting('statement_timeout'), current_setting('lock_timeout')", [])])
        assert settings[0].fetchone() == ("30s", "5s")
        pids = _server_pids(cluster)
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        try:
            failed = _finishes(lambda: backend.search("before"))
            assert isinstance(failed, DatabaseUnavailableError), failed
            assert f"127.0.0.1:{cluster.port}/frozen" in str(failed)
            failed = _finishes(lambda: backend.add("during the freeze"))
            assert isinstance(failed, DatabaseUnavailableError), failed
        finally:
            for pid in pids:
                os.kill(pid, signal.SIGCONT)
        assert _finishes(lambda: backend.add("after the freeze")) is None
        assert "before the freeze" in {m.content for m in backend.list_recent(limit=10)}
        backend.close()
        db.close()
    finally:
        cluster.remove()


# --- revision(): every change moves it ------------------------------------------------------------------------


def test_a_pool_whose_connections_are_all_busy_says_so_rather_than_unreachable(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from memserver.postgres import pool

    PostgresBackend(url, "setup", FakeEmbedder()).close()  # the schema exists
    monkeypatch.setattr(pool, "CALL_TIMEOUT_S", 0.5)  # the wait for a connection, read when the pool opens
    db = Database(url, max_size=1)
    with db.connect_owner() as owner:
        db.open(owner)
    holding, release = threading.Event(), threading.Event()

    def hold(conn: psycopg.Connection[Any]) -> None:
        holding.set()
        release.wait(30)

    holder = threading.Thread(target=db.transact, args=("busy", hold))
    holder.start()
    try:
        assert holding.wait(30)
        with pytest.raises(DatabaseUnavailableError) as caught:
            db.run("busy", [("SELECT 1", [])])
        message = str(caught.value)
        assert "all 1 connections of this process to PostgreSQL at" in message and "are busy" in message
        assert "unreachable" not in message and "nothing was changed" in message
    finally:
        release.set()
        holder.join()
    assert db.run("busy", [("SELECT 1", [])])[0].fetchone() == (1,)  # free again
    db.close()


def test_revision_moves_on_forgetting_history_and_on_compaction(url: str) -> None:
    """Forgetting a replaced memory changes neither the highest seq nor the current count; the change counter
    moves anyway, and so does a compaction that purges it."""
    with PostgresBackend(url, tenant="revision", embedder=FakeEmbedder()) as b:
        old = b.add("the standup is at 9:30")
        b.add("the standup is at 10:00", replaces=old.id)
        seen = [b.revision()]
        assert b.delete(old.id)
        seen.append(b.revision())
        b.compact()
        seen.append(b.revision())
        assert len(set(seen)) == 3, seen
        assert b.revision() == seen[-1]  # nothing changed: the same token
