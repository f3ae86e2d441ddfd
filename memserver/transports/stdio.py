"""MCP over stdin/stdout: one JSON-RPC message per line, what desktop clients spawn.

Every line is checked by wire.inspect() before the SDK's Server.run sees it, so every request gets exactly one
answer: a parse error, an invalid request, a request sent before `initialize`, an over-long line are answered
here; everything else is answered by the SDK. The connection stays open whatever arrives.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
from collections.abc import Awaitable, Callable
from typing import IO, TYPE_CHECKING, Any, Literal

import anyio
import mcp_types as types

from memserver.transports import wire

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.shared.message import SessionMessage

logger = logging.getLogger(__name__)

MAX_LINE_BYTES = 16 * 1024 * 1024  # one JSON-RPC message per line; a remember of the longest content is ~120 KB
DRAIN_SECONDS = 30.0  # on stdin EOF, how long requests already received may take to be answered
_HEAD_BYTES = 512  # what is kept of an over-long line, to find its id


def claim_stdio() -> tuple[int, int] | None:
    """Take stdin and stdout for the protocol: returns private duplicates of fd 0 and fd 1 (the wire), and points
    fd 0 at /dev/null and fd 1 at stderr, so nothing else in this process (a print, a native library writing to
    fd 1, a child process) can read from or write into the protocol stream. Call it before anything else runs.

    POSIX only; returns None on Windows, where the SDK's stdio_server() does its own claim.
    """
    if sys.platform == "win32":
        return None
    import fcntl

    wire_fds = (fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3), fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3))
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire_fds


def serve_stdio(
    server: Server[Any], fds: tuple[int, int] | None = None, *, max_line_bytes: int = MAX_LINE_BYTES
) -> None:
    """Serve one client over stdin/stdout until stdin closes. `fds`: from claim_stdio() (claimed here if None).

    Why not simply `async with mcp.server.stdio.stdio_server() as (r, w)`: the SDK's helper wraps stdin and
    stdout with anyio.wrap_file, so every readline, write and flush hops to a worker thread and back. That is
    three thread hand-offs per request, which cost about half the server's CPU for a ping and several ms of
    latency on a busy machine. Here the pipes are read and written by the event loop itself
    (loop.connect_read_pipe / connect_write_pipe), and the SDK's Server.run gets a read and a write stream that
    work in the task calling them (_WireReader, _WireWriter), not the helper's memory streams with a task at
    their far end (the SDK's dispatcher still relays each inbound message through a task of its own:
    docs/upstream.md). The helper also drops every line it cannot validate without an answer, and on EOF drops
    the requests it has not answered yet; here both are answered.
    Regular files (which asyncio cannot poll) are read and written through worker threads instead; on Windows
    the SDK's helper is used as it is.
    """
    fds = fds or claim_stdio()

    async def main() -> None:
        if fds is None:
            await _serve_sdk_stdio(server)
        elif all(_pollable(fd) for fd in fds):
            reader, writer = await _open_pipes(fds, max_line_bytes)
            await _serve(server, _Pipe(lambda: _read_pipe_line(reader, max_line_bytes), _pipe_writer(writer)))
            writer.close()  # flush what is left, then close
            await writer.wait_closed()
        else:
            wire_in, wire_out = open(fds[0], "rb", 0), open(fds[1], "wb")  # noqa: SIM115 (live as long as we do)
            await _serve(server, _Pipe(_file_line_reader(wire_in, max_line_bytes), _file_writer(wire_out)))

    anyio.run(main)


# --- one connection --------------------------------------------------------------------------------------------


class _Pipe:
    """The wire as two coroutines: the next line (b"" at EOF; an over-long line comes back as `_TooLong`), and
    write one encoded message."""

    def __init__(
        self, read_line: Callable[[], Awaitable[bytes | _TooLong]], write: Callable[[bytes], Awaitable[None]]
    ) -> None:
        self.read_line = read_line
        self.write = write


class _TooLong:
    """An over-long line: its first bytes (for the id), its length, and the limit it broke."""

    def __init__(self, head: bytes, length: int, limit: int) -> None:
        self.head = head
        self.length = length
        self.limit = limit


class _Handshake:
    """Where the connection is in the protocol's lifecycle, as the SDK's runner sees it, so that a request sent
    before `initialize` is told so (the SDK answers -32602 "Invalid request parameters").

    The first request decides the era, as in the SDK (serve_dual_era_loop): one carrying the 2026-07-28 `_meta`
    envelope opens a connection that has no handshake; anything else opens a handshake-era one.
    """

    def __init__(self, server: Server[Any]) -> None:
        self.server = server
        self.era: Literal["unknown", "handshake", "modern"] = "unknown"
        self.initializing: set[str] = set()  # wire.id_key of initialize requests the SDK has not answered yet
        self.abandoned: set[str] = set()  # ... and of those the client cancelled since (the SDK may answer anyway)
        self.initialized = False

    def too_early(self, request: types.JSONRPCRequest) -> bool:
        """Whether `request` comes before the handshake (and is one the SDK would refuse for that). The era is
        settled by the first request passed on to the SDK, not by one refused here."""
        era = self.era
        if era == "unknown":
            modern = request.method != "initialize" and wire.has_modern_envelope(request.params)
            era = "modern" if modern else "handshake"
        early = (
            era == "handshake"
            and not self.initialized
            and not self.initializing  # while an initialize is in flight, the SDK orders what follows behind it
            and request.method not in ("initialize", "ping")
            and self.server.get_request_handler(request.method) is not None  # else the SDK's -32601
        )
        if not early:
            self.era = era
            if request.method == "initialize" and era == "handshake":
                self.initializing.add(wire.id_key(request.id))
        return early

    def cancelled(self, request_id: object) -> None:
        """A cancelled initialize no longer holds back what follows (the SDK may never answer it); if it is answered
        after all, that answer still counts."""
        if isinstance(request_id, str | int) and wire.id_key(request_id) in self.initializing:
            self.initializing.discard(wire.id_key(request_id))
            self.abandoned.add(wire.id_key(request_id))

    def answered(self, message: types.JSONRPCResponse | types.JSONRPCError) -> None:
        if message.id is None:
            return
        key = wire.id_key(message.id)
        if key in self.initializing or key in self.abandoned:
            self.initializing.discard(key)
            self.abandoned.discard(key)
            self.initialized = self.initialized or isinstance(message, types.JSONRPCResponse)


class _InFlight:
    """The requests the SDK has and has not answered yet (by wire.id_key); at EOF we wait for it to empty."""

    def __init__(self) -> None:
        self.ids: set[str] = set()
        self.empty = anyio.Event()
        self.empty.set()

    def __contains__(self, request_id: types.RequestId) -> bool:
        return wire.id_key(request_id) in self.ids

    def add(self, request_id: types.RequestId) -> None:
        self.ids.add(wire.id_key(request_id))
        if self.empty.is_set():
            self.empty = anyio.Event()

    def discard(self, request_id: object) -> None:
        if isinstance(request_id, str | int):
            self.ids.discard(wire.id_key(request_id))
        if not self.ids:
            self.empty.set()

    async def all_answered(self) -> None:
        await self.empty.wait()


NOT_INITIALIZED = "Invalid Request: the session is not initialized; send initialize (then notifications/initialized)"


async def _serve(server: Server[Any], pipe: _Pipe) -> None:
    """Serve one connection: the SDK's Server.run reads the wire through a _WireReader and answers through a
    _WireWriter, both of which work in the task that calls them."""
    pending = _InFlight()  # requests the SDK received and has not answered yet
    handshake = _Handshake(server)
    reader, writer = _WireReader(pipe, pending, handshake), _WireWriter(pipe, pending, handshake)
    await server.run(reader, writer, server.create_initialization_options())


class _WireReader:
    """The SDK's read stream (mcp.shared._stream_protocols.ReadStream), read from the pipe in the task that asks.

    Why not a memory object stream fed by a reader task, as the SDK's stdio helper has it: every message would
    then cross one more task (a hand-off, a wake-up of the loop, ~0.1 ms on a busy 2-core machine; measured in
    benchmarks/README.md, "The stdio path"). A line the SDK must not see is answered here and the next one read.
    At EOF, the requests in flight are given DRAIN_SECONDS to be answered before the stream ends."""

    def __init__(self, pipe: _Pipe, pending: _InFlight, handshake: _Handshake) -> None:
        from mcp.shared.message import SessionMessage  # not at import: claim_stdio() comes before the SDK's imports

        self.pipe, self.pending, self.handshake = pipe, pending, handshake
        self.closed = False
        self.session_message = SessionMessage

    async def receive(self) -> SessionMessage:
        while not self.closed:
            message = await self._next()
            if message is not None:
                return self.session_message(message)
        raise anyio.EndOfStream

    async def _next(self) -> types.JSONRPCMessage | None:
        """The next message for the SDK, or None when the line was answered here (or the stream ended)."""
        line = await self.pipe.read_line()
        if not line:
            self.closed = True
            with anyio.move_on_after(DRAIN_SECONDS):  # EOF: let the requests in flight finish
                await self.pending.all_answered()
            return None
        if isinstance(line, _TooLong):
            reason = f"Invalid Request: the message is longer than {line.limit} bytes"
            await self._answer(wire.refusal(wire.sniff_id(line.head), types.INVALID_REQUEST, reason), line.length)
            return None
        line = line.rstrip(b"\r\n")
        inbound = wire.inspect(line)
        if isinstance(inbound, wire.Refused):
            await self._answer(inbound, len(line))
            return None
        message = inbound.message
        if isinstance(message, types.JSONRPCRequest):
            if message.id in self.pending:
                await self._answer(wire.duplicate(message.id), len(line))
                return None
            if self.handshake.too_early(message):
                await self._answer(wire.refusal(message.id, types.INVALID_REQUEST, NOT_INITIALIZED), len(line))
                return None
            self.pending.add(message.id)
        elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
            cancelled = (message.params or {}).get("requestId")
            self.pending.discard(cancelled)  # a cancelled request gets no answer
            self.handshake.cancelled(cancelled)
        return message

    async def _answer(self, refused: wire.Refused, size: int) -> None:
        wire.log_refused(logger, refused, size)
        await self.pipe.write(refused.answer)

    def __aiter__(self) -> _WireReader:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        self.closed = True

    async def __aenter__(self) -> _WireReader:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _WireWriter:
    """The SDK's write stream (mcp.shared._stream_protocols.WriteStream): each message is encoded and written to
    the pipe by the task that sends it (a handler's), not handed to a writer task (see _WireReader)."""

    def __init__(self, pipe: _Pipe, pending: _InFlight, handshake: _Handshake) -> None:
        self.pipe, self.pending, self.handshake = pipe, pending, handshake
        self.closed = False

    async def send(self, item: SessionMessage, /) -> None:
        if self.closed:
            raise anyio.ClosedResourceError
        message = item.message
        answer = message if isinstance(message, types.JSONRPCResponse | types.JSONRPCError) else None
        if answer is not None:
            self.handshake.answered(answer)
        encoded = wire.encode(message)
        try:
            if encoded is not None:
                await self.pipe.write(encoded)
        except OSError as exc:  # the client closed its end: the SDK drops a broken stream, not an OSError
            raise anyio.BrokenResourceError from exc
        finally:
            if answer is not None:  # answered only once written: at EOF the reader waits for it (see _WireReader)
                self.pending.discard(answer.id)

    async def aclose(self) -> None:
        self.closed = True  # the pipe outlives Server.run: serve_stdio flushes and closes it

    async def __aenter__(self) -> _WireWriter:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# --- pipes, read by the event loop -------------------------------------------------------------------------------


async def _open_pipes(fds: tuple[int, int], limit: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The wire as an asyncio reader and writer, served by the event loop (no threads)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=limit)
    wire_in, wire_out = open(fds[0], "rb", 0), open(fds[1], "wb", 0)  # noqa: SIM115 (the transports close them)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), wire_in)
    # StreamReaderProtocol, not a bare protocol: it gives StreamWriter.wait_closed() what it needs.
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), wire_out
    )
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


def _pipe_writer(writer: asyncio.StreamWriter) -> Callable[[bytes], Awaitable[None]]:
    async def write(data: bytes) -> None:
        writer.write(data + b"\n")
        await writer.drain()

    return write


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on fd: a pipe, a socket or a terminal (a regular file it cannot)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


async def _read_pipe_line(reader: asyncio.StreamReader, limit: int) -> bytes | _TooLong:
    """The next non-empty line (b"" at EOF); an over-long line is skipped to its end and reported as _TooLong."""
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # EOF; a last line without its newline still counts
            return exc.partial
        except asyncio.LimitOverrunError:
            head = bytes(await reader.read(_HEAD_BYTES))
            length = len(head)
            while True:  # drop the rest of the line
                try:
                    length += len(await reader.readuntil(b"\n"))
                    break
                except asyncio.LimitOverrunError as exc:
                    length += len(await reader.readexactly(exc.consumed))
                except asyncio.IncompleteReadError as exc:
                    length += len(exc.partial)
                    break
            return _TooLong(head, length, limit)
        if line.strip():
            return line


# --- regular files, read by worker threads ------------------------------------------------------------------------


def _file_line_reader(wire_in: IO[bytes], limit: int) -> Callable[[], Awaitable[bytes | _TooLong]]:
    def read_line() -> bytes | _TooLong:
        while True:
            line = wire_in.readline(limit + 1)
            if len(line) > limit and not line.endswith(b"\n"):
                head, length = line[:_HEAD_BYTES], len(line)
                while (rest := wire_in.readline(limit)) and not rest.endswith(b"\n"):
                    length += len(rest)
                return _TooLong(head, length + len(rest), limit)
            if not line or line.strip():
                return line

    async def read() -> bytes | _TooLong:
        return await anyio.to_thread.run_sync(read_line)

    return read


def _file_writer(wire_out: IO[bytes]) -> Callable[[bytes], Awaitable[None]]:
    def write_line(data: bytes) -> None:
        wire_out.write(data + b"\n")
        wire_out.flush()

    lock = anyio.Lock()  # handlers' tasks write their own answers: one line at a time, whole

    async def write(data: bytes) -> None:
        async with lock:
            await anyio.to_thread.run_sync(write_line, data)

    return write


async def _serve_sdk_stdio(server: Server[Any]) -> None:
    """Windows: the SDK's own stdio transport (it claims the descriptors itself; lines are not pre-checked)."""
    from mcp.server.stdio import stdio_server

    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())
