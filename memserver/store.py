"""MemoryStore: the local engine: durable, crash-safe, multi-process memory with search by meaning.

It implements backend.MemoryBackend (whose docstrings are the contract) over parts that each own one thing:

    journal.py     the record of truth (append-only lines, the crash story) and the cross-process lock
    catalog.py     the live memories' metadata by row, and the lookups on it
    snapshot.py    the catalog saved at a checkpoint, so an open need not replay the whole journal
    vectors.py     the vector row file, its CRC checks and the repair of damaged rows
    index.py, keyword.py   the derived indexes (HNSW, BM25), checkpointed beside the journal
    replay.py      the journal's record shapes, and how far replay and checkpoints stand (Coverage)
    search.py      exact vs HNSW, keyword and hybrid rankings over the candidates that pass the filters
    compaction.py  a new generation without the deleted memories, switched in under the lock

This class keeps the orchestration: the locks, opening and catching up (one replay path, `_apply`, for this
process's own writes, for other processes' writes and for the journal tail past a checkpoint), the write path, and
the public methods. Every call first checks (one stat) whether the journal grew or was replaced.

Locks, always in this order: the thread lock (`_thread_lock`, reentrant) serialises all calls in a process
(hnswlib does not lock reads against inserts; embedding runs outside it); then the file lock (`_file_lock`) across
processes: writers hold it exclusively, readers catching up hold it shared. This module never imports mcp, and
imports the Embedder (onnxruntime) only when none is given.
"""

from __future__ import annotations

import bisect
import contextlib
import gc
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memserver import config, inputs, replay, snapshot
from memserver.backend import Hit, Memory
from memserver.catalog import Catalog
from memserver.compaction import Compaction, remove_other_generations
from memserver.errors import InvalidInputError, ModelMismatchError, StoreError
from memserver.hooks import StoreHooks
from memserver.index import VectorIndex
from memserver.journal import JOURNAL_NAME, LOCK_NAME, AddRecord, DerivedIndex, FileLock, Journal
from memserver.keyword import KeywordDerivedIndex
from memserver.search import Searcher
from memserver.vectors import VectorFile, row_crc, vector_path

if TYPE_CHECKING:
    from memserver.embedder import TextEmbedder

__all__ = ["Hit", "Memory", "MemoryStore", "StoreHooks"]

log = logging.getLogger(__name__)

# Checkpoint the derived indexes when this many journal records are not covered by the checkpoint on disk
# (on open, close and after import_), and from the write path only past WRITE_CHECKPOINT_RECORDS.
CHECKPOINT_RECORDS = 200
WRITE_CHECKPOINT_RECORDS = 5000
IMPORT_BATCH = 1000
REBUILD_BATCH = 10_000


@dataclass
class _Pending:
    """A checked memory on its way to the journal (`vector` set once embedded; `dup_of` an earlier item)."""

    content: str
    tags: tuple[str, ...]
    source: str
    key: int  # inputs.content_key(content)
    id: str = ""
    created_at: str = ""
    vector: np.ndarray | None = None
    dup_of: int = -1  # index of an earlier item with the same content in the same batch

    @classmethod
    def of(cls, m: inputs.NewMemory) -> _Pending:
        return cls(m.content, m.tags, m.source, inputs.content_key(m.content), m.id, m.created_at, m.vector)


def folder_bytes(folder: Path) -> int:
    """Bytes of the files in `folder`; other processes create and remove temp files meanwhile, so skip vanished ones."""
    total = 0
    for entry in os.scandir(folder):
        with contextlib.suppress(FileNotFoundError):
            if entry.is_file():
                total += entry.stat().st_size
    return total


class MemoryStore:
    """A collection of memories in `<path>/<collection>/`, safe to share between threads and processes.

    Example::

        with MemoryStore("/tmp/mem", "demo", embedder=my_embedder) as store:
            m = store.add("The staging DB password rotates every Monday", tags=["ops"])
            hits = store.search("when does the password change?", limit=3)

    `hooks` (hooks.StoreHooks) lets tests and benchmarks watch or hold points inside the store.
    """

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
        hooks: StoreHooks | None = None,
    ) -> None:
        if embedder is None:
            from memserver.embedder import Embedder  # onnxruntime only when the caller brings no embedder

            embedder = Embedder()
        self.embedder: TextEmbedder = embedder
        self.dim = int(embedder.dim)
        self.hooks = hooks or StoreHooks()
        root = Path(os.path.abspath(os.path.expanduser(path))) if path is not None else config.data_dir()
        self.collection = config.validate_collection(collection) if collection else config.collection_name()
        self.folder = root / self.collection
        self.folder.mkdir(parents=True, exist_ok=True)
        self._thread_lock = threading.RLock()
        self._file_lock = FileLock(self.folder / LOCK_NAME, timeout=lock_timeout)
        params = {"M": M, "ef_construction": ef_construction, "ef": ef}
        self._vindex = VectorIndex(self.dim, **{k: v for k, v in params.items() if v is not None})
        self._kindex = KeywordDerivedIndex()  # keyed by row too (see keyword.py)
        self._derived: list[DerivedIndex] = [self._vindex, self._kindex]  # every one follows `_apply`
        self._journal: Journal | None = None
        self._vectors: VectorFile | None = None
        self._catalog = Catalog()
        self._coverage = replay.Coverage()
        self._searcher: Searcher  # made by each load, over that generation's parts
        self._importing = 0  # import_ calls in progress (they space write-path checkpoints out; see _writing)
        self._closed = False
        with self._thread_lock:
            self._load()

    # --- opening, replay, catching up -------------------------------------------------------------------------

    def _files(self) -> tuple[Journal, VectorFile]:
        """The open journal and vector file (StoreError once closed)."""
        if self._journal is None or self._vectors is None:
            raise StoreError("the store is closed")
        return self._journal, self._vectors

    def _open_files(self) -> tuple[Journal, VectorFile]:
        path = self.folder / JOURNAL_NAME
        if not path.exists():
            with self._file_lock.hold(exclusive=True):
                if not path.exists():
                    header = {"generation": uuid.uuid4().hex, "dim": self.dim, "model": str(self.embedder.model_name)}
                    Journal.create(path, {**header, "created_at": inputs.now()})
        journal = self._journal = Journal(path)
        header = journal.header
        if header.get("dim") != self.dim or header.get("model") != str(self.embedder.model_name):
            journal.close()
            raise ModelMismatchError(
                f"collection {self.collection!r} at {self.folder} holds vectors of model {header.get('model')!r} "
                f"(dim {header.get('dim')}), but the embedder is {self.embedder.model_name!r} (dim {self.dim}); "
                "use the same model, or another collection (MCP_MEMORY_COLLECTION)"
            )
        vectors = self._vectors = VectorFile(vector_path(self.folder, journal.generation), self.dim)
        return journal, vectors

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
        journal, vectors = self._open_files()
        self._catalog = Catalog()
        cov = self._coverage
        cov.begin_load(journal.header_end)
        with self._file_lock.hold(exclusive=False):
            stamps: dict[str, dict[str, Any] | None] = {}
            # The vector index's graph file is checksummed in a thread (1M memories: ~1 s) while the other indexes
            # and the metadata snapshot load; the graph itself is loaded last.
            vector_offset = self._vindex.prepare(self.folder, journal.generation)
            for d in self._derived:
                if d is not self._vindex:
                    self._load_checkpoint(d, stamps)
            # The metadata snapshot may stand in for replaying the journal up to its offset, if no loaded index
            # checkpoint is older than it (those are fed by the replay from their own offsets on). The vector
            # checkpoint counts at the offset it claims: if it then fails its checks and is rebuilt, the floor
            # was only lower than needed (a snapshot past it is replayed over instead: slower, never wrong).
            restored = snapshot.load(
                snapshot.snapshot_path(self.folder, journal.generation),
                journal.generation,
                journal.path,
                journal.identity,
                journal.header_end,
                cov.snapshot_floor(vector_offset),
            )
            if restored is not None:
                self._catalog, crcs, cov.offset = restored
                vectors.restore_crcs(crcs)
            self._load_checkpoint(self._vindex, stamps)
            cov.start_replay(len(self._catalog))
            torn = self._catch_up(repair=False)
        self._searcher = Searcher(self._catalog, vectors, self._vindex, self._kindex, self.hooks)
        rebuild = set(cov.untrusted(stamps))
        for d in self._derived:
            if d.name in rebuild:
                self._rebuild(d)
        with self._file_lock.hold(exclusive=True):
            if torn:
                self._catch_up(repair=True)
            if not journal.replaced():
                remove_other_generations(self.folder, journal.generation)
        self.hooks.opened(cov.replayed, restored is not None)
        if (
            cov.uncovered >= CHECKPOINT_RECORDS
            or (rebuild and len(self._catalog))
            or vectors.repaired
            or (restored is None and len(self._catalog) >= CHECKPOINT_RECORDS)
        ):
            self._checkpoint()

    def _load_checkpoint(self, d: DerivedIndex, stamps: dict[str, dict[str, Any] | None]) -> None:
        """Load one derived index's checkpoint; one that has none is reset, to be rebuilt in bulk after the replay."""
        d.reset()
        stamps[d.name] = stamp = d.load(self.folder, self._files()[0].generation)
        if stamp is None:
            d.reset()
        self._coverage.loaded_checkpoint(d.name, None if stamp is None else int(stamp["offset"]))

    def _rebuild(self, d: DerivedIndex) -> None:
        """Bulk-rebuild one derived index from the live records and their stored vectors (no re-embedding)."""
        _, vectors = self._files()
        t0 = time.perf_counter()
        d.reset()
        live = self._catalog.live_rows().tolist()
        for i in range(0, len(live), REBUILD_BATCH):
            batch = [self._catalog.record(row) for row in live[i : i + REBUILD_BATCH]]
            d.add(batch, vectors.checked(batch, self._embed))
        if live:
            log.info("rebuilt the %s index of %d memories in %.1f s", d.name, len(live), time.perf_counter() - t0)

    def _catch_up(self, repair: bool) -> bool:
        """Apply every good journal line past our offset; returns True if a torn tail is left (not repaired).

        With `repair` (exclusive lock held), a torn tail is set aside and cut off.
        """
        journal, _ = self._files()
        cov = self._coverage
        while True:
            result = journal.read(cov.offset)
            if result.entries:
                cov.replayed += len(result.entries)
                self._apply(result.entries)
            cov.offset = result.end
            if result.done:
                break
        size = result.size
        torn = size > cov.offset
        if torn and repair:
            journal.set_aside_tail(cov.offset)
            size, torn = cov.offset, False
        cov.seen = (journal.identity, size)
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
        elif (ident, size) != self._coverage.seen:
            with self._file_lock.hold(exclusive=False):
                self._catch_up(repair=False)

    def _apply(self, entries: Sequence[tuple[int, dict[str, Any]]]) -> None:
        """The one replay path: journal records -> the catalog and the vector CRCs, then every derived index."""
        catalog, (_, vectors), cov = self._catalog, self._files(), self._coverage
        marks, covered = cov.marks, cov.covered
        pending: list[tuple[int, AddRecord]] = []
        past = 0  # records applied past `covered`
        for end, rec in entries:
            op = rec.get("op")
            if op == "add":
                r = replay.added(rec)
                if not catalog.add(r):  # a live id or a used row added again: cannot happen; be safe anyway
                    continue
                if "vcrc" in rec:
                    vectors.expect(r.row, int(rec["vcrc"], 16))
                pending.append((end, r))
            elif op == "del":
                row = catalog.row_of(rec.get("id", ""))
                if row is None:
                    continue
                self._feed_indexes(pending)
                pending = []
                gone = catalog.record(row)
                catalog.remove(gone)
                for d in self._derived:
                    if end > cov.feeds_from(d.name):
                        d.remove([gone])
            elif op == "vfix":  # a re-embedded vector row was written back (see VectorFile.write_back_repairs)
                vectors.fixed(int(rec["row"]), int(rec["vcrc"], 16))
            else:
                continue
            past += end > covered
            if end in marks:
                cov.reached(end, len(catalog))
        cov.uncovered += past
        self._feed_indexes(pending)

    def _feed_indexes(self, pending: list[tuple[int, AddRecord]]) -> None:
        """Give the derived indexes the added records (with their checked vectors) past each one's checkpoint."""
        if not pending:
            return
        # Each index takes the records past its checkpoint: a suffix of `pending` (journal order), so the vectors
        # are read once, for the longest suffix, and sliced for the others.
        starts = [bisect.bisect_right(pending, self._coverage.feeds_from(d.name), key=_end) for d in self._derived]
        first = min(starts)
        if first == len(pending):
            return
        records = [r for _, r in pending[first:]]
        vecs = self._files()[1].checked(records, self._embed)
        for d, start in zip(self._derived, starts, strict=True):
            if start < len(pending):
                d.add(records[start - first :], vecs[start - first :])

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vecs = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if vecs.shape != (len(texts), self.dim) or not np.isfinite(vecs).all():
            raise StoreError(f"the embedder returned shape {vecs.shape} (or non-finite values) for {len(texts)} texts")
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.where(norms == 0, 1, norms)

    # --- writing -------------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Journal]:
        """Thread lock + exclusive file lock, caught up on everything (a torn tail repaired) before writing."""
        with self._thread_lock:
            self._refresh()
            with self._exclusive() as journal:
                yield journal
                # A checkpoint rewrites each index in full (hnswlib #36), so during import_ they are spaced
                # geometrically (at least half the store's size apart): O(N) bytes written in all, not O(N^2).
                every = WRITE_CHECKPOINT_RECORDS
                if self._importing:
                    every = max(every, len(self._catalog) // 2)
                if self._coverage.uncovered >= every:
                    self._checkpoint_locked()

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[Journal]:
        """The exclusive file lock on the journal that is current, caught up (a torn tail repaired).

        Another process may compact while we wait for the lock: its switch renames a new journal over the one we
        hold open, and a line appended to the old, unlinked file would be acknowledged and then lost. So after
        taking the lock, check the journal is still the current one; if not, reload and take the lock again.
        """
        while True:
            self.hooks.taking_exclusive_lock()
            with self._file_lock.hold(exclusive=True):
                journal = self._files()[0]
                if not journal.replaced():
                    self._catch_up(repair=True)
                    yield journal
                    return
            log.info("journal %s was replaced while waiting for the lock; reloading", journal.path)
            self._load()

    def _write_adds(self, items: list[_Pending]) -> list[Memory]:
        """Write the non-duplicate items (vectors already set) in one group commit; results in item order."""
        with self._writing() as journal:
            catalog, (_, vectors) = self._catalog, self._files()
            fresh: list[_Pending] = []
            out: list[Memory | None] = [None] * len(items)
            batch_keys: dict[str, int] = {}  # normalised content -> first item
            for i, it in enumerate(items):
                existing = catalog.duplicate_row(it.key, it.content)
                if existing is None and it.id:
                    existing = catalog.row_of(it.id)  # an imported id that is live already
                text = inputs.normalised(it.content)
                if existing is not None:
                    out[i] = catalog.memory(existing, duplicate=True)
                elif text in batch_keys:
                    it.dup_of = batch_keys[text]
                else:
                    batch_keys[text] = i
                    fresh.append(it)
            if fresh:
                missing = [it for it in fresh if it.vector is None]
                if missing:  # was a duplicate when embedding began, and has been deleted since: rare
                    for it, v in zip(missing, self._embed([it.content for it in missing]), strict=True):
                        it.vector = v
                first_row = catalog.next_row
                vecs = np.stack([_vector(it) for it in fresh]).astype(np.float32)
                lines: list[dict[str, Any]] = []
                for n, it in enumerate(fresh):
                    it.id = it.id or uuid.uuid4().hex
                    r = AddRecord(it.id, it.content, it.created_at or inputs.now(), it.tags, it.source, first_row + n)
                    lines.append(replay.add_line(r, row_crc(vecs[n])))
                # Vectors first (written, not synced: each line's vcrc catches a row lost to power loss, which is
                # then re-embedded; see vectors.py), then the journal lines that reference them, synced once.
                vectors.write(first_row, vecs)
                journal.append(lines)
                self._catch_up(repair=False)
            result = []
            for it, memory in zip(items, out, strict=True):
                if memory is None:  # written now, or a duplicate of an earlier item written now
                    own = items[it.dup_of] if it.dup_of >= 0 else it
                    memory = catalog.memory(catalog.ids[own.id], duplicate=it.dup_of >= 0)
                result.append(memory)
            return result

    def _embed_missing(self, items: list[_Pending]) -> None:
        """Embed (outside every lock) the items that are not already known duplicates and have no vector."""
        with self._thread_lock:
            self._refresh()
            todo = [it for it in items if it.vector is None and self._catalog.duplicate_row(it.key, it.content) is None]
        if todo:  # known duplicates need no vector: the write path returns the existing memory
            for it, v in zip(todo, self._embed([it.content for it in todo]), strict=True):
                it.vector = v

    def add(self, content: str, tags: Sequence[str] | None = None, source: str | None = None) -> Memory:
        """See backend.MemoryBackend.add. (add_many and import_ skip `similar`: one index query per item.)"""
        item = _Pending.of(inputs.new_memory(content, tags, source))
        self._embed_missing([item])
        memory = self._write_adds([item])[0]
        if memory.duplicate or item.vector is None:
            return memory
        with self._thread_lock:
            self._refresh()
            similar = self._searcher.similar(item.vector, memory.id)
        return replace(memory, similar=similar) if similar else memory

    def add_many(self, items: Iterable[dict[str, Any] | str]) -> list[Memory]:
        """See backend.MemoryBackend.add_many: one batched embedding and one fsync."""
        new = [_Pending.of(m) for m in inputs.new_memories(items)]
        if not new:
            return []
        self._embed_missing(new)
        return self._write_adds(new)

    def delete(self, memory_id: str) -> bool:
        """See backend.MemoryBackend.delete."""
        mid = inputs.check_id(memory_id)
        with self._writing() as journal:
            if mid not in self._catalog:
                return False
            journal.append([replay.delete_line(mid, inputs.now())])
            self._catch_up(repair=False)
            return True

    # --- reading -------------------------------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory | None:
        mid = inputs.check_id(memory_id)
        with self._thread_lock:
            self._refresh()
            row = self._catalog.row_of(mid)
            return None if row is None else self._catalog.memory(row)

    def list_recent(self, limit: int = 10, tags: Sequence[str] | None = None) -> list[Memory]:
        """See backend.MemoryBackend.list_recent."""
        limit = inputs.check_limit(limit)
        wanted = inputs.check_tags(tags)
        with self._thread_lock:
            self._refresh()
            return [self._catalog.memory(row) for row in self._catalog.newest(limit, wanted)]

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
            if q.shape != (self.dim,):
                raise StoreError(f"the embedder returned a query vector of shape {q.shape}, expected ({self.dim},)")
        with self._thread_lock:
            self._refresh()
            return self._searcher.search(q, req.query, req.mode, req.limit, req.filter, req.min_score)

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
        """A semantic search with a ready query vector and no query text (see `search(query_vector=...)`)."""
        q = inputs.check_vector(vector, self.dim, "vector")
        n = inputs.check_limit(limit)
        filters = inputs.search_filter(tags, source, since, until)
        floor = inputs.check_min_score(min_score)
        with self._thread_lock:
            self._refresh()
            return self._searcher.search(q, "", "semantic", n, filters, floor)

    def tag_counts(self) -> dict[str, int]:
        """See backend.MemoryBackend.tag_counts."""
        with self._thread_lock:
            self._refresh()
            return self._catalog.tag_counts()

    def stats(self) -> dict[str, Any]:
        """See backend.MemoryBackend.stats; the local store adds where it lives and what is on disk."""
        with self._thread_lock:
            self._refresh()
            catalog = self._catalog
            return {
                "engine": "local",
                "count": len(catalog),
                "collection": self.collection,
                "path": str(self.folder),
                "model": str(self.embedder.model_name),
                "dim": self.dim,
                "index": self._vindex.params(),
                "keyword_index": {"documents": len(self._kindex.index)},
                "bytes_on_disk": folder_bytes(self.folder),
                "journal_bytes": self._coverage.offset,
                "deleted_pending_compaction": catalog.next_row - len(catalog),
            }

    # --- bulk: export / import / compact ----------------------------------------------------------------------

    def export(self, include_vectors: bool = False) -> Iterator[dict[str, Any]]:
        """See backend.MemoryBackend.export. A vector export raises StoreError if the store is compacted meanwhile
        (its rows are renumbered); run it again."""
        with self._thread_lock:
            self._refresh()
            generation = self._files()[0].generation
            cols = self._catalog.export_columns()
        for i in range(0, len(cols.rows), IMPORT_BATCH):
            batch = cols.records(i, i + IMPORT_BATCH)
            vecs = None
            if include_vectors:
                with self._thread_lock:
                    journal, vectors = self._files()
                    if journal.generation != generation or journal.replaced():
                        raise StoreError("the store was compacted during export; run the export again")
                    vecs = vectors.checked(batch, self._embed)
            for n, r in enumerate(batch):
                d = Memory(r.id, r.content, r.created_at, r.tags, r.source).to_dict()
                if vecs is not None:
                    d["vector"] = vecs[n].tolist()
                yield d

    def import_(self, records: Iterable[dict[str, Any]]) -> int:
        """See backend.MemoryBackend.import_. Records with a "vector" are not re-embedded: the bulk-load path.
        Batches of IMPORT_BATCH."""
        added = 0
        batch: list[_Pending] = []
        ids: set[str] = set()
        with self._thread_lock:
            self._importing += 1
        try:
            for n, rec in enumerate(records):
                item = _Pending.of(inputs.imported_memory(rec, n, self.dim))
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
            with self._thread_lock:
                self._importing -= 1
        with self._thread_lock:
            if self._coverage.uncovered >= CHECKPOINT_RECORDS:
                self._checkpoint()
        return added

    def _import_batch(self, batch: list[_Pending]) -> int:
        with self._thread_lock:
            self._refresh()
            catalog = self._catalog
            batch = [
                it
                for it in batch
                if not (it.id and it.id in catalog) and catalog.duplicate_row(it.key, it.content) is None
            ]
        if not batch:
            return 0
        self._embed_missing(batch)
        return sum(1 for m in self._write_adds(batch) if not m.duplicate)

    def compact(self) -> dict[str, Any]:
        """See backend.MemoryBackend.compact: journal and vectors rewritten without the deleted memories (see
        compaction.py for how other processes keep writing meanwhile). Returns count, removed, bytes before and
        after."""
        with self._thread_lock:
            self._refresh()
            catalog = self._catalog
            before = folder_bytes(self.folder)
            removed = catalog.next_row - len(catalog)
            live = [catalog.record(row) for row in catalog.by_time]
            job = Compaction(self.folder, *self._files(), live, self._vindex)
        try:
            job.copy(self._embed)
            self.hooks.compaction_copied()
            with self._thread_lock:
                self._refresh()
                with self._file_lock.hold(exclusive=True):
                    self._catch_up(repair=True)
                    journal, vectors = self._files()
                    if journal.replaced() or journal.generation != job.old_generation:
                        log.info("another process compacted %s meanwhile; dropping this compaction", self.folder)
                    else:
                        self.hooks.compaction_switching()
                        job.switch(self._catalog, vectors, self._embed)
                        self.hooks.compaction_switched()
                self._load()
                after = folder_bytes(self.folder)
                count = len(self._catalog)
        finally:
            job.discard()
        return {"count": count, "removed": removed, "bytes_before": before, "bytes_after": after}

    # --- checkpoints and closing ---------------------------------------------------------------------------------

    def checkpoint(self) -> None:
        """Save every derived index and the metadata snapshot at the journal's current end, so the next open
        replays nothing. The store checkpoints by itself (on open, close, imports, and every
        WRITE_CHECKPOINT_RECORDS writes); a failed checkpoint costs replay time on the next open, never data."""
        with self._thread_lock:
            self._refresh()
            self._checkpoint()

    def _checkpoint(self) -> None:
        with self._exclusive():
            self._checkpoint_locked()

    def _checkpoint_locked(self) -> None:
        """Save every derived index with the journal position it covers (caller holds the exclusive lock)."""
        (journal, vectors), cov = self._files(), self._coverage
        try:
            fixes = vectors.write_back_repairs(lambda row: self._catalog.id_at(row) is not None)
            if fixes:
                journal.append([replay.vfix_line(row, crc) for row, crc in fixes])
                self._catch_up(repair=False)
            vectors.sync()  # rows are written unsynced; those a checkpoint covers must be on disk
        except OSError as exc:
            log.warning("could not sync the vector file before a checkpoint: %s", exc)
            return
        count = len(self._catalog)
        stamp = {"generation": journal.generation, "offset": cov.offset, "count": count}
        for d in self._derived:
            if cov.is_saved(d.name):
                continue  # its checkpoint on disk already covers this position
            try:
                d.save(self.folder, stamp)
                cov.saved(d.name)
            except OSError as exc:  # a failed checkpoint costs replay time on the next open, never data
                log.warning("could not save the %s index checkpoint: %s", d.name, exc)
                return
        try:
            crc = snapshot.line_crc(journal.path, cov.offset, journal.identity)
            path = snapshot.snapshot_path(self.folder, journal.generation)
            snapshot.save(path, snapshot.stamp_for(journal.generation, cov.offset, count, crc), self._snapshot())
        except OSError as exc:
            log.warning("could not save the metadata snapshot: %s", exc)
        cov.checkpointed()
        self.hooks.checkpointed(count)

    def _snapshot(self) -> bytes:
        return snapshot.encode(self._catalog, self._files()[1].crcs)

    def _close_files(self) -> None:
        if self._vectors is not None:
            self._vectors.close()
            self._vectors = None
        if self._journal is not None:
            self._journal.close()
            self._journal = None

    def close(self) -> None:
        """Checkpoint if worthwhile, then release files. Safe to call twice."""
        with self._thread_lock:
            if self._closed:
                return
            try:
                if self._journal is not None and self._coverage.uncovered >= CHECKPOINT_RECORDS:
                    self._refresh()
                    self._checkpoint()
            except Exception as exc:  # closing must not fail on a checkpoint: the journal has everything
                log.warning("checkpoint on close failed: %s", exc)
            self._closed = True
            self._close_files()
            self._file_lock.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if not self._closed:
                self._close_files()
                self._file_lock.close()


def _end(entry: tuple[int, AddRecord]) -> int:
    return entry[0]


def _vector(item: _Pending) -> np.ndarray:
    if item.vector is None:
        raise StoreError("a memory reached the journal without its vector")  # (the write path embeds them all)
    return item.vector
