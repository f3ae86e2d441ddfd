"""Durable file writes, written once: syncs, atomic replacement, checkpoint files, all through one file layer.

The rules this module keeps (journal.py tells the store's whole crash story):

* Bytes are on disk only once synced: `fsync` (F_FULLFSYNC on macOS, where plain fsync stops at the drive's
  cache) or `fdatasync` (the data, minus inode metadata not needed to read it back).
* A name in a folder (a new file, a rename, an unlink) is durable only once the folder itself is synced.
* `atomic_write` replaces a file so that a crash leaves the old content or the new, never a mix: a temp file
  beside it, written and synced, renamed over it, then the folder synced.
* A checkpoint (`CheckpointFiles`) is a data file `<kind>-<nonce>.<ext>`, written and synced; then the folder is
  synced, so the data file's name is durable; then a small JSON meta file naming it (with its size, CRC-32 and
  the journal stamp it covers) is written atomically; only then are the other data files removed. A crash at any
  point leaves the previous checkpoint in force, or the new one, and whichever it is names a whole file.

The file layer. Every change this module, journal.py, index.py and keyword.py make to a file (open/create,
write, pwrite, fsync, fdatasync, ftruncate, rename, unlink, mkdir, chmod, directory sync, close) goes through one
`FileLayer`; the default `OS` calls `os.*` and nothing else. The classes that write take one as an optional
`files` argument, so a test passes a subclass that records the calls (to replay them into simulated power-loss
states) or fails them (ENOSPC, EIO) instead of monkeypatching. Reads do not go through it. hnswlib writes its
graph file in native code (`write_native`): the layer sees that file created, synced and renamed, not its
writes, so a recorder reads the file's bytes when it is synced.

Modes: the memories are private. Every file is created with exactly FILE_MODE (0600) and every folder with exactly
DIR_MODE (0700), whatever the umask (a umask only removes bits, and one that removed the owner's would leave files the
store cannot reopen, so the mode is set again after creation when the umask changed it). A store made before this
(0644 files in a 0755 folder under umask 022) is tightened when it is opened: `make_private`, one log line naming the
folder. The model cache (memserver/embedding/sources.py) keeps the umask's modes: it holds public model files, and a
cache shared between accounts (MEMSERVER_CACHE_DIR, the Hugging Face cache) must stay readable by them.

This module knows nothing about journals, indexes or MCP.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import json
import logging
import os
import stat
import sys
import uuid
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeAlias, TypeVar

from memserver.errors import StoreWriteError

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "OS",
    "CheckpointError",
    "CheckpointFiles",
    "Data",
    "FileLayer",
    "StrPath",
    "atomic_write",
    "disk_error",
    "disk_errors_as",
    "fdatasync_fd",
    "fsync_dir",
    "fsync_fd",
    "make_dirs",
    "make_private",
    "pwrite_all",
    "write_all",
    "write_native",
    "write_new_file",
]

log = logging.getLogger(__name__)

FILE_MODE = 0o600  # every file the store creates: the owner's alone
DIR_MODE = 0o700  # every folder it creates
_OTHERS = 0o077  # group and other permission bits: what `make_private` removes

Data: TypeAlias = bytes | bytearray | memoryview
StrPath: TypeAlias = str | os.PathLike[str]


# --- a disk that refuses ---------------------------------------------------------------------------------------

_DISK_PROBLEMS = {
    errno.ENOSPC: "the disk is full",
    errno.EDQUOT: "the disk quota is exhausted",
    errno.EIO: "the disk reported an I/O error",
    errno.EROFS: "the file system is read-only",
    errno.EACCES: "memserver has no permission to write there",
    errno.EPERM: "memserver has no permission to write there",
}


def disk_error(exc: OSError, doing: str, folder: StrPath) -> StoreWriteError:
    """The StoreWriteError for an OSError met while `doing` (e.g. "remember: nothing was stored") in `folder`.

    One line, naming the problem in words, the folder, and the system's own message; never a traceback.
    """
    problem = _DISK_PROBLEMS.get(exc.errno or 0, "writing to the disk failed")
    fix = {
        errno.ENOSPC: "free some space and retry",
        errno.EDQUOT: "free some space and retry",
        errno.EROFS: "set MCP_MEMORY_PATH to a writable folder",
        errno.EACCES: "set MCP_MEMORY_PATH to a folder of yours, or fix its permissions",
        errno.EPERM: "set MCP_MEMORY_PATH to a folder of yours, or fix its permissions",
    }.get(exc.errno or 0, "check the disk (dmesg) and retry")
    detail = exc.strerror or str(exc)
    return StoreWriteError(f"{doing}: {problem} ({detail}) at {folder}; {fix}", exc.errno)


P = ParamSpec("P")
R = TypeVar("R")
S = TypeVar("S")


def disk_errors_as(doing: str) -> Callable[[Callable[Concatenate[S, P], R]], Callable[Concatenate[S, P], R]]:
    """A public method (of an object with a `folder`) whose disk refuses a write raises StoreWriteError ("`doing`:
    the disk is full ..."), one line a person (and the MCP client's model) can act on, instead of an OSError and
    its traceback."""

    def wrap(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
        @functools.wraps(method)
        def translated(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
            try:
                return method(self, *args, **kwargs)
            except OSError as exc:
                raise disk_error(exc, doing, getattr(self, "folder", "the data directory")) from exc

        return translated

    return wrap


# --- the raw syscalls ----------------------------------------------------------------------------------------------


def fsync_fd(fd: int) -> None:
    """Flush a file to stable storage (F_FULLFSYNC on macOS, where plain fsync stops at the drive cache)."""
    if sys.platform == "darwin":
        import fcntl

        with contextlib.suppress(OSError):
            fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
            return
    os.fsync(fd)


def fdatasync_fd(fd: int) -> None:
    """fsync_fd, minus the inode metadata not needed to read the data back (fdatasync where the OS has it)."""
    if sys.platform == "darwin" or not hasattr(os, "fdatasync"):
        fsync_fd(fd)
    else:
        os.fdatasync(fd)


def fsync_dir(path: StrPath) -> None:
    """Make the names in folder `path` durable (a no-op where folders cannot be opened: Windows)."""
    if os.name == "nt":
        return
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# --- the seam ------------------------------------------------------------------------------------------------------


class FileLayer:
    """The calls that change files, one method per syscall; `OS` is the real one, and the default everywhere.

    Subclass it to record or fail calls (see tests/test_durable.py)::

        class DiskFull(FileLayer):
            def write(self, fd: int, data: Data) -> int:
                raise OSError(errno.ENOSPC, "No space left on device")

        Journal(path, files=DiskFull()).append([...])  # raises OSError; the journal is cut back

    A file descriptor comes from `open` and is closed by `close`; reads on it (pread, fstat) bypass the layer.
    """

    def open(self, path: StrPath, flags: int, mode: int = FILE_MODE) -> int:
        """With O_CREAT, a file this call creates gets exactly `mode`, whatever the umask.

        (Created = empty and ours: a lock file of an old store is tightened here too; files with data that exist
        already are `make_private`'s job.)
        """
        fd = os.open(path, flags, mode)
        if flags & os.O_CREAT and os.name == "posix":
            st = os.fstat(fd)
            if stat.S_IMODE(st.st_mode) != mode and st.st_size == 0 and st.st_uid == os.geteuid():
                with contextlib.suppress(OSError):
                    os.fchmod(fd, mode)
        return fd

    def close(self, fd: int) -> None:
        os.close(fd)

    def write(self, fd: int, data: Data) -> int:
        """May write fewer bytes than given (see `write_all`)."""
        return os.write(fd, data)

    def pwrite(self, fd: int, data: Data, offset: int) -> int:
        """May write fewer bytes than given (see `pwrite_all`)."""
        return os.pwrite(fd, data, offset)

    def fsync(self, fd: int) -> None:
        fsync_fd(fd)

    def fdatasync(self, fd: int) -> None:
        fdatasync_fd(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)

    def replace(self, src: StrPath, dst: StrPath) -> None:
        os.replace(src, dst)

    def unlink(self, path: StrPath) -> None:
        os.unlink(path)

    def mkdir(self, path: StrPath, mode: int = DIR_MODE) -> None:
        """The folder gets exactly `mode`, whatever the umask."""
        os.mkdir(path, mode)
        if os.name == "posix" and stat.S_IMODE(os.stat(path).st_mode) != mode:
            os.chmod(path, mode)

    def chmod(self, path: StrPath, mode: int) -> None:
        os.chmod(path, mode)

    def fsync_dir(self, path: StrPath) -> None:
        fsync_dir(path)


OS = FileLayer()


# --- writing files -------------------------------------------------------------------------------------------------


def write_all(fd: int, data: Data, files: FileLayer = OS) -> None:
    """Write every byte of `data` (a single write may be short)."""
    view = memoryview(data)
    while view:
        view = view[files.write(fd, view) :]


def pwrite_all(fd: int, data: Data, offset: int, files: FileLayer = OS) -> None:
    """Write every byte of `data` at `offset` (a single pwrite may be short)."""
    view = memoryview(data).cast("B")
    while view:
        written = files.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written


@contextlib.contextmanager
def _removed_on_failure(path: Path, files: FileLayer) -> Iterator[None]:
    """Remove `path` (a file this module created) if the block fails; the error goes on."""
    try:
        yield
    except BaseException:
        with contextlib.suppress(OSError):
            files.unlink(path)
        raise


def write_new_file(path: Path, *chunks: Data, files: FileLayer = OS) -> None:
    """Create `path` (it must not exist) holding the chunks one after another, synced before returning.

    On failure the partial file is removed. Its name is durable only once the folder is synced.
    """
    fd = files.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    with _removed_on_failure(path, files):
        try:
            for data in chunks:
                write_all(fd, data, files)
            files.fsync(fd)
        finally:
            files.close(fd)


def atomic_write(path: Path, *chunks: Data, files: FileLayer = OS) -> None:
    """Replace `path` with the chunks so that a crash leaves the old content or the new, never a mix."""
    tmp = path.with_name(f"{path.name}.tmp-{uuid.uuid4().hex[:8]}")
    write_new_file(tmp, *chunks, files=files)
    with _removed_on_failure(tmp, files):
        files.replace(tmp, path)
    files.fsync_dir(path.parent)


def write_native(path: Path, write: Callable[[str], object], files: FileLayer = OS) -> None:
    """Create `path`, let native code fill it (`write(str(path))`, e.g. hnswlib's save_index), and sync it.

    The file is created here, with FILE_MODE, and the writer truncates and fills it (hnswlib opens an ofstream),
    so the layer sees the creation and the sync but not the writes. On failure the file is removed.
    """
    files.close(files.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL))
    with _removed_on_failure(path, files):
        write(str(path))
        fd = files.open(path, os.O_RDONLY)
        try:
            files.fsync(fd)
        finally:
            files.close(fd)


def make_dirs(path: Path, files: FileLayer = OS) -> None:
    """Create folder `path` and its missing parents (DIR_MODE), each made durable by syncing its parent."""
    missing: list[Path] = []
    at = path
    while not at.is_dir():
        missing.append(at)
        at = at.parent
    for folder in reversed(missing):
        try:
            files.mkdir(folder)
        except FileExistsError:  # another process made it meanwhile
            if not folder.is_dir():
                raise
        files.fsync_dir(folder.parent)


def make_private(folder: Path, files: FileLayer = OS) -> None:
    """Remove group and other permissions from `folder` and the files in it (a store made before 0600/0700).

    One log line names the folder when anything changed, and one when something could not be changed (a file of
    another account, a read-only file system): the store still opens, and the warning says who may read what.
    """
    if os.name != "posix":
        return
    changed: list[str] = []
    failed: list[str] = []
    for path in [folder, *sorted(folder.iterdir())]:
        try:
            st = path.lstat()
        except FileNotFoundError:  # removed by another process meanwhile
            continue
        if not (stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode)) or not st.st_mode & _OTHERS:
            continue
        try:
            files.chmod(path, stat.S_IMODE(st.st_mode) & ~_OTHERS)
            changed.append(path.name)
        except OSError as exc:
            failed.append(f"{path.name} ({exc.strerror or exc})")
    if changed:
        log.info(
            "made %s private: %d of its entries were readable by other accounts and are now the owner's alone",
            folder,
            len(changed),
        )
    if failed:
        log.warning(
            "could not make %d entr%s of %s private, so other accounts may read them: %s",
            len(failed),
            "y" if len(failed) == 1 else "ies",
            folder,
            ", ".join(failed[:5]) + (", ..." if len(failed) > 5 else ""),
        )


# --- checkpoint files ----------------------------------------------------------------------------------------------


class CheckpointError(ValueError):
    """A checkpoint's meta or data file fails a check; whoever reads it rebuilds what it described instead."""


class CheckpointFiles:
    """One derived index's checkpoint in a folder: data files `<kind>-<nonce>.<ext>`, and the meta naming one.

    Writing (under the store's exclusive lock): `new_name`, then `write` (or `write_native` for a file that
    native code fills), then `commit` with a meta dict whose "file" is that name. Reading: `read_meta`, then
    `path_of` or `read_data`, each raising CheckpointError for what fails a check.
    """

    def __init__(self, folder: Path, meta_name: str, kind: str, ext: str, files: FileLayer = OS) -> None:
        self.folder = folder
        self.meta_path = folder / meta_name
        self.kind = kind
        self.ext = ext
        self.files = files

    def new_name(self) -> str:
        return f"{self.kind}-{uuid.uuid4().hex[:12]}.{self.ext}"

    def write(self, name: str, *chunks: Data) -> None:
        """Create data file `name` holding the chunks, synced (its name is made durable by `commit`)."""
        write_new_file(self.folder / name, *chunks, files=self.files)

    def write_native(self, name: str, write: Callable[[str], object]) -> None:
        """Have native code write data file `name`: into `name.tmp`, synced, then renamed (see `write_native`)."""
        tmp = self.folder / f"{name}.tmp"
        write_native(tmp, write, self.files)
        with _removed_on_failure(tmp, self.files):
            self.files.replace(tmp, self.folder / name)

    def commit(self, meta: dict[str, Any]) -> None:
        """Make `meta` the checkpoint in force, then remove the other data files (and temp files of a crash).

        The folder is synced first, so that the name of the data file `meta` names is durable before the meta
        is, whoever created or renamed that file into the folder.
        """
        keep = str(meta["file"])
        self.files.fsync_dir(self.folder)
        atomic_write(self.meta_path, json.dumps(meta).encode(), files=self.files)
        stale = [*self.folder.glob(f"{self.kind}-*.{self.ext}*"), *self.folder.glob(f"{self.meta_path.name}.tmp-*")]
        for old in stale:
            if old.name != keep:
                with contextlib.suppress(OSError):
                    self.files.unlink(old)
        self.files.fsync_dir(self.folder)

    def read_meta(self) -> dict[str, Any] | None:
        """The meta file's object; None when there is no meta file. CheckpointError when it is unreadable."""
        try:
            meta = json.loads(self.meta_path.read_bytes())
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as exc:
            raise CheckpointError(f"{self.meta_path} is unreadable ({exc})") from exc
        if not isinstance(meta, dict):
            raise CheckpointError(f"{self.meta_path} is unreadable (not a JSON object)")
        return meta

    def path_of(self, meta: dict[str, Any]) -> Path:
        """The data file `meta` names; CheckpointError unless the name is a `<kind>-*.<ext>` in this folder."""
        name = meta.get("file")
        if (
            not isinstance(name, str)
            or "/" in name
            or os.sep in name
            or not name.startswith(f"{self.kind}-")
            or not name.endswith(f".{self.ext}")
        ):
            raise CheckpointError(f"bad data file name {name!r}")
        return self.folder / name

    def read_data(self, meta: dict[str, Any]) -> bytes:
        """The bytes of the data file `meta` names, checked against its size and CRC-32 (else CheckpointError)."""
        path = self.path_of(meta)
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CheckpointError(f"{path.name} is unreadable ({exc})") from exc
        if len(data) != meta.get("size") or zlib.crc32(data) != meta.get("crc32"):
            raise CheckpointError("size or CRC-32 mismatch (damaged on disk)")
        return data


def folder_bytes(folder: Path) -> int:
    """Bytes of the files in `folder`; other processes create and remove temp files meanwhile, so skip vanished ones."""
    total = 0
    for entry in os.scandir(folder):
        with contextlib.suppress(FileNotFoundError):
            if entry.is_file():
                total += entry.stat().st_size
    return total
