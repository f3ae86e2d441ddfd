"""The write path that single adds and imports share, and the bulk transfer: export and import.

`BulkTransfer` sits between `Collection` (collection.py: locks, opening, refresh, checkpoints) and `MemoryStore`
(store.py: the public methods): the group commit of new memories (vectors embedded outside the locks), the export of
a store as records, and the import of records, in batches of IMPORT_BATCH, each one group commit.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np

from memserver.contract import importing, inputs
from memserver.contract.backend import Memory
from memserver.contract.write_rules import Pending
from memserver.durable import disk_errors_as
from memserver.errors import StoreError
from memserver.local import folder, writes
from memserver.local.catalog import memory_of
from memserver.local.folder import Collection

IMPORT_BATCH = 1000


class BulkTransfer(Collection):
    """Collection + the write path's group commit, export and import (MemoryStore adds the rest of the contract)."""

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
        with self._thread_lock:
            self._importing += 1
        try:
            added = importing.import_records(records, self.dim, Pending.of, self._import_batch, IMPORT_BATCH)
        finally:
            with self._thread_lock:
                self._importing -= 1
        with self._thread_lock:
            if self._current().needs_checkpoint(folder.CHECKPOINT_RECORDS):
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
