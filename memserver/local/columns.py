"""The store's metadata by column: per-memory fields in numpy arrays indexed by row, not one Python object each.

Why: at a million memories, a dict of records, a dict of rows, sets per tag and the rest cost ~1,000 bytes and
several Python objects per memory (3.3 GB for a 1M store with its index, 5.5 s to open); these columns cost ~350
bytes per memory and load from a snapshot as raw buffers (2.5 GB, 3.2 s). See benchmarks/README.md, finding 3.

Rows are never reused within a journal generation (the store hands them out upwards, in journal order), so a
deleted row is masked out by the store's `alive` array rather than removed from every structure at once. 64-bit
hashes stand in for ids and content keys; a match is always confirmed on the value itself, so a collision costs a
comparison, never a wrong answer. The store serialises every call (its thread lock); nothing here locks.
"""

from __future__ import annotations

import hashlib
import logging
import operator
from itertools import repeat
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

NO_ROWS = np.empty(0, dtype=np.int64)


def sorted_union(*parts: np.ndarray) -> np.ndarray:
    """The sorted distinct values of int64 arrays (np.union1d/np.unique hash in numpy 2: ~8x slower here)."""
    a = np.concatenate(parts) if len(parts) > 1 else parts[0].copy()
    a.sort()
    if len(a) > 1:
        a = a[np.concatenate(([True], a[1:] != a[:-1]))]
    return a


class RowSets:
    """name -> rows (the rows of each tag, of each source): a sorted int64 array per name plus recent additions.

    Why not a set per name: at 1M memories with one tag each, the tag and source sets took ~140 MB (a set slot and
    an int object per row); an array takes 8 bytes per row. Rows are never reused within a generation, so a
    deleted row is not removed here: readers pass the store's `alive` mask, and reading (or saving) drops it.
    """

    def __init__(self) -> None:
        self._base: dict[str, np.ndarray] = {}
        self._new: dict[str, list[int]] = {}

    def add(self, name: str, row: int) -> None:
        new = self._new.get(name)
        if new is None:
            new = self._new[name] = []
        new.append(row)
        if len(new) >= 1024 + (len(self._base.get(name, NO_ROWS)) >> 2):
            self._base[name] = sorted_union(self._base.get(name, NO_ROWS), np.asarray(self._new.pop(name), np.int64))

    def rows(self, name: str, alive: np.ndarray) -> np.ndarray:
        """The live rows under `name`, sorted (a new array, the caller may keep or change it)."""
        rows: np.ndarray = self._live(name, alive).copy()
        return rows

    def _live(self, name: str, alive: np.ndarray) -> np.ndarray:
        """The live rows under `name`, sorted, as kept here (recent additions merged in, dead rows dropped)."""
        base = self._base.get(name, NO_ROWS)
        new = self._new.pop(name, None)
        if new:
            base = sorted_union(base, np.asarray(new, np.int64))
        live = base[alive[base]] if len(base) else base
        if not len(live):
            self._base.pop(name, None)
        elif new or len(live) != len(base):
            self._base[name] = live
        return live

    def names(self) -> list[str]:
        return list(dict.fromkeys([*self._base, *self._new]))

    def payload(self, alive: np.ndarray) -> tuple[list[str], np.ndarray, np.ndarray]:
        """(names, per-name counts, concatenated rows) of the live rows, for the metadata snapshot."""
        parts = [(name, self._live(name, alive)) for name in self.names()]
        parts = [(name, rows) for name, rows in parts if len(rows)]
        counts = np.fromiter((len(rows) for _, rows in parts), np.int64, len(parts))
        flat = np.concatenate([rows for _, rows in parts]) if parts else NO_ROWS
        return [name for name, _ in parts], counts, flat.astype(np.int64)

    @classmethod
    def from_payload(cls, names: list[str], counts_b: bytes, flat_b: bytes, next_row: int) -> RowSets:
        """Inverse of `payload`; raises ValueError if the parts do not add up or name rows past `next_row`."""
        counts = np.frombuffer(counts_b, np.int64)
        flat = np.frombuffer(flat_b, np.int64).copy()  # a copy: the payload buffer is freed after loading
        if len(counts) != len(names) or (len(counts) and int(counts.min()) <= 0) or int(counts.sum()) != len(flat):
            raise ValueError("row sets do not add up")
        if len(flat) and not 0 <= int(flat.min()) <= int(flat.max()) < next_row:
            raise ValueError("row sets name rows past the end")
        out = cls()
        ends = np.cumsum(counts).tolist()
        for name, c, end in zip(names, counts.tolist(), ends, strict=True):
            if not isinstance(name, str):
                raise TypeError("row set name")
            out._base[name] = flat[end - c : end]
        if len(out._base) != len(names):
            raise ValueError("duplicate row set names")
        return out


class Labels:
    """A short, repeated text by row (speaker, role, session, namespace): an int32 code per row into the table of
    distinct values (code 0: the column's default), and the current rows of each other value (RowSets).

    Why: 4 bytes per row instead of an 8-byte list slot, a snapshot loads the codes as one buffer, and a filter
    on a value reads its rows (sorted by row: stored order, which is also a session's turn order) instead of
    scanning. The default value has no row set: most rows carry it, so its rows are found by one vectorised scan
    of the codes (`rows`), only needed when a store also holds other values.
    """

    def __init__(self, default: str = "") -> None:
        self.default = default
        self.names: list[str] = [default]  # code -> value; only appended to (a copy of `codes` stays readable)
        self.code_of: dict[str, int] = {default: 0}
        self.codes = np.zeros(0, dtype=np.int32)
        self.sets = RowSets()  # value -> current rows (not for the default)

    def grow(self, capacity: int) -> None:
        new = np.zeros(capacity, dtype=np.int32)
        new[: len(self.codes)] = self.codes
        self.codes = new

    def set(self, row: int, value: str, current: bool = True) -> None:
        """Row `row` holds `value` (`current`: also listed under it for the filters)."""
        code = self.code_of.get(value)
        if code is None:
            code = self.code_of[value] = len(self.names)
            self.names.append(value)
        self.codes[row] = code
        if code and current:
            self.sets.add(value, row)

    def get(self, row: int) -> str:
        names = self.names
        return names[0] if len(names) == 1 else names[self.codes.item(row)]  # (most stores: the default only)

    def rows(self, value: str, alive: np.ndarray) -> np.ndarray:
        """The rows of `value` that `alive` marks (sorted; a new array)."""
        code = self.code_of.get(value)
        if code is None:
            return NO_ROWS
        if code:
            return self.sets.rows(value, alive)
        n = len(alive)
        return np.flatnonzero(alive & (self.codes[:n] == 0)).astype(np.int64)

    def matching(self, rows: np.ndarray, value: str) -> np.ndarray:
        """Which of `rows` (any rows, current or not) hold `value`: a mask."""
        code = self.code_of.get(value)
        if code is None:
            return np.zeros(len(rows), dtype=bool)
        matched: np.ndarray = self.codes[rows] == code
        return matched

    def values(self) -> list[str]:
        """The values other than the default that current rows may hold (some may hold none any more)."""
        return self.sets.names()

    def payload(self, n: int, alive: np.ndarray) -> tuple[list[str], np.ndarray, list[str], np.ndarray, np.ndarray]:
        return (self.names, self.codes[:n], *self.sets.payload(alive))

    @classmethod
    def from_payload(cls, default: str, parts: tuple[Any, ...], n: int) -> Labels:
        """Inverse of `payload`; raises ValueError unless every code names a value."""
        names, codes_b, set_names, set_counts, set_flat = parts
        if not isinstance(names, list) or not names or names[0] != default or len(set(names)) != len(names):
            raise ValueError("label names")
        if not all(isinstance(name, str) for name in names):
            raise TypeError("label name")
        out = cls(default)
        out.names = names
        out.code_of = {name: code for code, name in enumerate(names)}
        out.codes = np.frombuffer(codes_b, np.int32).copy()
        if len(out.codes) != n or (n and not 0 <= int(out.codes.min()) <= int(out.codes.max()) < len(names)):
            raise ValueError("label codes do not match the row count or the names")
        out.sets = RowSets.from_payload(set_names, set_counts, set_flat, n)
        if any(name not in out.code_of or name == default for name in set_names):
            raise ValueError("label row sets name an unknown value")
        return out


class HashIndex:
    """64-bit key -> rows: the content keys (exact-duplicate detection on add) and the id keys (`IdMap`).

    Why not a dict: a dict of 16-byte digests cost ~125 bytes per memory (~125 MB at 1M) and ~0.35 s to rebuild on
    open; this is two sorted arrays (16 bytes per memory, loaded as raw buffers) plus a dict of recent additions.
    A 64-bit key can collide, so callers confirm a match on the value itself. Deleted rows stay until the next
    merge that is given the `alive` mask; callers filter them out.
    """

    def __init__(self) -> None:
        self._h = np.empty(0, dtype=np.uint64)
        self._r = np.empty(0, dtype=np.int64)
        self._new: dict[int, list[int]] = {}
        self._pending = 0

    def __len__(self) -> int:
        return len(self._h) + self._pending

    def add(self, key: int, row: int) -> None:
        rows = self._new.get(key)
        if rows is None:
            self._new[key] = [row]
        else:
            rows.append(row)
        self._pending += 1
        if self._pending >= 1024 + (len(self._h) >> 2):
            self.merge(None)

    def rows(self, key: int) -> list[int]:
        """Every row recorded under `key` (live or not), in no particular order."""
        h = self._h
        out: list[int] = []
        i = int(h.searchsorted(np.uint64(key))) if len(h) else 0
        while i < len(h) and int(h[i]) == key:  # (one search: a key is rarely there more than once)
            out.append(int(self._r[i]))
            i += 1
        out += self._new.get(key, ())
        return out

    def merge(self, alive: np.ndarray | None) -> None:
        """Fold the recent additions into the sorted arrays; with `alive`, drop the rows it marks dead."""
        h, r = self._h, self._r
        if self._new:
            hs = [k for k, rows in self._new.items() for _ in rows]
            rs = [row for rows in self._new.values() for row in rows]
            h = np.concatenate([h, np.asarray(hs, dtype=np.uint64)])
            r = np.concatenate([r, np.asarray(rs, dtype=np.int64)])
        changed = bool(self._new)
        if alive is not None and len(r):
            keep = alive[r]
            if not keep.all():
                h, r, changed = h[keep], r[keep], True
        if changed:
            order = np.lexsort((r, h))
            self._h, self._r = h[order], r[order]
        self._new = {}
        self._pending = 0

    def payload(self, alive: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        self.merge(alive)
        return self._h, self._r

    def merged(self) -> tuple[np.ndarray, np.ndarray]:
        """(keys sorted, their rows) with the recent additions folded in; dead rows too (no `alive` given)."""
        self.merge(None)
        return self._h, self._r

    @classmethod
    def from_payload(cls, h_b: bytes, r_b: bytes, next_row: int) -> HashIndex:
        """Inverse of `payload`; raises ValueError unless the keys are sorted and name distinct rows < `next_row`."""
        out = cls()
        h = out._h = np.frombuffer(h_b, np.uint64).copy()
        r = out._r = np.frombuffer(r_b, np.int64).copy()
        if len(h) != len(r) or (len(r) and not 0 <= int(r.min()) <= int(r.max()) < next_row):
            raise ValueError("key index does not match the records")
        if len(h) > 1 and not (h[1:] >= h[:-1]).all():  # a lookup is a binary search
            raise ValueError("key index is not sorted")
        seen = np.zeros(next_row, dtype=bool)
        seen[r] = True
        if int(seen.sum()) != len(r):
            raise ValueError("key index names a row twice")
        return out


class FixedText:
    """Short texts by row (ids, created_at) in one numpy array of fixed-width ASCII (dtype S<width>).

    Why: a 32-character str costs 81 bytes plus an 8-byte list slot; here 32, and a snapshot loads it as one
    buffer. A value that does not fit (longer, non-ASCII, empty, or ending in NUL, which numpy strips) switches
    the column to dtype object (str). A dead row holds b"" (None in an object column); `get` gives None for it.
    """

    def __init__(self, width: int) -> None:
        self.dtype = np.dtype(f"S{width}")
        self.width = width
        self.a: np.ndarray = np.zeros(0, dtype=self.dtype)
        self.fixed = True  # False once the column holds objects

    def grow(self, capacity: int) -> None:
        new = np.zeros(capacity, dtype=self.dtype) if self.fixed else np.empty(capacity, dtype=object)
        new[: len(self.a)] = self.a
        self.a = new

    def set(self, row: int, value: str) -> None:
        if self.fixed:
            data = value.encode("utf-8", "surrogatepass")
            if 0 < len(data) <= self.width and data.isascii() and not data.endswith(b"\0"):
                self.a[row] = data
                return
            log.info("%r does not fit a %s column; keeping that column as objects", value, self.dtype)
            values = np.empty(len(self.a), dtype=object)
            values[:] = [v.decode("ascii") or None for v in self.a.tolist()]
            self.a, self.fixed = values, False
        self.a[row] = value

    def get(self, row: int) -> str | None:
        value = self.a[row]
        return (value.decode("ascii") or None) if isinstance(value, bytes) else value

    def clear(self, row: int) -> None:
        self.a[row] = b"" if self.fixed else None

    def occupied(self, n: int) -> np.ndarray:
        """Which of the first `n` rows hold a value."""
        if self.fixed:
            held: np.ndarray = self.a[:n] != b""
            return held
        return np.fromiter(map(operator.is_not, self.a[:n].tolist(), repeat(None)), dtype=bool, count=n)

    def payload(self, n: int) -> np.ndarray | list[str | None]:
        return self.a[:n] if self.fixed else self.a[:n].tolist()

    @classmethod
    def from_payload(cls, width: int, data: object, n: int) -> FixedText:
        out = cls(width)
        if isinstance(data, bytes):
            out.a = np.frombuffer(data, out.dtype).copy()
        elif isinstance(data, list) and all(v is None or isinstance(v, str) for v in data):
            out.a = np.empty(len(data), dtype=object)
            out.a[:] = data
            out.fixed = False
        else:
            raise TypeError("text column")
        if len(out.a) != n:
            raise ValueError("a column does not match the row count")
        return out


class TextHeap:
    """Texts by row (the contents) as UTF-8 in one buffer, with each row's start and end offsets.

    Why: a str costs 49 bytes plus its text (and an 8-byte list slot); here 16 bytes of offsets, and a snapshot
    loads one buffer instead of unmarshalling a million strings. A hit decodes its few texts on demand. The text
    of a deleted row stays in the buffer (`dead` bytes) until the next snapshot, which writes live texts only.
    """

    def __init__(self) -> None:
        self.buf = bytearray()
        self.start = np.zeros(0, dtype=np.int64)
        self.end = np.zeros(0, dtype=np.int64)
        self.dead = 0  # bytes of buf no live row refers to

    def grow(self, capacity: int) -> None:
        for name in ("start", "end"):
            new = np.zeros(capacity, dtype=np.int64)
            old = getattr(self, name)
            new[: len(old)] = old
            setattr(self, name, new)

    def set(self, row: int, text: str) -> None:
        data = text.encode("utf-8", "surrogatepass")
        self.start[row] = len(self.buf)
        self.buf += data
        self.end[row] = len(self.buf)

    def get(self, row: int) -> str:
        return self.buf[self.start[row] : self.end[row]].decode("utf-8", "surrogatepass")

    def clear(self, row: int) -> None:
        self.dead += int(self.end[row] - self.start[row])
        self.start[row] = self.end[row] = 0

    def payload(self, n: int) -> tuple[bytes | bytearray, np.ndarray, np.ndarray]:
        """(texts, starts, ends) of the first `n` rows, without the text of dead rows."""
        if not self.dead:
            return self.buf, self.start[:n], self.end[:n]
        start, end = self.start[:n], self.end[:n]
        lengths = end - start
        ends = np.cumsum(lengths)
        starts = ends - lengths
        # Copy runs of adjacent texts, not one slice per row: one memoryview per row cost ~9x the texts' size at
        # the checkpoint after a delete; this costs the new buffer (plus its growth slack).
        used = np.flatnonzero(lengths > 0)
        s, e = start[used], end[used]
        cuts = np.flatnonzero(s[1:] != e[:-1]) + 1
        data = bytearray()
        if len(s):
            firsts, lasts = np.r_[0, cuts], np.r_[cuts - 1, len(s) - 1]
            with memoryview(self.buf) as view:
                for a, b in zip(s[firsts].tolist(), e[lasts].tolist(), strict=True):
                    data += view[a:b]
        # Keep the compacted texts too: deleted memories' texts leave memory at each checkpoint.
        self.buf, self.start[:n], self.end[:n], self.dead = data, starts, ends, 0
        return data, starts, ends

    @classmethod
    def from_payload(cls, data: bytes, starts_b: bytes, ends_b: bytes, n: int) -> TextHeap:
        out = cls()
        out.buf = bytearray(data)
        out.start = np.frombuffer(starts_b, np.int64).copy()
        out.end = np.frombuffer(ends_b, np.int64).copy()
        if len(out.start) != n or len(out.end) != n:
            raise ValueError("text offsets do not match the row count")
        if n and not (int(out.start.min()) >= 0 and int(out.end.max()) <= len(data) and (out.start <= out.end).all()):
            raise ValueError("text offsets point outside the texts")
        return out


def as_str(value: bytes | str) -> str:
    """A `FixedText` value as str (fixed columns hold ASCII bytes, object columns str)."""
    return value.decode("ascii") if isinstance(value, bytes) else value


def id_key(mid: str) -> int:
    return int.from_bytes(hashlib.blake2b(mid.encode("utf-8", "surrogatepass"), digest_size=8).digest(), "little")


class IdMap:
    """id -> row of the live memories, with the dict operations the store uses, and row -> id.

    Why not a dict: its keys (an 81-byte str each), slots and row ints cost ~160 bytes per memory and ~0.3 s to
    build on open; this is the ids by row (`FixedText`, 32 bytes) plus a `HashIndex` of id keys (16 bytes).
    """

    def __init__(self) -> None:
        self.ids = FixedText(32)
        self.index = HashIndex()
        self.count = 0

    def __len__(self) -> int:
        return self.count

    def get(self, mid: str, default: int | None = None, key: int | None = None) -> int | None:
        """The row of the live memory `mid` (`key`: its `id_key`, if known), or `default`."""
        ids = self.ids
        for row in self.index.rows(id_key(mid) if key is None else key):
            if ids.get(row) == mid:
                return row
        return default

    def __contains__(self, mid: object) -> bool:
        return isinstance(mid, str) and self.get(mid) is not None

    def __getitem__(self, mid: str) -> int:
        row = self.get(mid)
        if row is None:
            raise KeyError(mid)
        return row

    def insert(self, mid: str, row: int, key: int) -> None:
        """Map the id `mid` (not live; `key` is its `id_key`) to `row` (which holds no id)."""
        self.ids.set(row, mid)
        self.index.add(key, row)
        self.count += 1

    def __delitem__(self, mid: str) -> None:
        self.ids.clear(self[mid])
        self.count -= 1

    def id_at(self, row: int) -> str | None:
        """The id of the live memory at `row`, or None."""
        return self.ids.get(row) if 0 <= row < len(self.ids.a) else None

    def payload(self, n: int) -> tuple[np.ndarray | list[str | None], np.ndarray, np.ndarray]:
        """(ids by row, id keys, their rows) of the first `n` rows, for the metadata snapshot. (Every row holding
        an id is kept: the catalog's `alive` marks current rows, and an id stays findable while it is history.)"""
        return (self.ids.payload(n), *self.index.payload(self.ids.occupied(n)))

    @classmethod
    def from_payload(cls, ids: object, keys_b: bytes, rows_b: bytes, n: int) -> IdMap:
        """Inverse of `payload`; raises ValueError unless every live id is indexed once, under its own row."""
        out = cls()
        out.ids = FixedText.from_payload(32, ids, n)
        out.index = HashIndex.from_payload(keys_b, rows_b, n)
        alive = out.ids.occupied(n)
        out.count = int(alive.sum())
        h, r = out.index.merged()
        if len(h) != out.count or not alive[r].all():
            raise ValueError("record count mismatch")
        for i in np.flatnonzero(h[1:] == h[:-1]).tolist():
            if out.id_at(int(r[i])) == out.id_at(int(r[i + 1])):
                raise ValueError("duplicate ids")
        return out
