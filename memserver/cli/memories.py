"""The commands for the people whose memories these are: see and correct what their assistant remembers.

    memserver recall QUERY      the best matches, as recall answers them (the same filters)
    memserver list              newest first; --all pages through everything
    memserver show ID           one memory, every field, and its history
    memserver remember TEXT     store one (with the conversation fields, or as the new version of another)
    memserver forget ID...      forget these; or --tag/--session/--speaker/--namespace: forget what matches,
                                after showing the count and a sample and asking (--yes: without asking)

Output is aligned text for people (as wide as the terminal: id, when it happened, who, then #tags and the content, cut
with …) or, with --json, JSON lines:
one JSON object per line (one per memory for recall and list; one in all for show and remember; one per id, or
one for a bulk forget), so a script reads it line by line or with `jq`. Knows the storage contract only; the
store comes from cli.open_store, the one place the CLI opens one.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TextIO

from memserver.cli.options import open_store
from memserver.errors import InvalidInputError, MemserverError

if TYPE_CHECKING:
    from memserver.contract.backend import Hit, Memory, MemoryBackend

StoreCommand = Callable[[str, Callable[[argparse.Namespace], int], str, str], argparse.ArgumentParser]

DEFAULT_LIST = 20
PAGE = 200  # memories per store call when listing everything
SAMPLE = 5  # memories shown before a bulk forget
MIN_CONTENT_WIDTH = 20
WHO_WIDTH = 12


def add_commands(store_command: StoreCommand) -> None:
    """Add recall, list, show, remember and forget to the parser (`store_command` adds the store options)."""
    recall = store_command(
        "recall",
        cmd_recall,
        "search the memories by words and meaning, best first",
        'memserver recall "where does Ana live?" --since 2026-01-01',
    )
    recall.add_argument("query", metavar="QUERY")
    recall.add_argument("--limit", type=int, default=10, help="how many at most (default 10)")
    recall.add_argument("--mode", choices=["hybrid", "semantic", "keyword"], default="hybrid")
    _filters(recall, since=True)
    recall.add_argument("--as-of", metavar="WHEN", help="answer as the memory stood at this date or date-time")
    _json(recall)

    listing = store_command(
        "list", cmd_list, "list memories newest first (by when they happened)", "memserver list --session chat-1 --all"
    )
    listing.add_argument("--limit", type=int, default=DEFAULT_LIST, help=f"how many (default {DEFAULT_LIST})")
    listing.add_argument("--all", action="store_true", help="every memory that matches, page after page")
    _filters(listing, since=False)
    _json(listing)

    show = store_command("show", cmd_show, "show one memory, every field, and its history", "memserver show 6b44...")
    show.add_argument("memory_id", metavar="ID")
    _namespace(show)
    _json(show)

    remember = store_command(
        "remember",
        cmd_remember,
        "store a memory (TEXT, or - to read it from stdin)",
        'memserver remember "Ana moved to Lisbon" --tag family --replaces 6b44...',
    )
    remember.add_argument("text", metavar="TEXT")
    remember.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="a tag (repeatable)")
    remember.add_argument("--source", help="where it came from")
    remember.add_argument("--speaker", metavar="NAME", help="who said it")
    remember.add_argument("--role", choices=["user", "assistant", "participant", "system", "tool"])
    remember.add_argument("--session", metavar="ID", help="the conversation it belongs to")
    remember.add_argument("--occurred-at", metavar="WHEN", help="when it happened (ISO 8601; default now)")
    remember.add_argument("--replaces", metavar="ID", help="the memory this one corrects (kept as history)")
    _namespace(remember)
    _json(remember)

    forget = store_command(
        "forget",
        cmd_forget,
        "forget memories by id, or every memory with a tag, of a session, of a speaker or of a namespace",
        "memserver forget --session chat-20260501-093000-1a2b3c",
    )
    forget.add_argument("ids", nargs="*", metavar="ID")
    forget.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="memories with this tag")
    forget.add_argument("--session", metavar="ID", help="memories of this conversation")
    forget.add_argument("--speaker", metavar="NAME", help="memories of this speaker")
    _namespace(forget, "the namespace (alone: every memory in it)")
    forget.add_argument("--yes", action="store_true", help="do not ask (needed when not at a terminal)")
    _json(forget)


def _filters(parser: argparse.ArgumentParser, *, since: bool) -> None:
    parser.add_argument("--tag", action="append", dest="tags", metavar="TAG", help="memories with this tag (any)")
    if since:
        parser.add_argument("--source", help="memories with exactly this source")
        parser.add_argument("--since", metavar="WHEN", help="that happened at or after (ISO 8601 date or time)")
        parser.add_argument("--until", metavar="WHEN", help="that happened at or before (a date: that whole day)")
    parser.add_argument("--speaker", metavar="NAME", help="what this speaker said")
    parser.add_argument("--role", choices=["user", "assistant", "participant", "system", "tool"])
    parser.add_argument("--session", metavar="ID", help="of this conversation")
    _namespace(parser)


def _namespace(parser: argparse.ArgumentParser, text: str = "the namespace (default: default)") -> None:
    parser.add_argument("--namespace", metavar="NAME", help=text)


def _json(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="JSON lines instead of a table")


# --- the commands ---------------------------------------------------------------------------------------------------


def cmd_recall(args: argparse.Namespace) -> int:
    with _store(args) as store:
        hits = store.search(
            args.query,
            limit=args.limit,
            tags=args.tags,
            source=args.source,
            since=args.since,
            until=args.until,
            mode=args.mode,
            speaker=args.speaker,
            role=args.role,
            session=args.session,
            namespace=args.namespace,
            as_of=args.as_of,
        )
    if args.json:
        _lines({**hit.memory.to_dict(), "score": round(float(hit.score), 4)} for hit in hits)
    elif hits:
        print(Table(with_score=True).render(hits))
    else:
        print("nothing found", file=sys.stderr)
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    with _store(args) as store:
        memories, more = _listing(store, args)
        if args.json:
            _lines(m.to_dict() for m in memories)
            return 0
        shown = 0
        table = Table()
        for memory in memories:  # one page at a time: a long --all starts printing at once
            if shown == 0:
                print(table.header())
            print(table.row(memory))
            shown += 1
    if shown == 0:
        print("no memories", file=sys.stderr)
    elif more:
        print(f"({shown} shown, newest first; more with --limit N or --all)", file=sys.stderr)
    return 0


def _listing(store: MemoryBackend, args: argparse.Namespace) -> tuple[Iterator[Memory], bool]:
    """The memories to list (lazily, a page at a time with --all) and whether more are left unlisted."""
    filters = {"namespace": args.namespace, "session": args.session, "speaker": args.speaker, "role": args.role}
    if not args.all:
        page = store.list_page(limit=args.limit, tags=args.tags, **filters)
        return iter(page.memories), page.next_cursor is not None

    def pages() -> Iterator[Memory]:
        cursor: str | None = None
        while True:
            page = store.list_page(limit=PAGE, tags=args.tags, cursor=cursor, **filters)
            yield from page.memories
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    return pages(), False


def cmd_show(args: argparse.Namespace) -> int:
    from memserver.contract.versions import history

    with _store(args) as store:
        memory = store.get(args.memory_id, namespace=args.namespace)
        if memory is None:
            raise MemserverError(f"no memory {args.memory_id.strip()} in namespace {args.namespace or 'default'}")
        chain = history(store, memory)
    record = {**memory.to_dict(), **({"history": chain} if chain else {})}
    if args.json:
        _lines([record])
        return 0
    fields = dict(memory.to_dict())
    fields.setdefault("namespace", "default")
    fields["tags"] = ", ".join(memory.tags) or "-"
    content = fields.pop("content")
    if chain:
        for direction in ("older", "newer"):
            fields[f"{direction} versions"] = ", ".join(_version(v) for v in chain[direction])
    width = max(len(name) for name in fields)
    for name, value in fields.items():
        print(f"{name:<{width}}  {value if value != '' else '-'}")
    print()
    print(content)
    return 0


def _version(version: dict[str, Any]) -> str:
    if version.get("forgotten"):
        return f"{version['id']} (forgotten)"
    return f"{version['id']} ({_when(version['occurred_at'])})"


def cmd_remember(args: argparse.Namespace) -> int:
    text = sys.stdin.read() if args.text == "-" else args.text
    with _store(args) as store:
        memory = store.add(
            text,
            tags=args.tags,
            source=args.source,
            occurred_at=args.occurred_at,
            speaker=args.speaker,
            role=args.role,
            session=args.session,
            namespace=args.namespace,
            replaces=args.replaces,
        )
    status = "duplicate" if memory.duplicate else "stored"
    if args.json:
        similar = [{"id": mid, "score": score} for mid, score in memory.similar]
        _lines([{"id": memory.id, "status": status, **({"similar": similar} if similar else {})}])
        return 0
    if memory.duplicate:
        print(f"already stored as {memory.id}; nothing stored" + (", nothing replaced" if args.replaces else ""))
    else:
        print(f"stored {memory.id}" + (f", replacing {memory.replaces}" if memory.replaces else ""))
    for mid, score in memory.similar:
        print(f"  similar: {mid} (cosine {score:.2f}); `memserver show {mid}`")
    return 0


def cmd_forget(args: argparse.Namespace) -> int:
    bulk = args.tags or args.session or args.speaker
    if args.ids and bulk:
        raise InvalidInputError("give memory ids, or --tag/--session/--speaker/--namespace, not both")
    if args.ids:
        return _forget_ids(args)
    if not bulk and args.namespace is None:
        raise InvalidInputError("give the ids to forget, or --tag, --session, --speaker or --namespace")
    from memserver.contract.backend import MemoryFilter

    selected = MemoryFilter(
        namespace=args.namespace,
        tags=args.tags,
        session=args.session,
        speaker=args.speaker,
        everything=not bulk,  # --namespace alone: all of it, which is what was asked for
    )
    with _store(args) as store:
        selection = store.select(selected, limit=SAMPLE)
        what = _criteria(args)
        if selection.count == 0:
            _report(args, {"matched": 0, "forgotten": 0}, f"no memory {what}; nothing forgotten")
            return 0
        if not args.json:
            print(f"{selection.count} {_memories(selection.count)} {what}:")
            print(Table().render(selection.sample))
            if selection.count > len(selection.sample):
                print(f"... and {selection.count - len(selection.sample)} more")
        if not args.yes and not _confirmed(f"Forget {_them(selection.count)}? [y/N] "):
            _report(args, {"matched": selection.count, "forgotten": 0}, "nothing forgotten")
            return 1
        forgotten = store.delete_many(selection.ids, namespace=args.namespace)
    _report(args, {"matched": selection.count, "forgotten": forgotten}, f"forgot {forgotten} {_memories(forgotten)}")
    return 0


def _forget_ids(args: argparse.Namespace) -> int:
    missing = 0
    with _store(args) as store:
        for memory_id in args.ids:
            deleted = store.delete(memory_id, namespace=args.namespace)
            missing += not deleted
            if args.json:
                _lines([{"id": memory_id, "deleted": deleted}])
            elif deleted:
                print(f"forgot {memory_id}")
            else:
                print(f"memserver: no memory {memory_id} in namespace {args.namespace or 'default'}", file=sys.stderr)
    return 1 if missing else 0


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
    return " ".join([*parts, f"in namespace {args.namespace or 'default'}"])


def _report(args: argparse.Namespace, record: dict[str, Any], text: str) -> None:
    if args.json:
        _lines([record])
    else:
        print(text)


def _memories(n: int) -> str:
    return "memory" if n == 1 else "memories"


def _them(n: int) -> str:
    return "this memory" if n == 1 else f"these {n} memories"


# --- output -----------------------------------------------------------------------------------------------------


def _store(args: argparse.Namespace) -> MemoryBackend:
    return open_store(args)


def _lines(records: Iterable[dict[str, Any]], out: TextIO | None = None) -> None:
    """JSON lines: one object per line."""
    stream = out or sys.stdout
    for record in records:
        stream.write(json.dumps(record, ensure_ascii=False) + "\n")


class Table:
    """Memories as aligned columns, as wide as the terminal: ID, [SCORE,] WHEN, WHO, then the tags (#tag) and the
    content, cut with … at the terminal's edge."""

    def __init__(self, *, with_score: bool = False, width: int | None = None) -> None:
        self.with_score = with_score
        self.width = width or shutil.get_terminal_size((120, 24)).columns

    def render(self, items: Sequence[Memory] | Sequence[Hit]) -> str:
        return "\n".join([self.header(), *(self.row(item) for item in items)])

    def header(self) -> str:
        return self._line("ID", "SCORE", "WHEN", "WHO", "TAGS, CONTENT")

    def row(self, item: Memory | Hit) -> str:
        from memserver.contract.backend import Hit

        memory, score = (item.memory, f"{item.score:.3f}") if isinstance(item, Hit) else (item, "")
        text = " ".join([*(f"#{tag}" for tag in memory.tags), *memory.content.split()])
        return self._line(memory.id, score, _when(memory.occurred_at), memory.speaker or memory.role or "-", text)

    def _line(self, memory_id: str, score: str, when: str, who: str, text: str) -> str:
        cells = [f"{memory_id:<32}"] + ([f"{score:>5}"] if self.with_score else [])
        cells += [f"{when:<16}", f"{_cut(who, WHO_WIDTH):<{WHO_WIDTH}}"]
        fixed = sum(len(cell) + 2 for cell in cells)
        cells.append(_cut(text, max(MIN_CONTENT_WIDTH, self.width - fixed)))
        return "  ".join(cells).rstrip()


def _when(stored: str) -> str:
    return stored[:16].replace("T", " ")


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
