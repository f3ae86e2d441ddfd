"""The time order: occurred_at by row, and the current rows sorted by (occurred_at, row).

What the since/until filters and the newest-first listings read (catalog.py). The sorted rows are a plain list kept
in order as memories come and go: most arrive newest (an append), a back-dated one is one insort. A time range is
then two bisections, and a filtered set of rows is tested against the occurred_at column instead, when it is the
smaller of the two.
"""

from __future__ import annotations

import bisect

import numpy as np

from memserver.contract import requests
from memserver.local import columns


class TimeOrder:
    """occurred_at by row (`occurred`) and the current rows in (occurred_at, row) order (`rows`)."""

    def __init__(self, occurred: columns.FixedText | None = None, rows: list[int] | None = None) -> None:
        self.occurred = columns.FixedText(32) if occurred is None else occurred  # as inputs.stored_time writes it
        self.rows: list[int] = [] if rows is None else rows  # the current rows, sorted by `key`

    def key(self, row: int) -> tuple[str, int]:
        return (self.occurred.get(row) or "", row)

    def insert(self, row: int) -> None:
        """`row` (its occurred_at set) becomes current."""
        rows = self.rows
        if not rows or self.key(row) > self.key(rows[-1]):
            rows.append(row)
        else:
            bisect.insort(rows, row, key=self.key)

    def remove(self, row: int) -> None:
        """`row` stops being current."""
        i = bisect.bisect_left(self.rows, self.key(row), key=self.key)
        if i < len(self.rows) and self.rows[i] == row:
            del self.rows[i]

    def sort(self, rows: np.ndarray) -> np.ndarray:
        """`rows` in (occurred_at, row) order, oldest first."""
        if len(rows) < 2:
            return rows
        if self.occurred.fixed:
            return rows[np.lexsort((rows, self.occurred.a[rows]))]
        return np.asarray(sorted(rows.tolist(), key=self.key), dtype=np.int64)

    def within(self, rows: np.ndarray | None, f: requests.SearchFilter) -> np.ndarray:
        """The current rows among `rows` (sorted; None: every current row) with occurred_at within the bounds of
        `f`: the time range walked (in time order) or the rows' times tested, whichever is shorter."""
        lo, hi = f.since, f.until
        times, key = self.rows, self.key
        i = 0 if lo is None else bisect.bisect_left(times, (lo, -1), key=key)
        if hi is None:
            j = len(times)
        elif f.until_inclusive:
            j = bisect.bisect_right(times, (hi, 1 << 62), key=key)
        else:
            j = bisect.bisect_left(times, (hi, -1), key=key)
        if rows is None or j - i <= len(rows):
            in_range = np.asarray(times[i:j], dtype=np.int64)
            if rows is not None:
                in_range = in_range[np.isin(in_range, rows, assume_unique=True)]
            return in_range
        picked: np.ndarray = rows[self.in_range(rows, f)]
        return picked

    def in_range(self, rows: np.ndarray, f: requests.SearchFilter) -> np.ndarray:
        """Which of `rows` (current or not) have occurred_at within the bounds of `f`: a mask."""
        occurred = self.occurred.a[rows]
        lo_v: str | bytes | None = f.since
        hi_v: str | bytes | None = f.until
        if self.occurred.fixed:  # ASCII: bytes order is str order
            lo_v = None if f.since is None else f.since.encode("ascii")
            hi_v = None if f.until is None else f.until.encode("ascii")
        keep = np.ones(len(rows), dtype=bool)
        if lo_v is not None:
            keep &= occurred >= lo_v
        if hi_v is not None:
            keep &= (occurred <= hi_v) if f.until_inclusive else (occurred < hi_v)
        return keep
