"""The issuer's verifier over its life, against a loopback identity provider that counts the calls it gets and sees
its clients' connections end: one verifier serves /mcp and the browser and is closed once at shutdown, a verifier
moved to another event loop closes the old loop's client, requests with the same unseen token share one
introspection call, and answers nested too deep to parse are the provider's fault (503), not a 500."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import secrets
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import anyio
import pytest
from anyio.from_thread import start_blocking_portal
from starlette.testclient import TestClient

from memserver.cli.serve import sign_in
from memserver.local.store import MemoryStore
from memserver.server import build_server
from memserver.transports.http import http_app
from memserver.transports.introspection import IntrospectionSettings, IntrospectionVerifier
from memserver.transports.limits import HttpLimits
from memserver.transports.oauth import OAuthSettings
from tests.e2e.raw import INITIALIZE, MCP_HEADERS
from tests.support.fakes import FakeEmbedder
from tests.support.identity import AUDIENCE, BASE, IdentityProvider

DEEP = b"[" * 100_000 + b"]" * 100_000  # valid JSON, nested past any parser's recursion limit


class Provider:
    """An identity provider on http.server (HTTP/1.1, keep-alive): POST /introspect answers `answers[token]` (or
    `body` as it is), GET answers `pages[path]`. It records the tokens asked about, holds each call until `gate`
    opens, and notes each client connection (by its port) as it opens and as it ends."""

    def __init__(self) -> None:
        self.answers: dict[str, dict[str, Any]] = {}
        self.pages: dict[str, bytes] = {}
        self.body: bytes | None = None
        self.calls: list[str] = []
        self.gate = threading.Event()
        self.gate.set()
        self.arrived = threading.Event()  # a call came in
        self.opened: list[int] = []  # the client ports of the connections, in the order they opened
        self.ended: set[int] = set()  # ... and of those that ended
        self.changed = threading.Condition()
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                form = parse_qs(self.rfile.read(int(self.headers.get("content-length", 0))).decode())
                token = form.get("token", [""])[0]
                provider.calls.append(token)
                provider.arrived.set()
                provider.gate.wait(30)
                answer = provider.answers.get(token, {"active": False})
                self.reply(provider.body if provider.body is not None else json.dumps(answer).encode())

            def do_GET(self) -> None:
                self.reply(provider.pages.get(self.path, b'{"error": "not here"}'))

            def reply(self, body: bytes) -> None:
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def setup(self) -> None:
                super().setup()
                with provider.changed:
                    provider.opened.append(self.client_address[1])

            def finish(self) -> None:
                super().finish()
                with provider.changed:
                    provider.ended.add(self.client_address[1])
                    provider.changed.notify_all()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def token(self) -> str:
        token = secrets.token_urlsafe(24)
        now = int(time.time())
        self.answers[token] = {"active": True, "sub": "alice", "aud": AUDIENCE, "exp": now + 300, "iat": now}
        self.answers[token] |= {"scope": "memory:read memory:write"}
        return token

    def settings(self, **introspection: Any) -> OAuthSettings:
        where = IntrospectionSettings(self.url + "/introspect", **introspection)
        return OAuthSettings(issuer=self.url, audience=AUDIENCE, introspection=where)

    def sees_closed(self, port: int) -> bool:
        """Whether the connection from `port` ends (waiting for it, within reason)."""
        with self.changed:
            return self.changed.wait_for(lambda: port in self.ended, timeout=10)

    def stop(self) -> None:
        self.gate.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def provider() -> Iterator[Provider]:
    served = Provider()
    yield served
    served.stop()


def server_for(tmp_path: Path) -> Any:
    def factory(user: str | None) -> MemoryStore:
        return MemoryStore(tmp_path / str(user), "lifecycle", embedder=FakeEmbedder())

    return build_server(factory, per_user=True)


def initialize(client: TestClient, token: str) -> Any:
    return client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS | {"authorization": f"Bearer {token}"})


def test_one_verifier_serves_mcp_and_the_browser_and_is_closed_at_shutdown(provider: Provider, tmp_path: Path) -> None:
    """`serve --http --ui` with introspection: the token /mcp was asked about signs in to the browser without a
    second call (one verifier, one cache), and when the app stops the provider sees the client's connection end."""
    issuer, browser = sign_in({}, HttpLimits(), provider.settings(), ui=True)
    app = http_app(server_for(tmp_path), oauth=provider.settings(), oauth_verifier=issuer, ui=browser)
    token = provider.token()
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        assert initialize(client, token).status_code == 200
        csrf = re.search(r'data-csrf="([0-9a-f]+)"', client.get("/ui/signin").text)
        assert csrf
        form = {"csrf": csrf.group(1), "token": token}
        assert client.post("/ui/signin", data=form, headers={"origin": BASE}).status_code == 303
        assert client.get("/ui/browse").status_code == 200
        assert provider.calls == [token]
        assert len(provider.opened) == 1 and not provider.ended
    assert provider.sees_closed(provider.opened[0])  # the lifespan closed the one client
    assert isinstance(issuer, IntrospectionVerifier) and issuer.closed


def test_a_verifier_moved_to_another_event_loop_closes_the_old_loops_client(provider: Provider) -> None:
    verifier = IntrospectionVerifier(provider.settings())
    with start_blocking_portal() as portal:  # an event loop in another thread, still running
        assert portal.call(verifier.verify_token, provider.token()) is not None
        [first] = provider.opened
        assert not provider.ended

        async def elsewhere() -> Any:
            access = await verifier.verify_token(provider.token())
            await verifier.aclose()
            return access

        assert asyncio.run(elsewhere()) is not None
        assert provider.sees_closed(first)  # while the first loop still runs: its client was closed, not dropped
    assert verifier.closed


def test_two_calls_racing_onto_a_new_event_loop_leave_one_client_to_close(provider: Provider) -> None:
    verifier = IntrospectionVerifier(provider.settings())
    with start_blocking_portal() as portal:  # the first loop, still running: closing its client takes a loop turn
        assert portal.call(verifier.verify_token, provider.token()) is not None

        async def elsewhere() -> list[Any]:
            try:
                return list(
                    await asyncio.gather(
                        verifier.verify_token(provider.token()), verifier.verify_token(provider.token())
                    )
                )
            finally:
                await verifier.aclose()

        assert all(access is not None for access in asyncio.run(elsewhere()))
    assert len(provider.opened) >= 2
    assert all(provider.sees_closed(port) for port in provider.opened)  # none left open by a client overwritten


def test_requests_with_the_same_unseen_token_share_one_introspection_call(provider: Provider) -> None:
    verifier = IntrospectionVerifier(provider.settings())
    token = provider.token()
    provider.gate.clear()

    async def run() -> list[Any]:
        asking = [asyncio.ensure_future(verifier.verify_token(token)) for _ in range(6)]
        await anyio.to_thread.run_sync(provider.arrived.wait, 10)
        provider.gate.set()
        try:
            return list(await asyncio.gather(*asking))
        finally:
            await verifier.aclose()

    answers = asyncio.run(run())
    assert [access.client_id for access in answers] == ["alice"] * 6
    assert provider.calls == [token]


@pytest.mark.parametrize("where", ["introspection", "key discovery"])
def test_an_answer_nested_too_deep_to_parse_is_a_503_and_one_log_line(
    provider: Provider, idp: IdentityProvider, tmp_path: Path, caplog: pytest.LogCaptureFixture, where: str
) -> None:
    if where == "introspection":
        oauth, provider.body = provider.settings(), DEEP
        token = provider.token()
    else:
        oauth, token = OAuthSettings(issuer=provider.url, audience=AUDIENCE), idp.token()
        provider.pages["/.well-known/oauth-authorization-server"] = DEEP
    app = http_app(server_for(tmp_path), oauth=oauth)
    with (
        caplog.at_level(logging.INFO, logger="memserver"),
        TestClient(app, base_url=BASE, raise_server_exceptions=False) as client,
    ):
        answer = initialize(client, token)
    assert answer.status_code == 503, answer.text
    assert answer.json()["error"] == "temporarily_unavailable" and "[[" not in answer.text
    warnings = [r for r in caplog.records if r.name.startswith("memserver") and r.levelno >= logging.WARNING]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert all(r.exc_info is None for r in caplog.records) and "[[" not in caplog.text
