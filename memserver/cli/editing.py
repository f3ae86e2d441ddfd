"""`memserver edit ID` and `memserver retag ID +a -b`: correct a memory by storing its new version (`replaces`), so
the old one stays as history (`memserver show` lists both).

The new version keeps every field of the old one (tags, source, speaker, role, session, occurred_at) unless a flag
changes it. `edit` without --content opens $EDITOR (else $VISUAL, else vi) on the content.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from memserver.cli import flags, ids, output
from memserver.cli.options import open_store
from memserver.errors import InvalidInputError, MemserverError

if TYPE_CHECKING:
    from memserver.cli.command import StoreCommand
    from memserver.contract.backend import Memory, MemoryBackend

UNTAG = "--untag"


def add_commands(store_command: StoreCommand) -> None:
    edit = store_command(
        "edit",
        cmd_edit,
        "correct a memory: store its new version (the old one is kept as history)",
        'memserver edit 6f24 --content "Ana moved to Lisbon in October 2026."',
    )
    edit.add_argument("memory_id", metavar="ID")
    edit.add_argument("--content", metavar="TEXT", help="the new content (default: edit it in $EDITOR)")
    flags.fields(edit)
    flags.namespace(edit)
    flags.output(edit, times=False)

    retag = store_command(
        "retag",
        cmd_retag,
        "add (+TAG) and remove (-TAG) tags of a memory, as its new version",
        "memserver retag 6f24 +family -work",
    )
    retag.add_argument("memory_id", metavar="ID")
    retag.add_argument("adds", nargs="*", metavar="+TAG", help="a tag to add (+ optional)")
    retag.add_argument(UNTAG, action="append", dest="removes", default=[], metavar="TAG", help="a tag to remove (-TAG)")
    flags.namespace(retag)
    flags.output(retag, times=False)


def retag_argv(argv: list[str]) -> list[str]:
    """`retag ID +a -b`: a -TAG becomes --untag=TAG before argparse reads it (it would take -b for a flag)."""
    if not argv or argv[0] != "retag":
        return argv
    untag = [f"{UNTAG}={arg[1:]}" if arg.startswith("-") and not arg.startswith("--") and arg != "-h" else arg
             for arg in argv[1:]]  # fmt: skip
    return ["retag", *untag]


def cmd_edit(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        old = _current(store, args)
        content = args.content if args.content is not None else _edited(old.content)
        changes = {
            name: value
            for name in ("tags", "source", "speaker", "role", "session", "occurred_at")
            if (value := getattr(args, name)) is not None
        }
        if content.strip() == old.content and all(_same(old, name, value) for name, value in changes.items()):
            return _unchanged(args, old)
        return _store_version(store, args, old, content, **changes)


def cmd_retag(args: argparse.Namespace) -> int:
    adds = [tag[1:] if tag.startswith("+") else tag for tag in args.adds]
    if not adds and not args.removes:
        raise InvalidInputError("give the tags to add (+TAG) or to remove (-TAG)")
    with open_store(args) as store:
        old = _current(store, args)
        missing = [tag for tag in args.removes if tag not in old.tags]
        if missing:
            raise InvalidInputError(f"memory {ids.short(old.id)} has no tag {', '.join(missing)} to remove")
        tags = [tag for tag in dict.fromkeys([*old.tags, *adds]) if tag not in args.removes]
        if tuple(tags) == old.tags:
            return _unchanged(args, old)
        return _store_version(store, args, old, old.content, tags=tags)


def _current(store: MemoryBackend, args: argparse.Namespace) -> Memory:
    memory_id = ids.resolve(store, args.memory_id, args.namespace)
    memory = store.get(memory_id, namespace=args.namespace)
    if memory is None:
        raise ids.NoSuchMemory(f"no memory {memory_id} in namespace {args.namespace or 'default'}")
    if memory.replaced_by:
        raise InvalidInputError(
            f"memory {ids.short(memory.id)} was replaced by {ids.short(memory.replaced_by)}; edit that one"
        )
    return memory


def _same(old: Memory, name: str, value: object) -> bool:
    if name == "tags":
        return isinstance(value, list) and tuple(value) == old.tags
    return name != "occurred_at" and getattr(old, name) == value


def _store_version(store: MemoryBackend, args: argparse.Namespace, old: Memory, content: str, **changes: object) -> int:
    fields: dict[str, object] = {
        "tags": list(old.tags),
        "source": old.source,
        "speaker": old.speaker or None,
        "role": old.role or None,
        "session": old.session or None,
        "occurred_at": old.occurred_at,
    } | changes
    new = store.add(content, namespace=args.namespace, replaces=old.id, **fields)  # type: ignore[arg-type]
    if new.duplicate:
        raise MemserverError(f"memory {ids.short(new.id)} says this already; nothing stored, nothing replaced")
    if args.json:
        output.lines([{"id": new.id, "status": "stored", "replaces": old.id}])
    else:
        print(f"stored {new.id}, replacing {old.id}" + (f" (tags: {', '.join(new.tags)})" if new.tags else ""))
    return 0


def _unchanged(args: argparse.Namespace, old: Memory) -> int:
    if args.json:
        output.lines([{"id": old.id, "status": "unchanged"}])
    else:
        print(f"no change to {old.id}; nothing stored")
    return 0


def _edited(content: str) -> str:
    """The content after the person edited it in $EDITOR (a temporary file)."""
    editor = os.environ.get("EDITOR") or os.environ.get("VISUAL") or "vi"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "memory.txt"
        path.write_text(content + "\n", encoding="utf-8")
        try:
            status = subprocess.call([*shlex.split(editor), str(path)])
        except OSError as exc:
            raise MemserverError(f"cannot start the editor {editor!r} ($EDITOR): {exc.strerror}") from None
        if status != 0:
            raise MemserverError(f"the editor exited with status {status}; nothing stored")
        edited = path.read_text(encoding="utf-8").strip()
    if not edited:
        raise InvalidInputError("the edited content is empty; nothing stored (`memserver forget ID` forgets it)")
    return edited
