"""How the server is reached: stdio (what desktop clients spawn) and streamable HTTP (uvicorn), with the HTTP
security settings. The only module that knows about stdio and uvicorn.

HTTP is safe by default:
  - it binds to 127.0.0.1; binding any other address without bearer tokens is refused (ConfigError);
  - DNS-rebinding protection is always on: a foreign Origin gets 403, a Host that is not ours gets 421;
  - a request body over the limit gets 413, before it is parsed;
  - with tokens configured (MEMSERVER_TOKENS and/or MEMSERVER_TOKEN_FILE) every request needs
    `Authorization: Bearer <token>` (401 otherwise); each token names a user, and each user has their own store.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import re
import socket
import stat
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from memserver.errors import ConfigError

if TYPE_CHECKING:
    import mcp_types as types
    from mcp.server.auth.provider import AccessToken
    from mcp.server.lowlevel import Server
    from starlette.applications import Starlette

logger = logging.getLogger(__name__)

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MCP_PATH = "/mcp"
DEFAULT_MAX_BODY_BYTES = 1024 * 1024  # a remember of the longest content is ~40 KiB of JSON; 1 MiB is plenty
MIN_TOKEN_CHARS = 16
_USER_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_TOKEN_HINT = "make one with Python's secrets.token_urlsafe(32)"


# --- stdio ------------------------------------------------------------------------------------------------------


MAX_LINE_BYTES = 16 * 1024 * 1024  # one JSON-RPC message per line; a remember of the longest content is ~60 KB
DRAIN_SECONDS = 30.0  # on stdin EOF, how long requests already received may take to be answered


def claim_stdio() -> tuple[int, int] | None:
    """Take stdin and stdout for the protocol: returns private duplicates of fd 0 and fd 1 (the wire), and points
    fd 0 at /dev/null and fd 1 at stderr, so nothing else in this process (a print, a native library writing to
    fd 1, a child process) can read from or write into the protocol stream. Call it before anything else runs.

    POSIX only; returns None on Windows, where the SDK's stdio_server() does its own claim.
    """
    if sys.platform == "win32":
        return None
    import fcntl

    wire = (fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3), fcntl.fcntl(1, fcntl.F_DUPFD_CLOEXEC, 3))
    sys.stdout.flush()
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    return wire


def serve_stdio(server: Server, wire: tuple[int, int] | None = None) -> None:
    """Serve one client over stdin/stdout until stdin closes. `wire`: from claim_stdio() (claimed here if None).

    Why not simply `async with mcp.server.stdio.stdio_server() as (r, w)`: the SDK's helper wraps stdin and
    stdout with anyio.wrap_file, so every readline, write and flush hops to a worker thread and back. That is
    three thread hand-offs per request, which cost about half the server's CPU for a ping and several ms of
    latency on a busy machine. Here the pipes are read and written by the event loop itself
    (loop.connect_read_pipe / connect_write_pipe), and we feed the SDK's Server.run the same two memory streams
    the helper would. We also log malformed lines instead of dropping them silently, answer an over-long
    message, and on EOF answer the requests already received before exiting (the helper drops them).
    The SDK's helper is still used on Windows and when stdin/stdout are regular files (asyncio cannot poll them).
    """
    import mcp_types as types
    from mcp.shared.message import SessionMessage

    wire = wire or claim_stdio()

    async def main() -> None:
        if wire is None or not all(_pollable(fd) for fd in wire):
            await _serve_sdk_stdio(server, wire)
            return
        reader, writer = await _open_pipes(wire)
        pending: set[types.RequestId] = set()  # requests received and not answered yet
        to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](0)
        to_client, from_server = anyio.create_memory_object_stream[SessionMessage](0)

        async def read_requests() -> None:
            async with to_server:
                while line := await _read_line(reader, writer):
                    try:
                        message = types.jsonrpc_message_adapter.validate_json(line, by_name=False)
                    except ValueError as exc:  # not JSON, or not JSON-RPC: the SDK has no answer for it either
                        logger.warning("ignoring a malformed message (%s): %.200r", exc, line)
                        continue
                    if isinstance(message, types.JSONRPCRequest):
                        pending.add(message.id)
                    elif isinstance(message, types.JSONRPCNotification) and message.method == "notifications/cancelled":
                        pending.discard((message.params or {}).get("requestId"))  # a cancelled request gets no answer
                    await to_server.send(SessionMessage(message))
                with anyio.move_on_after(DRAIN_SECONDS):  # EOF: let the requests in flight finish
                    while pending:
                        await anyio.sleep(0.01)

        async def write_answers() -> None:
            async with from_server:
                async for session_message in from_server:
                    message = session_message.message
                    if isinstance(message, types.JSONRPCResponse | types.JSONRPCError):
                        pending.discard(message.id)
                    writer.write(message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n")
                    await writer.drain()

        async with anyio.create_task_group() as tg:
            tg.start_soon(write_answers)
            async with to_client:
                tg.start_soon(read_requests)
                await server.run(from_client, to_client, server.create_initialization_options())
        writer.close()  # flush what is left, then close
        await writer.wait_closed()

    anyio.run(main)


async def _open_pipes(wire: tuple[int, int]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """The wire as an asyncio reader and writer, served by the event loop (no threads)."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=MAX_LINE_BYTES)
    wire_in, wire_out = open(wire[0], "rb", 0), open(wire[1], "wb", 0)  # noqa: SIM115 (the transports close them)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), wire_in)
    # StreamReaderProtocol, not a bare protocol: it gives StreamWriter.wait_closed() what it needs.
    transport, protocol = await loop.connect_write_pipe(
        lambda: asyncio.StreamReaderProtocol(asyncio.StreamReader()), wire_out
    )
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


def _pollable(fd: int) -> bool:
    """Whether the event loop can wait on fd: a pipe, a socket or a terminal (a regular file it cannot)."""
    mode = os.fstat(fd).st_mode
    return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)


async def _read_line(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    """The next non-empty line (b"" at EOF). An over-long line is skipped and answered with an error."""
    while True:
        try:
            line = await reader.readuntil(b"\n")
        except asyncio.IncompleteReadError as exc:  # EOF; a last line without its newline still counts
            return exc.partial
        except asyncio.LimitOverrunError:
            import mcp_types as types

            head = bytes(await reader.read(256))
            while True:  # drop the rest of the line
                try:
                    await reader.readuntil(b"\n")
                    break
                except asyncio.LimitOverrunError as exc:
                    await reader.readexactly(exc.consumed)
                except asyncio.IncompleteReadError:
                    break
            found = re.search(rb'"id"\s*:\s*("(?:[^"\\]|\\.)*"|-?\d+)', head)
            request_id = json.loads(found.group(1)) if found else None
            logger.error("ignoring a message longer than %d bytes (id %r)", MAX_LINE_BYTES, request_id)
            too_long = types.ErrorData(code=types.INVALID_REQUEST, message=f"message over {MAX_LINE_BYTES} bytes")
            error = types.JSONRPCError(jsonrpc="2.0", id=request_id, error=too_long)
            writer.write(error.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n")
            continue
        if line.strip():
            return line


async def _serve_sdk_stdio(server: Server, wire: tuple[int, int] | None) -> None:
    """The SDK's own stdio transport (worker threads for every read and write), on our claimed descriptors."""
    from mcp.server.stdio import stdio_server

    files = {}
    if wire:  # the process lives as long as the server: these files are never closed
        wire_in = open(wire[0], encoding="utf-8", errors="replace", closefd=False)  # noqa: SIM115
        wire_out = open(wire[1], "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        files = {"stdin": anyio.wrap_file(wire_in), "stdout": anyio.wrap_file(wire_out)}
    async with stdio_server(**files) as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


# --- streamable HTTP ----------------------------------------------------------------------------------------------


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def load_tokens(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Bearer tokens -> user names, from MEMSERVER_TOKENS ("alice:TOKEN,bob:TOKEN") and MEMSERVER_TOKEN_FILE
    (one `user token` per line; blank lines and `#` comments ignored). Empty when neither is set.

    Raises:
        ConfigError: a malformed entry, a bad user name, a short token, or one token given to two users.
    """
    env = os.environ if environ is None else environ
    entries: list[tuple[str, str, str]] = []  # (user, token, where)
    for i, item in enumerate(env.get("MEMSERVER_TOKENS", "").split(",")):
        if not item.strip():
            continue
        user, sep, token = item.strip().partition(":")
        if not sep:
            raise ConfigError(f"MEMSERVER_TOKENS entry {i + 1} is not 'user:token'")
        entries.append((user.strip(), token.strip(), f"MEMSERVER_TOKENS entry {i + 1}"))
    token_file = env.get("MEMSERVER_TOKEN_FILE", "").strip()
    if token_file:
        path = Path(token_file).expanduser()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except OSError as exc:
            raise ConfigError(f"cannot read MEMSERVER_TOKEN_FILE {path}: {exc.strerror or exc}") from None
        for n, line in enumerate(lines, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2:
                raise ConfigError(f"{path} line {n}: expected 'user token'")
            entries.append((parts[0], parts[1], f"{path} line {n}"))

    tokens: dict[str, str] = {}
    folded: dict[str, str] = {}  # user names by lower case: "Alice" and "alice" share a folder on macOS/Windows
    for user, token, where in entries:
        if not _USER_RE.match(user):
            raise ConfigError(f"{where}: user name {user!r} must be 1-32 letters, digits, '_' or '-'")
        if folded.setdefault(user.lower(), user) != user:
            raise ConfigError(
                f"{where}: user names {folded[user.lower()]!r} and {user!r} differ only in case; on a "
                "case-insensitive file system they would share one folder of memories"
            )
        if len(token) < MIN_TOKEN_CHARS:
            raise ConfigError(
                f"{where}: the token of {user!r} is shorter than {MIN_TOKEN_CHARS} characters; {_TOKEN_HINT}"
            )
        if tokens.get(token, user) != user:
            raise ConfigError(f"{where}: the same token is given to {tokens[token]!r} and {user!r}")
        tokens[token] = user
    return tokens


class StaticTokenVerifier:
    """The SDK's TokenVerifier over a fixed token -> user table; the user becomes the AccessToken's client_id."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = dict(tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        user = None
        for known, name in self._tokens.items():  # compare every entry in constant time: no timing oracle
            if hmac.compare_digest(known.encode(), token.encode()):
                user = name
        return AccessToken(token=token, client_id=user, scopes=[]) if user else None


def http_app(
    server: Server,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    tokens: Mapping[str, str] | None = None,
    allowed_hosts: Sequence[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> Starlette:
    """The Starlette app serving `server` at /mcp, with the security settings described in the module docstring.

    `server` must have been built with `per_user=bool(tokens)`.

    Raises:
        ConfigError: a non-loopback host without tokens, or a wildcard host without `allowed_hosts`.
    """
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.transport_security import TransportSecuritySettings

    check_bind(host, tokens, allowed_hosts)
    names = ["127.0.0.1", "localhost", "[::1]", *allowed_hosts]
    if not is_loopback(host) and not _is_wildcard(host):
        names.append(f"[{host}]" if ":" in host else host)
    # Spec (transports, security warning): validate Origin to prevent DNS rebinding; the SDK answers 403 for a
    # foreign Origin and 421 for a Host not listed here. `name:*` matches any port.
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=[f"{name}:*" for name in names] + list(allowed_hosts),
        allowed_origins=[f"{scheme}://{name}:*" for name in names for scheme in ("http", "https")],
    )
    auth_kwargs = {}
    if tokens:
        url_host = f"[{host}]" if ":" in host else host
        auth_kwargs = {
            # A resource server only: no OAuth routes, no token audience (these are static tokens), no scopes.
            "auth": AuthSettings(issuer_url=f"http://{url_host}:{port}", resource_server_url=None),
            "token_verifier": StaticTokenVerifier(tokens),
        }
    return server.streamable_http_app(
        streamable_http_path=MCP_PATH,
        transport_security=security,
        max_request_body_size=max_body_bytes,
        host=host,
        **auth_kwargs,
    )


def check_bind(host: str, tokens: Mapping[str, str] | None, allowed_hosts: Sequence[str] = ()) -> None:
    """Refuse the unsafe combinations, explaining why and what to do instead."""
    if not is_loopback(host) and not tokens:
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
    server: Server,
    *,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    tokens: Mapping[str, str] | None = None,
    allowed_hosts: Sequence[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
) -> None:
    """Serve over streamable HTTP until interrupted. Prints the URL on stderr once listening."""
    import uvicorn

    check_bind(host, tokens, allowed_hosts)
    sock = bind_socket(host, port)
    port = sock.getsockname()[1]
    app = http_app(
        server, host=host, port=port, tokens=tokens, allowed_hosts=allowed_hosts, max_body_bytes=max_body_bytes
    )
    url_host = f"[{host}]" if ":" in host else host
    who = f"bearer tokens for {len(set(tokens.values()))} user(s)" if tokens else "loopback only, no tokens"
    print(f"memserver: serving MCP at http://{url_host}:{port}{MCP_PATH} ({who})", file=sys.stderr, flush=True)
    config = uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=5)
    uvicorn.Server(config).run(sockets=[sock])
