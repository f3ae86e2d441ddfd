"""The catalog: the metadata of the live memories of one journal generation, by row, and the lookups on it.

A memory is a row: the order of its add line in the journal, which is also its row in the vector file and its
label in the indexes. The catalog keeps each row's id, content, created_at, tags and source by column
(columns.py: a million memories are not millions of Python objects), plus what the store looks up: id -> row,
content key -> rows (exact duplicates), tag/source -> rows, and the live rows in created_at order.

It is fed by the store's replay of the journal (`add`, `remove`), restored from a snapshot (snapshot.py), and
built afresh for a compacted generation (compaction.py). It does no I/O and takes no lock: the store serialises
every call. Rows are never reused within a generation (the write path hands them out upwards), so a removed row
is masked by `alive` rather than removed from every structure at once.
"""

from __future__ import annotations

import bisect
import heapq
import logging
from collections.abc import Sequence
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from memserver import columns, inputs
from memserver.backend import Memory
from memserver.journal import AddRecord

log = logging.getLogger(__name__)


class ExportColumns(NamedTuple):
    """The columns of the live memories, oldest first, copied at one moment (see `Catalog.export_columns`)."""

    rows: np.ndarray
    ids: np.ndarray
    created: np.ndarray
    texts: bytes | bytearray
    starts: np.ndarray
    ends: np.ndarray
    tags: list[tuple[str, ...] | None]  # (None only for a removed row, which these never are)
    sources: list[str | None]

    def records(self, start: int, stop: int) -> list[AddRecord]:
        return [
            AddRecord(
                columns.as_str(self.ids[j]),
                self.texts[self.starts[j] : self.ends[j]].decode("utf-8", "surrogatepass"),
                columns.as_str(self.created[j]),
                self.tags[j] or (),
                self.sources[j] or "",
                int(self.rows[j]),
            )
            for j in range(start, min(stop, len(self.rows)))
        ]


class Catalog:
    """The live memories' metadata by row. See the module docstring."""

    def __init__(self) -> None:
        self.ids = columns.IdMap()  # id -> row of the live memories; also row -> id (`id_at`)
        self.contents = columns.TextHeap()
        self.created = columns.FixedText(32)  # what inputs.stored_time writes: 32 ASCII characters
        self.tags: list[tuple[str, ...] | None] = []  # by row; None: a removed row, or one never written
        self.sources: list[str | None] = []
        self.alive = np.zeros(0, dtype=bool)  # by row (capacity may exceed next_row)
        self.content_keys = columns.HashIndex()  # inputs.content_key -> rows
        self.tag_rows = columns.RowSets()
        self.source_rows = columns.RowSets()
        self.by_time: list[int] = []  # live rows sorted by (created_at, row): see `_time_key`
        self.next_row = 0  # one past the highest row ever added
        self._interned: dict[Any, Any] = {}  # one object per distinct tag tuple / source

    def __len__(self) -> int:
        return len(self.ids)

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self.ids

    # --- changes (the replay path) --------------------------------------------------------------------------

    def add(self, r: AddRecord) -> bool:
        """Add the memory `r` at its row; False (and nothing done) if its id or its row is taken already."""
        key = columns.id_key(r.id)
        if self.ids.get(r.id, key=key) is not None:
            return False
        row = r.row
        if row < self.next_row:
            # A row is never given twice: the write path hands out rows upwards, in journal order. The row sets and
            # key indexes rely on it (they drop a removed row lazily), so a line that reuses a row is refused.
            owner = self.id_at(row) or "a deleted memory"
            log.error("journal line of %s reuses row %d (of %s); ignoring it", r.id, row, owner)
            return False
        if row >= len(self.tags) or row >= len(self.alive):
            self._grow(row)
        self.ids.insert(r.id, row, key)
        self.contents.set(row, r.content)
        self.created.set(row, r.created_at)
        self.tags[row] = tags = self._interned.setdefault(r.tags, r.tags)
        self.sources[row] = self._interned.setdefault(r.source, r.source)
        self.alive[row] = True
        self.content_keys.add(inputs.content_key(r.content), row)
        for t in tags:
            self.tag_rows.add(t, row)
        self.source_rows.add(r.source, row)
        times = self.by_time
        if not times or (r.created_at, row) > self._time_key(times[-1]):
            times.append(row)
        else:
            bisect.insort(times, row, key=self._time_key)
        self.next_row = row + 1
        return True

    def remove(self, r: AddRecord) -> None:
        """Forget the live memory `r` (its tag, source and content-key entries go when next read: columns.RowSets)."""
        row = r.row
        i = bisect.bisect_left(self.by_time, (r.created_at, row), key=self._time_key)
        if i < len(self.by_time) and self.by_time[i] == row:
            del self.by_time[i]
        del self.ids[r.id]
        self.contents.clear(row)
        self.created.clear(row)
        self.tags[row] = self.sources[row] = None
        self.alive[row] = False

    def _grow(self, row: int) -> None:
        """Make room for `row` in every column (the numpy ones share one capacity, doubled as needed)."""
        if row >= len(self.tags):
            more = row + 1 - len(self.tags)
            self.tags.extend(repeat(None, more))
            self.sources.extend(repeat(None, more))
        if row >= len(self.alive):
            capacity = max(1024, row + 1, 2 * len(self.alive))
            alive = np.zeros(capacity, dtype=bool)
            alive[: len(self.alive)] = self.alive
            self.alive = alive
            for col in (self.ids.ids, self.contents, self.created):
                col.grow(capacity)

    # --- one memory ----------------------------------------------------------------------------------------------

    def row_of(self, memory_id: str) -> int | None:
        """The row of the live memory `memory_id`, or None."""
        return self.ids.get(memory_id)

    def id_at(self, row: int) -> str | None:
        """The id of the live memory at `row`, or None."""
        return self.ids.id_at(row)

    def created_at(self, row: int) -> str:
        """created_at of the live memory at `row`."""
        return self.created.get(row) or ""

    def record(self, row: int) -> AddRecord:
        """The live memory at `row` as a record (the caller knows the row is live)."""
        return AddRecord(
            self.ids.id_at(row) or "",
            self.contents.get(row),
            self.created.get(row) or "",
            self.tags[row] or (),
            self.sources[row] or "",
            row,
        )

    def memory(self, row: int, duplicate: bool = False) -> Memory:
        r = self.record(row)
        return Memory(r.id, r.content, r.created_at, r.tags, r.source, duplicate)

    def duplicate_row(self, key: int, content: str) -> int | None:
        """The live row whose content equals `content` (whitespace aside; the lowest such row), or None."""
        found = None
        text = None
        for row in self.content_keys.rows(key):
            if (found is None or row < found) and self.alive[row]:
                if text is None:
                    text = inputs.normalised(content)
                if inputs.normalised(self.contents.get(row)) == text:
                    found = row
        return found

    def _time_key(self, row: int) -> tuple[str, int]:
        return (self.created.get(row) or "", row)

    # --- many memories -------------------------------------------------------------------------------------------

    def live_rows(self) -> np.ndarray:
        """Every live row, ascending."""
        return np.flatnonzero(self.alive[: self.next_row])

    def newest(self, limit: int, tags: Sequence[str] = ()) -> list[int]:
        """Up to `limit` live rows, newest created_at first (then the later row); with `tags`, carrying any."""
        if tags:
            return heapq.nlargest(limit, self._tag_union(tags).tolist(), key=self._time_key)
        return self.by_time[-limit:][::-1]

    def ids_with_prefix(self, prefix: str, limit: int) -> list[str]:
        """The live ids starting with `prefix` (lower-case hex), ascending, at most `limit`.

        A scan of the id column in numpy (a removed row holds b"", which no prefix but "" matches): 1M memories,
        ~20 ms. Only the lowest `limit` matches are sorted (picked by their first 8 bytes), so an empty prefix
        costs the scan, not a sort of every id.
        """
        column = self.ids.ids
        if not column.fixed:  # an id that did not fit the fixed-width column (never one made by add)
            found = sorted(v for v in column.a[: self.next_row].tolist() if v and v.startswith(prefix))
            return found[:limit]
        ids = column.a[: self.next_row]
        matches = ids[np.char.startswith(ids, prefix.encode("ascii"))] if prefix else ids[ids != b""]
        if len(matches) > limit:
            heads = np.ascontiguousarray(matches.view(np.uint8).reshape(-1, column.width)[:, :8]).view(">u8").ravel()
            matches = matches[heads <= np.partition(heads, limit - 1)[limit - 1]]
        return [v.decode("ascii") for v in np.sort(matches)[:limit].tolist()]

    def tag_counts(self) -> dict[str, int]:
        counts = ((t, len(self.tag_rows.rows(t, self.alive))) for t in self.tag_rows.names())
        return dict(sorted(((t, c) for t, c in counts if c), key=lambda kv: (-kv[1], kv[0])))

    def _tag_union(self, tags: Sequence[str]) -> np.ndarray:
        """Live rows carrying any of `tags`, sorted."""
        parts = [self.tag_rows.rows(t, self.alive) for t in tags]
        return parts[0] if len(parts) == 1 else columns.sorted_union(*parts)

    def candidates(self, f: inputs.SearchFilter) -> np.ndarray | None:
        """Rows of live memories passing every filter of `f` (sorted), or None when `f` is empty (all of them)."""
        rows: np.ndarray | None = None  # sorted, unique
        if f.tags:
            rows = self._tag_union(f.tags)
        if f.source is not None:
            by_source = self.source_rows.rows(f.source, self.alive)
            rows = by_source if rows is None else np.intersect1d(rows, by_source, assume_unique=True)
        if not f.timed:
            return rows
        lo, hi = f.since, f.until
        times, key = self.by_time, self._time_key
        i = 0 if lo is None else bisect.bisect_left(times, (lo, -1), key=key)
        if hi is None:
            j = len(times)
        elif f.until_inclusive:
            j = bisect.bisect_right(times, (hi, 1 << 62), key=key)
        else:
            j = bisect.bisect_left(times, (hi, -1), key=key)
        if rows is None or j - i <= len(rows):  # walk the time range, or test the rows' times: the shorter
            in_range = np.asarray(times[i:j], dtype=np.int64)
            if rows is not None:
                in_range = in_range[np.isin(in_range, rows, assume_unique=True)]
            return in_range
        created = self.created.a[rows]
        lo_v: str | bytes | None = lo
        hi_v: str | bytes | None = hi
        if self.created.fixed:  # ASCII: bytes order is str order
            lo_v = None if lo is None else lo.encode("ascii")
            hi_v = None if hi is None else hi.encode("ascii")
        keep = np.ones(len(rows), dtype=bool)
        if lo_v is not None:
            keep &= created >= lo_v
        if hi_v is not None:
            keep &= (created <= hi_v) if f.until_inclusive else (created < hi_v)
        return rows[keep]

    def export_columns(self) -> ExportColumns:
        """Copies of the live memories' columns, oldest first (~110 MB at 1M memories; records would be ~0.5 GB).

        The text buffer is shared, not copied: its bytes never change (it is only appended to, or replaced by a
        compacted copy; see columns.TextHeap), so the copy stays valid while the catalog changes.
        """
        rows = np.asarray(self.by_time, dtype=np.int64)
        return ExportColumns(
            rows,
            self.ids.ids.a[rows],
            self.created.a[rows],
            self.contents.buf,
            self.contents.start[rows],
            self.contents.end[rows],
            list(map(self.tags.__getitem__, rows.tolist())),
            list(map(self.sources.__getitem__, rows.tolist())),
        )
