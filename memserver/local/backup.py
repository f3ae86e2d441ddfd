"""Backups of a local store while other processes keep writing, and restoring one.

The journal is append-only and the vector file only grows (a damaged row is rewritten in place, with the same
content), so a consistent copy is a prefix of each: under the shared file lock (writers wait for it, as for a
checkpoint's commit; readers do not) the backup opens the journal, the vector file and the checkpoint files in
force, and notes their sizes; it then releases the lock and copies those bytes from the open files, which a
compaction elsewhere may unlink but cannot change. Every write acknowledged before the lock was taken is in the
journal prefix (a write is acknowledged after its line is synced), and the rows its lines name are in the vector
prefix (written before the line). The checkpoint files cover a journal offset no later than the prefix's end, so
an open of the backup restores them and replays the rest, as after any crash.

A backup is a folder `<collection>-<timezone.utc time>/` under DEST: the collection's files, and `backup.json` (what was
copied, from where, when). It is written as `.partial-*`, synced, then renamed into place, so a backup that is
there is whole. `keep` removes the oldest backups of the collection beyond that many: each is renamed to
`.removing-*` first, so a backup half removed is never seen under its name either.

A backup killed on its way (SIGKILL, power loss) leaves its `.partial-*` or `.removing-*` folder behind. Its
writer holds an flock on that folder while it works, so the next backup under DEST removes each one that no
process holds (never one another backup is still writing) (tests/local/test_kill_backup.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memserver.durable import OS, make_dirs, write_new_file
from memserver.errors import InvalidInputError, StoreError
from memserver.local.index import META_NAME as INDEX_META
from memserver.local.journal import JOURNAL_NAME, decode_line
from memserver.local.keyword import KEYWORD_META
from memserver.local.snapshot import snapshot_path
from memserver.local.vectors import vector_path

if TYPE_CHECKING:
    from memserver.local.folder import Folder

MANIFEST = "backup.json"
FORMAT = 1
PARTIAL = ".partial-"  # a backup being written
REMOVING = ".removing-"  # a backup being removed by `keep`
_CHUNK = 1 << 20


def backup(folder: Folder, dest: str | os.PathLike[str], keep: int | None = None) -> dict[str, Any]:
    """Write a backup of the open `folder` under `dest`; returns its manifest, with "path", "lock_seconds" (how
    long the shared lock was held) and "removed" (older backups rotated out by `keep`)."""
    if keep is not None and keep < 1:
        raise InvalidInputError(f"keep must be at least 1, got {keep}")
    started = time.perf_counter()
    root = Path(os.path.abspath(os.path.expanduser(dest)))
    make_dirs(root)
    fds: dict[str, tuple[int, int]] = {}  # file name in the backup -> (open fd, bytes to copy)
    try:
        with folder.reading() as gen:
            locked = time.perf_counter()
            generation = gen.journal.generation
            _open(fds, JOURNAL_NAME, folder.path / JOURNAL_NAME)
            _open(fds, vector_path(folder.path, generation).name, vector_path(folder.path, generation))
            for meta_name in (INDEX_META, KEYWORD_META):
                _open_checkpoint(fds, folder.path, meta_name)
            snap = snapshot_path(folder.path, generation)
            if snap.exists():
                _open(fds, snap.name, snap)
            lock_seconds = time.perf_counter() - locked
        stamp = datetime.now(timezone.utc)
        name = f"{folder.name}-{stamp.strftime('%Y%m%dT%H%M%S.%fZ')}"
        remove_dead(root)
        partial = root / f"{PARTIAL}{name}"
        with _new_locked_folder(partial):
            for file_name, (fd, size) in fds.items():
                _copy(fd, size, partial / file_name)
            count = current_memories(partial / JOURNAL_NAME)
            manifest = {
                "format": FORMAT,
                "engine": "local",
                "collection": folder.name,
                "generation": generation,
                "created_at": stamp.isoformat(),
                "source": str(folder.path),
                "memories": count,
                "files": {file_name: size for file_name, (_, size) in fds.items()},
            }
            write_new_file(partial / MANIFEST, json.dumps(manifest, indent=2).encode())
            OS.fsync_dir(partial)
            OS.replace(partial, root / name)
            OS.fsync_dir(root)
    finally:
        for fd, _ in fds.values():
            os.close(fd)
    removed = rotate(root, folder.name, keep) if keep else []
    took = time.perf_counter() - started
    return {
        **manifest,
        "written": True,
        "path": str(root / name),
        "lock_seconds": lock_seconds,
        "seconds": took,
        "removed": removed,
    }


def current_memories(journal: Path) -> int:
    """How many current memories a journal holds: added, not forgotten, not replaced (a scan of its lines, up to
    the first that fails its CRC: a torn tail, which an open sets aside)."""
    added: set[str] = set()
    gone: set[str] = set()
    with open(journal, "rb") as lines:
        next(lines, None)  # the header
        for line in lines:
            record = decode_line(line.rstrip(b"\n"))
            if record is None:
                break
            if record.get("op") == "add":
                added.add(record["id"])
                if record.get("replaces"):
                    gone.add(record["replaces"])
                if record.get("replaced_by"):
                    gone.add(record["id"])
            elif record.get("op") == "del":
                gone.add(record["id"])
    return len(added - gone)


def _open(fds: dict[str, tuple[int, int]], name: str, path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    fds[name] = (fd, os.fstat(fd).st_size)


def _open_checkpoint(fds: dict[str, tuple[int, int]], folder: Path, meta_name: str) -> None:
    """A derived index's checkpoint in force (its meta file and the data file it names), if it has one."""
    meta_path = folder / meta_name
    try:
        meta = json.loads(meta_path.read_bytes())
        data = folder / str(meta["file"])
        if data.parent != folder or not data.exists():
            return
    except (OSError, ValueError, KeyError, TypeError):
        return  # no checkpoint, or a damaged one: the restored store rebuilds that index from the journal
    _open(fds, meta_name, meta_path)
    _open(fds, data.name, data)


def _copy(fd: int, size: int, target: Path) -> None:
    """The first `size` bytes of `fd` into the new file `target`, synced."""

    def chunks() -> Any:
        offset = 0
        while offset < size:
            data = os.pread(fd, min(_CHUNK, size - offset), offset)
            if not data:
                raise StoreError(f"{target.name} shrank while it was backed up")
            offset += len(data)
            yield data

    write_new_file(target, *chunks())


def backups(root: Path, collection: str) -> list[Path]:
    """The backups of `collection` under `root`, oldest first (their names sort by time)."""
    if not root.is_dir():
        return []
    found = [p for p in root.iterdir() if p.name.startswith(f"{collection}-") and _collection_of(p) == collection]
    return sorted(found, key=lambda p: p.name)


def _collection_of(path: Path) -> str | None:
    """The collection a backup folder holds (its manifest's), or None when it is no backup."""
    try:
        manifest = json.loads((path / MANIFEST).read_bytes())
    except (OSError, ValueError):
        return None
    return manifest.get("collection") if isinstance(manifest, dict) else None


def rotate(root: Path, collection: str, keep: int) -> list[str]:
    """Remove the oldest backups of `collection` under `root` beyond the newest `keep`; their paths. Each is
    renamed out of sight (`.removing-*`, held locked) before its files go."""
    old = backups(root, collection)[:-keep]
    for path in old:
        removing = root / f"{REMOVING}{path.name}"
        with _locked(path, wait=True) as held:
            if held:
                OS.replace(path, removing)
                OS.fsync_dir(root)
                shutil.rmtree(removing)
    return [str(p) for p in old]


def remove_dead(root: Path) -> list[str]:
    """Remove the `.partial-*` and `.removing-*` folders under `root` that no process holds locked: left by a
    backup or a rotation that was killed. Their names."""
    removed = []
    for path in sorted(root.iterdir()) if root.is_dir() else []:
        if path.name.startswith((PARTIAL, REMOVING)) and path.is_dir():
            with _locked(path, wait=False) as held:
                if held:
                    shutil.rmtree(path, ignore_errors=True)
                    removed.append(path.name)
    return removed


@contextlib.contextmanager
def _locked(path: Path, wait: bool) -> Iterator[bool]:
    """An exclusive flock on the folder `path` while the block runs: True, or False if another process holds it
    (and `wait` is False) or the folder is gone. Where flock is missing (Windows) nothing is locked: True."""
    if sys.platform == "win32":  # pragma: no cover - no flock; nothing is removed as dead there (see remove_dead)
        yield path.is_dir() and wait
        return
    import fcntl

    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        st, now = os.fstat(fd), _stat(path)
        yield now is not None and (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino)  # (not removed meanwhile)
    finally:
        os.close(fd)  # (releases the lock)


@contextlib.contextmanager
def _new_locked_folder(path: Path) -> Iterator[None]:
    """Make the folder `path` and hold it locked while the block writes it; removed again if the block fails.
    Between the mkdir and the flock another backup's `remove_dead` may take it: then it is made again."""
    for _ in range(3):
        OS.mkdir(path)
        with _locked(path, wait=True) as held:
            if not held:
                continue
            try:
                yield
            except BaseException:
                shutil.rmtree(path, ignore_errors=True)
                raise
            return
    raise StoreError(f"{path} was removed while it was being made, three times; is another backup cleaning it?")


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def read_manifest(src: Path) -> dict[str, Any]:
    """The manifest of the backup at `src`, or InvalidInputError saying what `src` is not."""
    try:
        manifest = json.loads((src / MANIFEST).read_bytes())
    except FileNotFoundError:
        raise InvalidInputError(f"{src} is not a memserver backup (no {MANIFEST})") from None
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"{src / MANIFEST} is unreadable: {exc}") from None
    if not isinstance(manifest, dict) or manifest.get("engine") != "local" or manifest.get("format") != FORMAT:
        raise InvalidInputError(f"{src / MANIFEST} is not a backup this version can restore")
    return manifest


def resolve(src: str | os.PathLike[str], collection: str | None) -> Path:
    """`src` itself when it is a backup, else the newest backup under it (of `collection`, when given)."""
    path = Path(os.path.abspath(os.path.expanduser(src)))
    if (path / MANIFEST).is_file():
        return path
    found = (
        [p for p in path.iterdir() if not p.name.startswith(".") and _collection_of(p) is not None]
        if path.is_dir()
        else []
    )
    if collection:
        found = [p for p in found if _collection_of(p) == collection]
    if not found:
        raise InvalidInputError(f"{path}: no memserver backup there")
    return max(found, key=lambda p: p.name)


def restore(src: Path, target: Path, replace: bool) -> dict[str, Any]:
    """Put the backup at `src` in place as the collection folder `target`: into a missing or empty folder, or,
    with `replace`, instead of the store there (moved aside to `<target>.replaced-<time>` until the new one is in
    place, then removed). Processes that have the store open must be stopped first. Returns the manifest.

    The crash story: the copy is made in `.restoring-<name>` and only once whole and synced renamed to
    `.restored-<name>`; then the old store moves aside and `.restored-<name>` takes its name. A kill between those
    two renames leaves no store under the name but a whole `.restored-<name>`: the next open of the store finishes
    the rename (`finish_restore`), so a restore never leaves an empty store behind."""
    manifest = read_manifest(src)
    files = manifest.get("files")
    if not isinstance(files, dict) or JOURNAL_NAME not in files:
        raise InvalidInputError(f"{src / MANIFEST} lists no journal")
    for name, size in files.items():
        if Path(name).name != name or not (src / name).is_file() or (src / name).stat().st_size != size:
            raise InvalidInputError(f"{src}: {name} is missing or not the size the manifest gives; not restored")
    occupied = target.exists() and any(target.iterdir())
    if occupied and not replace:
        raise InvalidInputError(f"{target} is not empty; restoring would replace the store there")
    make_dirs(target.parent)
    staged, whole = _restore_names(target)
    for leftover in (staged, whole):  # what a restore killed earlier left
        shutil.rmtree(leftover, ignore_errors=True)
    staged.mkdir(mode=0o700)
    for name in files:
        _copy_file(src / name, staged / name)
    OS.fsync_dir(staged)
    OS.replace(staged, whole)
    OS.fsync_dir(target.parent)
    aside = target.with_name(f"{target.name}.replaced-{datetime.now(timezone.utc).strftime('%Y%m%dT%H%M%S.%fZ')}")
    if target.exists():
        OS.replace(target, aside)
    OS.replace(whole, target)
    OS.fsync_dir(target.parent)
    with contextlib.suppress(OSError):
        shutil.rmtree(aside)
    return manifest


def finish_restore(target: Path) -> bool:
    """Finish a restore killed after it moved the old store aside: `.restored-<name>` (whole and synced) takes the
    store's name when no folder has it. True if it did."""
    _, whole = _restore_names(target)
    if target.exists() or not whole.is_dir():
        return False
    OS.replace(whole, target)
    OS.fsync_dir(target.parent)
    return True


def _restore_names(target: Path) -> tuple[Path, Path]:
    """A restore's folder while it copies, and once whole."""
    return target.with_name(f".restoring-{target.name}"), target.with_name(f".restored-{target.name}")


def _copy_file(src: Path, target: Path) -> None:
    fd = os.open(src, os.O_RDONLY)
    try:
        _copy(fd, os.fstat(fd).st_size, target)
    finally:
        os.close(fd)
