"""`memserver serve` over stdio, as a desktop client runs it: a subprocess, the real store and model, the SDK client."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal
from jsonschema import Draft202012Validator
from mcp.shared.exceptions import MCPError

from tests.e2e.servers import Live, stdio_session
from tests.support.surface import MEMORY_TOOLS

FACTS = [
    ("The user's dog is a border collie named Pixel.", ["pets"]),
    ("The user is allergic to peanuts.", ["health"]),
    ("Deploys to production happen on Thursdays after 2pm.", ["work", "ops"]),
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("stdio-data")


@pytest.fixture(scope="module")
def startup(portal: BlockingPortal, data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    """One server for the module, and its first recall on a fresh data dir (times printed for people, not asserted:
    benchmarks/startup.py measures start-up)."""
    log = tmp_path_factory.mktemp("logs") / "stdio.log"
    spawned = time.perf_counter()
    with stdio_session(portal, data_dir, log) as live:
        initialized = time.perf_counter() - spawned
        first = live.call_tool("recall", {"query": "anything at all"})
        recalled = time.perf_counter() - spawned
        figures = {"spawn_to_initialize_s": initialized, "spawn_to_first_recall_s": recalled}
        print(f"\n[memserver stdio] {json.dumps({k: round(v, 2) for k, v in figures.items()})}", file=sys.stderr)
        yield {"live": live, "log": log, "first_recall": first}


@pytest.fixture
def live(startup: dict) -> Live:
    return startup["live"]


def structured(result: types.CallToolResult) -> dict:
    assert not result.is_error, result.content
    assert isinstance(result.content[0], types.TextContent)
    assert json.loads(result.content[0].text) == result.structured_content  # the same JSON as text
    return result.structured_content


def test_the_first_recall_on_a_fresh_data_directory_says_the_memory_is_empty(startup: dict) -> None:
    """The first call, which waits for the store and the model to load, answers: no results, and a note."""
    assert structured(startup["first_recall"]) == {"results": [], "note": "Nothing found: the memory is empty."}


def test_initialize_names_the_server_and_its_capabilities(live: Live) -> None:
    """The handshake reports memserver, with tools and resources capabilities and usage instructions."""
    assert live.server_info.name == "memserver"
    assert live.server_capabilities.tools is not None and live.server_capabilities.resources is not None
    assert "recall" in (live.instructions or "")


def test_tools_list_schemas_are_valid_draft_2020_12(live: Live) -> None:
    """The five memory tools, each with an inputSchema and an outputSchema that are valid JSON Schema 2020-12, and
    browse_memories (the in-chat browser: an inputSchema, a text answer)."""
    listed = live.list_tools().tools
    assert sorted(t.name for t in listed) == sorted(MEMORY_TOOLS)
    for tool in listed:
        Draft202012Validator.check_schema(tool.input_schema)
        if tool.name != "browse_memories":
            Draft202012Validator.check_schema(tool.output_schema)


def test_remember_recall_list_forget_round_trip(live: Live) -> None:
    """Each tool's happy path against the real store, with structuredContent valid against its outputSchema."""
    schemas = {t.name: t.output_schema for t in live.list_tools().tools}

    def run(name: str, args: dict) -> dict:
        payload = structured(live.call_tool(name, args))
        Draft202012Validator(schemas[name]).validate(payload)
        return payload

    ids = [run("remember", {"content": c, "tags": t, "source": "e2e"})["id"] for c, t in FACTS]
    again = run("remember", {"content": FACTS[0][0]})
    assert again == {"id": ids[0], "status": "duplicate"}

    hits = run("recall", {"query": "what kind of dog does the user have?", "limit": 2})["results"]
    assert hits[0]["id"] == ids[0] and hits[0]["score"] > 0.4 and hits[0]["source"] == "e2e"
    assert hits[0]["score"] >= hits[1]["score"]
    only_ops = run("recall", {"query": "dog", "tags": ["ops"]})["results"]
    assert [h["id"] for h in only_ops] == [ids[2]]

    recent = run("list_recent", {"limit": 3})["memories"]
    assert [m["id"] for m in recent] == ids[::-1]

    assert run("forget", {"memory_id": ids[1]}) == {"id": ids[1], "deleted": True}
    assert run("forget", {"memory_id": ids[1]}) == {"id": ids[1], "deleted": False}
    assert run("forget", {"memory_id": "0" * 32}) == {"id": "0" * 32, "deleted": False}
    assert ids[1] not in [m["id"] for m in run("list_recent", {})["memories"]]


def test_validation_errors_travel_as_tool_errors(live: Live) -> None:
    """Over the wire, a bad argument is an isError result naming the field and the rule."""
    result = live.call_tool("recall", {"query": "x", "limit": 0})
    assert result.is_error
    assert result.content[0].text == "limit: Input should be greater than or equal to 1"
    result = live.call_tool("remember", {"content": "   "})  # the store's own rule, also an isError
    assert result.is_error and "content" in result.content[0].text


def test_unknown_tool_and_resource_are_invalid_params(live: Live) -> None:
    """An unknown tool or resource is JSON-RPC -32602 naming it."""
    with pytest.raises(MCPError) as caught:
        live.call_tool("recall_everything", {})
    assert caught.value.error.code == types.INVALID_PARAMS and "recall_everything" in caught.value.error.message
    with pytest.raises(MCPError) as caught:
        live.read_resource("memory://nowhere")
    assert caught.value.error.code == types.INVALID_PARAMS and caught.value.error.data == {"uri": "memory://nowhere"}


def test_every_resource_and_template_reads(live: Live) -> None:
    """stats, recent, tags, tags/{tag} and memories/{id} read as JSON from the real store."""
    memory_id = structured(live.call_tool("remember", {"content": "Resource test: tea is green.", "tags": ["tea"]}))[
        "id"
    ]

    def read(uri: str) -> dict:
        contents = live.read_resource(uri).contents
        assert len(contents) == 1 and contents[0].mime_type == "application/json"
        return json.loads(contents[0].text)

    stats = read("memory://stats")
    assert stats["count"] >= 1 and stats["model"].endswith("all-MiniLM-L6-v2") and stats["bytes_on_disk"] > 0
    assert read("memory://recent")["memories"][0]["id"] == memory_id
    assert {"tag": "tea", "count": 1, "uri": "memory://tags/tea"} in read("memory://tags")["tags"]
    assert [m["id"] for m in read("memory://tags/tea")["memories"]] == [memory_id]
    assert read(f"memory://memories/{memory_id}")["content"] == "Resource test: tea is green."
    with pytest.raises(MCPError) as caught:
        read(f"memory://memories/{'e' * 32}")
    assert caught.value.error.code == types.INVALID_PARAMS


def test_two_servers_on_one_data_directory_see_each_others_writes(
    live: Live, portal: BlockingPortal, data_dir: Path, startup: dict
) -> None:
    """Two stdio servers on the same directory (two client windows): each sees what the other stored or forgot."""
    with stdio_session(portal, data_dir, startup["log"]) as other:
        mine = structured(live.call_tool("remember", {"content": "Shared: the wifi password is on the fridge."}))
        seen = structured(other.call_tool("recall", {"query": "where is the wifi password?", "limit": 1}))
        assert seen["results"][0]["id"] == mine["id"]
        theirs = structured(other.call_tool("remember", {"content": "Shared: the spare key is under the mat."}))
        assert structured(live.call_tool("list_recent", {"limit": 1}))["memories"][0]["id"] == theirs["id"]
        assert structured(other.call_tool("forget", {"memory_id": mine["id"]}))["deleted"] is True
        assert mine["id"] not in [m["id"] for m in structured(live.call_tool("list_recent", {}))["memories"]]


def test_recall_explain_says_why_over_stdio(live: Live) -> None:
    """recall with explain: true, against the real model and store: each result carries its ranks, cosine and
    matched (stemmed) terms, and the payload the query as read; valid against the advertised output schema."""
    schema = next(t.output_schema for t in live.list_tools().tools if t.name == "recall")
    structured(live.call_tool("remember", {"content": "The user's favourite climbing crag is Stanage Edge."}))
    payload = structured(live.call_tool("recall", {"query": "which crags does the user climb at?", "explain": True}))
    Draft202012Validator(schema).validate(payload)
    first = payload["results"][0]
    assert first["content"].startswith("The user's favourite climbing crag")
    assert first["explain"]["rank"] == 1 and first["explain"]["semantic"]["cosine"] == first["score"]
    assert first["explain"]["keyword"]["terms"] == ["crag", "user", "climb"]
    assert payload["query"]["terms"] == ["crag", "user", "climb"] and payload["query"]["mode"] == "hybrid"
    plain = structured(live.call_tool("recall", {"query": "which crags does the user climb at?"}))
    assert "query" not in plain and all("explain" not in r for r in plain["results"])
