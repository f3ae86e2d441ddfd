"""SIGKILL inside the keyword re-index after an analyzer change (tests/support/kill_points.py). A keyword checkpoint
names the analyzer that made its terms (keyword.py); an open that finds another's rebuilds the index from the
journal and, in a store that keeps checkpoints, saves it at once. Killed at each step (each batch of the rebuild,
the new checkpoint's data file, its meta's rename, the removal of the old file): the store reopens with a keyword
index that agrees with its contents (never the old analyzer's terms), the rebuild simply runs again until a
checkpoint of the current analyzer is in force, and no file is left that nothing names."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pytest

import memserver.local.keyword as keyword
from memserver.local.replay import AddRecord
from memserver.local.store import MemoryStore
from memserver.retrieval.terms import ANALYZER
from tests.support import kill_points
from tests.support.fakes import FakeEmbedder

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="SIGKILL")]

# The open is the operation: counted from the start. The rebuild adds in batches of 100 here (REBUILD_BATCH is
# 10,000: lowered so that a store of a few hundred memories has several rebuild steps to be killed at).
OPEN = """
import sys
import memserver.local.generation as generation
generation.REBUILD_BATCH = 100
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder
with MemoryStore(sys.argv[1], "c", embedder=FakeEmbedder()) as store:
    print("count", store.stats()["count"], flush=True)
"""
STEPS = ",".join(
    [
        "memserver.local.keyword:KeywordDerivedIndex.add",  # each batch of the rebuild
        "memserver.durable:CheckpointFiles.write",  # the new checkpoint's data file, written and synced
        "memserver.durable:FileLayer.replace",  # keyword.json replaced (and the snapshot's rename)
        "memserver.durable:FileLayer.unlink",  # the old analyzer's data file removed
    ]
)


def _old_analyzer(record: AddRecord) -> str:
    """Terms no query of today's analyzer matches: an index of them trusted would find nothing."""
    return " ".join(f"old{word}" for word in record.content.split())


def _analyzer_in_force(folder: Path) -> str:
    return str(json.loads((folder / "keyword.json").read_text())["analyzer"])


def test_a_keyword_reindex_killed_at_each_step_runs_again_and_agrees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    template = tmp_path / "template"
    with monkeypatch.context() as old:  # the store as an older analyzer left it
        old.setattr(keyword, "ANALYZER", "old-analyzer")
        old.setattr(keyword, "indexed_text", _old_analyzer)
        with MemoryStore(template, "c", embedder=FakeEmbedder()) as store:
            made = store.add_many([f"fact {i} about item{i}" for i in range(450)])  # keeps checkpoints (>= 200)
            for m in made[:10]:
                store.delete(m.id)
            store.checkpoint()
    assert _analyzer_in_force(template / "c") == "old-analyzer"
    present, gone = {m.id for m in made[10:]}, {m.id for m in made[:10]}
    counted = tmp_path / "counted"
    shutil.copytree(template, counted)
    run = kill_points.run(OPEN, str(counted), label=STEPS, at=None, started=True)
    assert run.returncode == 0 and run.lines("count") == ["440"], run.stderr[-2000:]
    assert run.calls >= 7, run.calls  # 5 batches, the data file, the meta, the removal
    assert _analyzer_in_force(counted / "c") == ANALYZER

    def kill(data: Path, at: int, when: str) -> kill_points.Run:
        return kill_points.run(OPEN, str(data), label=STEPS, at=at, when=when, started=True)

    for data, _, where in kill_points.kills(run.calls, tmp_path, "re-index step", kill, template):
        with MemoryStore(data, "c", embedder=FakeEmbedder()) as store:  # rebuilds again if it was not saved
            kill_points.check_store(store, present, gone)
        assert _analyzer_in_force(data / "c") == ANALYZER, where
        assert kill_points.stale_files(data / "c") == [], where
        caplog.clear()
        with caplog.at_level(logging.INFO), MemoryStore(data, "c", embedder=FakeEmbedder()) as store:
            kill_points.check_store(store, present, gone)
        assert "rebuil" not in caplog.text, f"{where}: rebuilt once more: {caplog.text[-500:]}"
