"""HTTP limits of a real `memserver serve --http`: session caps per user and in total, idle expiry, concurrent
requests, slow bodies and slow headers, connections. Every wait is bounded; the few that wait for the server to
act on a configured (short) time poll with a deadline."""

from __future__ import annotations

import json
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.e2e.raw import INITIALIZE, RawHttp, encode
from tests.e2e.servers import SERVE, HttpServer, http_server, server_env

ALICE = "limits-alice-0123456789abcdef"
BOB = "limits-bob-0123456789abcdef"
CAROL = "limits-carol-0123456789abcdef"
LIMIT_EXCEEDED = -32005
PING = {"jsonrpc": "2.0", "id": "ping", "method": "ping"}


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:"))


def until(condition: Callable[[], bool], seconds: float = 15.0) -> bool:
    """Poll `condition` until it holds or `seconds` pass."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.05)
    return condition()


def opening(conn: RawHttp) -> tuple[int, dict]:
    """Try to open a session on `conn` (which then uses it): (status, the JSON-RPC answer)."""
    status, answers, response = conn.post(encode(INITIALIZE), session=False)
    conn.session = response.headers.get("mcp-session-id") or conn.session
    return status, answers[0] if answers else {}


def probe(url: str, message: dict = PING) -> int:
    """The status of one POST on a connection of its own, closed at once."""
    conn = RawHttp(url)
    try:
        return conn.post(encode(message), session=False)[0]
    finally:
        conn.close()


def address(server: HttpServer) -> tuple[str, int]:
    parts = urlsplit(server.url)
    return parts.hostname or "127.0.0.1", parts.port or 80


# --- sessions ------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    tokens = f"alice:{ALICE},bob:{BOB},carol:{CAROL}"
    args = ("--max-sessions", "12", "--max-sessions-per-user", "5")
    with http_server(tmp_path_factory.mktemp("capped"), *args, MEMSERVER_TOKENS=tokens) as server:
        yield server


def test_far_more_sessions_than_the_caps_are_refused_cleanly_with_memory_bounded(capped: HttpServer) -> None:
    """5 sessions per user, 12 in all: the 6th of a user gets 429, the 13th of the server 503, each a JSON-RPC
    error with the request's id; 600 more attempts are refused alike and the server's memory stays put (an open
    session costs ~34 KiB, so 600 admitted ones would add ~20 MiB); ending a session makes room again."""
    clients = {token: RawHttp(capped.url, token) for token in (ALICE, BOB, CAROL)}  # for the refused attempts
    sessions = {token: [RawHttp(capped.url, token) for _ in range(5)] for token in (ALICE, BOB)}
    assert [opening(conn)[0] for conns in sessions.values() for conn in conns] == [200] * 10
    status, answer = opening(clients[ALICE])
    assert status == 429 and answer["id"] == "init" and answer["error"]["code"] == LIMIT_EXCEEDED
    assert "'alice' has 5" in answer["error"]["message"]
    carol = [RawHttp(capped.url, CAROL) for _ in range(3)]
    assert [opening(conn)[0] for conn in carol] == [200, 200, 503]  # 12 in all

    # The server warms the model in the background from its start (some 200 MB): wait for alice's store, so the
    # memory measured below is the refusals' only.
    loaded = sessions[ALICE][0].call(
        {"jsonrpc": "2.0", "id": "load", "method": "tools/call", "params": {"name": "list_recent", "arguments": {}}}
    )
    assert "result" in loaded, loaded
    before = rss_kib(capped.process.pid)
    statuses = [opening(clients[token])[0] for _ in range(200) for token in (ALICE, BOB, CAROL)]
    grown = rss_kib(capped.process.pid) - before
    assert statuses.count(429) == 400 and statuses.count(503) == 200
    assert grown < 8 * 1024, f"RSS grew {grown} KiB while refusing 600 sessions"
    print(f"\n[limits] RSS {before} KiB before 600 refused openings, {grown:+d} KiB after")

    assert sessions[ALICE][0].delete() == 200
    assert opening(clients[ALICE])[0] == 200  # room for alice again (the server is still full for carol)
    assert opening(clients[CAROL])[0] == 503
    for conn in [*clients.values(), *carol, *sessions[ALICE], *sessions[BOB]]:
        conn.close()
    assert capped.process.poll() is None


def test_an_idle_session_expires_and_frees_its_place(tmp_path: Path) -> None:
    """With --session-idle-timeout 1: an idle session is closed after about a second; its id then answers 404
    (with the request's id) and its place under the per-user cap is free."""
    args = ("--session-idle-timeout", "1", "--max-sessions-per-user", "1")
    with http_server(tmp_path, *args) as server:
        first, second = RawHttp(server.url), RawHttp(server.url)
        assert opening(first)[0] == 200
        assert first.call({**PING, "id": 1})["result"] == {}  # activity resets the clock
        assert opening(second)[0] == 429
        assert until(lambda: opening(second)[0] == 200), "the idle session never expired"
        status, answers, _ = first.post(encode({**PING, "id": 2}))
        assert status == 404 and answers[0]["id"] == 2
        first.close()
        second.close()


# --- requests ------------------------------------------------------------------------------------------------------


def stalled_post(server: HttpServer, sent: bytes = b"{") -> socket.socket:
    """A connection that sends a POST's headers and the start of its body, then nothing (it holds a slot)."""
    sock = socket.create_connection(address(server), timeout=30)
    host, port = address(server)
    head = f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
    head += "Accept: application/json, text/event-stream\r\nContent-Length: 1000\r\n\r\n"
    sock.sendall(head.encode() + sent)
    return sock


def answer_of(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (bounded by the socket's timeout)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def test_requests_beyond_the_concurrency_cap_wait_then_get_503(tmp_path: Path) -> None:
    """--max-concurrent-requests 2: while two requests are in progress (their bodies still coming), a third waits
    --queue-timeout and gets 503 with Retry-After and a JSON-RPC error; once they end, requests are served."""
    args = ("--max-concurrent-requests", "2", "--queue-timeout", "0.3", "--max-connections", "16")
    with http_server(tmp_path, *args) as server:
        conn = RawHttp(server.url)
        conn.initialize()
        stalled = [stalled_post(server) for _ in range(2)]
        busy: list = []

        def refused() -> bool:
            status, answers, response = conn.post(encode(PING))
            busy[:] = [status, answers, response.headers.get("retry-after")]
            return status == 503

        assert until(refused), f"never refused: {busy}"
        assert busy[1][0]["error"]["code"] == LIMIT_EXCEEDED and busy[2] == "1"
        for sock in stalled:
            sock.close()
        assert until(lambda: conn.post(encode(PING))[0] == 200)


def test_a_body_that_does_not_arrive_in_time_gets_408(tmp_path: Path) -> None:
    """--body-timeout 1: a body sent a byte at a time (slowloris) or not at all is cut off with 408 and a JSON-RPC
    error after about a second; the server serves others meanwhile."""
    with http_server(tmp_path, "--body-timeout", "1") as server:
        silent = stalled_post(server)
        dripping = stalled_post(server)
        stop = threading.Event()

        def drip() -> None:
            while not stop.wait(0.2):
                try:
                    dripping.send(b" ")
                except OSError:
                    return

        threading.Thread(target=drip, daemon=True).start()
        conn = RawHttp(server.url)
        conn.initialize()
        assert conn.call({**PING, "id": 3})["result"] == {}
        for sock in (silent, dripping):
            head, _, body = answer_of(sock).partition(b"\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 408"), head
            assert json.loads(body)["error"]["code"] == LIMIT_EXCEEDED
        stop.set()


def test_headers_that_do_not_arrive_in_time_close_the_connection(tmp_path: Path) -> None:
    """--header-timeout 1: a connection that sends nothing, or its headers a byte at a time, is closed after about
    a second (uvicorn alone waits forever); a normal request on another connection is served meanwhile."""
    with http_server(tmp_path, "--header-timeout", "1") as server:
        idle = socket.create_connection(address(server), timeout=30)
        dripping = socket.create_connection(address(server), timeout=30)
        dripping.sendall(b"POST /mcp HTTP/1.1\r\n")
        stop = threading.Event()

        def drip() -> None:
            while not stop.wait(0.2):
                try:
                    dripping.send(b"X")
                except OSError:
                    return

        threading.Thread(target=drip, daemon=True).start()
        conn = RawHttp(server.url)
        conn.initialize()
        assert answer_of(idle) == b"" and answer_of(dripping) == b""  # closed by the server
        stop.set()
        assert conn.call({**PING, "id": 4})["result"] == {}


def test_connections_beyond_the_cap_get_503(tmp_path: Path) -> None:
    """--max-connections 4: with four connections open, a request gets uvicorn's 503; room again once they go."""
    args = ("--max-connections", "4", "--max-concurrent-requests", "2")
    with http_server(tmp_path, *args) as server:
        conn = RawHttp(server.url)
        conn.initialize()
        conn.close()
        idle = [socket.create_connection(address(server), timeout=30) for _ in range(4)]
        assert until(lambda: probe(server.url) == 503)
        for sock in idle:
            sock.close()
        assert until(lambda: probe(server.url) == 400)  # served (400: a ping needs a session)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--max-sessions", "10"], "apply to --http only"),
        (["--http", "--max-sessions", "0"], "max_sessions must be at least 1"),
        (["--http", "--body-timeout", "-1"], "body_timeout must be a positive number"),
        (["--http", "--max-connections", "4", "--max-concurrent-requests", "4"], "max_connections must be at least"),
    ],
)
def test_bad_limits_are_refused_at_start(tmp_path: Path, args: list[str], message: str) -> None:
    done = subprocess.run([*SERVE, *args], env=server_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and message in done.stderr, done.stderr
