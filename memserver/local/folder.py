"""Folder: one local store's folder, open: its locks, the journal generation held in memory and kept caught up
with other processes, checkpoints and closing. store.MemoryStore owns one and adds the contract's methods.

Locks, always in this order: the thread lock (`thread_lock`, reentrant) serialises all calls in a process
(hnswlib does not lock reads against inserts; embedding runs outside it); then the file lock (`_file_lock`) across
processes: writers hold it exclusively, readers catching up hold it shared. Every call starts with `refresh` (one
stat: catch up if the journal grew, reload if another process compacted), or `nowait` for a read that must not
wait; every write goes through `writing`.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from memserver import config
from memserver.durable import OS, FileLayer, disk_errors_as, make_dirs, make_private
from memserver.errors import StoreError
from memserver.local import checkpoint_job
from memserver.local.backup import finish_restore
from memserver.local.checkpoints import CheckpointCosts, fixed_interval_from_env
from memserver.local.compaction import remove_other_generations
from memserver.local.generation import Generation
from memserver.local.hooks import StoreHooks
from memserver.local.index import VectorIndex
from memserver.local.journal import LOCK_NAME, FileLock, open_journal
from memserver.local.keyword import KeywordDerivedIndex

if TYPE_CHECKING:
    from memserver.embedding.base import TextEmbedder

log = logging.getLogger(__name__)

# Checkpoint the derived indexes when this many journal records are not covered by the checkpoint on disk
# (on open, close and after import_); the write path spaces them by cost (checkpoints.py) and writes them
# outside the exclusive lock (checkpoint_job.py).
CHECKPOINT_RECORDS = 200


class Folder:
    """One collection folder, open (`path`, `name`): its locks, the journal generation held in memory and kept
    caught up with other processes, checkpoints and closing. MemoryStore owns one and adds the contract's methods.

    Locks, always in this order: the thread lock (`thread_lock`, reentrant) serialises all calls in a process
    (hnswlib does not lock reads against inserts; embedding runs outside it); then the file lock (`_file_lock`)
    across processes: writers hold it exclusively, readers catching up hold it shared. `refresh` (one stat)
    before every call (`nowait` for a read that must not wait); `writing` for every write.
    """

    @disk_errors_as("cannot open the store")
    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        collection: str | None = None,
        embedder: TextEmbedder | None = None,
        *,
        lock_timeout: float = 30.0,
        M: int | None = None,
        ef_construction: int | None = None,
        ef: int | None = None,
        hooks: StoreHooks | None = None,
        files: FileLayer | None = None,
    ) -> None:
        if embedder is None:
            from memserver.embedding.embedder import Embedder  # onnxruntime only when the caller brings no embedder

            embedder = Embedder()
        self.embedder: TextEmbedder = embedder
        self.dim = int(embedder.dim)
        self.hooks = hooks or StoreHooks()
        self.files = files or OS  # every change the store makes to a file goes through it (durable.py)
        root = Path(os.path.abspath(os.path.expanduser(path))) if path is not None else config.data_dir()
        self.name = config.validate_collection(collection) if collection else config.collection_name()
        self.path = root / self.name
        if finish_restore(self.path):
            log.warning(
                "%s: finished a restore that was interrupted before the store took its name; the store it replaced "
                "is kept beside it as %s.replaced-<time> (remove it once you no longer need it)",
                self.path,
                self.name,
            )
        make_dirs(self.path, self.files)
        make_private(self.path, self.files)  # a store made before 0600/0700 (durable.py), tightened once
        self.thread_lock = threading.RLock()
        self._file_lock = FileLock(self.path / LOCK_NAME, timeout=lock_timeout, files=self.files)
        params = {"M": M, "ef_construction": ef_construction, "ef": ef}
        self._index_params = {k: v for k, v in params.items() if v is not None}  # each generation's VectorIndex
        self._gen: Generation | None = None  # the generation open now (None: closed, or its load failed)
        self._importing = 0  # import_ calls in progress (they space write-path checkpoints out; see writing)
        self._costs = CheckpointCosts(fixed_interval_from_env())  # when the write path checkpoints
        self._checkpoints = checkpoint_job.OutsideLock(self.thread_lock, self._file_lock)  # and how
        self._closed = False
        with self.thread_lock:
            self.reload()

    # --- opening and catching up ------------------------------------------------------------------------------

    def current(self) -> Generation:
        """The generation open now (StoreError once closed)."""
        if self._gen is None:
            raise StoreError("the store is closed")
        return self._gen

    def reload(self) -> None:
        """Open (or reopen after a compaction): checkpoints first, then replay the journal once past them.

        The new generation goes into service only once it is whole: if the load fails (the lock timed out, a
        damaged journal), the store holds none, and its next call loads again.

        The cyclic garbage collector is paused meanwhile: a load creates millions of objects, none of them in a
        cycle, and the collector would rescan them again and again (1M memories: 10.6 s -> 7.3 s to open).
        """
        paused = gc.isenabled()
        gc.disable()
        try:
            self._close_files()
            gen = self._gen = self._restored()
            self.hooks.opened(gen.coverage.replayed, gen.from_snapshot)
            if gen.needs_checkpoint_after_open(CHECKPOINT_RECORDS):
                self.checkpoint()
        finally:
            if paused:
                gc.enable()

    def _restored(self) -> Generation:
        """The current journal's generation, restored, with indexes of its own; on failure whatever it opened is
        closed again.

        The journal is opened without a lock, so another process may compact (switch journals, remove the old
        vector file) before the shared lock is ours: each time the lock is taken, check the journal is still the
        current one, and if not, start again on the new one (as `exclusive` does).
        """
        while True:
            journal = open_journal(self.path, self.dim, str(self.embedder.model_name), self._file_lock, self.files)
            gen: Generation | None = None
            try:
                with self._file_lock.hold(exclusive=False):
                    if not journal.replaced():  # current: no one removes its vector file while we hold the lock
                        vindex = VectorIndex(self.dim, **self._index_params, files=self.files)
                        kindex = KeywordDerivedIndex(files=self.files)  # keyed by row too (see keyword.py)
                        gen = Generation(self.path, journal, vindex, kindex, self.embed, self.hooks, self._costs)
                        torn = gen.restore()
                if gen is not None:
                    gen.rebuild_untrusted()
                    with self._file_lock.hold(exclusive=True):
                        if not journal.replaced():
                            if torn:
                                gen.catch_up(repair=True)
                            remove_other_generations(self.path, journal.generation, self.files)
                            return gen
            except BaseException:
                (journal if gen is None else gen).close()
                raise
            (journal if gen is None else gen).close()
            log.info(
                "journal %s was replaced while opening it (compacted by another process); opening the new one",
                journal.path,
            )

    def keeps_checkpoints(self, live: int) -> bool:
        """Whether a store of `live` memories keeps checkpoints of its indexes (see needs_checkpoint_after_open)."""
        return live >= CHECKPOINT_RECORDS

    def refresh(self) -> Generation:
        """Before every call: one stat; reload after a compaction elsewhere, catch up if the journal grew."""
        if self._closed:
            raise StoreError("the store is closed")
        gen = self._gen
        if gen is None:  # the last load failed (say the lock timed out): load again
            self.reload()
            return self.current()
        change = gen.journal_change()
        if change == "replaced":
            log.info("journal %s was replaced (compacted by another process); reloading", gen.journal.path)
            self.reload()
        elif change == "grown":
            with self._file_lock.hold(exclusive=False):
                gen.catch_up(repair=False)
        return self.current()

    @contextlib.contextmanager
    def nowait(self) -> Iterator[Generation | None]:
        """The thread lock and the generation open now, if both are to be had without waiting: the lock free, the
        journal unchanged since the last catch-up (one stat). Else None (and no lock): `refresh` would wait."""
        if not self.thread_lock.acquire(blocking=False):
            yield None
            return
        try:
            gen = self._gen
            yield gen if gen is not None and not self._closed and gen.journal_change() is None else None
        finally:
            self.thread_lock.release()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        vecs = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if vecs.shape != (len(texts), self.dim) or not np.isfinite(vecs).all():
            raise StoreError(f"the embedder returned shape {vecs.shape} (or non-finite values) for {len(texts)} texts")
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        return vecs / np.where(norms == 0, 1, norms)

    # --- the write locks ------------------------------------------------------------------------------------------

    @contextlib.contextmanager
    def writing(self) -> Iterator[Generation]:
        """Thread lock + exclusive file lock, caught up on everything (a torn tail repaired) before writing."""
        with self.thread_lock:
            self.refresh()
            with self.exclusive() as gen:
                yield gen
                due = checkpoint_job.due(gen, importing=self._importing > 0)
            staged = self._checkpoints.stage(gen) if due else None  # copied out, the file lock released
        if staged is not None:  # written with no lock held, committed under it (checkpoint_job.py)
            self._checkpoints.finish(staged, lambda g: g is self._gen and not self._closed)

    @contextlib.contextmanager
    def reading(self) -> Iterator[Generation]:
        """Thread lock + shared file lock on the generation whose journal is current, NOT caught up (a catch-up
        would hold the lock for as long as the replay takes): no writer appends, checkpoints or switches
        meanwhile. backup.py opens the files to copy under it; keep the body short."""
        with self.thread_lock:
            while True:
                if self._gen is None:
                    self.reload()
                with self._file_lock.hold(exclusive=False):
                    gen = self.current()
                    if gen.is_current():
                        yield gen
                        return
                self.reload()

    @contextlib.contextmanager
    def exclusive(self) -> Iterator[Generation]:
        """The exclusive file lock on the journal that is current, caught up (a torn tail repaired).

        Another process may compact while we wait for the lock: its switch renames a new journal over the one we
        hold open, and a line appended to the old, unlinked file would be acknowledged and then lost. So after
        taking the lock, check the journal is still the current one; if not, reload and take the lock again.
        """
        while True:
            self.hooks.taking_exclusive_lock()
            with self._file_lock.hold(exclusive=True):
                gen = self.current()
                if gen.is_current():
                    gen.catch_up(repair=True)
                    yield gen
                    return
            log.info("journal %s was replaced while waiting for the lock; reloading", gen.journal.path)
            self.reload()

    # --- checkpoints and closing ---------------------------------------------------------------------------------

    def checkpoint(self, strict: bool = False) -> None:
        """Save every derived index and the snapshot at the journal's end, under the exclusive lock (the thread lock
        held, refreshed). Not strict: a failure is logged (it costs replay time on the next open, never data)."""
        with self.exclusive() as gen:
            gen.save_checkpoint(strict)

    def checkpoint_if_due(self) -> None:
        """Checkpoint if CHECKPOINT_RECORDS journal records are not covered yet (after an import, on close)."""
        with self.thread_lock:
            if self.current().needs_checkpoint(CHECKPOINT_RECORDS):
                self.refresh()
                self.checkpoint()

    @contextlib.contextmanager
    def importing(self) -> Iterator[None]:
        """An import in progress: meanwhile the write path spaces its checkpoints out (see `writing`)."""
        with self.thread_lock:
            self._importing += 1
        try:
            yield
        finally:
            with self.thread_lock:
                self._importing -= 1

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def folder(self) -> Path:
        """`path`, by the name durable.disk_errors_as looks for to name the folder in a disk error's message."""
        return self.path

    def _close_files(self) -> None:
        if self._gen is not None:
            self._gen.close()
            self._gen = None

    def close(self) -> None:
        """Checkpoint if worthwhile, then release files. Safe to call twice."""
        with self.thread_lock:
            if self._closed:
                return
            try:
                if self._gen is not None:
                    self.checkpoint_if_due()
            except Exception as exc:  # closing must not fail on a checkpoint: the journal has everything
                log.warning("checkpoint on close failed: %s", exc)
            self._closed = True
            self._close_files()
            self._file_lock.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            if not self._closed:
                self._close_files()
                self._file_lock.close()
