"""The options every store command shares: which store to open (--data-dir, --collection, --database, --user).

--user NAME opens the store of an HTTP token's user (`serve --http` with MEMSERVER_TOKENS gives each user their own):
on the local store `<data dir>/users/NAME/<collection>`, on PostgreSQL the tenant of (NAME, collection). So
`memserver export | memserver import --user alice -` copies the personal memories to alice's store.

The one place the CLI opens a store; the engines are imported inside, so `memserver --help` stays fast.
"""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend

DATABASE_HELP = (
    "keep the memories in this PostgreSQL database (postgresql://user@host/db; default: MEMSERVER_DATABASE_URL; "
    "needs memserver[postgres])"
)


USER_NAME = re.compile(r"^[A-Za-z0-9_-]{1,32}$")  # what a token's user may be called (transports/bearer.py)


def add_store_options(parser: argparse.ArgumentParser) -> None:
    """--data-dir, --collection, --database and --user: the store a store command reads or writes."""
    parser.add_argument("--data-dir", help="data directory (default: MCP_MEMORY_PATH or the platform's)")
    parser.add_argument("--collection", help="collection (default: MCP_MEMORY_COLLECTION or personal_memory)")
    parser.add_argument("--database", metavar="URL", help=DATABASE_HELP)
    parser.add_argument(
        "--user",
        metavar="NAME",
        type=_user_name,
        help="the store of this HTTP token user (serve --http with MEMSERVER_TOKENS; default: the personal store)",
    )


def _user_name(value: str) -> str:
    if not USER_NAME.match(value):
        raise argparse.ArgumentTypeError(f"a user name is 1-32 letters, digits, '_' or '-', got {value!r}")
    return value


def database_url(args: argparse.Namespace) -> str | None:
    """--database, else MEMSERVER_DATABASE_URL: a postgresql:// URL, or None for the local store."""
    from memserver import config

    return getattr(args, "database", None) or config.database_url()


def check_database(url: str) -> None:
    """Fail at start, in one line naming the server, when the database cannot be reached."""
    from memserver.engines import check_database

    check_database(url)


def open_store(args: argparse.Namespace) -> MemoryBackend:
    """The store the command's --data-dir, --collection and --database name (the one place the CLI opens one)."""
    from memserver.engines import open_backend  # lazily: an engine loads numpy, hnswlib, ...

    user = getattr(args, "user", None)
    return open_backend(args.data_dir, args.collection, database=database_url(args), user=user)
