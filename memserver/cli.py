"""The `memserver` command: parse arguments, call the library, print results.

Library errors (MemserverError) become one line on stderr and exit status 1, never a traceback.
Heavy modules are imported inside each command, so `memserver --help` and the server's start-up stay fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from memserver import __version__
from memserver.errors import MemserverError

# --- model commands (owned by the embedder/model work) -------------------------------------------------------


def cmd_model(args: argparse.Namespace) -> int:
    raise NotImplementedError("memserver model")


def cmd_embed(args: argparse.Namespace) -> int:
    raise NotImplementedError("memserver embed")


# --- server commands (owned by the server work) ----------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    raise NotImplementedError("memserver serve")


def cmd_demo(args: argparse.Namespace) -> int:
    raise NotImplementedError("memserver demo")


# --- the parser -------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="memserver",
        description="A local MCP server that gives any MCP client a long-term memory it can search by meaning.",
    )
    parser.add_argument("--version", action="version", version=f"memserver {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    # (each area adds its sub-commands here)

    return parser


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
