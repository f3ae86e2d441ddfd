"""Kinds, due dates, pins, archive and done through a real MCP client session (issue 24): remember kind/due,
recall and list_recent filtered by kind and include_archived, and the mark tool; pinned memories first ("always
know this") in the recall-context prompt and the chat recall(), once each, within their limits; the kind
completions."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp.client import Client

from memserver.contract import inputs
from memserver.features import chat, prompts
from memserver.features.tool_sets import chat_tools
from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.support.fakes import FakeEmbedder

RECALL = types.PromptReference(type="ref/prompt", name="recall-context")


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


# --- pinned first, and the kind completions ------------------------------------------------------------------------


async def prompt_text(client: Client, arguments: dict[str, str]) -> str:
    result = await client.get_prompt("recall-context", arguments)
    content = result.messages[0].content
    assert isinstance(content, types.TextContent)
    return content.text


def numbered(text: str) -> list[str]:
    return [line for line in text.splitlines() if line[:1].isdigit()]


@pytest.mark.anyio
async def test_recall_context_puts_pinned_memories_first_once(client: Client) -> None:
    await call(client, "remember", {"content": "The garden shed roof leaks in the north corner"})
    allergy = await call(client, "remember", {"content": "The user is allergic to peanuts", "kind": "fact"})
    shed = await call(client, "remember", {"content": "The garden shed key hangs by the back door"})
    await call(client, "remember", {"content": "Always answer in British English", "namespace": "work"})
    for memory in (allergy, shed):
        await call(client, "mark", {"memory_id": memory["id"], "as": "pinned"})
    lines = numbered(await prompt_text(client, {"topic": "garden shed"}))
    # the pinned ones first (newest first), the key not again among the hits; the other namespace's pin is not here
    assert [line.split(") ", 1)[1] for line in lines] == [
        "The garden shed key hangs by the back door",
        "The user is allergic to peanuts",
        "The garden shed roof leaks in the north corner",
    ]
    assert "(" in lines[1] and "pinned, fact" in lines[1]
    # a topic with no hit at all still gets the pinned memories; with a kind, only pins of that kind
    assert len(numbered(await prompt_text(client, {"topic": "zebra crossings"}))) == 2
    facts = numbered(await prompt_text(client, {"topic": "garden shed", "kind": "fact"}))
    assert [line.split(") ", 1)[1] for line in facts] == ["The user is allergic to peanuts"]


@pytest.mark.anyio
async def test_many_pins_stay_within_the_prompts_limit(client: Client, store: MemoryStore) -> None:
    stored = store.add_many([{"content": f"Standing rule number {i}", "pinned": True} for i in range(15)])
    assert all(m.pinned for m in stored)
    lines = numbered(await prompt_text(client, {"topic": "standing rule"}))
    assert len(lines) == prompts.RECALL_LIMIT and lines[0].endswith("Standing rule number 14")


@pytest.mark.anyio
async def test_a_bad_kind_for_the_prompt_is_a_protocol_error(client: Client) -> None:
    with pytest.raises(Exception, match="must be one of fact"):
        await client.get_prompt("recall-context", {"topic": "x", "kind": "chore"})


@pytest.mark.anyio
async def test_the_kind_argument_completes_to_the_kinds(client: Client) -> None:
    everything = (await client.complete(RECALL, {"name": "kind", "value": ""})).completion
    assert everything.values == list(inputs.KINDS) and everything.has_more is False
    some = (await client.complete(RECALL, {"name": "kind", "value": "P"})).completion
    assert some.values == ["preference", "person"] and some.total == 2


@pytest.mark.anyio
async def test_chat_recall_shows_pinned_memories_first_within_the_budget(store: MemoryStore) -> None:
    pinned = store.add("The user's name is Priya; she is vegetarian", namespace=inputs.DEFAULT_NAMESPACE)
    store.pin(pinned.id)
    store.add_many([{"content": f"Rule {i}: " + "keep answers short " * 20, "pinned": True} for i in range(30)])
    options = chat.ChatOptions(budget=2000)
    async with Client(build_server(lambda user: store, tool_set=chat_tools(options)), mode="legacy") as client:
        await client.call_tool("remember", {"role": "user", "message": "What should I cook for Priya tonight?"})
        few = await client.call_tool("recall", {})
        for i in range(20):
            await client.call_tool("remember", {"role": "user", "message": f"Turn {i}: " + "more about dinner " * 9})
        many = await client.call_tool("recall", {})
    blocks = []
    for result in (few, many):
        content = result.content[0]
        assert isinstance(content, types.TextContent) and len(content.text) <= options.budget
        blocks.append(content.text.split("\n\n"))
    for sections in blocks:  # first, newest first; Priya's (older) pin only when there is room
        assert sections[1].startswith(chat.PINNED_HEADING) and "Rule 29" in sections[1]
        assert sections[-1].startswith(chat.HEADINGS["recent"])
    assert "cook for Priya" in blocks[0][-1] and len(blocks[0][1]) > options.budget * chat.PINNED_SHARE  # unused room
    assert len(blocks[1][1]) <= options.budget * chat.PINNED_SHARE  # its share: the rest is the others'
    assert len(blocks[1][-1]) > options.budget * 0.3
