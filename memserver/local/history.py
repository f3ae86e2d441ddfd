"""What the catalog keeps beside the current memories: replace links, and the tombstones of forgotten memories.

A memory added with `replaces` makes the one it names history: still stored (get() and export() return it, with
`replaced_by`), no longer current (search and the listings skip it, and the derived indexes drop it). A forget
leaves a tombstone: the memory's metadata and vector row stay until compaction, so that an `as_of` read can
answer as the collection stood before the forget. Both are sparse (most memories are neither), so they are
dicts by row rather than columns.

`visible_at` is the one definition of "as the collection stood at T": stored by T (created_at <= T), not replaced
by a memory stored by T, not forgotten by T.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memserver.local.columns import NO_ROWS

__all__ = ["History"]


class History:
    """Replace links and tombstones by row, for one journal generation."""

    def __init__(self) -> None:
        self.replaces: dict[int, str] = {}  # row -> the id it replaced (as its line says; may name no memory now)
        self.replaced: dict[int, tuple[str, str]] = {}  # row -> (the newer memory's id, its created_at)
        self.forgotten: dict[int, tuple[str, str]] = {}  # row -> (its id, when it was forgotten)

    def rows(self) -> np.ndarray:
        """The rows that are not current but still held (replaced, or forgotten), sorted."""
        held = self.replaced.keys() | self.forgotten.keys()
        return np.fromiter(sorted(held), np.int64, len(held)) if held else NO_ROWS

    def replaced_rows(self) -> list[int]:
        """The replaced rows that are not forgotten (stored history), ascending."""
        return sorted(row for row in self.replaced if row not in self.forgotten)

    def visible_at(self, rows: np.ndarray, created: np.ndarray, when: str) -> np.ndarray:
        """Which of `rows` (their created_at in `created`, as str or ASCII bytes) stood at `when`: a mask."""
        key: str | bytes = when.encode("ascii") if created.dtype.kind == "S" else when
        keep: np.ndarray = created <= key
        for i, row in enumerate(rows.tolist()):
            if not keep[i]:
                continue
            newer = self.replaced.get(row)
            gone = self.forgotten.get(row)
            if (newer is not None and newer[1] <= when) or (gone is not None and gone[1] <= when):
                keep[i] = False
        return keep

    # --- snapshot ------------------------------------------------------------------------------------------------

    def payload(self) -> tuple[Any, ...]:
        """Plain lists for the metadata snapshot (marshal): rows and values of each dict."""
        return (
            list(self.replaces),
            list(self.replaces.values()),
            list(self.replaced),
            [list(v) for v in self.replaced.values()],
            list(self.forgotten),
            [list(v) for v in self.forgotten.values()],
        )

    @classmethod
    def from_payload(cls, parts: tuple[Any, ...], n: int) -> History:
        """Inverse of `payload`; raises ValueError or TypeError when the parts do not fit."""
        rep_rows, rep_ids, old_rows, old_vals, gone_rows, gone_vals = parts
        out = cls()
        for rows, values in ((rep_rows, rep_ids), (old_rows, old_vals), (gone_rows, gone_vals)):
            if not isinstance(rows, list) or not isinstance(values, list) or len(rows) != len(values):
                raise ValueError("history lists do not match")
            if not all(isinstance(r, int) and 0 <= r < n for r in rows):
                raise ValueError("history names rows past the end")
        if not all(isinstance(v, str) for v in rep_ids):
            raise TypeError("replaces")
        pairs = [*old_vals, *gone_vals]
        if not all(isinstance(v, list) and len(v) == 2 and all(isinstance(x, str) for x in v) for v in pairs):
            raise TypeError("history pair")
        out.replaces = dict(zip(rep_rows, rep_ids, strict=True))
        out.replaced = {row: (v[0], v[1]) for row, v in zip(old_rows, old_vals, strict=True)}
        out.forgotten = {row: (v[0], v[1]) for row, v in zip(gone_rows, gone_vals, strict=True)}
        return out
