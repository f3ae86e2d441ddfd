"""The legacy HTTP+SSE transport (`memserver serve --http --sse`, MCP 2024-11-05) end to end: the SDK's SSE client
and the TypeScript SDK's SSEClientTransport over the real store and model, and raw sessions for the protections:
tokens, Origin and Host, body limits, sessions bound to their user, caps shared with /mcp, request slots held until
the answer, refused messages answered on the stream."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal
from mcp.shared.exceptions import MCPError

from tests.e2e import ts_client
from tests.e2e.raw import INITIALIZE, MCP_HEADERS, RawHttp, RawSse, encode
from tests.e2e.servers import GATED, HttpServer, http_server, sse_session
from tests.e2e.test_e2e_limits import until
from tests.e2e.test_e2e_messages import META
from tests.e2e.test_e2e_progress import release
from tests.e2e.test_e2e_surface import CAPABILITIES, check_ts
from tests.support.surface import MEMORY_TOOLS

ALICE = "sse-alice-token-0123456789"
BOB = "sse-bob-token-0123456789ab"
CAROL = "sse-carol-token-0123456789"
LIMIT_EXCEEDED = -32005


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    tokens = f"alice:{ALICE},bob:{BOB}"
    args = ("--sse", "--allowed-host", "memory-server")
    with http_server(tmp_path_factory.mktemp("sse-data"), *args, MEMSERVER_TOKENS=tokens) as running:
        assert "legacy SSE at " in "".join(running.log)
        yield running


@pytest.fixture
def alice(server: HttpServer) -> Iterator[RawSse]:
    with RawSse(server.sse_url, ALICE) as session:
        session.initialize()
        yield session


# --- the SDK's clients -----------------------------------------------------------------------------------------


def test_python_sse_client_uses_tools_resources_prompts_and_completions(
    server: HttpServer, portal: BlockingPortal
) -> None:
    with sse_session(portal, server.sse_url, ALICE) as live:
        assert live.protocol_version == "2025-11-25"  # handshake era only
        assert live.server_capabilities.model_dump(by_alias=True, exclude_none=True) == CAPABILITIES
        assert [t.name for t in live.list_tools().tools] == MEMORY_TOOLS
        fact = "Over SSE: the boat is moored at pier 7 in Olhão."
        stored = live.call_tool("remember", {"content": fact, "tags": ["sse-boat"]}).structured_content
        assert stored["status"] == "stored"
        hits = live.call_tool("recall", {"query": "where is the boat moored?"}).structured_content["results"]
        assert hits[0]["id"] == stored["id"]
        read = json.loads(live.read_resource(f"memory://memories/{stored['id']}").contents[0].text)
        assert read["content"] == fact
        assert "memory://stats" in [str(r.uri) for r in live.list_resources().resources]
        prompt = live.get_prompt("recall-context", {"topic": "the boat"}).messages[0].content.text
        assert "pier 7" in prompt
        ref = types.ResourceTemplateReference(type="ref/resource", uri="memory://tags/{tag}")
        assert live.complete(ref, {"name": "tag", "value": "sse-"}).completion.values == ["sse-boat"]


def test_python_sse_client_gets_the_protocol_errors(server: HttpServer, portal: BlockingPortal) -> None:
    """The error planes are the same as over stdio and /mcp: isError for bad arguments, -32602 for what does not
    exist."""
    with sse_session(portal, server.sse_url, BOB) as live:
        bad = live.call_tool("recall", {"query": 5})
        assert bad.is_error and "query" in bad.content[0].text
        for call in (
            lambda: live.call_tool("no-such-tool", {}),
            lambda: live.read_resource("memory://memories/" + "0" * 32),
            lambda: live.get_prompt("recall-context", {}),
        ):
            with pytest.raises(MCPError) as caught:
                call()
            assert caught.value.error.code == types.INVALID_PARAMS


def test_typescript_sse_client(server: HttpServer) -> None:
    """The TypeScript SDK's SSEClientTransport (deprecated there, still shipped): the whole surface, setLevel too."""
    seen = ts_client.run(
        ts_client.install(), {"scenario": "surface", "transport": "sse", "url": server.sse_url, "token": ALICE}
    )
    check_ts(seen)
    assert seen["unknownTool"]["code"] == types.INVALID_PARAMS
    assert seen["badArguments"]["isError"] is True
    assert seen["unknownResource"]["code"] == types.INVALID_PARAMS


def test_the_cleverchatty_config_works_as_written(server: HttpServer) -> None:
    """The seed's config: `"url": "http://memory-server/sse"` with `Authorization: Bearer ...`, i.e. a Host header
    without a port (a proxy or a container on port 80; here the name is only in the headers)."""
    headers = {"Host": "memory-server", "Authorization": f"Bearer {ALICE}"}
    base = server.url.removesuffix("/mcp")
    with httpx2.Client(timeout=30) as http, http.stream("GET", base + "/sse", headers=headers) as stream:
        assert stream.status_code == 200
        lines = stream.iter_lines()
        endpoint = next(line[5:].strip() for line in lines if line.startswith("data:"))
        assert endpoint.startswith("/messages/?session_id=")  # relative: the client joins it with its own URL
        posted = http.post(base + endpoint, content=encode(INITIALIZE), headers={**headers, **MCP_HEADERS})
        assert posted.status_code == 202
        answer = json.loads(next(line[5:] for line in lines if line.startswith("data:")))
    assert answer["id"] == INITIALIZE["id"] and answer["result"]["serverInfo"]["name"] == "memserver"


# --- who may connect ---------------------------------------------------------------------------------------------


def test_a_missing_or_wrong_token_is_401_on_both_endpoints(server: HttpServer, alice: RawSse) -> None:
    for token in (None, "not-a-token-anybody-has"):
        with RawSse(server.sse_url, token) as refused:
            assert refused.status == 401 and refused.endpoint is None
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        with httpx2.Client(timeout=30) as http:
            response = http.post(alice.endpoint or "", content=encode(INITIALIZE), headers=headers)
        assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")


def test_a_foreign_origin_is_403_and_a_foreign_host_421(server: HttpServer, alice: RawSse) -> None:
    """DNS-rebinding protection on both endpoints, before anything else is looked at."""
    auth = {"Authorization": f"Bearer {ALICE}"}
    with httpx2.Client(timeout=30) as http:
        for headers, status in (({"Origin": "http://evil.example"}, 403), ({"Host": "evil.example:80"}, 421)):
            assert http.get(server.sse_url, headers={**auth, **headers}).status_code == status
            assert http.get(server.sse_url, headers=headers).status_code == status  # no token: still not 401
            assert alice.post(encode({"jsonrpc": "2.0", "id": 1, "method": "ping"}), **headers)[0] == status
    assert alice.call({"jsonrpc": "2.0", "id": 2, "method": "ping"})["result"] == {}


def test_a_session_is_its_users_only(server: HttpServer, alice: RawSse) -> None:
    """Bob's token on Alice's session URL: 404 with the request's id, as for a session that never existed, and
    nothing reaches Alice's stream; a session id that never existed, or none at all, is refused alike."""
    ping = encode({"jsonrpc": "2.0", "id": 5, "method": "ping"})
    status, answers, _ = alice.post(ping, authorization=f"Bearer {BOB}")
    assert status == 404 and answers[0]["id"] == 5 and "Session not found" in answers[0]["error"]["message"]
    unknown = (alice.endpoint or "").replace(alice.session_id, "0" * 32)
    assert alice.post(ping, endpoint=unknown)[0] == 404
    status, answers, _ = alice.post(ping, endpoint=(alice.endpoint or "").split("?")[0])
    assert status == 400 and "session_id" in answers[0]["error"]["message"]
    assert alice.events.empty()
    assert alice.call({"jsonrpc": "2.0", "id": 6, "method": "ping"})["result"] == {}


# --- what is sent --------------------------------------------------------------------------------------------------


def test_a_body_over_the_limit_is_413(alice: RawSse) -> None:
    status, answers, _ = alice.post(b" " * (1024 * 1024 + 1))
    assert status == 413 and answers[0]["error"]["code"] == LIMIT_EXCEEDED
    assert alice.call({"jsonrpc": "2.0", "id": 7, "method": "ping"})["result"] == {}


@pytest.mark.parametrize(
    ("body", "code", "request_ids"),
    [
        (b'{"jsonrpc":"2.0","id":1443,"method":"ping","params":{"x":"\\ud83d"}}', types.INVALID_PARAMS, [1443]),
        (encode({"jsonrpc": "1.0", "id": "v", "method": "ping"}), types.INVALID_REQUEST, ["v"]),
        (encode([{"jsonrpc": "2.0", "id": 8, "method": "ping"}, {"jsonrpc": "2.0", "id": 9}]), -32600, [8, 9]),
        (encode({"jsonrpc": "2.0", "id": 10, "method": "m" * 5000}), types.METHOD_NOT_FOUND, [10]),
    ],
    ids=["lone surrogate", "jsonrpc 1.0", "batch", "huge method"],
)
def test_a_refused_message_with_an_id_is_answered_on_the_stream(
    alice: RawSse, body: bytes, code: int, request_ids: list[Any]
) -> None:
    """Where the client waits for its answers; the POST is 202 as for any message (a client that sees an error
    status may give up its session)."""
    status, _, _ = alice.post(body)
    assert status == 202
    answers = [alice.next_event() for _ in request_ids]
    assert [a["id"] for a in answers] == request_ids and {a["error"]["code"] for a in answers} == {code}
    assert all("pydantic" not in json.dumps(a) for a in answers)


def test_an_unparseable_message_is_answered_400_in_the_post(alice: RawSse) -> None:
    """No id to match an answer on the stream with: the parse error is the POST's own answer."""
    status, answers, _ = alice.post(b'{"jsonrpc":"2.0","id":11,')
    assert status == 400 and answers[0]["id"] is None and answers[0]["error"]["code"] == types.PARSE_ERROR
    assert alice.call({"jsonrpc": "2.0", "id": 12, "method": "ping"})["result"] == {}


def test_a_request_before_initialize_and_a_2026_client_are_told_what_to_do(server: HttpServer) -> None:
    """Before the handshake: ping is answered, anything else -32600 saying so (the SDK says -32602 "Invalid request
    parameters"), pointing a 2026-07-28 client (its `_meta` envelope, server/discover) at /mcp."""
    with RawSse(server.sse_url, BOB) as early:
        assert early.call({"jsonrpc": "2.0", "id": 1, "method": "ping"})["result"] == {}
        for request_id, method in ((2, "tools/list"), (3, "server/discover")):
            params = {"_meta": META}
            answer = early.call({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
            assert answer["error"]["code"] == types.INVALID_REQUEST
            assert "not initialized" in answer["error"]["message"] and "uses /mcp" in answer["error"]["message"]
        assert early.initialize()["result"]["protocolVersion"] == "2025-11-25"
        assert len(early.call({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})["result"]["tools"]) == len(
            MEMORY_TOOLS
        )


# --- limits ----------------------------------------------------------------------------------------------------------


def test_sessions_are_capped_per_user_and_in_all_across_both_transports(tmp_path: Path) -> None:
    """One session per user, two in all, SSE streams and /mcp sessions counted together: Alice's second (either
    transport) gets 429, Carol's 503; closing Alice's stream makes room again."""
    tokens = f"alice:{ALICE},bob:{BOB},carol:{CAROL}"
    caps = ("--max-sessions", "2", "--max-sessions-per-user", "1")
    with http_server(tmp_path, "--sse", *caps, MEMSERVER_TOKENS=tokens) as server:
        first = RawSse(server.sse_url, ALICE)
        assert first.status == 200
        with RawSse(server.sse_url, ALICE) as second:
            assert second.status == 429 and json.loads(second.refusal)["error"]["code"] == LIMIT_EXCEEDED
        over_mcp = RawHttp(server.url, ALICE)
        assert over_mcp.post(encode(INITIALIZE), session=False)[0] == 429
        with RawSse(server.sse_url, BOB) as bob, RawSse(server.sse_url, CAROL) as carol:
            assert bob.status == 200 and carol.status == 503
        first.close()

        def room() -> bool:
            with RawSse(server.sse_url, ALICE) as again:
                return again.status == 200

        assert until(room), "closing the stream did not end the session"
        over_mcp.close()


def test_a_request_holds_its_slot_until_its_answer_leaves_on_the_stream(tmp_path: Path) -> None:
    """The POST is answered at once, the work goes on: with 3 slots, two remembers waiting for the store hold two;
    a cancelled one gives its slot back; a request with an id in use is refused (400, nothing on the stream); when
    three wait, a ping gets 503; once the store opens every waiting request is answered, the cancelled one not."""
    os.mkfifo(tmp_path / "u")
    token = "sse-gated-token-0123456789"
    command = [*GATED, "http", "--sse", "--max-concurrent-requests", "3", "--queue-timeout", "0.3"]
    with (
        http_server(tmp_path, command=command, GATE_DIR=str(tmp_path), MEMSERVER_TOKENS=f"u:{token}") as server,
        RawSse(server.sse_url, token) as session,
    ):
        session.initialize()

        def remember(request_id: int) -> int:
            call = {"name": "remember", "arguments": {"content": f"Fact number {request_id} of the slot test."}}
            return session.post(encode({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": call}))[0]

        def ping(request_id: int) -> tuple[int, list[Any]]:
            status, answers, _ = session.post(encode({"jsonrpc": "2.0", "id": request_id, "method": "ping"}))
            return status, answers

        assert remember(1) == 202 and remember(2) == 202  # both wait for the store
        status, answers = session.post(encode({"jsonrpc": "2.0", "id": "1", "method": "ping"}))[:2]
        assert status == 400 and answers[0]["id"] == "1" and "in use" in answers[0]["error"]["message"]
        cancel = {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 2}}
        assert session.post(encode(cancel))[0] == 202
        assert remember(3) == 202  # 1 and 3 wait: one slot left
        assert ping(4)[0] == 202 and session.next_event() == {"jsonrpc": "2.0", "id": 4, "result": {}}
        assert remember(5) == 202  # 1, 3 and 5 wait: no slot left
        status, answers = ping(6)
        assert status == 503 and answers[0]["error"]["code"] == LIMIT_EXCEEDED
        release(tmp_path / "u", b"x")
        answered = {session.next_event()["id"] for _ in range(3)}
        assert answered == {1, 3, 5}
        assert ping(7)[0] == 202 and session.next_event()["id"] == 7
        recent = session.call(
            {"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "list_recent", "arguments": {}}}
        )
        contents = sorted(m["content"] for m in recent["result"]["structuredContent"]["memories"])
        assert contents == [f"Fact number {n} of the slot test." for n in (1, 3, 5)]  # not 2: cancelled
        assert session.events.empty()
