"""The bulk transfer of a local store: its memories exported as records, and records imported in batches of
writes.IMPORT_BATCH, each one group commit (writes.py). store.MemoryStore's export and import_ call these."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from memserver.contract import importing, inputs
from memserver.contract.write_rules import Pending
from memserver.errors import StoreError
from memserver.local import writes
from memserver.local.catalog import memory_of

if TYPE_CHECKING:
    from memserver.local.folder import Folder


def export(folder: Folder, include_vectors: bool, namespace: str | None) -> Iterator[dict[str, Any]]:
    """See backend.MemoryBackend.export. A vector export raises StoreError if the store is compacted meanwhile
    (its rows are renumbered); run it again."""
    space = None if namespace is None else inputs.check_namespace(namespace)
    with folder.thread_lock:
        gen = folder.refresh()
        cols = gen.catalog.export_columns(space)
    for i in range(0, len(cols.rows), writes.IMPORT_BATCH):
        batch = cols.records(i, i + writes.IMPORT_BATCH)
        vecs = None
        if include_vectors:
            with folder.thread_lock:
                if folder.current() is not gen or not gen.is_current():
                    raise StoreError("the store was compacted during export; run the export again")
                vecs = gen.vectors_of(batch)
        for n, r in enumerate(batch):
            d = memory_of(r).to_dict()
            if vecs is not None:
                d["vector"] = vecs[n].tolist()
            yield d


def import_(folder: Folder, records: Iterable[dict[str, Any]]) -> int:
    """See backend.MemoryBackend.import_. Records with a "vector" are not re-embedded: the bulk-load path.
    Batches of writes.IMPORT_BATCH; a record replacing one not there yet waits for the end of the import."""

    def batch(items: list[Pending], held: list[Pending]) -> int:
        return writes.import_batch(folder, items, held)

    with folder.importing():
        added = importing.import_records(records, folder.dim, Pending.of, batch, writes.IMPORT_BATCH)
    folder.checkpoint_if_due()
    return added
