"""The ASGI app in front of the SDK's streamable HTTP transport, and the session manager it counts sessions with.

`McpGuard`, for each request to the MCP endpoint, after the bearer-token check: Host/Origin first, then one of its
user's request slots, then the body (bounded in size and time), then one of the server's request slots
(RequestSlots: a slow body holds no server slot); the body checked with wire.inspect(); then the session caps;
then the SDK.
Every refusal it makes is a JSON-RPC error carrying the request's id when it is known, and it adds that id to the
SDK's own id-less error answers (404 for an expired session, ...). The limits are in limits.py.

On a stateless server (`--stateless`) it also answers what needs a session, which the SDK would accept and then
forget: GET and DELETE get 405, logging/setLevel and resources/(un)subscribe -32601 with the reason.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from memserver.transports import wire
from memserver.transports.limits import HttpLimits, SessionRegistry

if TYPE_CHECKING:
    from mcp.server.auth.middleware.bearer_auth import AuthorizationContext
    from mcp.server.streamable_http import StreamableHTTPServerTransport
    from mcp.server.transport_security import TransportSecurityMiddleware
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

    from memserver.transports.oauth import ScopeGate

logger = logging.getLogger(__name__)

# JSON-RPC leaves -32000..-32099 to implementations (MCP 2026-07-28 keeps -32000..-32019 for them); -32005 is the
# "limit exceeded" of other JSON-RPC servers (EIP-1474).
LIMIT_EXCEEDED = -32005
MISSING_SESSION = "Invalid Request: no mcp-session-id header; send initialize first and use the session it opens"


# The place McpGuard holds for the session the request it passes on may open (SessionRegistry.hold): the SDK
# admits the session in the request's own task, so LimitedSessionManager finds it here.
OPENING: ContextVar[str | None] = ContextVar("memserver_opening_session", default=None)

# What LimitedSessionManager overrides, as mcp 2.3 defines it (checked at construction, see check_sdk).
SDK_HOOKS = {"_admit_session": ("self", "requestor"), "_discard_session": ("self", "session_id", "transport")}


class LimitedSessionManager(StreamableHTTPSessionManager):
    """The SDK's session manager, telling the registry of open sessions (SessionRegistry) of each session's opening
    and end, so that McpGuard can cap sessions per user.

    The SDK caps sessions only in total and offers no hook for a session's opening and end, so this overrides its
    two private methods for them, `_admit_session` (under the manager's lock, in the opening request's task) and
    `_discard_session` (every way a session ends: DELETE, idle expiry, a failed opening request, a crash). Its
    shutdown forgets sessions without a word: each admission reconciles the registry with the SDK's own table.
    If the SDK renames these or changes their parameters, the server refuses to start rather than run without its
    caps (check_sdk; docs/upstream.md item 5).
    """

    def __init__(self, *args: Any, registry: SessionRegistry, **kwargs: Any) -> None:
        check_sdk()
        super().__init__(*args, **kwargs)
        if not isinstance(getattr(self, "_server_instances", None), dict):
            raise RuntimeError(
                "mcp's StreamableHTTPSessionManager keeps no _server_instances; memserver needs an update"
            )
        self.registry = registry
        self._registered: set[str] = set()  # the sessions of this manager in the registry
        self._holds: dict[str, int] = {}  # session id -> requests of it McpGuard holds (see holding)

    @contextmanager
    def holding(self, session_id: str | None) -> Iterator[None]:
        """Keep session `session_id` from expiring while McpGuard holds a request of it.

        The SDK suspends a session's idle countdown only while its own transport serves a request; a request
        waiting here for a request slot (or its body) is not one, so under load the session could expire with a
        request of it in the queue, which then got 404 (the 30-minute soak's 46 lost calls). Every request
        McpGuard passes to the SDK is inside one of these, so the countdown restarts when the last one ends. The
        SDK restarts it too when the last request *it* serves ends, while others may still wait here: then it is
        held again.
        """
        transport = self._server_instances.get(session_id) if session_id else None
        idle = transport.idle_scope if transport is not None else None
        if session_id is None or idle is None or idle.cancel_called or self.session_idle_timeout is None:
            yield
            return
        self._holds[session_id] = self._holds.get(session_id, 0) + 1
        idle.deadline = math.inf
        try:
            yield
        finally:
            self._holds[session_id] -= 1
            if not self._holds[session_id]:
                del self._holds[session_id]
            if not idle.cancel_called:
                held = session_id in self._holds
                idle.deadline = math.inf if held else anyio.current_time() + self.session_idle_timeout

    def _admit_session(self, requestor: AuthorizationContext | None) -> StreamableHTTPServerTransport | None:
        for forgotten in self._registered - self._server_instances.keys():
            self._registered.discard(forgotten)
            self.registry.closed(forgotten)
        transport = super()._admit_session(requestor)
        if transport is not None and transport.mcp_session_id is not None:
            user = requestor["client_id"] if requestor else None
            self.registry.opened(transport.mcp_session_id, user, held=OPENING.get())
            self._registered.add(transport.mcp_session_id)
        return transport

    async def _discard_session(self, session_id: str, transport: StreamableHTTPServerTransport) -> None:
        self._registered.discard(session_id)
        self.registry.closed(session_id)
        await super()._discard_session(session_id, transport)


def check_sdk() -> None:
    """Refuse to run on an SDK whose session-manager methods LimitedSessionManager overrides are not as it expects."""
    for name, expected in SDK_HOOKS.items():
        method = getattr(StreamableHTTPSessionManager, name, None)
        found = tuple(inspect.signature(method).parameters) if callable(method) else None
        if found != expected:
            raise RuntimeError(
                f"mcp's StreamableHTTPSessionManager.{name} is {found or 'missing'}, not {expected}: memserver's "
                "session caps need an update for this mcp version"
            )
    if not inspect.iscoroutinefunction(StreamableHTTPSessionManager._discard_session):
        raise RuntimeError(
            "mcp's StreamableHTTPSessionManager._discard_session is not async: memserver needs an update"
        )


# --- the guard in front of the SDK -------------------------------------------------------------------------------


class McpGuard:
    """ASGI app for the MCP endpoint: limits and message checks in front of the SDK's transport (`inner`).

    `stateless`: no sessions; every POST stands alone, served by a fresh SDK transport (`--stateless`). So no
    session caps apply, a GET (the stream for server-initiated messages) and a DELETE (ending a session) get 405,
    and the handshake-era methods whose effect outlives their request are refused here with -32601 saying why
    (NEEDS_A_SESSION). `slots`: the request slots, shared with the legacy SSE endpoint when it is on. `sessions`:
    the session manager, which keeps a session alive while a request of it waits here (its `holding`).
    """

    def __init__(
        self,
        inner: ASGIApp,
        limits: HttpLimits,
        registry: SessionRegistry,
        security: TransportSecurityMiddleware,
        *,
        stateless: bool = False,
        slots: RequestSlots | None = None,
        scopes: ScopeGate | None = None,
        sessions: LimitedSessionManager | None = None,
    ) -> None:
        self.inner = inner
        self.sessions = sessions
        self.scopes = scopes
        self.limits = limits
        self.registry = registry
        self.security = security
        self.stateless = stateless
        self.slots = slots or RequestSlots(limits)
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
        with self.sessions.holding(_session_id(scope)) if self.sessions is not None else nullcontext():
            await self._guarded(scope, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        method = scope["method"]
        if self.stateless and method in STATELESS_405 and handshake_era(scope):
            # Spec (streamable HTTP): a server that offers no GET stream answers 405. Over the SDK alone a GET
            # here would open a stream on a throw-away transport that never carries anything, until the client
            # gives up on it.
            await reply(send, 405, wire.error_bytes(None, types.INVALID_REQUEST, STATELESS_405[method]), allow="POST")
            return
        if method not in ("POST", "DELETE"):  # GET streams: at most one per session (the SDK's rule), so capped too
            await self.inner(scope, receive, send)
            return
        user = user_of(scope)
        if not await self.slots.enter(user, send):
            return
        try:
            body = b""
            if method == "POST":  # received before a request slot is taken: a slow body holds none (RequestSlots)
                received = await self.slots.read_body(scope, receive)
                if isinstance(received, Refusal):
                    await refuse(send, received)
                    return
                body = received
            if not await self.slots.take(send):
                return
            try:
                if method == "POST":
                    await self._serve(scope, body, receive, send)
                else:
                    await self.inner(scope, receive, send)
            finally:
                self.slots.release()
        finally:
            self.slots.leave(user)

    async def _serve(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> None:
        inbound = wire.inspect(body)
        if isinstance(inbound, wire.Refused):
            wire.log_refused(logger, inbound, len(body))
            await reply(send, 400, inbound.answer)
            return
        message = inbound.message
        request_id = message.id if isinstance(message, types.JSONRPCRequest) else None
        if self.scopes is not None and isinstance(message, types.JSONRPCRequest):
            from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

            user = scope.get("user")
            if isinstance(user, AuthenticatedUser):
                needed = self.scopes.missing_scope(user.access_token, message.method, message.params)
                if needed is not None:
                    logger.info("refused %s: the token lacks the %s scope", message.method, needed)
                    await self.scopes.refuse(send, needed)
                    return
        if isinstance(message, types.JSONRPCRequest) and self.stateless and handshake_era(scope):
            why = NEEDS_A_SESSION.get(message.method)
            if why is not None:
                logger.info("refused %s on a stateless server", message.method)
                await reply(send, 200, wire.error_bytes(message.id, types.METHOD_NOT_FOUND, why))
                return
        if isinstance(message, types.JSONRPCRequest) and self._has_sessions(scope) and not _session_id(scope):
            refusal = self._opening_refusal(scope, message)
            if refusal is not None:
                status, text = refusal
                logger.warning("refused a new session: %s", text)
                code = types.INVALID_REQUEST if status == 400 else LIMIT_EXCEEDED
                await reply(send, status, wire.error_bytes(request_id, code, text))
                return
            held = self.registry.hold(user_of(scope))  # no await since the check: the place is this request's
            opening = OPENING.set(held)
            try:
                await self.inner(scope, replay(body, receive), _with_id(send, request_id))
            finally:
                OPENING.reset(opening)
                self.registry.closed(held)  # the place is the session's now, or was never used
            return
        session = _session_id(scope)
        key = (session, wire.id_key(request_id)) if request_id is not None and session else None
        if key is not None and key in self.in_flight:
            duplicate = wire.duplicate(request_id)  # type: ignore[arg-type]
            wire.log_refused(logger, duplicate, len(body))
            await reply(send, 400, duplicate.answer)
            return
        if key is None:
            await self.inner(scope, replay(body, receive), _with_id(send, request_id))
            return
        self.in_flight.add(key)

        async def answered(message: Message) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.in_flight.discard(key)  # the client may reuse the id as soon as it has the whole answer
            await send(message)

        try:
            await self.inner(scope, replay(body, receive), _with_id(answered, request_id))
        finally:
            self.in_flight.discard(key)

    def _has_sessions(self, scope: Scope) -> bool:
        """Stateful handshake-era requests have sessions; 2026-07-28 ones (by their header, as the SDK routes) and
        a stateless server have none."""
        return not self.stateless and handshake_era(scope)

    def _opening_refusal(self, scope: Scope, message: types.JSONRPCRequest) -> tuple[int, str] | None:
        """Why a request without a session id may not open one: (HTTP status, message), or None."""
        if message.method != "initialize":
            return 400, MISSING_SESSION
        return session_cap_refusal(self.registry, self.limits, user_of(scope))


# What a stateless server answers where a session would be needed. 2026-07-28 requests never get these: that
# revision has neither method (the SDK answers -32601), nor sessions, nor a GET stream.
NEEDS_A_SESSION = {
    # Logging is deprecated as of 2026-07-28 (SEP-2577), where setLevel is gone and a request opts in itself.
    "logging/setLevel": (
        "Method not available: logging/setLevel sets a level for a session, and this server is stateless "
        "(memserver serve --stateless), so no level outlives its request. Each request's own log records at "
        "warning and above come with its answer; 2026-07-28 clients opt in per request (_meta logLevel)"
    ),
    "resources/subscribe": (
        "Method not available: this server is stateless (memserver serve --stateless) and has no stream to send "
        "notifications/resources/updated on; read the resource again when you need it, or use a server without "
        "--stateless"
    ),
}
NEEDS_A_SESSION["resources/unsubscribe"] = NEEDS_A_SESSION["resources/subscribe"].replace(
    "has no stream to send notifications/resources/updated on", "keeps no subscriptions"
)
STATELESS_405 = {
    "GET": "Method Not Allowed: this server is stateless (memserver serve --stateless) and has no stream for "
    "server-initiated messages; send each request as a POST and read its answer from the response",
    "DELETE": "Method Not Allowed: this server is stateless (memserver serve --stateless); there is no session to end",
}


def handshake_era(scope: Scope) -> bool:
    """Whether a request belongs to the handshake era (no MCP-Protocol-Version header, or a handshake version),
    as the SDK routes it: anything else goes to its 2026-07-28 path, which has no sessions."""
    from mcp.shared.inbound import MCP_PROTOCOL_VERSION_HEADER
    from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

    header = MCP_PROTOCOL_VERSION_HEADER.lower().encode()
    version = next((v.decode("latin-1") for k, v in scope["headers"] if k == header), None)
    return version is None or version in HANDSHAKE_PROTOCOL_VERSIONS


def session_cap_refusal(registry: SessionRegistry, limits: HttpLimits, user: str | None) -> tuple[int, str] | None:
    """Why `user` may not open another session (of either HTTP transport): (HTTP status, message), or None."""
    if registry.count(user) >= limits.max_sessions_per_user:
        who = f"user {user!r}" if user else "this server's one user"
        return 429, (
            f"Too many open sessions: {who} has {limits.max_sessions_per_user}, the most allowed; end one (HTTP "
            f"DELETE, or close its /sse stream) or let an idle one expire (after {limits.session_idle_timeout:g} s)"
        )
    if registry.total() >= limits.max_sessions:
        return 503, f"Too many open sessions: the server has {limits.max_sessions}, the most allowed; retry later"
    return None


class RequestSlots:
    """What a request holds while it is handled, shared by /mcp and the legacy SSE endpoint, in the order taken:

    1. one of its user's `max_concurrent_requests_per_user` slots (the token's user; the one user without
       tokens counts as one), from its arrival until its answer: one user's requests, stalled bodies included,
       cannot take more than that from the others (429 after `queue_timeout`);
    2. while its body is received, one of `max_incoming_bodies` places (memory: at most that many bodies of
       `max_body_bytes`; 503 after `queue_timeout`), given back once the body is in;
    3. one of the server's `max_concurrent_requests` slots, from its body's arrival until its answer (503 after
       `queue_timeout`). A body that is slow to come holds none of these.
    """

    def __init__(self, limits: HttpLimits) -> None:
        self.limits = limits
        self.server = anyio.Semaphore(limits.max_concurrent_requests)
        self.bodies = anyio.Semaphore(limits.max_incoming_bodies)
        self._users: dict[str | None, anyio.Semaphore] = {}  # one per user with a token: a bounded set

    async def enter(self, user: str | None, send: Send) -> bool:
        """Take one of `user`'s slots; after `queue_timeout` s without one, answer 429 and return False."""
        slots = self._users.get(user)
        if slots is None:
            slots = self._users[user] = anyio.Semaphore(self.limits.max_concurrent_requests_per_user)
        if await self._acquired(slots):
            return True
        who = f"user {user!r} has" if user else "this server's one user has"
        busy = (
            f"Too many requests in progress: {who} {self.limits.max_concurrent_requests_per_user}, the most "
            "allowed at once; retry when one is answered"
        )
        logger.warning("refused an HTTP request: %s", busy)
        await reply(send, 429, wire.error_bytes(None, LIMIT_EXCEEDED, busy), retry_after=1)
        return False

    def leave(self, user: str | None) -> None:
        """Give back the slot of `user` taken by enter()."""
        self._users[user].release()

    async def read_body(self, scope: Scope, receive: Receive) -> bytes | Refusal:
        """The request's body (see read_body), received in one of the places for incoming bodies."""
        if not await self._acquired(self.bodies):
            text = f"The server is busy ({self.limits.max_incoming_bodies} request bodies arriving); retry shortly"
            return Refusal(503, text)
        try:
            return await read_body(scope, receive, self.limits)
        finally:
            self.bodies.release()

    async def take(self, send: Send) -> bool:
        """Take one of the server's request slots; after `queue_timeout` s without one, answer 503 and return
        False."""
        if await self._acquired(self.server):
            return True
        busy = f"The server is busy ({self.limits.max_concurrent_requests} requests in progress); retry shortly"
        await reply(send, 503, wire.error_bytes(None, LIMIT_EXCEEDED, busy), retry_after=1)
        return False

    def release(self) -> None:
        """Give back the server's slot taken by take()."""
        self.server.release()

    async def _acquired(self, slots: anyio.Semaphore) -> bool:
        with anyio.move_on_after(self.limits.queue_timeout):
            await slots.acquire()
            return True
        return False


# --- helpers ------------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Refusal:
    status: int
    reason: str


async def refuse(send: Send, refusal: Refusal) -> None:
    """Answer a request refused before its message was read (no id to give)."""
    logger.warning("refused an HTTP request: %s", refusal.reason)
    await reply(send, refusal.status, wire.error_bytes(None, LIMIT_EXCEEDED, refusal.reason))


async def read_body(scope: Scope, receive: Receive, limits: HttpLimits) -> bytes | Refusal:
    """The whole request body, if it is at most max_body_bytes and arrives within body_timeout."""
    too_large = Refusal(413, f"Request body larger than {limits.max_body_bytes} bytes")
    for name, value in scope["headers"]:
        if name == b"content-length" and value.isdigit() and int(value) > limits.max_body_bytes:
            return too_large
    chunks: list[bytes] = []
    size = 0
    with anyio.move_on_after(limits.body_timeout):
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return Refusal(400, "the client disconnected before sending the whole body")
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > limits.max_body_bytes:
                return too_large
            chunks.append(chunk)
            if not message.get("more_body", False):
                return b"".join(chunks)
    return Refusal(408, f"Request body not received within {limits.body_timeout:g} s")


def replay(body: bytes, receive: Receive) -> Receive:
    """`receive` for the SDK: the body already read, then the client's own (for its disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def again() -> Message:
        return pending.pop() if pending else await receive()

    return again


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


async def reply(send: Send, status: int, body: bytes, retry_after: int | None = None, allow: str | None = None) -> None:
    """Answer with `body` (a JSON-RPC message) and `status`."""
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        headers.append((b"retry-after", str(retry_after).encode()))
    if allow is not None:
        headers.append((b"allow", allow.encode()))
    if status in (408, 413):  # the rest of the body may still be coming: end the connection rather than read it
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


def _session_id(scope: Scope) -> str | None:
    return next((v.decode("latin-1") for k, v in scope["headers"] if k == b"mcp-session-id"), None)


def user_of(scope: Scope) -> str | None:
    """The user named by the request's bearer token (None without tokens)."""
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

    user = scope.get("user")
    return user.access_token.client_id if isinstance(user, AuthenticatedUser) else None
