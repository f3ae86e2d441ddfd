"""When the write path checkpoints: spaced by what a checkpoint costs against what replaying the tail costs.

A checkpoint rewrites every derived index in full (hnswlib #36): its cost grows with the store (1M memories:
~1.7 GB of graph), and it stalls the write that triggers it. Not checkpointing costs replay time on the next
open: each journal record past the checkpoint is applied again (mostly an HNSW insert, ~1 ms at 1M). A fixed
spacing (today's 5,000 records) makes a large store stall ever longer, as often as a small one. So the interval
balances the two:

    interval = TAIL_PER_CHECKPOINT x (seconds to save a checkpoint) / (seconds to replay one record)

i.e. the checkpoint stalls cost each write, amortised, 1/TAIL_PER_CHECKPOINT of its own replay cost, and the tail
an open after a crash replays costs at most TAIL_PER_CHECKPOINT checkpoints' time. Two bounds: never below
FLOOR_RECORDS (today's spacing: a small store checkpoints as before), and never a tail whose replay would take
more than MAX_REPLAY_SECONDS (an open after a crash stays bounded), unless that is below the floor.

Both costs are measured by the store as it runs (`CheckpointCosts`: running estimates from its own checkpoints
and its own replay path, which applies this process's writes too), starting from priors measured on a 2-core
machine; MEMSERVER_CHECKPOINT_EVERY=<records> fixes the spacing instead.
"""

from __future__ import annotations

import os

from memserver.errors import ConfigError

FLOOR_RECORDS = 5000  # the spacing before this module: a checkpoint never comes sooner than this
TAIL_PER_CHECKPOINT = 10.0  # the journal tail may cost this many checkpoints' time to replay
MAX_REPLAY_SECONDS = 30.0  # ... and never more than this (estimated) on an open after a crash
# Priors, until the store has timed its own (benchmarks/checkpoint_spacing.py at 100k on a shared 2-core machine,
# 1 Dec 2026: 11 us per memory, 1.0 ms per record):
PRIOR_SAVE_SECONDS_PER_MEMORY = 1e-5  # a checkpoint's seconds per live memory (graph, keyword index, snapshot)
PRIOR_REPLAY_SECONDS_PER_RECORD = 1e-3  # applying one add record (catalog, HNSW insert, BM25)
SMOOTHING = 0.3  # weight of a new checkpoint's timing in the running estimate
REPLAY_WINDOW = 2000  # records: the replay estimate follows roughly the last this many


def write_interval(
    save_seconds: float,
    replay_seconds_per_record: float,
    *,
    floor: int = FLOOR_RECORDS,
    tail_per_checkpoint: float = TAIL_PER_CHECKPOINT,
    max_replay_seconds: float = MAX_REPLAY_SECONDS,
) -> int:
    """Records the journal tail may grow to before the write path checkpoints (see the module docstring)."""
    if replay_seconds_per_record <= 0 or save_seconds <= 0:
        return floor
    balanced = tail_per_checkpoint * save_seconds / replay_seconds_per_record
    bounded = min(balanced, max_replay_seconds / replay_seconds_per_record)
    return max(floor, int(bounded))


def fixed_interval_from_env() -> int | None:
    """MEMSERVER_CHECKPOINT_EVERY as a fixed number of records between write-path checkpoints; None when unset."""
    value = os.environ.get("MEMSERVER_CHECKPOINT_EVERY", "").strip()
    if not value:
        return None
    try:
        records = int(value)
    except ValueError:
        records = 0
    if records < 1:
        raise ConfigError(f"MEMSERVER_CHECKPOINT_EVERY must be a whole number of records >= 1, got {value!r}")
    return records


class CheckpointCosts:
    """Running estimates of a checkpoint's cost per live memory and a replayed record's cost, and the interval
    they give (or the fixed one, if set). One per open store; it outlives compactions' reloads."""

    def __init__(self, fixed: int | None = None) -> None:
        self.fixed = fixed
        self.save_seconds_per_memory = PRIOR_SAVE_SECONDS_PER_MEMORY
        self.replay_seconds_per_record = PRIOR_REPLAY_SECONDS_PER_RECORD

    def saved(self, seconds: float, live: int) -> None:
        """A checkpoint of `live` memories took `seconds`."""
        if live > 0 and seconds > 0:
            sample = seconds / live
            self.save_seconds_per_memory += SMOOTHING * (sample - self.save_seconds_per_memory)

    def replayed(self, seconds: float, records: int) -> None:
        """The replay path applied `records` journal records in `seconds` (weighted by the records)."""
        if records > 0 and seconds > 0:
            weight = min(1.0, records / REPLAY_WINDOW)
            self.replay_seconds_per_record += weight * (seconds / records - self.replay_seconds_per_record)

    def interval(self, live: int) -> int:
        """Records past the checkpoint at which the write path takes the next one, for a store of `live`."""
        if self.fixed is not None:
            return self.fixed
        return write_interval(self.save_seconds_per_memory * live, self.replay_seconds_per_record)
