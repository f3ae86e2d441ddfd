"""Which rows pass a filter: a search's or a listing's `requests.SearchFilter` read off the catalog's columns.

The catalog (catalog.py) keeps the rows and answers for one row at a time; this answers for sets of rows, as sorted
numpy arrays, so a filter on a million memories is a few intersections, not a million tests. Two paths:

    candidates / candidates_as_of   the current rows (or those standing at `as_of`) that pass, from the row sets
                                    kept per tag, source and label: what search and the listings start from
    matching                        a mask over a few given rows, current or not (history, tombstones), tested
                                    column by column: for the rows the row sets do not hold

`None` for "every current row" lets an unfiltered call on a one-namespace store skip the intersections entirely.
Like the catalog, it does no I/O and takes no lock.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from memserver.contract import requests
from memserver.contract.inputs import DEFAULT_NAMESPACE
from memserver.local import columns
from memserver.local.states import parse_state

if TYPE_CHECKING:
    from memserver.local.catalog import Catalog


class Filters:
    """The row-set queries on one catalog (its `filters`). See the module docstring."""

    def __init__(self, catalog: Catalog) -> None:
        self.c = catalog

    def namespace_rows(self, namespace: str) -> np.ndarray | None:
        """The current rows of `namespace` (sorted), or None when it holds every current row: filtering by the
        namespace of a one-namespace store costs nothing."""
        c = self.c
        spaces = c.per_namespace
        if namespace not in spaces:
            return columns.NO_ROWS if spaces else None
        if len(spaces) == 1:
            return None
        return c.namespaces.rows(namespace, c.alive[: c.next_row])

    def tag_counts(self, namespace: str = DEFAULT_NAMESPACE) -> dict[str, int]:
        """Current memories per tag in `namespace`, most first (ties by name); tags with none left are absent."""
        c = self.c
        ns = self.namespace_rows(namespace)
        counts = []
        for t in c.tag_rows.names():
            rows = c.tag_rows.rows(t, c.alive)
            n = len(rows) if ns is None else len(np.intersect1d(rows, ns, assume_unique=True))
            counts.append((t, n))
        return dict(sorted(((t, n) for t, n in counts if n), key=lambda kv: (-kv[1], kv[0])))

    def tagged_rows(self, tags: Sequence[str]) -> np.ndarray:
        """Current rows carrying any of `tags`, sorted."""
        c = self.c
        parts = [c.tag_rows.rows(t, c.alive) for t in tags]
        return parts[0] if len(parts) == 1 else columns.sorted_union(*parts)

    def candidates(self, f: requests.SearchFilter) -> np.ndarray | None:
        """Current rows passing every filter of `f` but as_of (sorted), or None when nothing filters (all)."""
        c = self.c
        rows = self.namespace_rows(f.namespace)  # sorted, unique
        if f.tags:
            rows = _and(rows, self.tagged_rows(f.tags))
        if f.source is not None:
            rows = _and(rows, c.source_rows.rows(f.source, c.alive))
        if f.labelled:
            alive = c.alive[: c.next_row]
            for labels, value in ((c.speakers, f.speaker), (c.roles, f.role), (c.sessions, f.session)):
                if value is not None:
                    rows = _and(rows, labels.rows(value, alive))
        if f.lifecycle:
            rows = self._admitted(rows, f)
        return c.times.within(rows, f) if f.timed else rows

    def _admitted(self, rows: np.ndarray | None, f: requests.SearchFilter) -> np.ndarray | None:
        """Of `rows` (None: every current row), those whose kind and archived state pass `f` (None: all still)."""
        states = self.c.states
        admitted = _admitted_codes(states.names, f)
        if len(admitted) == len(states.names):
            return rows
        if rows is None:
            rows = self.c.live_rows()
        return rows[np.isin(states.codes[rows], admitted)]

    def candidates_as_of(self, f: requests.SearchFilter) -> np.ndarray:
        """Rows passing every filter of `f` that stood at `f.as_of` (history.py), current or not, sorted."""
        c = self.c
        when = f.as_of or ""
        current = self.candidates(f)
        if current is None:
            current = c.live_rows()
        created = c.created.a[current]
        current = current[created <= (when.encode("ascii") if c.created.fixed else when)]
        held = c.history.rows()
        if len(held):
            held = held[self.matching(held, f)]
            held = held[c.history.visible_at(held, c.created.a[held], when)]
        return columns.sorted_union(current, held) if len(held) else current

    def matching(self, rows: np.ndarray, f: requests.SearchFilter) -> np.ndarray:
        """Which of `rows` (current or not: history, tombstones) pass every filter of `f` but as_of: a mask.
        Slower than `candidates` (tags and sources are tested row by row): for the few rows that are not current."""
        c = self.c
        keep = c.namespaces.matching(rows, f.namespace)
        for labels, value in ((c.speakers, f.speaker), (c.roles, f.role), (c.sessions, f.session)):
            if value is not None:
                keep &= labels.matching(rows, value)
        if f.timed:
            keep &= c.times.in_range(rows, f)
        if f.lifecycle:
            keep &= np.isin(c.states.codes[rows], _admitted_codes(c.states.names, f))
        if f.tags or f.source is not None:
            wanted = set(f.tags)
            for i, row in enumerate(rows.tolist()):
                if keep[i]:
                    tags = c.tags[row] or ()
                    keep[i] = (not wanted or not wanted.isdisjoint(tags)) and (
                        f.source is None or c.sources[row] == f.source
                    )
        return keep


def _admitted_codes(state_names: Sequence[str], f: requests.SearchFilter) -> np.ndarray:
    """The codes of the lifecycle states (states.state_key) whose kind and archived flag `f` admits."""
    codes = []
    for code, key in enumerate(state_names):
        kind, _, _, _, archived = parse_state(key)
        if f.admits(kind, archived):
            codes.append(code)
    return np.asarray(codes, np.int32)


def _and(rows: np.ndarray | None, more: np.ndarray) -> np.ndarray:
    """The intersection of two sorted row sets (None: every row)."""
    return more if rows is None else np.intersect1d(rows, more, assume_unique=True)
