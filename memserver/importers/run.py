"""An import from another tool's export: every entry read first (so a malformed file imports nothing unless the
caller keeps going), each record checked by the contract's rules, given a stable id (from its namespace and
source, so importing the same file again stores nothing new), then stored through `MemoryBackend.import_` with
a progress bar on a terminal; the summary says what was stored, what was already there, and what was skipped
and why."""

from __future__ import annotations

import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from memserver.contract import inputs, requests
from memserver.errors import InvalidInputError
from memserver.importers import chatgpt, claude, markdown, mcp_graph
from memserver.importers.entries import Broken, Entry, ImportFormatError, Record, Skip

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend

# `memserver import --from NAME`: each format's reader.
READERS = {
    "claude": claude.read,
    "chatgpt": chatgpt.read,
    "mcp-memory": mcp_graph.read,
    "markdown": markdown.read,
}
ID_SPACE = uuid.UUID("6f1d3c52-4c0e-4b8e-9a51-8d0f3f0e2a11")  # uuid5 namespace of imported memories' ids


@dataclass
class Summary:
    """What an import did: memories stored, records already stored (same id or same content), and the parts
    skipped, counted by reason."""

    stored: int = 0
    duplicates: int = 0
    skipped: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        out = [f"stored {self.stored}, duplicates {self.duplicates}, skipped {sum(self.skipped.values())}"]
        out += [f"  skipped {count}: {reason}" for reason, count in self.skipped.most_common()]
        return out


class Progress:
    """A one-line progress bar on `stream` (stderr), drawn only when it is a terminal, at most ten times a second."""

    def __init__(self, label: str, total: int, stream: IO[str] | None = None) -> None:
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = self.stream.isatty()
        self.label, self.total, self.done = label, max(total, 1), 0
        self._drawn = 0.0

    def advance(self, n: int = 1) -> None:
        self.done += n
        now = time.monotonic()
        if self.enabled and (now - self._drawn >= 0.1 or self.done >= self.total):
            self._drawn = now
            filled = 30 * min(self.done, self.total) // self.total
            bar = "#" * filled + "." * (30 - filled)
            self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total}")
            self.stream.flush()

    def close(self) -> None:
        if self.enabled and self.done:
            self.stream.write("\r" + " " * (len(self.label) + 45) + "\r")
            self.stream.flush()


def import_file(
    backend: MemoryBackend,
    fmt: str,
    path: str | Path,
    *,
    namespace: str | None = None,
    user: str = "user",
    keep_going: bool = False,
    progress: IO[str] | None = None,
) -> Summary:
    """Import `path` as format `fmt` (a READERS key) into `namespace`. A malformed part raises ImportFormatError
    naming the file and the position, before anything is stored, unless `keep_going` (then it is skipped and
    counted). `progress`: the stream of the progress bar (default stderr; drawn only on a terminal)."""
    started = time.perf_counter()
    if fmt not in READERS:
        raise InvalidInputError(f"unknown import format {fmt!r}; one of {', '.join(READERS)}")
    where = Path(path)
    if not where.exists():
        raise InvalidInputError(f"{where}: no such file or folder")
    space = inputs.check_namespace(namespace)
    summary = Summary()
    records = _checked(READERS[fmt](where, user), where, space, keep_going, summary)
    bar = Progress(f"importing {where.name}", len(records), progress)
    try:
        summary.stored = backend.import_(_counted(records, bar))
    finally:
        bar.close()
    summary.duplicates += len(records) - summary.stored
    summary.seconds = time.perf_counter() - started
    return summary


def _checked(
    entries: Iterable[Entry], path: Path, namespace: str, keep_going: bool, summary: Summary
) -> list[dict[str, Any]]:
    """Every record of the file as an import record, checked; skips and (with keep_going) broken parts counted."""
    out: list[dict[str, Any]] = []
    ids: set[str] = set()
    for entry in entries:
        if isinstance(entry, Skip):
            summary.skipped[entry.reason] += 1
            continue
        if isinstance(entry, Broken):
            _broken(path, entry.position, entry.problem, keep_going, summary)
            continue
        for record in _records(entry, namespace):
            try:
                requests.imported_memory(record, 0, 1)
            except InvalidInputError as exc:
                _broken(path, entry.position, str(exc).removeprefix("records[0]."), keep_going, summary)
                continue
            if record["id"] in ids:  # the same message twice in one file: an import refuses repeated ids
                summary.duplicates += 1
                continue
            ids.add(record["id"])
            out.append(record)
    return out


def _broken(path: Path, position: str, problem: str, keep_going: bool, summary: Summary) -> None:
    if not keep_going:
        raise ImportFormatError(f"{path}: {position}: {problem}; nothing was imported (--keep-going skips it)")
    summary.skipped[f"malformed ({position}: {problem})"] += 1


def _records(entry: Record, namespace: str) -> Iterator[dict[str, Any]]:
    """The import record(s) of one entry: a text longer than a memory may be is split at paragraphs (or words),
    each part with its own source (`...#MSG~2`)."""
    parts = split_text(entry.content, inputs.MAX_CONTENT_CHARS)
    for n, part in enumerate(parts, 1):
        source = entry.source if n == 1 else f"{entry.source}~{n}"
        source = source[: inputs.MAX_SOURCE_CHARS]
        memory_id = uuid.uuid5(ID_SPACE, f"{namespace}\x00{source}").hex
        record = {"id": memory_id, "content": part, "source": source, "namespace": namespace, **entry.fields}
        yield {k: v for k, v in record.items() if v not in (None, "", [])}


def split_text(text: str, limit: int) -> list[str]:
    """`text` in parts of at most `limit` characters, cut at a paragraph break, else a line break, else a space."""
    parts: list[str] = []
    rest = text.strip()
    while len(rest) > limit:
        cut = max(rest.rfind(sep, 0, limit) for sep in ("\n\n", "\n", " "))
        cut = cut if cut > limit // 2 else limit
        parts.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    return [*parts, rest] if rest else parts


def _counted(records: list[dict[str, Any]], bar: Progress) -> Iterator[dict[str, Any]]:
    for record in records:
        yield record
        bar.advance()
