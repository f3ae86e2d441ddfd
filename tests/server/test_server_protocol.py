"""The MCP surface of build_server(), in process, over the SDK's Client, with a stub store.

These tests pin the protocol contract (schemas, validation messages, error planes, start-up that does not wait on
the store) independently of the real store and model; tests/e2e drives the real thing in subprocesses.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import replace
from typing import Any

import anyio
import mcp_types as types
import pytest
from jsonschema import Draft202012Validator
from mcp import Client
from mcp.shared.exceptions import MCPError

from memserver.contract import inputs
from memserver.contract.backend import Hit, Memory, Page
from memserver.errors import InvalidInputError
from memserver.features import resources, tool_results, tools
from memserver.server import build_server

TIMEOUT = 10


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class StubStore:
    """A dict behind the backend contract's method names; `fail` makes every call raise it."""

    def __init__(self) -> None:
        self.memories: dict[str, Memory] = {}
        self.fail: BaseException | None = None
        self.calls: list[tuple[str, Any]] = []
        self.score = 0.5  # what search gives every hit
        self.similar: tuple[tuple[str, float], ...] = ()  # what the next new memory is close to

    def _check(self, name: str, args: Any) -> None:
        self.calls.append((name, args))
        if self.fail is not None:
            raise self.fail

    def add(self, content: str, tags: Any = None, source: Any = None, **fields: Any) -> Memory:
        self._check("add", (content, tags, source, *([fields] if any(fields.values()) else [])))
        for memory in self.memories.values():
            if memory.content == content:
                return replace(memory, duplicate=True)
        given = {name: value for name, value in fields.items() if value is not None}
        memory = Memory(
            f"{len(self.memories) + 1:032x}",
            content,
            "2026-01-01T00:00:00+00:00",
            tuple(tags or ()),
            source or "",
            **given,
        )
        self.memories[memory.id] = memory
        return replace(self.memories[memory.id], similar=self.similar)

    def search(self, query: str, **kwargs: Any) -> list[Hit]:
        self._check("search", kwargs)
        return [Hit(m, self.score, self.score) for m in list(self.memories.values())[: kwargs["limit"]]]

    def list_recent(self, limit: int = 10, tags: Any = None, **filters: Any) -> list[Memory]:
        self._check("list_recent", (limit, tags))
        found = [m for m in self.memories.values() if not tags or set(tags) <= set(m.tags)]
        return found[::-1][:limit]

    def list_page(self, limit: int = 10, tags: Any = None, *, cursor: str | None = None, **filters: Any) -> Page:
        """Pages of the newest first; the cursor is the offset as text."""
        self._check("list_page", (limit, tags, cursor, filters))
        found = [m for m in self.memories.values() if not tags or set(tags) <= set(m.tags)][::-1]
        start = int(cursor) if cursor else 0
        more = start + limit < len(found)
        return Page(found[start : start + limit], str(start + limit) if more else None)

    def get(self, memory_id: str, *, namespace: str | None = None) -> Memory | None:
        self._check("get", memory_id)
        return self.memories.get(memory_id)

    def delete(self, memory_id: str, *, namespace: str | None = None) -> bool:
        self._check("delete", memory_id)
        return self.memories.pop(memory_id, None) is not None

    def tag_counts(self, *, namespace: str | None = None) -> dict[str, int]:
        self._check("tag_counts", None)
        counts: dict[str, int] = {}
        for memory in self.memories.values():
            for tag in memory.tags:
                counts[tag] = counts.get(tag, 0) + 1
        return counts

    def stats(self) -> dict[str, Any]:
        self._check("stats", None)
        return {"count": len(self.memories)}

    def ids_with_prefix(self, prefix: str, limit: int, *, namespace: Any = None) -> list[str]:
        self._check("ids_with_prefix", (prefix, limit))
        start = inputs.check_id_prefix(prefix)
        return sorted(i for i in self.memories if i.startswith(start))[:limit]

    def revision(self) -> str:
        return str(hash(tuple(self.memories.items())))

    def close(self) -> None:
        pass


@pytest.fixture
def store() -> StubStore:
    return StubStore()


@pytest.fixture
async def client(store: StubStore):
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        yield client


async def call(client: Client, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
    with anyio.fail_after(TIMEOUT):
        return await client.call_tool(name, arguments)


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


# --- tools/list ------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_tools_list_advertises_the_tools_with_valid_schemas(client: Client) -> None:
    """tools/list returns remember, recall, list_recent, forget, mark, forget_matching and consolidate, each with
    Draft 2020-12 input and output schemas, then browse_memories (the in-chat browser, which answers text:
    test_apps.py)."""
    with anyio.fail_after(TIMEOUT):
        listed = (await client.list_tools()).tools
    assert [tool.name for tool in listed] == [*(tool.name for tool in tools.TOOLS), "browse_memories"]
    assert [tool.name for tool in tools.TOOLS] == [
        "remember",
        "recall",
        "list_recent",
        "forget",
        "mark",
        "forget_matching",
        "consolidate",
    ]
    for tool in listed[: len(tools.TOOLS)]:
        assert tool.description and tool.title
        assert tool.input_schema["type"] == "object" and tool.output_schema["type"] == "object"
        Draft202012Validator.check_schema(tool.input_schema)
        Draft202012Validator.check_schema(tool.output_schema)
        assert tool.input_schema == tools.advertised(tools.CHECKED[tool.name])  # the checked schema, less STRICT_ONLY


@pytest.mark.anyio
async def test_tools_carry_the_contract_annotations_and_ranges(client: Client) -> None:
    """recall/list_recent are read-only, forget destructive; limits are 1..50 (default 5) and 1..100 (default 10)."""
    with anyio.fail_after(TIMEOUT):
        by_name = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert by_name["recall"].annotations.read_only_hint is True
    assert by_name["list_recent"].annotations.read_only_hint is True
    assert by_name["forget"].annotations.destructive_hint is True
    assert by_name["remember"].annotations.read_only_hint is False
    recall_limit = by_name["recall"].input_schema["properties"]["limit"]
    assert (recall_limit["minimum"], recall_limit["maximum"], recall_limit["default"]) == (1, 50, 5)
    list_limit = by_name["list_recent"].input_schema["properties"]["limit"]
    assert (list_limit["minimum"], list_limit["maximum"], list_limit["default"]) == (1, 100, 10)
    assert by_name["remember"].input_schema["required"] == ["content"]
    assert by_name["recall"].input_schema["required"] == ["query"]
    assert by_name["forget"].input_schema["required"] == ["memory_id"]


# --- tools/call: happy paths ----------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_each_tool_returns_structured_content_matching_its_output_schema(client: Client) -> None:
    """Every tool answers structuredContent valid against its outputSchema, and the same JSON as text."""
    calls = [
        ("remember", {"content": "tea over coffee", "tags": ["drinks"], "source": "chat"}),
        ("remember", {"content": "tea over coffee"}),
        ("recall", {"query": "what does the user drink?"}),
        ("list_recent", {}),
        ("forget", {"memory_id": f"{1:032x}"}),
        ("forget", {"memory_id": f"{1:032x}"}),
    ]
    results = [await call(client, name, args) for name, args in calls]
    for (name, _), result in zip(calls, results, strict=True):
        assert not result.is_error, text_of(result)
        Draft202012Validator(tools.TOOLS_BY_NAME[name].output_schema).validate(result.structured_content)
        assert json.loads(text_of(result)) == result.structured_content
    statuses = [r.structured_content["status"] for r in results[:2]]
    assert statuses == ["stored", "duplicate"]
    assert results[2].structured_content["results"][0]["content"] == "tea over coffee"
    assert results[3].structured_content["memories"][0]["tags"] == ["drinks"]
    assert [r.structured_content["deleted"] for r in results[4:]] == [True, False]


@pytest.mark.anyio
async def test_defaults_are_applied_and_filters_passed_to_the_store(client: Client, store: StubStore) -> None:
    """recall without limit asks the store for 5, list_recent for 10; filters reach the store unchanged."""
    await call(client, "recall", {"query": "q", "tags": ["a"], "since": "2026-01-01", "min_score": 0.3})
    await call(client, "list_recent", {})
    await call(client, "recall", {"query": "q", "limit": 7.0})
    search, recent, search2 = store.calls
    assert search[1] == {
        "limit": 5,
        "tags": ["a"],
        "source": None,
        "since": "2026-01-01",
        "until": None,
        "min_score": 0.3,
        "mode": "hybrid",
        "speaker": None,
        "role": None,
        "session": None,
        "namespace": None,
        "as_of": None,
        "explain": False,
        "kinds": None,
        "include_archived": False,
    }
    filters = {"namespace": None, "session": None, "speaker": None, "role": None}
    assert recent == ("list_page", (10, None, None, {**filters, "kinds": None, "include_archived": False}))
    assert search2[1]["limit"] == 7 and isinstance(search2[1]["limit"], int)


@pytest.mark.anyio
async def test_recall_says_plainly_when_nothing_was_found(client: Client, store: StubStore) -> None:
    """No results, or only weak ones (best score below WEAK_MATCH_SCORE), come with a note; good ones without."""
    schema = Draft202012Validator(tools.RECALL.output_schema)
    empty = (await call(client, "recall", {"query": "q"})).structured_content
    assert empty["results"] == [] and "Nothing found" in empty["note"]
    filtered = (await call(client, "recall", {"query": "q", "tags": ["a"], "min_score": 0.4})).structured_content
    assert "filters" in filtered["note"] and "min_score 0.4" in filtered["note"]
    assert (
        "no memory shares a word"
        in (await call(client, "recall", {"query": "q", "mode": "keyword"})).structured_content["note"]
    )
    await call(client, "remember", {"content": "tea over coffee"})
    store.score = tool_results.WEAK_MATCH_SCORE - 0.1
    weak = (await call(client, "recall", {"query": "q"})).structured_content
    assert len(weak["results"]) == 1 and weak["note"].startswith("No strong match: the best score is 0.25")
    store.score = tool_results.WEAK_MATCH_SCORE + 0.1
    strong = (await call(client, "recall", {"query": "q"})).structured_content
    assert "note" not in strong
    for payload in (empty, filtered, weak, strong):
        schema.validate(payload)


@pytest.mark.anyio
async def test_remember_lists_near_duplicates(client: Client, store: StubStore) -> None:
    """A stored memory close to existing ones returns them as similar: [{id, score, content}], valid per schema."""
    first = (await call(client, "remember", {"content": "Marta lives in Lisbon"})).structured_content
    assert "similar" not in first
    store.similar = ((first["id"], 0.91234),)
    second = (await call(client, "remember", {"content": "Marta now lives in Lisbon"})).structured_content
    assert second["status"] == "stored"
    assert second["similar"] == [{"id": first["id"], "score": 0.9123, "content": "Marta lives in Lisbon"}]
    Draft202012Validator(tools.REMEMBER.output_schema).validate(second)


# --- tools/call: validation -----------------------------------------------------------------------------------------

VALIDATION_CASES = [
    ("recall", {"query": "q", "limit": 0}, "limit: Input should be greater than or equal to 1"),
    ("recall", {"query": "q", "limit": 51}, "limit: Input should be less than or equal to 50"),
    ("recall", {"query": "q", "limit": "5"}, "limit: Input should be a valid integer"),
    ("recall", {"query": "q", "limit": True}, "limit: Input should be a valid integer"),
    ("recall", {"query": "q", "limit": 2.5}, "limit: Input should be a valid integer"),
    ("recall", {}, "query: Field required"),
    ("recall", {"query": ""}, "query: String should have at least 1 character"),
    ("recall", {"query": "q", "min_score": 1.5}, "min_score: Input should be less than or equal to 1"),
    ("recall", {"query": "q", "since": "last week"}, "since: Input should be an ISO 8601 date or date-time"),
    ("recall", {"query": "q", "until": "31/01/2026"}, "until: Input should be an ISO 8601 date or date-time"),
    ("recall", {"query": "q", "tag": ["x"]}, "tag: Extra inputs are not permitted (did you mean 'tags'?)"),
    ("list_recent", {"limit": 101}, "limit: Input should be less than or equal to 100"),
    ("list_recent", {"tags": "work"}, "tags: Input should be a valid list"),
    ("list_recent", {"tags": ["ok", ""]}, "tags.1: String should have at least 1 character"),
    ("list_recent", {"tags": [f"t{i}" for i in range(21)]}, "tags: List should have at most 20 items, not 21"),
    ("remember", {}, "content: Field required"),
    ("remember", {"content": 5}, "content: Input should be a valid string"),
    ("remember", {"content": "x" * 20_001}, "content: String should have at most 20000 characters"),
    ("recall", {"query": "q", "mode": "fuzzy"}, "mode: Input should be 'hybrid', 'semantic' or 'keyword'"),
    ("remember", {"content": "x", "source": ["a"]}, "source: Input should be a valid string"),
    ("forget", {}, "memory_id: Field required"),
    ("forget", {"id": "abc"}, "memory_id: Field required"),
    ("recall", {"query": "q", "since": "2024-02-30"}, "since: Input should be an ISO 8601 date or date-time"),
    ("recall", {"query": "q", "until": "9999-12-31T23:00:00-05:00"}, "until: Input should be an ISO 8601 date"),
    ("recall", {"query": "q", "since": "２０２６-01-31"}, "since: Input should be an ISO 8601 date or date-time"),
    ("recall", {"query": " \u3000 "}, "query: String should contain more than white space"),
    ("remember", {"content": "x", "tags": ["a\nb"]}, "tags.0: String should contain more than white space, and no"),
    ("remember", {"content": "x", "source": "a\tb"}, "source: String should contain no control characters"),
    ("remember", {"content": "\ud83d"}, "content: Input should be valid Unicode text, not a lone surrogate"),
    ("recall", {"query": "q", "x" * 5000: 1}, "x" * 64 + "...: Extra inputs are not permitted (allowed: "),
]


@pytest.mark.anyio
@pytest.mark.parametrize(("tool", "arguments", "message"), VALIDATION_CASES)
async def test_arguments_breaking_the_schema_are_a_tool_error_naming_field_and_rule(
    client: Client, store: StubStore, tool: str, arguments: dict[str, Any], message: str
) -> None:
    """A schema violation comes back as isError with a pydantic-style 'field: rule' line; the store is not called."""
    result = await call(client, tool, arguments)
    assert result.is_error
    assert message in text_of(result).splitlines() or text_of(result).startswith(message)
    assert store.calls == []


@pytest.mark.anyio
async def test_several_problems_are_reported_together(client: Client) -> None:
    """Every broken field gets its own line."""
    result = await call(client, "recall", {"limit": 0, "min_score": -2})
    assert result.is_error
    assert set(text_of(result).splitlines()) == {
        "query: Field required",
        "limit: Input should be greater than or equal to 1",
        "min_score: Input should be greater than or equal to -1",
    }


# --- error planes -------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_unknown_tool_is_a_protocol_error(client: Client) -> None:
    """tools/call of a tool that does not exist is JSON-RPC -32602 naming it."""
    with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as caught:
        await client.call_tool("remember_everything", {})
    assert caught.value.error.code == types.INVALID_PARAMS
    assert "remember_everything" in caught.value.error.message


@pytest.mark.anyio
async def test_store_invalid_input_is_a_tool_error(client: Client, store: StubStore) -> None:
    """An InvalidInputError from the store reaches the model as isError with the store's message."""
    store.fail = InvalidInputError("content: the store refuses it")
    result = await call(client, "remember", {"content": "x"})
    assert result.is_error and text_of(result) == "content: the store refuses it"


@pytest.mark.anyio
async def test_internal_failure_is_logged_reported_briefly_and_the_server_keeps_serving(
    client: Client, store: StubStore, caplog: pytest.LogCaptureFixture
) -> None:
    """An unexpected exception is logged with its traceback, answered as a short isError, and not leaked."""
    store.fail = RuntimeError("disk on fire: /secret/path")
    with caplog.at_level(logging.ERROR, logger="memserver.server"):
        result = await call(client, "recall", {"query": "q"})
    assert result.is_error
    assert "internal error" in text_of(result) and "/secret/path" not in text_of(result)
    assert any(record.exc_info and "disk on fire" in str(record.exc_info[1]) for record in caplog.records)
    store.fail = None
    assert not (await call(client, "list_recent", {})).is_error


@pytest.mark.anyio
async def test_internal_failure_reading_a_resource_is_internal_error(client: Client, store: StubStore) -> None:
    """A failing resource read is -32603 with a short message, not the exception text."""
    store.fail = RuntimeError("disk on fire")
    with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as caught:
        await client.read_resource("memory://stats")
    assert caught.value.error.code == types.INTERNAL_ERROR
    assert "disk on fire" not in caught.value.error.message


# --- resources --------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_resources_and_templates_are_listed(client: Client) -> None:
    """resources/list shows stats, recent, tags, namespaces, health and overview, and the in-chat browser's page
    (test_apps.py); templates/list the per-tag and per-memory templates."""
    with anyio.fail_after(TIMEOUT):
        listed = (await client.list_resources()).resources
        templates = (await client.list_resource_templates()).resource_templates
    memory = ["memory://stats", "memory://recent", "memory://tags", "memory://kinds", "memory://namespaces"]
    memory += ["memory://health", "memory://overview"]
    assert [str(r.uri) for r in listed] == [*memory, "ui://memserver/browser"]
    assert [t.uri_template for t in templates] == ["memory://tags/{tag}", "memory://memories/{id}"]
    assert all(r.mime_type == "application/json" for r in [*listed[: len(memory)], *templates])


@pytest.mark.anyio
async def test_every_resource_and_template_reads_as_json(client: Client) -> None:
    """Each memory:// resource reads as one JSON text content with the right shape."""
    await call(client, "remember", {"content": "likes green tea", "tags": ["drinks", "two words"]})
    memory_id = f"{1:032x}"
    with anyio.fail_after(TIMEOUT):
        read = {
            uri: json.loads((await client.read_resource(uri)).contents[0].text)
            for uri in [
                "memory://stats",
                "memory://recent",
                "memory://tags",
                "memory://tags/two%20words",
                f"memory://memories/{memory_id}",
            ]
        }
    assert read["memory://stats"]["count"] == 1
    assert read["memory://recent"]["memories"][0]["id"] == memory_id
    tags = read["memory://tags"]["tags"]
    assert {t["tag"]: t["count"] for t in tags} == {"drinks": 1, "two words": 1}
    assert resources.parse(tags[1]["uri"]) == resources.Target("tag", tags[1]["tag"])
    assert read["memory://tags/two%20words"]["memories"][0]["content"] == "likes green tea"
    assert read[f"memory://memories/{memory_id}"]["tags"] == ["drinks", "two words"]


@pytest.mark.anyio
@pytest.mark.parametrize("uri", ["memory://nothing", "file:///etc/passwd", "memory://memories/" + "f" * 32])
async def test_unknown_resource_is_invalid_params_with_the_uri(client: Client, uri: str) -> None:
    """Reading a URI that names nothing is -32602 with data.uri."""
    with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as caught:
        await client.read_resource(uri)
    assert caught.value.error.code == types.INVALID_PARAMS
    assert caught.value.error.data == {"uri": uri}


# --- start-up and users -------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_handshake_and_tools_list_do_not_wait_for_the_store() -> None:
    """While the store is still loading, initialize and tools/list answer; the first tool call waits for it."""
    release = threading.Event()
    store = StubStore()

    def slow_factory(user: str | None) -> StubStore:
        assert release.wait(TIMEOUT)
        return store

    server = build_server(slow_factory)
    with anyio.fail_after(TIMEOUT):
        async with Client(server, mode="legacy") as client:
            assert len((await client.list_tools()).tools) == len(tools.TOOLS) + 1  # and browse_memories
            async with anyio.create_task_group() as tg:
                results: list[types.CallToolResult] = []

                async def remember() -> None:
                    results.append(await client.call_tool("remember", {"content": "x"}))

                tg.start_soon(remember)
                assert len((await client.list_resources()).resources) == 8  # the loop still serves meanwhile
                assert not results  # ... while the call waits on the store
                release.set()
            assert results[0].structured_content["status"] == "stored"


@pytest.mark.anyio
@pytest.mark.parametrize("load_at_start", [False, True], ids=["after the handshake", "at start"])
async def test_the_store_loads_without_waiting_for_a_call(load_at_start: bool) -> None:
    """Loading starts once the client has sent notifications/initialized (stdio), or when the server starts
    (HTTP), never only at the first tool call."""
    built = threading.Event()

    def factory(user: str | None) -> StubStore:
        built.set()
        return StubStore()

    with anyio.fail_after(TIMEOUT):
        async with Client(build_server(factory, load_at_start=load_at_start), mode="legacy"):
            while not built.is_set():  # no request at all: the handshake alone starts it
                await anyio.sleep(0.01)


@pytest.mark.anyio
async def test_per_user_server_refuses_a_request_without_a_user() -> None:
    """A per-user server never falls back to a shared store when no authenticated user is present."""
    async with Client(build_server(lambda user: StubStore(), per_user=True), mode="legacy") as client:
        with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as caught:
            await client.call_tool("list_recent", {})
    assert caught.value.error.code == types.INVALID_REQUEST


def test_tools_module_does_not_import_the_store() -> None:
    """The server, the transports and the CLI start without the engine or the model: no module of memserver.local,
    memserver.postgres or memserver.embedding.embedder, nor numpy, onnxruntime or hnswlib, until a store opens. The
    second run proves the check can see them: opening the package's MemoryStore name imports them."""
    import subprocess
    import sys

    heavy = (
        "('memserver.local.', 'memserver.postgres.', 'memserver.embedding.embedder', 'onnxruntime', 'hnswlib', 'numpy')"
    )
    report = f"print(sorted(m for m in sys.modules if m.startswith({heavy})))"
    start = "import sys, memserver.server, memserver.transports.stdio, memserver.transports.http, memserver.cli; "
    out = subprocess.run([sys.executable, "-c", start + report], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "[]"
    opened = start + "import memserver; memserver.MemoryStore; " + report
    out = subprocess.run([sys.executable, "-c", opened], capture_output=True, text=True, timeout=60, check=True)
    assert "memserver.local." in out.stdout and "numpy" in out.stdout and "hnswlib" in out.stdout


@pytest.mark.anyio
async def test_forget_of_a_malformed_id_is_a_tool_error_naming_the_rule(client: Client, store: StubStore) -> None:
    """A malformed id is a tool error naming the rule in the tools' words (as remember's replaces), and the store
    is not asked; a well-formed id of no memory is deleted: false."""
    for bad in ("abc", "mem-123"):
        result = await call(client, "forget", {"memory_id": bad})
        assert result.is_error
        message = text_of(result)
        assert message.startswith("memory_id must be 32 hexadecimal characters"), message
        assert "(as returned by remember, recall or list_recent)" in message and " add)" not in message
    assert store.calls == []
    result = await call(client, "forget", {"memory_id": f"{7:032x}"})
    assert result.structured_content == {"id": f"{7:032x}", "deleted": False}


NOISY_SERVER = """
import os, sys
from memserver.server import build_server
from memserver.transports.stdio import serve_stdio

def factory(user):
    os.write(1, b"native library noise on fd 1\\n")  # what a C library printing to stdout does
    print("python noise on sys.stdout")
    raise RuntimeError("no store in this test")

serve_stdio(build_server(factory))
"""


def test_stdout_carries_only_protocol_even_when_a_library_prints(tmp_path) -> None:
    """In stdio mode, output to fd 1 or sys.stdout from the store's libraries lands on stderr, never on the wire."""
    import queue
    import subprocess
    import sys
    import threading

    errlog = (tmp_path / "stderr.txt").open("w+")
    process = subprocess.Popen(
        [sys.executable, "-c", NOISY_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, text=True
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout], daemon=True).start()
    requests = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_recent", "arguments": {}}},
    ]
    try:
        for request in requests:
            process.stdin.write(json.dumps(request) + "\n")
        process.stdin.flush()
        answers: list[dict[str, Any]] = []
        while len(answers) < 2:  # every line must be JSON; notifications (the error's log record) may come between
            message = json.loads(lines.get(timeout=TIMEOUT * 3))
            if "id" in message:
                answers.append(message)
    finally:
        process.stdin.close()  # EOF: the server exits
        process.wait(TIMEOUT * 3)
        errlog.close()
    stderr = (tmp_path / "stderr.txt").read_text()
    assert answers[0]["result"]["serverInfo"]["name"] == "memserver"
    assert answers[1]["result"]["isError"] is True
    assert "native library noise" in stderr and "python noise" in stderr and "no store in this test" in stderr


EDGE_SERVER = """
from memserver.transports import stdio
from memserver.contract.backend import Page
from memserver.server import build_server

class Empty:
    def list_page(self, limit, tags=None, **filters): return Page([])
    def close(self): pass

stdio.serve_stdio(build_server(lambda user: Empty()), max_line_bytes=100_000)
"""


def test_stdio_transport_survives_split_malformed_and_over_long_lines_and_answers_everything_before_eof() -> None:
    """memserver's own stdio transport: a message split across writes is reassembled, a malformed line is answered
    with a parse error, an over-long one with an error naming its id, and requests received before stdin closes
    are all answered (the SDK's helper drops them), including a last line without its newline."""
    import subprocess
    import sys
    import time

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    first = (json.dumps(initialize) + "\n").encode()
    over_long = {"jsonrpc": "2.0", "id": "big", "method": "tools/call", "params": {"arguments": {"x": "x" * 200_000}}}
    pings = [{"jsonrpc": "2.0", "id": 100 + i, "method": "ping"} for i in range(20)]
    last = {"jsonrpc": "2.0", "id": "last", "method": "tools/call", "params": {"name": "list_recent", "arguments": {}}}
    process = subprocess.Popen(
        [sys.executable, "-c", EDGE_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    process.stdin.write(first[:25])
    process.stdin.flush()
    time.sleep(0.2)
    rest = [b'{"jsonrpc":"2.0","method":"notifications/initialized"}', b"not json", json.dumps(over_long).encode()]
    rest += [json.dumps(m).encode() for m in pings]
    rest = first[25:] + b"\n".join(rest) + b"\n" + json.dumps(last).encode()
    out, err = process.communicate(rest, timeout=TIMEOUT * 3)  # then EOF right away
    answers = {m["id"]: m for m in map(json.loads, out.decode().splitlines())}
    assert set(answers) == {None, 1, "big", "last", *(100 + i for i in range(20))}
    assert answers[None]["error"]["code"] == types.PARSE_ERROR  # "not json"
    assert answers["big"]["error"]["code"] == types.INVALID_REQUEST
    assert answers["last"]["result"]["structuredContent"] == {"memories": []}
    assert b"refused a message of 8 bytes" in err and b"longer than 100000 bytes" in err


SLOW_SERVER = """
import time
from memserver.contract.backend import Page
from memserver.server import build_server
from memserver.transports.stdio import serve_stdio

class SlowStore:
    def list_page(self, limit, tags=None, **filters):
        time.sleep(0.2)  # a store's work: the answers are still being made when the reader meets EOF
        return Page([])

    def close(self):
        pass

serve_stdio(build_server(lambda user: SlowStore()))
"""


@pytest.mark.parametrize("mode", ["files", "pipes"])
def test_every_request_read_before_eof_is_answered(tmp_path, mode: str) -> None:
    """`memserver serve < requests.jsonl > answers.jsonl` (regular files, written through worker threads) and a
    client that closes stdin right after writing: each request gets its answer before the server exits."""
    import subprocess
    import sys

    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    calls = [
        {"jsonrpc": "2.0", "id": 100 + i, "method": "tools/call", "params": {"name": "list_recent", "arguments": {}}}
        for i in range(6)
    ]
    requests = [initialize, {"jsonrpc": "2.0", "method": "notifications/initialized"}, *calls]
    text = "".join(json.dumps(r) + "\n" for r in requests)
    if mode == "files":
        (tmp_path / "in.jsonl").write_text(text)
        with (tmp_path / "in.jsonl").open("rb") as stdin, (tmp_path / "out.jsonl").open("wb") as stdout:
            subprocess.run([sys.executable, "-c", SLOW_SERVER], stdin=stdin, stdout=stdout, timeout=TIMEOUT * 6)
        out = (tmp_path / "out.jsonl").read_text()
    else:
        done = subprocess.run(
            [sys.executable, "-c", SLOW_SERVER], input=text, capture_output=True, text=True, timeout=TIMEOUT * 6
        )
        out = done.stdout
    answered = sorted(m["id"] for m in map(json.loads, out.splitlines()) if "id" in m)
    assert answered == [1, *(c["id"] for c in calls)], out
