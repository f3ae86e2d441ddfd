"""SIGKILL inside a compaction, at each of its durable steps (tests/support/kill_points.py): every rename
of the copy, the switch and the reopen after it, and for a store too small to keep checkpoints every
removal of the old generation's. Each time the store reopens with every acknowledged memory and none forgotten,
its answers agree, the compaction runs again, and no file is left that nothing names."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from memserver.local.store import MemoryStore
from tests.support import kill_points
from tests.support.fakes import FakeEmbedder

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="SIGKILL")]

COMPACT = """
import sys
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder
store = MemoryStore(sys.argv[1], "c", embedder=FakeEmbedder())
kill_point.start()
print("compacted", store.compact()["count"], flush=True)
kill_point.stop()
store.close()
"""
# The durable steps killed at (before each, and after the last), per store: one count over all their calls. A
# SIGKILL leaves the page cache to the kernel, so killing before a sync is killing after the step before it: the
# renames and removals are the steps that change what the folder holds, the file syncs end the copy's writes.
STEPS = {
    "checkpointed": ("replace",),  # the switch after the copy, the reopen's checkpoint
    "small": ("replace", "unlink"),  # drop_checkpoints: the old generation's checkpoints removed
}
SIZES = {"checkpointed": 220, "small": 40}  # folder.CHECKPOINT_RECORDS is 200


def _template(root: Path, size: int) -> tuple[set[str], set[str]]:
    """A store holding `size` memories, 10 of them forgotten (what the compaction purges), checkpointed."""
    with MemoryStore(root, "c", embedder=FakeEmbedder()) as store:
        made = store.add_many([f"fact {i} about item{i}" for i in range(size)])
        for m in made[:10]:
            store.delete(m.id)
        store.checkpoint()
    return {m.id for m in made[10:]}, {m.id for m in made[:10]}


@pytest.mark.parametrize("kind", list(STEPS))
def test_a_compaction_killed_at_each_durable_step_loses_nothing_and_runs_again(tmp_path: Path, kind: str) -> None:
    template = tmp_path / "template"
    present, gone = _template(template, SIZES[kind])
    label = ",".join(f"memserver.durable:FileLayer.{step}" for step in STEPS[kind])
    counted = tmp_path / "counted"
    shutil.copytree(template, counted)
    run = kill_points.run(COMPACT, str(counted), label=label, at=None)
    assert run.returncode == 0 and run.lines("compacted") == [str(len(present))], run.stderr[-2000:]
    assert run.calls >= 3

    def kill(folder: Path, at: int, when: str) -> kill_points.Run:
        return kill_points.run(COMPACT, str(folder), label=label, at=at, when=when)

    for folder, _, where in kill_points.kills(run.calls, tmp_path, f"durable step ({kind} store)", kill, template):
        with MemoryStore(folder, "c", embedder=FakeEmbedder()) as store:
            kill_points.check_store(store, present, gone)
            assert kill_points.stale_files(folder / "c") == [], where  # the open removed what the kill left
            assert store.compact()["count"] == len(present), where
            kill_points.check_store(store, present, gone)
        assert kill_points.stale_files(folder / "c") == [], where
