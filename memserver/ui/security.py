"""What keeps the browser safe: sign-in sessions, CSRF tokens, the headers of every answer, and the limits.

  sessions  a random id (32 bytes, urlsafe) in an HttpOnly, SameSite=Strict, Path=/ui cookie, mapped here to the
            user; the bearer token itself is never stored, set in a cookie, put in a URL or logged. A sign-in
            starts a new session (no fixation); sessions idle for IDLE_SECONDS end; at most MAX_SESSIONS are kept;
            a session opened with a token that expires (an OAuth access token) ends when the token does.
  CSRF      every POST carries HMAC(secret, session id) (form field `csrf` or header X-CSRF-Token) and comes from
            this origin (Origin, or failing that Referer, naming the Host it was sent to); otherwise 403.
  headers   a strict Content-Security-Policy (no inline script or style), nosniff, no referrer to other sites,
            no framing.
  limits    at most `concurrent` requests at once (the /mcp setting; the live event streams apart, at most
            MAX_EVENT_STREAMS), bodies at most `max_body_bytes` (an import: IMPORT_MAX_BYTES), 413 above.

Host/Origin checks (DNS rebinding) come before this, from transports/http.py, exactly as on /mcp.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import anyio

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "memserver_ui"
IDLE_SECONDS = 12 * 3600.0
MAX_SESSIONS = 10_000
IMPORT_MAX_BYTES = 64 * 1024 * 1024  # an export of ~100k memories without vectors; bigger: `memserver import`
MAX_EVENT_STREAMS = 64

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"same-origin"),  # not no-referrer: Chromium then sends `Origin: null` on POSTs
    (b"x-frame-options", b"DENY"),
]


@dataclass(frozen=True)
class SignIn:
    """What a good token says: its user, and when it expires (seconds since the epoch; None: never, a static
    token). A browser session lasts no longer than the token it was opened with."""

    user: str
    expires_at: float | None = None


@dataclass
class Session:
    """One browser's sign-in: whose store it sees (None: the single user of a server without tokens)."""

    user: str | None
    signed_in: bool
    seen: float
    expires_at: float | None = None  # wall clock, as the token's `exp`


class Sessions:
    """Session id -> Session, with the CSRF secret. Thread-safe; bounded (the oldest go first)."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock  # seconds since the epoch, as a token's `exp` (the idle clock is time.monotonic)
        self._secret = secrets.token_bytes(32)
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    def start(self, user: str | None, signed_in: bool, expires_at: float | None = None) -> str:
        """A new session's id; the session ends at `expires_at` (time.time()) at the latest."""
        sid = secrets.token_urlsafe(32)
        with self._lock:
            self._sessions[sid] = Session(user, signed_in, time.monotonic(), expires_at)
            while len(self._sessions) > MAX_SESSIONS:
                self._sessions.popitem(last=False)
        return sid

    def find(self, sid: str | None) -> Session | None:
        """The live session `sid` names (its idle clock restarted), or None."""
        if not sid:
            return None
        now = time.monotonic()
        with self._lock:
            session = self._sessions.get(sid)
            if session is None:
                return None
            expired = session.expires_at is not None and self.clock() >= session.expires_at
            if expired or now - session.seen > IDLE_SECONDS:
                del self._sessions[sid]
                return None
            session.seen = now
            self._sessions.move_to_end(sid)
            return session

    def live(self, sid: str) -> bool:
        """Whether session `sid` still stands (not ended, its token not expired), its idle clock left alone: what
        a long answer (the live event stream) asks between its parts."""
        with self._lock:
            session = self._sessions.get(sid)
        return session is not None and (session.expires_at is None or self.clock() < session.expires_at)

    def end(self, sid: str | None) -> None:
        with self._lock:
            self._sessions.pop(sid or "", None)

    def csrf(self, sid: str) -> str:
        """The CSRF token of session `sid`: derived, so nothing more is stored."""
        return hmac.new(self._secret, b"csrf:" + sid.encode(), hashlib.sha256).hexdigest()

    def csrf_ok(self, sid: str | None, token: str | None) -> bool:
        return bool(sid and token) and hmac.compare_digest(self.csrf(sid or ""), token or "")


def set_cookie(response: Response, request: Request, sid: str) -> None:
    response.set_cookie(
        COOKIE,
        sid,
        path="/ui",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def same_origin(request: Request) -> bool:
    """Whether the request comes from a page of this origin: its Origin (or, without one, its Referer) names the
    Host it was sent to. A request naming neither is refused: browsers send Origin on every POST."""
    host = request.headers.get("host", "")
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        origin = request.headers.get("referer")
        if origin is None:
            return False
    return bool(host) and urlsplit(origin).netloc == host


class TooLargeError(Exception):
    """A request body grew past its bound."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than {limit} bytes")
        self.limit = limit


class Guard:
    """ASGI middleware around the browser: security headers on every answer, the concurrency slots, body bounds."""

    def __init__(self, app: ASGIApp, *, concurrent: int, max_body_bytes: int, queue_timeout: float) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes
        self.queue_timeout = queue_timeout
        self.slots = anyio.CapacityLimiter(concurrent)
        self.streams = anyio.CapacityLimiter(MAX_EVENT_STREAMS)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        path = scope.get("path", "")
        limit = IMPORT_MAX_BYTES if path.endswith("/import") else self.max_body_bytes
        length = dict(scope.get("headers", [])).get(b"content-length")
        if length is not None and length.isdigit() and int(length) > limit:
            await _plain(with_headers, 413, f"The request body is larger than {limit} bytes.")
            return
        received = 0

        async def bounded() -> Message:
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > limit:
                    raise TooLargeError(limit)
            return message

        pool = self.streams if path.endswith("/events") else self.slots
        with anyio.move_on_after(self.queue_timeout) as waited:
            await pool.acquire()
        if waited.cancelled_caught:
            await _plain(with_headers, 503, "The server is busy; try again in a moment.", retry=True)
            return
        try:
            await self.app(scope, bounded, with_headers)
        finally:
            pool.release()


async def _plain(send: Send, status: int, text: str, retry: bool = False) -> None:
    headers = [(b"content-type", b"text/plain; charset=utf-8")]
    if retry:
        headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": text.encode() + b"\n"})
