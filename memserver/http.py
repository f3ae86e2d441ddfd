"""MCP over streamable HTTP (uvicorn): the Starlette app, its security settings, and serving it.

HTTP is safe by default:
  - it binds to 127.0.0.1; binding any other address without bearer tokens is refused (ConfigError);
  - DNS-rebinding protection is always on: a foreign Origin gets 403, a Host that is not ours gets 421;
  - with tokens configured (MEMSERVER_TOKENS and/or MEMSERVER_TOKEN_FILE) every request needs
    `Authorization: Bearer <token>` (401 otherwise); each token names a user, and each user has their own store;
  - every message is checked before the SDK sees it (wire.py), and sessions, concurrent requests, slow clients
    and body sizes are limited (http_limits.py).

The app is assembled here rather than by `Server.streamable_http_app()` so that memserver's guard sits between
the bearer-token check and the SDK's transport: Starlette middleware authenticates, RequireAuthMiddleware answers
401, McpGuard applies the limits, and the SDK's session manager serves what is left.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from memserver.errors import ConfigError
from memserver.http_limits import HttpLimits

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from starlette.applications import Starlette

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MCP_PATH = "/mcp"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def http_app(
    server: Server[Any],
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    tokens: Mapping[str, str] | None = None,
    allowed_hosts: Sequence[str] = (),
    limits: HttpLimits | None = None,
) -> Starlette:
    """The Starlette app serving `server` at /mcp, with the security settings described in the module docstring.

    `server` must have been built with `per_user=bool(tokens)`.

    Raises:
        ConfigError: a non-loopback host without tokens, or a wildcard host without `allowed_hosts`.
    """
    from mcp.server.auth.middleware.auth_context import AuthContextMiddleware
    from mcp.server.auth.middleware.bearer_auth import BearerAuthBackend, RequireAuthMiddleware
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp
    from mcp.server.transport_security import TransportSecurityMiddleware
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.middleware.authentication import AuthenticationMiddleware
    from starlette.routing import Route

    from memserver.http_guard import LimitedSessionManager, McpGuard
    from memserver.http_limits import SessionRegistry
    from memserver.tokens import StaticTokenVerifier

    check_bind(host, tokens, allowed_hosts)
    limits = limits or HttpLimits()
    security = _security(host, allowed_hosts)
    registry = SessionRegistry()
    manager = LimitedSessionManager(
        app=server,
        security_settings=security,
        max_request_body_size=limits.max_body_bytes,
        session_idle_timeout=limits.session_idle_timeout,
        max_sessions=limits.max_sessions,
        registry=registry,
        max_sessions_per_user=limits.max_sessions_per_user,
    )
    endpoint: Any = McpGuard(StreamableHTTPASGIApp(manager), limits, registry, TransportSecurityMiddleware(security))
    middleware = []
    if tokens:
        # A resource server only: no OAuth routes, no token audience (these are static tokens), no scopes.
        endpoint = RequireAuthMiddleware(endpoint, required_scopes=[])
        middleware = [
            Middleware(AuthenticationMiddleware, backend=BearerAuthBackend(StaticTokenVerifier(tokens))),
            Middleware(AuthContextMiddleware),
        ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(routes=[Route(MCP_PATH, endpoint=endpoint)], middleware=middleware, lifespan=lifespan)


def _security(host: str, allowed_hosts: Sequence[str]) -> Any:
    """Spec (transports, security warning): validate Origin to prevent DNS rebinding; the SDK answers 403 for a
    foreign Origin and 421 for a Host not listed here. `name:*` matches any port."""
    from mcp.server.transport_security import TransportSecuritySettings

    names = ["127.0.0.1", "localhost", "[::1]", *allowed_hosts]
    if not is_loopback(host) and not _is_wildcard(host):
        names.append(f"[{host}]" if ":" in host else host)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names] + list(allowed_hosts),
        allowed_origins=[f"{scheme}://{name}:*" for name in names for scheme in ("http", "https")],
    )


def check_bind(host: str, tokens: Mapping[str, str] | None, allowed_hosts: Sequence[str] = ()) -> None:
    """Refuse the unsafe combinations, explaining why and what to do instead."""
    if not is_loopback(host) and not tokens:
        raise ConfigError(
            f"refusing to serve HTTP on {host} without authentication: anyone who can reach that address could "
            "read and change your memories. Set MEMSERVER_TOKENS='alice:TOKEN' (or MEMSERVER_TOKEN_FILE) to "
            "require bearer tokens, or keep the default --host 127.0.0.1"
        )
    if _is_wildcard(host) and not allowed_hosts:
        raise ConfigError(
            f"--host {host} listens on every address, so memserver cannot tell which Host header is legitimate: "
            "name the host clients will use with --allowed-host NAME (repeatable)"
        )


def _is_wildcard(host: str) -> bool:
    return host in ("0.0.0.0", "::", "[::]", "")


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0 picks a free port)."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host.strip("[]"), port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        raise ConfigError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def serve_http(
    server: Server[Any],
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    tokens: Mapping[str, str] | None = None,
    allowed_hosts: Sequence[str] = (),
    limits: HttpLimits | None = None,
) -> None:
    """Serve over streamable HTTP until interrupted. Prints the URL on stderr once listening."""
    import uvicorn

    from memserver.http_limits import header_timeout_protocol

    limits = limits or HttpLimits()
    check_bind(host, tokens, allowed_hosts)
    sock = bind_socket(host, port)
    port = sock.getsockname()[1]
    app = http_app(server, host=host, port=port, tokens=tokens, allowed_hosts=allowed_hosts, limits=limits)
    url_host = f"[{host}]" if ":" in host else host
    who = f"bearer tokens for {len(set(tokens.values()))} user(s)" if tokens else "loopback only, no tokens"
    print(f"memserver: serving MCP at http://{url_host}:{port}{MCP_PATH} ({who})", file=sys.stderr, flush=True)
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=5,
        http=header_timeout_protocol(limits.header_timeout),
        limit_concurrency=limits.max_connections,
    )
    uvicorn.Server(config).run(sockets=[sock])
