"""MemoryStore: the local engine: durable, crash-safe, multi-process memory with search by meaning.

It implements backend.MemoryBackend (whose docstrings are the contract) over parts that each own one thing:

    journal.py     the record of truth (append-only lines, the crash story) and the cross-process lock
    generation.py  one journal generation in memory: restored from its checkpoints, fed by the one replay path
    replay.py      the journal's record shapes, what they feed (DerivedIndex), and how far replay and the
                   checkpoints on disk stand (Coverage)
    catalog.py     the memories' metadata by row (current, history, tombstones), and the lookups on it
    filters.py     which rows pass a filter, as sorted row sets (search's candidates, the listings)
    history.py     replace links and the tombstones of forgotten memories, for get() and as_of
    listing.py     pages newest first with their cursors, bulk selections, counts per session
    writes.py      the write path: duplicates per namespace, what each memory replaces, the group commit
    transfer.py    export, and import in batches
    snapshot.py    the catalog saved at a checkpoint, so an open need not replay the whole journal
    checkpoints.py, checkpoint_job.py   when the write path checkpoints, and how: outside the exclusive lock
    vectors.py     the vector row file, its CRC checks and the repair of damaged rows
    index.py, keyword.py   the derived indexes (HNSW, BM25) of the current memories, checkpointed beside the journal
    search.py      exact vs HNSW, keyword and hybrid rankings over the candidates that pass the filters
    compaction.py  a new generation without the forgotten memories, switched in under the lock

MemoryStore (here) owns the open `folder.Folder` (locks, opening and refreshing: one stat per call, catch up if the
journal grew, reload if another process compacted; checkpoints and closing) and delegates to it; the write path's
group commit is writes.py's, export and import transfer.py's. Each public method is a check (inputs.py), a lock and
a call into the parts; `search_nowait` takes no lock it would wait for (folder.py has the lock order). This module
never imports mcp, and imports the Embedder (onnxruntime) only when none is given.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import date
from typing import TYPE_CHECKING, Any

import numpy as np

from memserver.contract import inputs, lifecycle, requests
from memserver.contract.backend import Hit, Memory, MemoryFilter, Page, Selection
from memserver.contract.write_rules import Pending
from memserver.durable import FileLayer, disk_errors_as, folder_bytes
from memserver.embedding.base import query_vector
from memserver.errors import StoreError
from memserver.local import backup, compaction, health, listing, transfer, writes
from memserver.local.folder import Folder
from memserver.local.hooks import StoreHooks
from memserver.local.journal import JOURNAL_NAME
from memserver.local.journal import revision as journal_revision

if TYPE_CHECKING:
    from memserver.embedding.base import TextEmbedder

__all__ = ["Hit", "Memory", "MemoryStore", "StoreHooks"]


class MemoryStore:
    """A collection of memories in `<path>/<collection>/`, safe to share between threads and processes.

    Example::

        with MemoryStore("/tmp/mem", "demo", embedder=my_embedder) as store:
            m = store.add("The staging DB password rotates every Monday", tags=["ops"])
            hits = store.search("when does the password change?", limit=3)

    `hooks` (hooks.StoreHooks) lets tests and benchmarks watch or hold points inside the store; `files` (a
    durable.FileLayer) takes every change the store makes to a file, so a test can record or fail them.
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
        files: FileLayer | None = None,
    ) -> None:
        self._folder = Folder(
            path,
            collection,
            embedder,
            lock_timeout=lock_timeout,
            M=M,
            ef_construction=ef_construction,
            ef=ef,
            hooks=hooks,
            files=files,
        )  # the open folder: locks, the current generation, checkpoints, closing (folder.py)
        self.embedder: TextEmbedder = self._folder.embedder
        self.dim = self._folder.dim
        self.hooks = self._folder.hooks
        self.files = self._folder.files
        self.collection = self._folder.name
        self.folder = self._folder.path  # the folder's path

    # --- writing -------------------------------------------------------------------------------------------------

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
        kind: str | None = None,
        due: str | date | None = None,
    ) -> Memory:
        """See backend.MemoryBackend.add. (add_many and import_ skip `similar`: one index query per item.)"""
        checked = requests.new_memory(
            content,
            tags,
            source,
            occurred_at=occurred_at,
            speaker=speaker,
            role=role,
            session=session,
            namespace=namespace,
            replaces=replaces,
            kind=kind,
            due=due,
        )
        item = Pending.of(checked)
        writes.embed_missing(self._folder, [item], check=True)
        memory = writes.write_adds(self._folder, [item])[0][0]
        if memory.duplicate or item.vector is None:
            return memory
        with self._folder.thread_lock:
            similar = self._folder.refresh().searcher.similar(item.vector, memory.id, memory.namespace)
        return replace(memory, similar=similar) if similar else memory

    @disk_errors_as("nothing was stored")
    def add_many(self, items: Iterable[dict[str, Any] | str]) -> list[Memory]:
        """See backend.MemoryBackend.add_many: one batched embedding and one fsync."""
        one = isinstance(items, list) and len(items) == 1  # (named like add's arguments, as inputs.py does)
        new = [Pending.of(m, "" if one else f"items[{n}].") for n, m in enumerate(requests.new_memories(items))]
        if not new:
            return []
        writes.embed_missing(self._folder, new, check=True)
        return writes.write_adds(self._folder, new)[0]

    @disk_errors_as("the memory was not deleted")
    def delete(self, memory_id: str, *, namespace: str | None = None) -> bool:
        """See backend.MemoryBackend.delete."""
        return self.delete_many([inputs.check_id(memory_id)], namespace=namespace) == 1

    @disk_errors_as("nothing was deleted")
    def delete_many(self, ids: Iterable[str], *, namespace: str | None = None) -> int:
        """See backend.MemoryBackend.delete_many."""
        wanted = inputs.check_ids(ids)
        space = inputs.check_namespace(namespace)
        with self._folder.writing() as gen:
            there = [mid for mid in wanted if gen.catalog.row_of(mid, space) is not None]
            if there:
                gen.write_deletes(there)
            return len(there)

    # --- reading -------------------------------------------------------------------------------------------------

    def get(self, memory_id: str, *, namespace: str | None = None) -> Memory | None:
        mid = inputs.check_id(memory_id)
        space = inputs.check_namespace(namespace)
        with self._folder.thread_lock:
            catalog = self._folder.refresh().catalog
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
        kinds: Sequence[str] | None = None,
        include_archived: bool = False,
    ) -> list[Memory]:
        """See backend.MemoryBackend.list_recent."""
        return self.list_page(
            limit,
            tags,
            namespace=namespace,
            session=session,
            speaker=speaker,
            kinds=kinds,
            include_archived=include_archived,
        ).memories

    def list_page(
        self,
        limit: int = 10,
        tags: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        session: str | None = None,
        speaker: str | None = None,
        role: str | None = None,
        source: str | None = None,
        since: str | date | None = None,
        until: str | date | None = None,
        cursor: str | None = None,
        as_of: str | date | None = None,
        order: str = "occurred",
        kinds: Sequence[str] | None = None,
        include_archived: bool = False,
    ) -> Page:
        """See backend.MemoryBackend.list_page (listing.py has the orders and the cursors)."""
        fields = {"namespace": namespace, "session": session, "speaker": speaker, "role": role, "as_of": as_of}
        req = requests.list_request(
            limit,
            tags,
            source=source,
            since=since,
            until=until,
            cursor=cursor,
            order=order,
            kinds=kinds,
            include_archived=include_archived,
            **fields,
        )
        with self._folder.thread_lock:
            gen = self._folder.refresh()
            catalog, generation = gen.catalog, gen.journal.generation
            below = None if req.cursor is None else listing.decode_cursor(req.cursor, catalog, generation, req.order)
            rows, more = listing.page(catalog, req.filter, req.limit, below, req.order)
            after = listing.encode_cursor(catalog, rows[-1], generation, req.order) if more and rows else None
            return Page([catalog.memory(row) for row in rows], after)

    def pin(self, memory_id: str, pinned: bool = True, *, namespace: str | None = None) -> Memory | None:
        """See backend.MemoryBackend.pin."""
        return lifecycle.set_flag(self, memory_id, "pinned", pinned, namespace)

    def archive(self, memory_id: str, archived: bool = True, *, namespace: str | None = None) -> Memory | None:
        """See backend.MemoryBackend.archive."""
        return lifecycle.set_flag(self, memory_id, "archived", archived, namespace)

    def mark_done(self, memory_id: str, done: bool = True, *, namespace: str | None = None) -> Memory | None:
        """See backend.MemoryBackend.mark_done."""
        return lifecycle.set_flag(self, memory_id, "done", done, namespace)

    def select(self, filter: MemoryFilter, limit: int | None = None) -> Selection:
        """See backend.MemoryBackend.select."""
        wanted = requests.select_filter(filter)
        n = 0 if limit is None else inputs.check_limit(limit)
        with self._folder.thread_lock:
            catalog = self._folder.refresh().catalog
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
        kinds: Sequence[str] | None = None,
        include_archived: bool = False,
    ) -> list[Hit]:
        """See backend.MemoryBackend.search."""
        fields = {"speaker": speaker, "role": role, "session": session, "namespace": namespace, "as_of": as_of}
        req = requests.search_request(
            query,
            limit,
            tags,
            source,
            since,
            until,
            min_score,
            mode,
            kinds=kinds,
            include_archived=include_archived,
            **fields,
        )
        q = self._query_vector(req.query, query_vector)
        with self._folder.thread_lock:
            searcher = self._folder.refresh().searcher
            return searcher.search(q, req.query, req.mode, req.limit, req.filter, req.min_score, explain is True)

    def search_nowait(
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
        kinds: Sequence[str] | None = None,
        include_archived: bool = False,
    ) -> list[Hit] | None:
        """See backend.SearchesNowait: None unless the thread lock is free and the journal is as last caught up
        (one stat: no file lock, no catch-up, no reload), checked before and after embedding; None for as_of."""
        fields = {"speaker": speaker, "role": role, "session": session, "namespace": namespace, "as_of": as_of}
        req = requests.search_request(
            query,
            limit,
            tags,
            source,
            since,
            until,
            min_score,
            mode,
            kinds=kinds,
            include_archived=include_archived,
            **fields,
        )
        if req.filter.as_of is not None:
            return None
        with self._folder.nowait() as gen:  # before embedding: an answer that must wait anyway costs no model run
            if gen is None:
                return None
        q = self._query_vector(req.query, query_vector)  # outside the thread lock, as in search
        with self._folder.nowait() as gen:
            if gen is None:
                return None
            return gen.searcher.search(q, req.query, req.mode, req.limit, req.filter, req.min_score, explain is True)

    def _query_vector(self, query: str, given: Sequence[float] | np.ndarray | None) -> np.ndarray:
        if given is not None:
            return inputs.check_vector(given, self.dim, "query_vector")
        return query_vector(self.embedder, query, self.dim)

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
        with self._folder.thread_lock:
            return self._folder.refresh().catalog.filters.tag_counts(space)

    def namespaces(self) -> dict[str, int]:
        """See backend.MemoryBackend.namespaces."""
        with self._folder.thread_lock:
            return dict(sorted(self._folder.refresh().catalog.per_namespace.items()))

    def sessions(self, *, namespace: str | None = None) -> dict[str, int]:
        """See backend.MemoryBackend.sessions."""
        space = inputs.check_namespace(namespace)
        with self._folder.thread_lock:
            return listing.session_counts(self._folder.refresh().catalog, space)

    def revision(self) -> str:
        """See backend.MemoryBackend.revision: one stat of the journal's path, no lock (a poller never waits for a
        write or a search in progress)."""
        if self._folder.closed:
            raise StoreError("the store is closed")
        return journal_revision(self.folder / JOURNAL_NAME)

    def ids_with_prefix(self, prefix: str, limit: int, *, namespace: str | None = None) -> list[str]:
        """See backend.MemoryBackend.ids_with_prefix."""
        start = inputs.check_id_prefix(prefix)
        limit = inputs.check_limit(limit)
        space = inputs.check_namespace(namespace)
        with self._folder.thread_lock:
            return self._folder.refresh().catalog.ids_with_prefix(start, limit, space)

    def stats(self) -> dict[str, Any]:
        """See backend.MemoryBackend.stats; the local store adds where it lives and what is on disk."""
        with self._folder.thread_lock:
            gen = self._folder.refresh()
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

    # --- compaction ------------------------------------------------------------------------------------------------

    @disk_errors_as("compaction failed and the store is unchanged")
    def compact(self) -> dict[str, Any]:
        """See backend.MemoryBackend.compact: journal and vectors rewritten without the deleted memories (see
        compaction.py for how other processes keep writing meanwhile). Returns count, removed, bytes before and
        after."""
        return compaction.compact(self._folder)

    # --- care: health and backups (health.py, backup.py) -------------------------------------------------------

    def health(self) -> dict[str, Any]:
        """See backend.MemoryBackend.health (local/health.py)."""
        return health.health(self._folder)

    @disk_errors_as("the backup was not written")
    def backup(self, dest: str | os.PathLike[str], keep: int | None = None) -> dict[str, Any]:
        """See backend.MemoryBackend.backup (local/backup.py: a journal prefix and the checkpoints it covers)."""
        return backup.backup(self._folder, dest, keep)

    # --- bulk transfer (transfer.py) ------------------------------------------------------------------------------

    def export(self, include_vectors: bool = False, *, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        """See backend.MemoryBackend.export (and transfer.export)."""
        return transfer.export(self._folder, include_vectors, namespace)

    @disk_errors_as("the import stopped (the records before this batch were stored)")
    def import_(self, records: Iterable[dict[str, Any]]) -> int:
        """See backend.MemoryBackend.import_ (and transfer.import_)."""
        return transfer.import_(self._folder, records)

    # --- checkpoints and closing ---------------------------------------------------------------------------------

    @disk_errors_as("the checkpoint was not written (the journal still has every memory)")
    def checkpoint(self) -> None:
        """Save every derived index and the metadata snapshot at the journal's current end, so the next open
        replays nothing. The store checkpoints by itself (on open, close, imports, and as often as writes make
        it worthwhile: checkpoints.py) and logs a failure there (it costs replay time on the next open, never
        data); asked for here, a failure raises StoreWriteError."""
        with self._folder.thread_lock:
            self._folder.refresh()
            self._folder.checkpoint(strict=True)

    def close(self) -> None:
        """Checkpoint if worthwhile, then release files. Safe to call twice."""
        self._folder.close()

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
