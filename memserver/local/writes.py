"""The write path's rules: memories on their way to the journal, which of them are duplicates, and which memory each
one replaces.

The store runs these under its locks (store.py `_write_adds`): `without_duplicates` and `check_links` look at the
catalog as it stands once caught up, so two processes adding the same content, or replacing the same memory, at
once cannot both win. Nothing here writes; the store turns the survivors into journal lines (`records`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memserver.contract import inputs
from memserver.contract.backend import Memory
from memserver.errors import StoreError
from memserver.local.catalog import Catalog
from memserver.local.replay import AddRecord

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
