"""The journal's records as the store writes and replays them, what they feed, and where replay and checkpoints stand.

`AddRecord` is one stored memory as the journal knows it; `DerivedIndex` the protocol of what is derived from the
journal (the vector and keyword indexes), fed by the one replay path (generation.py). Records (journal.py has the
line format and the crash story):

    {"op":"add","id":...,"content":...,"created_at":...,"tags":[...],"source":...,<fields>,"row":N,"vcrc":"<hex>"}
    {"op":"del","id":...,"at":...}                  a forget: the tombstone of `id`, at that time
    {"op":"vfix","row":N,"vcrc":"<crc32 hex>"}     a re-embedded vector row written back (vectors.py)

`<fields>` are the conversation fields of issue 12, each present only when it differs from its default, so a
memory without them is written exactly as before this change, and a line written before it reads as one without
them: "occurred_at" (omitted when equal to created_at), "speaker", "role", "session" (omitted when ""),
"namespace" (omitted when "default"), "replaces" (the id of the memory this one replaced), and "replaced_by" with
"replaced_at" (the newer memory's id and created_at: written only where that memory is not in the journal, by a
compaction that purged it, or an import of a memory whose newer version was forgotten), and the lifecycle fields of
issue 24: "kind" (omitted when "note"), "due" (when set), "done", "pinned", "archived" (when true). An older reader
ignores keys it does not know, so it reads such a store with every memory as an unpinned, unarchived note.

`Coverage` is the bookkeeping that says how far the journal is applied and how much of it the checkpoints on
disk cover: what was six loose attributes of the store.
"""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np

log = logging.getLogger(__name__)


class AddRecord(NamedTuple):
    """One stored memory as the journal knows it; `row` is its row in the vector file (and its index label).

    A NamedTuple (immutable, like the frozen dataclass it was) because opening a store builds one per memory
    from the metadata snapshot, in C (`tuple.__new__`): 1M of them in ~0.2 s instead of ~2 s.
    """

    id: str
    content: str
    created_at: str
    tags: tuple[str, ...]
    source: str
    row: int
    # The conversation fields (their line keys below; absent from a line = these defaults).
    occurred_at: str = ""  # "" only before the write path fills it in: replay gives created_at for a line without
    speaker: str = ""
    role: str = ""
    session: str = ""
    namespace: str = "default"
    replaces: str = ""  # the id this memory replaced
    replaced_by: str = ""  # set on a line only where the newer memory is gone (compaction, import): with its time
    replaced_at: str = ""
    # The lifecycle fields (issue 24; absent from a line = these defaults, so old lines read as notes).
    kind: str = "note"
    due: str = ""
    done: bool = False
    pinned: bool = False
    archived: bool = False


class DerivedIndex(Protocol):
    """Data derived from the journal (the vector index, the keyword index), fed by one replay path.

    The store calls `add`/`remove` for its own writes, for other processes' writes it catches up on, and for the
    journal tail after `load`; `reset` + `add` is the bulk rebuild. `save`/`load` checkpoint the index together
    with the journal position it covers (`stamp`: generation, offset, live count); `load` returns that stamp, or
    None when there is no usable checkpoint (the store then resets and rebuilds it after replaying the journal).
    Calls are serialised by the store; `vectors` rows match `records` (unit float32).
    """

    name: str

    def reset(self) -> None: ...
    def add(self, records: Sequence[AddRecord], vectors: np.ndarray) -> None: ...
    def remove(self, records: Sequence[AddRecord]) -> None: ...
    def save(self, folder: Path, stamp: dict[str, Any]) -> None: ...
    def load(self, folder: Path, generation: str) -> dict[str, Any] | None: ...


LIFECYCLE_KEYS = ("kind", "due", "done", "pinned", "archived")
# The optional keys of an add line, in line order, and the value each one is omitted at.
OPTIONAL_KEYS = ("speaker", "role", "session", "namespace", "replaces", "replaced_by", "replaced_at", *LIFECYCLE_KEYS)
_DEFAULTS = AddRecord("", "", "", (), "", 0)


def add_line(r: AddRecord, vcrc: int) -> dict[str, Any]:
    """The journal record of an add (`r.row` is its vector row; `vcrc` that row's CRC-32)."""
    line: dict[str, Any] = {
        "op": "add",
        "id": r.id,
        "content": r.content,
        "created_at": r.created_at,
        "tags": list(r.tags),
        "source": r.source,
    }
    if r.occurred_at and r.occurred_at != r.created_at:
        line["occurred_at"] = r.occurred_at
    for key in OPTIONAL_KEYS:
        value = getattr(r, key)
        if value != getattr(_DEFAULTS, key):
            line[key] = value
    line["row"] = r.row
    line["vcrc"] = f"{vcrc:08x}"
    return line


def delete_line(memory_id: str, at: str) -> dict[str, Any]:
    return {"op": "del", "id": memory_id, "at": at}


def vfix_line(row: int, vcrc: int) -> dict[str, Any]:
    return {"op": "vfix", "row": row, "vcrc": f"{vcrc:08x}"}


def added(rec: dict[str, Any]) -> AddRecord:
    """The memory an add record describes (a key it lacks: that field's default)."""
    created = rec["created_at"]
    if len(rec) == 7 or (len(rec) == 8 and "vcrc" in rec):  # op id content created_at tags source row [vcrc]
        return AddRecord(rec["id"], rec["content"], created, tuple(rec["tags"]), rec["source"], rec["row"], created)
    return AddRecord(
        rec["id"],
        rec["content"],
        created,
        tuple(rec["tags"]),
        rec["source"],
        int(rec["row"]),
        rec.get("occurred_at") or created,
        rec.get("speaker", ""),
        rec.get("role", ""),
        rec.get("session", ""),
        rec.get("namespace", "default"),
        rec.get("replaces", ""),
        rec.get("replaced_by", ""),
        rec.get("replaced_at", ""),
        rec.get("kind", "note"),
        rec.get("due", ""),
        rec.get("done", False),
        rec.get("pinned", False),
        rec.get("archived", False),
    )


class Coverage:
    """How far the journal is applied, and which part of it the checkpoints on disk cover.

    Outside a load only `offset`, `seen`, `uncovered` and the saved offsets matter. During a load each derived
    index has loaded its checkpoint (or none), and the replay past the metadata snapshot feeds each index only
    the records past its own checkpoint (`feeds_from`), noting the live count when it passes a checkpoint's
    offset, which must match that checkpoint's count for it to be trusted (`untrusted`).
    """

    def __init__(self) -> None:
        self._reset(0)

    def _reset(self, offset: int) -> None:
        self.offset = offset  # journal offset applied up to
        self.seen: tuple[tuple[int, int], int] = ((0, 0), -1)  # journal (identity, size) when last caught up
        self.uncovered = 0  # records applied past the oldest checkpoint on disk
        self.replayed = 0  # records read since the load began
        self.covered_to = 0  # while loading: every checkpoint covers the records up to this offset
        self.marks: dict[int, list[str]] = {}  # while loading: checkpoint offset -> indexes checkpointed there
        self._from: dict[str, int] = {}  # while loading: index -> offset past which it is fed
        self._count_at: dict[str, int] = {}  # while loading: index -> live count at its checkpoint's offset
        self._saved_at: dict[str, int] = {}  # index -> journal offset its checkpoint on disk covers

    # --- loading -------------------------------------------------------------------------------------------------

    def begin_load(self, header_end: int) -> None:
        """A load starts from nothing, at the end of the journal's header."""
        self._reset(header_end)

    def loaded_checkpoint(self, name: str, offset: int | None) -> None:
        """Index `name` loaded a checkpoint covering `offset` (None: none, so it is rebuilt after the replay)."""
        self._from[name] = sys.maxsize if offset is None else offset

    def snapshot_floor(self, vector_offset: int | None) -> int:
        """The latest offset a metadata snapshot may cover: none past an index checkpoint the replay must feed."""
        return min([*self._from.values(), sys.maxsize if vector_offset is None else vector_offset])

    def start_replay(self, live: int) -> None:
        """The metadata stands at `offset` with `live` memories; replay the rest from here."""
        for name, until in self._from.items():
            if until == self.offset:
                self._count_at[name] = live
            elif until != sys.maxsize:
                self.marks.setdefault(until, []).append(name)
        self.covered_to = min((0 if o == sys.maxsize else o for o in self._from.values()), default=0)

    def reached(self, end: int, live: int) -> None:
        """The replay passed `end`, a checkpoint offset in `marks`, with `live` memories."""
        for name in self.marks.get(end, ()):
            self._count_at[name] = live

    def feeds_from(self, name: str) -> int:
        """Index `name` takes the records ending past this offset (0 outside a load: all of them)."""
        return self._from.get(name, 0)

    def untrusted(self, stamps: dict[str, dict[str, Any] | None], folder: Path) -> list[str]:
        """After the replay: the indexes to rebuild (no checkpoint, or one whose count the replay contradicts).
        The others' checkpoints are noted as saved; the load's bookkeeping is dropped."""
        rebuild = []
        for name, stamp in stamps.items():
            if stamp is not None and self._count_at.get(name) != stamp.get("count"):
                log.warning("the %s index checkpoint in %s does not match the journal; rebuilding it", name, folder)
                stamp = None
            if stamp is None:
                rebuild.append(name)
            else:
                self._saved_at[name] = int(stamp["offset"])
        self._from, self._count_at, self.marks, self.covered_to = {}, {}, {}, 0
        return rebuild

    # --- checkpoints ---------------------------------------------------------------------------------------------

    def is_saved(self, name: str) -> bool:
        """Whether the checkpoint on disk of index `name` covers the journal as applied."""
        return self._saved_at.get(name) == self.offset

    def saved(self, name: str, offset: int | None = None) -> None:
        """Index `name`'s checkpoint on disk now covers `offset` (default: the journal as applied)."""
        self._saved_at[name] = self.offset if offset is None else offset

    def checkpointed(self, uncovered_then: int | None = None) -> None:
        """Every index and the metadata snapshot were saved at `offset`, or (a checkpoint written outside the
        lock) at an earlier offset, when `uncovered_then` records were uncovered: those applied since stay so."""
        self.uncovered = 0 if uncovered_then is None else max(0, self.uncovered - uncovered_then)
