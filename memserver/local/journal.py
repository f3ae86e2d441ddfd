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
    compacting-<gen>.*     files of a compaction in progress (renamed into place at its switch; its .lock is
                           flock()ed while it runs)
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
  logs a warning and truncates the journal to the last good line. A batch (several lines appended with one
  sync) is written at once, and a power cut may keep its later pages and lose earlier ones (the page cache and
  the drive write pages in any order; tests/powerloss/), so its lines carry `"batch":[k,n]` (line k of n): good
  lines after a bad one that are the rest of one batch, up to the end of the file, are that batch torn, set
  aside with the bad bytes (the batch was never acknowledged). Any other good line after a bad one means the
  damage is in the middle (synced bytes changed): CorruptJournalError names the byte offset; nothing is
  repaired automatically.
* Everything else is derived. An index checkpoint is written to a new file and fsync()ed, the directory is
  fsync()ed, and only then is the file named by `index.json` / `keyword.json` (written to a temp file, fsync()ed,
  renamed, directory fsync()ed; see durable.py); a crash mid-save leaves the previous checkpoint in force. A
  missing, stale or damaged checkpoint is rebuilt from the journal and the vector rows, without re-embedding. The
  metadata snapshot is written atomically too (temp, fsync, rename, directory fsync) after the index
  checkpoints, stamped with the journal offset it covers and the CRC of the line ending there; one that
  fails any check (generation, offset, that CRC, its own CRC, the index checkpoint being older) is ignored.
* Compaction copies the live memories of a snapshot of the journal into `compacting-<newgen>.*` files (vectors,
  journal, vector index, metadata snapshot) without holding the lock, so other processes keep writing. Then,
  under the exclusive lock, it appends what changed since (deletes, then adds) to the new files, fsyncs them,
  renames them to their final names (`vectors-<newgen>.f32` first) and renames the new journal over the old one:
  the single atomic switch. Before it, the old journal and its vectors are in force; after it, the new ones (and
  `index.json` is then pointed at the new graph; a crash just before that costs an index rebuild, never data).
  Leftover files of the other generation are removed later (`compacting-*` ones once no process holds their
  compaction's lock, at once if their generation is the one in force), and so are the temp files of an atomic
  write or a checkpoint that a crash cut short. Other processes notice the new inode on their next call and
  reload.
* Power loss is simulated in tests/powerloss/ (its docstring has the model: what a crash may keep of unsynced
  writes and renames); every crash state drawn there opens with every acknowledged write in place.

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
from typing import Any

from memserver.contract.inputs import now
from memserver.durable import OS, FileLayer, atomic_write, write_all, write_new_file
from memserver.errors import CorruptJournalError, ModelMismatchError, StoreError, StoreLockedError

__all__ = [
    "FORMAT",
    "JOURNAL_NAME",
    "LOCK_NAME",
    "FileLock",
    "Journal",
    "ReadResult",
    "decode_line",
    "encode_line",
]

log = logging.getLogger(__name__)

FORMAT = 1
JOURNAL_NAME = "journal.jsonl"
LOCK_NAME = "lock"
_CRC_SUFFIX_LEN = len(b',"crc":"') + 8 + len(b'"}')  # 18
_READ_CHUNK = 16 << 20
# A lock held by another process is polled (flock has no timeout), first after 0.1 ms, then at most every 2 ms.
# flock is not fair: with 8 processes writing, polling at up to 50 ms let some wait 4-6 s while others won the
# lock again and again (write p99 2.1 s); at 2 ms the longest wait was 0.5-1.2 s and p99 0.4-0.6 s, at the same
# throughput (benchmarks/multiprocess.py, 8 x 400 writes, runs alternated; benchmarks/README.md "Many processes").
_POLL_FIRST_S = 0.0001
_POLL_MAX_S = 0.002
_decode = json.JSONDecoder().decode  # json.loads minus its per-call encoding sniffing: replay is per line


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
    """What changes whenever the journal at `path` does: its file's identity, size and modification time, from one
    stat.

    A journal only grows, and is replaced only by a compaction, whose rename puts a new file (a new identity) at
    the path. The one change the size can miss: a torn tail (a crash's) cut off by a writer that then appends a
    line of exactly its length (review SF1); the modification time catches that. A missing journal (the moment
    of no file never happens: the rename is atomic) reads as "none".
    """
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return "none"
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}"


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
        delay = _POLL_FIRST_S
        while not self._try(exclusive):
            if time.monotonic() > deadline:
                raise StoreLockedError(
                    f"another process held the lock {self.path} for more than {self.timeout:.0f} s; "
                    "is a memserver process stuck? retry, or stop the other process"
                )
            time.sleep(delay)
            delay = min(delay * 2, _POLL_MAX_S)
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
                self._check_torn_tail(offset + nl + 1, bad_at=offset + start)
                return ReadResult(entries, offset + start, size, True)
            record.pop("batch", None)  # framing, like the CRC: the record reads back as it was appended
            entries.append((offset + nl + 1, record))
            start = nl + 1
        end = offset + start
        return ReadResult(entries, end, size, start == 0 or end >= size)

    def _check_torn_tail(self, pos: int, bad_at: int) -> None:
        """A bad line is a torn tail if no good line follows it, or only the rest of one batch (lines k >= 2 of n,
        ascending) up to the end of the file: that batch was being written when the power went, and its later
        pages reached the disk before its earlier ones. Any other good line after it: CorruptJournalError."""
        size = self.size()
        rest = b""
        batch: tuple[int, int] | None = None  # (n, k of the last line seen) of the torn batch
        while pos < size:
            chunk = os.pread(self._fd, min(_READ_CHUNK, size - pos), pos)
            if not chunk:
                break
            pos += len(chunk)
            lines = (rest + chunk).split(b"\n")
            rest = lines.pop()
            for line in lines:
                record = decode_line(line)
                if record is None:
                    continue
                mark = record.get("batch")
                k, n = 1, 1  # a line of its own: a batch of one
                if isinstance(mark, list) and len(mark) == 2 and all(type(x) is int for x in mark):
                    k, n = mark
                # the first good line must not start its batch (else the damage lies in an earlier, synced one)
                rest_of_a_batch = k >= 2 if batch is None else n == batch[0] and k > batch[1]
                if not rest_of_a_batch:
                    raise CorruptJournalError(
                        f"{self.path}: damaged line at byte {bad_at}, with good records after it; refusing to guess. "
                        "Restore a backup, or cut the damaged line out by hand and reopen"
                    )
                batch = (n, k)

    def append(self, records: Sequence[dict[str, Any]]) -> int:
        """Append lines and fsync once for the batch (group commit); returns the new end offset.

        The caller holds the exclusive lock and has checked that the file ends at a good line. If the write or the
        fsync fails (disk full, I/O error), the file is cut back to where it was: nothing half-written stays, and
        the OSError (with its errno: ENOSPC, EIO, ...) reaches the caller.
        """
        if len(records) == 1:
            data = encode_line(records[0])
        else:  # each line says where it stands in its batch (see the crash story)
            n = len(records)
            data = b"".join(encode_line({**r, "batch": [k, n]}) for k, r in enumerate(records, 1))
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


def open_journal(folder: Path, dim: int, model: str, lock: FileLock, files: FileLayer) -> Journal:
    """The collection's journal, created (under the exclusive lock) if there is none; ModelMismatchError if it
    holds vectors of another model or dimension."""
    path = folder / JOURNAL_NAME
    if not path.exists():
        with lock.hold(exclusive=True):
            if not path.exists():
                header = {"generation": uuid.uuid4().hex, "dim": dim, "model": model, "created_at": now()}
                Journal.create(path, header, files)
    journal = Journal(path, files)
    header = journal.header
    if header.get("dim") != dim or header.get("model") != model:
        journal.close()
        raise ModelMismatchError(
            f"collection {folder.name!r} at {folder} holds vectors of model {header.get('model')!r} "
            f"(dim {header.get('dim')}), but the embedder is {model!r} (dim {dim}); "
            "use the same model, or another collection (MCP_MEMORY_COLLECTION)"
        )
    return journal
