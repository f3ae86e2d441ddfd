"""Every message gets exactly one answer with the right JSON-RPC code, over stdio and over HTTP, from real
`memserver` processes; the connection stays open and no answer shows internals (issue 13's list)."""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest

from tests.e2e.gated_server import release
from tests.e2e.raw import INITIALIZE, PROTOCOL, RawHttp, RawStdio, encode, raw_stdio
from tests.e2e.servers import GATED, SERVE, HttpServer, http_server, server_env
from tests.support.surface import MEMORY_TOOLS

PING = {"jsonrpc": "2.0", "id": 7, "method": "ping"}
SURROGATE = b'{"jsonrpc":"2.0","id":1443,"method":"tools/call","params":{"name":"recall","arguments":{"query":"x","since":"\\ud83d"}}}'  # noqa: E501
META = {
    types.PROTOCOL_VERSION_META_KEY: "2026-07-28",
    types.CLIENT_CAPABILITIES_META_KEY: {},
    types.CLIENT_INFO_META_KEY: {"name": "raw", "version": "0"},
}

# (name, bytes, code, id of the answer)
BAD = [
    ("malformed JSON", b'{"jsonrpc":"2.0","id":1,', types.PARSE_ERROR, None),
    ("byte order mark", b"\xef\xbb\xbf" + encode(PING), types.PARSE_ERROR, None),
    ("invalid UTF-8", encode(PING).replace(b'"ping"', b'"p\xffing"'), types.PARSE_ERROR, None),
    ("NaN", encode(PING).replace(b'"ping"', b'"ping","params":{"x":NaN}'), types.PARSE_ERROR, None),
    (
        "too deep",
        b'{"jsonrpc":"2.0","id":7,"method":"ping","params":{"a":' + b"[" * 1000 + b"]" * 1000 + b"}}",
        -32700,
        None,
    ),
    ('"jsonrpc": "1.0"', encode({**PING, "jsonrpc": "1.0"}), types.INVALID_REQUEST, 7),
    ("params as an array", encode({**PING, "params": [1]}), types.INVALID_REQUEST, 7),
    ("an id that is an object", encode({**PING, "id": {"x": 1}}), types.INVALID_REQUEST, None),
    ("an id of 5000 digits", b'{"jsonrpc":"2.0","id":' + b"9" * 5000 + b',"method":"ping"}', types.PARSE_ERROR, None),
    ("a method that is a number", encode({**PING, "method": 12}), types.INVALID_REQUEST, 7),
    ("a lone surrogate in the arguments", SURROGATE, types.INVALID_PARAMS, 1443),
    ("an unknown method", encode({**PING, "method": "memory/steal"}), types.METHOD_NOT_FOUND, 7),
    ("a method of 5000 characters", encode({**PING, "method": "m" * 5000}), types.METHOD_NOT_FOUND, 7),
    ("not an object", b"[1]", types.INVALID_REQUEST, None),
    ("two ids", b'{"jsonrpc":"2.0","id":7,"id":8,"method":"ping"}', types.INVALID_REQUEST, None),
    ("two methods", b'{"jsonrpc":"2.0","id":7,"method":"ping","method":"tools/list"}', types.INVALID_REQUEST, 7),
]

# ids JSON-RPC allows that a 64-bit or 256-character limit would refuse: each is answered with the id as sent
READABLE_IDS = [2**70, -(10**30), "i" * 10_000]
READABLE_NAMES = ["2**70", "-10**30", "10,000 characters"]


def check(answer: Any, code: int, request_id: Any) -> None:
    assert isinstance(answer, dict), answer
    assert answer["id"] == request_id and answer["error"]["code"] == code, answer
    text = json.dumps(answer)
    assert "pydantic" not in text and "Traceback" not in text and len(text) < 400, text


# --- stdio ---------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def stdio(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RawStdio]:
    folder = tmp_path_factory.mktemp("messages-stdio")
    with raw_stdio(folder / "data", folder / "stderr.log") as conn:
        conn.initialize()
        yield conn


@pytest.mark.parametrize(("name", "data", "code", "request_id"), BAD, ids=[case[0] for case in BAD])
def test_stdio_answers_a_bad_message_once_and_keeps_serving(
    stdio: RawStdio, name: str, data: bytes, code: int, request_id: Any
) -> None:
    """The error of JSON-RPC 2.0 section 5.1, with the id when it can be read; the next request is answered."""
    stdio.send(data)
    check(stdio.next_answer(), code, request_id)
    assert stdio.call({**PING, "id": "after"})["result"] == {}


@pytest.mark.parametrize("request_id", READABLE_IDS, ids=READABLE_NAMES)
def test_stdio_answers_any_readable_id_as_sent(stdio: RawStdio, request_id: Any) -> None:
    """A ping, a tool call and an error, each answered with the huge id exactly as it was sent."""
    assert stdio.call({**PING, "id": request_id}) == {"jsonrpc": "2.0", "id": request_id, "result": {}}
    listed = stdio.call({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
    assert listed["id"] == request_id and listed["result"]["tools"]
    stdio.send(encode({**PING, "id": request_id, "method": "memory/steal"}))
    answer = stdio.next_answer()
    assert answer["id"] == request_id and answer["error"]["code"] == types.METHOD_NOT_FOUND


def test_stdio_answers_a_10_mb_unparseable_line_and_a_batch(stdio: RawStdio) -> None:
    """A 10 MB line of garbage is a parse error; a batch (removed from MCP in 2025-06-18) gets one error per
    request, in one array, as JSON-RPC answers a batch."""
    stdio.send(b"x" * (10 * 1024 * 1024))
    check(stdio.next_answer(), types.PARSE_ERROR, None)
    stdio.send(encode([PING, {**PING, "id": 8}, {"jsonrpc": "2.0", "method": "notifications/x"}]))
    answers = stdio.next_answer()
    assert [a["id"] for a in answers] == [7, 8] and {a["error"]["code"] for a in answers} == {types.INVALID_REQUEST}
    assert "batch" in answers[0]["error"]["message"]
    assert stdio.call({**PING, "id": "after"})["result"] == {}


def test_stdio_refuses_a_second_request_with_an_id_in_use(tmp_path: Path) -> None:
    """Two requests in flight with one id (7 and "7" are one id to the SDK): the second is refused, the first
    answered as usual. The first is a remember held in flight by the gated server (its store is built only once
    the test opens the gate), so the second surely comes while it is."""
    os.mkfifo(tmp_path / "default")
    gated = [*GATED, "stdio"]
    with raw_stdio(tmp_path, tmp_path / "stderr.log", command=gated, GATE_DIR=str(tmp_path)) as conn:
        conn.initialize()
        held = {"jsonrpc": "2.0", "id": 70, "method": "tools/call", "params": {"name": "remember"}}
        held["params"]["arguments"] = {"content": "Held until the gate opens."}
        conn.send(encode(held))
        check(conn.call({**PING, "id": "70"}), types.INVALID_REQUEST, "70")
        release(tmp_path / "default")
        answer = conn.next_answer()
        assert answer["id"] == 70 and answer["result"]["structuredContent"]["status"] == "stored"
        assert conn.call({**PING, "id": 70})["result"] == {}  # answered: the id is free again


def test_a_batch_is_refused_under_2025_03_26_too(tmp_path: Path) -> None:
    """The one revision that allowed batches: negotiated, and a batch is still answered with one -32600 per request
    (documented: docs/limitations.md, docs/upstream.md item 9)."""
    old = {**INITIALIZE, "params": {**INITIALIZE["params"], "protocolVersion": "2025-03-26"}}
    with raw_stdio(tmp_path / "data", tmp_path / "stderr.log") as conn:
        assert conn.call(old)["result"]["protocolVersion"] == "2025-03-26"
        conn.send(encode({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        conn.send(encode([PING, {**PING, "id": 8}]))
        answers = conn.next_answer()
        assert [a["id"] for a in answers] == [7, 8] and {a["error"]["code"] for a in answers} == {-32600}
        assert conn.call(PING)["result"] == {}


def test_a_request_before_initialize_is_told_so(tmp_path: Path) -> None:
    """Before the handshake: a ping is answered, an unknown method is -32601, anything else -32600 saying the
    session is not initialized (the SDK says -32602 "Invalid request parameters"); then initialize works."""
    with raw_stdio(tmp_path / "data", tmp_path / "stderr.log") as conn:
        assert conn.call(PING)["result"] == {}
        check(conn.call({**PING, "id": 8, "method": "nothing/here"}), types.METHOD_NOT_FOUND, 8)
        early = conn.call({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
        check(early, types.INVALID_REQUEST, 9)
        assert "not initialized" in early["error"]["message"]
        assert conn.initialize()["result"]["serverInfo"]["name"] == "memserver"
        assert len(conn.call({"jsonrpc": "2.0", "id": 10, "method": "tools/list"})["result"]["tools"]) == len(
            MEMORY_TOOLS
        )


def test_an_initialize_answered_with_an_error_does_not_initialize(tmp_path: Path) -> None:
    """An initialize the SDK refuses (no params) leaves the session uninitialized: the next request is told so
    (-32600 "not initialized", not the SDK's -32602); a proper initialize then opens the session."""
    with raw_stdio(tmp_path / "data", tmp_path / "stderr.log") as conn:
        refused = conn.call({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
        assert "error" in refused, refused
        early = conn.call({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        check(early, types.INVALID_REQUEST, 2)
        assert "not initialized" in early["error"]["message"]
        assert conn.initialize()["result"]["serverInfo"]["name"] == "memserver"
        assert conn.call({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})["result"]["tools"]


def test_the_2026_era_needs_no_initialize(tmp_path: Path) -> None:
    """A connection that opens with a 2026-07-28 request (the `_meta` envelope, server/discover) is served
    without a handshake: the not-initialized answer is for handshake-era connections only."""
    with raw_stdio(tmp_path / "data", tmp_path / "stderr.log") as conn:
        found = conn.call({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}})
        assert found["result"]["_meta"][types.SERVER_INFO_META_KEY]["name"] == "memserver"
        call = {"name": "list_recent", "arguments": {}, "_meta": META}
        listed = conn.call({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})
        assert listed["result"]["structuredContent"] == {"memories": []}


# --- HTTP ----------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    with http_server(tmp_path_factory.mktemp("messages-http")) as running:
        yield running


@pytest.fixture(scope="module")
def http(server: HttpServer) -> Iterator[RawHttp]:
    conn = RawHttp(server.url)
    conn.initialize()
    yield conn
    conn.close()


@pytest.mark.parametrize(("name", "data", "code", "request_id"), BAD, ids=[case[0] for case in BAD])
def test_http_answers_a_bad_body_with_400_and_the_json_rpc_error(
    http: RawHttp, name: str, data: bytes, code: int, request_id: Any
) -> None:
    """The same errors over HTTP, with status 400 (200 for the SDK's own method-not-found answer) and no pydantic
    dump; the session keeps working."""
    status, answers, _ = http.post(data)
    assert status == (200 if name == "an unknown method" else 400)
    check(answers[0], code, request_id)
    assert http.call({**PING, "id": "after"})["result"] == {}


@pytest.mark.parametrize("request_id", READABLE_IDS, ids=READABLE_NAMES)
def test_http_answers_any_readable_id_as_sent(http: RawHttp, request_id: Any) -> None:
    """The same over HTTP: a ping, a tool call and an error carry the huge id exactly as it was sent."""
    assert http.call({**PING, "id": request_id}) == {"jsonrpc": "2.0", "id": request_id, "result": {}}
    listed = http.call({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
    assert listed["id"] == request_id and listed["result"]["tools"]
    _, answers, _ = http.post(encode({**PING, "id": request_id, "method": "memory/steal"}))
    assert answers[0]["id"] == request_id and answers[0]["error"]["code"] == types.METHOD_NOT_FOUND


def test_http_answers_a_body_too_large_and_a_batch(http: RawHttp) -> None:
    """A 10 MB body is 413 before it is read further (a JSON-RPC error, not plain text); a batch is 400 with one
    error per request."""
    status, answers, _ = http.post(b"x" * (10 * 1024 * 1024))
    assert status == 413
    check(answers[0], -32005, None)
    status, answers, _ = http.post(encode([PING, {**PING, "id": 8}]))
    assert status == 400 and [a["id"] for a in answers[0]] == [7, 8]


def test_http_request_without_a_session_names_its_id(http: RawHttp) -> None:
    """A request other than initialize without a session id: 400, -32600 with the request's id (the SDK's answer
    has id null), and no session is opened for it."""
    status, answers, response = http.post(encode({**PING, "id": 41}), session=False)
    assert status == 400 and "mcp-session-id" not in response.headers
    check(answers[0], types.INVALID_REQUEST, 41)


def test_http_errors_of_the_sdk_carry_the_request_id(http: RawHttp) -> None:
    """An expired or unknown session is the SDK's 404, now with the request's id instead of null."""
    status, answers, _ = http.post(encode({**PING, "id": 42}), **{"mcp-session-id": "0" * 32})
    assert status == 404
    check(answers[0], types.INVALID_REQUEST, 42)


def test_http_refuses_a_second_request_with_an_id_in_use(tmp_path: Path) -> None:
    """While a request is in flight (a remember the gated server holds until the test opens the gate), another with
    the same id (here "71" for 71) is refused with 400; over the SDK alone, the two would share one answer and the
    first would get none."""
    os.mkfifo(tmp_path / "u")
    token = "duplicate-ids-token-0123456789"
    command = [*GATED, "http"]
    with http_server(tmp_path, command=command, GATE_DIR=str(tmp_path), MEMSERVER_TOKENS=f"u:{token}") as server:
        conn = RawHttp(server.url, token)
        conn.initialize()
        held = {"jsonrpc": "2.0", "id": 71, "method": "tools/call", "params": {"name": "remember"}}
        held["params"]["arguments"] = {"content": "Held until the gate opens."}
        headers = {**conn.headers, "mcp-session-id": conn.session or "", "mcp-protocol-version": PROTOCOL}
        with (
            httpx2.Client(timeout=60) as client,
            client.stream("POST", server.url, content=encode(held), headers=headers) as first,
        ):
            assert first.status_code == 200  # the SSE answer has started: the request is in flight
            status, answers, _ = conn.post(encode({**PING, "id": "71"}))
            release(tmp_path / "u")
            body = first.read()
        assert status == 400
        check(answers[0], types.INVALID_REQUEST, "71")
        assert b'"status":"stored"' in body
        assert conn.call({**PING, "id": 71})["result"] == {}  # answered: the id is free again
        conn.close()


def test_http_serves_the_2026_era(server: HttpServer) -> None:
    """With MCP-Protocol-Version 2026-07-28 there is no session: server/discover and tools/call pass the guard."""
    conn = RawHttp(server.url)
    headers = {"mcp-protocol-version": "2026-07-28"}
    discover = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}
    status, answers, _ = conn.post(encode(discover), session=False, **headers, **{"mcp-method": "server/discover"})
    assert status == 200 and answers[0]["result"]["_meta"][types.SERVER_INFO_META_KEY]["name"] == "memserver"
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "list_recent", "arguments": {}}}
    call["params"]["_meta"] = META
    status, answers, _ = conn.post(
        encode(call), session=False, **headers, **{"mcp-method": "tools/call", "mcp-name": "list_recent"}
    )
    assert status == 200 and "structuredContent" in answers[0]["result"]
    conn.close()


def test_stdin_and_stdout_as_regular_files_get_the_same_answers(tmp_path: Path) -> None:
    """`memserver < requests > answers` (files, which the event loop cannot poll: worker threads read them) checks
    every line just the same, and answers everything before it exits at the end of the file."""
    requests = tmp_path / "requests.jsonl"
    requests.write_bytes(
        b"\n".join([encode(INITIALIZE), b"not json", encode({**PING, "jsonrpc": "1.0"}), encode(PING)])
    )
    answers = tmp_path / "answers.jsonl"
    with requests.open("rb") as stdin, answers.open("wb") as stdout:
        done = subprocess.run(
            SERVE, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, env=server_env(tmp_path), timeout=120
        )
    assert done.returncode == 0, done.stderr[-2000:]
    got = sorted(
        (json.dumps(a["id"]), a.get("error", {}).get("code", 0))
        for a in map(json.loads, answers.read_bytes().splitlines())
    )
    assert got == sorted([('"init"', 0), ("null", types.PARSE_ERROR), ("7", types.INVALID_REQUEST), ("7", 0)])
