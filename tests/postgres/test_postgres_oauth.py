"""Two people signed in with OAuth share one PostgreSQL database and nothing else (issue 25, item 4): alice's and
bob's access tokens from the test issuer, each used by a real MCP client over HTTP against memserver on loopback,
which logs in to the database as a role that owns nothing (so row-level security binds it, review S4). Each
remembers, each recalls, and neither sees the other's memory; SQL with no tenant condition agrees."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client

from memserver.engines import open_backend
from memserver.postgres.backend import PostgresBackend
from memserver.postgres.tenants import tenant_name
from memserver.server import build_server
from memserver.transports.http import bind_socket, http_app
from memserver.transports.oauth import tenant_of
from tests.conftest import PostgresForTests
from tests.support.fakes import FakeEmbedder
from tests.support.identity import IdentityProvider, Served
from tests.support.pg_cluster import app_member_login

COLLECTION = "team"
BOB = "auth0|bob-42"  # a provider's subject that is no folder name: its tenant is a digest (tenant_of)


@pytest.fixture
def login_url(postgres: PostgresForTests) -> Iterator[str]:
    """A fresh database, as a login role that owns nothing and is only a member of memserver_app."""
    url = postgres.database("oauth_rls")
    PostgresBackend(url, "setup", FakeEmbedder()).close()  # the schema and memserver_app exist from here on
    with app_member_login(url, "memserver_team") as login:
        yield login


@pytest.fixture
def team_url(idp: IdentityProvider, login_url: str, tmp_path: Path) -> Iterator[str]:
    """memserver on loopback, OAuth tokens of `idp` only, each user a tenant of the database; its /mcp URL."""

    def factory(user: str | None) -> Any:
        return open_backend(tmp_path, COLLECTION, embedder=FakeEmbedder(), database=login_url, user=user)

    sock = bind_socket("127.0.0.1", 0)
    served = Served(http_app(build_server(factory, per_user=True), oauth=idp.settings()), sock)
    yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    served.stop()


async def as_user(url: str, token: str, fact: str, query: str) -> tuple[str, str]:
    """Through a real MCP client with the bearer token: remember `fact`, then (recall `query`, list_recent)."""
    async with (
        httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        stored = await session.call_tool("remember", {"content": fact})
        assert not stored.is_error, stored.content
        recalled = await session.call_tool("recall", {"query": query, "mode": "keyword"})
        listed = await session.call_tool("list_recent", {})

    def text(result: Any) -> str:
        return " ".join(getattr(block, "text", "") for block in result.content)

    return text(recalled), text(listed)


def test_two_oauth_users_keep_their_memories_apart_on_postgres(
    idp: IdentityProvider, team_url: str, login_url: str
) -> None:
    alice, bob = idp.token(sub="alice"), idp.token(sub=BOB)

    async def run() -> list[tuple[str, str]]:
        return [
            await as_user(team_url, alice, "Alice's locker code is 4711.", "locker code"),
            await as_user(team_url, bob, "Bob's locker code is 1234.", "locker code"),
            await as_user(team_url, alice, "Alice parks on level 3.", "locker code"),
        ]

    (alice_recall, _), (bob_recall, bob_list), (alice_again, alice_list) = asyncio.run(run())
    assert "4711" in alice_recall and "1234" not in alice_recall
    assert "1234" in bob_recall and "4711" not in bob_recall and "level 3" not in bob_list
    assert "4711" in alice_again and "1234" not in alice_again + alice_list

    # The second wall: as memserver's role, SQL naming no tenant sees the transaction's tenant's rows, or none.
    with psycopg.connect(login_url, autocommit=True, options="-c role=memserver_app") as conn:

        def visible(user: str | None) -> list[str]:
            with conn.transaction():
                if user is not None:
                    tenant = tenant_name(tenant_of(user), COLLECTION)
                    conn.execute("SELECT set_config('memserver.tenant', %s, true)", [tenant])
                rows = conn.execute("SELECT content FROM memserver.memories ORDER BY content")
                return [row[0] for row in rows]

        assert visible("alice") == ["Alice parks on level 3.", "Alice's locker code is 4711."]
        assert visible(BOB) == ["Bob's locker code is 1234."]
        assert visible(None) == []
