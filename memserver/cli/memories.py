"""The commands for the people whose memories these are: see and correct what their assistant remembers.

    memserver show ID           one memory, every field, and its history
    memserver remember TEXT     store one (with the conversation fields, or as the new version of another)
    memserver forget ID...      forget these; or --tag/--session/--speaker/--source/--before/--namespace: forget
                                what matches, after showing the count and a sample and asking (--yes: without asking)

recall (recall.py), list, tags and namespaces (listing.py), edit and retag (editing.py) are beside these. Output is
aligned text for people (tables.py) or, with --json, JSON Lines. An ID is any unique prefix of 4 characters or more
(ids.py). Knows the storage contract only; the store comes from cli.open_store, the one place the CLI opens one.
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from memserver.cli import flags, ids, output, times
from memserver.cli.options import open_store
from memserver.cli.tables import Table
from memserver.errors import InvalidInputError, MemserverError

if TYPE_CHECKING:
    from memserver.cli.command import StoreCommand

SAMPLE = 5  # memories shown before a bulk forget
KINDS = ("fact", "preference", "decision", "task", "event", "instruction", "person", "note", "summary")
# The lifecycle commands (issue 24): what each sets.
MARKS: dict[str, tuple[str, bool]] = {
    "pin": ("pinned", True),
    "unpin": ("pinned", False),
    "archive": ("archived", True),
    "unarchive": ("archived", False),
    "done": ("done", True),
    "undone": ("done", False),
}
TIME_FIELDS = ("created_at", "occurred_at")


def add_commands(store_command: StoreCommand) -> None:
    """Add show, remember and forget to the parser (`store_command` adds the store options)."""
    show = store_command("show", cmd_show, "show one memory, every field, and its history", "memserver show 6f24")
    show.add_argument("memory_id", metavar="ID", help=ids.ID_WORDS)
    flags.namespace(show)
    flags.output(show)

    remember = store_command(
        "remember",
        cmd_remember,
        "store a memory (TEXT, or - to read it from stdin)",
        'memserver remember "Ana moved to Lisbon" --tag family --replaces 6f24',
    )
    remember.add_argument("text", metavar="TEXT")
    flags.fields(remember)
    remember.add_argument("--replaces", metavar="ID", help="the memory this one corrects (kept as history)")
    remember.add_argument("--kind", help="what it is: " + ", ".join(KINDS) + " (default note)")
    remember.add_argument("--due", metavar="DATE", help="a task's due date (ISO, e.g. 2026-12-31)")
    flags.namespace(remember)
    flags.output(remember, times=False)

    for name, (flag, value) in MARKS.items():
        mark = store_command(
            name,
            cmd_mark,
            f"{name} a memory: a new version with {flag} {'set' if value else 'cleared'}, the old one kept as history",
            f"memserver {name} 6f24",
        )
        mark.add_argument("memory_id", metavar="ID", help=ids.ID_WORDS)
        flags.namespace(mark)
        flags.output(mark, times=False)

    forget = store_command(
        "forget",
        cmd_forget,
        "forget memories by id, or every memory with a tag, of a session, speaker or source, stored before a time, "
        "or of a namespace",
        "memserver forget --session chat-20260501-093000-1a2b3c",
    )
    forget.add_argument("ids", nargs="*", metavar="ID", help=ids.ID_WORDS)
    forget.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="memories with this tag")
    forget.add_argument("--session", metavar="ID", help="memories of this conversation")
    forget.add_argument("--speaker", metavar="NAME", help="memories of this speaker")
    forget.add_argument("--source", help="memories with exactly this source")
    forget.add_argument("--before", metavar="WHEN", help="memories stored before WHEN (storage time, ISO 8601)")
    flags.namespace(forget, "the namespace (alone: every memory in it)")
    forget.add_argument("--yes", action="store_true", help="do not ask (needed when not at a terminal)")
    flags.output(forget)


def cmd_show(args: argparse.Namespace) -> int:
    from memserver.contract.versions import history

    with open_store(args) as store:
        memory_id = ids.resolve(store, args.memory_id, args.namespace)
        memory = store.get(memory_id, namespace=args.namespace)
        if memory is None:
            raise ids.NoSuchMemory(f"no memory {memory_id} in namespace {args.namespace or 'default'}")
        chain = history(store, memory)
    record = {**memory.to_dict(), **({"history": chain} if chain else {})}
    if args.json:
        output.lines([record])
        return 0
    fields: dict[str, Any] = dict(memory.to_dict())
    fields.setdefault("namespace", "default")
    fields["tags"] = ", ".join(memory.tags) or "-"
    for name in TIME_FIELDS:
        fields[name] = times.moment(fields[name], utc=args.utc)
    content = fields.pop("content")
    if chain:
        for direction in ("older", "newer"):
            fields[f"{direction} versions"] = ", ".join(_version(v, args.utc) for v in chain[direction])
    width = max(len(name) for name in fields)
    for name, value in fields.items():
        print(f"{name:<{width}}  {value if value != '' else '-'}")
    print()
    print(content)
    return 0


def _version(version: dict[str, Any], utc: bool) -> str:
    if version.get("forgotten"):
        return f"{version['id']} (forgotten)"
    return f"{version['id']} ({times.when(version['occurred_at'], utc=utc)})"


def cmd_remember(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    with open_store(args) as store:
        replaces = None if args.replaces is None else ids.resolve(store, args.replaces, args.namespace)
        memory = store.add(
            text,
            tags=args.tags,
            source=args.source,
            occurred_at=args.occurred_at,
            speaker=args.speaker,
            role=args.role,
            session=args.session,
            namespace=args.namespace,
            replaces=replaces,
            kind=args.kind,
            due=args.due,
        )
    status = "duplicate" if memory.duplicate else "stored"
    if args.json:
        similar = [{"id": mid, "score": score} for mid, score in memory.similar]
        output.lines([{"id": memory.id, "status": status, **({"similar": similar} if similar else {})}])
        return 0
    if memory.duplicate:
        print(f"already stored as {memory.id}; nothing stored" + (", nothing replaced" if args.replaces else ""))
    else:
        print(f"stored {memory.id}" + (f", replacing {memory.replaces}" if memory.replaces else ""))
    for mid, score in memory.similar:
        print(f"  similar: {mid} (cosine {score:.2f}); `memserver show {ids.short(mid)}`")
    return 0


def cmd_mark(args: argparse.Namespace) -> int:
    flag, value = MARKS[args.command]
    with open_store(args) as store:
        memory_id = ids.resolve(store, args.memory_id, args.namespace)
        change = {"pinned": store.pin, "archived": store.archive, "done": store.mark_done}[flag]
        memory = change(memory_id, value, namespace=args.namespace)
    if memory is None:
        raise ids.NoSuchMemory(f"no memory {memory_id} in namespace {args.namespace or 'default'}")
    status = "unchanged" if memory.id == memory_id else "changed"
    if args.json:
        output.lines([{"id": memory.id, "status": status, **({"replaces": memory_id} if status == "changed" else {})}])
    elif status == "unchanged":
        print(f"{memory.id} is {flag if value else 'not ' + flag} already; nothing stored")
    else:
        print(f"stored {memory.id} ({flag if value else 'not ' + flag}), replacing {memory_id}")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    bulk = args.tags or args.session or args.speaker or args.source is not None or args.before
    if args.ids and bulk:
        raise InvalidInputError("give memory ids, or --tag/--session/--speaker/--source/--before/--namespace, not both")
    if args.ids:
        return _forget_ids(args)
    if not bulk and args.namespace is None:
        raise InvalidInputError(
            "give the ids to forget, or --tag, --session, --speaker, --source, --before or --namespace"
        )
    from memserver.contract.backend import MemoryFilter

    selected = MemoryFilter(
        namespace=args.namespace,
        tags=args.tags,
        session=args.session,
        speaker=args.speaker,
        source=args.source,
        before=args.before,
        everything=not bulk,  # --namespace alone: all of it, which is what was asked for
    )
    with open_store(args) as store:
        selection = store.select(selected, limit=SAMPLE)
        what = _criteria(args)
        if selection.count == 0:
            _report(args, {"matched": 0, "forgotten": 0}, f"no memory {what}; nothing forgotten")
            return 0
        if not args.json:
            print(f"{selection.count} {output.memories(selection.count)} {what}:")
            print(Table(utc=args.utc, sample=selection.sample).render(selection.sample))
            if selection.count > len(selection.sample):
                print(f"... and {selection.count - len(selection.sample)} more")
        if not args.yes and not _confirmed(f"Forget {_them(selection.count)}? [y/N] "):
            _report(args, {"matched": selection.count, "forgotten": 0}, "nothing forgotten")
            return 1
        forgotten = store.delete_many(selection.ids, namespace=args.namespace)
    done = f"forgot {forgotten} {output.memories(forgotten)}"
    _report(args, {"matched": selection.count, "forgotten": forgotten}, done)
    return 0


def _forget_ids(args: argparse.Namespace) -> int:
    missing = 0
    with open_store(args) as store:
        for given in args.ids:
            try:
                memory_id = ids.resolve(store, given, args.namespace)
            except ids.NoSuchMemory as exc:
                missing += 1
                _report_error(args, {"id": given, "deleted": False}, f"memserver: {exc}")
                continue
            deleted = store.delete(memory_id, namespace=args.namespace)
            missing += not deleted
            if args.json:
                output.lines([{"id": memory_id, "deleted": deleted}])
            elif deleted:
                print(f"forgot {memory_id}")
            else:
                print(f"memserver: no memory {memory_id} in namespace {args.namespace or 'default'}", file=sys.stderr)
    return 1 if missing else 0


def _report_error(args: argparse.Namespace, record: dict[str, Any], error: str) -> None:
    if args.json:
        output.lines([record])
    else:
        print(error, file=sys.stderr)


def _confirmed(question: str) -> bool:
    """Ask on the terminal; without one, refuse (a script must say --yes)."""
    if not sys.stdin.isatty():
        raise MemserverError("not forgetting without confirmation: stdin is not a terminal; add --yes")
    print(question, end="", file=sys.stderr, flush=True)
    return sys.stdin.readline().strip().lower() in ("y", "yes")


def _criteria(args: argparse.Namespace) -> str:
    parts = [f"tagged {' or '.join(args.tags)}"] if args.tags else []
    parts += [f"of session {args.session}"] if args.session else []
    parts += [f"said by {args.speaker}"] if args.speaker else []
    parts += [f"from source {args.source!r}"] if args.source is not None else []
    parts += [f"stored before {args.before}"] if args.before else []
    return " ".join([*parts, f"in namespace {args.namespace or 'default'}"])


def _report(args: argparse.Namespace, record: dict[str, Any], text: str) -> None:
    if args.json:
        output.lines([record])
    else:
        print(text)


def _them(n: int) -> str:
    return "this memory" if n == 1 else f"these {n} memories"
