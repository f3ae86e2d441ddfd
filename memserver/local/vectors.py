"""The vector row file of one journal generation, `vectors-<generation>.f32`, and the checks on what it returns.

Row r is `dim` float32 at byte r * dim * 4, no header. Rows are written unsynced, before the journal lines that
reference them (journal.py tells the crash story): each add line carries `vcrc`, the CRC-32 of its row, so a row
lost to power loss (the kernel wrote the journal page but not the row's) is caught when read for an index, and
re-embedded from the line's content. The re-embedded rows are kept here (`repaired`) until a checkpoint writes
them back, synced, and the store appends a `vfix` line with each new CRC.

Reads (`matrix`: the hybrid ranking's pool and neighbours, the hits' cosines, exact ranking over a filter) go
through a read-only map of the file: ~100 scattered rows cost ~5 us there against ~0.3 ms as one pread each. The
pages a search touches would stay in the RSS (file pages) until the whole file is resident, so once the rows read
since the last drop could have touched MAP_RSS_BUDGET bytes of pages, the map's pages are dropped from the process
(MADV_DONTNEED: they stay in the page cache). The next read faults them back in, and that is not cheap: ~14 us a
row (100 scattered rows of the 100k file: 1.4 ms after a drop, 21 us warm; the drop itself 6 ms once the file is
mapped; /tmp script, 3 Dec). So the budget is one that a 100k store's whole file (154 MB) fits, and a map no larger
than the budget is never dropped; at 1M (1.5 GB) a drop comes every few hundred searches, the RSS at most 256 MB
above the fresh process's. (Hybrid at 100k in process, 64 MB against no drops: p50 1.37-1.43 -> 0.92-1.04 ms.)
Writes go through a durable.FileLayer (reads do not). Not thread-safe: the store serialises every call.
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from memserver.durable import OS, FileLayer, pwrite_all
from memserver.local.replay import AddRecord

log = logging.getLogger(__name__)

# The map's resident pages are dropped once the rows read since the last drop may have touched this much.
MAP_RSS_BUDGET = 256 << 20
_PAGE = mmap.PAGESIZE

Embed = Callable[[Sequence[str]], np.ndarray]
"""Texts -> their unit vectors, (n, dim) float32: how a damaged row is made again."""


def vector_path(folder: Path, generation: str) -> Path:
    return folder / f"vectors-{generation}.f32"


def row_crc(vector: np.ndarray) -> int:
    """The CRC-32 a journal line records for a vector row."""
    return zlib.crc32(np.ascontiguousarray(vector, dtype=np.float32).tobytes())


def read_rows(fd: int, rows: Sequence[int], dim: int) -> np.ndarray:
    """Vector rows from `fd`, consecutive rows in one read; rows past the end of the file come back as zeros."""
    rowbytes = dim * 4
    out = np.zeros((len(rows), dim), dtype=np.float32)
    i = 0
    while i < len(rows):
        j = i + 1
        while j < len(rows) and rows[j] == rows[j - 1] + 1 and j - i < 65536:
            j += 1
        data = os.pread(fd, (j - i) * rowbytes, rows[i] * rowbytes)
        whole = len(data) // rowbytes
        if whole:  # (reshape(0, -1) raises: all of these rows lie past the end)
            out[i : i + whole] = np.frombuffer(data, dtype=np.float32, count=whole * dim).reshape(whole, -1)
        i = j
    return out


def damaged(vecs: np.ndarray, rows: Sequence[int], crcs: np.ndarray, present: int) -> list[int]:
    """Positions in `rows` whose vector (in `vecs`) is past the file's `present` rows or fails its known CRC."""
    bad = []
    for i, row in enumerate(rows):
        want = int(crcs[row]) if row < len(crcs) else -1  # -1: no CRC known (a line without vcrc)
        if row >= present or (want >= 0 and zlib.crc32(vecs[i].tobytes()) != want):
            bad.append(i)
    return bad


class VectorFile:
    """The open row file, the CRC each row should have (from the journal), and the rows re-embedded since."""

    def __init__(self, path: Path, dim: int, files: FileLayer = OS) -> None:
        self.path = path
        self.dim = dim
        self.rowbytes = dim * 4
        self.files = files
        try:
            self.fd = files.open(path, os.O_RDWR)
        except FileNotFoundError:  # a new generation: its name is made durable before any row is acknowledged
            self.fd = files.open(path, os.O_RDWR | os.O_CREAT)
            files.fsync_dir(path.parent)
        self.crcs = np.full(0, -1, dtype=np.int64)  # by row: CRC-32 from the journal, -1 when unknown
        self.repaired: dict[int, np.ndarray] = {}  # row -> re-embedded vector, not yet written back
        self._map: mmap.mmap | None = None
        self._map_rows = 0
        self._touched = 0  # bytes of pages the reads since the last drop may have made resident (a bound)

    # --- the CRCs the journal records --------------------------------------------------------------------------

    def expect(self, row: int, crc: int) -> None:
        """Row `row` (just added) should hash to `crc`, its add line's vcrc."""
        if row >= len(self.crcs):
            grown = np.full(max(1024, row + 1, 2 * len(self.crcs)), -1, dtype=np.int64)
            grown[: len(self.crcs)] = self.crcs
            self.crcs = grown
        self.crcs[row] = crc

    def fixed(self, row: int, crc: int) -> None:
        """A vfix line: the re-embedded row `row` is on disk now, with this CRC."""
        if 0 <= row < len(self.crcs):  # (a vfix always follows its row's add)
            self.crcs[row] = crc
        self.repaired.pop(row, None)

    def restore_crcs(self, crcs: np.ndarray) -> None:
        """The CRCs of a metadata snapshot (snapshot.py), by row."""
        self.crcs = crcs

    # --- writing -----------------------------------------------------------------------------------------------

    def write(self, first_row: int, vecs: np.ndarray) -> None:
        """Write rows from `first_row` on, unsynced (the journal lines that reference them are synced after)."""
        data = np.ascontiguousarray(vecs, dtype=np.float32).tobytes()
        pwrite_all(self.fd, data, first_row * self.rowbytes, self.files)

    def sync(self) -> None:
        self.files.fsync(self.fd)

    def write_back_repairs(self, is_live: Callable[[int], bool]) -> list[tuple[int, int]]:
        """Write the re-embedded rows of live memories back, synced; returns (row, new CRC) for their vfix lines."""
        fixes = sorted((row, v) for row, v in self.repaired.items() if is_live(row))
        if not fixes:
            self.repaired.clear()
            return []
        out = []
        for row, v in fixes:
            data = np.asarray(v, dtype=np.float32).tobytes()
            pwrite_all(self.fd, data, row * self.rowbytes, self.files)
            out.append((row, zlib.crc32(data)))
        self.files.fsync(self.fd)
        log.warning("rewrote %d re-embedded vector row(s) in %s", len(fixes), self.path)
        return out

    # --- reading -----------------------------------------------------------------------------------------------

    def checked(self, records: Sequence[AddRecord], embed: Embed) -> np.ndarray:
        """Stored vectors of `records`, each checked against its CRC; a damaged row is re-embedded (logged)."""
        rows = [r.row for r in records]
        vecs = read_rows(self.fd, rows, self.dim)
        present = os.fstat(self.fd).st_size // self.rowbytes  # rows past it were lost (power loss)
        bad = []
        for i in damaged(vecs, rows, self.crcs, present):
            again = self.repaired.get(rows[i])  # re-embedded already (for another derived index)
            if again is None:
                bad.append(i)
            else:
                vecs[i] = again
        if bad:
            log.error(
                "%d stored vector row(s) in %s are damaged or missing; re-embedding them (written back at the next "
                "checkpoint)",
                len(bad),
                self.path,
            )
            for i, v in zip(bad, embed([records[i].content for i in bad]), strict=True):
                vecs[i] = v
                self.repaired[rows[i]] = v
        return vecs

    def present_rows(self) -> int:
        """How many whole rows the file holds now."""
        return os.fstat(self.fd).st_size // self.rowbytes

    def matrix(self, rows: np.ndarray) -> np.ndarray:
        """Stored vectors of live rows (checked when they were indexed), through the read-only map (module
        docstring: why, and how its pages are kept from filling the RSS)."""
        if not len(rows):
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._mapped(rows)
        self._touched += len(rows) * (self.rowbytes // _PAGE + 2) * _PAGE  # a row spans at most this many pages
        # (a map no larger than the budget is never dropped: its resident pages cannot pass it)
        whole = self._map_rows * self.rowbytes
        if self._touched > MAP_RSS_BUDGET < whole and self._map is not None and hasattr(mmap, "MADV_DONTNEED"):
            self._map.madvise(mmap.MADV_DONTNEED)
            self._touched = 0
        if self.repaired:
            for i, row in enumerate(rows.tolist()):
                if row in self.repaired:
                    out[i] = self.repaired[row]
        return out

    def _mapped(self, rows: np.ndarray) -> np.ndarray:
        need = int(rows.max()) + 1 if len(rows) else 0
        if need > self._map_rows:
            self._unmap()
            size = os.fstat(self.fd).st_size
            if size < self.rowbytes:  # nothing to map (a file truncated by power loss): every row is `repaired`
                return np.zeros((len(rows), self.dim), dtype=np.float32)
            self._map = mmap.mmap(self.fd, size, access=mmap.ACCESS_READ)
            # Rows are read scattered: in a map larger than the budget, readahead and fault-around (16 pages a
            # fault) only fill the RSS; in one that fits it, they map a fresh process's pages ~3x faster.
            if size > MAP_RSS_BUDGET and hasattr(mmap, "MADV_RANDOM"):
                self._map.madvise(mmap.MADV_RANDOM)
            self._map_rows = size // self.rowbytes
        assert self._map is not None
        mat = np.frombuffer(self._map, dtype=np.float32, count=self._map_rows * self.dim).reshape(-1, self.dim)
        if need > self._map_rows:  # rows past the end of a truncated file: re-embedded (`repaired`), zeros here
            inside = rows < self._map_rows
            padded = np.zeros((len(rows), self.dim), dtype=np.float32)
            padded[inside] = mat[rows[inside]]
            return padded
        picked: np.ndarray = mat[rows]  # a copy: fancy indexing
        return picked

    def _unmap(self) -> None:
        if self._map is not None:
            with contextlib.suppress(BufferError):  # a caller may still hold a view; the GC closes it then
                self._map.close()
            self._map = None

    def close(self) -> None:
        self._unmap()
        if self.fd >= 0:
            self.files.close(self.fd)
            self.fd = -1
