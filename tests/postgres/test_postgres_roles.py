"""Row-level security as the second wall depends on the role memserver logs in as (review S4): through a login role
that is only a member of memserver_app, no statement can reach another tenant's rows, not even one that resets its
role; a superuser login is warned about at open; and whatever a statement SETs ends with its borrower."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from memserver.postgres.backend import PostgresBackend
from memserver.postgres.pool import Database
from memserver.postgres.tenants import database_stats
from tests.conftest import PostgresForTests
from tests.support.fakes import FakeEmbedder
from tests.support.pg_cluster import app_member_login

POOL_LOG = "memserver.postgres.security"  # (not forwarded to MCP clients: client_log.py)


@pytest.fixture(scope="module")
def url(postgres: PostgresForTests) -> str:
    url = postgres.database("roles")
    PostgresBackend(url, "setup", FakeEmbedder()).close()  # the schema and memserver_app exist from here on
    return url


@pytest.fixture(scope="module")
def web_url(url: str) -> Iterator[str]:
    """The URL as a fresh login role that owns nothing and is only a member of memserver_app."""
    with app_member_login(url) as login:
        yield login


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == POOL_LOG and r.levelno == logging.WARNING]


def test_a_non_owner_login_role_reaches_one_tenant_even_when_a_statement_resets_its_role(
    web_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, POOL_LOG)
    with PostgresBackend(web_url, "web/a", FakeEmbedder()) as a, PostgresBackend(web_url, "web/b", FakeEmbedder()) as b:
        a.add("Alice's locker code is 4711.")
        b.add("Bob's locker code is 1234.")
        assert [m.content for m in a.list_recent()] == ["Alice's locker code is 4711."]
        assert [h.memory.content for h in b.search("locker code", mode="keyword")] == ["Bob's locker code is 1234."]
    assert _warnings(caplog) == []
    with psycopg.connect(web_url, autocommit=True, options="-c role=memserver_app") as conn:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("SET ROLE postgres")
        conn.execute("SET ROLE NONE")  # the login role itself: it inherits memserver_app's rights, and its policies
        assert conn.execute("SELECT current_user").fetchone() == (conninfo_to_dict(web_url)["user"],)
        sql = "SELECT content FROM memserver.memories WHERE content LIKE '%%locker%%'"
        assert conn.execute(sql).fetchall() == []  # no tenant set: nothing
        with conn.transaction():
            conn.execute("SELECT set_config('memserver.tenant', 'web/a', true)")
            assert conn.execute(sql).fetchall() == [("Alice's locker code is 4711.",)]


def test_a_superuser_login_role_is_warned_about_once_per_database(
    postgres: PostgresForTests, caplog: pytest.LogCaptureFixture
) -> None:
    """The first open of a database warns; the next ones (every CLI command is one) do not: the database
    remembers it (issue 23, item 20)."""
    url = postgres.database("warned_once")
    caplog.set_level(logging.WARNING, POOL_LOG)
    for collection in ("first", "second", "first"):
        with PostgresBackend(url, collection, FakeEmbedder()):
            pass
    (warning,) = _warnings(caplog)
    assert "'postgres', which is a superuser" in warning and "owns memserver's tables" in warning
    assert "docs/scale-out.md" in warning


def test_a_role_or_setting_a_statement_changes_ends_with_its_borrower(url: str) -> None:
    """A SET ROLE (to the superuser the login role is) and a SET statement_timeout do not reach the next call."""
    db = Database(url, max_size=1)
    with db.connect_owner() as owner:
        db.open(owner)
    try:
        current = "SELECT current_user, current_setting('statement_timeout')"
        assert db.run("t", [(current, [])])[0].fetchone() == ("memserver_app", "30s")
        db.run("t", [("SET ROLE postgres", []), ("SET statement_timeout = 0", [])])
        for _ in range(5):
            assert db.run("t", [(current, [])])[0].fetchone() == ("memserver_app", "30s")
    finally:
        db.close()


def test_db_stats_counts_tenants_only_for_a_role_that_sees_them_all(url: str, web_url: str) -> None:
    """`memserver db stats` through the non-owner role: the catalog's figures, but no tenant count (row-level
    security would make it 0, which would be untrue); through the owner, the tenants that stored something."""
    with PostgresBackend(web_url, "counted", FakeEmbedder()) as backend:
        backend.add("One memory, so that one tenant has stored something.")
    limited, whole = database_stats(web_url), database_stats(url)
    assert limited["tenants"] is None and whole["tenants"] is not None and whole["tenants"] >= 1
    assert limited["bytes_on_disk"] > 0 and whole["bytes_on_disk"] > 0  # (the catalog: any role may read it)
