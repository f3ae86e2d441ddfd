"""The write path's checkpoint spacing: a pure function of the measured costs, its bounds, and the running estimates."""

from __future__ import annotations

from pathlib import Path

import pytest

from memserver.errors import ConfigError
from memserver.local.checkpoints import (
    FLOOR_RECORDS,
    MAX_REPLAY_SECONDS,
    TAIL_PER_CHECKPOINT,
    CheckpointCosts,
    fixed_interval_from_env,
    write_interval,
)
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder, RecordingHooks


def test_the_interval_balances_a_checkpoints_cost_against_the_tails_replay() -> None:
    """A 4 s checkpoint and 1 ms per replayed record: the tail may cost TAIL_PER_CHECKPOINT checkpoints."""
    assert write_interval(4.0, 1e-3, max_replay_seconds=1e9) == int(TAIL_PER_CHECKPOINT * 4.0 / 1e-3)


def test_a_costlier_checkpoint_spaces_them_further_apart() -> None:
    intervals = [write_interval(s, 1e-3) for s in (0.5, 1.0, 2.0)]
    assert intervals == sorted(intervals) and intervals[0] < intervals[-1]


def test_a_small_store_keeps_the_floor() -> None:
    """A cheap checkpoint never makes them more frequent than FLOOR_RECORDS (the spacing before)."""
    assert write_interval(0.01, 1e-3) == FLOOR_RECORDS
    assert write_interval(0.0, 1e-3) == FLOOR_RECORDS
    assert write_interval(1.0, 0.0) == FLOOR_RECORDS


def test_the_tail_replay_after_a_crash_is_bounded() -> None:
    """However costly a checkpoint, the tail never grows past MAX_REPLAY_SECONDS of estimated replay."""
    assert write_interval(1e6, 1e-3) == int(MAX_REPLAY_SECONDS / 1e-3)
    assert write_interval(1e6, 1e-3) * 1e-3 <= MAX_REPLAY_SECONDS


def test_the_floor_wins_over_the_replay_bound_on_a_slow_machine() -> None:
    """10 ms per record: the 30 s bound would allow 3,000 records, below the floor; the floor holds."""
    assert write_interval(1e6, 1e-2) == FLOOR_RECORDS


def test_the_estimates_follow_what_the_store_measures() -> None:
    """A store's own timings replace the priors; the interval grows with the store's size."""
    costs = CheckpointCosts()
    for _ in range(30):
        costs.saved(4.0, 1_000_000)  # 4 us per memory
        costs.replayed(2.0, 2000)  # 1 ms per record
    assert costs.save_seconds_per_memory == pytest.approx(4e-6, rel=1e-3)
    assert costs.replay_seconds_per_record == pytest.approx(1e-3, rel=1e-3)
    assert costs.interval(1_000_000) == write_interval(4.0, 1e-3)
    assert costs.interval(100_000) < costs.interval(1_000_000)


def test_one_write_moves_the_replay_estimate_only_a_little() -> None:
    costs = CheckpointCosts()
    before = costs.replay_seconds_per_record
    costs.replayed(1.0, 1)  # one write stalled by something else for a second
    assert costs.replay_seconds_per_record < before + 1.0 / 1000


def test_meaningless_timings_are_ignored() -> None:
    costs = CheckpointCosts()
    before = (costs.save_seconds_per_memory, costs.replay_seconds_per_record)
    costs.saved(1.0, 0)
    costs.saved(0.0, 10)
    costs.replayed(0.0, 10)
    costs.replayed(1.0, 0)
    assert (costs.save_seconds_per_memory, costs.replay_seconds_per_record) == before


def test_a_fixed_interval_overrides_the_estimates(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMSERVER_CHECKPOINT_EVERY", "200")
    costs = CheckpointCosts(fixed_interval_from_env())
    costs.saved(100.0, 10)
    assert costs.interval(1_000_000) == 200
    monkeypatch.delenv("MEMSERVER_CHECKPOINT_EVERY")
    assert fixed_interval_from_env() is None


@pytest.mark.parametrize("value", ["0", "-5", "many", "1.5"])
def test_a_bad_override_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, value: str) -> None:
    monkeypatch.setenv("MEMSERVER_CHECKPOINT_EVERY", value)
    with pytest.raises(ConfigError, match="MEMSERVER_CHECKPOINT_EVERY"):
        fixed_interval_from_env()


def test_the_write_path_never_checkpoints_sooner_than_the_floor(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Unset, a small store's writes (cheap checkpoints) are not checkpointed before FLOOR_RECORDS are uncovered."""
    monkeypatch.delenv("MEMSERVER_CHECKPOINT_EVERY", raising=False)
    hooks = RecordingHooks()
    with MemoryStore(tmp_path, "spacing", embedder=FakeEmbedder(), hooks=hooks) as s:
        s.add_many([f"early fact {i} about item{i}" for i in range(FLOOR_RECORDS - 100)])
        for i in range(50):
            s.add(f"single fact {i} about thing{i}")
        assert hooks.checkpoints == []
    assert hooks.checkpoints == [FLOOR_RECORDS - 50]  # close checkpoints the tail
