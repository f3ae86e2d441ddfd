"""The `memserver` command: parse arguments, call the library, print results.

Library errors (MemserverError) become one line on stderr and exit status 1, never a traceback; the store's input
errors name flags, not fields (wording.py). What the store warns about (a damaged checkpoint rebuilt, ...) is a line
on stderr starting "memserver: " too, in the commands that configure no logging of their own (all but serve, ui and
db migrate, whose log lines carry the level and the logger). An unknown flag prints the subcommand's usage and the
nearest flag. Heavy modules are imported inside each command, so `memserver --help` and the server's start-up stay fast.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable, Sequence

from memserver import __version__
from memserver.cli import serve
from memserver.errors import InvalidInputError, MemserverError

StoreCommand = Callable[[str, Callable[[argparse.Namespace], int], str, str], argparse.ArgumentParser]
STDIO_HINT = (
    "memserver: serving MCP over stdio (what MCP clients start); for the commands see `memserver --help`, "
    "to try it `memserver demo`; Ctrl-D ends"
)


def build_parser(*, serve_only: bool = False) -> argparse.ArgumentParser:
    """The whole command line; `serve_only`: just `memserver serve`, which is what MCP clients spawn, so that their
    start-up imports none of the other commands' modules."""
    parser = argparse.ArgumentParser(
        prog="memserver",
        description="A local MCP server that gives any MCP client a long-term memory it can search by meaning.",
    )
    parser.add_argument("--version", action="version", version=f"memserver {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    if serve_only:
        _add_serve(commands)
    else:
        _add_commands(commands)
    for sub in commands.choices.values():  # an unknown flag: this command's usage (main)
        sub.set_defaults(subparser=sub)
    return parser


def _add_serve(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    serve_cmd = commands.add_parser(
        "serve",
        help="run the MCP server (stdio by default; this is also what bare `memserver` does)",
        description="Run the MCP server over stdio (what desktop clients spawn) or, with --http, over streamable "
        "HTTP at http://HOST:PORT/mcp. Environment: MCP_MEMORY_PATH, MCP_MEMORY_COLLECTION, MEMSERVER_TOKENS, "
        "MEMSERVER_TOKEN_FILE, MEMSERVER_LOG_LEVEL.",
        epilog="Example: memserver serve --http --port 8000",
    )
    serve.add_serve_arguments(serve_cmd)


def _add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    # Imported here, not at the top: `memserver serve` needs none of them (build_parser's serve_only).
    from memserver.cli import admin, care, consolidate, editing, listing, memories, recall
    from memserver.cli.demo import cmd_demo
    from memserver.cli.options import DATABASE_HELP, add_store_options
    from memserver.cli.ui import add_ui_command

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
    model_cmd.set_defaults(func=admin.cmd_model)

    embed_cmd = commands.add_parser(
        "embed",
        help="print the word pieces and embeddings of texts as JSON",
        description='Embed texts and print JSON. Example: memserver embed "hello world"',
    )
    embed_cmd.add_argument("texts", nargs="+", metavar="TEXT")
    embed_cmd.add_argument("--model-dir", metavar="DIR", help="folder with model.onnx + tokenizer.json")
    embed_cmd.set_defaults(func=admin.cmd_embed)

    _add_serve(commands)

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
        add_store_options(sub)
        sub.set_defaults(func=func)
        return sub

    stats = store_command(
        "stats", admin.cmd_stats, "print the number of memories, paths, model and index parameters", "memserver stats"
    )
    stats.add_argument("--json", action="store_true", help="as one JSON object")
    export = store_command(
        "export", admin.cmd_export, "write every memory as JSON lines, oldest first", "memserver export -o backup.jsonl"
    )
    export.add_argument("-o", "--output", help="file to write (default: stdout)")
    export.add_argument("--vectors", action="store_true", help="include the vectors (import then skips embedding)")
    importer = store_command(
        "import", admin.cmd_import, "add the memories of a JSON-lines export", "memserver import backup.jsonl"
    )
    importer.add_argument("file", help="a JSON-lines file from `memserver export`, or - for stdin; with --from, PATH")
    care.add_import_options(importer)
    store_command(
        "compact",
        admin.cmd_compact,
        "rewrite the journal without deleted memories and rebuild the index",
        "memserver compact",
    )

    # -- the memories themselves, for the people whose memories they are
    for module in (recall, listing, memories, editing):
        module.add_commands(store_command)

    # -- tending a store over the years: doctor, overview, backup, restore (care.py)
    care.add_commands(store_command)
    consolidate.add_command(store_command)
    add_ui_command(commands)

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
    db.set_defaults(func=admin.cmd_db)


class _Warnings(logging.Handler):
    """Python's handler of last resort (a program that configured no logging: the record's bare message on stderr),
    with the prefix every line the CLI prints to stderr starts with."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(f"memserver: {self.format(record)}\n")  # (the stderr of now: a test may swap it)
        except Exception:
            self.handleError(record)


def main(argv: Sequence[str] | None = None) -> int:
    last_resort, logging.lastResort = logging.lastResort, _Warnings()
    try:
        return _main(argv)
    finally:
        logging.lastResort = last_resort


def _main(argv: Sequence[str] | None) -> int:
    given = list(sys.argv[1:] if argv is None else argv)
    serve_only = not given or given[0] == "serve"  # what MCP clients spawn: its start-up is part of the product
    if not serve_only:
        from memserver.cli import editing

        given = editing.retag_argv(given)
    parser = build_parser(serve_only=serve_only)
    args, extra = parser.parse_known_args(given)
    if args.command is None:  # bare `memserver` is what desktop clients spawn: serve over stdio
        if sys.stdin.isatty():
            print(STDIO_HINT, file=sys.stderr)
        args, extra = parser.parse_known_args(["serve", *given])
    if extra:
        from memserver.cli import wording

        sub = getattr(args, "subparser", parser)
        sub.error(wording.unknown_arguments(sub, extra))
    try:
        return int(args.func(args) or 0)
    except InvalidInputError as exc:
        from memserver.cli import wording

        print(f"memserver: error: {wording.in_flags(str(exc))}", file=sys.stderr)
        return 1
    except MemserverError as exc:
        print(f"memserver: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `memserver list | head`: the reader has what it wanted
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
