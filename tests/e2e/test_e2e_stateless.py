"""`memserver serve --http --stateless` end to end: two instances on one data directory behind a round-robin proxy
(tests/e2e/round_robin.py: no sticky sessions) serve one client alternately, through the SDK's client in both eras
and through the TypeScript SDK's; what needs a session is refused with a reason, never left hanging; and every
protection of /mcp holds (Host/Origin, tokens, bodies, request slots, wire checks), session caps excepted: there
are no sessions."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal
from mcp.shared.exceptions import MCPError

from tests.conftest import PostgresForTests
from tests.e2e import ts_client
from tests.e2e.raw import INITIALIZE, MCP_HEADERS, RawHttp, encode
from tests.e2e.servers import HttpServer, http_server, http_session, round_robin
from tests.e2e.test_e2e_limits import answer_of, stalled_post
from tests.e2e.test_e2e_messages import META, SURROGATE
from tests.e2e.test_e2e_surface import CAPABILITIES, check_ts
from tests.support.surface import MEMORY_TOOLS

ALICE = "stateless-alice-0123456789ab"
BOB = "stateless-bob-0123456789abcd"
TOKENS = f"alice:{ALICE},bob:{BOB}"
LIMIT_EXCEEDED = -32005
PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}


@pytest.fixture(scope="module")
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[HttpServer]]:
    """Two stateless instances on one data directory (the local store's file lock makes that safe)."""
    data = tmp_path_factory.mktemp("stateless-data")
    with ExitStack() as stack:
        yield [stack.enter_context(http_server(data, "--stateless", MEMSERVER_TOKENS=TOKENS)) for _ in range(2)]


@pytest.fixture(scope="module")
def proxy(pair: list[HttpServer]) -> Iterator[str]:
    """The /mcp URL of a proxy that sends each request to the other instance than the one before."""
    with round_robin(*(server.url.removesuffix("/mcp") for server in pair)) as base:
        yield base + "/mcp"


def served(proxy: str) -> dict[str, int]:
    with httpx2.Client(timeout=30) as http:
        counts: dict[str, int] = http.get(proxy.removesuffix("/mcp") + "/_proxy/served").json()
        return counts


# --- one client, two instances -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
def test_the_sdk_client_is_served_by_both_instances_in_turn(proxy: str, portal: BlockingPortal, mode: str) -> None:
    """Each call lands on the other instance than the one before: what one stored, the next one finds, reads,
    completes and puts into a prompt."""
    before = served(proxy)
    era = "2026-07-28" if mode == "auto" else "2025-11-25"
    with http_session(portal, proxy, ALICE, mode=mode) as live:
        assert live.protocol_version == era
        assert [t.name for t in live.list_tools().tools] == MEMORY_TOOLS
        fact = f"Stateless {era}: the spare key is under the blue flowerpot."
        tag = f"stateless-{era}"
        stored = live.call_tool("remember", {"content": fact, "tags": [tag]}).structured_content
        assert stored["status"] == "stored"
        for _ in range(2):  # one of these two is answered by the instance that did not store it
            hits = live.call_tool("recall", {"query": "where is the spare key?", "tags": [tag]})
            assert hits.structured_content["results"][0]["id"] == stored["id"]
        read = json.loads(live.read_resource(f"memory://memories/{stored['id']}").contents[0].text)
        assert read["content"] == fact
        assert "blue flowerpot" in live.get_prompt("recall-context", {"topic": "spare key"}).messages[0].content.text
        ref = types.ResourceTemplateReference(type="ref/resource", uri="memory://tags/{tag}")
        assert live.complete(ref, {"name": "tag", "value": tag}).completion.values == [tag]
        with pytest.raises(MCPError) as caught:
            live.call_tool("no-such-tool", {})
        assert caught.value.error.code == types.INVALID_PARAMS
    after = served(proxy)
    assert all(after[url] - before.get(url, 0) >= 4 for url in after) and len(after) == 2, (before, after)


def test_an_instance_sees_what_the_other_stored_at_its_next_call(pair: list[HttpServer]) -> None:
    """Without the proxy: a remember posted to one instance, then a recall posted to the other."""
    first, second = (RawHttp(server.url, BOB) for server in pair)
    fact = "Bob's bicycle lock combination is written inside the toolbox lid."
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "remember"}}
    call["params"]["arguments"] = {"content": fact}
    stored = first.call(call)["result"]["structuredContent"]
    query = {"name": "recall", "arguments": {"query": "bicycle lock combination", "limit": 1}}
    found = second.call({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": query})
    assert found["result"]["structuredContent"]["results"][0]["id"] == stored["id"]
    for conn in (first, second):
        conn.close()


def test_two_instances_on_one_postgresql_database(
    postgres: PostgresForTests, tmp_path: Path, portal: BlockingPortal
) -> None:
    """What the mode is for: instances that share nothing but a PostgreSQL database (--database), behind the
    round-robin proxy, one store per token's user (the database's row-level security) across both."""
    env = {"MEMSERVER_DATABASE_URL": postgres.database("e2e_stateless"), "MEMSERVER_TOKENS": TOKENS}
    with ExitStack() as stack:
        servers = [stack.enter_context(http_server(tmp_path / f"i{n}", "--stateless", **env)) for n in range(2)]
        base = stack.enter_context(round_robin(*(server.url.removesuffix("/mcp") for server in servers)))
        alice = stack.enter_context(http_session(portal, base + "/mcp", ALICE))
        bob = stack.enter_context(http_session(portal, base + "/mcp", BOB))
        fact = "On PostgreSQL: the wifi password is on the fridge, under the cat magnet."
        stored = alice.call_tool("remember", {"content": fact}).structured_content
        for _ in range(2):  # answered by one instance, then by the other
            hits = alice.call_tool("recall", {"query": "wifi password", "limit": 1}).structured_content["results"]
            assert hits[0]["id"] == stored["id"]
            assert bob.call_tool("list_recent", {}).structured_content["memories"] == []
        assert json.loads(alice.read_resource("memory://stats").contents[0].text)["engine"] == "postgresql"
        assert all(count >= 4 for count in served(base + "/mcp").values())


def test_the_typescript_client_through_the_proxy(proxy: str) -> None:
    """The same surface as over stateful HTTP, except logging/setLevel, refused with its reason."""
    seen = ts_client.run(ts_client.install(), {"scenario": "surface", "transport": "http", "url": proxy, "token": BOB})
    set_level = seen.pop("setLevel")
    check_ts({**seen, "setLevel": {}})
    assert set_level["error"]["code"] == types.METHOD_NOT_FOUND and "stateless" in set_level["error"]["message"]
    assert {name: seen["capabilities"].get(name) for name in CAPABILITIES} == CAPABILITIES


# --- what needs a session ------------------------------------------------------------------------------------------


def test_each_post_stands_alone(pair: list[HttpServer]) -> None:
    """initialize opens no session (no mcp-session-id); a request needs no initialize; answers are SSE streams
    (the POST's own stream carries its progress and log records first)."""
    conn = RawHttp(pair[0].url, ALICE)
    status, answers, response = conn.post(encode(INITIALIZE))
    assert status == 200 and "mcp-session-id" not in response.headers
    assert answers[0]["result"]["capabilities"] == CAPABILITIES
    status, answers, response = conn.post(encode({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}))
    assert status == 200 and len(answers[0]["result"]["tools"]) == len(MEMORY_TOOLS)
    assert response.headers["content-type"].startswith("text/event-stream")
    conn.close()


@pytest.mark.parametrize("method", ["logging/setLevel", "resources/subscribe", "resources/unsubscribe"])
def test_a_method_that_needs_a_session_is_refused_with_its_reason(pair: list[HttpServer], method: str) -> None:
    conn = RawHttp(pair[1].url, ALICE)
    params = {"level": "info"} if method == "logging/setLevel" else {"uri": "memory://stats"}
    status, answers, _ = conn.post(encode({"jsonrpc": "2.0", "id": "s", "method": method, "params": params}))
    conn.close()
    assert status == 200 and answers[0]["id"] == "s" and answers[0]["error"]["code"] == types.METHOD_NOT_FOUND
    assert "stateless" in answers[0]["error"]["message"]


def test_the_get_stream_and_delete_are_405_at_once(pair: list[HttpServer]) -> None:
    """The SDK alone would open a GET stream on a throw-away transport that never carries anything."""
    headers = {"Authorization": f"Bearer {ALICE}", "Accept": "text/event-stream"}
    with httpx2.Client(timeout=10) as http:
        for method in ("GET", "DELETE"):
            response = http.request(method, pair[0].url, headers=headers)
            assert response.status_code == 405 and response.headers["allow"] == "POST", method
            assert "stateless" in response.json()["error"]["message"]


def test_2026_requests_are_served_as_on_a_stateful_server(pair: list[HttpServer]) -> None:
    """The 2026-07-28 era has no sessions anyway; the SDK routes it by its header, in either mode."""
    conn = RawHttp(pair[0].url, ALICE)
    call = {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "list_recent", "arguments": {}}}
    call["params"]["_meta"] = META
    headers = {"mcp-protocol-version": "2026-07-28", "mcp-method": "tools/call", "mcp-name": "list_recent"}
    status, answers, _ = conn.post(encode(call), **headers)
    conn.close()
    assert status == 200 and "memories" in answers[0]["result"]["structuredContent"]


# --- protections ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("token", "headers", "body", "status"),
    [
        (None, {}, encode(PING), 401),
        ("not-a-token-anybody-has", {}, encode(PING), 401),
        (ALICE, {"origin": "http://evil.example"}, encode(PING), 403),
        (ALICE, {"host": "evil.example:8000"}, encode(PING), 421),
        (ALICE, {}, b" " * (1024 * 1024 + 1), 413),
    ],
    ids=["no token", "unknown token", "foreign origin", "foreign host", "body too large"],
)
def test_the_http_protections_hold(
    pair: list[HttpServer], token: str | None, headers: dict[str, str], body: bytes, status: int
) -> None:
    with httpx2.Client(timeout=30) as http:
        auth = {"authorization": f"Bearer {token}"} if token else {}
        assert http.post(pair[0].url, content=body, headers={**MCP_HEADERS, **auth, **headers}).status_code == status


@pytest.mark.parametrize(
    ("body", "code", "request_id"),
    [
        (SURROGATE, types.INVALID_PARAMS, 1443),
        (b'{"jsonrpc":"2.0","id":1,', types.PARSE_ERROR, None),
        (encode({**PING, "jsonrpc": "1.0", "id": 7}), types.INVALID_REQUEST, 7),
        (encode({**PING, "method": "m" * 5000}), types.METHOD_NOT_FOUND, 1),
    ],
    ids=["lone surrogate", "malformed", "jsonrpc 1.0", "huge method"],
)
def test_every_message_is_checked_and_answered_with_its_id(
    pair: list[HttpServer], body: bytes, code: int, request_id: Any
) -> None:
    conn = RawHttp(pair[1].url, ALICE)
    status, answers, _ = conn.post(body)
    conn.close()
    assert status == 400 and answers[0]["id"] == request_id and answers[0]["error"]["code"] == code
    assert "pydantic" not in json.dumps(answers)


def test_body_timeouts_hold_and_session_caps_do_not_apply(tmp_path: Path) -> None:
    """One session allowed per user and in all, yet five clients initialize (there are no sessions to count);
    two stalled bodies hold none of the two request slots (a body is received first), so others are served
    meanwhile; the stalled bodies get 408 after --body-timeout. (The request caps themselves, stateless too:
    test_e2e_limits.)"""
    args = ["--stateless", "--max-sessions", "1", "--max-sessions-per-user", "1", "--max-concurrent-requests", "2"]
    args += ["--queue-timeout", "0.3", "--body-timeout", "3", "--max-connections", "16"]
    with http_server(tmp_path, *args) as server:
        clients = [RawHttp(server.url) for _ in range(5)]
        assert [conn.post(encode(INITIALIZE))[0] for conn in clients] == [200] * 5
        stalled = [stalled_post(server) for _ in range(2)]
        assert [conn.post(encode(PING))[0] for conn in clients] == [200] * 5
        for sock in stalled:
            assert answer_of(sock).startswith(b"HTTP/1.1 408")
            sock.close()
        assert clients[0].post(encode(PING))[0] == 200
        for conn in clients:
            conn.close()
