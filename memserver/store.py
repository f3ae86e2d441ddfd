"""MemoryStore: the local engine: durable, crash-safe, multi-process memory with search by meaning.

It implements backend.MemoryBackend (whose docstrings are the contract) over parts that each own one thing:

    journal.py     the record of truth (append-only lines, the crash story) and the cross-process lock
    generation.py  one journal generation in memory: restored from its checkpoints, fed by the one replay path
    replay.py      the journal's record shapes, what they feed (DerivedIndex), and how far replay and the
                   checkpoints on disk stand (Coverage)
    catalog.py     the memories' metadata by row (current, history, tombstones), and the lookups on it
    history.py     replace links and the tombstones of forgotten memories, for get() and as_of
    listing.py     pages newest first with their cursors, bulk selections, counts per session
    writes.py      the write path's rules: duplicates per namespace, what each memory replaces, the records
    snapshot.py    the catalog saved at a checkpoint, so an open need not replay the whole journal
    checkpoints.py, checkpoint_job.py   when the write path checkpoints, and how: outside the exclusive lock
    vectors.py     the vector row file, its CRC checks and the repair of damaged rows
    index.py, keyword.py   the derived indexes (HNSW, BM25) of the current memories, checkpointed beside the journal
    search.py      exact vs HNSW, keyword and hybrid rankings over the candidates that pass the filters
    compaction.py  a new generation without the forgotten memories, switched in under the lock

Two classes keep the orchestration: `Collection` the locks, opening and refreshing (one stat per call: catch up
if the journal grew, reload if another process compacted), checkpoints and closing; `MemoryStore` the write path
(embedding outside the locks, group commit) and the public methods, each a check (inputs.py), a lock and a call
into the parts.

Locks, always in this order: the thread lock (`_thread_lock`, reentrant) serialises all calls in a process
(hnswlib does not lock reads against inserts; embedding runs outside it); then the file lock (`_file_lock`) across
processes: writers hold it exclusively, readers catching up hold it shared. This module never imports mcp, and
imports the Embedder (onnxruntime) only when none is given.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memserver import checkpoint_job, config, inputs, listing, writes
from memserver.backend import Hit, Memory, MemoryFilter, Page, Selection
from memserver.catalog import memory_of
from memserver.checkpoints import CheckpointCosts, fixed_interval_from_env
from memserver.compaction import Compaction, remove_other_generations
from memserver.durable import OS, FileLayer, disk_errors_as, make_dirs, make_private
from memserver.errors import InvalidInputError, StoreError
from memserver.generation import Generation
from memserver.hooks import StoreHooks
from memserver.index import VectorIndex
from memserver.journal import JOURNAL_NAME, LOCK_NAME, FileLock, open_journal
from memserver.journal import revision as journal_revision
from memserver.keyword import KeywordDerivedIndex
from memserver.writes import Pending

if TYPE_CHECKING:
    from memserver.embedder import TextEmbedder

__all__ = ["Hit", "Memory", "MemoryStore", "StoreHooks"]

log = logging.getLogger(__name__)

# Checkpoint the derived indexes when this many journal records are not covered by the checkpoint on disk
# (on open, close and after import_); the write path spaces them by cost (checkpoints.py) and writes them
# outside the exclusive lock (checkpoint_job.py).
CHECKPOINT_RECORDS = 200
IMPORT_BATCH = 1000


def folder_bytes(folder: Path) -> int:
    """Bytes of the files in `folder`; other processes create and remove temp files meanwhile, so skip vanished ones."""
    total = 0
    for entry in os.scandir(folder):
        with contextlib.suppress(FileNotFoundError):
            if entry.is_file():
                total += entry.stat().st_size
    return total


class Collection:
    """One collection folder, open: its locks, the journal generation held in memory and kept caught up with
    other processes, checkpoints and closing. MemoryStore adds the contract's methods on top.

    Locks, always in this order: the thread lock (`_thread_lock`, reentrant) serialises all calls in a process
    (hnswlib does not lock reads against inserts; embedding runs outside it); then the file lock (`_file_lock`)
    across processes: writers hold it exclusively, readers catching up hold it shared. `_refresh` (one stat)
    before every call; `_writing` for every write.
    """

    @disk_errors_as("cannot open the store")
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
        files: FileLayer | None = None,
    ) -> None:
        if embedder is None:
            from memserver.embedder import Embedder  # onnxruntime only when the caller brings no embedder

            embedder = Embedder()
        self.embedder: TextEmbedder = embedder
        self.dim = int(embedder.dim)
        self.hooks = hooks or StoreHooks()
        self.files = files or OS  # every change the store makes to a file goes through it (durable.py)
        root = Path(os.path.abspath(os.path.expanduser(path))) if path is not None else config.data_dir()
        self.collection = config.validate_collection(collection) if collection else config.collection_name()
        self.folder = root / self.collection
        make_dirs(self.folder, self.files)
        make_private(self.folder, self.files)  # a store made before 0600/0700 (durable.py), tightened once
        self._thread_lock = threading.RLock()
        self._file_lock = FileLock(self.folder / LOCK_NAME, timeout=lock_timeout, files=self.files)
        params = {"M": M, "ef_construction": ef_construction, "ef": ef}
        self._index_params = {k: v for k, v in params.items() if v is not None}  # each generation's VectorIndex
        self._gen: Generation | None = None  # the generation open now (None: closed, or its load failed)
        self._importing = 0  # import_ calls in progress (they space write-path checkpoints out; see _writing)
        self._costs = CheckpointCosts(fixed_interval_from_env())  # when the write path checkpoints
        self._checkpoints = checkpoint_job.OutsideLock(self._thread_lock, self._file_lock)  # and how
        self._closed = False
        with self._thread_lock:
            self._load()

    # --- opening and catching up ------------------------------------------------------------------------------

    def _current(self) -> Generation:
        """The generation open now (StoreError once closed)."""
        if self._gen is None:
            raise StoreError("the store is closed")
        return self._gen

    def _load(self) -> None:
        """Open (or reopen after a compaction): checkpoints first, then replay the journal once past them.

        The new generation goes into service only once it is whole: if the load fails (the lock timed out, a
        damaged journal), the store holds none, and its next call loads again.

        The cyclic garbage collector is paused meanwhile: a load creates millions of objects, none of them in a
        cycle, and the collector would rescan them again and again (1M memories: 10.6 s -> 7.3 s to open).
        """
        paused = gc.isenabled()
        gc.disable()
        try:
            self._close_files()
            gen = self._gen = self._restored()
            self.hooks.opened(gen.coverage.replayed, gen.from_snapshot)
            if gen.needs_checkpoint_after_open(CHECKPOINT_RECORDS):
                self._checkpoint()
        finally:
            if paused:
                gc.enable()

    def _restored(self) -> Generation:
        """The current journal's generation, restored, with indexes of its own; on failure whatever it opened is
        closed again.

        The journal is opened without a lock, so another process may compact (switch journals, remove the old
        vector file) before the shared lock is ours: each time the lock is taken, check the journal is still the
        current one, and if not, start again on the new one (as `_exclusive` does).
        """
        while True:
            journal = open_journal(self.folder, self.dim, str(self.embedder.model_name), self._file_lock, self.files)
            gen: Generation | None = None
            try:
                with self._file_lock.hold(exclusive=False):
                    if not journal.replaced():  # current: no one removes its vector file while we hold the lock
                        vindex = VectorIndex(self.dim, **self._index_params, files=self.files)
                        kindex = KeywordDerivedIndex(files=self.files)  # keyed by row too (see keyword.py)
                        gen = Generation(self.folder, journal, vindex, kindex, self._embed, self.hooks, self._costs)
                        torn = gen.restore()
                if gen is not None:
                    gen.rebuild_untrusted()
                    with self._file_lock.hold(exclusive=True):
                        if not journal.replaced():
                            if torn:
                                gen.catch_up(repair=True)
                            remove_other_generations(self.folder, journal.generation, self.files)
                            return gen
            except BaseException:
                (journal if gen is None else gen).close()
                raise
            (journal if gen is None else gen).close()
            log.info(
                "journal %s was replaced while opening it (compacted by another process); opening the new one",
                journal.path,
            )

    def _refresh(self) -> Generation:
        """Before every call: one stat; reload after a compaction elsewhere, catch up if the journal grew."""
        if self._closed:
            raise StoreError("the store is closed")
        gen = self._gen
        if gen is None:  # the last load failed (say the lock timed out): load again
            self._load()
            return self._current()
        change = gen.journal_change()
        if change == "replaced":
            log.info("journal %s was replaced (compacted by another process); reloading", gen.journal.path)
            self._load()
        elif change == "grown":
            with self._file_lock.hold(exclusive=False):
                gen.catch_up(repair=False)
        return self._current()

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vecs = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if vecs.shape != (len(texts), self.dim) or not np.isfinite(vecs).all():
            raise StoreError(f"the embedder returned shape {vecs.shape} (or non-finite values) for {len(texts)} texts")
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.where(norms == 0, 1, norms)

    # --- the write locks ------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Generation]:
        """Thread lock + exclusive file lock, caught up on everything (a torn tail repaired) before writing."""
        with self._thread_lock:
            self._refresh()
            with self._exclusive() as gen:
                yield gen
                due = checkpoint_job.due(gen, importing=self._importing > 0)
            staged = self._checkpoints.stage(gen) if due else None  # copied out, the file lock released
        if staged is not None:  # written with no lock held, committed under it (checkpoint_job.py)
            self._checkpoints.finish(staged, lambda g: g is self._gen and not self._closed)

    @contextlib.contextmanager
    def _exclusive(self) -> Iterator[Generation]:
        """The exclusive file lock on the journal that is current, caught up (a torn tail repaired).

        Another process may compact while we wait for the lock: its switch renames a new journal over the one we
        hold open, and a line appended to the old, unlinked file would be acknowledged and then lost. So after
        taking the lock, check the journal is still the current one; if not, reload and take the lock again.
        """
        while True:
            self.hooks.taking_exclusive_lock()
            with self._file_lock.hold(exclusive=True):
                gen = self._current()
                if gen.is_current():
                    gen.catch_up(repair=True)
                    yield gen
                    return
            log.info("journal %s was replaced while waiting for the lock; reloading", gen.journal.path)
            self._load()

    # --- checkpoints and closing ---------------------------------------------------------------------------------

    @disk_errors_as("the checkpoint was not written (the journal still has every memory)")
    def checkpoint(self) -> None:
        """Save every derived index and the metadata snapshot at the journal's current end, so the next open
        replays nothing. The store checkpoints by itself (on open, close, imports, and as often as writes make
        it worthwhile: checkpoints.py) and logs a failure there (it costs replay time on the next open, never
        data); asked for here, a failure raises StoreWriteError."""
        with self._thread_lock:
            self._refresh()
            self._checkpoint(strict=True)

    def _checkpoint(self, strict: bool = False) -> None:
        with self._exclusive() as gen:
            gen.save_checkpoint(strict)

    def _close_files(self) -> None:
        if self._gen is not None:
            self._gen.close()
            self._gen = None

    def close(self) -> None:
        """Checkpoint if worthwhile, then release files. Safe to call twice."""
        with self._thread_lock:
            if self._closed:
                return
            try:
                if self._gen is not None and self._gen.needs_checkpoint(CHECKPOINT_RECORDS):
                    self._refresh()
                    self._checkpoint()
            except Exception as exc:  # closing must not fail on a checkpoint: the journal has everything
                log.warning("checkpoint on close failed: %s", exc)
            self._closed = True
            self._close_files()
            self._file_lock.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if not self._closed:
                self._close_files()
                self._file_lock.close()


class MemoryStore(Collection):
    """A collection of memories in `<path>/<collection>/`, safe to share between threads and processes.

    Example::

        with MemoryStore("/tmp/mem", "demo", embedder=my_embedder) as store:
            m = store.add("The staging DB password rotates every Monday", tags=["ops"])
            hits = store.search("when does the password change?", limit=3)

    `hooks` (hooks.StoreHooks) lets tests and benchmarks watch or hold points inside the store; `files` (a
    durable.FileLayer) takes every change the store makes to a file, so a test can record or fail them.
    """

    # --- writing -------------------------------------------------------------------------------------------------

    def _write_adds(self, items: list[Pending], importing: bool = False) -> tuple[list[Memory], list[Pending]]:
        """Write the non-duplicate items (vectors already set) in one group commit; results in item order. Returns
        also the items held back (an import's, replacing a memory not there yet: see writes.check_links).

        An item without a vector (a duplicate when embedding began, whose memory has been deleted since: rare) is
        embedded with the locks released, and the write tried again."""
        while True:
            with self._writing() as gen:
                catalog = gen.catalog
                fresh, out = writes.without_duplicates(catalog, items)
                held = writes.check_links(catalog, fresh, defer=importing)
                if held:
                    fresh = [it for it in fresh if it not in held]
                missing = [it for it in fresh if it.vector is None]
                if not missing:
                    if fresh:
                        for it in fresh:
                            it.id = it.id or uuid.uuid4().hex
                        records = writes.records(fresh, catalog.next_row, inputs.now())
                        gen.write_adds(records, np.stack([writes.vector_of(it) for it in fresh]))
                    result = []
                    for it, memory in zip(items, out, strict=True):
                        if it in held:
                            continue
                        if memory is None:  # written now, or a duplicate of an earlier item written now
                            own = items[it.dup_of] if it.dup_of >= 0 else it
                            memory = catalog.memory(catalog.ids[own.id], duplicate=it.dup_of >= 0)
                        result.append(memory)
                    return result, held
            for it, v in zip(missing, self._embed([it.m.content for it in missing]), strict=True):
                it.vector = v

    def _embed_missing(self, items: list[Pending], check: bool = False) -> None:
        """Embed (outside every lock) the items that are not already known duplicates and have no vector; with
        `check`, refuse a bad `replaces` first (it is checked again when written)."""
        with self._thread_lock:
            catalog = self._refresh().catalog
            if check:
                writes.check_links(catalog, writes.without_duplicates(catalog, items)[0])
            todo = [
                it
                for it in items
                if it.vector is None and catalog.duplicate_row(it.key, it.m.content, it.m.namespace) is None
            ]
        if todo:  # known duplicates need no vector: the write path returns the existing memory
            for it, v in zip(todo, self._embed([it.m.content for it in todo]), strict=True):
                it.vector = v

    @disk_errors_as("nothing was stored")
    def add(
        self,
        content: str,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        *,
        occurred_at: str | date | None = None,
        speaker: str | None = None,
        role: str | None = None,
        session: str | None = None,
        namespace: str | None = None,
        replaces: str | None = None,
    ) -> Memory:
        """See backend.MemoryBackend.add. (add_many and import_ skip `similar`: one index query per item.)"""
        checked = inputs.new_memory(
            content,
            tags,
            source,
            occurred_at=occurred_at,
            speaker=speaker,
            role=role,
            session=session,
            namespace=namespace,
            replaces=replaces,
        )
        item = Pending.of(checked)
        self._embed_missing([item], check=True)
        memory = self._write_adds([item])[0][0]
        if memory.duplicate or item.vector is None:
            return memory
        with self._thread_lock:
            similar = self._refresh().searcher.similar(item.vector, memory.id, memory.namespace)
        return replace(memory, similar=similar) if similar else memory

    @disk_errors_as("nothing was stored")
    def add_many(self, items: Iterable[dict[str, Any] | str]) -> list[Memory]:
        """See backend.MemoryBackend.add_many: one batched embedding and one fsync."""
        one = isinstance(items, list) and len(items) == 1  # (named like add's arguments, as inputs.py does)
        new = [Pending.of(m, "" if one else f"items[{n}].") for n, m in enumerate(inputs.new_memories(items))]
        if not new:
            return []
        self._embed_missing(new, check=True)
        return self._write_adds(new)[0]

    @disk_errors_as("the memory was not deleted")
    def delete(self, memory_id: str, *, namespace: str | None = None) -> bool:
        """See backend.MemoryBackend.delete."""
        return self.delete_many([inputs.check_id(memory_id)], namespace=namespace) == 1

    @disk_errors_as("nothing was deleted")
    def delete_many(self, ids: Iterable[str], *, namespace: str | None = None) -> int:
        """See backend.MemoryBackend.delete_many."""
        wanted = inputs.check_ids(ids)
        space = inputs.check_namespace(namespace)
        with self._writing() as gen:
            there = [mid for mid in wanted if gen.catalog.row_of(mid, space) is not None]
            if there:
                gen.write_deletes(there)
            return len(there)

    # --- reading -------------------------------------------------------------------------------------------------

    def get(self, memory_id: str, *, namespace: str | None = None) -> Memory | None:
        mid = inputs.check_id(memory_id)
        space = inputs.check_namespace(namespace)
        with self._thread_lock:
            catalog = self._refresh().catalog
            row = catalog.row_of(mid, space)
            return None if row is None else catalog.memory(row)

    def list_recent(
        self,
        limit: int = 10,
        tags: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        session: str | None = None,
        speaker: str | None = None,
    ) -> list[Memory]:
        """See backend.MemoryBackend.list_recent."""
        return self.list_page(limit, tags, namespace=namespace, session=session, speaker=speaker).memories

    def list_page(
        self,
        limit: int = 10,
        tags: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        session: str | None = None,
        speaker: str | None = None,
        role: str | None = None,
        cursor: str | None = None,
        as_of: str | date | None = None,
    ) -> Page:
        """See backend.MemoryBackend.list_page (listing.py has the order and the cursors)."""
        fields = {"namespace": namespace, "session": session, "speaker": speaker, "role": role, "as_of": as_of}
        req = inputs.list_request(limit, tags, cursor=cursor, **fields)
        with self._thread_lock:
            gen = self._refresh()
            catalog, generation = gen.catalog, gen.journal.generation
            below = None if req.cursor is None else listing.decode_cursor(req.cursor, catalog, generation)
            rows, more = listing.page(catalog, req.filter, req.limit, below)
            after = listing.encode_cursor(catalog, rows[-1], generation) if more and rows else None
            return Page([catalog.memory(row) for row in rows], after)

    def select(self, filter: MemoryFilter, limit: int | None = None) -> Selection:
        """See backend.MemoryBackend.select."""
        wanted = inputs.select_filter(filter)
        n = 0 if limit is None else inputs.check_limit(limit)
        with self._thread_lock:
            catalog = self._refresh().catalog
            rows = listing.select_rows(catalog, wanted)
            ids = [catalog.id_at(row) or "" for row in rows]
            return Selection(len(rows), [catalog.memory(row) for row in rows[:n]], ids)

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
        speaker: str | None = None,
        role: str | None = None,
        session: str | None = None,
        namespace: str | None = None,
        as_of: str | date | None = None,
        query_vector: Sequence[float] | np.ndarray | None = None,
        explain: bool = False,
    ) -> list[Hit]:
        """See backend.MemoryBackend.search."""
        fields = {"speaker": speaker, "role": role, "session": session, "namespace": namespace, "as_of": as_of}
        req = inputs.search_request(query, limit, tags, source, since, until, min_score, mode, **fields)
        if query_vector is not None:
            q = inputs.check_vector(query_vector, self.dim, "query_vector")
        else:
            q = np.asarray(self.embedder.embed_query(req.query), dtype=np.float32).reshape(-1)
            if q.shape != (self.dim,):
                raise StoreError(f"the embedder returned a query vector of shape {q.shape}, expected ({self.dim},)")
        with self._thread_lock:
            searcher = self._refresh().searcher
            return searcher.search(q, req.query, req.mode, req.limit, req.filter, req.min_score, explain is True)

    def search_by_vector(
        self,
        vector: Sequence[float] | np.ndarray,
        limit: int = 5,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        since: str | date | None = None,
        until: str | date | None = None,
        min_score: float | None = None,
        *,
        namespace: str | None = None,
    ) -> list[Hit]:
        """A semantic search with a ready query vector and no query text: `search(mode="semantic",
        query_vector=vector)`, which then never reads its query text."""
        return self.search(
            "(by vector)",
            limit,
            tags,
            source,
            since,
            until,
            min_score,
            "semantic",
            namespace=namespace,
            query_vector=vector,
        )

    def tag_counts(self, *, namespace: str | None = None) -> dict[str, int]:
        """See backend.MemoryBackend.tag_counts."""
        space = inputs.check_namespace(namespace)
        with self._thread_lock:
            return self._refresh().catalog.tag_counts(space)

    def namespaces(self) -> dict[str, int]:
        """See backend.MemoryBackend.namespaces."""
        with self._thread_lock:
            return dict(sorted(self._refresh().catalog.per_namespace.items()))

    def sessions(self, *, namespace: str | None = None) -> dict[str, int]:
        """See backend.MemoryBackend.sessions."""
        space = inputs.check_namespace(namespace)
        with self._thread_lock:
            return listing.session_counts(self._refresh().catalog, space)

    def revision(self) -> str:
        """See backend.MemoryBackend.revision: one stat of the journal's path, no lock (a poller never waits for a
        write or a search in progress)."""
        if self._closed:
            raise StoreError("the store is closed")
        return journal_revision(self.folder / JOURNAL_NAME)

    def ids_with_prefix(self, prefix: str, limit: int, *, namespace: str | None = None) -> list[str]:
        """See backend.MemoryBackend.ids_with_prefix."""
        start = inputs.check_id_prefix(prefix)
        limit = inputs.check_limit(limit)
        space = inputs.check_namespace(namespace)
        with self._thread_lock:
            return self._refresh().catalog.ids_with_prefix(start, limit, space)

    def stats(self) -> dict[str, Any]:
        """See backend.MemoryBackend.stats; the local store adds where it lives and what is on disk."""
        with self._thread_lock:
            gen = self._refresh()
            catalog = gen.catalog
            replaced = len(catalog.history.replaced_rows())
            return {
                "engine": "local",
                "count": len(catalog),
                "collection": self.collection,
                "path": str(self.folder),
                "model": str(self.embedder.model_name),
                "dim": self.dim,
                "namespaces": len(catalog.per_namespace),
                "replaced": replaced,
                **gen.index_stats(),
                "bytes_on_disk": folder_bytes(self.folder),
                "journal_bytes": gen.journal_bytes(),
                "deleted_pending_compaction": gen.deleted_pending(),
            }

    # --- bulk: export / import / compact ----------------------------------------------------------------------

    def export(self, include_vectors: bool = False, *, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        """See backend.MemoryBackend.export. A vector export raises StoreError if the store is compacted meanwhile
        (its rows are renumbered); run it again."""
        space = None if namespace is None else inputs.check_namespace(namespace)
        with self._thread_lock:
            gen = self._refresh()
            cols = gen.catalog.export_columns(space)
        for i in range(0, len(cols.rows), IMPORT_BATCH):
            batch = cols.records(i, i + IMPORT_BATCH)
            vecs = None
            if include_vectors:
                with self._thread_lock:
                    if self._current() is not gen or not gen.is_current():
                        raise StoreError("the store was compacted during export; run the export again")
                    vecs = gen.vectors_of(batch)
            for n, r in enumerate(batch):
                d = memory_of(r).to_dict()
                if vecs is not None:
                    d["vector"] = vecs[n].tolist()
                yield d

    @disk_errors_as("the import stopped (the records before this batch were stored)")
    def import_(self, records: Iterable[dict[str, Any]]) -> int:
        """See backend.MemoryBackend.import_. Records with a "vector" are not re-embedded: the bulk-load path.
        Batches of IMPORT_BATCH; a record replacing one not there yet waits for the end of the import."""
        added = 0
        batch: list[Pending] = []
        held: list[Pending] = []
        ids: set[str] = set()
        with self._thread_lock:
            self._importing += 1
        try:
            for n, rec in enumerate(inputs.check_items(records, "records")):
                item = Pending.of(inputs.imported_memory(rec, n, self.dim), f"records[{n}].")
                if item.id:
                    if item.id in ids:  # which of the two would win is a guess: refuse rather than lose one
                        raise InvalidInputError(f"records[{n}].id {item.id} appears twice in this import")
                    ids.add(item.id)
                batch.append(item)
                if len(batch) >= IMPORT_BATCH:
                    added += self._import_batch(batch, held)
                    batch = []
            added += self._import_batch(batch, held)
            while held:  # each pass writes those whose memory is there now; none written: they name nothing
                waiting, held = held, []
                added += self._import_batch(waiting, held)
                if len(held) == len(waiting):
                    first = held[0]
                    raise inputs.no_such_memory(f"{first.where}replaces", first.m.replaces, first.m.namespace)
        finally:
            with self._thread_lock:
                self._importing -= 1
        with self._thread_lock:
            if self._current().needs_checkpoint(CHECKPOINT_RECORDS):
                self._checkpoint()
        return added

    def _import_batch(self, batch: list[Pending], held: list[Pending]) -> int:
        if not batch:
            return 0
        with self._thread_lock:
            catalog = self._refresh().catalog
            batch = [it for it in batch if not (it.id and it.id in catalog)]
        if not batch:
            return 0
        self._embed_missing(batch)
        written, waiting = self._write_adds(batch, importing=True)
        held += waiting
        return sum(1 for m in written if not m.duplicate)

    @disk_errors_as("compaction failed and the store is unchanged")
    def compact(self) -> dict[str, Any]:
        """See backend.MemoryBackend.compact: journal and vectors rewritten without the deleted memories (see
        compaction.py for how other processes keep writing meanwhile). Returns count, removed, bytes before and
        after."""
        with self._thread_lock:
            gen = self._refresh()
            before = folder_bytes(self.folder)
            removed = gen.deleted_pending()
            live = [gen.catalog.record(row) for row in gen.catalog.stored_rows().tolist()]
            job = Compaction(self.folder, gen.journal, gen.vectors, live, gen.vindex)
        try:
            job.copy(self._embed)
            self.hooks.compaction_copied()
            with self._thread_lock:
                self._refresh()
                with self._exclusive() as gen:  # the current journal (checked before a torn tail is repaired)
                    if gen.journal.generation != job.old_generation:
                        log.info("another process compacted %s meanwhile; dropping this compaction", self.folder)
                    elif not job.can_switch(gen.catalog):
                        log.info("a memory of %s changed state during compaction; dropping it", self.folder)
                    else:
                        self.hooks.compaction_switching()
                        job.switch(gen.catalog, gen.vectors, self._embed)
                        self.hooks.compaction_switched()
                self._load()
                after = folder_bytes(self.folder)
                count = len(self._current().catalog)
        finally:
            job.discard()
        return {"count": count, "removed": removed, "bytes_before": before, "bytes_after": after}

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
