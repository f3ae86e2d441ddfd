"""What the memory tool set costs a conversation and what it says: tools/list within its byte budget with the
checks kept exact, compact results with resource links, icons, cache hints, errors in the tools' words, and the
prompts' dates. Over the SDK's Client, on the local store with the fake embedder."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import Client

from benchmarks.tool_list_size import BUDGET
from memserver.features import apps, prompts, resources, tool_results, tools
from memserver.local.store import MemoryStore
from memserver.server import LISTS_TTL_MS, build_server
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


def wire(value: Any) -> str:
    return json.dumps(value.model_dump(mode="json", by_alias=True, exclude_none=True), separators=(",", ":"))


@pytest.mark.anyio
async def test_the_memory_tools_fit_the_budget_and_advertise_the_checked_schemas_less_the_strict_keywords(
    client: Client,
) -> None:
    listed = (await client.list_tools()).tools
    size = len(("[" + ",".join(wire(tool) for tool in listed) + "]").encode())
    assert size <= BUDGET, size
    assert {tool.name for tool in listed} == {*tools.CHECKED, "browse_memories"}
    for tool in listed:
        assert not {"pattern", "minLength", "maxLength"} & set(json.dumps(tool.input_schema).split('"'))
        if tool.name not in tools.CHECKED:
            assert tool.input_schema == tools.advertised(apps.CHECKED_INPUT)  # browse_memories (apps.py)
            continue
        assert tool.input_schema == tools.advertised(tools.CHECKED[tool.name])
        Draft202012Validator.check_schema(tools.CHECKED[tool.name])
        assert tool.output_schema == tool_results.outline(tool_results.RESULTS[tool.name])


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tool", "arguments", "field"),
    [
        ("recall", {"query": "x", "since": "2026-02-30"}, "since"),  # no such day: the pattern is the validator's
        ("recall", {"query": "   "}, "query"),
        ("remember", {"content": "x", "tags": ["a\nb"]}, "tags.0"),
        ("list_recent", {"cursor": " "}, "cursor"),
        ("forget_matching", {"namespace": "a b"}, "namespace"),
    ],
)
async def test_what_the_advertised_schema_leaves_out_is_still_checked(
    client: Client, tool: str, arguments: dict[str, Any], field: str
) -> None:
    """Arguments the advertised schema allows and the whole one refuses: a tool error naming the field."""
    Draft202012Validator(tools.TOOLS_BY_NAME[tool].input_schema).validate(arguments)  # advertised: allowed
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    assert result.content[0].text.startswith(f"{field}: "), result.content[0].text


@pytest.mark.anyio
async def test_results_carry_no_empty_field_and_link_each_memory(client: Client, store: MemoryStore) -> None:
    backdated = store.add("The birthday party is on the 25th.", occurred_at="2026-11-25", tags=["family"])
    plain = store.add("The birthday cake is chocolate.", namespace="user:ana")
    found = (await client.call_tool("recall", {"query": "birthday party"})).structured_content["results"][0]
    assert found["id"] == backdated.id
    assert found["occurred_at"] == "2026-11-25T00:00:00Z" and found["created_at"].endswith("Z")
    assert "source" not in found
    for name, arguments, key in [
        ("recall", {"query": "birthday cake", "namespace": "user:ana"}, "results"),
        ("list_recent", {"namespace": "user:ana"}, "memories"),
    ]:
        result = await client.call_tool(name, arguments)
        (memory,) = result.structured_content[key]
        assert memory["id"] == plain.id and "occurred_at" not in memory and "tags" not in memory
        text, link = result.content
        assert json.loads(text.text) == result.structured_content
        assert isinstance(link, types.ResourceLink)
        assert link.uri == f"memory://memories/{plain.id}?namespace=user%3Aana" and link.mime_type == resources.JSON
        read = (await client.read_resource(link.uri)).contents[0]
        assert json.loads(read.text)["content"] == plain.content
    result = await client.call_tool("list_recent", {})
    assert [link.uri for link in result.content[1:]] == [f"memory://memories/{backdated.id}"]


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_icons_and_cache_hints(store: MemoryStore, mode: str) -> None:
    """One icon on the server's Implementation, the resources, templates and prompts; lists carry ttlMs on the
    2026-07-28 wire (SEP-2549), which 2025-11-25 does not define."""
    async with Client(build_server(lambda user: store), mode=mode) as client:
        listed = [
            await client.list_tools(),
            await client.list_prompts(),
            await client.list_resources(),
            await client.list_resource_templates(),
        ]
        if mode == "legacy":
            assert client.server_info is not None and client.server_info.icons == [tools.ICON]
    assert listed[0].tools and all(tool.icons is None for tool in listed[0].tools)  # the budget: see tools.ICON
    for items in (listed[1].prompts, listed[2].resources, listed[3].resource_templates):
        assert items and all(item.icons == [tools.ICON] for item in items)
    assert tools.ICON.src.startswith("data:image/svg+xml,")
    expected = (LISTS_TTL_MS, "public") if mode == "auto" else (0, "private")  # legacy: the SDK's unset defaults
    assert [(result.ttl_ms, result.cache_scope) for result in listed] == [expected] * 4


@pytest.mark.anyio
async def test_errors_name_the_tools_not_the_contract(client: Client) -> None:
    result = await client.call_tool("list_recent", {"cursor": "not-a-cursor"})
    assert result.is_error
    message = result.content[0].text
    assert "returned by list_recent" in message and "list_page" not in message, message
    result = await client.call_tool("remember", {"content": "x", "replaces": "abc"})
    assert result.is_error and "(as returned by remember, recall or list_recent)" in result.content[0].text


@pytest.mark.anyio
async def test_recall_context_dates_a_memory_by_when_it_happened(client: Client, store: MemoryStore) -> None:
    """A backdated memory reads with the day it happened and the day it was stored; one memory is "1 memory"."""
    memory = store.add("Lena's birthday is on the 25th of November.", occurred_at="2026-11-25", tags=["family"])
    result = await client.get_prompt("recall-context", {"topic": "Lena birthday November"})
    text = result.messages[0].content.text
    stored = memory.created_at[:10]
    assert stored != "2026-11-25"  # (the store dates it now)
    assert f"1. (2026-11-25, stored {stored}; tags: family) Lena's birthday" in text, text
    assert result.description == "1 memory about 'Lena birthday November'"
    same_day = store.add("Lena likes lilies.", occurred_at=stored)
    text = (await client.get_prompt("recall-context", {"topic": "Lena likes lilies"})).messages[0].content.text
    assert f"({stored}) {same_day.content}" in text


@pytest.mark.anyio
async def test_remember_session_advises_replaces_for_a_changed_fact(client: Client) -> None:
    text = (await client.get_prompt("remember-session", {})).messages[0].content.text
    assert "replaces set to the old one's id" in text and "forget the outdated memory" not in text
    assert prompts.REMEMBER_SESSION.icons == [tools.ICON]
