"""MCP over streamable HTTP (uvicorn): the Starlette app, its security settings, and serving it.

HTTP is safe by default:
  - it binds to 127.0.0.1; binding any other address without bearer tokens is refused (ConfigError);
  - DNS-rebinding protection is always on: a foreign Origin gets 403, a Host that is not ours gets 421;
  - with tokens configured (MEMSERVER_TOKENS and/or MEMSERVER_TOKEN_FILE) every request needs
    `Authorization: Bearer <token>` (401 otherwise); each token names a user, and each user has their own store;
  - every message is checked before the SDK sees it (wire.py), and sessions, concurrent requests, slow clients
    and body sizes are limited (limits.py).

The app is assembled here rather than by `Server.streamable_http_app()` so that memserver's checks come in the
right order: HostAndOriginFirst answers 403/421, Starlette middleware authenticates, RequireAuthMiddleware answers
401, McpGuard applies the limits, and the SDK's session manager serves what is left. The legacy HTTP+SSE
endpoints (`--sse`, sse.py) are guarded alike and share the limits.

Stateless mode (`--stateless`): the SDK's `stateless_http=True`, a fresh transport per POST and no session ids,
so several instances behind a load balancer can serve one client. What needs a session is refused there with an
explanation (http_guard.NEEDS_A_SESSION, STATELESS_405): logging/setLevel, resources/subscribe, the GET stream,
DELETE; a server-to-client request (elicitation, sampling, roots) is impossible (the SDK's NoBackChannelError);
a handshake-era notifications/cancelled lands on a transport of its own and cancels nothing. 2026-07-28 requests
are stateless by design and served the same in both modes.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any, Protocol

from memserver.errors import ConfigError
from memserver.transports.limits import HttpLimits

if TYPE_CHECKING:
    from mcp.server.auth.provider import TokenVerifier
    from mcp.server.lowlevel import Server
    from mcp.server.transport_security import TransportSecurityMiddleware
    from starlette.applications import Starlette
    from starlette.types import ASGIApp, Receive, Scope, Send

    from memserver.transports.oauth import OAuthSettings

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MCP_PATH = "/mcp"
UI_PATH = "/ui"


class MountedApp(Protocol):
    """An app served beside /mcp (the memory browser): its ASGI app, and the server's lifespan state once it runs."""

    def asgi(self) -> ASGIApp: ...

    def serve_from(self, lifespan_state: Any) -> None: ...


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
    stateless: bool = False,
    sse: bool = False,
    ui: MountedApp | None = None,
    oauth: OAuthSettings | None = None,
    oauth_verifier: TokenVerifier | None = None,
) -> Starlette:
    """The Starlette app serving `server` at /mcp, with the security settings described in the module docstring.

    `ui`: an app mounted at /ui (the memory browser, `serve --http --ui`) behind the same Host/Origin checks; it
    does its own sign-in with the same tokens, and is handed the server's lifespan state (its stores) at start.

    `oauth`: also accept the access tokens of an OAuth issuer (JWTs checked here, oauth.py, or asked about at its
    introspection endpoint, introspection.py), serve the RFC 9728 metadata naming it, and point 401 answers at that
    metadata; a token that cannot be checked now (the issuer out of reach) is answered 503. `oauth_verifier`: the
    issuer's verifier (oauth.token_verifier) when the browser (`ui`) checks its tokens with it too, so that both
    share its caches and its HTTP client; made here when not given. The app's lifespan closes it, once.

    `server` must have been built with `per_user=bool(tokens or oauth)`. `stateless`: /mcp keeps no sessions (every POST
    stands alone, so any instance behind a load balancer can serve it). `sse`: also serve the legacy HTTP+SSE
    transport at /sse and /messages/ (sse.py); without it those paths answer 404 saying how to turn it on.

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
    from starlette.routing import BaseRoute, Route

    from memserver.transports.bearer import StaticTokenVerifier
    from memserver.transports.guard import LimitedSessionManager, McpGuard
    from memserver.transports.limits import SessionRegistry
    from memserver.transports.oauth import OutageAware
    from memserver.transports.sse import MESSAGES_PATH, SSE_PATH, SseOff

    check_bind(host, tokens, allowed_hosts, oauth=oauth is not None)
    if oauth is not None and sse:
        raise ConfigError("--sse cannot be combined with --oauth-issuer: OAuth scopes are checked on /mcp only")
    limits = limits or HttpLimits()
    security = _security(host, allowed_hosts)
    registry = SessionRegistry()
    manager = LimitedSessionManager(
        app=server,
        # SSE answers (json_response=False): a POST's own stream carries its progress and log records first.
        stateless=stateless,
        security_settings=security,
        max_request_body_size=limits.max_body_bytes,
        session_idle_timeout=limits.session_idle_timeout,
        max_sessions=limits.max_sessions,
        registry=registry,
    )
    checks = TransportSecurityMiddleware(security)
    scope_gate = None
    if oauth is not None:
        from memserver.transports.oauth import ScopeGate

        scope_gate = ScopeGate(oauth, _resource_metadata_url(oauth.resource))
    guard = McpGuard(
        StreamableHTTPASGIApp(manager),
        limits,
        registry,
        checks,
        stateless=stateless,
        scopes=scope_gate,
        sessions=manager,
    )

    signed_in = bool(tokens) or oauth is not None
    verifier: Any = StaticTokenVerifier(tokens or {})
    issuer_verifier: Any = None
    metadata_url = None
    routes: list[BaseRoute] = []
    if oauth is not None:
        from mcp.server.auth.routes import create_protected_resource_routes
        from pydantic import AnyHttpUrl

        from memserver.transports.oauth import FirstThatAccepts, token_verifier

        issuer_verifier = token_verifier(oauth) if oauth_verifier is None else oauth_verifier
        verifier = FirstThatAccepts(verifier, issuer_verifier)
        resource = AnyHttpUrl(oauth.resource)
        metadata_url = AnyHttpUrl(_resource_metadata_url(oauth.resource))
        routes += create_protected_resource_routes(
            resource, [AnyHttpUrl(oauth.issuer)], scopes_supported=oauth.scopes, resource_name="memserver"
        )

    def protected(endpoint: Any) -> Any:
        # A resource server only: no authorization-server routes. The audience is the JWT verifier's to check
        # (static tokens have none), so BearerAuthBackend gets no resource_server_url.
        return RequireAuthMiddleware(endpoint, [], metadata_url) if signed_in else endpoint

    routes.append(Route(MCP_PATH, endpoint=protected(guard)))
    legacy = None
    if sse:
        from memserver.transports.sse import LegacySse

        legacy = LegacySse(server, limits, registry, checks, security, guard.slots)
        routes += [
            Route(SSE_PATH, endpoint=protected(legacy.stream_app)),
            Route(MESSAGES_PATH, endpoint=protected(legacy.messages_app)),
        ]
    else:
        routes += [Route(SSE_PATH, endpoint=SseOff()), Route(MESSAGES_PATH, endpoint=SseOff())]
    if ui is not None:
        from starlette.routing import Mount

        routes.append(Mount(UI_PATH, app=ui.asgi()))
    middleware = [Middleware(HostAndOriginFirst, checks=checks)]  # outermost: before the token is looked at
    if signed_in:
        middleware += [
            Middleware(
                AuthenticationMiddleware,
                backend=OutageAware(BearerAuthBackend(verifier)),
                on_error=OutageAware.unavailable,
            ),
            Middleware(AuthContextMiddleware),
        ]

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with _entered_once(server) as state, manager.run():
            if legacy is not None:
                legacy.lifespan_state = state
            if ui is not None:
                ui.serve_from(state)
            try:
                yield
            finally:
                if (close := getattr(issuer_verifier, "aclose", None)) is not None:
                    await close()  # introspection's shared HTTP client, the browser's too

    return Starlette(routes=routes, middleware=middleware, lifespan=lifespan)


def _resource_metadata_url(resource: str) -> str:
    """RFC 9728's well-known address of the metadata about `resource` (the SDK's rule)."""
    from mcp.server.auth.routes import build_resource_metadata_url
    from pydantic import AnyHttpUrl

    return str(build_resource_metadata_url(AnyHttpUrl(resource)))


class HostAndOriginFirst:
    """ASGI middleware, the app's outermost: Host and Origin are checked before anything else, the bearer token
    included, so a page of a foreign origin learns nothing, not even that a token is wanted (403/421, not 401)."""

    def __init__(self, app: ASGIApp, checks: TransportSecurityMiddleware) -> None:
        self.app = app
        self.checks = checks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            from starlette.requests import Request

            refused = await self.checks.validate_request(Request(scope), is_post=False)  # Content-Type: later
            if refused is not None:
                await refused(scope, receive, send)
                return
        await self.app(scope, receive, send)


@asynccontextmanager
async def _entered_once(server: Server[Any]) -> AsyncIterator[Any]:
    """The server's lifespan (its stores, its log forwarding), entered once for every transport of the app.

    The SDK's session manager enters the lifespan itself and keeps the state to itself; the legacy SSE sessions
    need the same state (one store per user, not two). So it is entered here, and the manager, which enters it
    again, is handed a lifespan that yields the same state while the app runs.
    """
    real = server.lifespan
    async with real(server) as state:

        @asynccontextmanager
        async def already_entered(_: Server[Any]) -> AsyncIterator[Any]:
            yield state

        server.lifespan = already_entered
        try:
            yield state
        finally:
            server.lifespan = real


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


def check_bind(
    host: str, tokens: Mapping[str, str] | None, allowed_hosts: Sequence[str] = (), *, oauth: bool = False
) -> None:
    """Refuse the unsafe combinations, explaining why and what to do instead."""
    if not is_loopback(host) and not tokens and not oauth:
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
    stateless: bool = False,
    sse: bool = False,
    ui: MountedApp | None = None,
    oauth: OAuthSettings | None = None,
    oauth_verifier: TokenVerifier | None = None,
) -> None:
    """Serve over streamable HTTP (and legacy SSE with `sse`) until interrupted. Prints the URL on stderr once
    listening."""
    import uvicorn

    from memserver.transports.limits import h11_protocol

    limits = limits or HttpLimits()
    check_bind(host, tokens, allowed_hosts, oauth=oauth is not None)
    sock = bind_socket(host, port)
    port = sock.getsockname()[1]
    app = http_app(
        server,
        host=host,
        port=port,
        tokens=tokens,
        allowed_hosts=allowed_hosts,
        limits=limits,
        stateless=stateless,
        sse=sse,
        ui=ui,
        oauth=oauth,
        oauth_verifier=oauth_verifier,
    )
    url_host = f"[{host}]" if ":" in host else host
    base = f"http://{url_host}:{port}"
    who = f"bearer tokens for {len(set(tokens.values()))} user(s)" if tokens else "loopback only, no tokens"
    if oauth is not None:
        how = ", by introspection" if oauth.introspection is not None else ""
        who = f"OAuth tokens of {oauth.issuer}{how}" + (f" and {who}" if tokens else "")
    mode = "stateless; " if stateless else ""
    legacy = f"; legacy SSE at {base}/sse" if sse else ""
    browser = f"; the memory browser at {base}{UI_PATH}/" if ui is not None else ""
    print(f"memserver: serving MCP at {base}{MCP_PATH} ({mode}{who}){legacy}{browser}", file=sys.stderr, flush=True)
    config = uvicorn.Config(
        app,
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=5,
        http=h11_protocol(limits.header_timeout),
        limit_concurrency=limits.max_connections,
    )
    web = uvicorn.Server(config)
    _exit_zero_on_signals(web)
    web.run(sockets=[sock])


def browser_app(app: ASGIApp, host: str = DEFAULT_HOST) -> Starlette:
    """The memory browser served alone (`memserver ui`): `app` at /ui, / redirecting there, behind the Host/Origin
    checks of /mcp (a foreign Origin 403, a Host not ours 421)."""
    from mcp.server.transport_security import TransportSecurityMiddleware
    from starlette.applications import Starlette
    from starlette.middleware import Middleware
    from starlette.responses import RedirectResponse
    from starlette.routing import Mount, Route

    async def home(request: Any) -> Any:
        return RedirectResponse(UI_PATH + "/", status_code=303)

    checks = TransportSecurityMiddleware(_security(host, ()))
    routes = [Route("/", endpoint=home), Mount(UI_PATH, app=app)]
    return Starlette(routes=routes, middleware=[Middleware(HostAndOriginFirst, checks=checks)])


def serve_browser(app: ASGIApp, sock: socket.socket, *, on_ready: Any = None, limits: HttpLimits | None = None) -> None:
    """Serve the memory browser alone on `sock` (from bind_socket) until SIGINT/SIGTERM; `on_ready()` is called
    once uvicorn accepts connections."""
    import asyncio

    import uvicorn

    from memserver.transports.limits import h11_protocol

    limits = limits or HttpLimits()
    host = sock.getsockname()[0]
    config = uvicorn.Config(
        browser_app(app, host),
        log_level="warning",
        lifespan="on",
        timeout_graceful_shutdown=2,
        http=h11_protocol(limits.header_timeout),
        limit_concurrency=limits.max_connections,
    )
    server = uvicorn.Server(config)

    _exit_zero_on_signals(server)

    async def run() -> None:
        serving = asyncio.ensure_future(server.serve(sockets=[sock]))
        while not server.started and not serving.done():
            await asyncio.sleep(0.02)
        if server.started and on_ready is not None:
            on_ready()
        await serving

    asyncio.run(run())


def _exit_zero_on_signals(server: Any) -> None:
    """SIGINT and SIGTERM stop `server` (a uvicorn.Server) gracefully, and the process then exits 0: uvicorn's own
    handlers re-raise the signal once it has stopped (exit status -15), but a server a service manager stops has
    done nothing wrong."""
    import signal

    @contextmanager
    def stop_on_signals() -> Iterator[None]:
        previous = {sig: signal.signal(sig, server.handle_exit) for sig in (signal.SIGINT, signal.SIGTERM)}
        try:
            yield
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    server.capture_signals = stop_on_signals
