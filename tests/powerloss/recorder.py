"""PowerLossFiles: a FileLayer that does every call on the real file system and logs it as an event.

The log starts from the tree under `root` as it is when the recorder is made (all of it taken as durable), and
names files by inode number (`ino`, the recorder's own counter), so renames and unlinks keep their history. The
recorder keeps the current tree too, which lets it resolve paths, find the offset a write landed at, and notice
what changed behind its back: a file whose bytes differ from the log when it is synced was written by native code
(hnswlib) or by a call that bypassed the layer; the difference is logged as one whole-file write (`external`) and
counted per file name in `externals`. `unrecorded()` lists every difference between the log and the disk.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, NamedTuple

from memserver.durable import DIR_MODE, FILE_MODE, Data, FileLayer, StrPath
from tests.support.file_layers import recorded_name

Kind = Literal["file", "dir"]


class Event(NamedTuple):
    """One logged call. `op` is create | write | truncate | sync | external | rename | unlink | sync_dir.

    create: ino is the directory, name the entry, arg (new ino, kind); write: ino, arg (offset, bytes);
    truncate: ino, arg length; sync: ino (fsync or fdatasync, `name` says which); external: ino, arg the file's
    bytes; rename: ino is the directory, name the source, arg the target name; unlink: ino the directory, name;
    sync_dir: ino the directory.
    """

    op: str
    ino: int
    name: str = ""
    arg: object = None


@dataclass
class _Open:
    ino: int


class PowerLossFiles(FileLayer):
    """The real file system under `root`, every change logged in `events` (see the module docstring)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.abspath(root))
        self.events: list[Event] = []
        self.kinds: dict[int, Kind] = {}
        self.entries: dict[int, dict[str, int]] = {}  # directory ino -> name -> ino (current tree)
        self.images: dict[int, bytearray] = {}  # file ino -> current bytes, as the log has them
        self.base_entries: dict[int, dict[str, int]] = {}  # the tree when recording began (durable)
        self.base_images: dict[int, bytes] = {}
        self.externals: dict[str, int] = {}  # recorded file name -> whole-file writes seen at a sync
        self.bypassed: list[str] = []  # changes made behind the layer's back, noticed on the way
        self._fds: dict[int, _Open] = {}
        self._next = 0
        self.root_ino = self._scan(self.root)
        self.base_entries = {d: dict(e) for d, e in self.entries.items()}
        self.base_images = {f: bytes(b) for f, b in self.images.items()}

    # --- the current tree ------------------------------------------------------------------------------------------

    def _new(self, kind: Kind) -> int:
        self._next += 1
        self.kinds[self._next] = kind
        if kind == "dir":
            self.entries[self._next] = {}
        else:
            self.images[self._next] = bytearray()
        return self._next

    def _scan(self, path: Path) -> int:
        if path.is_dir():
            ino = self._new("dir")
            for child in sorted(path.iterdir()):
                self.entries[ino][child.name] = self._scan(child)
            return ino
        ino = self._new("file")
        self.images[ino] = bytearray(path.read_bytes())
        return ino

    def _where(self, path: StrPath) -> tuple[int, str]:
        """(directory ino, entry name) of `path`, which must lie under the root, in a folder the log knows."""
        rel = Path(os.path.abspath(path)).relative_to(self.root)
        assert rel.parts, "the root itself is not a file"
        ino = self.root_ino
        for part in rel.parts[:-1]:
            ino = self.entries[ino][part]
        return ino, rel.parts[-1]

    def path_of(self, ino: int) -> Path | None:
        """Where `ino` is now (None once it has no name)."""
        stack: list[tuple[int, Path]] = [(self.root_ino, self.root)]
        while stack:
            d, p = stack.pop()
            for name, child in self.entries[d].items():
                if child == ino:
                    return p / name
                if self.kinds[child] == "dir":
                    stack.append((child, p / name))
        return None

    def _log(self, event: Event) -> None:
        self.events.append(event)

    def _apply_write(self, ino: int, offset: int, data: bytes) -> None:
        image = self.images[ino]
        if offset > len(image):
            image.extend(bytes(offset - len(image)))
        image[offset : offset + len(data)] = data

    # --- the layer -------------------------------------------------------------------------------------------------

    def open(self, path: StrPath, flags: int, mode: int = FILE_MODE) -> int:
        d, name = self._where(path)
        known = name in self.entries[d]
        stray = b""
        if not known and os.path.lexists(path):  # created behind the layer's back: adopt it, as unsynced bytes
            self.bypassed.append(f"{recorded_name(path)} exists but was not created through the layer")
            stray = Path(path).read_bytes()
        fd = super().open(path, flags, mode)
        if not known:
            ino = self._new("file")
            self.entries[d][name] = ino
            self._log(Event("create", d, name, (ino, "file")))
            if stray:
                self._apply_write(ino, 0, stray)
                self._log(Event("write", ino, name, (0, stray)))
        ino = self.entries[d][name]
        if flags & os.O_TRUNC and self.images[ino]:
            self.images[ino] = bytearray()
            self._log(Event("truncate", ino, name, 0))
        self._fds[fd] = _Open(ino)
        return fd

    def close(self, fd: int) -> None:
        self._fds.pop(fd, None)
        super().close(fd)

    def write(self, fd: int, data: Data) -> int:
        n = super().write(fd, data)
        offset = os.lseek(fd, 0, os.SEEK_CUR) - n
        self._wrote(fd, offset, bytes(memoryview(data)[:n]))
        return n

    def pwrite(self, fd: int, data: Data, offset: int) -> int:
        n = super().pwrite(fd, data, offset)
        self._wrote(fd, offset, bytes(memoryview(data)[:n]))
        return n

    def _wrote(self, fd: int, offset: int, data: bytes) -> None:
        ino = self._fds[fd].ino
        self._apply_write(ino, offset, data)
        self._log(Event("write", ino, "", (offset, data)))

    def ftruncate(self, fd: int, length: int) -> None:
        super().ftruncate(fd, length)
        ino = self._fds[fd].ino
        image = self.images[ino]
        if length < len(image):
            del image[length:]
        else:
            image.extend(bytes(length - len(image)))
        self._log(Event("truncate", ino, "", length))

    def _sync(self, fd: int, how: str) -> None:
        ino = self._fds[fd].ino
        path = self.path_of(ino)
        if path is not None:
            real = path.read_bytes()
            if real != self.images[ino]:  # native code wrote it (hnswlib), or a write bypassed the layer
                self.images[ino] = bytearray(real)
                self._log(Event("external", ino, path.name, real))
                key = recorded_name(path)
                self.externals[key] = self.externals.get(key, 0) + 1
        self._log(Event("sync", ino, how))

    def fsync(self, fd: int) -> None:
        super().fsync(fd)
        self._sync(fd, "fsync")

    def fdatasync(self, fd: int) -> None:
        super().fdatasync(fd)
        self._sync(fd, "fdatasync")

    def replace(self, src: StrPath, dst: StrPath) -> None:
        d, old = self._where(src)
        d2, new = self._where(dst)
        assert d == d2, "the store renames within one folder only"
        super().replace(src, dst)
        self.entries[d][new] = self.entries[d].pop(old)
        self._log(Event("rename", d, old, new))

    def unlink(self, path: StrPath) -> None:
        d, name = self._where(path)
        super().unlink(path)
        self.entries[d].pop(name, None)
        self._log(Event("unlink", d, name))

    def mkdir(self, path: StrPath, mode: int = DIR_MODE) -> None:
        d, name = self._where(path)
        super().mkdir(path, mode)
        ino = self._new("dir")
        self.entries[d][name] = ino
        self._log(Event("create", d, name, (ino, "dir")))

    def fsync_dir(self, path: StrPath) -> None:
        super().fsync_dir(path)
        p = Path(os.path.abspath(path))
        ino = self.root_ino if p == self.root else self.entries[self._where(p)[0]][p.name]
        self._log(Event("sync_dir", ino))

    # --- checks ----------------------------------------------------------------------------------------------------

    def unrecorded(self) -> list[str]:
        """Every difference between the tree the log describes and the one on disk (empty: nothing bypassed it)."""
        problems = list(self.bypassed)

        def walk(ino: int, path: Path) -> None:
            on_disk = {p.name for p in path.iterdir()}
            logged = set(self.entries[ino])
            problems.extend(f"{recorded_name(path / n)} is on disk but not in the log" for n in on_disk - logged)
            problems.extend(f"{recorded_name(path / n)} is in the log but not on disk" for n in logged - on_disk)
            for name in sorted(on_disk & logged):
                child = self.entries[ino][name]
                if self.kinds[child] == "dir":
                    walk(child, path / name)
                elif (path / name).read_bytes() != self.images[child]:
                    problems.append(f"{recorded_name(path / name)} differs from the log (written behind its back)")

        walk(self.root_ino, self.root)
        return problems
