"""MemoryStore: durable, crash-safe, multi-process memory with search by meaning.

The journal (journal.py) is the record of truth; vectors sit in a row file beside it; the vector index (index.py)
and any other DerivedIndex are fed by one replay path, `_apply`, used for this process's own writes (each write
is appended, then read back through the same path), for catching up on other processes' writes, and for the
journal tail after a checkpoint. Every call first checks (one stat) whether the journal grew or was replaced.

The metadata of the live memories (ids, contents, dates, tags, sources by row) is kept by column (columns.py) and
restored on open from a snapshot of those columns, not by replaying the whole journal.

Locks: one thread lock (`_mu`) serialises all calls in a process (hnswlib does not lock reads against inserts);
embedding runs outside it. Across processes, writers hold the lock file exclusively, readers catching up hold it
shared. This module never imports mcp, and imports the Embedder (onnxruntime) only when none is given.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import heapq
import logging
import marshal
import math
import mmap
import os
import sys
import threading
import time
import uuid
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import date
from itertools import repeat
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memserver import columns, config, inputs
from memserver.backend import NEAR_DUPLICATE_SCORE, SIMILAR_MAX, Hit, Memory
from memserver.errors import InvalidInputError, ModelMismatchError, StoreError
from memserver.fusion import FUSION_DEPTH, hybrid_order
from memserver.index import VectorIndex
from memserver.journal import (
    JOURNAL_NAME,
    LOCK_NAME,
    AddRecord,
    DerivedIndex,
    FileLock,
    Journal,
    encode_line,
    fsync_dir,
    fsync_fd,
    read_snapshot,
    write_all,
    write_snapshot,
)
from memserver.keyword import KeywordDerivedIndex

if TYPE_CHECKING:
    from memserver.embedder import TextEmbedder

log = logging.getLogger(__name__)

# Filtered searches whose matching set is small are ranked exactly by numpy over the stored vectors; larger sets go
# through HNSW with a filter (falling back to exact if it returns too few). Exact costs ~c_e per matching row;
# HNSW with a filter matching a fraction f of N rows visits ~ef/f nodes at ~c_h each (a Python predicate per
# candidate). They cost the same at m* = f*N = sqrt((c_h/c_e) * ef * N), so the threshold grows as the square root
# of the store (a shrinking fraction): see `_brute_force_max`. BRUTE_FORCE_COST_RATIO (c_h/c_e) is measured by
# benchmarks/store.py ("filtered" table, README "Store"): the curves crossed at 8.1k rows of 100k (ratio 5.1) and
# 20.3k of 1M (3.2), at ef 128; 4 puts it at 7.2k and 22.6k there (10.1k, 32k at ef 256). Clamped to [MIN, MAX].
BRUTE_FORCE_COST_RATIO = 4.0
BRUTE_FORCE_MIN = 2_000
BRUTE_FORCE_MAX = 60_000
# Checkpoint the derived indexes when this many journal records are not covered by the checkpoint on disk
# (on open, close and after import_), and from the write path only past WRITE_CHECKPOINT_RECORDS.
CHECKPOINT_RECORDS = 200
WRITE_CHECKPOINT_RECORDS = 5000
IMPORT_BATCH = 1000
# Files of a compaction in progress (compacting-*) are removed as leftovers of a dead one only when this old.
COMPACTING_STALE_S = 6 * 3600
# Layout of the metadata snapshot's payload (see _meta_payload); a snapshot of another format is replayed over.
SNAPSHOT_FORMAT = 4

# _matrix reads up to this many vector rows with pread (no file pages mapped into the process), more through a map.
MATRIX_PREAD_ROWS = 256


@dataclass
class _NewItem:
    """A validated memory waiting to be written."""

    content: str
    tags: tuple[str, ...]
    source: str
    key: int  # inputs.content_key(content)
    id: str = ""
    created_at: str = ""
    vector: np.ndarray | None = None
    dup_of: int = -1  # index of an earlier item with the same content in the same batch


def _end(entry: tuple[int, AddRecord]) -> int:
    return entry[0]


def _add_line(r: AddRecord, row: int, vcrc: int) -> dict[str, Any]:
    """The journal line of an add (as compaction rewrites it, under a new row)."""
    return {
        "op": "add",
        "id": r.id,
        "content": r.content,
        "created_at": r.created_at,
        "tags": list(r.tags),
        "source": r.source,
        "row": row,
        "vcrc": f"{vcrc:08x}",
    }


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0


def _memory(r: AddRecord, duplicate: bool = False) -> Memory:
    return Memory(r.id, r.content, r.created_at, r.tags, r.source, duplicate)


def _folder_bytes(folder: Path) -> int:
    """Bytes of the files in `folder`; other processes create and remove temp files meanwhile, so skip vanished ones."""
    total = 0
    for entry in os.scandir(folder):
        with contextlib.suppress(FileNotFoundError):
            if entry.is_file():
                total += entry.stat().st_size
    return total


# --- the store -----------------------------------------------------------------------------------------------------


class MemoryStore:
    """A collection of memories in `<path>/<collection>/`, safe to share between threads and processes.

    Example::

        with MemoryStore("/tmp/mem", "demo", embedder=my_embedder) as store:
            m = store.add("The staging DB password rotates every Monday", tags=["ops"])
            hits = store.search("when does the password change?", limit=3)
    """

    _importing = 0  # import_ calls in progress (they space write-path checkpoints out; see _writing)

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        collection: str | None = None,
        embedder: TextEmbedder | None = None,
        *,
        lock_timeout: float = 30.0,
        M: int | None = None,
        ef_construction: int | None = None,
        ef: int | None = None,
    ) -> None:
        if embedder is None:
            from memserver.embedder import Embedder  # onnxruntime only when the caller brings no embedder

            embedder = Embedder()
        self.embedder: TextEmbedder = embedder
        self.dim = int(embedder.dim)
        root = Path(os.path.abspath(os.path.expanduser(path))) if path is not None else config.data_dir()
        self.collection = config.validate_collection(collection) if collection else config.collection_name()
        self.folder = root / self.collection
        self.folder.mkdir(parents=True, exist_ok=True)
        self._rowbytes = self.dim * 4
        self._mu = threading.RLock()
        self._lock = FileLock(self.folder / LOCK_NAME, timeout=lock_timeout)
        self._vindex = VectorIndex(
            self.dim,
            **{k: v for k, v in (("M", M), ("ef_construction", ef_construction), ("ef", ef)) if v is not None},
        )
        # Every derived index follows `_apply`; the keyword index is keyed by row too (see keyword.py).
        self._kindex = KeywordDerivedIndex()
        self._derived: list[DerivedIndex] = [self._vindex, self._kindex]
        self._journal: Journal | None = None
        self._vfd = -1
        self._closed = False
        with self._mu:
            self._load()

    # --- opening, replay, catching up -------------------------------------------------------------------------

    def _reset_state(self) -> None:
        # The metadata is kept by column, indexed by row (None: a deleted row, or one never written), not as one
        # object per memory: at 1M memories that is ~0.5 GB instead of ~1.1 GB, with a faster open (see
        # _load_meta) and ~1M fewer objects for the cyclic GC to scan. A record is rebuilt on demand (_record).
        self._rows = columns.IdMap()  # id -> row of the live memories; also row -> id (`id_at`)
        self._contents = columns.TextHeap()
        self._created = columns.FixedText(32)  # what _iso writes: 32 ASCII characters
        self._tags: list[tuple[str, ...] | None] = []
        self._sources: list[str | None] = []
        self._alive = np.zeros(0, dtype=bool)  # by row (capacity may exceed _next_row)
        # by row: CRC-32 of its vector bytes, from the journal; -1 when unknown (capacity may exceed _next_row)
        self._vcrc = np.full(0, -1, dtype=np.int64)
        self._interned: dict[Any, Any] = {}  # one object per distinct tag tuple / source
        self._keys = columns.HashIndex()  # _content_key -> rows
        self._tag_rows = columns.RowSets()
        self._source_rows = columns.RowSets()
        self._times: list[int] = []  # live rows sorted by (created_at, row): see _time_key
        self._next_row = 0
        self._offset = 0
        self._seen: tuple[tuple[int, int], int] = ((0, 0), -1)
        self._skip_until: dict[str, int] = {}
        self._count_at: dict[str, int] = {}
        self._uncovered = 0  # journal records not covered by the checkpoint on disk
        self._covered = 0  # while loading: the offset the loaded checkpoint covers
        self._map: mmap.mmap | None = None
        self._map_rows = 0
        self._vectors_repaired: dict[int, np.ndarray] = {}
        self._saved_at: dict[str, int] = {}  # derived index -> journal offset its checkpoint on disk covers

    def _open_files(self) -> None:
        path = self.folder / JOURNAL_NAME
        if not path.exists():
            with self._lock.hold(exclusive=True):
                if not path.exists():
                    Journal.create(
                        path,
                        {
                            "generation": uuid.uuid4().hex,
                            "dim": self.dim,
                            "model": str(self.embedder.model_name),
                            "created_at": inputs.now(),
                        },
                    )
        self._journal = Journal(path)
        header = self._journal.header
        if header.get("dim") != self.dim or header.get("model") != str(self.embedder.model_name):
            self._journal.close()
            raise ModelMismatchError(
                f"collection {self.collection!r} at {self.folder} holds vectors of model {header.get('model')!r} "
                f"(dim {header.get('dim')}), but the embedder is {self.embedder.model_name!r} (dim {self.dim}); "
                "use the same model, or another collection (MCP_MEMORY_COLLECTION)"
            )
        self._vpath = self.folder / f"vectors-{self._journal.generation}.f32"
        self._vfd = os.open(self._vpath, os.O_RDWR | os.O_CREAT, 0o644)

    def _load(self) -> None:
        """Open (or reopen after a compaction): checkpoints first, then replay the journal once past them.

        The cyclic garbage collector is paused meanwhile: a load creates millions of objects, none of them in a
        cycle, and the collector would rescan them again and again (1M memories: 10.6 s -> 7.3 s to open).
        """
        paused = gc.isenabled()
        gc.disable()
        try:
            self._load_objects()
        finally:
            if paused:
                gc.enable()

    def _load_objects(self) -> None:
        self._close_files()
        self._reset_state()
        self._open_files()
        assert self._journal is not None
        self._offset = self._journal.header_end
        with self._lock.hold(exclusive=False):
            stamps: dict[str, dict[str, Any] | None] = {}
            # The vector index's graph file is checksummed in a thread (1M memories: ~1 s) while the other indexes
            # and the metadata snapshot load; the graph itself is loaded last.
            vector_offset = self._vindex.prepare(self.folder, self._journal.generation)
            for d in self._derived:
                if d is not self._vindex:
                    self._load_derived(d, stamps)
            # The metadata snapshot may stand in for replaying the journal up to its offset, if no loaded index
            # checkpoint is older than it (those are fed by the replay from their own offsets on). The vector
            # checkpoint counts at the offset it claims: if it then fails its checks and is rebuilt, the floor
            # was only lower than needed (a snapshot past it is replayed over instead: slower, never wrong).
            floors = [*self._skip_until.values(), sys.maxsize if vector_offset is None else vector_offset]
            snapped = self._load_meta(min(floors))
            self._load_derived(self._vindex, stamps)
            for name, until in self._skip_until.items():
                if until == self._offset:
                    self._count_at[name] = len(self._rows)
            persistent = [self._skip_until[d.name] for d in self._derived if d.persistent]
            self._covered = min((0 if o == sys.maxsize else o for o in persistent), default=0)
            torn = self._catch_up(repair=False)
            self._covered = 0
        rebuilt = False
        for d in self._derived:
            stamp = stamps[d.name]
            if stamp is not None and self._count_at.get(d.name) != stamp.get("count"):
                log.warning("the %s index checkpoint does not match the journal; rebuilding it", d.name)
                stamp = None
            if stamp is None:
                self._rebuild(d)
                rebuilt = rebuilt or d.persistent
            elif d.persistent:
                self._saved_at[d.name] = int(stamp["offset"])
        self._skip_until.clear()
        with self._lock.hold(exclusive=True):
            if torn:
                self._catch_up(repair=True)
            self._cleanup_other_generations()
        if (
            self._uncovered >= CHECKPOINT_RECORDS
            or (rebuilt and self._rows)
            or self._vectors_repaired
            or (not snapped and len(self._rows) >= CHECKPOINT_RECORDS)
        ):
            self._checkpoint()

    def _load_derived(self, d: DerivedIndex, stamps: dict[str, dict[str, Any] | None]) -> None:
        """Load one derived index's checkpoint; one that has none is reset, to be rebuilt in bulk after the replay."""
        assert self._journal is not None
        d.reset()
        stamps[d.name] = stamp = d.load(self.folder, self._journal.generation)
        if stamp is None:  # not fed during the replay: rebuilt in bulk after it
            d.reset()
            self._skip_until[d.name] = sys.maxsize
        else:
            self._skip_until[d.name] = int(stamp["offset"])

    def _brute_force_max(self) -> int:
        """Largest matching set ranked exactly: where exact and filtered HNSW cost the same (see BRUTE_FORCE_*)."""
        m = math.sqrt(BRUTE_FORCE_COST_RATIO * self._vindex.ef * max(len(self._rows), 1))
        return int(min(BRUTE_FORCE_MAX, max(BRUTE_FORCE_MIN, m)))

    # --- the metadata snapshot (see journal.py): open without re-decoding the whole journal ---------------------

    def _meta_path(self, generation: str) -> Path:
        return self.folder / f"meta-{generation}.snap"

    def _meta_payload(self) -> bytes:
        """The metadata state as plain containers (marshal: fast, and loading it runs no code).

        Buffers (numpy arrays, the texts) are written by marshal as bytes, without a copy here. Ids, contents
        and created_at go as raw buffers by row (see columns.FixedText, columns.TextHeap), tags and sources as
        lists by row (None for a dead row; equal tuples and sources are one object, so marshal writes each once);
        everything else as raw int64/uint64 buffers (`np.frombuffer` on load, no per-item unmarshalling): the id
        keys, the created_at order, the vector CRCs by row, the content keys and the rows of each tag and source.
        Format SNAPSHOT_FORMAT.
        """
        n = self._next_row
        alive = self._alive[:n]
        return marshal.dumps(
            (
                SNAPSHOT_FORMAT,
                n,
                self._rows.ids.payload(n),
                *self._rows.index.payload(alive),
                *self._contents.payload(n),
                self._created.payload(n),
                self._tags[:n],
                self._sources[:n],
                np.asarray(self._times, dtype=np.int64),
                self._vcrc[:n],
                *self._keys.payload(alive),
                *self._tag_rows.payload(alive),
                *self._source_rows.payload(alive),
            )
        )

    def _line_crc_before(self, offset: int) -> str:
        """The CRC hex of the journal line ending at `offset` ("" if there is none): ties a snapshot to its line."""
        assert self._journal is not None
        if offset < self._journal.header_end or offset > self._journal.size():
            return ""
        tail = os.pread(self._journal._fd, 11, offset - 11)
        return tail[:8].decode("ascii", "replace") if tail.endswith(b'"}\n') else ""

    def _save_meta(self, stamp: dict[str, Any], payload: bytes | None = None, path: Path | None = None) -> None:
        """Write the metadata snapshot covering `stamp` (generation, offset, count)."""
        full = {
            **stamp,
            "line_crc": self._line_crc_before(int(stamp["offset"])),
            "python": list(sys.version_info[:2]),
            "format": SNAPSHOT_FORMAT,
        }
        write_snapshot(path or self._meta_path(str(stamp["generation"])), full, payload or self._meta_payload())

    def _load_meta(self, floor: int) -> bool:
        """Restore the metadata from its snapshot if it is usable and covers no more than `floor`; else False."""
        assert self._journal is not None
        got = read_snapshot(self._meta_path(self._journal.generation))
        if got is None:
            return False
        stamp, payload = got
        del got
        offset = stamp.get("offset")
        if (
            stamp.get("generation") != self._journal.generation
            or stamp.get("python") != list(sys.version_info[:2])
            or stamp.get("format") != SNAPSHOT_FORMAT
            or not isinstance(offset, int)
            or not self._journal.header_end <= offset <= floor
            or not stamp.get("line_crc")
            or self._line_crc_before(offset) != stamp["line_crc"]
        ):
            log.info("metadata snapshot of %s is stale or does not match the journal; replaying it", self.folder)
            return False
        try:
            parts = marshal.loads(payload)
            del payload  # the columns below are copies: let the snapshot's bytes go
            fmt, n, ids_b, id_h, id_r, texts, starts, ends, created_b, tags, sources, order_b, vcrc_b = parts[:13]
            key_h, key_r, tag_names, tag_counts, tag_flat, src_names, src_counts, src_flat = parts[13:]
            if fmt != SNAPSHOT_FORMAT:
                raise ValueError(f"format {fmt!r}")
            if not isinstance(n, int) or not all(isinstance(col, list) and len(col) == n for col in (tags, sources)):
                raise ValueError("columns do not match the row count")
            rows = columns.IdMap()
            rows.ids = columns.FixedText.from_payload(32, ids_b, n)
            rows.index = columns.HashIndex.from_payload(id_h, id_r, n)
            alive = rows.ids.occupied(n)
            rows.count = count = int(alive.sum())
            if count != stamp.get("count") or len(rows.index) != count or not alive[rows.index._r].all():
                raise ValueError("record count mismatch")
            h = rows.index._h
            for i in np.flatnonzero(h[1:] == h[:-1]).tolist():
                if rows.id_at(int(rows.index._r[i])) == rows.id_at(int(rows.index._r[i + 1])):
                    raise ValueError("duplicate ids")
            contents = columns.TextHeap.from_payload(texts, starts, ends, n)
            created = columns.FixedText.from_payload(32, created_b, n)
            order = np.frombuffer(order_b, np.int64)
            if len(order) != count or (count and not (0 <= int(order.min()) <= int(order.max()) < n)):
                raise ValueError("created_at order does not match the records")
            if not alive[order].all():
                raise ValueError("created_at order names a dead row")
            times = order.tolist()
            vcrc = np.frombuffer(vcrc_b, np.int64).copy()
            if len(vcrc) != n:
                raise ValueError("vector CRCs do not match the row count")
            keys = columns.HashIndex.from_payload(key_h, key_r, n)
            if len(keys) != count:
                raise ValueError("content keys do not match the records")
            tag_rows = columns.RowSets.from_payload(tag_names, tag_counts, tag_flat, n)
            source_rows = columns.RowSets.from_payload(src_names, src_counts, src_flat, n)
        except (ValueError, TypeError, EOFError, IndexError) as exc:
            log.warning("metadata snapshot of %s is unusable (%s); replaying the journal", self.folder, exc)
            return False
        self._rows, self._contents, self._created, self._tags, self._sources = rows, contents, created, tags, sources
        self._alive, self._vcrc, self._times, self._next_row = alive, vcrc, times, n
        self._keys, self._tag_rows, self._source_rows = keys, tag_rows, source_rows
        self._offset = offset
        return True

    def _rebuild(self, d: DerivedIndex) -> None:
        """Bulk-rebuild one derived index from the live records and their stored vectors (no re-embedding)."""
        t0 = time.perf_counter()
        d.reset()
        live = np.flatnonzero(self._alive[: self._next_row]).tolist()
        for i in range(0, len(live), 10_000):
            batch = [self._record(row) for row in live[i : i + 10_000]]
            d.add(batch, self._vectors_for(batch))
        if live:
            log.info("rebuilt the %s index of %d memories in %.1f s", d.name, len(live), time.perf_counter() - t0)

    def _catch_up(self, repair: bool) -> bool:
        """Apply every good journal line past our offset; returns True if a torn tail is left (not repaired).

        With `repair` (exclusive lock held), a torn tail is set aside and cut off.
        """
        assert self._journal is not None
        while True:
            result = self._journal.read(self._offset)
            if result.entries:
                self._apply(result.entries)
            self._offset = result.end
            if result.done:
                break
        size = result.size
        torn = size > self._offset
        if torn and repair:
            self._journal.set_aside_tail(self._offset)
            size, torn = self._offset, False
        self._seen = (self._journal.identity, size)
        return torn

    def _refresh(self) -> None:
        """Before every call: one stat; reload after a compaction elsewhere, catch up if the journal grew."""
        if self._closed or self._journal is None:
            raise StoreError("the store is closed")
        try:
            st = os.stat(self._journal.path)
            ident, size = (st.st_dev, st.st_ino), st.st_size
        except FileNotFoundError:
            ident, size = (0, 0), -1
        if ident != self._journal.identity:
            log.info("journal %s was replaced (compacted by another process); reloading", self._journal.path)
            self._load()
        elif (ident, size) != self._seen:
            with self._lock.hold(exclusive=False):
                self._catch_up(repair=False)

    def _apply(self, entries: Sequence[tuple[int, dict[str, Any]]]) -> None:
        """The one replay path: journal records -> metadata, then every derived index (adds batched)."""
        pending: list[tuple[int, AddRecord]] = []
        for end, rec in entries:
            op = rec.get("op")
            if op == "add":
                r = AddRecord(
                    rec["id"], rec["content"], rec["created_at"], tuple(rec["tags"]), rec["source"], int(rec["row"])
                )
                if not self._meta_add(r):  # a live id or row added again: cannot happen; be safe anyway
                    continue
                if "vcrc" in rec:
                    self._vcrc[r.row] = int(rec["vcrc"], 16)
                pending.append((end, r))
            elif op == "del":
                row = self._rows.get(rec.get("id", ""))
                if row is None:
                    continue
                self._flush(pending)
                pending = []
                r2 = self._record(row)
                self._meta_del(r2)
                for d in self._derived:
                    if end > self._skip_until.get(d.name, 0):
                        d.remove([r2])
            elif op == "vfix":  # a re-embedded vector row was written back: its new CRC (see _persist_repairs)
                row = int(rec["row"])
                if 0 <= row < len(self._vcrc):  # (a vfix always follows its row's add)
                    self._vcrc[row] = int(rec["vcrc"], 16)
                self._vectors_repaired.pop(row, None)
            else:
                continue
            if end > self._covered:
                self._uncovered += 1
            for name, until in self._skip_until.items():
                if end == until:
                    self._count_at[name] = len(self._rows)
        self._flush(pending)

    def _flush(self, pending: list[tuple[int, AddRecord]]) -> None:
        if not pending:
            return
        # Each index takes the records past its checkpoint: a suffix of `pending` (journal order), so the vectors
        # are read once, for the longest suffix, and sliced for the others.
        starts = [bisect.bisect_right(pending, self._skip_until.get(d.name, 0), key=_end) for d in self._derived]
        first = min(starts)
        if first == len(pending):
            return
        records = [r for _, r in pending[first:]]
        vecs = self._vectors_for(records)
        for d, start in zip(self._derived, starts, strict=True):
            if start < len(pending):
                d.add(records[start - first :], vecs[start - first :])

    def _grow(self, row: int) -> None:
        """Make room for `row` in every column (the numpy ones share one capacity, doubled as needed)."""
        if row >= len(self._tags):
            more = row + 1 - len(self._tags)
            self._tags.extend(repeat(None, more))
            self._sources.extend(repeat(None, more))
        if row >= len(self._alive):
            capacity = max(1024, row + 1, 2 * len(self._alive))
            alive = np.zeros(capacity, dtype=bool)
            alive[: len(self._alive)] = self._alive
            vcrc = np.full(capacity, -1, dtype=np.int64)
            vcrc[: len(self._vcrc)] = self._vcrc
            self._alive, self._vcrc = alive, vcrc
            for col in (self._rows.ids, self._contents, self._created):
                col.grow(capacity)

    def _intern(self, value: Any) -> Any:
        return self._interned.setdefault(value, value)

    def _created_at(self, row: int) -> str:
        return self._created.get(row)  # type: ignore[return-value]

    def _time_key(self, row: int) -> tuple[str, int]:
        return (self._created.get(row), row)  # type: ignore[return-value]

    def _record(self, row: int) -> AddRecord:
        """The live memory at `row` as a record (the caller knows the row is live)."""
        return AddRecord(
            self._rows.id_at(row),  # type: ignore[arg-type]
            self._contents.get(row),
            self._created.get(row),  # type: ignore[arg-type]
            self._tags[row],  # type: ignore[arg-type]
            self._sources[row],  # type: ignore[arg-type]
            row,
        )

    def _id_at(self, row: int) -> str | None:
        """The id of the live memory at `row`, or None."""
        return self._rows.id_at(row)

    def _memory_at(self, row: int, duplicate: bool = False) -> Memory:
        return _memory(self._record(row), duplicate)

    def _duplicate_row(self, key: int, content: str) -> int | None:
        """The live row whose content equals `content` (whitespace aside; the lowest such row), or None."""
        found = None
        text = None
        for row in self._keys.rows(key):
            if (found is None or row < found) and self._alive[row]:
                if text is None:
                    text = inputs.normalised(content)
                if inputs.normalised(self._contents.get(row)) == text:
                    found = row
        return found

    def _meta_add(self, r: AddRecord) -> bool:
        """Add the memory `r` to the metadata; False (and nothing done) if its id or its row is live already."""
        key = columns.id_key(r.id)
        if self._rows.get(r.id, key=key) is not None:
            return False
        row = r.row
        if row >= len(self._tags) or row >= len(self._alive):
            self._grow(row)
        if row < self._next_row:
            # A row is never given twice: the write path hands out rows upwards, in journal order. The row sets and
            # key indexes rely on it (they drop a deleted row lazily), so a line that reuses a row is refused.
            log.error(
                "journal line of %s reuses row %d (of %s); ignoring it",
                r.id,
                row,
                self._id_at(row) or "a deleted memory",
            )
            return False
        self._rows.insert(r.id, row, key)
        self._contents.set(row, r.content)
        self._created.set(row, r.created_at)
        self._tags[row] = tags = self._intern(r.tags)
        self._sources[row] = self._intern(r.source)
        self._alive[row] = True
        self._keys.add(inputs.content_key(r.content), row)
        for t in tags:
            self._tag_rows.add(t, row)
        self._source_rows.add(r.source, row)
        times = self._times
        if not times or (r.created_at, row) > self._time_key(times[-1]):
            times.append(row)
        else:
            bisect.insort(times, row, key=self._time_key)
        self._next_row = max(self._next_row, row + 1)
        return True

    def _meta_del(self, r: AddRecord) -> None:
        """Forget the live memory `r` (its tag, source and content-key entries go when next read: columns.RowSets)."""
        row = r.row
        i = bisect.bisect_left(self._times, (r.created_at, row), key=self._time_key)
        if i < len(self._times) and self._times[i] == row:
            del self._times[i]
        del self._rows[r.id]
        self._contents.clear(row)
        self._created.clear(row)
        self._tags[row] = self._sources[row] = None
        self._alive[row] = False

    # --- vector rows ---------------------------------------------------------------------------------------------

    def _vectors_for(self, records: Sequence[AddRecord]) -> np.ndarray:
        """Stored vectors of `records`, each checked against its CRC; a damaged row is re-embedded (logged)."""
        vecs = self._pread_rows(self._vfd, [r.row for r in records])
        present = os.fstat(self._vfd).st_size // self._rowbytes  # rows past it were lost (power loss)
        crcs = self._vcrc
        bad: list[int] = []
        for i, r in enumerate(records):
            want = int(crcs[r.row]) if r.row < len(crcs) else -1  # -1: no CRC known (a line without vcrc)
            if r.row >= present or (want >= 0 and zlib.crc32(vecs[i].tobytes()) != want):
                if r.row in self._vectors_repaired:  # re-embedded already (for another derived index)
                    vecs[i] = self._vectors_repaired[r.row]
                else:
                    bad.append(i)
        if bad:
            log.error(
                "%d stored vector row(s) in %s are damaged or missing; re-embedding them (run compact() to rewrite)",
                len(bad),
                self._vpath,
            )
            fixed = self._embed([records[i].content for i in bad])
            for i, v in zip(bad, fixed, strict=False):
                vecs[i] = v
                self._vectors_repaired[records[i].row] = v
        return vecs

    def _matrix(self, rows: np.ndarray) -> np.ndarray:
        """Stored vectors of live rows: a few (a hit list) read with pread, more (exact ranking) through a read-only
        map of the row file. Why not always the map: each row it touches stays in the process's RSS (file pages)."""
        few = len(rows) <= MATRIX_PREAD_ROWS
        out = self._pread_rows(self._vfd, rows.tolist()) if few else self._mapped(rows)
        if self._vectors_repaired:
            for i, row in enumerate(rows.tolist()):
                if row in self._vectors_repaired:
                    out[i] = self._vectors_repaired[row]
        return out

    def _mapped(self, rows: np.ndarray) -> np.ndarray:
        need = int(rows.max()) + 1 if len(rows) else 0
        if need > self._map_rows:
            if self._map is not None:
                with contextlib.suppress(BufferError):  # a caller may still hold a view; the GC closes it
                    self._map.close()
            size = os.fstat(self._vfd).st_size
            self._map = mmap.mmap(self._vfd, size, access=mmap.ACCESS_READ)
            if hasattr(mmap, "MADV_RANDOM"):  # rows are read scattered: readahead (~128 kB each) only fills RSS
                self._map.madvise(mmap.MADV_RANDOM)
            self._map_rows = size // self._rowbytes
        assert self._map is not None
        mat = np.frombuffer(self._map, dtype=np.float32, count=self._map_rows * self.dim).reshape(-1, self.dim)
        return mat[rows]

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vecs = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if vecs.shape != (len(texts), self.dim) or not np.isfinite(vecs).all():
            raise StoreError(f"the embedder returned shape {vecs.shape} (or non-finite values) for {len(texts)} texts")
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.where(norms == 0, 1, norms)

    # --- writing -------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """Thread lock + exclusive file lock, caught up on everything (a torn tail repaired) before writing."""
        with self._mu:
            self._refresh()
            with self._exclusive():
                yield
                # A checkpoint rewrites each index in full (hnswlib #36), so during import_ they are spaced
                # geometrically (at least half the store's size apart): O(N) bytes written in all, not O(N^2).
                every = WRITE_CHECKPOINT_RECORDS
                if self._importing:
                    every = max(every, len(self._rows) // 2)
                if self._uncovered >= every:
                    self._checkpoint_locked()

    def _write_adds(self, items: list[_NewItem]) -> list[Memory]:
        """Write the non-duplicate items (vectors already set) in one group commit; results in item order."""
        with self._writing():
            assert self._journal is not None
            fresh: list[_NewItem] = []
            out: list[Memory | None] = [None] * len(items)
            batch_keys: dict[str, int] = {}  # normalised content -> first item
            for i, it in enumerate(items):
                existing = self._duplicate_row(it.key, it.content)
                text = inputs.normalised(it.content)
                if existing is not None:
                    out[i] = self._memory_at(existing, duplicate=True)
                elif it.id and it.id in self._rows:
                    out[i] = self._memory_at(self._rows[it.id], duplicate=True)
                elif text in batch_keys:
                    it.dup_of = batch_keys[text]
                else:
                    batch_keys[text] = i
                    fresh.append(it)
            if fresh:
                missing = [it for it in fresh if it.vector is None]
                if missing:  # was a duplicate when embedding began, and has been deleted since: rare
                    for it, v in zip(missing, self._embed([it.content for it in missing]), strict=False):
                        it.vector = v
                first_row = self._next_row
                vecs = np.stack([it.vector for it in fresh]).astype(np.float32)  # type: ignore[misc]
                recs: list[dict[str, Any]] = []
                for n, it in enumerate(fresh):
                    it.id = it.id or uuid.uuid4().hex
                    recs.append(
                        {
                            "op": "add",
                            "id": it.id,
                            "content": it.content,
                            "created_at": it.created_at or inputs.now(),
                            "tags": list(it.tags),
                            "source": it.source,
                            "row": first_row + n,
                            "vcrc": f"{zlib.crc32(vecs[n].tobytes()):08x}",
                        }
                    )
                # Vectors first (written, not synced: each line's vcrc catches a row lost to power loss, which is
                # then re-embedded; see journal.py), then the journal lines that reference them, synced once.
                os.lseek(self._vfd, first_row * self._rowbytes, os.SEEK_SET)
                write_all(self._vfd, vecs.tobytes())
                self._journal.append(recs)
                self._catch_up(repair=False)
            for i, it in enumerate(items):
                if out[i] is None:
                    if it.dup_of >= 0:
                        out[i] = self._memory_at(self._rows[items[it.dup_of].id], duplicate=True)
                    else:
                        out[i] = self._memory_at(self._rows[it.id])
            return out  # type: ignore[return-value]

    @staticmethod
    def _pending(m: inputs.NewMemory) -> _NewItem:
        item = _NewItem(m.content, m.tags, m.source, inputs.content_key(m.content), m.id, m.created_at)
        item.vector = m.vector
        return item

    def _embed_missing(self, items: list[_NewItem]) -> None:
        """Embed (outside every lock) the items that are not already known duplicates and have no vector."""
        with self._mu:
            self._refresh()
            todo = [it for it in items if it.vector is None and self._duplicate_row(it.key, it.content) is None]
        if todo:  # known duplicates need no vector: the write path returns the existing memory
            for it, v in zip(todo, self._embed([it.content for it in todo]), strict=False):
                it.vector = v

    def add(self, content: str, tags: Sequence[str] | None = None, source: str | None = None) -> Memory:
        """Store one memory (durable when this returns); an exact duplicate returns the existing one.

        A new memory whose cosine to live ones reaches NEAR_DUPLICATE_SCORE is still stored, and comes back with
        `similar` = up to SIMILAR_MAX (id, score), best first, so the caller can forget an outdated one.
        (add_many and import_ skip this: bulk loads would pay one index query per item.)
        """
        item = self._pending(inputs.new_memory(content, tags, source))
        self._embed_missing([item])
        memory = self._write_adds([item])[0]
        if memory.duplicate or item.vector is None:
            return memory
        similar = self._similar(item.vector, memory.id)
        return replace(memory, similar=similar) if similar else memory

    def _similar(self, vector: np.ndarray, exclude: str) -> tuple[tuple[str, float], ...]:
        """Live memories (other than `exclude`) with cosine >= NEAR_DUPLICATE_SCORE to `vector`, best first."""
        with self._mu:
            self._refresh()
            rows, scores = self._rank(vector, SIMILAR_MAX + 1, None)
            out = []
            for row, score in zip(rows.tolist(), scores.tolist(), strict=True):
                mid = self._id_at(row)
                if mid is not None and mid != exclude and score >= NEAR_DUPLICATE_SCORE:
                    out.append((mid, round(float(score), 4)))
            return tuple(out[:SIMILAR_MAX])

    def add_many(self, items: Iterable[dict[str, Any] | str]) -> list[Memory]:
        """Store several memories with one batched embedding and one fsync; all are validated before any write."""
        new = [self._pending(m) for m in inputs.new_memories(items)]
        if not new:
            return []
        self._embed_missing(new)
        return self._write_adds(new)

    def delete(self, memory_id: str) -> bool:
        """Delete a memory for good (durable when this returns); False if there is no such memory."""
        mid = inputs.check_id(memory_id)
        with self._writing():
            assert self._journal is not None
            if mid not in self._rows:
                return False
            self._journal.append([{"op": "del", "id": mid, "at": inputs.now()}])
            self._catch_up(repair=False)
            return True

    # --- reading -------------------------------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory | None:
        mid = inputs.check_id(memory_id)
        with self._mu:
            self._refresh()
            row = self._rows.get(mid)
            return None if row is None else self._memory_at(row)

    def list_recent(self, limit: int = 10, tags: Sequence[str] | None = None) -> list[Memory]:
        """Newest first; with `tags`, only memories sharing at least one of them."""
        limit = inputs.check_limit(limit)
        wanted = inputs.check_tags(tags)
        with self._mu:
            self._refresh()
            if wanted:
                top = heapq.nlargest(limit, self._tag_union(wanted).tolist(), key=self._time_key)
            else:
                top = self._times[-limit:][::-1]
            return [self._memory_at(row) for row in top]

    def _tag_union(self, tags: Sequence[str]) -> np.ndarray:
        """Live rows carrying any of `tags`, sorted."""
        parts = [self._tag_rows.rows(t, self._alive) for t in tags]
        return parts[0] if len(parts) == 1 else columns.sorted_union(*parts)

    def search(
        self,
        query: str,
        limit: int = 5,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        since: str | date | None = None,
        until: str | date | None = None,
        min_score: float | None = None,
        mode: str = "hybrid",
        *,
        query_vector: Sequence[float] | np.ndarray | None = None,
    ) -> list[Hit]:
        """See backend.MemoryBackend.search."""
        req = inputs.search_request(query, limit, tags, source, since, until, min_score, mode)
        if query_vector is not None:
            q = inputs.check_vector(query_vector, self.dim, "query_vector")
        else:
            q = np.asarray(self.embedder.embed_query(req.query), dtype=np.float32).reshape(-1)
        return self._search(q, req.limit, req.filter, req.min_score, text=req.query, mode=req.mode)

    def search_by_vector(
        self,
        vector: Sequence[float] | np.ndarray,
        limit: int = 5,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        since: str | date | None = None,
        until: str | date | None = None,
        min_score: float | None = None,
    ) -> list[Hit]:
        """`search(mode="semantic")` with a ready query vector and no query text (kept for callers that embed)."""
        q = inputs.check_vector(vector, self.dim, "vector")
        n = inputs.check_limit(limit)
        filters = inputs.search_filter(tags, source, since, until)
        return self._search(q, n, filters, inputs.check_min_score(min_score))

    def _candidates(self, f: inputs.SearchFilter) -> np.ndarray | None:
        """Rows of live memories matching every filter, or None when there is no filter (all of them)."""
        lo, hi, hi_inclusive = f.since, f.until, f.until_inclusive
        rows: np.ndarray | None = None  # sorted, unique
        if f.tags:
            rows = self._tag_union(f.tags)
        if f.source is not None:
            by_source = self._source_rows.rows(f.source, self._alive)
            rows = by_source if rows is None else np.intersect1d(rows, by_source, assume_unique=True)
        if lo is None and hi is None:
            return rows
        times, key = self._times, self._time_key
        i = 0 if lo is None else bisect.bisect_left(times, (lo, -1), key=key)
        if hi is None:
            j = len(times)
        else:
            j = (
                bisect.bisect_right(times, (hi, 1 << 62), key=key)
                if hi_inclusive
                else bisect.bisect_left(times, (hi, -1), key=key)
            )
        if rows is None or j - i <= len(rows):
            in_range = np.asarray(times[i:j], dtype=np.int64)
            if rows is not None:
                in_range = in_range[np.isin(in_range, rows, assume_unique=True)]
            return in_range
        created = self._created.a[rows]
        if self._created.fixed:  # ASCII: bytes order is str order
            lo_v: Any = None if lo is None else lo.encode("ascii")
            hi_v: Any = None if hi is None else hi.encode("ascii")
        else:
            lo_v, hi_v = lo, hi
        keep = np.ones(len(rows), dtype=bool)
        if lo_v is not None:
            keep &= created >= lo_v
        if hi_v is not None:
            keep &= (created <= hi_v) if hi_inclusive else (created < hi_v)
        return rows[keep]

    def _search(
        self,
        q: np.ndarray,
        limit: int,
        filters: inputs.SearchFilter,
        min_score: float | None,
        *,
        text: str = "",
        mode: str = "semantic",
    ) -> list[Hit]:
        with self._mu:
            self._refresh()
            cand = self._candidates(filters)  # filters first: both rankings see only these rows
            if mode == "semantic" or not text:
                rows, scores = self._rank(q, limit, cand)
            else:
                rows, scores = self._fused(q, text, limit, cand, mode == "keyword", min_score is not None)
            hits: list[Hit] = []
            for row, score in zip(rows.tolist(), scores.tolist(), strict=True):
                if (min_score is not None and score < min_score) or self._id_at(row) is None:
                    continue
                hits.append(Hit(self._memory_at(row), float(score)))
                if len(hits) == limit:
                    break
            return hits

    def _fused(
        self, q: np.ndarray, text: str, limit: int, cand: np.ndarray | None, keyword_only: bool, deep: bool
    ) -> tuple[np.ndarray, np.ndarray]:
        """Rows in keyword (BM25) or hybrid (RRF) order, each with its cosine similarity to `q` (computed from the
        stored vectors, also for keyword-only rows); `limit` of them, or with `deep` all (min_score drops some).

        Hybrid fuses the top FUSION_DEPTH of each ranking; a `limit` beyond what that yields is filled from the
        fusion of the deeper rankings, after it, so the first results never depend on `limit`.
        """
        depth = max(limit, FUSION_DEPTH)
        words = [row for row, _ in self._kindex.search(text, depth, cand)]
        if keyword_only:
            rows = np.asarray(words, dtype=np.int64)
        else:
            near = self._rank(q, depth, cand)[0].tolist()
            order = hybrid_order(near, words, self._created_at)
            rows = np.asarray(order, dtype=np.int64)
        if not deep:
            rows = rows[:limit]
        if len(rows) == 0:
            return rows, np.empty(0, dtype=np.float32)
        return rows, np.einsum("ij,j->i", self._matrix(rows), q)

    def _rank(self, q: np.ndarray, limit: int, cand: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
        """Top rows among `cand` (None = all): exact for small sets, HNSW otherwise, never fewer than possible."""
        total = len(self._rows) if cand is None else len(cand)
        k = min(limit, total)
        if k == 0:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        if cand is not None and total <= self._brute_force_max():
            return self._exact(q, k, cand)
        allowed = None if cand is None else set(cand.tolist())
        try:
            rows, scores = self._vindex.search(q, k, None if allowed is None else allowed.__contains__)
        except RuntimeError:  # hnswlib found fewer than k (a sparse filter): rank exactly instead
            rows = np.empty(0, dtype=np.int64)
            scores = np.empty(0, dtype=np.float32)
        if len(rows) < k:
            all_rows = cand if cand is not None else np.flatnonzero(self._alive[: self._next_row])
            return self._exact(q, k, all_rows)
        return rows, scores

    def _exact(self, q: np.ndarray, k: int, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        # einsum, not `@`: a matrix-vector product through multi-threaded BLAS took 10-30x longer on a busy 2-core
        # machine (thread oversubscription); einsum stays single-threaded and is as fast when idle.
        scores = np.einsum("ij,j->i", self._matrix(rows), q)
        top = np.argpartition(-scores, k - 1)[:k] if k < len(rows) else np.arange(len(rows))
        top = top[np.lexsort((rows[top], -scores[top]))]
        return rows[top], scores[top]

    def tag_counts(self) -> dict[str, int]:
        """Live memories per tag, most used first."""
        with self._mu:
            self._refresh()
            counts = ((t, len(self._tag_rows.rows(t, self._alive))) for t in self._tag_rows.names())
            return dict(sorted(((t, c) for t, c in counts if c), key=lambda kv: (-kv[1], kv[0])))

    def stats(self) -> dict[str, Any]:
        with self._mu:
            self._refresh()
            on_disk = _folder_bytes(self.folder)
            return {
                "count": len(self._rows),
                "collection": self.collection,
                "path": str(self.folder),
                "model": str(self.embedder.model_name),
                "dim": self.dim,
                "index": self._vindex.params(),
                "bytes_on_disk": on_disk,
                "journal_bytes": self._offset,
                "deleted_pending_compaction": self._next_row - len(self._rows),
            }

    # --- bulk: export / import / compact ----------------------------------------------------------------------

    def export(self, include_vectors: bool = False) -> Iterator[dict[str, Any]]:
        """Every live memory as a plain dict, oldest first; with `include_vectors`, also "vector" (list of floats).

        A snapshot taken at the first next(); vectors let import_ skip re-embedding (same model only).
        """
        with self._mu:
            self._refresh()
            assert self._journal is not None
            generation = self._journal.generation
            # The snapshot is taken by column (~110 MB at 1M memories; records would be ~0.5 GB): copies of the
            # rows' ids, created_at, text offsets, tags and sources, and the text buffer itself, whose bytes never
            # change (it is only appended to, or replaced by a compacted copy; see columns.TextHeap).
            rows = np.asarray(self._times, dtype=np.int64)
            ids, created = self._rows.ids.a[rows], self._created.a[rows]
            texts, starts, ends = self._contents.buf, self._contents.start[rows], self._contents.end[rows]
            tags = list(map(self._tags.__getitem__, rows.tolist()))
            sources = list(map(self._sources.__getitem__, rows.tolist()))
        for i in range(0, len(rows), IMPORT_BATCH):
            batch = [
                AddRecord(
                    columns.as_str(ids[j]),
                    texts[starts[j] : ends[j]].decode("utf-8", "surrogatepass"),
                    columns.as_str(created[j]),
                    tags[j],  # type: ignore[arg-type]
                    sources[j],  # type: ignore[arg-type]
                    int(rows[j]),
                )
                for j in range(i, min(i + IMPORT_BATCH, len(rows)))
            ]
            vecs = None
            if include_vectors:
                with self._mu:
                    assert self._journal is not None
                    if self._journal.generation != generation or self._journal.replaced():
                        raise StoreError("the store was compacted during export; run the export again")
                    vecs = self._vectors_for(batch)
            for n, r in enumerate(batch):
                d = _memory(r).to_dict()
                if vecs is not None:
                    d["vector"] = vecs[n].tolist()
                yield d

    def import_(self, records: Iterable[dict[str, Any]]) -> int:
        """Add exported records, keeping id and created_at; skips known ids and duplicate content.

        Records with a "vector" (from the same model) are not re-embedded: the bulk-load path. Work goes in batches
        of IMPORT_BATCH, each validated in full before it is written; on an error, earlier batches stay written
        and running the import again skips them. Returns how many memories were added.
        """
        added = 0
        batch: list[_NewItem] = []
        ids: set[str] = set()
        with self._mu:
            self._importing += 1
        try:
            for n, rec in enumerate(records):
                item = self._pending(inputs.imported_memory(rec, n, self.dim))
                if item.id:
                    if item.id in ids:  # which of the two would win is a guess: refuse rather than lose one
                        raise InvalidInputError(f"records[{n}].id {item.id} appears twice in this import")
                    ids.add(item.id)
                batch.append(item)
                if len(batch) >= IMPORT_BATCH:
                    added += self._import_batch(batch)
                    batch = []
            if batch:
                added += self._import_batch(batch)
        finally:
            with self._mu:
                self._importing -= 1
        with self._mu:
            if self._uncovered >= CHECKPOINT_RECORDS:
                self._checkpoint()
        return added

    def _import_batch(self, batch: list[_NewItem]) -> int:
        with self._mu:
            self._refresh()
            batch = [
                it
                for it in batch
                if not (it.id and it.id in self._rows) and self._duplicate_row(it.key, it.content) is None
            ]
        if not batch:
            return 0
        self._embed_missing(batch)
        return sum(1 for m in self._write_adds(batch) if not m.duplicate)

    def compact(self) -> dict[str, Any]:
        """Rewrite journal and vectors without deleted memories (see journal.py for why a crash here is safe).

        The slow part (copying every live memory and building the new generation's vector index; labels are rows,
        which change) runs without the cross-process lock, from a snapshot of the live memories; other processes
        keep writing meanwhile. The exclusive lock is held only to append what changed since, rename the new files
        into place and switch the journal: about the cost of an ordinary write plus the changes to copy.
        """
        with self._mu:
            self._refresh()
            assert self._journal is not None
            old_generation = self._journal.generation
            before = _folder_bytes(self.folder)
            removed = self._next_row - len(self._rows)
            live = [self._record(row) for row in self._times]
            crcs = self._vcrc.copy()
            repaired = dict(self._vectors_repaired)
            header = {k: v for k, v in self._journal.header.items() if k not in ("crc", "op", "format")}
            src = os.open(self._vpath, os.O_RDONLY)
        generation = uuid.uuid4().hex
        files = {ext: self.folder / f"compacting-{generation}.{ext}" for ext in ("f32", "jsonl", "hnsw", "snap")}
        try:
            try:
                meta = self._compact_copy(live, crcs, repaired, src, generation, header, files)
            finally:
                os.close(src)
            with self._mu:
                self._refresh()
                with self._lock.hold(exclusive=True):
                    self._catch_up(repair=True)
                    assert self._journal is not None
                    if self._journal.replaced() or self._journal.generation != old_generation:
                        log.info("another process compacted %s meanwhile; dropping this compaction", self.folder)
                    else:
                        self._compact_switch(live, generation, files, meta)
                self._load()
                after = _folder_bytes(self.folder)
                count = len(self._rows)
        finally:
            for p in files.values():
                with contextlib.suppress(OSError):
                    p.unlink()
        return {"count": count, "removed": removed, "bytes_before": before, "bytes_after": after}

    def _compact_copy(
        self,
        live: list[AddRecord],
        crcs: np.ndarray,
        repaired: dict[int, np.ndarray],
        src: int,
        generation: str,
        header: dict[str, Any],
        files: dict[str, Path],
    ) -> dict[str, Any]:
        """Unlocked part of compact(): `live` renumbered 0..n-1 into the compacting-* files; returns the graph's
        checkpoint. Reads the old vector rows through `src` (rows are append-only, so no lock is needed)."""
        v = self._vindex
        index = VectorIndex(self.dim, M=v.M, ef_construction=v.ef_construction, ef=v.ef)
        scratch = MemoryStore.__new__(MemoryStore)  # metadata of the new generation, for its snapshot
        scratch._closed = True
        scratch._reset_state()
        Journal.create(files["jsonl"], {**header, "generation": generation, "compacted_at": inputs.now()})
        vfd = os.open(files["f32"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        jfd = os.open(files["jsonl"], os.O_WRONLY | os.O_APPEND)
        try:
            for i in range(0, len(live), 10_000):
                batch = live[i : i + 10_000]
                vecs = self._pread_rows(src, [r.row for r in batch])
                bad = []
                for n, r in enumerate(batch):
                    if r.row in repaired:
                        vecs[n] = repaired[r.row]
                    elif crcs[r.row] >= 0 and zlib.crc32(vecs[n].tobytes()) != crcs[r.row]:
                        bad.append(n)
                if bad:
                    log.error("%d vector row(s) damaged or missing; re-embedding them for compaction", len(bad))
                    for n, v in zip(bad, self._embed([batch[n].content for n in bad]), strict=True):
                        vecs[n] = v
                write_all(vfd, vecs.tobytes())
                lines = []
                for n, r in enumerate(batch):
                    crc = zlib.crc32(vecs[n].tobytes())
                    scratch._meta_add(AddRecord(r.id, r.content, r.created_at, r.tags, r.source, i + n))
                    scratch._vcrc[i + n] = crc
                    lines.append(encode_line(_add_line(r, i + n, crc)))
                write_all(jfd, b"".join(lines))
                index.add_rows(np.arange(i, i + len(batch), dtype=np.int64), vecs)
            fsync_fd(vfd)
            fsync_fd(jfd)
        finally:
            os.close(vfd)
            os.close(jfd)
        offset = files["jsonl"].stat().st_size
        stamp = {"generation": generation, "offset": offset, "count": len(live)}
        meta = index.write_graph(self.folder, stamp, name=files["hnsw"].name)
        with open(files["jsonl"], "rb") as f:
            f.seek(offset - 11)
            line_crc = f.read(8).decode("ascii")
        snap = {**stamp, "line_crc": line_crc, "python": list(sys.version_info[:2]), "format": SNAPSHOT_FORMAT}
        write_snapshot(files["snap"], snap, scratch._meta_payload())
        return meta

    def _pread_rows(self, fd: int, rows: Sequence[int]) -> np.ndarray:
        """Vector rows from `fd`, consecutive rows in one read; rows past the end of the file come back as zeros."""
        out = np.zeros((len(rows), self.dim), dtype=np.float32)
        i = 0
        while i < len(rows):
            j = i + 1
            while j < len(rows) and rows[j] == rows[j - 1] + 1 and j - i < 65536:
                j += 1
            data = os.pread(fd, (j - i) * self._rowbytes, rows[i] * self._rowbytes)
            whole = len(data) // self._rowbytes
            if whole:  # (reshape(0, -1) raises: all of these rows lie past the end)
                out[i : i + whole] = np.frombuffer(data, dtype=np.float32, count=whole * self.dim).reshape(whole, -1)
            i = j
        return out

    def _compact_switch(
        self, live: list[AddRecord], generation: str, files: dict[str, Path], meta: dict[str, Any]
    ) -> None:
        """Locked part of compact(): append the changes since the copy, rename everything into place, switch."""
        copied = {r.id for r in live}
        live_rows = np.flatnonzero(self._alive[: self._next_row]).tolist()
        added = [self._record(row) for row in live_rows if self._id_at(row) not in copied]
        gone = [r for r in live if r.id not in self._rows]
        if added or gone:
            vfd = os.open(files["f32"], os.O_WRONLY)
            jfd = os.open(files["jsonl"], os.O_WRONLY | os.O_APPEND)
            try:
                lines = []
                if added:
                    vecs = self._vectors_for(added)
                    os.pwrite(vfd, vecs.tobytes(), len(live) * self._rowbytes)
                    for n, r in enumerate(added):
                        lines.append(encode_line(_add_line(r, len(live) + n, zlib.crc32(vecs[n].tobytes()))))
                lines += [encode_line({"op": "del", "id": r.id, "at": inputs.now()}) for r in gone]
                write_all(jfd, b"".join(lines))
                fsync_fd(vfd)
                fsync_fd(jfd)
            finally:
                os.close(vfd)
                os.close(jfd)
        os.replace(files["f32"], self.folder / f"vectors-{generation}.f32")
        os.replace(files["snap"], self._meta_path(generation))
        fsync_dir(self.folder)
        os.replace(files["jsonl"], self.folder / JOURNAL_NAME)  # the atomic switch to the new generation
        fsync_dir(self.folder)
        graph = f"index-{uuid.uuid4().hex[:12]}.hnsw"
        os.replace(files["hnsw"], self.folder / graph)
        VectorIndex.commit(self.folder, {**meta, "file": graph})

    def _cleanup_other_generations(self) -> None:
        """Remove vector and temp files of other generations (left by a compaction); exclusive lock held."""
        assert self._journal is not None
        if self._journal.replaced():
            return
        snap = self._meta_path(self._journal.generation)
        for p in self.folder.iterdir():
            name = p.name
            if (
                (name.startswith("vectors-") and p != self._vpath)
                or (name.startswith("meta-") and name.endswith(".snap") and p != snap)
                or name.endswith(".compact-tmp")
                or (name.startswith("compacting-") and _age_s(p) > COMPACTING_STALE_S)  # a compaction that died
            ):
                with contextlib.suppress(OSError):
                    p.unlink()

    # --- checkpoints and closing ---------------------------------------------------------------------------------

    def _checkpoint(self) -> None:
        with self._exclusive():
            self._checkpoint_locked()

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[None]:
        """The exclusive file lock on the journal that is current, caught up (a torn tail repaired).

        Another process may compact while we wait for the lock: its switch renames a new journal over the one we
        hold open, and a line appended to the old, unlinked file would be acknowledged and then lost. So after
        taking the lock, check the journal is still the current one; if not, reload and take the lock again.
        """
        while True:
            with self._lock.hold(exclusive=True):
                assert self._journal is not None
                if not self._journal.replaced():
                    self._catch_up(repair=True)
                    yield
                    return
            log.info("journal %s was replaced while waiting for the lock; reloading", self._journal.path)
            self._load()

    def _checkpoint_locked(self) -> None:
        """Save every derived index with the journal position it covers (caller holds the exclusive lock)."""
        assert self._journal is not None
        try:
            self._persist_repairs()
            fsync_fd(self._vfd)  # rows are written unsynced; those a checkpoint covers must be on disk
        except OSError as exc:
            log.warning("could not sync the vector file before a checkpoint: %s", exc)
            return
        stamp = {"generation": self._journal.generation, "offset": self._offset, "count": len(self._rows)}
        for d in self._derived:
            if d.persistent and self._saved_at.get(d.name) == self._offset:
                continue  # its checkpoint on disk already covers this position
            try:
                d.save(self.folder, stamp)
                self._saved_at[d.name] = self._offset
            except OSError as exc:  # a failed checkpoint costs replay time on the next open, never data
                log.warning("could not save the %s index checkpoint: %s", d.name, exc)
                return
        try:
            self._save_meta(stamp)
        except OSError as exc:
            log.warning("could not save the metadata snapshot: %s", exc)
        self._uncovered = 0

    def _persist_repairs(self) -> None:
        """Write re-embedded vector rows back, synced, then a `vfix` line with each new CRC (exclusive lock held)."""
        assert self._journal is not None
        fixes = sorted((row, v) for row, v in self._vectors_repaired.items() if self._id_at(row) is not None)
        if not fixes:
            self._vectors_repaired.clear()
            return
        lines = []
        for row, v in fixes:
            data = np.asarray(v, dtype=np.float32).tobytes()
            os.pwrite(self._vfd, data, row * self._rowbytes)
            lines.append({"op": "vfix", "row": row, "vcrc": f"{zlib.crc32(data):08x}"})
        fsync_fd(self._vfd)
        self._journal.append(lines)
        self._catch_up(repair=False)
        log.warning("rewrote %d re-embedded vector row(s) in %s", len(fixes), self._vpath)

    def _close_files(self) -> None:
        if getattr(self, "_map", None) is not None:
            with contextlib.suppress(BufferError):
                self._map.close()  # type: ignore[union-attr]
            self._map = None
        if self._journal is not None:
            self._journal.close()
            self._journal = None
        if self._vfd >= 0:
            os.close(self._vfd)
            self._vfd = -1

    def close(self) -> None:
        """Checkpoint if worthwhile, then release files. Safe to call twice."""
        with self._mu:
            if self._closed:
                return
            try:
                if self._journal is not None and self._uncovered >= CHECKPOINT_RECORDS:
                    self._refresh()
                    self._checkpoint()
            except Exception as exc:  # closing must not fail on a checkpoint: the journal has everything
                log.warning("checkpoint on close failed: %s", exc)
            self._closed = True
            self._close_files()
            self._lock.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if not self._closed:
                self._close_files()
                self._lock.close()
