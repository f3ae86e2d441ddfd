"""Prompts, completions and the advertised capabilities of `memserver serve`, end to end: the real store and model,
over stdio and streamable HTTP, in both protocol eras (the Python SDK's client) and through the TypeScript SDK's.

Sessions: one stdio server per era, one HTTP server for the module (both eras, and the TypeScript client), all on
one data directory. Each session stores its own memories under its own tags, so the sessions never see each other's
facts in an assertion.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from tests.e2e import ts_client
from tests.e2e.servers import ROOT, SERVE, HttpServer, Live, http_server, http_session, server_env, stdio_session

MODERN = "2026-07-28"
# Exactly what is served: resource subscriptions, and no list-changed notifications (no list ever changes).
CAPABILITIES = {
    "tools": {"listChanged": False},
    "resources": {"subscribe": True, "listChanged": False},
    "prompts": {"listChanged": False},
    "completions": {},
    "logging": {},
}
# The MCP Apps extension (features/apps.py), a 2026-07-28 field: the SDK drops it from 2025-11-25 answers.
APPS = {"extensions": {"io.modelcontextprotocol/ui": {}}}
SESSIONS = ["stdio-2025-11-25", "stdio-2026-07-28", "http-2025-11-25", "http-2026-07-28"]
KITCHEN = [
    ("The kitchen renovation starts on 3 March; the contractor is Ana Pereira.", ["kitchen", "renovation"]),
    ("For the kitchen we chose oak cabinets and a white quartz worktop.", ["kitchen"]),
]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("surface-data")


@pytest.fixture(scope="module")
def http(data_dir: Path) -> Iterator[HttpServer]:
    with http_server(data_dir) as running:
        yield running


@pytest.fixture(scope="module", params=SESSIONS)
def live(request: pytest.FixtureRequest, portal: BlockingPortal, data_dir: Path) -> Iterator[Live]:
    """A connected SDK client per transport and era; the memories of KITCHEN stored under its own tags."""
    transport, era = request.param.split("-", 1)
    mode = "auto" if era == MODERN else "legacy"  # "auto" discovers the server and takes 2026-07-28
    if transport == "stdio":
        session = stdio_session(portal, data_dir, data_dir / f"{request.param}.log", mode=mode)
    else:
        session = http_session(portal, request.getfixturevalue("http").url, mode=mode)
    with session as connected:
        assert connected.protocol_version == era
        for content, tags in KITCHEN:
            connected.call_tool("remember", {"content": content, "tags": [f"{request.param}-{t}" for t in tags]})
        yield connected


def label(live: Live) -> str:
    """The session's tag prefix, e.g. 'stdio-2026-07-28'."""
    tags = live.call_tool("list_recent", {"limit": 1}).structured_content["memories"][0]["tags"]
    return str(tags[0]).rsplit("-", 1)[0]


def capabilities(live: Live) -> dict[str, Any]:
    if live.protocol_version == MODERN:  # no initialize: the capabilities come from server/discover
        discovered = live.portal.call(live.client.session.discover)  # the result the client adopted
        return discovered.capabilities.model_dump(by_alias=True, exclude_none=True)
    return live.server_capabilities.model_dump(by_alias=True, exclude_none=True)


def test_capabilities_show_exactly_what_is_served(live: Live) -> None:
    """initialize (or server/discover) lists tools, resources, prompts, completions and logging, nothing else (and
    server/discover the MCP Apps extension)."""
    assert capabilities(live) == {**CAPABILITIES, **(APPS if live.protocol_version == MODERN else {})}


def test_prompts_list_shows_both_prompts_and_their_arguments(live: Live) -> None:
    listed = {p.name: p for p in live.list_prompts().prompts}
    assert list(listed) == ["recall-context", "remember-session"]
    assert [(a.name, a.required) for a in listed["recall-context"].arguments] == [
        ("topic", True),
        ("namespace", False),
        ("kind", False),
    ]
    assert [(a.name, a.required) for a in listed["remember-session"].arguments] == [("focus", False)]
    assert all(p.title and p.description for p in listed.values())


def test_recall_context_is_a_user_message_of_the_relevant_memories_with_dates_and_tags(live: Live) -> None:
    """The real hybrid search picks the kitchen memories; each line carries its date and tags."""
    mine = label(live)
    result = live.get_prompt("recall-context", {"topic": "when does the kitchen renovation start?"})
    [message] = result.messages
    assert message.role == "user" and isinstance(message.content, types.TextContent)
    text = message.content.text
    lines = [line for line in text.splitlines() if line[:1].isdigit()]
    first = next(line for line in lines if f"{mine}-renovation" in line)
    assert "3 March" in first and "Ana Pereira" in first
    created = live.call_tool("list_recent", {"limit": 1}).structured_content["memories"][0]["created_at"]
    assert f"({created[:10]}; tags: {mine}-kitchen, {mine}-renovation)" in first
    assert "oak cabinets" in text
    assert len(lines) <= 10


def test_remember_session_asks_for_facts_and_offers_the_tags_in_use(live: Live) -> None:
    result = live.get_prompt("remember-session", {"focus": "the kitchen"})
    text = result.messages[0].content.text
    assert "remember tool" in text and "concentrating on the kitchen" in text
    assert f"{label(live)}-kitchen" in text


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("no-such-prompt", {}, "Unknown prompt: no-such-prompt"),
        ("recall-context", {}, "Missing required argument 'topic' of prompt recall-context"),
        ("recall-context", {"topic": "   "}, "Missing required argument 'topic'"),
        ("recall-context", {"topik": "tea"}, "has no argument 'topik' (did you mean 'topic'?)"),
    ],
)
def test_prompt_errors_are_invalid_params(live: Live, name: str, arguments: dict[str, str], message: str) -> None:
    """Spec (prompts): an unknown prompt or a missing required argument is -32602, with a message saying which."""
    with pytest.raises(MCPError) as caught:
        live.get_prompt(name, arguments)
    assert caught.value.error.code == types.INVALID_PARAMS and message in caught.value.error.message


def test_tag_completion_by_prefix_most_used_first(live: Live) -> None:
    mine = label(live)
    ref = types.ResourceTemplateReference(type="ref/resource", uri="memory://tags/{tag}")
    completion = live.complete(ref, {"name": "tag", "value": mine.upper()}).completion  # prefixes ignore case
    assert completion.values == [f"{mine}-kitchen", f"{mine}-renovation"]  # kitchen: 2 memories, renovation: 1
    assert (completion.total, completion.has_more) == (2, False)


def test_topic_completion_offers_tags_then_words_of_recent_memories(live: Live) -> None:
    ref = types.PromptReference(type="ref/prompt", name="recall-context")
    assert "quartz" in live.complete(ref, {"name": "topic", "value": "qua"}).completion.values
    mine = label(live)
    assert live.complete(ref, {"name": "topic", "value": mine}).completion.values[:2] == [
        f"{mine}-kitchen",
        f"{mine}-renovation",
    ]


def test_completion_of_something_that_does_not_exist_is_invalid_params(live: Live) -> None:
    for ref, argument in [
        (types.ResourceTemplateReference(type="ref/resource", uri="memory://nothing/{x}"), "x"),
        (types.ResourceTemplateReference(type="ref/resource", uri="memory://tags/{tag}"), "name"),
        (types.PromptReference(type="ref/prompt", name="recall-context"), "focus"),
    ]:
        with pytest.raises(MCPError) as caught:
            live.complete(ref, {"name": argument, "value": ""})
        assert caught.value.error.code == types.INVALID_PARAMS


def test_logging_set_level_exists_in_the_handshake_era_only(live: Live) -> None:
    """logging/setLevel exists through 2025-11-25 (SEP-2577 deprecates it); 2026-07-28 opts in per request instead,
    and the SDK answers the method there with -32601."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        if live.protocol_version != MODERN:
            assert live.set_logging_level("warning") is not None
            return
        with pytest.raises(MCPError) as caught:
            live.set_logging_level("warning")
    assert caught.value.error.code == types.METHOD_NOT_FOUND


# --- the TypeScript SDK's client ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ts_script() -> Path:
    return ts_client.install()


def check_ts(seen: dict[str, Any]) -> None:
    caps = seen["capabilities"]
    assert {name: caps.get(name) for name in CAPABILITIES} == CAPABILITIES and set(caps) == set(CAPABILITIES)
    assert seen["server"]["name"] == "memserver"
    assert [p["name"] for p in seen["prompts"]] == ["recall-context", "remember-session"]
    text = seen["recallContext"]["messages"][0]["content"]["text"]
    assert "oolong tea" in text and "tags: ts-e2e" in text
    assert "remember tool" in seen["rememberSession"]["messages"][0]["content"]["text"]
    assert seen["unknownPrompt"]["code"] == types.INVALID_PARAMS
    assert seen["missingArgument"]["code"] == types.INVALID_PARAMS
    assert seen["tagCompletion"]["values"] == ["ts-e2e"]
    assert "oolong" in seen["topicCompletion"]["values"]
    assert seen["unknownTemplate"]["code"] == types.INVALID_PARAMS
    assert seen["setLevel"] == {}


def test_typescript_client_over_stdio(ts_script: Path, tmp_path: Path) -> None:
    """The TypeScript SDK spawns `memserver serve` itself."""
    config = {"scenario": "surface", "transport": "stdio", "command": SERVE[0], "args": SERVE[1:]}
    check_ts(ts_client.run(ts_script, {**config, "env": server_env(tmp_path), "cwd": str(ROOT)}))


def test_typescript_client_over_http(ts_script: Path, http: HttpServer) -> None:
    check_ts(ts_client.run(ts_script, {"scenario": "surface", "transport": "http", "url": http.url}))
