"""memserver's own log records, forwarded to MCP clients as `notifications/message` (the logging capability).

Logging is deprecated as of protocol 2026-07-28 (SEP-2577); both eras still have it, with different opt-ins:
  - handshake era (2024-11-05 .. 2025-11-25): `logging/setLevel` sets a connection's level. Records logged while
    serving one of its requests go with that request (on HTTP, on the request's own response stream); after a
    setLevel, records logged outside any request (the store loading in its thread) go to the connection's own
    stream too. Before a setLevel, a request's records at DEFAULT_LEVEL and above go with it.
  - 2026-07-28: no setLevel; a request opts in with `_meta["io.modelcontextprotocol/logLevel"]`, and only records
    logged while serving it, at or above that level, go with it (the spec forbids anything else).

What is forwarded, and what never is:
  - records of memserver's loggers only, less NOT_FORWARDED, and only those memserver logs at all (MEMSERVER_LOG_LEVEL,
    default INFO: a client asking for "debug" gets debug records only if the server logs them). Those loggers never
    log memory content or tokens; the ones that may quote client input (the transports, the metadata columns) are
    not listed. The message text only: no traceback, no exception internals.
  - with one store per user (HTTP with tokens), records logged outside a request go to nobody: they may concern
    another user's store.
  - never a record logged while forwarding (no feedback loop), and never on stdout: records travel as protocol
    notifications through the SDK's session, or stay on stderr.
  - bounded: at most BURST records at once and PER_SECOND on average per server, QUEUE waiting; the rest are
    counted and reported in one "not forwarded" warning.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession

LEVELS: dict[str, int] = {  # MCP's syslog levels on Python's scale
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": 25,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": 60,
    "emergency": 70,
}
DEFAULT_LEVEL = "warning"
# Forwarded: every logger under memserver, but for these and what is under them. Kept out on purpose:
# memserver.local.columns (it may name a value it could not store: user data), memserver.postgres.security (it names
# the database and its role), and the transports and the CLI (about clients and the terminal, not the user's memories).
NOT_FORWARDED = ("memserver.local.columns", "memserver.postgres.security", "memserver.transports", "memserver.cli")


def forwarded(logger: str) -> bool:
    """Whether records of this logger go to clients as notifications/message."""
    if not logger.startswith("memserver."):
        return False
    return not any(logger == name or logger.startswith(name + ".") for name in NOT_FORWARDED)


BURST = 20
PER_SECOND = 10.0
QUEUE = 200
MAX_SESSIONS = 1000  # connections whose level is kept, newest first (HTTP sessions end unannounced)
MAX_DATA_CHARS = 2000

_FORWARDING: contextvars.ContextVar[bool] = contextvars.ContextVar("memserver_log_forwarding", default=False)
_REQUEST: contextvars.ContextVar[tuple[ClientLog, _Route | None] | None] = contextvars.ContextVar(
    "memserver_log_request", default=None
)


@dataclass(eq=False)
class _Route:
    """Where records go: a session, the request they belong to (None: the connection's own stream), from which
    level on; `pending` counts records queued for it, `idle` wakes a request waiting for them to be sent."""

    session: ServerSession
    request_id: types.RequestId | None
    threshold: int
    pending: int = 0
    idle: asyncio.Event = field(default_factory=asyncio.Event)


class ClientLog:
    """Log forwarding for one server lifespan (one per process over HTTP, one per connection over stdio).

    Create it inside the running event loop; `close()` it when the lifespan ends.
    """

    def __init__(self, *, per_user: bool = False) -> None:
        self.per_user = per_user
        self._loop = asyncio.get_running_loop()
        self._levels: dict[str | None, int] = {}  # by connection (handshake era), from logging/setLevel
        self._listeners: dict[str | None, _Route] = {}  # connections that get records logged outside requests
        self._queue: deque[tuple[_Route, types.LoggingMessageNotificationParams]] = deque()
        self._tokens = float(BURST)
        self._refilled = time.monotonic()
        self._dropped = 0  # records not forwarded since the last report of them
        self._dropped_for: _Route | None = None  # the route the last of them was meant for
        self._pump: asyncio.Task[None] | None = None
        _FORWARDER.attach(self)

    def set_level(self, ctx: ServerRequestContext[Any], level: str) -> None:
        """logging/setLevel: this connection's records from `level` on, including those logged outside requests."""
        key = connection_key(ctx)
        _put_newest(self._levels, key, LEVELS[level])
        if not self.per_user:
            _put_newest(self._listeners, key, _Route(ctx.session, None, LEVELS[level]))

    @contextmanager
    def scope(self, ctx: ServerRequestContext[Any]) -> Iterator[_Route | None]:
        """While serving the request in `ctx`, the records logged (in this task or its worker threads) go with it."""
        route = self._request_route(ctx)
        token = _REQUEST.set((self, route) if ctx.request_id is not None else None)
        try:
            yield route
        finally:
            _REQUEST.reset(token)

    async def flush(self, route: _Route | None) -> None:
        """Wait until the records queued for `route` are sent: a request's records go out before its answer, with
        the count of those that were not (the rate limit's), if any."""
        if route is None:
            return
        if route.pending:
            route.idle.clear()
            await route.idle.wait()
        token = _FORWARDING.set(True)
        try:
            await self._report_dropped(route)
        finally:
            _FORWARDING.reset(token)

    def close(self) -> None:
        _FORWARDER.detach(self)
        if self._pump is not None:
            self._pump.cancel()

    # --- from any thread -----------------------------------------------------------------------------------------

    def offer(self, record: logging.LogRecord, route: _Route | None) -> None:
        """Forward `record` along `route`, or (None) to every listening connection."""
        routes = [route] if route is not None else ([] if self.per_user else list(self._listeners.values()))
        routes = [r for r in routes if record.levelno >= r.threshold]
        if not routes:
            return
        params = types.LoggingMessageNotificationParams(
            level=_mcp_level(record.levelno), logger=record.name, data=record.getMessage()[:MAX_DATA_CHARS]
        )
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        for target in routes:
            if running is self._loop:
                self._enqueue(target, params)
            else:
                try:
                    self._loop.call_soon_threadsafe(self._enqueue, target, params)
                except RuntimeError:  # the event loop is closed: the server has stopped
                    return

    # --- in the event loop ---------------------------------------------------------------------------------------

    def _request_route(self, ctx: ServerRequestContext[Any]) -> _Route | None:
        if ctx.request_id is None:  # a notification: nothing to answer, nowhere to send records
            return None
        if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
            meta = (ctx.params or {}).get("_meta")
            level = meta.get(types.LOG_LEVEL_META_KEY) if isinstance(meta, dict) else None
            threshold = LEVELS.get(level) if isinstance(level, str) else None
        else:
            threshold = self._levels.get(connection_key(ctx), LEVELS[DEFAULT_LEVEL])
        return _Route(ctx.session, ctx.request_id, threshold) if threshold is not None else None

    def _enqueue(self, route: _Route, params: types.LoggingMessageNotificationParams) -> None:
        now = time.monotonic()
        self._tokens = min(float(BURST), self._tokens + (now - self._refilled) * PER_SECOND)
        self._refilled = now
        if self._tokens < 1 or len(self._queue) >= QUEUE:
            self._dropped += 1
            self._dropped_for = route
            return
        self._tokens -= 1
        route.pending += 1
        self._queue.append((route, params))
        if self._pump is None:
            self._pump = self._loop.create_task(self._send_queued())

    async def _send_queued(self) -> None:
        _FORWARDING.set(True)  # this task's own context: nothing logged while sending comes back here
        try:
            while self._queue:
                route, params = self._queue.popleft()
                try:
                    await self._send(route, params)
                except Exception:  # the client is gone (stream closed): stop sending it anything
                    self._forget(route)
                finally:
                    route.pending -= 1
                    if not route.pending:
                        route.idle.set()
            if self._dropped_for is not None:
                await self._report_dropped(self._dropped_for)
        finally:
            self._pump = None

    async def _report_dropped(self, route: _Route) -> None:
        """One warning saying how many records were not forwarded (at most one per burst: drains are rate-limited)."""
        if not self._dropped or route.threshold > logging.WARNING:
            return
        count, self._dropped, self._dropped_for = self._dropped, 0, None
        text = f"{count} log record(s) were not forwarded (more than {PER_SECOND:g} a second)"
        try:
            await self._send(route, types.LoggingMessageNotificationParams(level="warning", logger=__name__, data=text))
        except Exception:
            self._forget(route)

    async def _send(self, route: _Route, params: types.LoggingMessageNotificationParams) -> None:
        notification = types.LoggingMessageNotification(params=params)
        await route.session.send_notification(notification, related_request_id=route.request_id)

    def _forget(self, route: _Route) -> None:
        for key, listener in list(self._listeners.items()):
            if listener is route:
                del self._listeners[key]


class _Forwarder(logging.Handler):
    """The one handler on the `memserver` logger: hands each record to the ClientLogs that may want it."""

    def __init__(self) -> None:
        super().__init__()
        self._logs: list[ClientLog] = []
        self._guard = threading.Lock()

    def attach(self, log: ClientLog) -> None:
        with self._guard:
            if not self._logs:
                logging.getLogger("memserver").addHandler(self)
            self._logs.append(log)

    def detach(self, log: ClientLog) -> None:
        with self._guard:
            if log in self._logs:
                self._logs.remove(log)
            if not self._logs:
                logging.getLogger("memserver").removeHandler(self)

    def emit(self, record: logging.LogRecord) -> None:
        if self._alone(record) and logging.lastResort is not None and record.levelno >= logging.lastResort.level:
            logging.lastResort.handle(record)  # what Python does for a program that configured no logging
        if _FORWARDING.get() or not forwarded(record.name):
            return
        try:
            current = _REQUEST.get()
            if current is not None:  # logged while serving a request: it goes with that request or nowhere
                if current[1] is not None:
                    current[0].offer(record, current[1])
                return
            with self._guard:
                logs = list(self._logs)
            for log in logs:
                log.offer(record, None)
        except Exception:  # never let forwarding break the code that logged
            self.handleError(record)

    def _alone(self, record: logging.LogRecord) -> bool:
        """Whether this is the only handler the record meets: then Python would not print it on stderr itself."""
        logger: logging.Logger | None = logging.getLogger(record.name)
        while logger is not None:
            if any(handler is not self for handler in logger.handlers):
                return False
            logger = logger.parent if logger.propagate else None
        return True


_FORWARDER = _Forwarder()


def _put_newest(table: dict[str | None, Any], key: str | None, value: Any) -> None:
    """table[key] = value, keeping the MAX_SESSIONS newest keys."""
    table.pop(key, None)
    table[key] = value
    while len(table) > MAX_SESSIONS:
        del table[next(iter(table))]


def connection_key(ctx: ServerRequestContext[Any]) -> str | None:
    """The connection a handshake-era request belongs to: its HTTP session, by the mcp-session-id header on /mcp
    or the session_id in a legacy SSE POST's URL (each checked by its transport); over stdio there is one."""
    request = ctx.request
    if request is None:
        return None
    session: str | None = request.headers.get("mcp-session-id")
    if session is not None:
        return session
    legacy: str | None = request.query_params.get("session_id")
    return f"sse:{legacy}" if legacy else None


def _mcp_level(levelno: int) -> types.LoggingLevel:
    if levelno >= logging.CRITICAL:
        return "critical"
    if levelno >= logging.ERROR:
        return "error"
    if levelno >= logging.WARNING:
        return "warning"
    return "info" if levelno >= logging.INFO else "debug"
