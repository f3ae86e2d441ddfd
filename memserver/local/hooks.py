"""StoreHooks: the points inside the local store that tests and benchmarks may watch or hold, as one seam.

A MemoryStore calls its hooks object (`MemoryStore(..., hooks=...)`) at the moments below, in the thread that
reached them, with whatever lock that moment holds (said for each). The default does nothing. Subclass it and
override what you need, e.g. to count the records a store replays on open, or to hold a compaction at its
switch with a threading.Event while another store writes, instead of sleeping and hoping::

    class AtSwitch(StoreHooks):
        def compaction_switching(self) -> None:
            switching.set()
            proceed.wait(10)

A hook must not call back into the store that called it (the thread lock is reentrant, the file lock is not).
"""

from __future__ import annotations


class StoreHooks:
    """No-op hooks; see the module docstring."""

    def opened(self, replayed: int, from_snapshot: bool) -> None:
        """The store was opened (or reloaded after another process compacted): the metadata came from its
        snapshot (`from_snapshot`) or from the journal, and `replayed` journal records were read past that point
        (all of them without a snapshot). Thread lock held."""

    def planned(self, plan: str, candidates: int | None) -> None:
        """A vector ranking chose `plan`: "exact" (numpy over the stored rows), "hnsw", or "hnsw+exact" (the
        index found fewer than asked under a filter, so the rows were ranked exactly). `candidates`: the rows
        passing the filters (None: no filter). Thread lock held."""

    def taking_exclusive_lock(self) -> None:
        """A write, a checkpoint or a compaction's switch is about to take the exclusive file lock (thread lock
        held). Once it has it, it checks the journal was not replaced meanwhile (by another process's compaction)."""

    def checkpointed(self, count: int) -> None:
        """A checkpoint covering `count` live memories was written. Thread lock and exclusive file lock held."""

    def checkpoint_writing(self) -> None:
        """A write-path checkpoint has copied what it saves and writes its files now, holding no lock: other
        stores, and this one's other threads, read and write meanwhile (checkpoint_job.py)."""

    def compaction_copied(self) -> None:
        """compact() has copied the live memories into the new generation's files; no lock is held, and other
        stores keep writing until the switch."""

    def compaction_switching(self) -> None:
        """compact() holds the exclusive file lock and is about to append the changes since the copy and switch
        journals (thread lock held)."""

    def compaction_switched(self) -> None:
        """compact() has switched journals; the exclusive file lock is released right after (thread lock held)."""
