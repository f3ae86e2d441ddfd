"""The write path's rules: memories on their way to the journal, which of them are duplicates, and which memory each
one replaces.

The store runs these under its locks (`write_adds` below): `without_duplicates` and `check_links` look at the
catalog as it stands once caught up, so two processes adding the same content, or replacing the same memory, at
once cannot both win. Nothing here writes; the store turns the survivors into journal lines (`records`).
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from memserver.contract import inputs
from memserver.contract.backend import Memory
from memserver.errors import StoreError
from memserver.local.catalog import Catalog
from memserver.local.replay import AddRecord

if TYPE_CHECKING:
    from memserver.local.folder import Folder

__all__ = ["Pending", "check_links", "records", "vector_of", "without_duplicates"]


@dataclass(eq=False)  # compared by identity (the store asks which items were held back)
class Pending:
    """A checked memory on its way to the journal (`vector` set once embedded; `dup_of` an earlier item; `where`
    the prefix naming it in messages: "", "items[3]." or "records[3].")."""

    m: inputs.NewMemory
    key: int  # inputs.content_key(m.content)
    where: str = ""
    id: str = ""
    created_at: str = ""
    vector: np.ndarray | None = None
    dup_of: int = -1  # index of an earlier item with the same content in the same batch

    @classmethod
    def of(cls, m: inputs.NewMemory, where: str = "") -> Pending:
        return cls(m, inputs.content_key(m.content), where, m.id, m.created_at, m.vector)

    @property
    def history(self) -> bool:
        """An imported memory that is history from the start (its newer version is not in the store)."""
        return bool(self.m.replaced_by)


def without_duplicates(catalog: Catalog, items: list[Pending]) -> tuple[list[Pending], list[Memory | None]]:
    """The items to write (`fresh`), and for the others the stored memory they duplicate (a current memory of
    their namespace with the same content, or an imported id that is stored); an item repeating an earlier one of
    `items` gets `dup_of` and None (it is written as that one). History (imported, already replaced) is matched by
    id only: its content may well equal a current memory's."""
    fresh: list[Pending] = []
    out: list[Memory | None] = [None] * len(items)
    first: dict[tuple[str, str], int] = {}  # (namespace, normalised content) -> first item
    for i, it in enumerate(items):
        it.dup_of = -1
        existing = None if it.history else catalog.duplicate_row(it.key, it.m.content, it.m.namespace)
        if existing is None and it.id:
            existing = catalog.row_of(it.id)  # an imported id that is stored already
        text = (it.m.namespace, inputs.normalised(it.m.content))
        if existing is not None:
            out[i] = catalog.memory(existing, duplicate=True)
        elif text in first and not it.history:
            it.dup_of = first[text]
        else:
            if not it.history:
                first[text] = i
            fresh.append(it)
    return fresh, out


def check_links(catalog: Catalog, items: Sequence[Pending], defer: bool = False) -> list[Pending]:
    """Check what each item replaces: a current memory of its namespace (or of an earlier item), replaced by no
    other item. Raises InvalidInputError naming `<where>replaces`; with `defer`, an item whose memory is not (yet)
    there is returned instead (an import resolves it after the rest). The other items may be written."""
    deferred: list[Pending] = []
    earlier: dict[str, Pending] = {}  # id -> item of this batch (imports: ids are known before writing)
    taken: set[str] = set()
    for it in items:
        target = it.m.replaces
        if target:
            name = f"{it.where}replaces"
            if target in taken:
                raise inputs.replaced_twice(name, target)
            row = catalog.row_of(target)
            before = earlier.get(target)
            if before is not None:
                if before.m.namespace != it.m.namespace:
                    raise inputs.no_such_memory(name, target, it.m.namespace)
                if before.history and before.m.replaced_by != it.id:
                    raise inputs.already_replaced(name, target, before.m.replaced_by)
            elif row is None or catalog.namespaces.get(row) != it.m.namespace:
                if defer:
                    deferred.append(it)
                    continue
                raise inputs.no_such_memory(name, target, it.m.namespace)
            elif not catalog.is_current(row):
                by = catalog.record(row).replaced_by
                if not it.id or by != it.id:  # (an import may name the memory that named it as its newer version)
                    raise inputs.already_replaced(name, target, by)
            taken.add(target)
        if it.id:
            earlier[it.id] = it
    return deferred


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
