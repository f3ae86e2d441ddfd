"""The whole sign-in, as a team's client does it: a real MCP client with the SDK's OAuth support (mcp.client.auth)
meets memserver's 401, reads its RFC 9728 metadata, registers with an authorization server, runs the
authorization-code flow with PKCE, and calls tools with the JWT it gets.

The authorization server is the SDK's own (mcp.server.auth.routes.create_auth_routes: metadata, registration,
/authorize with PKCE, /token) over a small in-memory provider that signs RS256 access tokens and publishes its JWKS;
it signs everyone in as `alice` at once (no login page: the test plays the browser by following the redirect)."""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from mcp.client.auth import OAuthClientProvider
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.provider import AuthorizationCode, AuthorizationParams, construct_redirect_uri
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from pydantic import AnyHttpUrl, AnyUrl
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from memserver.local.store import MemoryStore
from memserver.server import build_server
from memserver.transports.http import bind_socket, http_app
from memserver.transports.oauth import OAuthSettings
from tests.support.fakes import FakeEmbedder
from tests.support.identity import Served


class SigningProvider:
    """The SDK's OAuthAuthorizationServerProvider, in memory, issuing JWT access tokens for the requested resource."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}

    def jwks(self) -> dict[str, Any]:
        public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key()))
        return {"keys": [{**public, "kid": "as-1", "alg": "RS256", "use": "sig"}]}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        assert client_info.client_id is not None
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(16)
        assert client.client_id is not None
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or [],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
            subject="alice",
        )
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client: OAuthClientInformationFull, code: str) -> AuthorizationCode | None:
        return self.codes.get(code)

    async def exchange_authorization_code(
        self, client: OAuthClientInformationFull, authorization_code: AuthorizationCode
    ) -> OAuthToken:
        del self.codes[authorization_code.code]
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": authorization_code.resource, "sub": "alice", "exp": now + 300}
        claims |= {"iat": now, "scope": " ".join(authorization_code.scopes), "client_id": client.client_id}
        token = jwt.encode(claims, self.key, algorithm="RS256", headers={"kid": "as-1"})
        return OAuthToken(access_token=token, token_type="Bearer", expires_in=300, scope=claims["scope"])

    async def load_refresh_token(self, client: Any, refresh_token: str) -> None:
        return None

    async def exchange_refresh_token(self, client: Any, refresh_token: Any, scopes: list[str]) -> OAuthToken:
        raise NotImplementedError

    async def load_access_token(self, token: str) -> None:
        return None

    async def revoke_token(self, token: Any) -> None:
        return None


@pytest.fixture
def team_server(tmp_path: Path) -> Iterator[str]:
    """The authorization server and memserver behind it, both on loopback; yields memserver's /mcp URL."""
    from mcp.server.auth.routes import create_auth_routes
    from mcp.server.auth.settings import ClientRegistrationOptions

    as_sock = bind_socket("127.0.0.1", 0)
    issuer = f"http://127.0.0.1:{as_sock.getsockname()[1]}"
    provider = SigningProvider(issuer)

    async def jwks(request: Any) -> JSONResponse:
        return JSONResponse(provider.jwks())

    routes = create_auth_routes(
        provider,
        AnyHttpUrl(issuer),
        client_registration_options=ClientRegistrationOptions(
            enabled=True, valid_scopes=["memory:read", "memory:write"]
        ),
    )
    authorization_server = Served(Starlette(routes=[*routes, Route("/jwks", jwks)]), as_sock)

    mcp_sock = bind_socket("127.0.0.1", 0)
    mcp_url = f"http://127.0.0.1:{mcp_sock.getsockname()[1]}/mcp"

    def factory(user: str | None) -> MemoryStore:
        return MemoryStore(tmp_path / str(user), "flow", embedder=FakeEmbedder())

    settings = OAuthSettings(issuer=issuer, audience=mcp_url, jwks_url=issuer + "/jwks")
    memserver = Served(http_app(build_server(factory, per_user=True), oauth=settings), mcp_sock)
    yield mcp_url
    memserver.stop()
    authorization_server.stop()


class MemoryTokenStorage:
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def test_a_client_signs_in_with_authorization_code_and_pkce_then_calls_tools(team_server: str) -> None:
    redirected: dict[str, str] = {}

    async def play_the_browser(authorization_url: str) -> None:
        assert "code_challenge=" in authorization_url and "code_challenge_method=S256" in authorization_url
        async with httpx2.AsyncClient() as browser:
            answer = await browser.get(authorization_url)
        assert answer.status_code == 302
        from urllib.parse import parse_qs, urlsplit

        query = parse_qs(urlsplit(answer.headers["location"]).query)
        redirected.update({name: values[0] for name, values in query.items()})

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=redirected["code"], state=redirected.get("state"))

    async def run() -> tuple[str, str]:
        storage = MemoryTokenStorage()
        auth = OAuthClientProvider(
            server_url=team_server,
            client_metadata=OAuthClientMetadata(
                redirect_uris=[AnyUrl("http://127.0.0.1:9/callback")],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                scope="memory:read memory:write",
                client_name="flow test",
            ),
            storage=storage,
            redirect_handler=play_the_browser,
            callback_handler=callback,
        )
        async with (
            httpx2.AsyncClient(auth=auth, timeout=30) as http,
            streamable_http_client(team_server, http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            await session.call_tool("remember", {"content": "alice keeps her bicycle in the shed"})
            listed = await session.call_tool("list_recent", {})
        assert storage.tokens is not None
        text = " ".join(getattr(block, "text", "") for block in listed.content)
        return text, storage.tokens.access_token

    text, token = asyncio.run(run())
    assert "bicycle" in text
    assert jwt.decode(token, options={"verify_signature": False})["aud"] == team_server
