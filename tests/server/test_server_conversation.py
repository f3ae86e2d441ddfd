"""The conversation fields at the MCP surface, in process over the SDK's Client, against
tests/support/conversation_fake.py (the contract without the engine): the tools' new arguments reach the store,
results carry the new fields and match the output schemas, bad values are isError results naming the field,
list_recent pages with a cursor, memory:// URIs take ?namespace=, and a memory shows its history. tests/e2e drives
the same with the real store."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.shared.exceptions import MCPError

from memserver.features import resources, tool_results, tools
from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.support.conversation_fake import ConversationFake
from tests.support.fakes import FakeEmbedder

TIMEOUT = 10


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["fake", "local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The contract's fake, and the local store itself (with the fake embedder)."""
    if request.param == "fake":
        yield ConversationFake()
        return
    with MemoryStore(path=tmp_path, embedder=FakeEmbedder()) as opened:
        yield opened


@pytest.fixture
async def client(store: Any):
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        yield client


async def call(client: Client, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """The structured result, checked against the tool's output schema."""
    with anyio.fail_after(TIMEOUT):
        result = await client.call_tool(name, arguments)
    assert not result.is_error, result.content
    Draft202012Validator(tools.TOOLS_BY_NAME[name].output_schema).validate(result.structured_content)
    Draft202012Validator(tool_results.RESULTS[name]).validate(result.structured_content)  # the whole result schema
    return result.structured_content


async def error(client: Client, name: str, arguments: dict[str, Any]) -> str:
    with anyio.fail_after(TIMEOUT):
        result = await client.call_tool(name, arguments)
    assert result.is_error
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


async def read(client: Client, uri: str) -> dict[str, Any]:
    with anyio.fail_after(TIMEOUT):
        contents = (await client.read_resource(uri)).contents
    assert isinstance(contents[0], types.TextResourceContents)
    return json.loads(contents[0].text)


def test_every_schema_is_valid_and_advertises_the_conversation_fields() -> None:
    """The new arguments are in the input schemas; the memory fields in the output schemas."""
    for tool in tools.TOOLS:
        Draft202012Validator.check_schema(tool.input_schema)
        Draft202012Validator.check_schema(tool.output_schema)
    arguments = {tool.name: set(tool.input_schema["properties"]) for tool in tools.TOOLS}
    assert {"occurred_at", "speaker", "role", "session", "namespace", "replaces"} <= arguments["remember"]
    assert {"speaker", "role", "session", "namespace", "as_of"} <= arguments["recall"]
    assert {"namespace", "session", "speaker", "cursor"} <= arguments["list_recent"]
    assert "namespace" in arguments["forget"]
    fields = set(tool_results.MEMORY_SCHEMA["properties"])
    assert {"occurred_at", "speaker", "role", "session", "namespace", "replaces", "replaced_by"} <= fields
    assert tool_results.MEMORY_SCHEMA["required"] == ["id", "content", "created_at"]  # occurred_at: when it differs


@pytest.mark.anyio
async def test_remember_stores_the_fields_and_recall_returns_them(client: Client, store: Any) -> None:
    """What remember was given comes back from recall, with occurred_at as given and the storage time apart."""
    stored = await call(
        client,
        "remember",
        {
            "content": "Alice said the kitchen tiles arrive on Friday.",
            "occurred_at": "2023-05-14T10:30:00+02:00",
            "speaker": "Alice",
            "role": "participant",
            "session": "call-2023-05-14",
            "tags": ["renovation"],
        },
    )
    assert stored == {"id": stored["id"], "status": "stored"}
    hit = (await call(client, "recall", {"query": "kitchen tiles"}))["results"][0]
    assert hit["occurred_at"] == "2023-05-14T08:30:00Z" != hit["created_at"]  # results: UTC, to the second
    assert (hit["speaker"], hit["role"], hit["session"]) == ("Alice", "participant", "call-2023-05-14")
    assert "namespace" not in hit and "replaces" not in hit  # absent when default or unset


@pytest.mark.anyio
async def test_recall_passes_the_new_filters_to_the_store(client: Client, store: Any) -> None:
    """speaker, role, session, namespace and as_of reach the store's search unchanged."""
    if not isinstance(store, ConversationFake):
        pytest.skip("the fake records its calls")
    arguments = {"speaker": "Bob", "role": "user", "session": "s1", "namespace": "user:bob", "as_of": "2026-05-02"}
    await call(client, "recall", {"query": "anything", **arguments})
    search = next(kwargs for name, kwargs in store.calls if name == "search")
    assert {name: search[name] for name in arguments} == arguments


@pytest.mark.anyio
async def test_namespaces_never_meet(client: Client) -> None:
    """The same content in two namespaces is two memories; each namespace's tools see only its own."""
    alice = await call(client, "remember", {"content": "Prefers tea.", "namespace": "user:alice"})
    bob = await call(client, "remember", {"content": "Prefers tea.", "namespace": "user:bob"})
    assert alice["status"] == bob["status"] == "stored" and alice["id"] != bob["id"]
    found = (await call(client, "recall", {"query": "tea", "namespace": "user:alice"}))["results"]
    assert [hit["id"] for hit in found] == [alice["id"]] and found[0]["namespace"] == "user:alice"
    assert (await call(client, "recall", {"query": "tea"}))["results"] == []  # the default namespace is empty
    assert (await call(client, "forget", {"memory_id": alice["id"], "namespace": "user:bob"}))["deleted"] is False
    assert (await call(client, "forget", {"memory_id": alice["id"], "namespace": "user:alice"}))["deleted"] is True
    note = (await call(client, "recall", {"query": "tea", "namespace": "user:alice"}))["note"]
    assert note == "Nothing found: namespace 'user:alice' is empty."


@pytest.mark.anyio
async def test_replaces_keeps_history_and_says_what_it_replaced(client: Client) -> None:
    """remember with replaces answers which id it replaced; the old one is no longer recalled but reads with
    replaced_by and the chain; a duplicate replaces nothing and says so."""
    old = await call(client, "remember", {"content": "Ana lives in Porto.", "tags": ["family"]})
    new = await call(client, "remember", {"content": "Ana moved to Lisbon.", "replaces": old["id"]})
    assert new == {"id": new["id"], "status": "stored", "replaces": old["id"]}
    found = (await call(client, "recall", {"query": "Ana lives Porto Lisbon", "limit": 10}))["results"]
    assert [hit["id"] for hit in found] == [new["id"]]
    older = await read(client, f"memory://memories/{old['id']}")
    assert older["replaced_by"] == new["id"]
    assert older["history"]["newer"] == [
        {
            "id": new["id"],
            "occurred_at": older["history"]["newer"][0]["occurred_at"],
            "created_at": older["history"]["newer"][0]["created_at"],
        }
    ]
    assert older["history"]["newer"][0]["created_at"].replace("+00:00", "Z") == found[0]["created_at"]
    newer = await read(client, f"memory://memories/{new['id']}")
    assert [v["id"] for v in newer["history"]["older"]] == [old["id"]] and newer["history"]["newer"] == []
    again = await call(client, "remember", {"content": "Ana moved to Lisbon.", "replaces": new["id"]})
    assert again["status"] == "duplicate" and "nothing was replaced" in again["note"]
    await call(client, "forget", {"memory_id": new["id"]})
    dangling = await read(client, f"memory://memories/{old['id']}")
    assert dangling["history"]["newer"] == [{"id": new["id"], "forgotten": True}]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"content": "x", "role": "boss"}, "role"),
        ({"content": "x", "occurred_at": "2023-02-30"}, "occurred_at"),
        ({"content": "x", "occurred_at": "yesterday"}, "occurred_at"),
        ({"content": "x", "namespace": "user alice"}, "namespace"),
        ({"content": "x", "namespace": "n" * 65}, "namespace"),
        ({"content": "x", "speaker": "  "}, "speaker"),
        ({"content": "x", "speaker": "A" * 101}, "speaker"),
        ({"content": "x", "session": "line\nbreak"}, "session"),
        ({"content": "x", "replaces": "not-an-id"}, "replaces"),
        ({"content": "x", "replaces": "f" * 32}, "replaces"),  # well formed, names no memory: the store's error
    ],
)
async def test_bad_remember_values_are_tool_errors_naming_the_field(
    client: Client, arguments: dict[str, Any], field: str
) -> None:
    text = await error(client, "remember", arguments)
    assert text.startswith(f"{field}:") or text.startswith(f"{field} "), text


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("recall", {"query": "x", "as_of": "2026-13-01"}, "as_of"),
        ("recall", {"query": "x", "role": "USER"}, "role"),
        ("list_recent", {"cursor": "not a cursor we made"}, "cursor"),
        ("list_recent", {"cursor": "\u00e9t\u00e9"}, "cursor"),
        ("list_recent", {"session": ""}, "session"),
        ("forget", {"memory_id": "0" * 32, "namespace": "a/b"}, "namespace"),
    ],
)
async def test_bad_values_of_the_other_tools_are_tool_errors_naming_the_field(
    client: Client, name: str, arguments: dict[str, Any], field: str
) -> None:
    text = await error(client, name, arguments)
    assert text.startswith(f"{field}:") or text.startswith(f"{field} "), text


@pytest.mark.anyio
async def test_list_recent_pages_through_everything_with_the_cursor(client: Client) -> None:
    """Newest first by occurred_at; next_cursor until the last page, which has none; each memory exactly once."""
    ids = []
    for day in range(1, 8):
        stored = await call(
            client, "remember", {"content": f"Standup notes of day {day}.", "occurred_at": f"2026-03-0{day}"}
        )
        ids.append(stored["id"])
    first = await call(client, "list_recent", {"limit": 3})
    assert "next_cursor" in first
    pages, cursor = [first["memories"]], first["next_cursor"]
    while cursor:
        page = await call(client, "list_recent", {"limit": 3, "cursor": cursor})
        pages.append(page["memories"])
        cursor = page.get("next_cursor")
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [m["id"] for p in pages for m in p] == ids[::-1]
    everything = await call(client, "list_recent", {"limit": 100})
    assert "next_cursor" not in everything  # a page that holds the rest has no cursor


@pytest.mark.anyio
async def test_list_recent_filters_by_session_speaker_and_role(client: Client) -> None:
    await call(client, "remember", {"content": "Hi, I'm Dana.", "session": "s1", "speaker": "Dana", "role": "user"})
    await call(client, "remember", {"content": "Hello Dana!", "session": "s1", "speaker": "Bot", "role": "assistant"})
    await call(client, "remember", {"content": "Other chat.", "session": "s2", "speaker": "Dana", "role": "user"})
    by_session = await call(client, "list_recent", {"session": "s1"})
    assert [m["content"] for m in by_session["memories"]] == ["Hello Dana!", "Hi, I'm Dana."]
    by_speaker = await call(client, "list_recent", {"speaker": "Dana", "role": "user"})
    assert [m["session"] for m in by_speaker["memories"]] == ["s2", "s1"]


@pytest.mark.anyio
async def test_without_the_new_arguments_the_answers_keep_their_shape(client: Client, store: Any) -> None:
    """remember answers {id, status}; recall results and list_recent memories carry no empty field and one timestamp
    when occurred_at is the storage time (to the second, ...Z)."""
    stored = await call(client, "remember", {"content": "The deploy key rotates monthly.", "tags": ["ops"]})
    assert set(stored) == {"id", "status"}
    hit = (await call(client, "recall", {"query": "deploy key"}))["results"][0]
    assert set(hit) == {"id", "content", "created_at", "tags", "score", "rank_score"}
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z", hit["created_at"])  # exact: usable as as_of
    listed = await call(client, "list_recent", {})
    assert set(listed) == {"memories"}
    assert set(listed["memories"][0]) == {"id", "content", "created_at", "tags"}
    untagged = await call(client, "remember", {"content": "Standup is at ten.", "source": "chat"})
    shown = next(m for m in (await call(client, "list_recent", {}))["memories"] if m["id"] == untagged["id"])
    assert set(shown) == {"id", "content", "created_at", "source"}  # no "tags": [], no "source": ""


@pytest.mark.anyio
async def test_every_uri_takes_a_namespace(client: Client) -> None:
    """?namespace= reads that namespace in recent, tags, tags/{tag}, memories/{id} and stats."""
    mine = await call(
        client, "remember", {"content": "Quarterly goals draft.", "tags": ["q3 plans"], "namespace": "project-x"}
    )
    await call(client, "remember", {"content": "Default namespace note.", "tags": ["other"]})
    query = "?namespace=project-x"
    assert [m["id"] for m in (await read(client, "memory://recent" + query))["memories"]] == [mine["id"]]
    tags = (await read(client, "memory://tags" + query))["tags"]
    assert tags == [{"tag": "q3 plans", "count": 1, "uri": "memory://tags/q3%20plans?namespace=project-x"}]
    assert [m["id"] for m in (await read(client, tags[0]["uri"]))["memories"]] == [mine["id"]]
    assert (await read(client, f"memory://memories/{mine['id']}{query}"))["namespace"] == "project-x"
    assert (await read(client, "memory://stats" + query))["namespace"] == {"name": "project-x", "count": 1}
    listed = (await read(client, "memory://namespaces"))["namespaces"]
    assert listed == [
        {"namespace": "default", "count": 1, "uri": "memory://recent"},
        {"namespace": "project-x", "count": 1, "uri": "memory://recent?namespace=project-x"},
    ]
    assert (await read(client, "memory://recent?namespace=user%3Aalice"))["memories"] == []  # percent-encoded
    with pytest.raises(MCPError) as caught:
        await read(client, f"memory://memories/{mine['id']}")  # not in the default namespace
    assert caught.value.error.code == types.INVALID_PARAMS


@pytest.mark.anyio
@pytest.mark.parametrize(
    "uri",
    [
        "memory://recent?",
        "memory://recent?namespace=",
        "memory://recent?namespace=a&namespace=b",
        "memory://recent?user=alice",
        "memory://recent?namespace=%0Aevil",
        "memory://recent?namespace=%20padded",
        "memory://tags/x?namespace=" + "n" * 65,
        "memory://stats?namespace=../../etc/passwd",
    ],
)
async def test_a_bad_namespace_query_is_an_unknown_resource_that_does_not_echo_it(client: Client, uri: str) -> None:
    with pytest.raises(MCPError) as caught:
        await read(client, uri)
    assert caught.value.error.code == types.INVALID_PARAMS
    query = uri.partition("?")[2]
    assert not query or query not in caught.value.error.message


def test_uris_over_the_cap_are_refused_before_parsing() -> None:
    with pytest.raises(resources.UnknownResourceError, match="characters"):
        resources.parse("memory://recent?namespace=" + "%41" * 400)
