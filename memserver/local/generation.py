"""One journal generation held in memory: its journal and vector rows, replayed into the catalog and the indexes.

A generation lives from one compaction to the next (`journal.header["generation"]`). Opening the store, or
reopening it after another process compacted, makes a new `Generation`: `restore` loads the checkpoints (the
index checkpoints and the metadata snapshot) and replays the journal past them; afterwards every record goes
through `catch_up` -> `apply`, the one replay path, used alike for this process's own writes (each write is
appended, then read back), for catching up on other processes' writes, and for the journal tail on open.

The store decides which lock each step runs under (construction, which opens the vector file, and `restore` under
the shared lock, `catch_up(repair=True)` and `save_checkpoint` under the exclusive one); nothing here takes a lock.
"""

from __future__ import annotations

import bisect
import logging
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from memserver.contract.inputs import now
from memserver.errors import CorruptJournalError
from memserver.local import snapshot
from memserver.local.catalog import Catalog
from memserver.local.checkpoints import CheckpointCosts
from memserver.local.hooks import StoreHooks
from memserver.local.index import VectorIndex
from memserver.local.journal import Journal
from memserver.local.keyword import KeywordDerivedIndex
from memserver.local.record_rules import broken_rule
from memserver.local.replay import AddRecord, Coverage, DerivedIndex, add_line, added, delete_line, vfix_line
from memserver.local.search import Searcher
from memserver.local.vectors import Embed, VectorFile, row_crc, vector_path

log = logging.getLogger(__name__)

REBUILD_BATCH = 10_000  # records per add() of a bulk rebuild


class Generation:
    """The journal of one generation and its vector rows, replayed into the catalog and the derived indexes."""

    def __init__(
        self,
        folder: Path,
        journal: Journal,
        vindex: VectorIndex,
        kindex: KeywordDerivedIndex,
        embed: Embed,
        hooks: StoreHooks,
        costs: CheckpointCosts | None = None,
    ) -> None:
        self.folder = folder
        self.costs = costs or CheckpointCosts()  # timed here (replay, checkpoints); the store asks its interval
        self.journal = journal
        self.vectors = VectorFile(vector_path(folder, journal.generation), vindex.dim, journal.files)
        self.catalog = Catalog()
        self.coverage = Coverage()
        self.vindex = vindex
        self.kindex = kindex
        self.derived: list[DerivedIndex] = [vindex, kindex]  # each one follows `apply`; both are keyed by row
        self.embed = embed
        self.hooks = hooks
        self.searcher = Searcher(self.catalog, self.vectors, vindex, kindex, hooks)
        self.from_snapshot = False
        self.rebuilt = False  # an index was rebuilt on open (its checkpoint missing or contradicted)
        self._stamps: dict[str, dict[str, Any] | None] = {}

    # --- opening -------------------------------------------------------------------------------------------------

    def restore(self) -> bool:
        """Load the checkpoints, then replay the journal past them (shared lock held). True if a torn tail is left
        (to be repaired under the exclusive lock)."""
        journal, cov = self.journal, self.coverage
        cov.begin_load(journal.header_end)
        # The vector index's graph file is checksummed in a thread (1M memories: ~1 s) while the other indexes and
        # the metadata snapshot load; the graph itself is loaded last.
        vector_offset = self.vindex.prepare(self.folder, journal.generation)
        for d in self.derived:
            if d is not self.vindex:
                self._load_checkpoint(d)
        # The metadata snapshot may stand in for replaying the journal up to its offset, if no loaded index
        # checkpoint is older than it (those are fed by the replay from their own offsets on). The vector
        # checkpoint counts at the offset it claims: if it then fails its checks and is rebuilt, the floor was
        # only lower than needed (a snapshot past it is replayed over instead: slower, never wrong).
        restored = snapshot.load(
            snapshot.snapshot_path(self.folder, journal.generation),
            journal.generation,
            journal.path,
            journal.identity,
            journal.header_end,
            cov.snapshot_floor(vector_offset),
        )
        if restored is not None:
            self.catalog, crcs, cov.offset = restored
            self.vectors.restore_crcs(crcs)
            self.searcher = Searcher(self.catalog, self.vectors, self.vindex, self.kindex, self.hooks)
            self.from_snapshot = True
        self._load_checkpoint(self.vindex)
        cov.start_replay(len(self.catalog))
        torn = self.catch_up(repair=False)
        self._reembed_rows_past_the_file()
        return torn

    def _reembed_rows_past_the_file(self) -> None:
        """Stored rows a checkpoint covers but the vector file no longer holds (it was truncated): re-embedded now
        (logged once, written back at the next checkpoint), so no search reads past the end of the file."""
        stored = self.catalog.stored_rows()
        missing = stored[stored >= self.vectors.present_rows()].tolist()
        for i in range(0, len(missing), REBUILD_BATCH):
            self.vectors.checked([self.catalog.record(row) for row in missing[i : i + REBUILD_BATCH]], self.embed)

    def _load_checkpoint(self, d: DerivedIndex) -> None:
        """Load one derived index's checkpoint; one that has none is reset, to be rebuilt in bulk after the replay."""
        d.reset()
        self._stamps[d.name] = stamp = d.load(self.folder, self.journal.generation)
        if stamp is None:
            d.reset()
        self.coverage.loaded_checkpoint(d.name, None if stamp is None else int(stamp["offset"]))

    def rebuild_untrusted(self) -> bool:
        """Rebuild the indexes whose checkpoint was missing or contradicted by the replay; True if any was."""
        untrusted = set(self.coverage.untrusted(self._stamps))
        for d in self.derived:
            if d.name in untrusted:
                self._rebuild(d)
        self.rebuilt = bool(untrusted)
        return self.rebuilt

    def _rebuild(self, d: DerivedIndex) -> None:
        """Bulk-rebuild one derived index from the live records and their stored vectors (no re-embedding)."""
        t0 = time.perf_counter()
        d.reset()
        live = self.catalog.live_rows().tolist()
        for i in range(0, len(live), REBUILD_BATCH):
            batch = [self.catalog.record(row) for row in live[i : i + REBUILD_BATCH]]
            d.add(batch, self.vectors.checked(batch, self.embed))
        if live:
            log.info("rebuilt the %s index of %d memories in %.1f s", d.name, len(live), time.perf_counter() - t0)

    # --- what the store asks -------------------------------------------------------------------------------------

    def is_current(self) -> bool:
        """Whether the journal's path still names this generation's journal (no other process compacted since)."""
        return not self.journal.replaced()

    def journal_change(self) -> str | None:
        """One stat of the journal's path: "replaced" (another process compacted: load the new generation),
        "grown" (catch up), or None (nothing new since the last catch-up)."""
        try:
            st = os.stat(self.journal.path)
        except FileNotFoundError:
            return "replaced"
        ident = (st.st_dev, st.st_ino)
        if ident != self.journal.identity:
            return "replaced"
        return None if (ident, st.st_size) == self.coverage.seen else "grown"

    def needs_checkpoint(self, threshold: int) -> bool:
        """Whether `threshold` or more of the records applied are past the checkpoints on disk."""
        return self.coverage.uncovered >= threshold

    def needs_checkpoint_after_open(self, threshold: int) -> bool:
        """needs_checkpoint, or an open that did work a checkpoint saves the next one: vector rows re-embedded, or,
        in a store of `threshold` or more memories, an index rebuilt or a journal replayed without a snapshot.
        A smaller store keeps no checkpoints: rebuilding its indexes on open takes milliseconds, and the checkpoints
        would outweigh its memories (the graph holds every vector again; docs/storage.md "What a store weighs")."""
        live = len(self.catalog)
        return (
            self.needs_checkpoint(threshold)
            or bool(self.vectors.repaired)
            or (live >= threshold and (self.rebuilt or not self.from_snapshot))
        )

    def deleted_pending(self) -> int:
        """Forgotten memories whose rows (tombstones, for as_of) are still in the files: what a compaction would
        remove. Replaced memories are history, kept by compaction too."""
        return len(self.catalog.history.forgotten)

    def vectors_of(self, records: Sequence[AddRecord]) -> np.ndarray:
        """The stored vectors of `records`, each checked against its CRC (a damaged one re-embedded)."""
        return self.vectors.checked(records, self.embed)

    def index_stats(self) -> dict[str, Any]:
        """The derived indexes, for stats(): the vector index's parameters, the keyword index's documents."""
        return {"index": self.vindex.params(), "keyword_index": {"documents": len(self.kindex.index)}}

    def journal_bytes(self) -> int:
        """The journal's length as applied."""
        return self.coverage.offset

    # --- replay --------------------------------------------------------------------------------------------------

    def catch_up(self, repair: bool) -> bool:
        """Apply every good journal line past our offset; returns True if a torn tail is left (not repaired).

        With `repair` (exclusive lock held), a torn tail is set aside and cut off.
        """
        journal, cov = self.journal, self.coverage
        while True:
            result = journal.read(cov.offset)
            if result.entries:
                cov.replayed += len(result.entries)
                t0 = time.perf_counter()
                self.apply(result.entries)
                self.costs.replayed(time.perf_counter() - t0, len(result.entries))
            cov.offset = result.end
            if result.done:
                break
        size = result.size
        torn = size > cov.offset
        if torn and repair:
            journal.set_aside_tail(cov.offset)
            size, torn = cov.offset, False
        # With a torn tail left, the size says nothing: a writer may cut it off and append a line of that length.
        cov.seen = (journal.identity, size) if not torn else ((0, 0), -1)
        return torn

    def apply(self, entries: Sequence[tuple[int, dict[str, Any]]]) -> None:
        """The one replay path: journal records -> the catalog and the vector CRCs, then every derived index."""
        catalog, vectors, cov = self.catalog, self.vectors, self.coverage
        marks, covered_to = cov.marks, cov.covered_to
        pending: list[tuple[int, AddRecord]] = []
        past = 0  # records applied past `covered_to`
        start = cov.offset  # where the next record's line starts
        for end, rec in entries:
            at, start = start, end  # this record's line: bytes [at, end)
            if (broken := broken_rule(rec)) is not None:
                raise CorruptJournalError(
                    f"{self.journal.path}: the record at byte {at} has a good checksum but an impossible field "
                    f"({broken}); nothing was changed. Restore a backup, or correct or cut out that line by hand"
                )
            op = rec.get("op")
            if op == "add":
                r = added(rec)
                if not catalog.add(r):  # a live id or a used row added again: cannot happen; be safe anyway
                    continue
                if "vcrc" in rec:
                    vectors.expect(r.row, int(rec["vcrc"], 16))
                if r.replaces and self._replaces_back(r):
                    raise CorruptJournalError(
                        f"{self.journal.path}: the record at byte {at} makes a cycle of `replaces` ({r.id} "
                        f"replaces {r.replaces}, which already leads back to it); nothing was changed. Restore a "
                        "backup, or cut out that line by hand"
                    )
                if r.replaces:  # the older memory becomes history: the derived indexes drop it
                    old = catalog.supersede(r)
                    if old is not None:
                        self._feed(pending)
                        pending = []
                        self._drop(catalog.record(old), end)
                if not r.replaced_by:  # (a memory that is history from the start is never indexed)
                    pending.append((end, r))
            elif op == "del":
                row = catalog.row_of(rec.get("id", ""))
                if row is None:
                    continue
                self._feed(pending)
                pending = []
                gone = catalog.record(row)
                if catalog.forget(row, str(rec.get("at") or "")):
                    self._drop(gone, end)
            elif op == "vfix":  # a re-embedded vector row was written back (see VectorFile.write_back_repairs)
                vectors.fixed(int(rec["row"]), int(rec["vcrc"], 16))
            else:
                continue
            past += end > covered_to
            if end in marks:
                cov.reached(end, len(catalog))
        cov.uncovered += past
        self._feed(pending)

    def _replaces_back(self, r: AddRecord) -> bool:
        """Whether following `replaces` from `r`'s older memory comes back to `r` (ids are unique, so a journal the
        write path wrote never does)."""
        link, steps = r.replaces, 0
        while link and steps <= len(self.catalog):
            if link == r.id:
                return True
            row = self.catalog.row_of(link)
            if row is None:
                return False
            link, steps = self.catalog.record(row).replaces, steps + 1
        return False

    def _drop(self, gone: AddRecord, end: int) -> None:
        """A memory stopped being current at the record ending at `end`: out of every derived index fed by then."""
        for d in self.derived:
            if end > self.coverage.feeds_from(d.name):
                d.remove([gone])

    def _feed(self, pending: list[tuple[int, AddRecord]]) -> None:
        """Give the derived indexes the added records (with their checked vectors) past each one's checkpoint."""
        if not pending:
            return
        # Each index takes the records past its checkpoint: a suffix of `pending` (journal order), so the vectors
        # are read once, for the longest suffix, and sliced for the others.
        starts = [bisect.bisect_right(pending, self.coverage.feeds_from(d.name), key=_end_offset) for d in self.derived]
        first = min(starts)
        if first == len(pending):
            return
        records = [r for _, r in pending[first:]]
        vecs = self.vectors.checked(records, self.embed)
        for d, start in zip(self.derived, starts, strict=True):
            if start < len(pending):
                d.add(records[start - first :], vecs[start - first :])

    # --- writing (exclusive lock held, caught up) -------------------------------------------------------------------

    def write_adds(self, records: list[AddRecord], vectors: np.ndarray) -> None:
        """Append new memories (their rows from `catalog.next_row` on) in one group commit, and apply them.

        Vectors first (written, not synced: each line's vcrc catches a row lost to power loss, which is then
        re-embedded; see vectors.py), then the journal lines that reference them, synced once.
        """
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        self.vectors.write(records[0].row, vecs)
        self.journal.append([add_line(r, row_crc(v)) for r, v in zip(records, vecs, strict=True)])
        self.catch_up(repair=False)

    def write_deletes(self, memory_ids: Sequence[str]) -> None:
        """Forget memories in one durable write (their tombstones: one del line each, with the time)."""
        at = now()
        self.journal.append([delete_line(memory_id, at) for memory_id in memory_ids])
        self.catch_up(repair=False)

    # --- checkpoints ---------------------------------------------------------------------------------------------

    def save_checkpoint(self, strict: bool = False) -> None:
        """Save every derived index and the metadata snapshot at the journal position applied (exclusive lock
        held). A failure costs replay time on the next open, never data: it is logged, or with `strict` raised."""
        journal, vectors, cov = self.journal, self.vectors, self.coverage
        t0 = time.perf_counter()
        try:
            fixes = vectors.write_back_repairs(lambda row: self.catalog.id_at(row) is not None)
            if fixes:
                journal.append([vfix_line(row, crc) for row, crc in fixes])
                self.catch_up(repair=False)
            vectors.sync()  # rows are written unsynced; those a checkpoint covers must be on disk
            count = len(self.catalog)
            stamp = {"generation": journal.generation, "offset": cov.offset, "count": count}
            for d in self.derived:
                if not cov.is_saved(d.name):  # (else its checkpoint on disk already covers this position)
                    d.save(self.folder, stamp)
                    cov.saved(d.name)
            crc = snapshot.line_crc(journal.path, cov.offset, journal.identity)
            path = snapshot.snapshot_path(self.folder, journal.generation)
            payload = snapshot.encode(self.catalog, vectors.crcs)
            snapshot.save(path, snapshot.stamp_for(journal.generation, cov.offset, count, crc), payload, journal.files)
        except OSError as exc:
            if strict:
                raise
            log.warning(
                "could not write a checkpoint of %s (the next open replays more of the journal): %s", self.folder, exc
            )
            return
        cov.checkpointed()
        self.checkpoint_done(count, time.perf_counter() - t0)

    def checkpoint_done(self, count: int, took: float) -> None:
        """A checkpoint of `count` memories took `took` seconds: timed for the spacing, logged, and hooked."""
        self.costs.saved(took, count)
        log.debug(
            "checkpoint of %d memories in %.3f s (replay %.3f ms/record); the next after %d records",
            *(count, took, 1000 * self.costs.replay_seconds_per_record, self.costs.interval(count)),
        )
        self.hooks.checkpointed(count)

    def close(self) -> None:
        self.vectors.close()
        self.journal.close()


def _end_offset(entry: tuple[int, AddRecord]) -> int:
    return entry[0]
