"""SIGKILL inside a write-path checkpoint staged outside the lock (checkpoint_job.py), at each of its steps
(tests/support/kill_points.py): once staged, once its files are written, at each rename and removal of its commit,
and after it. The writes it follows were acknowledged: each is there on reopen, the store's answers agree, the next
checkpoint is taken, and no `checkpoint-*` file or unnamed index file is left."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from memserver.local.store import MemoryStore
from tests.support import kill_points
from tests.support.fakes import FakeEmbedder

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="SIGKILL")]

# 60 single adds, each acknowledged ("A <id>") once it returned; with a checkpoint every 50 records the 50th add's
# call stages one, writes it and commits it before it returns (folder.py), so a kill there follows acknowledged adds.
WRITE = """
import sys
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder
store = MemoryStore(sys.argv[1], "c", embedder=FakeEmbedder())
kill_point.start()
for i in range(60):
    print("A", store.add(f"fact {i} about newitem{i}").id, flush=True)
kill_point.stop()
print("done", flush=True)
store.close()
"""
JOB = "memserver.local.checkpoint_job"
STEPS = ",".join(
    [
        f"{JOB}:StagedCheckpoint.write",  # staged (state copied out), nothing written yet
        f"{JOB}:StagedCheckpoint.obsolete",  # written, the exclusive lock taken, not committed
        "memserver.durable:FileLayer.replace",  # the commit's renames and metas
        "memserver.durable:FileLayer.unlink",  # the commit's removals of older files, the discard
    ]
)


def test_a_write_path_checkpoint_killed_at_each_step_loses_nothing_and_leaves_no_files(tmp_path: Path) -> None:
    template = tmp_path / "template"
    with MemoryStore(template, "c", embedder=FakeEmbedder()) as store:
        made = store.add_many([f"fact {i} about item{i}" for i in range(220)])  # keeps checkpoints (>= 200)
        for m in made[:10]:
            store.delete(m.id)
        store.checkpoint()
    present, gone = {m.id for m in made[10:]}, {m.id for m in made[:10]}
    env = {"MEMSERVER_CHECKPOINT_EVERY": "50"}
    counted = tmp_path / "counted"
    shutil.copytree(template, counted)
    run = kill_points.run(WRITE, str(counted), label=STEPS, at=None, env=env)
    assert run.returncode == 0 and run.lines("done") == [""], run.stderr[-2000:]
    assert run.calls >= 5, "no write-path checkpoint was staged"

    def kill(folder: Path, at: int, when: str) -> kill_points.Run:
        return kill_points.run(WRITE, str(folder), label=STEPS, at=at, when=when, env=env)

    for folder, killed, where in kill_points.kills(run.calls, tmp_path, "checkpoint step", kill, template):
        acknowledged = set(killed.lines("A "))
        assert len(acknowledged) >= 49, where  # the kill came within the 50th add's checkpoint, or later
        with MemoryStore(folder, "c", embedder=FakeEmbedder()) as store:
            kill_points.check_store(store, present | acknowledged, gone)
            assert kill_points.stale_files(folder / "c") == [], where  # the open removed what the kill left
            store.checkpoint()  # the checkpoint runs again
        assert kill_points.stale_files(folder / "c") == [], where
        with MemoryStore(folder, "c", embedder=FakeEmbedder()) as store:
            kill_points.check_store(store, present | acknowledged, gone)
