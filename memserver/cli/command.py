"""The `memserver` command: parse arguments, call the library, print results.

Library errors (MemserverError) become one line on stderr and exit status 1, never a traceback.
Heavy modules are imported inside each command, so `memserver --help` and the server's start-up stay fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from memserver import __version__
from memserver.errors import MemserverError

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend
    from memserver.features.chat import ChatOptions
    from memserver.server import ToolSet
    from memserver.transports.limits import HttpLimits

# --- model commands (owned by the embedder/model work) -------------------------------------------------------


# sentence-transformers' embeddings of 40 texts, shipped inside the package (memserver/data/) so that an installed
# wheel can verify its model too.
REFERENCE_DATA = "minilm-reference.json"
FIDELITY_THRESHOLD = 0.99999


def cmd_model(args: argparse.Namespace) -> int:
    """memserver model fetch | verify | info."""
    import json
    from importlib import resources
    from pathlib import Path

    from memserver.embedding import sources
    from memserver.embedding.embedder import Embedder

    embedder = Embedder(args.model_dir).load()  # resolves, caches, and checks the model's interface
    files = embedder.files
    assert files is not None
    if args.action == "fetch":
        for reason in files.tried:
            print(f"  passed over: {reason}", file=sys.stderr)
        print(f"{sources.MODEL_ID}: {files.detail}")
        print(f"  model.onnx      {files.model}")
        print(f"  tokenizer.json  {files.tokenizer}")
        return 0
    if args.action == "info":
        info = {
            "model_id": sources.MODEL_ID,
            "source": files.source,
            "detail": files.detail,
            "dir": str(files.directory),
            "files": {
                path.name: {"path": str(path), "bytes": path.stat().st_size, "sha256": sources.sha256_file(path)}
                for path in (files.model, files.tokenizer)
            },
            "graph": describe_graph(embedder.graph),
            "dim": embedder.dim,
            "max_seq_length": embedder.max_seq_length,
            "hub_revision": sources.HUB_REVISION,
            "threads": embedder.threads,
            "query_cache_entries": embedder.query_cache.max_entries,
        }
        print(json.dumps(info, indent=2))
        return 0
    # verify: the reference texts against sentence-transformers' vectors
    import numpy as np

    packaged = resources.files("memserver.embedding") / "data" / REFERENCE_DATA
    path = args.reference or str(packaged)
    try:
        source = Path(args.reference) if args.reference else packaged
        items = json.loads(source.read_text(encoding="utf-8"))["items"]
    except (OSError, ValueError, KeyError) as exc:
        raise MemserverError(f"cannot read the reference embeddings {path}: {exc}; pass --reference FILE") from exc
    expected = np.array([item["embedding"] for item in items], dtype=np.float64)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    cosines = (embedder.embed([item["text"] for item in items]).astype(np.float64) * expected).sum(axis=1)
    worst = int(np.argmin(cosines))
    ok = cosines.min() >= FIDELITY_THRESHOLD
    print(
        f"{'ok' if ok else 'FAILED'}: min cosine {cosines.min():.8f} (text {worst}), mean {cosines.mean():.10f} "
        f"over {len(items)} reference texts; threshold {FIDELITY_THRESHOLD}; model {files.model}"
    )
    return 0 if ok else 1


def describe_graph(metadata: dict[str, str]) -> dict[str, object]:
    """What `model info` says about the ONNX graph in use, from the metadata memserver.embedding.onnx_export stamps."""
    from memserver.embedding.onnx_export import FUSED_OPS, GRAPH_KEY, GRAPH_VERSION, VERSION_KEY

    if VERSION_KEY not in metadata:
        return {
            "name": "unstamped",
            "version": None,
            "note": "not stamped by memserver.onnx_export: the Hub's onnx/model.onnx, or graph version 1 converted "
            "before the stamp existed; standard operators, which onnxruntime optimises on load",
        }
    name = metadata.get(GRAPH_KEY, "")
    return {
        "name": name,
        "version": int(metadata[VERSION_KEY]),
        "current_version": GRAPH_VERSION,
        "fused_ops": [f"com.microsoft.{op}" for op in FUSED_OPS] if name == "fused" else [],
    }


def cmd_embed(args: argparse.Namespace) -> int:
    """memserver embed TEXT...: print each text's word pieces and embedding as JSON."""
    import json

    from memserver.embedding.embedder import Embedder

    embedder = Embedder(args.model_dir)
    vectors = embedder.embed(args.texts)
    items = [
        {"text": text, "tokens": embedder.tokenize(text), "embedding": vector.tolist()}
        for text, vector in zip(args.texts, vectors, strict=True)
    ]
    print(json.dumps({"model": embedder.model_name, "dim": embedder.dim, "items": items}, ensure_ascii=False))
    return 0


# --- server commands (owned by the server work) ----------------------------------------------------------------


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
    database = _database(args)
    if not args.http:
        from memserver.transports import stdio

        fds = stdio.claim_stdio()  # first: nothing imported from here on can write into the protocol stream
        from memserver.server import build_server

        if database:
            _check_database(database)
        server = build_server(data_dir=args.data_dir, database=database, tool_set=_tool_set(chat_options))
        stdio.serve_stdio(server, fds)
        return 0
    limits = _http_limits(args)
    from memserver.server import build_server
    from memserver.transports import http
    from memserver.transports.bearer import load_tokens

    tokens = load_tokens()
    if database:
        _check_database(database)
    server = build_server(
        data_dir=args.data_dir,
        per_user=bool(tokens),
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
    )
    return 0


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
    from memserver import server

    return server.MEMORY_TOOLS if chat_options is None else server.chat_tools(chat_options)


def _http_flags(args: argparse.Namespace) -> dict[str, object]:
    flags = {"--host": args.host, "--port": args.port, "--allowed-host": args.allowed_host}
    flags |= {"--stateless": args.stateless, "--sse": args.sse}
    return flags | {flag: getattr(args, field) for flag, field in _LIMIT_FLAGS.items()}


def _http_limits(args: argparse.Namespace) -> HttpLimits:
    from memserver.errors import ConfigError
    from memserver.transports.limits import HttpLimits

    given = {field: getattr(args, field) for field in _LIMIT_FLAGS.values() if getattr(args, field) is not None}
    try:
        return HttpLimits(**given)
    except ValueError as exc:
        raise ConfigError(f"invalid HTTP limit: {exc}") from None


def cmd_demo(args: argparse.Namespace) -> int:
    """Store five sample memories and recall "what should I read next?" through a real MCP session."""
    from memserver.cli.demo import run_demo

    return run_demo(args.data_dir)


# --- store commands: look after the memories on disk -------------------------------------------------------------


def _database(args: argparse.Namespace) -> str | None:
    """--database, else MEMSERVER_DATABASE_URL: a postgresql:// URL, or None for the local store."""
    from memserver import config

    return getattr(args, "database", None) or config.database_url()


def _check_database(url: str) -> None:
    """Fail at start, in one line naming the server, when the database cannot be reached."""
    from memserver.engines import check_database

    check_database(url)


def open_store(args: argparse.Namespace) -> MemoryBackend:
    """The store the command's --data-dir, --collection and --database name (the one place the CLI opens one)."""
    from memserver.engines import open_backend  # lazily: an engine loads numpy, hnswlib, ...

    return open_backend(args.data_dir, args.collection, database=_database(args))


def cmd_db(args: argparse.Namespace) -> int:
    """memserver db migrate: create or upgrade memserver's schema in a PostgreSQL database; db stats: its figures."""
    import logging

    from memserver.engines import database_stats, migrate_database
    from memserver.errors import ConfigError

    url = _database(args)
    if not url:
        raise ConfigError(f"memserver db {args.action} needs --database URL (or MEMSERVER_DATABASE_URL)")
    if args.action == "stats":
        import json

        print(json.dumps(database_stats(url), indent=2, ensure_ascii=False))
        return 0
    # A re-index of the keyword terms (postgres/analyzer.py) logs its progress: show it on stderr.
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="memserver %(levelname)s %(name)s: %(message)s")
    applied, version = migrate_database(url)
    print(f"schema version {version}" + (f" ({applied} migration(s) applied)" if applied else " (already current)"))
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    """Print the collection's stats as JSON."""
    import json

    with open_store(args) as store:
        print(json.dumps(store.stats(), indent=2, ensure_ascii=False))
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    """Write every memory as one JSON line, oldest first (to stdout or --output)."""
    import json

    out = open(args.output, "w", encoding="utf-8") if args.output else sys.stdout  # noqa: SIM115
    count = 0
    try:
        with open_store(args) as store:
            for record in store.export(include_vectors=args.vectors):
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
                count += 1
    finally:
        if out is not sys.stdout:
            out.close()
    print(f"exported {count} memories", file=sys.stderr)
    return 0


def cmd_import(args: argparse.Namespace) -> int:
    """Add the memories of a JSON-lines export; known ids and duplicate content are skipped."""
    import json

    from memserver.errors import InvalidInputError

    def records(lines: Iterable[str]) -> Iterator[dict[str, Any]]:
        """Parse lazily, with progress on stderr: an import of 100k memories takes a while."""
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise InvalidInputError(f"line {number} of the import is not JSON: {exc.msg}") from None
            if number % 1000 == 0:
                print(f"\rread {number} records ...", end="", file=sys.stderr, flush=True)

    source = sys.stdin if args.file == "-" else open(args.file, encoding="utf-8")  # noqa: SIM115
    try:
        with open_store(args) as store:
            added = store.import_(records(source))
    finally:
        if source is not sys.stdin:
            source.close()
    print(f"\rimported {added} new memories", file=sys.stderr)
    return 0


def cmd_compact(args: argparse.Namespace) -> int:
    """Rewrite the journal without deleted memories and rebuild the index."""
    import json

    with open_store(args) as store:
        print(json.dumps(store.compact(), indent=2))
    return 0


# --- the parser -------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memserver",
        description="A local MCP server that gives any MCP client a long-term memory it can search by meaning.",
    )
    parser.add_argument("--version", action="version", version=f"memserver {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    model_cmd = commands.add_parser(
        "model",
        help="fetch, verify or describe the embedding model",
        description="Find the all-MiniLM-L6-v2 files (and cache them), check them against sentence-transformers, "
        "or describe them. Example: memserver model verify",
    )
    model_cmd.add_argument("action", choices=["fetch", "verify", "info"])
    model_cmd.add_argument("--model-dir", metavar="DIR", help="folder with model.onnx + tokenizer.json")
    model_cmd.add_argument(
        "--reference", metavar="FILE", help="reference embeddings for verify (default: the copy in the package)"
    )
    model_cmd.set_defaults(func=cmd_model)

    embed_cmd = commands.add_parser(
        "embed",
        help="print the word pieces and embeddings of texts as JSON",
        description='Embed texts and print JSON. Example: memserver embed "hello world"',
    )
    embed_cmd.add_argument("texts", nargs="+", metavar="TEXT")
    embed_cmd.add_argument("--model-dir", metavar="DIR", help="folder with model.onnx + tokenizer.json")
    embed_cmd.set_defaults(func=cmd_embed)

    # (each area adds its sub-commands here)

    # -- server commands
    serve = commands.add_parser(
        "serve",
        help="run the MCP server (stdio by default; this is also what bare `memserver` does)",
        description="Run the MCP server over stdio (what desktop clients spawn) or, with --http, over streamable "
        "HTTP at http://HOST:PORT/mcp. Environment: MCP_MEMORY_PATH, MCP_MEMORY_COLLECTION, MEMSERVER_TOKENS, "
        "MEMSERVER_TOKEN_FILE, MEMSERVER_LOG_LEVEL.",
        epilog="Example: memserver serve --http --port 8000",
    )
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
        "(no subscriptions, logging/setLevel, elicitation or cancellation then; see the README)",
    )
    serve.add_argument(
        "--sse",
        action="store_true",
        default=None,
        help="with --http: also serve the legacy HTTP+SSE transport (MCP 2024-11-05) at /sse, for older clients",
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
    chat = serve.add_argument_group("chat-memory interface", "with --tools chat (see the README's Chat memory)")
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
    chat.add_argument("--chat-namespace", metavar="NAME", help="the namespace the chat reads and writes")
    chat.add_argument(
        "--chat-condense",
        action="store_true",
        default=None,
        help="have the client's model condense recall()'s block, when the client supports MCP sampling",
    )
    serve.set_defaults(func=cmd_serve)

    demo = commands.add_parser(
        "demo",
        help="store five sample memories and recall 'what should I read next?'",
        description="Start the server, store five sample memories through MCP and recall "
        "'what should I read next?', printing the top three with scores.",
        epilog="Example: uv run memserver demo",
    )
    demo.add_argument("--data-dir", help="keep the demo's memories here (default: a temporary directory)")
    demo.set_defaults(func=cmd_demo)

    # -- store commands
    def store_command(
        name: str, func: Callable[[argparse.Namespace], int], help: str, example: str
    ) -> argparse.ArgumentParser:
        sub = commands.add_parser(
            name, help=help, description=help[0].upper() + help[1:] + ".", epilog=f"Example: {example}"
        )
        sub.add_argument("--data-dir", help="data directory (default: MCP_MEMORY_PATH or the platform's)")
        sub.add_argument("--collection", help="collection (default: MCP_MEMORY_COLLECTION or personal_memory)")
        sub.add_argument("--database", metavar="URL", help=DATABASE_HELP)
        sub.set_defaults(func=func)
        return sub

    store_command(
        "stats", cmd_stats, "print the number of memories, paths, model and index parameters", "memserver stats"
    )
    export = store_command(
        "export", cmd_export, "write every memory as JSON lines, oldest first", "memserver export -o backup.jsonl"
    )
    export.add_argument("-o", "--output", help="file to write (default: stdout)")
    export.add_argument("--vectors", action="store_true", help="include the vectors (import then skips embedding)")
    importer = store_command(
        "import", cmd_import, "add the memories of a JSON-lines export", "memserver import backup.jsonl"
    )
    importer.add_argument("file", help="a JSON-lines file from `memserver export`, or - for stdin")
    store_command(
        "compact",
        cmd_compact,
        "rewrite the journal without deleted memories and rebuild the index",
        "memserver compact",
    )

    # -- the memories themselves, for the people whose memories they are (cli_memories.py)
    from memserver.cli import memories

    memories.add_commands(store_command)

    db = commands.add_parser(
        "db",
        help="manage memserver's schema in a PostgreSQL database",
        description="migrate: create or upgrade memserver's tables in a PostgreSQL database (pgvector >= 0.8). "
        "Servers also do this on start; run it ahead, as the tables' owner, when memserver itself connects as a "
        "smaller role. stats: the whole database's figures, every tenant (`memserver stats` and memory://stats "
        "show one collection's).",
        epilog="Example: memserver db migrate --database postgresql://memserver@db.internal/memories",
    )
    db.add_argument("action", choices=["migrate", "stats"])
    db.add_argument("--database", metavar="URL", help=DATABASE_HELP)
    db.set_defaults(func=cmd_db)

    return parser


DATABASE_HELP = (
    "keep the memories in this PostgreSQL database (postgresql://user@host/db; default: MEMSERVER_DATABASE_URL; "
    "needs memserver[postgres])"
)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:  # bare `memserver` is what desktop clients spawn: serve over stdio
        args = parser.parse_args(["serve", *(argv or [])])
    try:
        return int(args.func(args) or 0)
    except MemserverError as exc:
        print(f"memserver: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
