"""The in-chat memory browser (features/apps.py, an MCP App: SEP-1865) through a real MCP client session, in both
protocol eras: the tool that links the page, the ui:// resource and its metadata, the text answer for hosts without
apps, and what an unknown ui:// URI gets. tests/server/test_app_page.py drives the page itself in a browser.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Iterator
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from memserver.contract.backend import MemoryBackend
from memserver.features import apps
from memserver.features.tool_sets import chat_tools
from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.support.fakes import FakeEmbedder

TIMEOUT = 10
MIME_TYPE = "text/html;profile=mcp-app"  # the spec's, spelled out: the test does not take it from the code
EXTENSION = "io.modelcontextprotocol/ui"
ERAS = pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryBackend]:
    with MemoryStore(tmp_path, "apps", embedder=FakeEmbedder()) as opened:
        yield opened


def _text(result: types.CallToolResult) -> str:
    assert len(result.content) == 1 and isinstance(result.content[0], types.TextContent)
    return result.content[0].text


# --- discovery: the tool names the page, the page exists ------------------------------------------------------------


@pytest.mark.anyio
@ERAS
async def test_the_browse_tool_links_the_page_that_resources_list_serves(store: MemoryBackend, mode: str) -> None:
    """Spec "Resource Discovery": _meta.ui.resourceUri (and the deprecated flat key) names a ui:// resource that
    exists, listed as text/html;profile=mcp-app with a CSP that allows no outside domain; the server advertises the
    extension in its capabilities (SEP-2133; a 2026-07-28 field, which the SDK's 2025-11-25 wire models drop)."""
    async with Client(build_server(lambda user: store), mode=mode) as client:
        with anyio.fail_after(TIMEOUT):
            tool = {tool.name: tool for tool in (await client.list_tools()).tools}["browse_memories"]
            listed = {resource.uri: resource for resource in (await client.list_resources()).resources}
        capabilities = client.server_capabilities.model_dump(by_alias=True, exclude_none=True)
    uri = tool.meta["ui"]["resourceUri"]
    assert uri.startswith("ui://") and tool.meta["ui/resourceUri"] == uri
    page = listed[uri]
    assert page.mime_type == MIME_TYPE
    assert page.meta == {
        "ui": {
            "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []},
            "prefersBorder": True,
        }
    }
    if mode == "auto":
        assert capabilities["extensions"] == {EXTENSION: {}}
    assert tool.annotations is not None and tool.annotations.read_only_hint is True
    # Kept small: the whole tool list has a budget. Description and schema together stay under 400 bytes.
    assert len(tool.description or "") + len(json.dumps(tool.input_schema)) < 400


@pytest.mark.anyio
@ERAS
async def test_reading_the_page_returns_the_html_with_its_metadata_and_a_policy_of_its_own(
    store: MemoryBackend, mode: str
) -> None:
    """Spec "UI Resource Format": the content has the URI, the MIME type and _meta.ui; the text is an HTML document
    whose own Content-Security-Policy allows exactly its script and style (by hash) and no network at all."""
    async with Client(build_server(lambda user: store), mode=mode) as client:
        with anyio.fail_after(TIMEOUT):
            read = await client.read_resource(apps.URI)
    (content,) = read.contents
    assert isinstance(content, types.TextResourceContents)
    assert (content.uri, content.mime_type) == (apps.URI, MIME_TYPE)
    assert content.meta is not None and content.meta["ui"]["csp"]["connectDomains"] == []
    html = content.text
    assert html.startswith("<!DOCTYPE html>") and html.rstrip().endswith("</html>")
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', html)
    assert policy is not None
    directives = dict(part.strip().split(" ", 1) for part in policy.group(1).split(";"))
    assert directives["default-src"] == "'none'" and directives["connect-src"] == "'none'"
    for kind in ("script", "style"):
        (body,) = re.findall(rf"<{kind}>(.*?)</{kind}>", html, re.DOTALL)
        digest = base64.b64encode(hashlib.sha256(body.encode()).digest()).decode()
        assert directives[f"{kind}-src"] == f"'sha256-{digest}'"
    # Memory fields reach the page as text only; nothing in it evaluates strings as code or markup.
    for banned in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", "http"):
        assert banned not in html.split("<script>", 1)[1], banned


@pytest.mark.anyio
@ERAS
async def test_an_unknown_ui_uri_is_a_protocol_error(store: MemoryBackend, mode: str) -> None:
    async with Client(build_server(lambda user: store), mode=mode) as client:
        for uri in ("ui://memserver/other", f"{apps.URI}?x=1", "ui://elsewhere/browser"):
            with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as caught:
                await client.read_resource(uri)
            assert caught.value.error.code == types.INVALID_PARAMS, uri
            assert apps.URI in caught.value.error.message  # it says which ui:// resource there is


@pytest.mark.anyio
async def test_the_chat_tool_set_has_no_app(store: MemoryBackend) -> None:
    """--tools chat serves no browse tool, so no page and no extension either (the page calls the memory tools)."""
    async with Client(build_server(lambda user: store, tool_set=chat_tools()), mode="legacy") as client:
        with anyio.fail_after(TIMEOUT):
            names = [tool.name for tool in (await client.list_tools()).tools]
            uris = [resource.uri for resource in (await client.list_resources()).resources]
            with pytest.raises(MCPError) as caught:
                await client.read_resource(apps.URI)
        capabilities = client.server_capabilities.model_dump(by_alias=True, exclude_none=True)
    assert "browse_memories" not in names and not [uri for uri in uris if uri.startswith("ui://")]
    assert caught.value.error.code == types.INVALID_PARAMS
    assert "extensions" not in capabilities


# --- the text answer, for the model and for hosts without apps -------------------------------------------------------


@pytest.mark.anyio
@ERAS
async def test_browsing_answers_an_overview_in_plain_text(store: MemoryBackend, mode: str) -> None:
    """Spec "Graceful Degradation": counts, the newest memories with their ids, the most used tags, what to call
    next; contents on one line each, cut short."""
    old = store.add("the user paddles a sea kayak", tags=["sport"], occurred_at="2026-01-02T10:00:00Z")
    store.add("the user knits scarves\nin winter", tags=["crafts", "sport"], occurred_at="2026-01-03T10:00:00Z")
    store.add("long " * 200, occurred_at="2026-01-04T10:00:00Z")
    store.add("someone else's memory", namespace="user:bob")
    async with Client(build_server(lambda user: store), mode=mode) as client:
        with anyio.fail_after(TIMEOUT):
            result = await client.call_tool("browse_memories", {})
    assert not result.is_error and result.structured_content is None
    text = _text(result)
    lines = text.splitlines()
    assert lines[0] == "3 memories (4 in 2 namespaces)."
    assert lines[1] == "Newest 3:"
    assert lines[3].startswith("- ") and "(2026-01-03; tags crafts, sport): the user knits scarves in winter" in text
    assert lines[4] == f"- {old.id} (2026-01-02; tags sport): the user paddles a sea kayak"
    assert len(lines[2]) < 220 and lines[2].endswith("…")
    assert "Most used tags: sport (2), crafts (1)." in text
    assert "recall" in lines[-1] and "memory://memories/{id}" in lines[-1] and "forget" in lines[-1]
    assert "bob" not in text


@pytest.mark.anyio
async def test_browsing_with_a_query_shows_the_best_matches_of_the_namespace(store: MemoryBackend) -> None:
    store.add("alice paddles a sea kayak on weekends", namespace="user:alice")
    store.add("alice bakes bread", namespace="user:alice")
    store.add("bob paddles a canoe", namespace="user:bob")
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        with anyio.fail_after(TIMEOUT):
            found = _text(await client.call_tool("browse_memories", {"query": "kayak", "namespace": "user:alice"}))
            empty = _text(await client.call_tool("browse_memories", {"namespace": "nobody"}))
    assert found.splitlines()[0] == "2 memories in namespace user:alice (3 in 2 namespaces)."
    assert found.splitlines()[1] == 'Best matches for "kayak":'
    assert "score" in found.splitlines()[2] and "sea kayak" in found.splitlines()[2]
    assert "canoe" not in found
    assert empty == "0 memories in namespace nobody (3 in 2 namespaces).\nremember stores one."


@pytest.mark.anyio
async def test_bad_browse_arguments_are_tool_errors(store: MemoryBackend) -> None:
    """Invalid arguments are a tool execution error the model can act on, naming the field."""
    store.add("something to search")
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        with anyio.fail_after(TIMEOUT):
            bad_namespace = await client.call_tool("browse_memories", {"namespace": "not a namespace"})
            unknown = await client.call_tool("browse_memories", {"limit": 3})
            blank = await client.call_tool("browse_memories", {"query": "   "})
    for result in (bad_namespace, unknown, blank):
        assert result.is_error
    assert _text(bad_namespace).startswith("namespace")
    assert "limit" in _text(unknown)
    assert "query" in _text(blank)
