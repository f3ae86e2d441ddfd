"""The legacy HTTP+SSE transport (MCP 2024-11-05), for clients whose configs still name a `/sse` URL.

    GET  /sse                          opens a session: an event stream whose first event, `endpoint`, names the
                                       URL to POST to, /messages/?session_id=<32 hex digits>; every answer and
                                       notification of the session comes on this stream
    POST /messages/?session_id=...     one JSON-RPC message of that session: 202 Accepted, its answer on the stream

The SDK's own SseServerTransport serves both. `LegacySse` puts in front of it what McpGuard puts in front of /mcp,
after the bearer-token check (401, the app's middleware): Host/Origin (403/421); on GET the session caps, shared
with /mcp (429/503); on POST the request slots, shared with /mcp (a slot of the user's, 429; the body received,
413/408; a slot of the server's, 503: see http_guard.RequestSlots), wire.inspect()
(-32700/-32600/-32602 with the id), one request per id in flight. A session belongs to the user whose token opened
it: another user's token gets 404 for it, as for an id that never existed, and every request of a session is
served from its user's store.

Where answers go: on the stream, as the transport wants, refusals included. A message wire.inspect() refuses is
answered there when its id can be read (and is not in use), and its POST gets 202 like any other: the client
waits on the stream, and a client that sees an error status may give up the whole session (the SDK's Python
client does, docs/upstream.md). What cannot be answered on the stream gets an HTTP status with the JSON-RPC error
as its body, as on /mcp: an error without an id (unparseable text: 400), a second request with an id in use
(400), and the refusals made before a message is read or its session known (401, 403, 421, 503, 413, 408;
400 without a session_id, 404 for a session that is not the caller's).

A request holds its slots from its POST until its answer leaves on the stream (or it is cancelled, or the session
ends): the POST is answered at once, so the slot, not the POST, is what bounds the work in progress. A session
lasts as long as its stream is open (a /mcp session with an open GET stream does not expire either); closing the
stream ends it. Handshake era only (2024-11-05 to 2025-11-25): 2025-03-26 replaced this transport with streamable
HTTP, and a 2026-07-28 client uses /mcp; a request before `initialize` is told so (as stdio.py tells it), where the
SDK would answer -32602 "Invalid request parameters".
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

import anyio
import mcp_types as types
from mcp.server.sse import SseServerTransport
from mcp.shared.message import SessionMessage

from memserver.transports import wire
from memserver.transports.guard import (
    LIMIT_EXCEEDED,
    Refusal,
    RequestSlots,
    refuse,
    replay,
    reply,
    session_cap_refusal,
    user_of,
)

if TYPE_CHECKING:
    from collections.abc import Awaitable, Callable

    from mcp.server.lowlevel import Server
    from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
    from mcp.shared._stream_protocols import WriteStream
    from starlette.types import ASGIApp, Message, Receive, Scope, Send
    from typing_extensions import Self

    from memserver.transports.limits import HttpLimits, SessionRegistry

logger = logging.getLogger(__name__)

SSE_PATH = "/sse"
MESSAGES_PATH = "/messages/"
_ENDPOINT_SESSION = re.compile(rb"session_id=([0-9a-f]{32})")
NO_SESSION_ID = (
    "Invalid Request: no session_id; open a session with GET /sse first and POST to the URL its endpoint event names"
)
UNKNOWN_SESSION = "Session not found: it has ended or never existed; open a new one with GET /sse"
NOT_INITIALIZED = (
    "Invalid Request: the session is not initialized; send initialize (then notifications/initialized). This "
    "transport is the handshake era's only (2024-11-05 to 2025-11-25): a 2026-07-28 client uses /mcp"
)


@dataclass(eq=False)
class _Session:
    """One open event stream: whose it is, where its messages go, and the requests holding a slot until answered."""

    user: str | None
    stream: WriteStream[SessionMessage] | None = None  # the SDK's: what is sent here reaches the client's stream
    id: str | None = None  # the SDK's session id, as its endpoint event shows it
    in_flight: set[str] = field(default_factory=set)  # wire.id_key of the requests holding a slot
    initializing: set[str] = field(default_factory=set)  # wire.id_key of initialize requests not yet answered
    abandoned: set[str] = field(default_factory=set)  # ... and of those cancelled since (the SDK may answer anyway)
    initialized: bool = False


class LegacySse:
    """GET /sse and POST /messages/ for `server`, guarded (see the module docstring).

    `lifespan_state`: what the server's lifespan yielded (http.py enters it once for every transport of the app);
    it must be set before the first request. `slots` and `registry` are shared with /mcp: the limits are the
    server's, whichever transport a client uses.
    """

    def __init__(
        self,
        server: Server[Any],
        limits: HttpLimits,
        registry: SessionRegistry,
        security: TransportSecurityMiddleware,
        settings: TransportSecuritySettings,
        slots: RequestSlots,
    ) -> None:
        self.server = server
        self.limits = limits
        self.registry = registry
        self.security = security
        self.slots = slots
        self.transport = SseServerTransport(
            MESSAGES_PATH, security_settings=settings, max_request_body_size=limits.max_body_bytes
        )
        self.sessions: dict[str, _Session] = {}
        self.lifespan_state: Any = None
        self.stream_app: ASGIApp = _App(self._open_stream)
        self.messages_app: ASGIApp = _App(self._post_message)

    # --- GET /sse ------------------------------------------------------------------------------------------------

    async def _open_stream(self, scope: Scope, receive: Receive, send: Send) -> None:
        from mcp.server.runner import serve_loop
        from starlette.requests import Request

        refused = await self.security.validate_request(Request(scope), is_post=False)
        if refused is not None:
            await refused(scope, receive, send)
            return
        if scope["method"] != "GET":
            await reply(send, 405, wire.error_bytes(None, types.INVALID_REQUEST, "Method Not Allowed"), allow="GET")
            return
        user = user_of(scope)
        refusal = session_cap_refusal(self.registry, self.limits, user)
        if refusal is not None:
            status, text = refusal
            logger.warning("refused a new SSE session: %s", text)
            await reply(send, status, wire.error_bytes(None, LIMIT_EXCEEDED, text))
            return
        key = f"sse-{uuid.uuid4().hex}"
        self.registry.opened(key, user)  # at once, with no await since the check: two GETs cannot both slip in
        session = _Session(user)
        try:
            async with self.transport.connect_sse(scope, receive, self._watch_endpoint(send, session)) as streams:
                read_stream, write_stream = streams
                session.stream = write_stream
                # Handshake era only (2024-11-05 .. 2025-11-25): the SDK's serve_loop has no 2026-07-28 path.
                # The SDK's manager drives /mcp sessions the same way: its loop, the lifespan state entered once.
                await serve_loop(
                    self.server, read_stream, _Answers(write_stream, self, session), lifespan_state=self.lifespan_state
                )
        except ValueError:  # the SDK's own Host/Origin check refused it (already answered)
            return
        finally:
            self.registry.closed(key)
            self._end(session)

    def _watch_endpoint(self, send: Send, session: _Session) -> Send:
        """`send` for the SDK's stream that learns the session's id from its `endpoint` event (the SDK shows the id
        nowhere else) and registers the session before the client can read it, so its first POST finds it."""

        async def watched(message: Message) -> None:
            if session.id is None and message["type"] == "http.response.body":
                found = _ENDPOINT_SESSION.search(message.get("body", b""))
                if found:
                    session.id = found.group(1).decode()
                    self.sessions[session.id] = session
            await send(message)

        return watched

    def _end(self, session: _Session) -> None:
        if session.id is not None:
            self.sessions.pop(session.id, None)
        for _ in session.in_flight:
            self._done(session.user)
        session.in_flight.clear()

    def answered(self, session: _Session, request_id: types.RequestId, ok: bool = False) -> None:
        """A request's answer (`ok`: a result) is leaving on the stream: its slot is free (and its id may be used
        again); a successful initialize ends the handshake."""
        key = wire.id_key(request_id)
        if key in session.initializing or key in session.abandoned:
            session.initializing.discard(key)
            session.abandoned.discard(key)
            session.initialized = session.initialized or ok
        self._free(session, key)

    def cancelled(self, session: _Session, request_id: types.RequestId) -> None:
        """A request the client cancelled gets no answer: its slot is free now. A cancelled initialize no longer
        holds back what follows; if the SDK answers it after all, that answer still counts."""
        key = wire.id_key(request_id)
        if key in session.initializing:
            session.initializing.discard(key)
            session.abandoned.add(key)
        self._free(session, key)

    def _free(self, session: _Session, key: str) -> None:
        if key in session.in_flight:
            session.in_flight.discard(key)
            self._done(session.user)

    def _done(self, user: str | None) -> None:
        """A request handed over is over: its server slot and its user's slot are free."""
        self.slots.release()
        self.slots.leave(user)

    # --- POST /messages/ ----------------------------------------------------------------------------------------

    async def _post_message(self, scope: Scope, receive: Receive, send: Send) -> None:
        from starlette.requests import Request

        refused = await self.security.validate_request(Request(scope), is_post=scope["method"] == "POST")
        if refused is not None:
            await refused(scope, receive, send)
            return
        if scope["method"] != "POST":
            await reply(send, 405, wire.error_bytes(None, types.INVALID_REQUEST, "Method Not Allowed"), allow="POST")
            return
        user = user_of(scope)
        if not await self.slots.enter(user, send):
            return
        handed_over = False
        try:
            body = await self.slots.read_body(scope, receive)  # before a server slot: as on /mcp (RequestSlots)
            if isinstance(body, Refusal):
                await refuse(send, body)
                return
            if not await self.slots.take(send):
                return
            try:
                handed_over = await self._serve_post(scope, body, receive, send)
            finally:
                if not handed_over:
                    self.slots.release()
        finally:
            if not handed_over:
                self.slots.leave(user)

    async def _serve_post(self, scope: Scope, body: bytes, receive: Receive, send: Send) -> bool:
        """Check one POST and hand it to the SDK. True when it was a request, which now holds the POST's slots (its
        user's and the server's) until it is answered."""
        inbound = wire.inspect(body)
        if isinstance(inbound, wire.Accepted) and isinstance(inbound.message, types.JSONRPCRequest):
            request_id: types.RequestId | None = inbound.message.id
        else:
            request_id = inbound.ids[0] if isinstance(inbound, wire.Refused) and len(inbound.ids) == 1 else None
        session, problem = self._session_of(scope)
        if session is None:
            status = 400 if problem == NO_SESSION_ID else 404
            await reply(send, status, wire.error_bytes(request_id, types.INVALID_REQUEST, problem))
            return False
        if isinstance(inbound, wire.Refused):
            wire.log_refused(logger, inbound, len(body))
            if await self._to_stream(session, inbound):
                await _accepted(send)
            else:
                await reply(send, 400, inbound.answer)
            return False
        message = inbound.message
        key = wire.id_key(message.id) if isinstance(message, types.JSONRPCRequest) else None
        if isinstance(message, types.JSONRPCRequest) and key in session.in_flight:
            duplicate = wire.duplicate(message.id)
            wire.log_refused(logger, duplicate, len(body))
            await reply(send, 400, duplicate.answer)  # not on the stream: the one answer there is the first's
            return False
        if isinstance(message, types.JSONRPCRequest) and self._too_early(session, message):
            await self._to_stream(session, wire.refusal(message.id, types.INVALID_REQUEST, NOT_INITIALIZED))
            await _accepted(send)  # the SDK would answer -32602 "Invalid request parameters"
            return False
        if isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            cancelled = (message.params or {}).get("requestId")
            if isinstance(cancelled, str | int):
                self.cancelled(session, cancelled)
        if key is not None:
            session.in_flight.add(key)
        answered_with = await self._hand_over(scope, replay(body, receive), send)
        if key is None:
            return False
        if answered_with != 202 and key in session.in_flight:  # not taken: the slot goes back with the POST
            session.in_flight.discard(key)
            return False
        return True  # the request holds the slot until answered (or the session's end has given it back already)

    async def _hand_over(self, scope: Scope, receive: Receive, send: Send) -> int | None:
        """Let the SDK's transport take the message; returns the HTTP status it answered with."""
        status: list[int] = []

        async def watched(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(message["status"])
            await send(message)

        try:
            await self.transport.handle_post_message(scope, receive, watched)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):  # the stream closed meanwhile: it is over
            logger.info("an SSE session ended while a message for it was being delivered")
            return None
        return status[0] if status else None

    def _too_early(self, session: _Session, request: types.JSONRPCRequest) -> bool:
        """Whether `request` comes before the handshake, and is one the SDK would refuse for that (as stdio.py)."""
        if request.method == "initialize":
            session.initializing.add(wire.id_key(request.id))
            return False
        early = not session.initialized and not session.initializing and request.method != "ping"
        return early and self.server.get_request_handler(request.method) is not None  # else the SDK's -32601

    def _session_of(self, scope: Scope) -> tuple[_Session | None, str]:
        """The caller's session named by the query's session_id, else None and why (the same words for a session
        of another user as for one that does not exist)."""
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        given = query.get("session_id")
        if not given:
            return None, NO_SESSION_ID
        try:
            session_id = uuid.UUID(hex=given[0]).hex  # the SDK's parsing
        except ValueError:
            return None, UNKNOWN_SESSION
        session = self.sessions.get(session_id)
        if session is None or session.user != user_of(scope) or session.stream is None:
            return None, UNKNOWN_SESSION
        return session, ""

    async def _to_stream(self, session: _Session, refused: wire.Refused) -> bool:
        """Answer a refused message on the session's stream, where its client waits for answers, if every error
        in the answer carries an id that is not in use (the answer with such an id is the request's in flight).
        False: nothing was sent there."""
        answer = json.loads(refused.answer)
        errors = answer if isinstance(answer, list) else [answer]
        if session.stream is None or any(
            e.get("id") is None or wire.id_key(e["id"]) in session.in_flight for e in errors
        ):
            return False
        try:
            for error in errors:
                await session.stream.send(SessionMessage(types.JSONRPCError.model_validate(error)))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            return False
        return True


class _Answers:
    """The session's write stream as the server sees it: every message passes on to the SDK's stream; an answer
    frees the slot of its request."""

    def __init__(self, inner: WriteStream[SessionMessage], owner: LegacySse, session: _Session) -> None:
        self.inner = inner
        self.owner = owner
        self.session = session

    async def send(self, item: SessionMessage, /) -> None:
        message = item.message
        if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) and message.id is not None:
            self.owner.answered(self.session, message.id, ok=isinstance(message, types.JSONRPCResponse))
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        await self.aclose()
        return None


async def _accepted(send: Send) -> None:
    """202, as the SDK answers a message it accepted: the answer is on the stream."""
    await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


class _App:
    """An ASGI app that calls `handle` (Starlette's Route takes a bare function or method for a request handler)."""

    def __init__(self, handle: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.handle = handle

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.handle(scope, receive, send)


class SseOff:
    """What /sse and /messages/ answer on a server started without --sse: 404 saying how to turn it on."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        text = (
            "Not Found: the legacy HTTP+SSE transport is off on this server; start it with `memserver serve --http "
            "--sse`, or connect with streamable HTTP at /mcp"
        )
        await reply(send, 404, wire.error_bytes(None, types.INVALID_REQUEST, text))
