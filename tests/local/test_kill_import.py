"""SIGKILL inside `memserver import` of 5,000 records (5 batches of writes.IMPORT_BATCH = 1,000; the issue's 100k,
killed once in the middle: benchmarks/kill_import.py, figures in benchmarks/README.md) at each batch and each rename
of its checkpoints (tests/support/kill_points.py).
The store reopens holding whole batches only, the first ones of the file, agreeing in every answer; the same
import run again adds the rest (known ids skipped), and no file is left that nothing names."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from memserver.local.store import MemoryStore
from memserver.local.writes import IMPORT_BATCH
from tests.support import kill_points
from tests.support.fakes import FakeEmbedder

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="SIGKILL")]

RECORDS = 5 * IMPORT_BATCH
CLI = "import sys\nfrom memserver.cli import main\nsys.exit(main(sys.argv[1:]))\n"
STEPS = ",".join(
    [
        "memserver.local.writes:import_batch",  # before each batch (and after the last)
        "memserver.durable:FileLayer.replace",  # the checkpoints the import takes on its way and at its end
    ]
)


def _export(tmp_path: Path) -> tuple[Path, list[str]]:
    """A JSON-lines export of RECORDS memories (with their vectors: the bulk-load path), and their ids in order."""
    with MemoryStore(tmp_path / "source", "c", embedder=FakeEmbedder()) as store:
        store.add_many([f"fact {i} about item{i}" for i in range(RECORDS)])
        records = list(store.export(include_vectors=True))
    path = tmp_path / "export.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path, [r["id"] for r in records]


def _import(data: Path, export: Path, **kw: object) -> kill_points.Run:
    args = ["import", str(export), "--data-dir", str(data), "--collection", "c"]
    return kill_points.run(CLI, *args, started=True, **kw)  # type: ignore[arg-type]


def test_an_import_killed_at_each_batch_keeps_whole_batches_and_runs_again(tmp_path: Path) -> None:
    export, ids = _export(tmp_path)
    run = _import(tmp_path / "counted", export, label=STEPS, at=None)
    assert run.returncode == 0 and f"imported {RECORDS} new memories" in run.stderr, run.stderr[-2000:]

    def kill(data: Path, at: int, when: str) -> kill_points.Run:
        return _import(data, export, label=STEPS, at=at, when=when)

    for data, _, where in kill_points.kills(run.calls, tmp_path, "import step", kill):
        if (data / "c" / "journal.jsonl").exists():
            with MemoryStore(data, "c", embedder=FakeEmbedder()) as store:
                count = store.stats()["count"]
                assert count % IMPORT_BATCH == 0, f"{where}: a batch half there ({count} memories)"
                kill_points.check_store(store, set(ids[:count]), set(ids[count:]))
                assert kill_points.stale_files(data / "c") == [], where
        again = _import(data, export, label=STEPS, at=None)
        assert again.returncode == 0, f"{where}: {again.stderr[-2000:]}"
        with MemoryStore(data, "c", embedder=FakeEmbedder()) as store:
            kill_points.check_store(store, set(ids), set())
            assert store.stats()["count"] == RECORDS
        assert kill_points.stale_files(data / "c") == [], where
