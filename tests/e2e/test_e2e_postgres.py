"""`memserver serve --database URL` as a subprocess, over stdio and HTTP, on a real PostgreSQL with the real model:
the same tool calls and answers as the local store, two servers sharing one database, and per-user isolation
through MCP over HTTP with two tokens."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal
from jsonschema import Draft202012Validator
from mcp.shared.exceptions import MCPError

from tests.conftest import PostgresForTests
from tests.e2e.servers import SERVE, Live, http_server, http_session, server_env, stdio_session

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"
FACTS = [
    ("The user's dog is a border collie named Pixel.", ["pets"]),
    ("The user is allergic to peanuts.", ["health"]),
    ("Deploys to production happen on Thursdays after 2pm.", ["work", "ops"]),
]


def structured(result: types.CallToolResult) -> dict:
    assert not result.is_error, result.content
    assert isinstance(result.content[0], types.TextContent)
    assert json.loads(result.content[0].text) == result.structured_content
    return result.structured_content


@pytest.fixture(scope="module")
def database(postgres: PostgresForTests) -> str:
    return postgres.database("e2e_stdio")


@pytest.fixture(scope="module")
def stdio(portal: BlockingPortal, database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    data_dir = tmp_path_factory.mktemp("pg-stdio")
    log = data_dir / "stdio.log"
    with stdio_session(portal, data_dir, log, env={"MEMSERVER_DATABASE_URL": database}) as live:
        yield {"live": live, "data_dir": data_dir, "log": log}


def test_stdio_round_trip_on_postgresql(stdio: dict) -> None:
    """remember / recall / list_recent / forget over stdio answer as on the local store, schemas included."""
    live: Live = stdio["live"]
    schemas = {t.name: t.output_schema for t in live.list_tools().tools}

    def run(name: str, args: dict) -> dict:
        payload = structured(live.call_tool(name, args))
        Draft202012Validator(schemas[name]).validate(payload)
        return payload

    ids = [run("remember", {"content": c, "tags": t, "source": "e2e"})["id"] for c, t in FACTS]
    assert run("remember", {"content": FACTS[0][0]}) == {"id": ids[0], "status": "duplicate"}
    hits = run("recall", {"query": "what kind of dog does the user have?", "limit": 2})["results"]
    assert hits[0]["id"] == ids[0] and hits[0]["score"] > 0.4 and hits[0]["source"] == "e2e"
    assert [h["id"] for h in run("recall", {"query": "dog", "tags": ["ops"]})["results"]] == [ids[2]]
    assert run("recall", {"query": "Thursdays", "mode": "keyword"})["results"][0]["id"] == ids[2]
    assert [m["id"] for m in run("list_recent", {"limit": 3})["memories"]] == ids[::-1]
    assert run("forget", {"memory_id": ids[1]}) == {"id": ids[1], "deleted": True}
    assert run("forget", {"memory_id": ids[1]}) == {"id": ids[1], "deleted": False}
    result = live.call_tool("recall", {"query": "x", "limit": 0})
    assert result.is_error and result.content[0].text == "limit: Input should be greater than or equal to 1"
    stats = json.loads(live.read_resource("memory://stats").contents[0].text)
    assert stats["engine"] == "postgresql" and stats["count"] == 2 and stats["model"].endswith("all-MiniLM-L6-v2")
    memory = json.loads(live.read_resource(f"memory://memories/{ids[0]}").contents[0].text)
    assert memory["content"] == FACTS[0][0]
    assert {"tag": "ops", "count": 1, "uri": "memory://tags/ops"} in json.loads(
        live.read_resource("memory://tags").contents[0].text
    )["tags"]


def test_two_servers_on_one_database_see_each_others_writes(portal: BlockingPortal, stdio: dict, database: str) -> None:
    live: Live = stdio["live"]
    with stdio_session(portal, stdio["data_dir"], stdio["log"], env={"MEMSERVER_DATABASE_URL": database}) as other:
        mine = structured(live.call_tool("remember", {"content": "Shared: the wifi password is on the fridge."}))
        seen = structured(other.call_tool("recall", {"query": "where is the wifi password?", "limit": 1}))
        assert seen["results"][0]["id"] == mine["id"]
        assert structured(other.call_tool("forget", {"memory_id": mine["id"]}))["deleted"] is True
        assert mine["id"] not in [m["id"] for m in structured(live.call_tool("list_recent", {}))["memories"]]


def test_export_from_postgresql_imports_into_the_local_store_and_back(
    stdio: dict, database: str, tmp_path: Path, postgres: PostgresForTests
) -> None:
    """export --database | import (local) | export --vectors | import --database elsewhere: same records."""
    env = server_env(stdio["data_dir"])
    dump = tmp_path / "pg.jsonl"
    run = {"env": env, "capture_output": True, "text": True, "timeout": 120}
    done = subprocess.run([*SERVE[:-1], "export", "--database", database, "-o", str(dump)], **run)  # type: ignore[call-overload]
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in dump.read_text().splitlines()]
    assert records and all(
        r.keys() == {"id", "content", "created_at", "occurred_at", "tags", "source"} for r in records
    )
    local = tmp_path / "local"
    done = subprocess.run([*SERVE[:-1], "import", "--data-dir", str(local), str(dump)], **run)  # type: ignore[call-overload]
    assert done.returncode == 0, done.stderr
    with_vectors = tmp_path / "local.jsonl"
    args = ["export", "--data-dir", str(local), "--vectors", "-o", str(with_vectors)]
    assert subprocess.run([*SERVE[:-1], *args], **run).returncode == 0  # type: ignore[call-overload]
    target = postgres.database("e2e_moved")
    args = ["import", "--database", target, "--collection", "moved", str(with_vectors)]
    done = subprocess.run([*SERVE[:-1], *args], **run)  # type: ignore[call-overload]
    assert done.returncode == 0 and f"imported {len(records)} new memories" in done.stderr, done.stderr
    back = subprocess.run(  # type: ignore[call-overload]
        [*SERVE[:-1], "export", "--database", target, "--collection", "moved"], **run
    )
    assert [json.loads(line) for line in back.stdout.splitlines()] == records


@pytest.fixture(scope="module")
def http(postgres: PostgresForTests, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    url = postgres.database("e2e_http")
    data_dir = tmp_path_factory.mktemp("pg-http")
    with http_server(data_dir, "--database", url, MEMSERVER_TOKENS=f"alice:{ALICE}, bob:{BOB}") as running:
        yield running


def test_users_are_isolated_on_postgresql(http: object, portal: BlockingPortal) -> None:
    """Bob can neither recall, list, read, forget nor tag-browse Alice's memories, even by id."""
    url = http.url  # type: ignore[attr-defined]
    with http_session(portal, url, ALICE) as alice, http_session(portal, url, BOB) as bob:
        secret = "Alice's locker code is 4711."
        stored = structured(alice.call_tool("remember", {"content": secret, "tags": ["private"]}))
        found = structured(bob.call_tool("recall", {"query": "locker code", "limit": 50}))["results"]
        assert secret not in [hit["content"] for hit in found]
        assert structured(bob.call_tool("recall", {"query": "4711", "mode": "keyword"}))["results"] == []
        assert structured(bob.call_tool("list_recent", {"limit": 100}))["memories"] == []
        assert structured(bob.call_tool("remember", {"content": secret}))["status"] == "stored"  # his own copy
        assert structured(bob.call_tool("forget", {"memory_id": stored["id"]}))["deleted"] is False
        with pytest.raises(MCPError) as caught:
            bob.read_resource(f"memory://memories/{stored['id']}")
        assert caught.value.error.code == types.INVALID_PARAMS
        assert json.loads(bob.read_resource("memory://tags/private").contents[0].text)["memories"] == []
        mine = structured(alice.call_tool("recall", {"query": "locker code", "limit": 1}))["results"]
        assert mine[0]["id"] == stored["id"]
        texts = [s.read_resource("memory://stats").contents[0].text for s in (alice, bob)]
        stats = [json.loads(text) for text in texts]
        assert [s["tenant"] for s in stats] == ["alice/personal_memory", "bob/personal_memory"]
        assert [s["count"] for s in stats] == [1, 1]
        # the user's own figures only: not the database's host, nor its size or rows over every tenant (review S5)
        assert all(not {"database", "path", "table_rows", "bytes_on_disk"} & s.keys() for s in stats)
        assert all("127.0.0.1" not in text for text in texts)


def test_an_unreachable_database_is_one_line_naming_the_host(tmp_path: Path) -> None:
    done = subprocess.run(
        [*SERVE, "--http", "--port", "0", "--database", "postgresql://memserver:pw@127.0.0.1:1/memories"],
        env=server_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith("memserver: error: cannot connect to PostgreSQL at 127.0.0.1:1/memories")
    assert "Traceback" not in done.stderr and "pw" not in done.stderr.replace("port", "")
