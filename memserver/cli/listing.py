"""`memserver list`, `tags`, `namespaces`: what is stored, a page at a time, and how it is labelled.

`list` shows memories newest first by when they happened (`--by stored`: by when they were stored, so a memory just
added with an old --occurred-at is on top). A page ends with the way to the next one on stderr (`--cursor C`, the
store's next_cursor, or `--page N`, which follows the cursors from the first page); `--all` prints every page.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from memserver.cli import flags, output
from memserver.cli.options import open_store
from memserver.cli.tables import Table, aligned
from memserver.errors import InvalidInputError

if TYPE_CHECKING:
    from memserver.cli.command import StoreCommand
    from memserver.contract.backend import Memory, MemoryBackend, Page

DEFAULT_LIST = 20
PAGE = 200  # memories per store call when listing everything


def add_commands(store_command: StoreCommand) -> None:
    listing = store_command(
        "list",
        cmd_list,
        "list memories newest first (by when they happened, or --by stored)",
        "memserver list --session chat-1 --all",
    )
    listing.add_argument("--limit", type=int, default=DEFAULT_LIST, help=f"how many per page (default {DEFAULT_LIST})")
    listing.add_argument("--all", action="store_true", help="every memory that matches, page after page")
    listing.add_argument("--cursor", metavar="C", help="the page after the one that printed this cursor")
    listing.add_argument("--page", type=int, metavar="N", help="page N (1: the first) of --limit memories each")
    listing.add_argument(
        "--by",
        choices=["occurred", "stored"],  # list_page's orders
        default="occurred",
        help="occurred (default): by when it happened; stored: by when it was stored",
    )
    flags.filters(listing)
    flags.lifecycle(listing)
    flags.output(listing)

    tags = store_command("tags", cmd_tags, "list the tags in use and how many memories carry each", "memserver tags")
    flags.namespace(tags)
    flags.output(tags, times=False)

    spaces = store_command(
        "namespaces", cmd_namespaces, "list the namespaces and how many memories each holds", "memserver namespaces"
    )
    flags.output(spaces, times=False)


def cmd_list(args: argparse.Namespace) -> int:
    if sum(x is not None and x is not False for x in (args.cursor, args.page, args.all or None)) > 1:
        raise InvalidInputError("give one of --cursor, --page and --all")
    if args.page is not None and args.page < 1:
        raise InvalidInputError(f"--page must be 1 or more, got {args.page}")
    with open_store(args) as store:
        memories, after = _listing(store, args)
        shown = 0
        table: Table | None = None
        for memory in memories:  # one page at a time: a long --all starts printing at once
            if args.json:
                output.lines([memory.to_dict()])
            else:
                if table is None:
                    table = Table(utc=args.utc)
                    print(table.header())
                print(table.row(memory))
            shown += 1
    if shown == 0:
        print("no memories", file=sys.stderr)
    if after is not None:
        page = "" if args.cursor else f" or --page {(args.page or 1) + 1}"
        print(f"({shown} shown; the next page: --cursor {after}{page}; or --all)", file=sys.stderr)
    return 0


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    names = ("tags", "namespace", "session", "speaker", "role", "source", "since", "until", "kinds", "include_archived")
    return {name: getattr(args, name) for name in names} | {"order": args.by}


def _listing(store: MemoryBackend, args: argparse.Namespace) -> tuple[Iterator[Memory], str | None]:
    """The memories to list (lazily, a page at a time with --all) and the cursor of the next page, if any."""
    filters = _filters(args)
    if args.all:

        def pages() -> Iterator[Memory]:
            cursor: str | None = None
            while True:
                page = store.list_page(limit=PAGE, cursor=cursor, **filters)
                yield from page.memories
                if page.next_cursor is None:
                    return
                cursor = page.next_cursor

        return pages(), None
    page = _page(store, args, filters)
    return iter(page.memories), page.next_cursor


def _page(store: MemoryBackend, args: argparse.Namespace, filters: dict[str, Any]) -> Page:
    """--cursor's page, or --page N's: the first page's cursor followed N - 1 times."""
    page = store.list_page(limit=args.limit, cursor=args.cursor, **filters)
    for _ in range((args.page or 1) - 1):
        if page.next_cursor is None:
            from memserver.contract.backend import Page

            return Page([], None)
        page = store.list_page(limit=args.limit, cursor=page.next_cursor, **filters)
    return page


def cmd_tags(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        counts = store.tag_counts(namespace=args.namespace)
    return _counts(args, counts, "tag", f"no tags in namespace {args.namespace or 'default'}")


def cmd_namespaces(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        counts = store.namespaces()
    return _counts(args, counts, "namespace", "no memories in any namespace")


def _counts(args: argparse.Namespace, counts: dict[str, int], name: str, empty: str) -> int:
    if args.json:
        output.lines({name: key, "count": n} for key, n in counts.items())
    elif counts:
        rows = [["COUNT", name.upper()], *([str(n), key] for key, n in counts.items())]
        print(aligned(rows, right=[0]))
    else:
        print(empty, file=sys.stderr)
    return 0
