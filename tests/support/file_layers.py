"""File layers for tests (memserver.durable.FileLayer subclasses): one that records, one that fails on cue.

`RecordingFiles` keeps every call as (operation, file name) with nonces replaced by `*`, so a test can assert the
order of operations; `FailingFiles` is a recorder that raises on the calls a rule picks (ENOSPC on a write, EIO on
an fsync, a simulated crash on a rename), as a full disk, a failing drive or a power cut would.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Callable
from pathlib import Path

from memserver.durable import DIR_MODE, FILE_MODE, Data, FileLayer, StrPath

_NONCE = re.compile(r"[0-9a-f]{8,32}")


def recorded_name(path: StrPath) -> str:
    """A file name as the recorders note it: nonces (8+ hex digits) replaced by `*`."""
    return _NONCE.sub("*", Path(path).name)


class RecordingFiles(FileLayer):
    """The real file system, with every call recorded in `calls` and the mode of every create in `modes`."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str]] = []
        self.modes: dict[str, int] = {}
        self.names: dict[int, str] = {}  # open fd -> file name

    def _record(self, op: str, name: str) -> None:
        self.calls.append((op, name))

    def open(self, path: StrPath, flags: int, mode: int = FILE_MODE) -> int:
        self._record("create" if flags & os.O_CREAT else "open", recorded_name(path))
        fd = super().open(path, flags, mode)
        self.names[fd] = recorded_name(path)
        if flags & os.O_CREAT:
            self.modes[recorded_name(path)] = mode
        return fd

    def close(self, fd: int) -> None:
        self._record("close", self.names.pop(fd, "?"))
        super().close(fd)

    def write(self, fd: int, data: Data) -> int:
        self._record("write", self.names[fd])
        return super().write(fd, data)

    def pwrite(self, fd: int, data: Data, offset: int) -> int:
        self._record("pwrite", self.names[fd])
        return super().pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        self._record("fsync", self.names[fd])
        super().fsync(fd)

    def fdatasync(self, fd: int) -> None:
        self._record("fdatasync", self.names[fd])
        super().fdatasync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        self._record("ftruncate", self.names[fd])
        super().ftruncate(fd, length)

    def replace(self, src: StrPath, dst: StrPath) -> None:
        self._record("replace", f"{recorded_name(src)} -> {recorded_name(dst)}")
        super().replace(src, dst)

    def unlink(self, path: StrPath) -> None:
        self._record("unlink", recorded_name(path))
        super().unlink(path)

    def mkdir(self, path: StrPath, mode: int = DIR_MODE) -> None:
        self._record("mkdir", recorded_name(path))
        super().mkdir(path, mode)

    def fsync_dir(self, path: StrPath) -> None:
        self._record("fsync_dir", recorded_name(path))
        super().fsync_dir(path)

    def index(self, op: str, name: str) -> int:
        """Position of the first (op, name) call; names are matched with their nonces as `*`."""
        return self.calls.index((op, name))


class SimulatedCrash(BaseException):
    """Raised by FailingFiles to stop a write sequence dead, as a crash would (not an OSError: nothing handles it)."""


class FailingFiles(RecordingFiles):
    """A recorder that raises on the calls `when(op, name)` picks, while `armed`.

    `error` is an errno (OSError with that errno and its message) or None for SimulatedCrash. A write that fails
    first writes half its bytes, as a write cut short by a full disk does.
    """

    def __init__(self, when: Callable[[str, str], bool], error: int | None = errno.EIO) -> None:
        super().__init__()
        self.when = when
        self.error = error
        self.armed = True
        self.failures = 0

    def _record(self, op: str, name: str) -> None:
        super()._record(op, name)
        if self.armed and self.when(op, name):
            self.failures += 1
            if self.error is None:
                raise SimulatedCrash(f"{op} {name}")
            raise OSError(self.error, os.strerror(self.error))

    def write(self, fd: int, data: Data) -> int:
        name = self.names[fd]
        if self.armed and self.when("write", name) and len(data) > 1:
            FileLayer.write(self, fd, memoryview(data)[: len(data) // 2])  # the bytes that made it
        return super().write(fd, data)


class ShortWrites(RecordingFiles):
    """A recorder whose every write and pwrite writes at most half the bytes it is given (at least one), as a
    write cut short by a signal or a nearly full disk may; callers must loop until every byte is written."""

    def write(self, fd: int, data: Data) -> int:
        return super().write(fd, memoryview(data)[: max(1, len(data) // 2)])

    def pwrite(self, fd: int, data: Data, offset: int) -> int:
        return super().pwrite(fd, memoryview(data)[: max(1, len(data) // 2)], offset)
