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

import hmac
import ipaddress
import logging
import os
import re
import socket
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import anyio

from memserver.errors import ConfigError

if TYPE_CHECKING:
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
_TOKEN_HINT = "make one with: python -c 'import secrets; print(secrets.token_urlsafe(32))'"


# --- stdio ------------------------------------------------------------------------------------------------------


def serve_stdio(server: Server) -> None:
    """Serve one client over stdin/stdout until stdin closes.

    The SDK's stdio_server() keeps the protocol on a private duplicate of fd 1 and points fd 1 itself at stderr
    (and fd 0 at /dev/null) while serving. The store and its native libraries (onnxruntime, hnswlib) are only
    imported after that, in the background loader the server's lifespan starts, so nothing they print can
    reach the protocol stream.
    """
    from mcp.server.stdio import stdio_server

    async def main() -> None:
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())

    anyio.run(main)


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
    for user, token, where in entries:
        if not _USER_RE.match(user):
            raise ConfigError(f"{where}: user name {user!r} must be 1-32 letters, digits, '_' or '-'")
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
