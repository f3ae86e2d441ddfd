"""Opaque access tokens checked by introspection (RFC 7662, transports/introspection.py), against a real endpoint:
a Starlette app on a loopback uvicorn that answers as an identity provider's would, and memserver's HTTP app in
front of it. Active, inactive, expired, wrong audience, wrong issuer, the endpoint down, failing or slow; the
cache; the bound on concurrent calls; the client's credentials; the settings."""

from __future__ import annotations

import asyncio
import base64
import logging
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.testclient import TestClient

from memserver.errors import ConfigError
from memserver.local.store import MemoryStore
from memserver.server import build_server
from memserver.transports.http import bind_socket, http_app
from memserver.transports.introspection import IntrospectionSettings, IntrospectionVerifier
from memserver.transports.oauth import OAuthSettings, oauth_settings
from tests.e2e.raw import INITIALIZE, MCP_HEADERS
from tests.support.fakes import FakeEmbedder
from tests.support.identity import AUDIENCE, BASE, Served

ISSUER = "https://id.example"
CLIENT = ("memserver", "s3cret with spaces&symbols")
LEAK = "endpoint-internal-detail-0451"  # what a failing endpoint says: never to be repeated by memserver


class Endpoint:
    """The identity provider's introspection endpoint: `answers` by token (unknown tokens are inactive), the calls
    it got, `status` to fail with, and tokens it holds until `gate` opens (a slow endpoint)."""

    def __init__(self) -> None:
        self.answers: dict[str, dict[str, Any]] = {}
        self.calls: list[dict[str, Any]] = []
        self.status = 200
        self.slow: set[str] = set()
        self.gate = threading.Event()
        self.arrived = threading.Event()  # a call came in

        async def introspect(request: Request) -> Response:
            form = await request.form()
            token = str(form.get("token", ""))
            self.calls.append(
                {
                    "token": token,
                    "hint": str(form.get("token_type_hint")),
                    "auth": request.headers.get("authorization", ""),
                    "gate_open": self.gate.is_set(),
                }
            )
            self.arrived.set()
            if token in self.slow:
                await anyio.to_thread.run_sync(self.gate.wait, 30)
            if self.status != 200:
                return PlainTextResponse(f"database unreachable: {LEAK}", status_code=self.status)
            return JSONResponse(self.answers.get(token, {"active": False, "detail": LEAK}))

        sock = bind_socket("127.0.0.1", 0)
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/introspect"
        self.served = Served(Starlette(routes=[Route("/introspect", introspect, methods=["POST"])]), sock)

    def token(self, **overrides: Any) -> str:
        """A new opaque token the endpoint calls active (with `overrides` to its answer)."""
        token = secrets.token_urlsafe(24)
        now = int(time.time())
        answer = {"active": True, "sub": "alice", "aud": AUDIENCE, "iss": ISSUER, "exp": now + 300, "iat": now}
        answer |= {"scope": "memory:read memory:write", "token_type": "Bearer", "client_id": "claude"} | overrides
        self.answers[token] = {name: value for name, value in answer.items() if value is not None}
        return token


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    served = Endpoint()
    yield served
    served.gate.set()
    served.served.stop()


def settings(url: str, **introspection: Any) -> OAuthSettings:
    given = {"client_id": CLIENT[0], "client_secret": CLIENT[1], "timeout": 5.0} | introspection
    return OAuthSettings(issuer=ISSUER, audience=AUDIENCE, introspection=IntrospectionSettings(url, **given))


def client_for(oauth: OAuthSettings, tmp_path: Path) -> TestClient:
    def factory(user: str | None) -> MemoryStore:
        return MemoryStore(tmp_path / str(user), "introspection", embedder=FakeEmbedder())

    app = http_app(build_server(factory, per_user=True), oauth=oauth)
    return TestClient(app, base_url=BASE, raise_server_exceptions=False)


def post(client: TestClient, token: str, message: dict[str, Any] = INITIALIZE, session: str | None = None) -> Any:
    headers = MCP_HEADERS | {"authorization": f"Bearer {token}"}
    if session is not None:
        headers |= {"mcp-session-id": session, "mcp-protocol-version": "2025-11-25"}
    return client.post("/mcp", json=message, headers=headers)


def test_an_active_token_is_served_as_its_subject_and_asked_about_once(endpoint: Endpoint, tmp_path: Path) -> None:
    """memserver authenticates as its client (Basic, each part form-encoded: RFC 6749 2.3.1), names the token
    an access token, and caches the answer: a session's requests ask once."""
    token = endpoint.token(scope="memory:read")
    with client_for(settings(endpoint.url), tmp_path) as client:
        opened = post(client, token)
        assert opened.status_code == 200, opened.text
        session = opened.headers["mcp-session-id"]
        post(client, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        remember = {"name": "remember", "arguments": {"content": "alice keeps her bicycle in the shed"}}
        refused = post(client, token, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": remember}, session)
        assert refused.status_code == 403 and 'scope="memory:write"' in refused.headers["www-authenticate"]
    assert len(endpoint.calls) == 1
    call = endpoint.calls[0]
    assert (call["token"], call["hint"]) == (token, "access_token")
    assert base64.b64decode(call["auth"].removeprefix("Basic ")).decode() == ("memserver:s3cret+with+spaces%26symbols")


@pytest.mark.parametrize(
    ("answer", "why"),
    [
        ({"active": False}, "inactive"),
        ({"exp": int(time.time()) - 60}, "expired"),
        ({"exp": None}, "without an expiry"),
        ({"exp": "tomorrow"}, "an expiry that is not a date"),
        ({"nbf": int(time.time()) + 3600}, "not valid yet"),
        ({"aud": "https://other.example/mcp"}, "for another service"),
        ({"aud": None}, "for no service named"),
        ({"iss": "https://evil.example"}, "from another issuer"),
        ({"sub": None}, "without a user"),
        ({"token_type": "refresh_token"}, "a refresh token"),
    ],
)
def test_tokens_the_endpoint_does_not_vouch_for_us_are_401(
    endpoint: Endpoint, tmp_path: Path, answer: dict[str, Any], why: str
) -> None:
    with client_for(settings(endpoint.url), tmp_path) as client:
        refused = post(client, endpoint.token(**answer))
        assert refused.status_code == 401, why
        assert "resource_metadata=" in refused.headers["www-authenticate"]
        assert post(client, "never-issued-" + secrets.token_urlsafe(8)).status_code == 401


def test_an_audience_list_naming_us_and_an_answer_without_iss_are_accepted(endpoint: Endpoint) -> None:
    verifier = IntrospectionVerifier(settings(endpoint.url))

    async def run() -> list[Any]:
        try:
            return [
                await verifier.verify_token(endpoint.token(aud=["https://other.example", AUDIENCE])),
                await verifier.verify_token(endpoint.token(iss=None, sub="auth0|bob-42")),
            ]
        finally:
            await verifier.aclose()

    listed, without_iss = asyncio.run(run())
    assert listed.client_id == "alice" and listed.scopes == ["memory:read", "memory:write"]
    assert without_iss.client_id.startswith("u-") and without_iss.subject == "auth0|bob-42"


@pytest.mark.parametrize("outage", ["down", "failing", "slow"])
def test_an_endpoint_that_cannot_answer_is_a_503_that_says_nothing_of_it(
    endpoint: Endpoint, tmp_path: Path, caplog: pytest.LogCaptureFixture, outage: str
) -> None:
    """Down (nothing listens), failing (HTTP 500) or slow (no answer within the timeout): 503 with Retry-After,
    one warning without a traceback, and neither the answer nor the token's verdict is cached (the next request
    asks again once the endpoint is back)."""
    token = endpoint.token()
    url = endpoint.url
    if outage == "down":
        closed = bind_socket("127.0.0.1", 0)
        url = f"http://127.0.0.1:{closed.getsockname()[1]}/introspect"
        closed.close()
    elif outage == "failing":
        endpoint.status = 500
    else:
        endpoint.slow.add(token)
    with caplog.at_level(logging.INFO, logger="memserver"), client_for(settings(url, timeout=0.5), tmp_path) as client:
        answer = post(client, token)
        assert answer.status_code == 503, answer.text
        assert answer.headers["retry-after"].isdigit()
        warnings = [r for r in caplog.records if r.name.startswith("memserver") and r.levelno >= logging.WARNING]
        assert len(warnings) == 1 and "introspection" in warnings[0].getMessage()
        assert all(r.exc_info is None for r in caplog.records)
        assert LEAK not in answer.text + caplog.text and token not in caplog.text
        if outage != "down":
            endpoint.status = 200
            endpoint.slow.clear()
            endpoint.gate.set()
            assert post(client, token).status_code == 200


def test_the_cache_never_outlives_its_ttl_and_is_not_keyed_by_the_token(endpoint: Endpoint) -> None:
    """With cache_seconds 0 every use asks again, so a token the provider revokes stops working at once."""
    verifier = IntrospectionVerifier(settings(endpoint.url, cache_seconds=0))
    token = endpoint.token()

    async def run() -> list[Any]:
        first = await verifier.verify_token(token)
        endpoint.answers[token] = {"active": False}  # revoked
        after = await verifier.verify_token(token)
        await verifier.aclose()
        return [first, after]

    first, after = asyncio.run(run())
    assert first is not None and after is None
    assert len(endpoint.calls) == 2


def test_an_answer_is_cached_no_longer_than_its_token_lasts(endpoint: Endpoint) -> None:
    """A token expiring in 10 s with a 30 s cache: asked about again once its exp has passed (and refused then),
    not served from the cache for the 20 s after."""
    now = [time.time()]
    verifier = IntrospectionVerifier(settings(endpoint.url, cache_seconds=30), clock=lambda: now[0])
    token = endpoint.token(exp=int(now[0]) + 10)

    async def run() -> list[Any]:
        answers = [await verifier.verify_token(token)]
        now[0] += 5
        answers.append(await verifier.verify_token(token))  # from the cache
        now[0] += 6  # past its exp, inside cache_seconds
        answers.append(await verifier.verify_token(token))
        await verifier.aclose()
        return answers

    first, cached, expired = asyncio.run(run())
    assert first is not None and cached is first and expired is None
    assert len(endpoint.calls) == 2


def test_calls_beyond_the_concurrency_bound_wait_for_a_slot(endpoint: Endpoint) -> None:
    """max_concurrent 1: while a slow call holds the slot, the next token waits and reaches the endpoint only once
    the slow one is answered; both are then served."""
    verifier = IntrospectionVerifier(settings(endpoint.url, max_concurrent=1))
    slow, quick = endpoint.token(), endpoint.token(sub="bob")
    endpoint.slow.add(slow)

    async def run() -> list[Any]:
        first = asyncio.ensure_future(verifier.verify_token(slow))
        await anyio.to_thread.run_sync(endpoint.arrived.wait, 10)  # the slow call has the slot, held at the endpoint
        second = asyncio.ensure_future(verifier.verify_token(quick))
        while not verifier.waiting and len(endpoint.calls) < 2:  # until it waits for the slot (or, unbounded, is sent)
            await asyncio.sleep(0)  # (no clock: each pass lets the other task run to its next await)
        assert verifier.waiting == 1
        endpoint.gate.set()
        outcome = [await first, await second]
        await verifier.aclose()
        return outcome

    slow_access, quick_access = asyncio.run(run())
    assert (slow_access.client_id, quick_access.client_id) == ("alice", "bob")
    assert [(call["token"], call["gate_open"]) for call in endpoint.calls] == [(slow, False), (quick, True)]


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"MEMSERVER_OAUTH_INTROSPECTION_URL": "http://id.example/introspect"}, "must be an https://"),
        (
            {"MEMSERVER_OAUTH_INTROSPECTION_URL": "https://id.example/i", "MEMSERVER_OAUTH_CLIENT_ID": "memserver"},
            "needs both --oauth-client-id and the client secret",
        ),
        (
            {"MEMSERVER_OAUTH_INTROSPECTION_URL": "https://id.example/i", "MEMSERVER_OAUTH_JWKS_URL": "https://x/j"},
            "do not apply",
        ),
        ({"MEMSERVER_OAUTH_CLIENT_ID": "memserver"}, "for --oauth-introspection-url only"),
    ],
)
def test_bad_introspection_settings_are_refused(given: dict[str, str], message: str) -> None:
    base = {"MEMSERVER_OAUTH_ISSUER": ISSUER, "MEMSERVER_OAUTH_AUDIENCE": AUDIENCE}
    with pytest.raises(ConfigError, match=message):
        oauth_settings(environ=base | given)


def test_the_client_secret_comes_from_the_environment_or_a_private_file(tmp_path: Path) -> None:
    base = {"MEMSERVER_OAUTH_ISSUER": ISSUER, "MEMSERVER_OAUTH_AUDIENCE": AUDIENCE}
    base |= {"MEMSERVER_OAUTH_INTROSPECTION_URL": "https://id.example/i", "MEMSERVER_OAUTH_CLIENT_ID": "memserver"}
    from_env = oauth_settings(environ=base | {"MEMSERVER_OAUTH_CLIENT_SECRET": "from-env"})
    assert from_env is not None and from_env.introspection is not None
    assert from_env.introspection.client_secret == "from-env" and "from-env" not in repr(from_env)
    secret = tmp_path / "secret"
    secret.write_text("from-file\n")
    secret.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        oauth_settings(client_secret_file=str(secret), environ=base)
    secret.chmod(0o600)
    from_file = oauth_settings(client_secret_file=str(secret), environ=base)
    assert from_file is not None and from_file.introspection is not None
    assert from_file.introspection.client_secret == "from-file"
