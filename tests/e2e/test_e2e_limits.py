"""HTTP limits of a real `memserver serve --http`: session caps per user and in total, idle expiry, concurrent
requests, slow bodies and slow headers, connections. Every wait is bounded; the few that wait for the server to
act on a configured (short) time poll with a deadline."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx2
import pytest

from tests.e2e.gated_server import release
from tests.e2e.raw import INITIALIZE, PROTOCOL, RawHttp, encode
from tests.e2e.servers import GATED, SERVE, HttpServer, http_server, server_env

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


def test_a_session_with_a_request_waiting_for_a_slot_does_not_expire(tmp_path: Path) -> None:
    """--session-idle-timeout 2, one request at a time per user: alice's ping in session A waits for her slot,
    which her remember in session A2 holds while the gated server waits for the test. Bob's two sessions, opened
    after the ping was sent, expiring (bob's third opening then succeeds) shows that more than the idle timeout
    went by since A was last used; A was kept all the while (its ping used to get 404), and answers once the
    remember ends. Its countdown then restarts: A expires once idle."""
    tokens = {"alice": ALICE, "bob": BOB}
    for user in tokens:
        os.mkfifo(tmp_path / user)
    command = [*GATED, "http", "--session-idle-timeout", "2", "--max-sessions-per-user", "2"]
    command += ["--max-concurrent-requests-per-user", "1", "--queue-timeout", "60"]
    users = ",".join(f"{user}:{token}" for user, token in tokens.items())
    with http_server(tmp_path, command=command, GATE_DIR=str(tmp_path), MEMSERVER_TOKENS=users) as server:
        alice, alice2 = RawHttp(server.url, ALICE), RawHttp(server.url, ALICE)
        bobs = [RawHttp(server.url, BOB) for _ in range(3)]
        alice2.initialize()
        alice.initialize()
        assert alice.session is not None
        with held_remembers(server, alice2, 1) as held:
            waiting = posted(server, encode({**PING, "id": "waits"}), token=ALICE, session=alice.session)
            assert [opening(conn)[0] for conn in bobs] == [200, 200, 429]
            assert until(lambda: opening(bobs[2])[0] == 200), "bob's idle sessions never expired"
            release(tmp_path / "alice")
            assert b'"status":"stored"' in held[0].read()
        head, _, body = answer_of(waiting).partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 200") and b'"result":{}' in body, (head, body)
        assert alice.call({**PING, "id": "after"})["result"] == {}
        assert alice2.delete() == 200
        later = [RawHttp(server.url, ALICE) for _ in range(2)]
        assert [opening(conn)[0] for conn in later] == [200, 429]  # opened after A was last used: expires later
        assert until(lambda: opening(later[1])[0] == 200), "neither of alice's idle sessions expired"
        status, answers, _ = alice.post(encode({**PING, "id": "idle"}))
        assert status == 404 and answers[0]["id"] == "idle"  # A's countdown restarted once it had no requests
        waiting.close()
        for conn in [alice, alice2, *bobs, *later]:
            conn.close()


def test_a_sessions_place_comes_back_however_it_ends(tmp_path: Path) -> None:
    """One session allowed (per user and in all): its place comes back after a DELETE, after an initialize the SDK
    refuses once admitted (406: no text/event-stream in Accept), and after a client that hangs up mid-body; of 8
    initializes at once exactly one opens a session and the others get 429 with the cap's words (not the SDK's
    503 "Too many open sessions", -32603, which lost races used to get). Idle expiry: the test above."""
    with http_server(tmp_path, "--max-sessions", "1", "--max-sessions-per-user", "1") as server:
        first, second = RawHttp(server.url), RawHttp(server.url)
        assert opening(first)[0] == 200
        assert opening(second)[0] == 429
        assert first.delete() == 200
        assert opening(second)[0] == 200
        assert second.delete() == 200

        status, _, _ = first.post(encode(INITIALIZE), session=False, accept="application/json")
        assert status == 406
        hung_up = stalled_post(server, encode(INITIALIZE)[:20])
        hung_up.close()
        assert opening(first)[0] == 200
        assert first.delete() == 200

        racers = [RawHttp(server.url) for _ in range(8)]
        with ThreadPoolExecutor(len(racers)) as pool:
            outcomes = list(pool.map(opening, racers))
        assert sorted(status for status, _ in outcomes) == [200] + [429] * 7, outcomes
        refused = [answer["error"] for status, answer in outcomes if status == 429]
        assert all(e["code"] == LIMIT_EXCEEDED and "has 1, the most allowed" in e["message"] for e in refused)
        winner = next(conn for conn, (status, _) in zip(racers, outcomes, strict=True) if status == 200)
        assert winner.delete() == 200
        assert opening(first)[0] == 200
        for conn in [first, second, *racers]:
            conn.close()


# --- requests ------------------------------------------------------------------------------------------------------


def stalled_post(server: HttpServer, sent: bytes = b"{", token: str | None = None, path: str = "/mcp") -> socket.socket:
    """A connection that sends a POST's headers and the start of its body, then nothing."""
    return posted(server, sent, token=token, path=path, length=1000)


def posted(
    server: HttpServer,
    body: bytes,
    *,
    token: str | None = None,
    path: str = "/mcp",
    length: int | None = None,
    session: str | None = None,
) -> socket.socket:
    """A connection on which a POST of `body` (declared `length` bytes long) has been sent by the time this
    returns; the server closes it after its answer (answer_of reads it)."""
    sock = socket.create_connection(address(server), timeout=30)
    host, port = address(server)
    head = f"POST {path} HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
    head += f"Accept: application/json, text/event-stream\r\nContent-Length: {length or len(body)}\r\n"
    head += "Connection: close\r\n" if length is None else ""
    head += f"Mcp-Protocol-Version: {PROTOCOL}\r\nMcp-Session-Id: {session}\r\n" if session else ""
    head += f"Authorization: Bearer {token}\r\n\r\n" if token else "\r\n"
    sock.sendall(head.encode() + body)
    return sock


def answer_of(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (bounded by the socket's timeout)."""
    chunks = []
    while chunk := sock.recv(65536):
        chunks.append(chunk)
    return b"".join(chunks)


def closed_unanswered(sock: socket.socket) -> bool:
    """Whether the server closed the connection without sending anything: end of stream, or a reset (the server
    had unread bytes of ours when it closed; with no answer to deliver it does not linger)."""
    try:
        return answer_of(sock) == b""
    except ConnectionResetError:
        return True


@contextmanager
def held_remembers(server: HttpServer, conn: RawHttp, count: int) -> Iterator[list[httpx2.Response]]:
    """`count` remembers in `conn`'s session, in progress (their answers' streams have started) while the gated
    server waits for the test to open the gate; yields their responses, to be read once it is open."""
    headers = {**conn.headers, "mcp-protocol-version": PROTOCOL}
    if conn.session:
        headers["mcp-session-id"] = conn.session
    with ExitStack() as stack:
        client = stack.enter_context(httpx2.Client(timeout=60))
        responses = []
        for n in range(count):
            call = {"name": "remember", "arguments": {"content": f"Held remember number {n}."}}
            body = encode({"jsonrpc": "2.0", "id": f"held-{n}", "method": "tools/call", "params": call})
            response = stack.enter_context(client.stream("POST", server.url, content=body, headers=headers))
            assert response.status_code == 200  # its answer's stream has started: it holds its slots
            responses.append(response)
        yield responses


@pytest.mark.parametrize("stateless", [False, True], ids=["stateful", "stateless"])
def test_requests_beyond_the_caps_wait_then_get_503_or_429(tmp_path: Path, stateless: bool) -> None:
    """--max-concurrent-requests 3 and --max-concurrent-requests-per-user 2, requests in progress held by the gated
    server (their store opens when the test says): a third request of alice's waits --queue-timeout and gets 429,
    bob's is served; with bob's two held as well (three in all), carol's gets 503 with Retry-After; each refusal
    is a JSON-RPC error. Once the store opens, everything is answered and requests are served again."""
    tokens = {"alice": ALICE, "bob": BOB, "carol": CAROL}
    for user in tokens:
        os.mkfifo(tmp_path / user)
    command = [*GATED, "http", "--max-concurrent-requests", "3", "--max-concurrent-requests-per-user", "2"]
    command += ["--queue-timeout", "0.3", *(["--stateless"] if stateless else [])]
    users = ",".join(f"{user}:{token}" for user, token in tokens.items())
    with http_server(tmp_path, command=command, GATE_DIR=str(tmp_path), MEMSERVER_TOKENS=users) as server:
        alice, bob, carol = (RawHttp(server.url, token) for token in tokens.values())
        for conn in () if stateless else (alice, bob, carol):
            conn.initialize()
        with held_remembers(server, alice, 2) as held:
            status, answers, response = alice.post(encode(PING))
            assert status == 429 and response.headers.get("retry-after") == "1", (status, answers)
            assert answers[0]["error"]["code"] == LIMIT_EXCEEDED and "'alice' has 2" in answers[0]["error"]["message"]
            assert bob.call(PING)["result"] == {}
            with held_remembers(server, bob, 1) as bobs:
                status, answers, response = carol.post(encode(PING))
                assert status == 503 and response.headers.get("retry-after") == "1", (status, answers)
                assert answers[0]["error"]["code"] == LIMIT_EXCEEDED
                release(tmp_path / "bob")
                assert b'"status":"stored"' in bobs[0].read()
            release(tmp_path / "alice")
            assert all(b'"status":"stored"' in response.read() for response in held)
        assert all(conn.call(PING)["result"] == {} for conn in (alice, bob, carol))
        for conn in (alice, bob, carol):
            conn.close()


@pytest.mark.parametrize("stateless", [False, True], ids=["stateful", "stateless"])
def test_one_users_stalled_bodies_do_not_stop_anothers_requests(tmp_path: Path, stateless: bool) -> None:
    """A body is received before its request takes one of the server's slots: with 1 server slot and 2 per user,
    alice's two stalled bodies (one to /mcp, one to the legacy /messages/: the rule is both transports') take her
    two slots, so her next request gets 429, and not the server's, so bob's ping is served at once (it used to get
    503 until the stalled bodies timed out). Once they go, alice is served again."""
    args = ["--sse", "--max-concurrent-requests", "1", "--max-concurrent-requests-per-user", "2"]
    args += ["--queue-timeout", "0.3", "--max-connections", "16", *(["--stateless"] if stateless else [])]
    with http_server(tmp_path, *args, MEMSERVER_TOKENS=f"alice:{ALICE},bob:{BOB}") as server:
        alice, bob = RawHttp(server.url, ALICE), RawHttp(server.url, BOB)
        for conn in () if stateless else (alice, bob):
            conn.initialize()
        stalled = [
            stalled_post(server, token=ALICE),
            stalled_post(server, token=ALICE, path=f"/messages/?session_id={'0' * 32}"),
        ]
        seen: list[Any] = []

        def alice_refused() -> bool:
            status, answers, _ = alice.post(encode(PING))
            seen[:] = [status, answers]
            return status == 429

        assert until(alice_refused), f"alice's stalled bodies never filled her slots: {seen}"
        assert "'alice' has 2" in seen[1][0]["error"]["message"]
        assert bob.call(PING)["result"] == {}
        for sock in stalled:
            sock.close()
        assert until(lambda: alice.post(encode(PING))[0] == 200)
        alice.close()
        bob.close()


def test_a_body_that_does_not_arrive_in_time_gets_408(tmp_path: Path) -> None:
    """--body-timeout 1: a body sent a byte at a time (slowloris) or not at all is cut off with 408 and a JSON-RPC
    error after about a second (which the dripping client reads while it still drips); the server serves others
    meanwhile."""
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


def test_a_refusal_reaches_a_client_still_sending_its_body(tmp_path: Path) -> None:
    """A body declared larger than --max-body-bytes gets 413 before it is read, while its client is still sending
    it. A plain close would make the kernel answer the unread bytes with a reset, which can discard the answer
    on the client's side; the server closes lingering (answer, end of stream, what still arrives dropped), so the
    client reads its 413 after sending everything."""
    with http_server(tmp_path) as server:
        host, port = address(server)
        sock = socket.create_connection((host, port), timeout=30)
        head = f"POST /mcp HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
        head += f"Accept: application/json, text/event-stream\r\nContent-Length: {10 * 1024 * 1024}\r\n\r\n"
        sock.sendall(head.encode() + b"x" * (2 * 1024 * 1024))  # more than uvicorn buffers before it pauses
        status, _, body = answer_of(sock).partition(b"\r\n\r\n")
        assert status.startswith(b"HTTP/1.1 413"), status
        assert json.loads(body)["error"]["code"] == LIMIT_EXCEEDED
        sock.close()


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
        assert closed_unanswered(idle) and closed_unanswered(dripping)
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
        (["--stateless", "--sse"], "--stateless, --sse apply to --http only"),
        (["--http", "--max-sessions", "0"], "max_sessions must be at least 1"),
        (["--http", "--body-timeout", "-1"], "body_timeout must be a positive number"),
        (["--http", "--max-connections", "4", "--max-concurrent-requests", "4"], "max_connections must be at least"),
    ],
)
def test_bad_limits_are_refused_at_start(tmp_path: Path, args: list[str], message: str) -> None:
    done = subprocess.run([*SERVE, *args], env=server_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and message in done.stderr, done.stderr
