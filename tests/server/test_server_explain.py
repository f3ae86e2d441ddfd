"""recall(explain=true) over an MCP client session (the SDK's Client, in process) against a real MemoryStore with
the fake embedder: each result says why it ranked, the query says how it was read, and without explain the
answer is what it always was."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from memserver.features import tools
from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.support.fakes import FakeEmbedder

TURNS = [
    ("Tom", "S1", "2024-05-03T10:00:00", "Are you still thinking about a boat?"),
    ("Maya", "S1", "2024-05-03T10:01:00", "I put a deposit on a small sailing boat yesterday."),
    ("Tom", "S1", "2024-05-03T10:02:00", "I sold my boat last spring, never again."),
    ("Maya", "S2", "2024-06-01T18:00:00", "The marina sent the mooring invoice today."),
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore(tmp_path, "explain", embedder=FakeEmbedder()) as s:
        for speaker, session, at, text in TURNS:
            s.add(text, speaker=speaker, session=session, occurred_at=at)
        yield s


@pytest.fixture
async def client(store: MemoryStore) -> AsyncIterator[Client]:
    async with Client(build_server(lambda user: store), mode="legacy") as c:
        yield c


async def recall(client: Client, **arguments: Any) -> dict[str, Any]:
    with anyio.fail_after(10):
        result = await client.call_tool("recall", arguments)
    assert not result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    payload: dict[str, Any] = json.loads(block.text)
    assert payload == result.structured_content
    Draft202012Validator(tools.RECALL.output_schema).validate(payload)
    return payload


@pytest.mark.anyio
async def test_explain_says_why_each_result_ranked(client: Client) -> None:
    """A query naming Maya: her boat turn comes first with the speaker boost, its matched stemmed terms and both
    sides' ranks; the query object shows the terms and the speaker it named."""
    payload = await recall(client, query="What boat did Maya buy?", limit=3, explain=True)
    first = payload["results"][0]
    assert first["content"].startswith("I put a deposit")
    why = first["explain"]
    assert why["rank"] == 1 and why["fused"] > 0
    assert why["boosts"]["speaker"] == {"name": "Maya", "value": 0.3}
    assert why["semantic"]["rank"] >= 1 and why["semantic"]["cosine"] == first["score"]
    assert why["keyword"]["terms"] == ["boat", "maya"] and why["keyword"]["rank"] >= 1  # (the speaker is a term)
    assert "previous_turn" in why["semantic"]  # Tom's question before it is context
    assert payload["query"]["speakers"] == ["Maya"] and payload["query"]["terms"] == ["boat", "maya", "buy"]
    assert [r["explain"]["rank"] for r in payload["results"]] == [1, 2, 3]


@pytest.mark.anyio
async def test_without_explain_the_answer_has_its_old_shape(client: Client) -> None:
    """explain is off by default: no 'explain' per result, no 'query'; the same results and scores as with it."""
    plain = await recall(client, query="What boat did Maya buy?", limit=3)
    explained = await recall(client, query="What boat did Maya buy?", limit=3, explain=True)
    assert "query" not in plain and all("explain" not in r for r in plain["results"])
    assert plain["results"] == [{k: v for k, v in r.items() if k != "explain"} for r in explained["results"]]
    assert plain.get("note") == explained.get("note")


@pytest.mark.anyio
async def test_keyword_and_semantic_modes_explain_their_side(client: Client) -> None:
    keyword = await recall(client, query="mooring invoices", mode="keyword", explain=True)
    (hit,) = keyword["results"]
    assert hit["explain"] == {
        "rank": 1,
        "keyword": {"rank": 1, "bm25": hit["explain"]["keyword"]["bm25"], "terms": ["moor", "invoic"]},
    }
    assert keyword["query"] == {"mode": "keyword", "terms": ["moor", "invoic"]}
    semantic = await recall(client, query="mooring invoice", mode="semantic", limit=1, explain=True)
    assert semantic["results"][0]["explain"]["semantic"]["rank"] == 1


@pytest.mark.anyio
async def test_explain_must_be_a_boolean(client: Client) -> None:
    with anyio.fail_after(10):
        result = await client.call_tool("recall", {"query": "boat", "explain": "yes"})
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, types.TextContent) and "explain" in block.text
