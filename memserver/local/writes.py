"""The write path's rules on the catalog (contract/write_rules, over `CatalogLookup`), and the journal records of
the memories that pass them.

The store runs these under its locks (store.py `_write_adds`): `without_duplicates` and `check_links` look at the
catalog as it stands once caught up, so two processes adding the same content, or replacing the same memory, at
once cannot both win. Nothing here writes; the store turns the survivors into journal lines (`records`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from memserver.contract import write_rules
from memserver.contract.backend import Memory
from memserver.contract.write_rules import Pending
from memserver.errors import StoreError
from memserver.local.catalog import Catalog
from memserver.local.replay import AddRecord

__all__ = ["CatalogLookup", "check_links", "records", "vector_of", "without_duplicates"]


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
            )
        )
    return out


def vector_of(item: Pending) -> np.ndarray:
    if item.vector is None:
        raise StoreError("a memory reached the journal without its vector")  # (the write path embeds them all)
    return item.vector
