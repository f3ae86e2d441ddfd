"""A client-side deadline for database calls: a server that stops answering (frozen, or a partition the kernel has
not noticed yet) must not block a tool call forever.

The server's own statement_timeout covers slow statements, and TCP keepalives a dead peer, but neither helps when
the server process is stopped while its host still acknowledges packets. So every call registers its connection
here with a deadline; one daemon thread shuts the socket down when a deadline passes, which makes the blocked
libpq read fail at once (psycopg raises OperationalError and marks the connection broken, and the pool drops it).
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import logging
import os
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import psycopg

log = logging.getLogger(__name__)

__all__ = ["Watchdog"]


class Watchdog:
    """Deadlines for calls on connections (`with watchdog.guard(conn) as call: ...; call["expired"]`)."""

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._calls: dict[int, tuple[psycopg.Connection[Any], dict[str, bool]]] = {}
        self._ids = itertools.count()
        self._thread: threading.Thread | None = None

    @contextlib.contextmanager
    def guard(self, conn: psycopg.Connection[Any]) -> Iterator[dict[str, bool]]:
        """Watch `conn` until the block ends; the yielded dict's "expired" says whether the deadline cut it."""
        state = {"expired": False}
        token = next(self._ids)
        with self._cond:
            self._calls[token] = (conn, state)
            heapq.heappush(self._heap, (time.monotonic() + self.timeout, token))
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="memserver-pg-watchdog", daemon=True)
                self._thread.start()
            self._cond.notify()
        try:
            yield state
        finally:
            with self._cond:
                self._calls.pop(token, None)

    def _watch(self) -> None:
        while True:
            with self._cond:
                while self._heap and self._heap[0][1] not in self._calls:
                    heapq.heappop(self._heap)  # finished in time
                if not self._heap:
                    self._cond.wait()
                    continue
                deadline, token = self._heap[0]
                wait = deadline - time.monotonic()
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                heapq.heappop(self._heap)
                conn, state = self._calls.pop(token)
                state["expired"] = True
            log.warning("a PostgreSQL call passed its %.0f s deadline; closing its connection", self.timeout)
            _shut(conn)


def _shut(conn: psycopg.Connection[Any]) -> None:
    """Shut the connection's socket down under the thread blocked on it (a duplicate fd: libpq keeps its own)."""
    with contextlib.suppress(Exception):
        fd = os.dup(conn.pgconn.socket)
        with socket.socket(fileno=fd) as sock:
            sock.shutdown(socket.SHUT_RDWR)
