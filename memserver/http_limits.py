"""What one HTTP client can take from the server, and what keeps a slow or hostile one from holding it.

    sessions         at most `max_sessions` open, and `max_sessions_per_user` per token's user  -> 503 / 429
    idle sessions    closed after `session_idle_timeout` s with no request in flight           -> then 404
    requests         at most `max_concurrent_requests` POST/DELETE served at once; a request waits
                     up to `queue_timeout` s for a slot                                        -> 503, Retry-After
    request headers  must arrive within `header_timeout` s (uvicorn has no such deadline)      -> connection closed
    request body     must arrive within `body_timeout` s, and be at most `max_body_bytes`     -> 408 / 413
    connections      at most `max_connections` (uvicorn's limit_concurrency)                  -> 503

http_guard.py enforces them. Light on purpose: the CLI reads the defaults for its --help.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import asyncio

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class HttpLimits:
    """The limits of one HTTP server (see the module docstring); the defaults suit a person's or a team's server."""

    max_sessions: int = 256
    max_sessions_per_user: int = 32
    session_idle_timeout: float = 1800.0
    max_concurrent_requests: int = 32
    queue_timeout: float = 10.0
    header_timeout: float = 10.0
    body_timeout: float = 30.0
    max_body_bytes: int = 1024 * 1024  # a remember of the longest content is ~120 KiB of JSON; 1 MiB is plenty
    max_connections: int = 1024

    def __post_init__(self) -> None:
        for name in ("max_sessions", "max_sessions_per_user", "max_concurrent_requests", "max_body_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1")
        for name in ("session_idle_timeout", "queue_timeout", "header_timeout", "body_timeout"):
            if not 0 < getattr(self, name) < float("inf"):
                raise ValueError(f"{name} must be a positive number of seconds")
        if self.max_connections < 2 * self.max_concurrent_requests:
            raise ValueError("max_connections must be at least twice max_concurrent_requests")


# --- sessions ---------------------------------------------------------------------------------------------------


class SessionRegistry:
    """Which user owns each open stateful session (None: no tokens configured)."""

    def __init__(self) -> None:
        self._owners: dict[str, str | None] = {}
        self._per_user: Counter[str | None] = Counter()

    def opened(self, session_id: str, user: str | None) -> None:
        self._owners[session_id] = user
        self._per_user[user] += 1

    def closed(self, session_id: str) -> None:
        if session_id in self._owners:
            user = self._owners.pop(session_id)
            self._per_user[user] -= 1

    def count(self, user: str | None) -> int:
        return self._per_user[user]

    def total(self) -> int:
        return len(self._owners)


# --- slow request headers -----------------------------------------------------------------------------------------


def header_timeout_protocol(seconds: float) -> type[asyncio.Protocol]:
    """uvicorn's h11 protocol with a deadline for a request's line and headers, which uvicorn itself lacks: a
    client that opens a connection and sends its headers a byte at a time (slowloris) is cut off after `seconds`.
    """
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class H11WithHeaderTimeout(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None

        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            super().connection_made(transport)  # type: ignore[arg-type]
            self._arm()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._reading_head():
                self._arm()
            else:
                self._disarm()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

        def _reading_head(self) -> bool:
            return self.cycle is None or self.cycle.response_complete

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(seconds, self._head_timed_out)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_timed_out(self) -> None:
            self._head_timer = None
            if self._reading_head() and not self.transport.is_closing():
                logger.warning("closed a connection that sent no complete request headers within %g s", seconds)
                self.transport.close()

    return H11WithHeaderTimeout
