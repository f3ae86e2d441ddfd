"""Hostile stores (issue 27 item 4), made on disk for the tests: damaged files of a checkpointed store, and journals
edited into records the write path never writes (each line re-checksummed, so only the record rules can tell).

The store-level tests (tests/local/test_hostile_stores.py, test_hostile_journal.py) and the command-level ones
(tests/cli/test_cli_hostile.py) damage stores the same way. Every store here is collection "test" of `root`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memserver.local.journal import decode_line, encode_line
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder

Edit = Callable[[list[dict[str, Any]]], None]
MAGIC = b"memserver-meta-snapshot\n"


def open_store(root: Path, embedder: FakeEmbedder | None = None) -> MemoryStore:
    return MemoryStore(root, "test", embedder=embedder or FakeEmbedder())


def journal(root: Path) -> Path:
    return root / "test" / "journal.jsonl"


# --- damaged files of a checkpointed store ------------------------------------------------------------------------


def checkpointed(root: Path) -> None:
    """300 memories: enough that closing writes checkpoints (index, keyword index, snapshot) to damage."""
    with open_store(root) as s:
        s.add_many([{"content": f"fact {i} about item{i}", "tags": [f"t{i % 3}"]} for i in range(300)])


def truncate_vectors(folder: Path) -> None:
    vec = next(folder.glob("vectors-*.f32"))
    vec.write_bytes(vec.read_bytes()[: 1000 * 4])  # not even one whole row left


def newer_snapshot(folder: Path) -> None:
    snap = next(folder.glob("meta-*.snap"))
    data = snap.read_bytes()
    nl = data.index(b"\n", len(MAGIC))
    head = json.loads(data[len(MAGIC) : nl])
    head["format"] = 99  # written by a later memserver
    snap.write_bytes(data[: len(MAGIC)] + json.dumps(head).encode() + data[nl:])


def index_disagrees(folder: Path) -> None:
    stamp = json.loads((folder / "index.json").read_text())
    stamp["count"] = 5  # the index checkpoint claims another journal state than the snapshot and the journal
    (folder / "index.json").write_text(json.dumps(stamp))


def torn_tail(folder: Path) -> None:
    with (folder / "journal.jsonl").open("ab") as f:
        f.write(b'{"op": "add", "id": "0f3a')  # the start of a line, as a crash mid-write leaves it


# each damage, with what the repair's message names
DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated vector file": (truncate_vectors, "vectors-"),
    "snapshot from a newer format": (newer_snapshot, "meta-"),
    "checkpoint whose files disagree": (index_disagrees, "index"),
    "torn last journal line": (torn_tail, "journal.jsonl"),
}


# --- journals with impossible records -----------------------------------------------------------------------------


def store_three(root: Path) -> list[str]:
    """Three memories, few enough that closing writes no checkpoint: every open replays the journal."""
    with open_store(root) as s:
        return [m.id for m in s.add_many([f"fact number {i} about the harbour" for i in range(3)])]


def rewrite(root: Path, edit: Edit) -> tuple[bytes, int]:
    """Let `edit` change the journal's records (the header stays first), re-checksum every line; returns the new
    bytes and the byte offset where the first changed line starts."""
    path = journal(root)
    lines = path.read_bytes().splitlines(keepends=True)
    records = [decode_line(line.rstrip(b"\n")) for line in lines]
    assert all(r is not None for r in records)
    edited: list[dict[str, Any]] = [json.loads(json.dumps(r)) for r in records if r is not None]
    for r in edited:
        r.pop("crc", None)
    header, body = edited[0], edited[1:]
    edit(body)
    edited = [header, *body]
    out = [encode_line(r) for r in edited]
    data = b"".join(out)
    first = next((i for i, (a, b) in enumerate(zip(lines, out, strict=False)) if a != b), len(lines))
    path.write_bytes(data)
    return data, sum(len(line) for line in out[:first])


def field(index: int, name: str, value: Any) -> Edit:
    def edit(records: list[dict[str, Any]]) -> None:
        records[index][name] = value

    return edit


def append(record: dict[str, Any]) -> Edit:
    def edit(records: list[dict[str, Any]]) -> None:
        records.append(record)

    return edit


def self_replace(records: list[dict[str, Any]]) -> None:
    records[1]["replaces"] = records[1]["id"]


def cycle(records: list[dict[str, Any]]) -> None:
    """The first memory says it replaces the second, and the second that it replaces the first."""
    records[0]["replaces"] = records[1]["id"]
    records[1]["replaces"] = records[0]["id"]


def damaged_middle_line(root: Path) -> None:
    """Five memories written one by one, then a byte of the third one's line flipped: good lines follow it, so it
    is no torn tail."""
    with open_store(root) as s:
        for i in range(5):
            s.add(f"fact {i} about item{i}")
    data = bytearray(journal(root).read_bytes())
    data[data.index(b"fact 2 about")] ^= 0x01  # 'f' -> 'g': still JSON, only the CRC can tell
    journal(root).write_bytes(bytes(data))
