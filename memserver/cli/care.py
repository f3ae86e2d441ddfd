"""The commands that tend a store over the years: doctor, overview, backup, restore, and `import --from` (other
tools' exports, through memserver/importers/).

Heavy modules are imported inside each command, so `memserver --help` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable

from memserver.cli.options import open_store
from memserver.errors import MemserverError

StoreCommand = Callable[[str, Callable[[argparse.Namespace], int], str, str], argparse.ArgumentParser]
IMPORT_FORMATS = ("claude", "chatgpt", "mcp-memory", "markdown")
_MARK = {"ok": "ok  ", "warning": "WARN", "failure": "FAIL"}


def add_commands(store_command: StoreCommand) -> None:
    """Add doctor, overview, backup and restore to the parser (`store_command` adds the store options)."""
    doctor = store_command(
        "doctor",
        cmd_doctor,
        "check the store's health and say what to do about each warning (exit 1 on a failure)",
        "memserver doctor",
    )
    doctor.add_argument("--json", action="store_true", help="print memory://health's JSON instead")

    overview = store_command(
        "overview",
        cmd_overview,
        "summarise a namespace: counts by tag, month and speaker, and what changed this week",
        "memserver overview --namespace user:alice",
    )
    overview.add_argument("--namespace", help="the namespace (default: default)")
    overview.add_argument("--json", action="store_true", help="print memory://overview's JSON instead")

    backup = store_command(
        "backup",
        cmd_backup,
        "write a consistent copy of the store into a new timestamped folder under DEST, while others keep writing",
        "memserver backup /backups/memserver --keep 7",
    )
    backup.add_argument("dest", metavar="DEST", help="the folder that holds the backups")
    backup.add_argument("--keep", type=int, metavar="N", help="then remove all but the newest N backups there")

    restore = store_command(
        "restore",
        cmd_restore,
        "put a backup in place as the store (into an empty data directory, or replacing one after a yes)",
        "memserver restore /backups/memserver --data-dir ~/.local/share/memserver",
    )
    restore.add_argument("src", metavar="SRC", help="a backup folder, or a folder of backups (the newest is taken)")
    restore.add_argument("--yes", action="store_true", help="replace the store there without asking")


def add_import_options(importer: argparse.ArgumentParser) -> None:
    """`memserver import --from FORMAT PATH` and its options, beside the JSON-lines import."""
    importer.add_argument(
        "--from",
        dest="from_format",
        choices=IMPORT_FORMATS,
        help="read another tool's export: Claude's or ChatGPT's conversations.json, the MCP memory server's "
        "memory.jsonl, or a folder of Markdown notes",
    )
    importer.add_argument("--namespace", help="with --from: import into this namespace (default: default)")
    importer.add_argument("--speaker", default="user", help="with --from: the name your own messages get")
    importer.add_argument(
        "--keep-going", action="store_true", help="with --from: skip malformed parts (counted) instead of stopping"
    )


def cmd_import_from(args: argparse.Namespace) -> int:
    """memserver import --from FORMAT PATH: the summary on stdout, the progress bar on stderr (a terminal only)."""
    from memserver.importers.run import import_file

    if args.file == "-":
        raise MemserverError("import --from reads a file or folder, not stdin")
    with open_store(args) as store:
        summary = import_file(
            store,
            args.from_format,
            args.file,
            namespace=args.namespace,
            user=args.speaker,
            keep_going=args.keep_going,
        )
    for line in summary.lines():
        print(line)
    rate = summary.stored / summary.seconds if summary.seconds else 0.0
    print(f"took {summary.seconds:.1f} s ({rate:.0f} memories/s)", file=sys.stderr)
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    """memserver doctor: every check with its status, and advice under each that is not ok."""
    with open_store(args) as store:
        health = store.health()
    if args.json:
        print(json.dumps(health, indent=2, ensure_ascii=False))
    else:
        where = health.get("path") or health.get("database") or ""
        print(f"memserver {health['version']}, {health['engine']} engine, collection {health['collection']} {where}")
        for check in health["checks"]:
            print(f"{_MARK.get(check['status'], check['status'])}  {check['name']:<11} {check['detail']}")
            if check.get("advice"):
                print(f"      {'':<11} -> {check['advice']}")
        print(f"status: {health['status']}")
    return 1 if health["status"] == "failure" else 0


def cmd_overview(args: argparse.Namespace) -> int:
    """memserver overview: a namespace summarised (contract/overview.py)."""
    from memserver.contract.overview import overview, render

    with open_store(args) as store:
        summary = overview(store, args.namespace)
    print(json.dumps(summary, indent=2, ensure_ascii=False) if args.json else render(summary))
    return 0


def cmd_backup(args: argparse.Namespace) -> int:
    """memserver backup DEST [--keep N]: one line saying what was written (PostgreSQL: the pg_dump recipe, exit 1)."""
    with open_store(args) as store:
        result = store.backup(args.dest, keep=args.keep)
    if not result.get("written"):
        print(result.get("recipe", "this engine writes no backups itself"), file=sys.stderr)
        return 1
    print(
        f"backed up {result['memories']} memories to {result['path']} in {result['seconds']:.2f} s "
        f"(lock held {result['lock_seconds'] * 1000:.1f} ms)"
    )
    for path in result.get("removed", []):
        print(f"removed the older backup {path}")
    return 0


def cmd_restore(args: argparse.Namespace) -> int:
    """memserver restore SRC: into an empty place, or replacing the store there after a yes (or --yes)."""
    from memserver.cli.options import database_url
    from memserver.engines import restore_backup

    if database_url(args):
        raise MemserverError(
            "restore puts a local store's backup in place; PostgreSQL restores with pg_restore (docs/care.md)"
        )

    def replace(target: str) -> bool:
        if args.yes:
            return True
        if not sys.stdin.isatty():
            raise MemserverError(f"{target} holds a store; not replacing it without confirmation: add --yes")
        print(f"replace the store in {target} with this backup? [y/N] ", end="", file=sys.stderr, flush=True)
        return sys.stdin.readline().strip().lower() in ("y", "yes")

    result = restore_backup(args.src, args.data_dir, args.collection, replace=replace)
    with open_store(argparse.Namespace(**{**vars(args), "collection": result["collection"]})) as store:
        count = store.stats()["count"]  # opens it: the journal replayed past the checkpoints, every check made
    print(f"restored {count} memories from {result['backup']} into {result['target']}")
    return 0
