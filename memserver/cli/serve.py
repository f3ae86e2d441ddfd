"""`memserver serve`: its flags (HTTP, HTTP limits, the chat-memory interface) and starting the server.

Logs go to stderr only: in stdio mode stdout is the protocol stream.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memserver.cli.options import DATABASE_HELP, check_database, database_url
from memserver.errors import MemserverError

if TYPE_CHECKING:
    from mcp.server.auth.provider import TokenVerifier

    from memserver.features.chat import ChatOptions
    from memserver.features.tool_sets import ToolSet
    from memserver.transports.limits import HttpLimits
    from memserver.transports.oauth import OAuthSettings


def add_serve_arguments(serve: argparse.ArgumentParser) -> None:
    """The serve command's flags and groups, in the order `memserver serve --help` shows them."""
    serve.add_argument("--http", action="store_true", help="serve streamable HTTP instead of stdio")
    serve.add_argument("--host", help="address to bind with --http (default 127.0.0.1; others need tokens)")
    serve.add_argument("--port", type=int, help="port with --http (default 8000; 0 picks a free one)")
    serve.add_argument(
        "--allowed-host",
        action="append",
        metavar="NAME",
        help="an extra Host name clients use to reach the server (repeatable; needed with --host 0.0.0.0)",
    )
    serve.add_argument(
        "--stateless",
        action="store_true",
        default=None,
        help="with --http: keep no sessions, so several instances behind a load balancer can serve one client "
        "(no subscriptions, logging/setLevel, elicitation or cancellation then; see docs/http.md)",
    )
    serve.add_argument(
        "--sse",
        action="store_true",
        default=None,
        help="with --http: also serve the legacy HTTP+SSE transport (MCP 2024-11-05) at /sse, for older clients",
    )
    serve.add_argument(
        "--ui",
        action="store_true",
        default=None,
        help="with --http: also serve the memory browser at /ui (sign-in with the same tokens; see docs/ui.md)",
    )
    oauth = serve.add_argument_group(
        "OAuth sign-in", "with --http: accept an identity provider's JWT access tokens (see docs/scale-out.md)"
    )
    oauth.add_argument("--oauth-issuer", metavar="URL", help="the issuer (`iss`) whose tokens are accepted")
    oauth.add_argument(
        "--oauth-audience", metavar="AUD", help="the `aud` tokens must name: this server's public URL of /mcp"
    )
    oauth.add_argument("--oauth-jwks-url", metavar="URL", help="the issuer's keys (default: from its metadata)")
    oauth.add_argument(
        "--oauth-algorithms", metavar="ALG,ALG", help="the signature algorithms accepted (default RS256,ES256)"
    )
    oauth.add_argument("--oauth-user-claim", metavar="CLAIM", help="the claim naming the user (default sub)")
    oauth.add_argument(
        "--oauth-introspection-url",
        metavar="URL",
        help="ask the issuer's RFC 7662 endpoint about each token (opaque tokens) instead of checking JWTs here",
    )
    oauth.add_argument("--oauth-client-id", metavar="ID", help="memserver's client id at the introspection endpoint")
    oauth.add_argument(
        "--oauth-client-secret-file",
        metavar="PATH",
        help="a file (mode 600) holding the client's secret (or set MEMSERVER_OAUTH_CLIENT_SECRET)",
    )
    limits = serve.add_argument_group(
        "HTTP limits", "what one client can take from the server (defaults suit a person's or a team's server)"
    )
    from memserver.transports.limits import HttpLimits

    defaults = HttpLimits()
    for flag, kind, meta, text in [
        ("--max-sessions", int, "N", "open sessions in total"),
        ("--max-sessions-per-user", int, "N", "open sessions of one token's user (of the one user without tokens)"),
        ("--session-idle-timeout", float, "SECONDS", "close a session after this long with no request in flight"),
        ("--max-concurrent-requests", int, "N", "requests served at once; more wait for a free slot"),
        (
            "--max-concurrent-requests-per-user",
            int,
            "N",
            "requests of one token's user in progress at once, bodies still arriving included (of the one user "
            "without tokens)",
        ),
        ("--max-incoming-bodies", int, "N", "request bodies received at once (memory: N x --max-body-bytes)"),
        ("--queue-timeout", float, "SECONDS", "how long a request waits for a free slot before a 503 (429 per user)"),
        ("--header-timeout", float, "SECONDS", "time a client has to send a request's headers"),
        ("--body-timeout", float, "SECONDS", "time a client has to send a request's body (408 after)"),
        ("--max-body-bytes", int, "N", "largest request body (413 above)"),
        ("--max-connections", int, "N", "open connections (503 above)"),
    ]:
        field = _LIMIT_FLAGS[flag]
        default = getattr(defaults, field)
        shown = default if isinstance(default, int) else f"{default:g}"
        limits.add_argument(flag, type=kind, metavar=meta, dest=field, help=f"{text} (default {shown})")
    serve.add_argument("--data-dir", help="where memories are stored (default: MCP_MEMORY_PATH or the platform's)")
    serve.add_argument("--database", metavar="URL", help=DATABASE_HELP)
    serve.add_argument(
        "--tools",
        choices=["memory", "chat"],
        default="memory",
        help="memory (default): remember, recall, list_recent, forget; chat: the chat-memory interface "
        "(CleverChatty's): remember(role, message), recall(), search_in_memory(data)",
    )
    # (the defaults are chat.py's, written out: importing chat.py would cost `memserver --help` the MCP SDK's types)
    chat = serve.add_argument_group("chat-memory interface", "with --tools chat (see docs/conversations.md)")
    chat.add_argument("--chat-budget", type=int, metavar="CHARS", help="longest recall() answer (default 4000)")
    chat.add_argument(
        "--chat-idle-minutes",
        type=float,
        metavar="MINUTES",
        help="a message after a pause this long starts a new session (default 30)",
    )
    chat.add_argument("--chat-user-name", metavar="NAME", help="the speaker of the user's messages (default User)")
    chat.add_argument(
        "--chat-assistant-name", metavar="NAME", help="the speaker of the assistant's messages (default Assistant)"
    )
    chat.add_argument(
        "--chat-namespace",
        metavar="NAME",
        help="the namespace the chat's turns are stored in (default chat); recall() and search_in_memory read it "
        "and the curated facts' namespace (default)",
    )
    chat.add_argument(
        "--chat-condense",
        action="store_true",
        default=None,
        help="have the client's model condense recall()'s block, when the client supports MCP sampling",
    )
    serve.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    """Serve MCP over stdio (default) or streamable HTTP; the store loads in the background."""
    import logging
    import os

    from memserver.errors import ConfigError

    # Logs go to stderr only: in stdio mode stdout is the protocol stream.
    level = os.environ.get("MEMSERVER_LOG_LEVEL", "INFO").upper()
    logging.basicConfig(stream=sys.stderr, level=level, format="memserver %(levelname)s %(name)s: %(message)s")
    http_only = [flag for flag, value in _http_flags(args).items() if value is not None]
    if not args.http and http_only:
        raise ConfigError(f"{', '.join(http_only)} apply to --http only")
    chat_only = [flag for flag, value in _chat_flags(args).items() if value not in (None, False)]
    if args.tools != "chat" and chat_only:
        raise ConfigError(f"{', '.join(chat_only)} apply to --tools chat only")
    chat_options = _chat_options(args) if args.tools == "chat" else None
    database = database_url(args)
    if not args.http:
        from memserver.transports import stdio

        fds = stdio.claim_stdio()  # first: nothing imported from here on can write into the protocol stream
        from memserver.server import build_server

        if database:
            check_database(database)
        server = build_server(data_dir=args.data_dir, database=database, tool_set=_tool_set(chat_options))
        stdio.serve_stdio(server, fds)
        return 0
    limits = _http_limits(args)
    from memserver.server import build_server
    from memserver.transports import http
    from memserver.transports.bearer import load_tokens

    tokens = load_tokens()
    oauth = _oauth_settings(args)
    if database:
        check_database(database)
    issuer, ui = sign_in(tokens, limits, oauth, ui=bool(args.ui))
    server = build_server(
        data_dir=args.data_dir,
        per_user=bool(tokens) or oauth is not None,
        load_at_start=True,
        database=database,
        tool_set=_tool_set(chat_options),
    )
    http.serve_http(
        server,
        host=args.host or http.DEFAULT_HOST,
        port=http.DEFAULT_PORT if args.port is None else args.port,
        tokens=tokens,
        allowed_hosts=args.allowed_host or (),
        limits=limits,
        stateless=bool(args.stateless),
        sse=bool(args.sse),
        ui=ui,
        oauth=oauth,
        oauth_verifier=issuer,
    )
    return 0


def _oauth_settings(args: argparse.Namespace) -> OAuthSettings | None:
    from memserver.transports.oauth import oauth_settings

    algorithms = [a.strip() for a in args.oauth_algorithms.split(",") if a.strip()] if args.oauth_algorithms else None
    return oauth_settings(
        args.oauth_issuer,
        args.oauth_audience,
        jwks_url=args.oauth_jwks_url,
        algorithms=algorithms,
        user_claim=args.oauth_user_claim,
        introspection_url=args.oauth_introspection_url,
        client_id=args.oauth_client_id,
        client_secret_file=args.oauth_client_secret_file,
    )


def sign_in(
    tokens: dict[str, str], limits: HttpLimits, oauth: OAuthSettings | None, *, ui: bool
) -> tuple[TokenVerifier | None, Any]:
    """The issuer's one token verifier (None without OAuth) and the memory browser (None without `ui`) checking
    tokens with it: handed both to the HTTP app, /mcp and /ui share its caches and its HTTP client, and the app's
    lifespan closes it once."""
    issuer = None
    if oauth is not None:
        from memserver.transports.oauth import token_verifier

        issuer = token_verifier(oauth)
    return issuer, _browser(tokens, limits, issuer) if ui else None


def _browser(
    tokens: dict[str, str],
    limits: HttpLimits,
    issuer: TokenVerifier | None = None,
    clock: Callable[[], float] = time.time,
) -> Any:
    """The memory browser for `serve --http --ui`: signs people in with the same bearer tokens, and the OAuth
    access tokens `issuer` accepts (each user sees only their own store), with the limits of /mcp. `issuer` is
    the HTTP app's own verifier, not a second one (see sign_in). `clock`: the wall clock sessions end by."""
    from memserver.transports.bearer import StaticTokenVerifier
    from memserver.ui.app import Browser
    from memserver.ui.security import SignIn

    check_token = None
    if tokens or issuer is not None:
        verifier: Any = StaticTokenVerifier(tokens)
        if issuer is not None:
            from memserver.transports.oauth import FirstThatAccepts

            verifier = FirstThatAccepts(verifier, issuer)

        async def check_token(token: str) -> SignIn | None:
            access = await verifier.verify_token(token)
            if access is None or access.client_id is None:
                return None
            return SignIn(access.client_id, access.expires_at)  # the session ends when the token does

    return Browser(
        check_token=check_token,
        concurrent=limits.max_concurrent_requests,
        max_body_bytes=limits.max_body_bytes,
        queue_timeout=limits.queue_timeout,
        clock=clock,
    )


_OAUTH_FLAGS = (
    "issuer",
    "audience",
    "jwks_url",
    "algorithms",
    "user_claim",
    "introspection_url",
    "client_id",
    "client_secret_file",
)

# --serve's HTTP limits: flag -> HttpLimits field (see memserver/transports/limits.py)
_LIMIT_FLAGS = {
    "--max-sessions": "max_sessions",
    "--max-sessions-per-user": "max_sessions_per_user",
    "--session-idle-timeout": "session_idle_timeout",
    "--max-concurrent-requests": "max_concurrent_requests",
    "--max-concurrent-requests-per-user": "max_concurrent_requests_per_user",
    "--max-incoming-bodies": "max_incoming_bodies",
    "--queue-timeout": "queue_timeout",
    "--header-timeout": "header_timeout",
    "--body-timeout": "body_timeout",
    "--max-body-bytes": "max_body_bytes",
    "--max-connections": "max_connections",
}


# --tools chat's options: flag -> chat.ChatOptions field (see memserver/features/chat.py)
_CHAT_FLAGS = {
    "--chat-budget": "budget",
    "--chat-idle-minutes": "idle_minutes",
    "--chat-user-name": "user_name",
    "--chat-assistant-name": "assistant_name",
    "--chat-namespace": "namespace",
    "--chat-condense": "condense",
}


def _chat_flags(args: argparse.Namespace) -> dict[str, object]:
    return {flag: getattr(args, f"chat_{field}") for flag, field in _CHAT_FLAGS.items()}


def _chat_options(args: argparse.Namespace) -> ChatOptions:
    from memserver.errors import ConfigError
    from memserver.features.chat import ChatOptions

    given = {field: getattr(args, f"chat_{field}") for field in _CHAT_FLAGS.values()}
    try:
        return ChatOptions(**{field: value for field, value in given.items() if value is not None})
    except (ValueError, MemserverError) as exc:
        raise ConfigError(f"invalid chat option: {exc}") from None


def _tool_set(chat_options: ChatOptions | None) -> ToolSet:
    from memserver.features import tool_sets

    return tool_sets.MEMORY_TOOLS if chat_options is None else tool_sets.chat_tools(chat_options)


def _http_flags(args: argparse.Namespace) -> dict[str, object]:
    flags = {"--host": args.host, "--port": args.port, "--allowed-host": args.allowed_host}
    flags |= {"--stateless": args.stateless, "--sse": args.sse, "--ui": args.ui}
    flags |= {f"--oauth-{name.replace('_', '-')}": getattr(args, f"oauth_{name}") for name in _OAUTH_FLAGS}
    return flags | {flag: getattr(args, field) for flag, field in _LIMIT_FLAGS.items()}


def _http_limits(args: argparse.Namespace) -> HttpLimits:
    from memserver.errors import ConfigError
    from memserver.transports.limits import HttpLimits

    given = {field: getattr(args, field) for field in _LIMIT_FLAGS.values() if getattr(args, field) is not None}
    try:
        return HttpLimits(**given)
    except ValueError as exc:
        raise ConfigError(f"invalid HTTP limit: {exc}") from None
