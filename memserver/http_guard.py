"""The ASGI app in front of the SDK's streamable HTTP transport, and the session manager it counts sessions with.

`McpGuard`, for each request to the MCP endpoint, after the bearer-token check: Host/Origin first, then a request
slot, then the body (bounded in size and time), checked with wire.inspect(); then the session caps; then the SDK.
Every refusal it makes is a JSON-RPC error carrying the request's id when it is known, and it adds that id to the
SDK's own id-less error answers (404 for an expired session, ...). The limits are in http_limits.py.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from memserver import wire
from memserver.http_limits import HttpLimits, SessionRegistry

if TYPE_CHECKING:
    from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from mcp.server.transport_security import TransportSecurityMiddleware
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

logger = logging.getLogger(__name__)

# JSON-RPC leaves -32000..-32099 to implementations (MCP 2026-07-28 keeps -32000..-32019 for them); -32005 is the
# "limit exceeded" of other JSON-RPC servers (EIP-1474).
LIMIT_EXCEEDED = -32005
MISSING_SESSION = "Invalid Request: no mcp-session-id header; send initialize first and use the session it opens"


class LimitedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager with a per-user session cap and a registry of open sessions.

    The SDK caps sessions only in total and offers no hook for a session's opening and end, so this overrides its
    two private methods for them, `_admit_session` (under the manager's lock) and `_discard_session` (every way a
    session ends: DELETE, idle expiry, a failed opening request, shutdown). Checked at construction: if the SDK
    renames them, the server refuses to start rather than run without its caps. (docs/upstream.md)
    """

    def __init__(self, *args: Any, registry: SessionRegistry, max_sessions_per_user: int, **kwargs: Any) -> None:
        for hook in ("_admit_session", "_discard_session"):
            if not callable(getattr(StreamableHTTPSessionManager, hook, None)):
                raise RuntimeError(f"mcp's StreamableHTTPSessionManager has no {hook}; memserver needs an update")
        super().__init__(*args, **kwargs)
        self.registry = registry
        self.max_sessions_per_user = max_sessions_per_user

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        user = requestor["client_id"] if requestor else None
        if self.registry.count(user) >= self.max_sessions_per_user:
            return None  # McpGuard checked first; this closes the race between two opening requests
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            self.registry.opened(transport.mcp_session_id, user)
        return transport

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self.registry.closed(session_id)
        await super()._discard_session(session_id, transport)


# --- the guard in front of the SDK -------------------------------------------------------------------------------


class McpGuard:
    """ASGI app for the MCP endpoint: limits and message checks in front of the SDK's transport (`inner`).

    `stateless`: no sessions (a mode where every POST stands alone), so no session caps apply.
    """

    def __init__(
        self,
        inner: ASGIApp,
        limits: HttpLimits,
        registry: SessionRegistry,
        security: TransportSecurityMiddleware,
        *,
        stateless: bool = False,
    ) -> None:
        self.inner = inner
        self.limits = limits
        self.registry = registry
        self.security = security
        self.stateless = stateless
        self.slots = anyio.Semaphore(limits.max_concurrent_requests)
        self.in_flight: set[tuple[str, str]] = set()  # (session, wire.id_key) of the requests being served

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return
        from starlette.requests import Request

        method = scope["method"]
        # Host and Origin first: a page of a foreign origin learns nothing else.
        refused = await self.security.validate_request(Request(scope), is_post=method == "POST")
        if refused is not None:
            await refused(scope, receive, send)
            return
        if method not in ("POST", "DELETE"):  # GET streams: at most one per session (the SDK's rule), so capped too
            await self.inner(scope, receive, send)
            return
        acquired = False
        with anyio.move_on_after(self.limits.queue_timeout):
            await self.slots.acquire()
            acquired = True
        if not acquired:
            busy = f"The server is busy ({self.limits.max_concurrent_requests} requests in progress); retry shortly"
            await _reply(send, 503, wire.error_bytes(None, LIMIT_EXCEEDED, busy), retry_after=1)
            return
        try:
            await self._serve(scope, receive, send)
        finally:
            self.slots.release()

    async def _serve(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["method"] != "POST":
            await self.inner(scope, receive, send)
            return
        body = await _read_body(scope, receive, self.limits)
        if isinstance(body, _Refusal):
            logger.warning("refused an HTTP request: %s", body.reason)
            await _reply(send, body.status, wire.error_bytes(None, LIMIT_EXCEEDED, body.reason))
            return
        inbound = wire.inspect(body)
        if isinstance(inbound, wire.Refused):
            wire.log_refused(logger, inbound, len(body))
            await _reply(send, 400, inbound.answer)
            return
        message = inbound.message
        request_id = message.id if isinstance(message, types.JSONRPCRequest) else None
        if isinstance(message, types.JSONRPCRequest) and self._has_sessions(scope) and not _session_id(scope):
            refusal = self._opening_refusal(scope, message)
            if refusal is not None:
                status, text = refusal
                logger.warning("refused a new session: %s", text)
                code = types.INVALID_REQUEST if status == 400 else LIMIT_EXCEEDED
                await _reply(send, status, wire.error_bytes(request_id, code, text))
                return
        session = _session_id(scope)
        key = (session, wire.id_key(request_id)) if request_id is not None and session else None
        if key is not None and key in self.in_flight:
            duplicate = wire.duplicate(request_id)  # type: ignore[arg-type]
            wire.log_refused(logger, duplicate, len(body))
            await _reply(send, 400, duplicate.answer)
            return
        if key is None:
            await self.inner(scope, _replay(body, receive), _with_id(send, request_id))
            return
        self.in_flight.add(key)

        async def answered(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.in_flight.discard(key)  # the client may reuse the id as soon as it has the whole answer
            await send(message)

        try:
            await self.inner(scope, _replay(body, receive), _with_id(answered, request_id))
        finally:
            self.in_flight.discard(key)

    def _has_sessions(self, scope: Scope) -> bool:
        """Stateful handshake-era requests have sessions; 2026-07-28 ones (by their header, as the SDK routes) and
        a stateless server have none."""
        from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
        from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

        header = MCP_PROTOCOL_VERSION_HEADER.lower().encode()
        version = next((v.decode("latin-1") for k, v in scope["headers"] if k == header), None)
        return not self.stateless and (version is None or version in HANDSHAKE_PROTOCOL_VERSIONS)

    def _opening_refusal(self, scope: Scope, message: types.JSONRPCRequest) -> tuple[int, str] | None:
        """Why a request without a session id may not open one: (HTTP status, message), or None."""
        if message.method != "initialize":
            return 400, MISSING_SESSION
        user = _user(scope)
        limits = self.limits
        if self.registry.count(user) >= limits.max_sessions_per_user:
            who = f"user {user!r}" if user else "this server's one user"
            return 429, (
                f"Too many open sessions: {who} has {limits.max_sessions_per_user}, the most allowed; end one "
                f"(HTTP DELETE) or let an idle one expire (after {limits.session_idle_timeout:g} s)"
            )
        if self.registry.total() >= limits.max_sessions:
            return 503, f"Too many open sessions: the server has {limits.max_sessions}, the most allowed; retry later"
        return None


# --- helpers ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Refusal:
    status: int
    reason: str


async def _read_body(scope: Scope, receive: Receive, limits: HttpLimits) -> bytes | _Refusal:
    """The whole request body, if it is at most max_body_bytes and arrives within body_timeout."""
    too_large = _Refusal(413, f"Request body larger than {limits.max_body_bytes} bytes")
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limits.max_body_bytes:
            return too_large
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(limits.body_timeout):
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return _Refusal(400, "the client disconnected before sending the whole body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limits.max_body_bytes:
                return too_large
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
    return _Refusal(408, f"Request body not received within {limits.body_timeout:g} s")


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` for the SDK: the body already read, then the client's own (for its disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def _with_id(send: Send, request_id: types.RequestId | None) -> Send:
    """`send` that puts the request's id into a JSON-RPC error the SDK answers with `"id": null`."""
    if request_id is None:
        return send
    held: list[Message] = []

    async def fill(message: Message) -> None:
        if message["type"] == "http.response.start":
            kind = dict(message.get("headers", [])).get(b"content-type", b"")
            if message["status"] >= 400 and kind.startswith(b"application/json"):
                held.append(message)
                return
        elif held and message["type"] == "http.response.body":
            held.append(message)
            if message.get("more_body", False):
                return
            start, *parts = held
            held.clear()
            body = _filled(b"".join(part.get("body", b"") for part in parts), request_id)
            kept = [(k, v) for k, v in start.get("headers", []) if k != b"content-length"]
            await send({**start, "headers": [*kept, (b"content-length", str(len(body)).encode())]})
            await send({"type": "http.response.body", "body": body, "more_body": False})
            return
        await send(message)

    return fill


def _filled(body: bytes, request_id: types.RequestId) -> bytes:
    try:
        answer = json.loads(body)
    except ValueError:
        return body
    if isinstance(answer, dict) and "error" in answer and answer.get("id") is None:
        answer["id"] = request_id
        return json.dumps(answer, separators=(",", ":")).encode()
    return body


async def _reply(send: Send, status: int, body: bytes, retry_after: int | None = None) -> None:
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    if status in (408, 413):  # the rest of the body may still be coming: end the connection rather than read it
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _session_id(scope: Scope) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-session-id"), None)


def _user(scope: Scope) -> str | None:
    """The user named by the request's bearer token (None without tokens)."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

    user = scope.get("user")
    return user.access_token.client_id if isinstance(user, AuthenticatedUser) else None
