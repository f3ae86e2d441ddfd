"""What one HTTP client can take from the server, and what keeps a slow or hostile one from holding it.

    sessions         at most `max_sessions` open, and `max_sessions_per_user` per token's user  -> 503 / 429
    idle sessions    closed after `session_idle_timeout` s with no request in flight           -> then 404
    requests         at most `max_concurrent_requests` POST/DELETE served at once, and
                     `max_concurrent_requests_per_user` of one token's user (from arrival to answer);
                     a request waits up to `queue_timeout` s for a slot                        -> 503 / 429, Retry-After
    bodies           received before a request takes a server slot, at most `max_incoming_bodies`
                     at once (memory: that many times `max_body_bytes`)                        -> 503, Retry-After
    request headers  must arrive within `header_timeout` s (uvicorn has no such deadline)      -> connection closed
                     (a connection the server ends is closed lingering: the client gets its answer)
    request body     must arrive within `body_timeout` s, and be at most `max_body_bytes`     -> 408 / 413
    connections      at most `max_connections` (uvicorn's limit_concurrency)                  -> 503

guard.py enforces them. Light on purpose: the CLI reads the defaults for its --help.
"""

from __future__ import annotations

import itertools
import logging
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HttpLimits:
    """The limits of one HTTP server (see the module docstring); the defaults suit a person's or a team's server."""

    max_sessions: int = 256
    max_sessions_per_user: int = 32
    session_idle_timeout: float = 1800.0
    max_concurrent_requests: int = 32
    max_concurrent_requests_per_user: int = 8
    max_incoming_bodies: int = 64
    queue_timeout: float = 10.0
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_body_bytes: int = 1024 * 1024  # a remember of the longest content is ~120 KiB of JSON; 1 MiB is plenty
    max_connections: int = 1024

    def __post_init__(self) -> None:
        counts = ("max_sessions", "max_sessions_per_user", "max_concurrent_requests", "max_body_bytes")
        for name in (*counts, "max_concurrent_requests_per_user", "max_incoming_bodies"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("session_idle_timeout", "queue_timeout", "header_timeout", "body_timeout"):
            if not 0 < getattr(self, name) < float("inf"):
                raise ValueError(f"{name} must be a positive number of seconds")
        if self.max_connections < 2 * self.max_concurrent_requests:
            raise ValueError("max_connections must be at least twice max_concurrent_requests")


# --- sessions ---------------------------------------------------------------------------------------------------


class SessionRegistry:
    """Which user owns each open stateful session (None: no tokens configured), of both HTTP transports, and the
    places held for sessions being opened."""

    def __init__(self) -> None:
        self._owners: dict[str, str | None] = {}
        self._per_user: Counter[str | None] = Counter()
        self._holds = itertools.count()

    def opened(self, session_id: str, user: str | None, held: str | None = None) -> None:
        """`session_id` of `user` is open; in the place `held` (see hold()) if given and still held."""
        if held is not None and held in self._owners:
            self._owners[session_id] = self._owners.pop(held)
            return
        self._owners[session_id] = user
        self._per_user[user] += 1

    def hold(self, user: str | None) -> str:
        """Count a session of `user` that is being opened, at once (so two opening requests cannot both pass a
        cap); opened(..., held=) makes it the session, closed() gives the place back if it never opened."""
        key = f"opening-{next(self._holds)}"
        self.opened(key, user)
        return key

    def closed(self, session_id: str) -> None:
        if session_id in self._owners:
            user = self._owners.pop(session_id)
            self._per_user[user] -= 1

    def count(self, user: str | None) -> int:
        return self._per_user[user]

    def total(self) -> int:
        return len(self._owners)


# --- the connection itself: slow request headers, and closing without losing the answer ------------------------

LINGER_SECONDS = 2.0  # how long a connection the server closes keeps discarding what the client still sends


def h11_protocol(header_timeout: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with two additions uvicorn lacks.

    A deadline for a request's line and headers: a client that opens a connection and sends its headers a byte at
    a time (slowloris) is cut off after `header_timeout` seconds.

    A lingering close: when the server ends a connection whose client is still sending its body (one refused with
    408 or 413 before it was read), a plain close makes the kernel answer the unread bytes with a reset, and the
    client may lose the answer it was sent (test_e2e_limits' slowloris body, about one run in three). So such a
    connection is half-closed (the client reads the answer, then end of stream), what still arrives is discarded,
    and it is closed after LINGER_SECONDS. Any other connection is closed at once, as before.
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedH11(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _lingering: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(_Lingering(transport, self._linger))  # type: ignore[arg-type]
            self._arm()

        def data_received(self, data: bytes) -> None:
            if self._lingering is not None:
                return  # the answer is sent; what the client still sends is dropped
            super().data_received(data)
            if self._reading_head():
                self._arm()
            else:
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            if self._lingering is not None:
                self._lingering.cancel()
            super().connection_lost(exc)

        def _linger(self, transport: asyncio.Transport) -> bool:
            """Close lingering if the client is still sending its request (True), else not at all (False)."""
            import h11

            if self.conn.their_state is not h11.SEND_BODY:
                return False
            if self._lingering is None:
                transport.write_eof()  # after what is buffered: the answer, then end of stream
                transport.resume_reading()  # keep draining (uvicorn may have paused), so no unread bytes pile up
                self._lingering = self.loop.call_later(LINGER_SECONDS, transport.close)
            return True

        def _reading_head(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(header_timeout, self._head_timed_out)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self._reading_head() and not self.transport.is_closing():
                logger.warning("closed a connection that sent no complete request headers within %g s", header_timeout)
                self.transport.close()

    return GuardedH11


class _Lingering:
    """The connection's transport as uvicorn sees it, whose close() is a lingering close (see h11_protocol)."""

    def __init__(self, inner: asyncio.BaseTransport, linger: Callable[[asyncio.Transport], bool]) -> None:
        self._inner = inner
        self._linger = linger
        self._closing = False

    def close(self) -> None:
        import asyncio

        if self._closing:
            return
        self._closing = True
        inner = self._inner
        lingered = (
            isinstance(inner, asyncio.Transport)
            and inner.can_write_eof()
            and not inner.is_closing()
            and self._linger(inner)
        )
        if not lingered:
            inner.close()

    def is_closing(self) -> bool:
        return self._closing or self._inner.is_closing()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
