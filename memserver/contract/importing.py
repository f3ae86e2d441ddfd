"""The import loop both engines share: each record checked, written in batches, replacements resolved last.

A record may replace a memory that a later record of the same import creates (an export lists memories oldest
first, but a replacement can come before what it replaces when imported by id). So a batch holds back the items
whose memory is not there yet (`held`); once every batch is written they are tried again, pass after pass, until a
pass writes none: those name nothing and the import stops with a message naming the first.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Protocol, TypeVar

from memserver.contract import inputs, requests
from memserver.errors import InvalidInputError


class ImportItem(Protocol):
    """What the loop reads of an engine's pending item (write_rules.Pending)."""

    m: requests.NewMemory
    where: str
    id: str


T = TypeVar("T", bound=ImportItem)


def import_records(
    records: Iterable[dict[str, Any]],
    dim: int,
    item_of: Callable[[requests.NewMemory, str], T],
    write_batch: Callable[[list[T], list[T]], int],
    batch_size: int,
) -> int:
    """Import `records` through `write_batch(batch, held)` (returns how many it added; appends to `held` the items
    it holds back), `batch_size` at a time; the number of memories added."""
    added = 0
    batch: list[T] = []
    held: list[T] = []
    ids: set[str] = set()
    for n, record in enumerate(inputs.check_items(records, "records")):
        item = item_of(requests.imported_memory(record, n, dim), f"records[{n}].")
        if item.id:
            if item.id in ids:  # which of the two would win is a guess: refuse rather than lose one
                raise InvalidInputError(f"records[{n}].id {item.id} appears twice in this import")
            ids.add(item.id)
        batch.append(item)
        if len(batch) >= batch_size:
            added += write_batch(batch, held)
            batch = []
    added += write_batch(batch, held)
    while held:  # each pass writes those whose memory is there now; none written: they name nothing
        waiting, held = held, []
        added += write_batch(waiting, held)
        if len(held) == len(waiting):
            first = held[0]
            raise inputs.no_such_memory(f"{first.where}replaces", first.m.replaces, first.m.namespace)
    return added
