"""OAuth sign-in (transports/oauth.py): JWT access tokens minted here, checked against the keys a loopback JWKS
server publishes, the way an identity provider would serve them; and the HTTP app around the verifier (RFC 9728
metadata, 401 with resource_metadata, static tokens beside OAuth ones)."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
from pathlib import Path
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from starlette.testclient import TestClient

from memserver.errors import ConfigError
from memserver.local.store import MemoryStore
from memserver.server import build_server
from memserver.transports.http import http_app
from memserver.transports.oauth import JwtTokenVerifier, OAuthSettings, oauth_settings, tenant_of
from tests.e2e.raw import INITIALIZE, MCP_HEADERS
from tests.support.fakes import FakeEmbedder
from tests.support.identity import AUDIENCE, BASE, IdentityProvider


def verify(settings: OAuthSettings, *tokens: str) -> list[Any]:
    """Each token's AccessToken (None when refused), through one verifier (one key cache)."""
    verifier = JwtTokenVerifier(settings)

    async def run() -> list[Any]:
        return [await verifier.verify_token(token) for token in tokens]

    return asyncio.run(run())


def unsigned(claims: dict[str, Any], alg: str = "none") -> str:
    def part(value: dict[str, Any]) -> str:
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()

    return f"{part({'alg': alg, 'typ': 'JWT', 'kid': 'key-1'})}.{part(claims)}."


def test_a_good_token_names_its_user_and_scopes(idp: IdentityProvider) -> None:
    (access,) = verify(idp.settings(), idp.token())
    assert access.client_id == "alice"
    assert access.subject == "alice"
    assert access.scopes == ["memory:read", "memory:write"]
    assert access.resource == AUDIENCE


def test_the_keys_are_found_through_the_issuers_metadata(idp: IdentityProvider) -> None:
    """No --oauth-jwks-url: jwks_uri comes from /.well-known/oauth-authorization-server; the set is fetched once."""
    results = verify(idp.settings(), idp.token(), idp.token(sub="bob"))
    assert [access.client_id for access in results] == ["alice", "bob"]
    assert idp.jwks_fetches == 1


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        ({"exp": int(time.time()) - 3600}, "expired"),
        ({"aud": "https://other.example/mcp"}, "for another service"),
        ({"iss": "https://evil.example"}, "from another issuer"),
        ({"exp": None}, "without an expiry"),
        ({"sub": None}, "without a user"),
    ],
)
def test_tokens_not_meant_for_us_are_refused(idp: IdentityProvider, claims: dict[str, Any], why: str) -> None:
    assert verify(idp.settings(), idp.token(**claims)) == [None], why


def test_unsigned_and_alg_none_tokens_are_refused(idp: IdentityProvider) -> None:
    claims = {"iss": idp.issuer, "aud": AUDIENCE, "sub": "alice", "exp": int(time.time()) + 300}
    signed = idp.token()
    forged_signature = signed.rsplit(".", 1)[0] + ".AAAA"
    assert verify(idp.settings(), unsigned(claims), unsigned(claims, "None"), forged_signature) == [None, None, None]


def test_an_hmac_token_signed_with_the_public_key_is_refused(idp: IdentityProvider) -> None:
    """The classic algorithm confusion: HS256 with the issuer's public key as the secret."""
    public = json.dumps(idp.public_jwk("key-1")).encode()
    claims = {"iss": idp.issuer, "aud": AUDIENCE, "sub": "alice", "exp": int(time.time()) + 300}
    head_and_body = unsigned(claims, "HS256").rstrip(".")
    mac = hmac.new(public, head_and_body.encode(), hashlib.sha256).digest()
    forged = head_and_body + "." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()
    assert verify(idp.settings(), forged) == [None]


def test_a_rotated_signing_key_is_picked_up(idp: IdentityProvider) -> None:
    verifier = JwtTokenVerifier(idp.settings(refetch_interval=0))

    async def run() -> list[Any]:
        before = await verifier.verify_token(idp.token())
        idp.rotate("key-2")
        after = await verifier.verify_token(idp.token(sub="bob"))
        return [before, after]

    before, after = asyncio.run(run())
    assert (before.client_id, after.client_id) == ("alice", "bob")
    assert idp.jwks_fetches == 2


def test_unknown_key_ids_do_not_refetch_the_keys_more_than_once_per_interval(idp: IdentityProvider) -> None:
    """Tokens naming keys the issuer never published are refused without a fetch each (the interval is an hour)."""
    stranger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    claims = {"iss": idp.issuer, "aud": AUDIENCE, "sub": "mallory", "exp": int(time.time()) + 300}
    made_up = [jwt.encode(claims, stranger, algorithm="RS256", headers={"kid": kid}) for kid in ("x", "y", "z")]
    results = verify(idp.settings(refetch_interval=3600), idp.token(), *made_up)
    assert results[0] is not None and results[1:] == [None, None, None]
    assert idp.jwks_fetches == 1


def test_subjects_that_are_not_safe_folder_names_become_digests() -> None:
    assert tenant_of("alice") == "alice"
    for subject in ("auth0|5f1c2d", "Alice", "alice@example.com", "../../etc"):
        tenant = tenant_of(subject)
        assert tenant.startswith("u-") and tenant.replace("-", "").isalnum() and len(tenant) <= 32
    assert tenant_of("Alice") != tenant_of("alice@example.com")


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ({"MEMSERVER_OAUTH_ISSUER": "https://id.example"}, "needs --oauth-audience"),
        ({"MEMSERVER_OAUTH_ISSUER": "http://id.example", "MEMSERVER_OAUTH_AUDIENCE": "x"}, "must be an https://"),
        (
            {
                "MEMSERVER_OAUTH_ISSUER": "https://id.example",
                "MEMSERVER_OAUTH_AUDIENCE": "x",
                "MEMSERVER_OAUTH_ALGORITHMS": "HS256",
            },
            "HS256 not allowed",
        ),
    ],
)
def test_bad_oauth_settings_are_refused(given: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        oauth_settings(environ=given)


def test_the_http_app_serves_metadata_refuses_with_a_pointer_and_admits_both_kinds_of_token(
    idp: IdentityProvider, tmp_path: Path
) -> None:
    def factory(user: str | None) -> MemoryStore:
        return MemoryStore(tmp_path / str(user), "oauth", embedder=FakeEmbedder())

    static = {"static-token-0123456789": "carol"}
    app = http_app(build_server(factory, per_user=True), tokens=static, oauth=idp.settings())
    with TestClient(app, base_url=BASE) as client:
        metadata = client.get("/.well-known/oauth-protected-resource/mcp").json()
        assert metadata["resource"] == AUDIENCE
        assert [url.rstrip("/") for url in metadata["authorization_servers"]] == [idp.issuer]
        assert metadata["scopes_supported"] == ["memory:read", "memory:write"]

        for token in (None, idp.token(aud="https://other.example/mcp")):
            headers = MCP_HEADERS | ({"authorization": f"Bearer {token}"} if token else {})
            refused = client.post("/mcp", json=INITIALIZE, headers=headers)
            assert refused.status_code == 401
            challenge = refused.headers["www-authenticate"]
            assert 'resource_metadata="http://127.0.0.1:8000/.well-known/oauth-protected-resource/mcp"' in challenge

        for token in (idp.token(), "static-token-0123456789"):
            admitted = client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS | {"authorization": f"Bearer {token}"})
            assert admitted.status_code == 200, admitted.text


def test_oauth_alone_is_enough_to_serve_beyond_loopback(idp: IdentityProvider) -> None:
    from memserver.transports.http import check_bind

    with pytest.raises(ConfigError, match="without authentication"):
        check_bind("10.0.0.5", None)
    check_bind("10.0.0.5", None, oauth=True)


def call(client: TestClient, token: str, session: str, method: str, params: dict[str, Any]) -> Any:
    headers = MCP_HEADERS | {
        "authorization": f"Bearer {token}",
        "mcp-session-id": session,
        "mcp-protocol-version": "2025-11-25",
    }
    return client.post("/mcp", json={"jsonrpc": "2.0", "id": 2, "method": method, "params": params}, headers=headers)


def opened(client: TestClient, token: str) -> str:
    answer = client.post("/mcp", json=INITIALIZE, headers=MCP_HEADERS | {"authorization": f"Bearer {token}"})
    session = answer.headers["mcp-session-id"]
    headers = MCP_HEADERS | {
        "authorization": f"Bearer {token}",
        "mcp-session-id": session,
        "mcp-protocol-version": "2025-11-25",
    }
    client.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    return session


def test_a_read_only_token_may_recall_but_not_remember(idp: IdentityProvider, tmp_path: Path) -> None:
    """memory:read alone: recall is served, remember gets 403 insufficient_scope naming memory:write; a token with
    both scopes, and a static token (no scopes at all), may remember."""

    def factory(user: str | None) -> MemoryStore:
        return MemoryStore(tmp_path / str(user), "oauth", embedder=FakeEmbedder())

    static = "static-token-0123456789"
    app = http_app(build_server(factory, per_user=True), tokens={static: "carol"}, oauth=idp.settings())
    remember = {"name": "remember", "arguments": {"content": "alice keeps her bicycle in the shed"}}
    with TestClient(app, base_url=BASE) as client:
        reader = idp.token(scope="memory:read")
        session = opened(client, reader)
        assert (
            call(client, reader, session, "tools/call", {"name": "recall", "arguments": {"query": "bike"}}).status_code
            == 200
        )
        refused = call(client, reader, session, "tools/call", remember)
        assert refused.status_code == 403
        challenge = refused.headers["www-authenticate"]
        assert 'error="insufficient_scope"' in challenge and 'scope="memory:write"' in challenge
        assert "resource_metadata=" in challenge

        for token in (idp.token(), static):
            session = opened(client, token)
            answer = call(client, token, session, "tools/call", remember)
            assert answer.status_code == 200 and '"isError":true' not in answer.text.replace(" ", ""), answer.text


def test_a_token_without_the_read_scope_cannot_list_tools(idp: IdentityProvider, tmp_path: Path) -> None:
    app = http_app(build_server(lambda user: None, per_user=True), oauth=idp.settings())
    with TestClient(app, base_url=BASE) as client:
        writer_only = idp.token(scope="memory:write")
        session = opened(client, writer_only)
        refused = call(client, writer_only, session, "tools/list", {})
        assert refused.status_code == 403 and 'scope="memory:read"' in refused.headers["www-authenticate"]


@pytest.mark.parametrize("engine", ["local", "postgres"])
def test_each_subject_has_a_store_of_their_own(
    idp: IdentityProvider, tmp_path: Path, engine: str, request: pytest.FixtureRequest
) -> None:
    """Two subjects, two tenants: on PostgreSQL these are two tenants of one database, kept apart by row-level
    security (tests/postgres/test_postgres.py proves the policy itself)."""
    from memserver.engines import open_backend

    database = request.getfixturevalue("postgres").database("oauth") if engine == "postgres" else None

    def factory(user: str | None) -> Any:
        return open_backend(tmp_path, "oauth", embedder=FakeEmbedder(), database=database, user=user)

    app = http_app(build_server(factory, per_user=True), oauth=idp.settings())
    remember = {"name": "remember", "arguments": {"content": "alice keeps her bicycle in the shed"}}
    listing = {"name": "list_recent", "arguments": {}}
    with TestClient(app, base_url=BASE) as client:
        alice, bob = idp.token(sub="alice"), idp.token(sub="auth0|bob-42")
        alice_session, bob_session = opened(client, alice), opened(client, bob)
        assert call(client, alice, alice_session, "tools/call", remember).status_code == 200
        assert "bicycle" in call(client, alice, alice_session, "tools/call", listing).text
        assert "bicycle" not in call(client, bob, bob_session, "tools/call", listing).text


SERVE_WITH_ISSUER = ["serve", "--http", "--port", "0", "--oauth-issuer", "https://id.example"]
INTROSPECTION = ["--oauth-introspection-url", "https://id.example/introspect"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["serve", "--oauth-issuer", "https://id.example"], "--oauth-issuer apply to --http only"),
        (SERVE_WITH_ISSUER, "needs --oauth-audience"),
        (
            [*SERVE_WITH_ISSUER, "--oauth-audience", "a", "--oauth-algorithms", "RS256,none"],
            "none not allowed",
        ),
        (
            [*SERVE_WITH_ISSUER, "--oauth-audience", "a", *INTROSPECTION, "--oauth-client-id", "memserver"],
            "needs both --oauth-client-id and the client secret",
        ),
        (["serve", *INTROSPECTION], "apply to --http only"),
    ],
)
def test_bad_oauth_flags_are_one_line_and_exit_1(
    args: list[str], message: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from memserver.cli import main

    for name in ("ISSUER", "AUDIENCE", "JWKS_URL", "ALGORITHMS", "USER_CLAIM", "INTROSPECTION_URL", "CLIENT_ID"):
        monkeypatch.delenv(f"MEMSERVER_OAUTH_{name}", raising=False)
    for name in ("CLIENT_SECRET", "CLIENT_SECRET_FILE"):
        monkeypatch.delenv(f"MEMSERVER_OAUTH_{name}", raising=False)
    assert main(args) == 1
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1, err
