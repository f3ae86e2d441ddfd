"""The write path's rules on the catalog (contract/write_rules, over `CatalogLookup`), and the journal records of
the memories that pass them.

The store runs these under its locks (`write_adds` below): `without_duplicates` and `check_links` look at the
catalog as it stands once caught up, so two processes adding the same content, or replacing the same memory, at
once cannot both win. Nothing here writes; the store turns the survivors into journal lines (`records`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from memserver.contract import inputs, write_rules
from memserver.contract.backend import Memory
from memserver.contract.write_rules import Pending
from memserver.errors import StoreError
from memserver.local.catalog import Catalog
from memserver.local.replay import AddRecord

if TYPE_CHECKING:
    from memserver.local.folder import Folder

__all__ = [
    "IMPORT_BATCH",
    "CatalogLookup",
    "check_links",
    "embed_missing",
    "import_batch",
    "records",
    "vector_of",
    "without_duplicates",
    "write_adds",
]


class CatalogLookup:
    """write_rules.RuleLookup over the catalog as it stands."""

    def __init__(self, catalog: Catalog) -> None:
        self.catalog = catalog

    def same_content(self, item: Pending) -> Memory | None:
        row = self.catalog.duplicate_row(item.key, item.m.content, item.m.namespace)
        return None if row is None else self.catalog.memory(row, duplicate=True)

    def with_id(self, memory_id: str) -> Memory | None:
        row = self.catalog.row_of(memory_id)
        return None if row is None else self.catalog.memory(row, duplicate=True)

    def link(self, memory_id: str) -> write_rules.Link | None:
        row = self.catalog.row_of(memory_id)
        if row is None:
            return None
        current = self.catalog.is_current(row)
        return write_rules.Link(
            self.catalog.namespaces.get(row), current, "" if current else self.catalog.record(row).replaced_by
        )


def without_duplicates(catalog: Catalog, items: list[Pending]) -> tuple[list[Pending], list[Memory | None]]:
    """write_rules.without_duplicates on the catalog."""
    return write_rules.without_duplicates(CatalogLookup(catalog), items)


def check_links(catalog: Catalog, items: Sequence[Pending], defer: bool = False) -> list[Pending]:
    """write_rules.check_links on the catalog."""
    return write_rules.check_links(CatalogLookup(catalog), items, defer)


def records(items: Sequence[Pending], first_row: int, stored: str) -> list[AddRecord]:
    """The journal records of items about to be written (their ids set), from row `first_row` on; `stored` is
    the created_at of the items that bring none."""
    out = []
    for n, it in enumerate(items):
        m = it.m
        created = it.created_at or stored
        out.append(
            AddRecord(
                it.id,
                m.content,
                created,
                m.tags,
                m.source,
                first_row + n,
                m.occurred_at or created,
                m.speaker,
                m.role,
                m.session,
                m.namespace,
                m.replaces,
                m.replaced_by,
                created if m.replaced_by else "",  # (when it was replaced is not known: from the start)
                m.kind,
                m.due,
                m.done,
                m.pinned,
                m.archived,
            )
        )
    return out


def vector_of(item: Pending) -> np.ndarray:
    if item.vector is None:
        raise StoreError("a memory reached the journal without its vector")  # (the write path embeds them all)
    return item.vector


# The group commit: the write path that single adds and imports share, run against the store's open Folder (new
# memories embedded outside the locks, written in one group commit each; imports in batches of IMPORT_BATCH).

IMPORT_BATCH = 1000


def write_adds(folder: Folder, items: list[Pending], importing: bool = False) -> tuple[list[Memory], list[Pending]]:
    """Write the non-duplicate items (vectors already set) in one group commit; results in item order. Returns
    also the items held back (an import's, replacing a memory not there yet: see check_links).

    An item without a vector (a duplicate when embedding began, whose memory has been deleted since: rare) is
    embedded with the locks released, and the write tried again."""
    while True:
        with folder.writing() as gen:
            catalog = gen.catalog
            fresh, out = without_duplicates(catalog, items)
            held = check_links(catalog, fresh, defer=importing)
            if held:
                fresh = [it for it in fresh if it not in held]
            missing = [it for it in fresh if it.vector is None]
            if not missing:
                if fresh:
                    for it in fresh:
                        it.id = it.id or uuid.uuid4().hex
                    gen.write_adds(
                        records(fresh, catalog.next_row, inputs.now()), np.stack([vector_of(it) for it in fresh])
                    )
                result = []
                for it, memory in zip(items, out, strict=True):
                    if it in held:
                        continue
                    if memory is None:  # written now, or a duplicate of an earlier item written now
                        own = items[it.dup_of] if it.dup_of >= 0 else it
                        memory = catalog.memory(catalog.ids[own.id], duplicate=it.dup_of >= 0)
                    result.append(memory)
                return result, held
        for it, v in zip(missing, folder.embed([it.m.content for it in missing]), strict=True):
            it.vector = v


def embed_missing(folder: Folder, items: list[Pending], check: bool = False) -> None:
    """Embed (outside every lock) the items that are not already known duplicates and have no vector; with
    `check`, refuse a bad `replaces` first (it is checked again when written)."""
    with folder.thread_lock:
        catalog = folder.refresh().catalog
        if check:
            check_links(catalog, without_duplicates(catalog, items)[0])
        todo = [
            it
            for it in items
            if it.vector is None and catalog.duplicate_row(it.key, it.m.content, it.m.namespace) is None
        ]
    if todo:  # known duplicates need no vector: the write path returns the existing memory
        for it, v in zip(todo, folder.embed([it.m.content for it in todo]), strict=True):
            it.vector = v


def import_batch(folder: Folder, batch: list[Pending], held: list[Pending]) -> int:
    """One import batch (importing.import_records calls it): the records not stored yet, embedded if they bring no
    vector, in one group commit; the ones held back join `held`. Returns how many were added."""
    if not batch:
        return 0
    with folder.thread_lock:
        catalog = folder.refresh().catalog
        batch = [it for it in batch if not (it.id and it.id in catalog)]
    if not batch:
        return 0
    embed_missing(folder, batch)
    written, waiting = write_adds(folder, batch, importing=True)
    held += waiting
    return sum(1 for m in written if not m.duplicate)
