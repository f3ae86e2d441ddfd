"""The journal: an append-only JSON-lines file that is the record of truth, and the lock that guards it.

Crash story (read this first)
-----------------------------
A collection is one folder::

    journal.jsonl          header line, then one line per add / delete / vfix; each ends with its own CRC-32
    vectors-<gen>.f32      fixed rows of `dim` float32 (row r at byte r*dim*4), append-only (but for rows found
                           damaged and rewritten, see vfix below), no header
    index.json             checkpoint of the derived vector index: file name, journal offset covered, CRC
    index-<nonce>.hnsw     the hnswlib graph the checkpoint names (derived data, rebuildable)
    keyword.json           checkpoint of the derived keyword (BM25) index, the same way
    keyword-<nonce>.npz    the postings arrays it names (derived data, rebuildable)
    meta-<gen>.snap        snapshot of the in-memory metadata at a checkpoint (derived; open skips replaying the
                           journal up to its offset; ignored and replaced when stale, damaged or of another Python)
    compacting-<gen>.*     files of a compaction in progress (renamed into place at its switch)
    lock                   empty; flock()ed shared by readers catching up, exclusive by writers
    journal.jsonl.torn-*   bytes of a torn last line, set aside on repair (never silently dropped)

* Once a line is in the journal it is never changed. A write is acknowledged after its vector rows were written
  (not synced) and then its journal line(s) written and fdatasync()ed: one sync per write (group commit for a
  batch). A crash before the journal sync leaves at most unreferenced vector rows (overwritten by the next add)
  and/or a torn last line. Each add line carries `vcrc`, the CRC-32 of its vector row, so a row that did not
  reach the disk (power loss: the kernel wrote the journal page but not the row's) is detected on replay and
  re-embedded from the line's content; the store then writes the row again, syncs it and appends a `vfix` line
  with the new CRC. The vector file is synced before every checkpoint, so rows a checkpoint covers are on disk
  and only rows past the last checkpoint are ever checked this way. (A kill -9 loses nothing: the page cache
  survives the process.)
* Each line carries `"crc":"<crc32 hex>"` over the rest of the line, so a torn or garbled line is detected.
  Policy on reading: every good line up to the first bad one is kept. If no good line follows the bad one, the
  bad bytes are a torn tail: a writer (under the exclusive lock) copies them to `journal.jsonl.torn-<time>`,
  logs a warning and truncates the journal to the last good line. If a good line follows a bad one, the damage
  is in the middle: CorruptJournalError names the byte offset; nothing is repaired automatically.
* Everything else is derived. An index checkpoint is written to a new file and fsync()ed, the directory is
  fsync()ed, and only then is the file named by `index.json` / `keyword.json` (written to a temp file, fsync()ed,
  renamed, directory fsync()ed; see durable.py); a crash mid-save leaves the previous checkpoint in force. A
  missing, stale or damaged checkpoint is rebuilt from the journal and the vector rows, without re-embedding. The
  metadata snapshot is written atomically too (temp, fsync, rename, directory fsync) after the index
  checkpoints, stamped with the journal offset it covers and the CRC of the line ending there; one that
  fails any check (generation, offset, that CRC, its own CRC, the index checkpoint being older) is ignored.
* Compaction copies the live memories of a snapshot of the journal into `compacting-<newgen>.*` files (vectors,
  journal, vector index, metadata snapshot) without holding the lock, so other processes keep writing. Then,
  under the exclusive lock, it appends what changed since (adds, then deletes) to the new files, fsyncs them,
  renames them to their final names (`vectors-<newgen>.f32` first) and renames the new journal over the old one:
  the single atomic switch. Before it, the old journal and its vectors are in force; after it, the new ones (and
  `index.json` is then pointed at the new graph; a crash just before that costs an index rebuild, never data).
  Leftover files of the other generation are removed later (`compacting-*` ones only when hours old). Other
  processes notice the new inode on their next call and reload.

Format of a line: a JSON object (UTF-8, no raw newlines) whose last member is `"crc"`; the CRC-32 is computed
over the same line with that member removed, i.e. over `line[:-18] + b"}"`. The first line is the header
`{"op":"header","format":1,"generation":...,"dim":...,"model":...}`.

This module knows nothing about embeddings or MCP. It frames, checks and appends lines; how bytes reach the disk
durably is durable.py's job, and every change it makes to a file goes through a `durable.FileLayer`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import sys
import time
import uuid
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple, Protocol

import numpy as np

from memserver.durable import (
    OS,
    FileLayer,
    atomic_write,
    fsync_dir,
    fsync_fd,
    read_snapshot,
    write_all,
    write_new_file,
    write_snapshot,
)
from memserver.errors import CorruptJournalError, StoreError, StoreLockedError

__all__ = [
    "FORMAT",
    "JOURNAL_NAME",
    "LOCK_NAME",
    "AddRecord",
    "DerivedIndex",
    "FileLock",
    "Journal",
    "ReadResult",
    "decode_line",
    "encode_line",
    # re-exported for store.py until it imports them from memserver.durable, where they now live
    "fsync_dir",
    "fsync_fd",
    "read_snapshot",
    "write_all",
    "write_snapshot",
]

log = logging.getLogger(__name__)

FORMAT = 1
JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = "lock"
_CRC_SUFFIX_LEN = len(b',"crc":"') + 8 + len(b'"}')  # 18
_READ_CHUNK = 16 << 20
_decode = json.JSONDecoder().decode  # json.loads minus its per-call encoding sniffing: replay is per line


# --- records -----------------------------------------------------------------------------------------------------


class AddRecord(NamedTuple):
    """One stored memory as the journal knows it; `row` is its row in the vector file (and its index label).

    A NamedTuple (immutable, like the frozen dataclass it was) because opening a store builds one per memory
    from the metadata snapshot, in C (`tuple.__new__`): 1M of them in ~0.2 s instead of ~2 s.
    """

    id: str
    content: str
    created_at: str
    tags: tuple[str, ...]
    source: str
    row: int
    # The conversation fields (replay.py has their line keys; absent from a line = these defaults).
    occurred_at: str = ""  # "" only before the write path fills it in: replay gives created_at for a line without
    speaker: str = ""
    role: str = ""
    session: str = ""
    namespace: str = "default"
    replaces: str = ""  # the id this memory replaced
    replaced_by: str = ""  # set on a line only where the newer memory is gone (compaction, import): with its time
    replaced_at: str = ""


class DerivedIndex(Protocol):
    """Data derived from the journal (the vector index, the keyword index), fed by one replay path.

    The store calls `add`/`remove` for its own writes, for other processes' writes it catches up on, and for the
    journal tail after `load`; `reset` + `add` is the bulk rebuild. `save`/`load` checkpoint the index together
    with the journal position it covers (`stamp`: generation, offset, live count); `load` returns that stamp, or
    None when there is no usable checkpoint (the store then resets and rebuilds it after replaying the journal).
    Calls are serialised by the store; `vectors` rows match `records` (unit float32).
    """

    name: str

    def reset(self) -> None: ...
    def add(self, records: Sequence[AddRecord], vectors: np.ndarray) -> None: ...
    def remove(self, records: Sequence[AddRecord]) -> None: ...
    def save(self, folder: Path, stamp: dict[str, Any]) -> None: ...
    def load(self, folder: Path, generation: str) -> dict[str, Any] | None: ...


# --- line encoding -----------------------------------------------------------------------------------------------


def encode_line(record: dict[str, Any]) -> bytes:
    """One record -> one checksummed line (with its newline)."""
    body = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return b'%s,"crc":"%08x"}\n' % (body[:-1], zlib.crc32(body))


def decode_line(line: bytes) -> dict[str, Any] | None:
    """A line without its newline -> the record, or None if it is torn or garbled (bad CRC, bad JSON)."""
    if len(line) <= _CRC_SUFFIX_LEN or not line.endswith(b'"}') or line[-_CRC_SUFFIX_LEN:-10] != b',"crc":"':
        return None
    try:
        crc = int(line[-10:-2], 16)
    except ValueError:
        return None
    body = line[:-_CRC_SUFFIX_LEN] + b"}"
    if zlib.crc32(body) != crc:
        return None
    try:
        record = _decode(body.decode("utf-8"))
    except ValueError:
        return None
    return record if isinstance(record, dict) else None


def revision(path: Path) -> str:
    """What changes whenever the journal at `path` does: its file's identity and size, from one stat.

    Enough, because a journal only grows, and is replaced only by a compaction, whose rename puts a new file (a
    new identity) at the path; a torn tail cut off shrinks it, which changes the size too. A missing journal (the
    moment of no file never happens: the rename is atomic) reads as "none".
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "none"
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}"


# --- the cross-process lock --------------------------------------------------------------------------------------


class FileLock:
    """A shared/exclusive lock on a lock file, between processes (flock; msvcrt fallback is exclusive-only).

    Not reentrant and not a thread lock: flock locks belong to the open file, so the store holds its own thread
    lock around every use. A lock that cannot be had within `timeout` seconds raises StoreLockedError. The lock
    file is created through `files` (it holds no data, so its creation is never synced).
    """

    def __init__(self, path: Path, timeout: float = 30.0, files: FileLayer = OS) -> None:
        self.path = path
        self.timeout = timeout
        self.files = files
        self._fd = files.open(path, os.O_RDWR | os.O_CREAT)

    def _try(self, exclusive: bool) -> bool:
        if sys.platform == "win32":  # pragma: no cover - Windows: byte-range lock, exclusive for readers too
            import msvcrt

            try:
                os.lseek(self._fd, 0, os.SEEK_SET)
                msvcrt.locking(self._fd, msvcrt.LK_NBLCK, 1)
                return True
            except OSError:
                return False
        else:
            import fcntl

            try:
                fcntl.flock(self._fd, (fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH) | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                return False

    def _release(self) -> None:
        if sys.platform == "win32":  # pragma: no cover
            import msvcrt

            os.lseek(self._fd, 0, os.SEEK_SET)
            msvcrt.locking(self._fd, msvcrt.LK_UNLCK, 1)
        else:
            import fcntl

            fcntl.flock(self._fd, fcntl.LOCK_UN)

    @contextlib.contextmanager
    def hold(self, exclusive: bool) -> Iterator[None]:
        deadline = time.monotonic() + self.timeout
        delay = 0.0005
        while not self._try(exclusive):
            if time.monotonic() > deadline:
                raise StoreLockedError(
                    f"another process held the lock {self.path} for more than {self.timeout:.0f} s; "
                    "is a memserver process stuck? retry, or stop the other process"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            self._release()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.files.close(self._fd)


# --- the journal -------------------------------------------------------------------------------------------------


@dataclass
class ReadResult:
    """One chunk of good records from `Journal.read`, each with the offset just past its line."""

    entries: list[tuple[int, dict[str, Any]]]
    end: int  # offset after the last good line read
    size: int  # file size when read; at the end, size > end means a torn (or still incomplete) tail
    done: bool  # nothing more can be read from `end` now


class Journal:
    """The open journal file: read good lines from an offset, append lines durably, repair a torn tail.

    Every change to the file goes through `files` (reads do not); tests pass a recording or failing layer.
    """

    def __init__(self, path: Path, files: FileLayer = OS) -> None:
        self.path = path
        self.files = files
        self._fd = files.open(path, os.O_RDWR | os.O_APPEND)
        st = os.fstat(self._fd)
        self.identity = (st.st_dev, st.st_ino)
        first = self._first_line()
        header = decode_line(first) if first is not None else None
        if first is None or not header or header.get("op") != "header":
            files.close(self._fd)
            raise CorruptJournalError(f"{path}: the first line is not a valid journal header; the file is damaged")
        if header.get("format") != FORMAT:
            files.close(self._fd)
            raise StoreError(f"{path}: journal format {header.get('format')!r} is not supported (expected {FORMAT})")
        self.header: dict[str, Any] = header
        self.header_end = len(first) + 1

    @property
    def generation(self) -> str:
        return str(self.header["generation"])

    @staticmethod
    def create(path: Path, header: dict[str, Any], files: FileLayer = OS) -> None:
        """Write a journal holding only `header`, atomically (a crash leaves no journal or a whole one)."""
        atomic_write(path, encode_line({"op": "header", "format": FORMAT, **header}), files=files)

    def _first_line(self) -> bytes | None:
        data = os.pread(self._fd, 65536, 0)
        nl = data.find(b"\n")
        return data[:nl] if nl >= 0 else None

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def read(self, offset: int, limit: int = _READ_CHUNK) -> ReadResult:
        """Good records in about `limit` bytes from `offset` (a line boundary); call again from `end` until `done`.

        Raises CorruptJournalError when a damaged line has good lines after it (damage in the middle).
        """
        size = self.size()
        entries: list[tuple[int, dict[str, Any]]] = []
        if offset >= size:
            return ReadResult(entries, offset, size, True)
        buf = os.pread(self._fd, min(limit, size - offset), offset)
        while b"\n" not in buf and offset + len(buf) < size:  # a line longer than `limit`
            buf += os.pread(self._fd, min(limit, size - offset - len(buf)), offset + len(buf))
        start = 0
        while (nl := buf.find(b"\n", start)) >= 0:
            record = decode_line(buf[start:nl])
            if record is None:
                self._check_nothing_good_after(offset + nl + 1, bad_at=offset + start)
                return ReadResult(entries, offset + start, size, True)
            entries.append((offset + nl + 1, record))
            start = nl + 1
        end = offset + start
        return ReadResult(entries, end, size, start == 0 or end >= size)

    def _check_nothing_good_after(self, pos: int, bad_at: int) -> None:
        """A bad line is a torn tail only if no good line follows it; otherwise the damage is mid-file."""
        size = self.size()
        rest = b""
        while pos < size:
            chunk = os.pread(self._fd, min(_READ_CHUNK, size - pos), pos)
            if not chunk:
                break
            pos += len(chunk)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                if decode_line(line) is not None:
                    raise CorruptJournalError(
                        f"{self.path}: damaged line at byte {bad_at}, with good records after it; refusing to guess. "
                        "Restore a backup, or cut the damaged line out by hand and reopen"
                    )

    def append(self, records: Sequence[dict[str, Any]]) -> int:
        """Append lines and fsync once for the batch (group commit); returns the new end offset.

        The caller holds the exclusive lock and has checked that the file ends at a good line. If the write or the
        fsync fails (disk full, I/O error), the file is cut back to where it was: nothing half-written stays, and
        the OSError (with its errno: ENOSPC, EIO, ...) reaches the caller.
        """
        data = b"".join(encode_line(r) for r in records)
        before = self.size()
        try:
            write_all(self._fd, data, self.files)
            self.files.fdatasync(self._fd)
        except BaseException:
            with contextlib.suppress(OSError):
                self.files.ftruncate(self._fd, before)
                self.files.fsync(self._fd)
            raise
        return before + len(data)

    def set_aside_tail(self, end: int) -> Path | None:
        """Move the bytes after `end` (a torn last line) to `<journal>.torn-<time>`, then truncate. Exclusive lock."""
        size = self.size()
        if size <= end:
            return None
        torn = os.pread(self._fd, size - end, end)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        aside = self.path.with_name(f"{self.path.name}.torn-{stamp}-{uuid.uuid4().hex[:6]}")
        write_new_file(aside, torn, files=self.files)
        self.files.fsync_dir(self.path.parent)  # the copy is durable before the bytes go
        self.files.ftruncate(self._fd, end)
        self.files.fsync(self._fd)
        log.warning(
            "journal %s ended with %d bytes of a torn or damaged last line (a write interrupted by a crash); "
            "kept every record before it and moved those bytes to %s",
            self.path,
            len(torn),
            aside,
        )
        return aside

    def replaced(self) -> bool:
        """True if the journal path now names another file (compaction renamed a new one over it)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return True
        return (st.st_dev, st.st_ino) != self.identity

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.files.close(self._fd)
