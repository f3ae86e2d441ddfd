"""memory://health and memory://overview over a real MCP client session (the SDK's Client, in process) against the
local store with the fake embedder: both are listed, read as JSON, and the overview takes ?namespace=."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.support.fakes import FakeEmbedder

TIMEOUT = 10


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore(path=tmp_path, embedder=FakeEmbedder()) as opened:
        yield opened


async def read(client: Client, uri: str) -> dict[str, Any]:
    with anyio.fail_after(TIMEOUT):
        contents = (await client.read_resource(uri)).contents
    assert isinstance(contents[0], types.TextResourceContents) and contents[0].mime_type == "application/json"
    return json.loads(contents[0].text)


@pytest.mark.anyio
async def test_health_and_overview_are_listed_and_read(store: MemoryStore) -> None:
    store.add("The boiler is serviced in May", tags=["home"], speaker="Sam", occurred_at="2025-05-02")
    store.add("Work note", namespace="work", tags=["ops"])
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        listed = {r.uri for r in (await client.list_resources()).resources}
        assert {"memory://health", "memory://overview"} <= listed
        health = await read(client, "memory://health")
        assert health["engine"] == "local" and health["index"]["memories"] == 2
        assert {c["name"] for c in health["checks"]} >= {"model", "index", "checkpoint", "compaction", "disk"}
        overview = await read(client, "memory://overview")
        assert overview["count"] == 1 and overview["tags"] == {"home": 1} and overview["speakers"] == {"Sam": 1}
        assert overview["months"] == {"2025-05": 1} and overview["this_week"]["added"] == 1
        work = await read(client, "memory://overview?namespace=work")
        assert work["namespace"] == "work" and work["tags"] == {"ops": 1}
        task = store.add("Book the chimney sweep", kind="task", namespace="work")
        pin = store.pin(task.id, namespace="work")
        assert pin is not None
        work = await read(client, "memory://overview?namespace=work")
        assert work["by_kind"] == {"note": 1, "task": 1} and work["pinned"] == [
            {"id": pin.id, "content": "Book the chimney sweep"}
        ]
