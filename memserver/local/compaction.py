"""Compaction: a new journal generation holding only the stored memories, built beside the old one, then switched in.

Stored: current memories and replaced ones (history, with their links); forgotten memories are purged for good,
and with them the history an `as_of` read could tell about them. The memories keep their order (rows are
renumbered 0..n-1 in stored order), so ties in time and rank stay as they were. A replaced memory's line carries
`replaced_by` and `replaced_at`, so its state survives even when the newer memory was forgotten and purged.

A store below CHECKPOINT_RECORDS memories keeps no checkpoints (generation.needs_checkpoint_after_open): its
compaction writes none and removes the old generation's, so that compacting never grows a store by more than the
journal header's `compacted_at` (docs/storage.md, "What a store weighs").

Why it is safe at every instant is in journal.py's crash story. The slow part (`copy`: every live memory renumbered
0..n-1 into `compacting-<generation>.*` files, with the new vector index and the catalog of the new generation)
runs without the cross-process lock, from a snapshot of the live memories taken under the thread lock; other
processes keep writing meanwhile. The store then takes the exclusive lock, catches up, and `switch` appends what
changed since the copy, renames the files into place and renames the new journal over the old one: about the cost
of an ordinary write plus the changes. The catalog of the new generation is a real `Catalog`, fed like any other,
whose snapshot the next open restores.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import sys
import time
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memserver.contract import inputs
from memserver.durable import FileLayer, folder_bytes, pwrite_all, write_all
from memserver.errors import StoreLockedError
from memserver.local import replay, snapshot
from memserver.local.catalog import Catalog
from memserver.local.checkpoint_job import STAGING
from memserver.local.index import META_NAME, VectorIndex
from memserver.local.journal import JOURNAL_NAME, FileLock, Journal, encode_line
from memserver.local.keyword import KEYWORD_META
from memserver.local.replay import AddRecord
from memserver.local.vectors import Embed, VectorFile, damaged, read_rows, row_crc, vector_path

if TYPE_CHECKING:
    from memserver.local.folder import Folder

log = logging.getLogger(__name__)

# Files of a compaction (compacting-*) without a lock file (an older memserver's) are removed as leftovers of a dead
# one only when this old; those with one, once no process holds it.
COMPACTING_STALE_S = 6 * 3600
_TEMP = re.compile(r"\.tmp-[0-9a-f]{8}$")  # durable.atomic_write's temp files
_BATCH = 10_000
CHECKPOINT_FILES = ((META_NAME, "index-*.hnsw*"), (KEYWORD_META, "keyword-*.npz*"))  # each meta, its data files


class Compaction:
    """One compaction of the generation whose stored memories are `live` (in row order), read through `vectors`."""

    def __init__(
        self,
        folder: Path,
        journal: Journal,
        vectors: VectorFile,
        live: list[AddRecord],
        vindex: VectorIndex,
        *,
        checkpoints: bool = True,
    ) -> None:
        self.folder = folder
        self.checkpoints = checkpoints  # write the new generation's graph and snapshot (else drop the old ones)
        self.files: FileLayer = vectors.files  # every change to a file goes through the store's file layer
        self.old_generation = journal.generation
        self.header = {k: v for k, v in journal.header.items() if k not in ("crc", "op", "format")}
        self.live = live
        self.copied = {r.id: r.row for r in live}  # id -> its row in the old generation
        self.copied_history = {r.id for r in live if r.replaced_by}
        self.dim = vectors.dim
        self.crcs = vectors.crcs.copy()
        self.repaired = dict(vectors.repaired)
        self.src = os.open(vectors.path, os.O_RDONLY)  # rows are append-only: read without a lock
        self.index = VectorIndex(
            self.dim, M=vindex.M, ef_construction=vindex.ef_construction, ef=vindex.ef, files=self.files
        )
        self.generation = uuid.uuid4().hex
        exts = ("lock", "f32", "jsonl", "hnsw", "snap")
        self.paths = {ext: folder / f"compacting-{self.generation}.{ext}" for ext in exts}
        self.graph: dict[str, Any] = {}  # the new index checkpoint, once written
        # Held until `discard`: other processes remove the compacting-* files only of compactions not running.
        self.running = FileLock(self.paths["lock"], timeout=0, files=self.files)
        self._held = contextlib.ExitStack()
        self._held.enter_context(self.running.hold(exclusive=True))

    def copy(self, embed: Embed) -> None:
        """The unlocked part: the live memories into the compacting-* files (damaged rows re-embedded)."""
        try:
            self._copy(embed)
        finally:
            os.close(self.src)

    def _copy(self, embed: Embed) -> None:
        paths, live = self.paths, self.live
        catalog = Catalog()  # the metadata of the new generation, for its snapshot
        crcs = np.full(len(live), -1, dtype=np.int64)
        fs = self.files
        header = {**self.header, "generation": self.generation, "compacted_at": inputs.now()}
        Journal.create(paths["jsonl"], header, files=fs)
        vfd = fs.open(paths["f32"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        jfd = fs.open(paths["jsonl"], os.O_WRONLY | os.O_APPEND)
        try:
            for i in range(0, len(live), _BATCH):
                batch = live[i : i + _BATCH]
                rows = [r.row for r in batch]
                vecs = read_rows(self.src, rows, self.dim)
                for n, row in enumerate(rows):
                    if row in self.repaired:
                        vecs[n] = self.repaired[row]
                known = damaged(vecs, rows, self.crcs, sys.maxsize)  # rows past the file's end: zeros, failing a CRC
                bad = [n for n in known if rows[n] not in self.repaired]
                if bad:
                    log.error("%d vector row(s) damaged or missing; re-embedding them for compaction", len(bad))
                    for n, v in zip(bad, embed([batch[n].content for n in bad]), strict=True):
                        vecs[n] = v
                write_all(vfd, vecs.tobytes(), fs)
                lines = []
                for n, r in enumerate(batch):
                    moved = r._replace(row=i + n)
                    crcs[i + n] = crc = row_crc(vecs[n])
                    catalog.add(moved)
                    lines.append(encode_line(replay.add_line(moved, crc)))
                write_all(jfd, b"".join(lines), fs)
                current = np.fromiter((not r.replaced_by for r in batch), dtype=bool, count=len(batch))
                if current.any():
                    self.index.add_rows(np.arange(i, i + len(batch), dtype=np.int64)[current], vecs[current])
            fs.fsync(vfd)
            fs.fsync(jfd)
        finally:
            fs.close(vfd)
            fs.close(jfd)
        if not self.checkpoints:
            return
        offset = paths["jsonl"].stat().st_size
        graph_stamp = {"generation": self.generation, "offset": offset, "count": len(catalog)}
        self.graph = self.index.write_graph(self.folder, graph_stamp, name=paths["hnsw"].name)
        stamp = snapshot.stamp_for(self.generation, offset, len(catalog), snapshot.line_crc(paths["jsonl"], offset))
        snapshot.save(paths["snap"], stamp, snapshot.encode(catalog, crcs), fs)

    def can_switch(self, catalog: Catalog) -> bool:
        """Whether the changes since the copy can be appended: False when a memory copied as current has since
        been replaced by a memory that has since been forgotten too (no line of the new journal could say it is
        history). Rare; the compaction is dropped, and the next one copies it as history."""
        for row in catalog.history.replaced_rows():
            memory_id = catalog.id_at(row)
            fresh = self.copied.get(memory_id or "") == row and memory_id not in self.copied_history  # as current
            if fresh and catalog.row_of(catalog.history.replaced[row][0]) is None:
                return False
        return True

    def switch(self, catalog: Catalog, vectors: VectorFile, embed: Embed) -> None:
        """The locked part (exclusive lock, caught up on the old journal, whose live memories `catalog` holds):
        append the changes since the copy, rename everything into place, switch journals.

        A memory is told by its row, not its id (rows are never reused within a generation): one deleted and
        imported again under its id since the copy is gone (its delete line comes before its new add) and added
        (its new record). Every other delete comes after the adds, so a memory replaced and then forgotten since
        the copy reads back as history first, then forgotten (each tombstone keeps the time of its forget)."""
        copied = self.copied
        stored = catalog.stored_rows().tolist()
        added = [catalog.record(row) for row in stored if copied.get(catalog.id_at(row) or "") != row]
        gone = [r for r in self.live if catalog.row_of(r.id) != r.row]
        again = {r.id for r in added}
        paths, fs = self.paths, self.files
        if added or gone:
            vfd = fs.open(paths["f32"], os.O_WRONLY)
            jfd = fs.open(paths["jsonl"], os.O_WRONLY | os.O_APPEND)
            try:
                now = inputs.now()
                forgotten = catalog.history.forgotten
                deletes = [(r.id in again, replay.delete_line(r.id, forgotten.get(r.row, ("", now))[1])) for r in gone]
                lines = [encode_line(line) for first, line in deletes if first]
                if added:
                    vecs = vectors.checked(added, embed)
                    pwrite_all(vfd, vecs.tobytes(), len(self.live) * vectors.rowbytes, fs)
                    for n, r in enumerate(added):
                        lines.append(encode_line(replay.add_line(r._replace(row=len(self.live) + n), row_crc(vecs[n]))))
                lines += [encode_line(line) for first, line in deletes if not first]
                write_all(jfd, b"".join(lines), fs)
                fs.fsync(vfd)
                fs.fsync(jfd)
            finally:
                fs.close(vfd)
                fs.close(jfd)
        fs.replace(paths["f32"], vector_path(self.folder, self.generation))
        if self.checkpoints:
            fs.replace(paths["snap"], snapshot.snapshot_path(self.folder, self.generation))
        fs.fsync_dir(self.folder)
        fs.replace(paths["jsonl"], self.folder / JOURNAL_NAME)  # the atomic switch to the new generation
        fs.fsync_dir(self.folder)
        if not self.checkpoints:  # the old generation's checkpoints can serve no open any more
            drop_checkpoints(self.folder, fs)
            return
        graph = f"index-{uuid.uuid4().hex[:12]}.hnsw"
        fs.replace(paths["hnsw"], self.folder / graph)
        VectorIndex.commit(self.folder, {**self.graph, "file": graph}, fs)

    def discard(self) -> None:
        """Remove what is left of the compacting-* files (all of them, if the switch did not happen)."""
        for p in self.paths.values():
            with contextlib.suppress(OSError):
                self.files.unlink(p)
        self._held.close()
        self.running.close()


def compact(store: Folder) -> dict[str, Any]:
    """MemoryStore.compact: copy the live memories with no file lock held (a snapshot of them taken under the thread
    lock), then switch under the exclusive lock unless another process compacted, or a memory changed state,
    meanwhile; reopen. Returns count, removed, bytes before and after."""
    with store.thread_lock:
        gen = store.refresh()
        before = folder_bytes(store.path)
        removed = gen.deleted_pending()
        live = [gen.catalog.record(row) for row in gen.catalog.stored_rows().tolist()]
        checkpoints = store.keeps_checkpoints(len(live))
        job = Compaction(store.path, gen.journal, gen.vectors, live, gen.vindex, checkpoints=checkpoints)
    try:
        job.copy(store.embed)
        store.hooks.compaction_copied()
        with store.thread_lock:
            store.refresh()
            with store.exclusive() as gen:  # the current journal (checked before a torn tail is repaired)
                if gen.journal.generation != job.old_generation:
                    log.info("another process compacted %s meanwhile; dropping this compaction", store.path)
                elif not job.can_switch(gen.catalog):
                    log.info("a memory of %s changed state during compaction; dropping it", store.path)
                else:
                    store.hooks.compaction_switching()
                    job.switch(gen.catalog, gen.vectors, store.embed)
                    store.hooks.compaction_switched()
            store.reload()
            after = folder_bytes(store.path)
            count = len(store.current().catalog)
    finally:
        job.discard()
    return {"count": count, "removed": removed, "bytes_before": before, "bytes_after": after}


def drop_checkpoints(folder: Path, files: FileLayer) -> None:
    """Remove the derived indexes' checkpoints (meta file first, then data files): a store too small to keep them
    rebuilds its indexes on open (generation.needs_checkpoint_after_open). Exclusive lock held."""
    for meta, pattern in CHECKPOINT_FILES:
        for p in [folder / meta, *sorted(folder.glob(pattern))]:
            with contextlib.suppress(FileNotFoundError):
                files.unlink(p)
    files.fsync_dir(folder)


def remove_other_generations(folder: Path, generation: str, files: FileLayer) -> None:
    """Remove vector files, snapshots and temp files of other generations (left by a compaction), the files of
    a compaction that died, and the temp files of an atomic write or a checkpoint that a crash interrupted
    (`*.tmp-<nonce>`, `*.tmp`: written under the exclusive lock only, so none is in progress now), and those of
    a write-path checkpoint that died (checkpoint_job.py: written without the lock, so only those whose lock no
    process holds). Call with the exclusive lock held, on the journal that is current."""
    keep = {vector_path(folder, generation).name, snapshot.snapshot_path(folder, generation).name}
    unnamed = _unnamed_checkpoint_files(folder)
    dead: dict[str, bool] = {}  # compaction (its new generation), or checkpoint -> no longer running
    for p in folder.iterdir():
        name = p.name
        if name in keep:
            continue
        if name.startswith("compacting-"):  # written without the lock: only when a dead compaction left them
            nonce = name[len("compacting-") :].split(".", 1)[0]
            if nonce not in dead:
                dead[nonce] = _compaction_over(folder, nonce, generation, files)
            stale = dead[nonce]
        elif name.startswith(STAGING):  # a write-path checkpoint's, written without the lock: only a dead one's
            nonce = STAGING + name[len(STAGING) :].split(".", 1)[0]
            if nonce not in dead:
                lock = folder / f"{nonce}.lock"
                dead[nonce] = not lock.exists() or _lock_free(lock, files)
            stale = dead[nonce]
        else:
            stale = (
                name in unnamed
                or name.startswith("vectors-")
                or (name.startswith("meta-") and name.endswith(".snap"))
                or name.endswith((".compact-tmp", ".tmp"))
                or _TEMP.search(name) is not None
            )
        if stale:
            with contextlib.suppress(OSError):
                files.unlink(p)


def _unnamed_checkpoint_files(folder: Path) -> set[str]:
    """The derived indexes' data files that their meta does not name: left by a crash between a data file's rename
    and its meta's commit (a compaction's switch, a staged checkpoint's commit) or inside drop_checkpoints. Data
    files are only named into place under the exclusive lock, so none of these is in progress; nothing can load
    them, and without this a store that keeps no checkpoints would keep them for good. A meta that is unreadable
    keeps them all (the next checkpoint's commit removes them)."""
    unnamed: set[str] = set()
    for meta, pattern in CHECKPOINT_FILES:
        try:
            named = json.loads((folder / meta).read_bytes()).get("file")
        except FileNotFoundError:
            named = None
        except (OSError, ValueError, AttributeError):
            continue
        unnamed |= {p.name for p in folder.glob(pattern) if p.name != named}
    return unnamed


def _compaction_over(folder: Path, nonce: str, generation: str, files: FileLayer) -> bool:
    """Whether the compaction making generation `nonce` is over: it made the generation in force (it died after
    its switch), or no process holds its lock, or (no lock file: an older memserver's) its files are hours old."""
    if nonce == generation:
        return True
    lock = folder / f"compacting-{nonce}.lock"
    if not lock.exists():
        return all(_age_s(p) > COMPACTING_STALE_S for p in folder.glob(f"compacting-{nonce}.*"))
    return _lock_free(lock, files)


def _lock_free(lock: Path, files: FileLayer) -> bool:
    """Whether no process holds the lock file `lock` (the job that holds it while it runs is over)."""
    probe = FileLock(lock, timeout=0, files=files)
    try:
        with probe.hold(exclusive=True):
            return True
    except StoreLockedError:
        return False
    finally:
        probe.close()


def _age_s(path: Path) -> float:
    try:
        return time.time() - path.stat().st_mtime
    except OSError:
        return 0.0
