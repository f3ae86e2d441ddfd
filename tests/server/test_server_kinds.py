"""Kinds, due dates, pins, archive and done through a real MCP client session (issue 24): remember kind/due,
recall and list_recent filtered by kind and include_archived, and the mark tool."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client

from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.support.fakes import FakeEmbedder


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore(path=tmp_path, embedder=FakeEmbedder()) as opened:
        yield opened


@pytest.fixture
async def client(store: MemoryStore) -> AsyncIterator[Client]:
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        yield client


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    assert result.structured_content is not None
    return result.structured_content


@pytest.mark.anyio
async def test_remember_kind_and_due_then_recall_and_list_by_kind(client: Client) -> None:
    task = await call(client, "remember", {"content": "Renew the car insurance", "kind": "task", "due": "2026-12-20"})
    await call(client, "remember", {"content": "The car is insured with Acme"})
    found = (await call(client, "recall", {"query": "car insurance", "kind": "task"}))["results"]
    assert [(r["id"], r["kind"], r["due"]) for r in found] == [(task["id"], "task", "2026-12-20")]
    listed = (await call(client, "list_recent", {"kind": "note"}))["memories"]
    assert [m["content"] for m in listed] == ["The car is insured with Acme"]
    assert "kind" not in listed[0]  # a note shows no kind: results stay compact


@pytest.mark.anyio
async def test_mark_pins_archives_and_completes(client: Client) -> None:
    stored = await call(client, "remember", {"content": "Water the plants", "kind": "task"})
    done = await call(client, "mark", {"memory_id": stored["id"], "as": "done"})
    assert done["status"] == "changed" and done["replaces"] == stored["id"]
    again = await call(client, "mark", {"memory_id": done["id"], "as": "done"})
    assert again == {"id": done["id"], "status": "unchanged"}
    archived = await call(client, "mark", {"memory_id": done["id"], "as": "archived"})
    assert (await call(client, "recall", {"query": "plants"}))["results"] == []
    shown = (await call(client, "recall", {"query": "plants", "include_archived": True}))["results"]
    assert [(r["id"], r.get("done"), r.get("archived")) for r in shown] == [(archived["id"], True, True)]
    assert (await call(client, "list_recent", {}))["memories"] == []
    missing = await call(client, "mark", {"memory_id": "0" * 32, "as": "pinned"})
    assert missing["status"] == "not_found"


@pytest.mark.anyio
async def test_bad_kind_and_mark_of_history_are_tool_errors(client: Client) -> None:
    bad = await client.call_tool("recall", {"query": "x", "kind": "chore"})
    assert bad.is_error and "must be one of fact, preference" in bad.content[0].text
    stored = await call(client, "remember", {"content": "A stone on the path"})
    await call(client, "mark", {"memory_id": stored["id"], "as": "pinned"})
    history = await client.call_tool("mark", {"memory_id": stored["id"], "as": "archived"})
    assert history.is_error and "is history" in history.content[0].text


@pytest.mark.anyio
async def test_the_kinds_resource_counts_by_kind_and_archived(client: Client) -> None:
    first = await call(client, "remember", {"content": "Alice is the team lead", "kind": "person"})
    await call(client, "remember", {"content": "Ship the release", "kind": "task"})
    await call(client, "remember", {"content": "Ship the docs", "kind": "task"})
    await call(client, "mark", {"memory_id": first["id"], "as": "archived"})
    listed = {str(r.uri) for r in (await client.list_resources()).resources}
    assert "memory://kinds" in listed
    read = await client.read_resource("memory://kinds")
    assert json.loads(read.contents[0].text) == {"kinds": {"task": 2}, "archived": 1}
