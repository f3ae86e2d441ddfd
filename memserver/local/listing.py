"""Listings over the catalog: pages newest first with their cursors, bulk selections, and counts per session.

The order of a listing is newest first by a time key: (occurred_at, row) descending, the catalog's time order, or
for list_page's order "stored" (created_at, row) descending (sorted per page: created_at has no kept order, as it is
rarely asked for); the row breaks ties (the later-stored first). A cursor names the last memory of a page by that
key, so the next page is whatever sorts below it at the time it is asked: memories added meanwhile either sort
above it (newer: not listed) or below it (listed once), and nothing already listed comes again.

Rows are renumbered by a compaction (in stored order, so the order itself stays); a cursor of an older
generation is placed again by its memory's id, and if that memory is gone, just above every memory of its time
(some of those may then be listed twice; none is skipped). A cursor is `c1.` (by occurred_at) or `s1.` (by
created_at) + base64url of a small JSON list (contract/cursors).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from memserver.contract import cursors, inputs, requests
from memserver.local.catalog import Catalog

__all__ = ["decode_cursor", "encode_cursor", "page", "select_rows", "session_counts"]

TimeKey = tuple[str, int]  # (occurred_at or created_at, row)
_PREFIXES = {"occurred": "c1.", "stored": "s1."}
_AFTER_EVERY_ROW = 1 << 62


def _time(catalog: Catalog, row: int, order: str) -> str:
    """The time a row sorts by in `order`."""
    return catalog.created_at(row) if order == "stored" else catalog.occurred_at(row)


def encode_cursor(catalog: Catalog, row: int, generation: str, order: str = "occurred") -> str:
    """The cursor of a page ending with the memory at `row`."""
    payload = [_time(catalog, row, order), row, generation[:12], catalog.record(row).id]
    return cursors.encode(_PREFIXES[order], payload)


def _cursor_fields(payload: Any) -> tuple[str, int, str, str]:
    time, row, gen, memory_id = payload
    if not (isinstance(time, str) and isinstance(row, int) and isinstance(gen, str)):
        raise ValueError("fields")
    if not isinstance(memory_id, str) or not inputs.is_memory_id(memory_id):
        raise ValueError("id")
    inputs.parse_time(time, "cursor")
    return time, row, gen, memory_id


def decode_cursor(cursor: str, catalog: Catalog, generation: str, order: str = "occurred") -> TimeKey:
    """The time key a cursor stands at (see the module docstring); InvalidInputError naming `cursor` if it is not
    one this store returned for `order`."""
    time, row, gen, memory_id = cursors.decode(cursor, _PREFIXES[order], _cursor_fields)
    if gen == generation[:12]:
        return (time, row)
    moved = catalog.row_of(memory_id)
    if moved is not None and _time(catalog, moved, order) == time:
        return (time, moved)
    return (time, _AFTER_EVERY_ROW)


def page(
    catalog: Catalog, f: requests.SearchFilter, limit: int, below: TimeKey | None, order: str = "occurred"
) -> tuple[list[int], bool]:
    """Up to `limit` rows passing `f` (as they stood at `f.as_of`, if given), newest first in `order`, that sort
    below the time key `below` (None: from the newest); and whether more follow."""
    rows = catalog.filters.candidates_as_of(f) if f.as_of is not None else catalog.filters.candidates(f)
    ordered: Sequence[int]
    if order == "stored":
        ordered = _by_created(catalog, catalog.live_rows() if rows is None else rows)
    else:  # (no filter: every current row, already in time order)
        ordered = catalog.times.rows if rows is None else catalog.times.sort(rows).tolist()
    end = len(ordered) if below is None else bisect.bisect_left(ordered, below, key=_key(catalog, order))
    start = max(0, end - limit)
    return list(reversed(ordered[start:end])), start > 0


def _key(catalog: Catalog, order: str) -> Callable[[int], TimeKey]:
    if order == "stored":
        return lambda row: (catalog.created_at(row), row)
    return catalog.times.key


def _by_created(catalog: Catalog, rows: np.ndarray) -> list[int]:
    """`rows` in (created_at, row) order, oldest first."""
    if len(rows) < 2:
        return [int(row) for row in rows]
    if catalog.created.fixed:
        return [int(row) for row in rows[np.lexsort((rows, catalog.created.a[rows]))]]
    return sorted((int(row) for row in rows), key=_key(catalog, "stored"))


def select_rows(catalog: Catalog, s: requests.SelectFilter) -> list[int]:
    """The rows a bulk selection takes, newest first: current ones passing the filter (and replaced ones with
    `include_replaced`), stored before `s.before` if given."""
    rows = catalog.filters.candidates(s.filter)
    if rows is None:
        rows = catalog.live_rows()
    if s.include_replaced:
        held = np.asarray(catalog.history.replaced_rows(), dtype=np.int64)
        if len(held):
            held = held[catalog.filters.matching(held, s.filter)]
            rows = np.union1d(rows, held)
    if s.before is not None:
        created = catalog.created.a[rows]
        rows = rows[created < (s.before.encode("ascii") if catalog.created.fixed else s.before)]
    return list(reversed(catalog.times.sort(rows).tolist()))


def session_counts(catalog: Catalog, namespace: str) -> dict[str, int]:
    """Current memories of `namespace` per session, the session with the newest occurred_at first."""
    ns = catalog.filters.namespace_rows(namespace)
    alive = catalog.alive[: catalog.next_row]
    found: list[tuple[str, int, str]] = []
    for name in catalog.sessions.values():
        rows = catalog.sessions.rows(name, alive)
        if ns is not None:
            rows = np.intersect1d(rows, ns, assume_unique=True)
        if len(rows):
            newest = max(catalog.occurred_at(row) for row in rows.tolist())
            found.append((newest, len(rows), name))
    found.sort(key=lambda t: (t[0], t[2]), reverse=True)
    return {name: n for _, n, name in found}
