"""A write-path checkpoint written outside the exclusive lock: only its commit holds the lock.

A checkpoint rewrites every derived index in full (hnswlib #36; at 1M memories ~1.7 GB of graph: seconds).
Written under the exclusive file lock (`Generation.save_checkpoint`, still used by `checkpoint()`, open, close
and import_'s end) it stalls every writer, and every reader catching up, in every process. The write path
instead takes it in three steps:

1. staged (thread lock held: this process's other calls wait; no file lock: other processes do not). What the
   checkpoint saves is copied out at the journal offset applied, into memory: the HNSW graph as hnswlib's
   pickle state (its arrays: a memory copy, where hnswlib's own save_index waits on the disk; above
   COPY_MAX_ELEMENTS save_index writes the file here instead, unsynced), the keyword index and the metadata
   snapshot as bytes.
2. written (no lock at all): the vector rows synced, the graph file written from that state, byte for byte what
   save_index writes (index.graph_file_chunks), synced and checked (header, size, CRC-32),
   the keyword file and the snapshot written and synced, each still a `checkpoint-<nonce>.*` file that no meta
   names, beside `checkpoint-<nonce>.lock`, which the checkpoint holds (flock) from step 1 to its end: an open
   elsewhere removes such files only once no process holds their lock (compaction.remove_other_generations).
3. committed (thread lock, then the exclusive file lock), only if it still applies: the same generation open
   here, its journal still the current one (no compaction by another process meanwhile), no checkpoint on disk
   already covering this offset or a later one (another process's, or an explicit `checkpoint()`), and its
   files still there. They are then renamed into place and committed as a locked checkpoint commits them
   (CheckpointFiles.commit, the snapshot's atomic rename). Records applied since step 1 stay uncovered.

The crash story. Before step 3 the folder holds the previous checkpoint plus `checkpoint-<nonce>.*` files that
nothing names and whose lock no one holds once their writer is dead: the next open removes them. Within
step 3 each index's commit and the snapshot's rename is atomic and checked on its own when loaded, as for a
locked checkpoint (journal.py). A checkpoint that no longer applies is dropped and its files removed: the journal
holds every memory either way, so a dropped checkpoint costs replay time on the next open, never data.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from memserver.durable import CheckpointError, CheckpointFiles, write_new_file
from memserver.errors import StoreLockedError
from memserver.local import snapshot
from memserver.local.generation import Generation
from memserver.local.index import VectorIndex, graph_file_chunks
from memserver.local.journal import FileLock
from memserver.local.keyword import KeywordDerivedIndex

log = logging.getLogger(__name__)

STAGING = "checkpoint-"  # the files of a checkpoint being written: checkpoint-<nonce>.{hnsw,npz,snap,lock}
FAILED = "could not write a checkpoint of %s (the next open replays more of the journal): %s"
# Copying the graph out costs its size again in memory (~1.7 GB at 1M: a 1M server's RSS would pass 4 GB during
# each checkpoint), so a larger graph is written by hnswlib's save_index in step 1 instead (to the page cache; its
# sync follows in step 2, unlocked). At 100k the copy took 0.81 s against save_index's 1.73 s (ad-hoc, 1 Dec).
COPY_MAX_ELEMENTS = 200_000


def due(gen: Generation, importing: bool) -> bool:
    """Whether the write path checkpoints now (exclusive lock held): spaced by cost (checkpoints.py), and during
    import_ geometrically (at least half the store apart: O(N) bytes in all). Vector rows waiting to be written
    back (their vfix lines go in the journal) are checkpointed here, under the lock, as before."""
    every = gen.costs.interval(len(gen.catalog))
    if importing:
        every = max(every, len(gen.catalog) // 2)
    if not gen.needs_checkpoint(every):
        return False
    if gen.vectors.repaired:
        gen.save_checkpoint()
        return False
    return True


class StagedCheckpoint:
    """One checkpoint of `gen` at the journal offset it has applied: staged, written, then committed or dropped."""

    def __init__(self, gen: Generation) -> None:
        """Step 1 (thread lock held, no file lock): copy out what the checkpoint saves."""
        self.started = time.perf_counter()
        self.gen = gen
        self.folder = folder = gen.folder
        self.files = gen.journal.files
        journal, cov = gen.journal, gen.coverage
        self.offset, self.uncovered, self.count = cov.offset, cov.uncovered, len(gen.catalog)
        self.stamp: dict[str, Any] = {"generation": journal.generation, "offset": self.offset, "count": self.count}
        self.keyword_data, self.keyword_live = gen.kindex.serialised()
        crc = snapshot.line_crc(journal.path, self.offset, journal.identity)
        self.snapshot_stamp = snapshot.stamp_for(journal.generation, self.offset, self.count, crc)
        self.snapshot_payload = snapshot.encode(gen.catalog, gen.vectors.crcs)
        self.graph_meta: dict[str, Any] = {}
        self.graph: dict[str, Any] | None = None
        self.keyword_meta: dict[str, Any] = {}
        nonce = uuid.uuid4().hex[:12]
        self.paths = {ext: folder / f"{STAGING}{nonce}.{ext}" for ext in ("hnsw", "npz", "snap", "lock")}
        self.running = FileLock(self.paths["lock"], timeout=0, files=self.files)  # held until `discard`
        self._held = contextlib.ExitStack()
        try:
            self._held.enter_context(self.running.hold(exclusive=True))
            # In memory, the file written in step 2; or (a large graph, or a state format not known here)
            # hnswlib writes the file now.
            self.graph = gen.vindex.copy_graph() if self.count <= COPY_MAX_ELEMENTS else None
            if self.graph is None:
                self.elements = gen.vindex.dump_graph(self.paths["hnsw"])
            else:
                self.elements = int(self.graph["cur_element_count"])
        except BaseException:
            self.discard()
            raise
        self.staged = time.perf_counter()

    def write(self) -> None:
        """Step 2 (no lock): every file written and synced, none named yet."""
        files, paths = self.files, self.paths
        if self.graph is not None:
            write_new_file(paths["hnsw"], *graph_file_chunks(self.graph), files=files)
            self.graph = None
            synced = [self.gen.vectors.path]
        else:
            synced = [self.gen.vectors.path, paths["hnsw"]]
        for path in synced:  # the vector rows it covers (and the graph hnswlib wrote)
            fd = files.open(path, os.O_RDONLY)
            try:
                files.fsync(fd)
            finally:
                files.close(fd)
        graph_name = self.gen.vindex.checkpoint_files(self.folder).new_name()
        self.graph_meta = self.gen.vindex.described(paths["hnsw"], graph_name, self.stamp, self.elements)
        write_new_file(paths["npz"], self.keyword_data, files=files)
        keyword_name = self.gen.kindex.checkpoint_files(self.folder).new_name()
        meta_of = KeywordDerivedIndex.meta_of
        self.keyword_meta = meta_of(keyword_name, self.keyword_data, self.stamp, self.keyword_live)
        snapshot.write_new(paths["snap"], self.snapshot_stamp, self.snapshot_payload, files)
        self.keyword_data, self.snapshot_payload = memoryview(b""), b""

    def obsolete(self) -> str | None:
        """Step 3 (exclusive lock held): why this checkpoint no longer applies, or None if it does."""
        gen = self.gen
        if not gen.is_current():
            return "the journal was compacted meanwhile"
        for checkpoint in (gen.vindex.checkpoint_files(self.folder), gen.kindex.checkpoint_files(self.folder)):
            if _covers(checkpoint, self.stamp):
                return "a checkpoint on disk covers as much already"
        if not all(self.paths[ext].exists() for ext in ("hnsw", "npz", "snap")):
            return "its files were removed meanwhile"
        return None

    def commit(self) -> None:
        """Step 3 (exclusive lock held, `obsolete()` None): rename into place and commit, index by index."""
        files, folder, gen, paths = self.files, self.folder, self.gen, self.paths
        files.replace(paths.pop("hnsw"), folder / self.graph_meta["file"])
        VectorIndex.commit(folder, self.graph_meta, files)  # (it syncs the folder first: the rename is durable)
        gen.coverage.saved(gen.vindex.name, self.offset)
        files.replace(paths.pop("npz"), folder / self.keyword_meta["file"])
        gen.kindex.checkpoint_files(folder).commit(self.keyword_meta)
        gen.coverage.saved(gen.kindex.name, self.offset)
        snapshot_path = snapshot.snapshot_path(folder, gen.journal.generation)
        files.replace(paths.pop("snap"), snapshot_path)
        files.fsync_dir(folder)
        gen.coverage.checkpointed(self.uncovered)

    def discard(self) -> None:
        """Remove the files not committed (after a commit, only the lock), then release the lock."""
        for path in self.paths.values():
            with contextlib.suppress(OSError):
                self.files.unlink(path)
        self.paths = {}
        self._held.close()
        self.running.close()


def _covers(checkpoint: CheckpointFiles, stamp: dict[str, Any]) -> bool:
    """Whether the checkpoint in force covers `stamp`'s generation up to its offset or later."""
    try:
        meta = checkpoint.read_meta()
    except CheckpointError:
        return False
    if meta is None or meta.get("generation") != stamp["generation"]:
        return False
    offset = meta.get("offset")
    return isinstance(offset, int) and offset >= stamp["offset"]


class OutsideLock:
    """A store's write-path checkpoints, one at a time, each a StagedCheckpoint (see the module docstring)."""

    def __init__(self, thread_lock: threading.RLock, file_lock: FileLock) -> None:
        self.thread_lock = thread_lock
        self.file_lock = file_lock
        self.running = False  # a checkpoint of this store is between steps 1 and 3 (thread lock guards it)

    def stage(self, gen: Generation) -> StagedCheckpoint | None:
        """Step 1 (thread lock held, file lock not); None if one is already running or staging failed."""
        if self.running:
            return None
        try:
            job = StagedCheckpoint(gen)
        except (OSError, ValueError, MemoryError) as exc:  # (the write it follows is durable: never raised)
            log.warning(FAILED, gen.folder, exc)
            return None
        self.running = True
        return job

    def finish(self, job: StagedCheckpoint, still_open: Callable[[Generation], bool]) -> None:
        """Steps 2 and 3 (called with no lock held); every failure is logged (the journal has everything)."""
        gen = job.gen
        t0, t1 = job.started, job.staged
        try:
            gen.hooks.checkpoint_writing()
            job.write()
            t2 = time.perf_counter()
            with self.thread_lock:
                why = "the store was closed or reloaded meanwhile" if not still_open(gen) else None
                if why is None:
                    gen.hooks.taking_exclusive_lock()
                    with self.file_lock.hold(exclusive=True):
                        t3 = time.perf_counter()
                        why = job.obsolete()
                        if why is None:
                            job.commit()
                            t4 = time.perf_counter()
                            log.debug(
                                "checkpoint outside the lock: staged %.3f s, written %.3f s, lock waited %.3f s, "
                                "committed %.3f s",
                                *(t1 - t0, t2 - t1, t3 - t2, t4 - t3),
                            )
                            gen.checkpoint_done(job.count, t4 - t0)
            if why is not None:
                log.info("dropped a checkpoint of %s: %s", gen.folder, why)
        except FileNotFoundError as exc:  # removed under the lock by another store's open or checkpoint
            log.info("dropped a checkpoint of %s: its file %s was removed meanwhile", gen.folder, exc.filename)
        except (OSError, ValueError, MemoryError, StoreLockedError) as exc:
            log.warning(FAILED, gen.folder, exc)
        finally:
            job.discard()
            with self.thread_lock:
                self.running = False
