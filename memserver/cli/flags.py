"""The flags the memory commands share (filters, namespace, output), so each reads and says the same everywhere."""

from __future__ import annotations

import argparse

ROLES = ["user", "assistant", "participant", "system", "tool"]
AS_OF_HELP = (
    "storage time: answer as the store stood at WHEN (what had been stored, and not yet replaced or forgotten, by "
    "then). To ask as of what happened, use --until WHEN (it bounds occurred_at)"
)


def filters(parser: argparse.ArgumentParser, *, times: bool = True, source: bool = True) -> None:
    """--tag, --source, --since/--until (when it happened), --speaker, --role, --session, --namespace."""
    parser.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="memories with this tag (any)")
    if source:
        parser.add_argument("--source", help="memories with exactly this source")
    if times:
        parser.add_argument("--since", metavar="WHEN", help="that happened at or after (ISO 8601 date or time)")
        parser.add_argument("--until", metavar="WHEN", help="that happened at or before (a date: that whole day)")
    parser.add_argument("--speaker", metavar="NAME", help="what this speaker said")
    parser.add_argument("--role", choices=ROLES)
    parser.add_argument("--session", metavar="ID", help="of this conversation")
    namespace(parser)


def lifecycle(parser: argparse.ArgumentParser) -> None:
    """--kind (any of those given) and --include-archived (archived memories are left out otherwise)."""
    parser.add_argument("--kind", action="append", dest="kinds", metavar="KIND", help="memories of this kind (any)")
    parser.add_argument("--include-archived", action="store_true", help="archived memories too")


def namespace(parser: argparse.ArgumentParser, text: str = "the namespace (default: default)") -> None:
    parser.add_argument("--namespace", metavar="NAME", help=text)


def output(parser: argparse.ArgumentParser, *, times: bool = True) -> None:
    """--json (JSON Lines) and, where times are shown, --utc."""
    parser.add_argument("--json", action="store_true", help="JSON Lines (one JSON object per line) instead of a table")
    if times:
        parser.add_argument("--utc", action="store_true", help="show times in UTC (default: the local time zone)")


def fields(parser: argparse.ArgumentParser) -> None:
    """The fields of a memory a person sets: --tag, --source, --speaker, --role, --session, --occurred-at."""
    parser.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="a tag (repeatable)")
    parser.add_argument("--source", help="where it came from")
    parser.add_argument("--speaker", metavar="NAME", help="who said it")
    parser.add_argument("--role", choices=ROLES)
    parser.add_argument("--session", metavar="ID", help="the conversation it belongs to")
    parser.add_argument("--occurred-at", metavar="WHEN", help="when it happened (ISO 8601 date or date-time)")
