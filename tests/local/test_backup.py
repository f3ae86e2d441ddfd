"""Backups of a local store (memserver/local/backup.py through MemoryStore.backup and engines.restore_backup):
taken under four writer processes, a backup holds every write acknowledged before it started and opens cleanly;
`keep` rotates; a restore refuses a place that holds a store unless told to replace it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from memserver.engines import restore_backup
from memserver.errors import InvalidInputError
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(os.name != "posix", reason="flock")
def test_a_backup_under_four_writers_holds_every_acknowledged_write_and_opens(tmp_path: Path) -> None:
    """benchmarks/backup_writers.py --quick: 4 writer processes, 20 acknowledged writes each before the backup."""
    out = tmp_path / "bw.json"
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.backup_writers", "--quick", "--out", str(out), "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["acknowledged_before"] >= 4 * 20 and result["missing"] == 0
    assert result["restored_count"] == result["memories_in_backup"] >= result["acknowledged_before"]
    assert result["writes_total"] >= result["memories_in_backup"]


def test_keep_rotates_and_a_restore_brings_back_the_store_as_it_was(tmp_path: Path) -> None:
    with MemoryStore(tmp_path / "data", "notes", embedder=FakeEmbedder()) as store:
        first = store.add("the first memory", tags=["a"])
        paths = []
        for n in range(3):
            paths.append(store.backup(tmp_path / "backups", keep=2)["path"])
            store.add(f"memory added after backup {n}")
        forgotten = store.add("forgotten later")
        store.delete(forgotten.id)
    left = sorted(p.name for p in (tmp_path / "backups").iterdir())
    assert left == sorted(Path(p).name for p in paths[1:])  # the oldest rotated out
    with pytest.raises(InvalidInputError, match="holds a store; not replaced"):
        restore_backup(paths[1], tmp_path / "data", None, replace=lambda target: False)
    result = restore_backup(tmp_path / "backups", tmp_path / "data", None, replace=lambda target: True)
    assert result["backup"] == paths[2] and result["target"] == str(tmp_path / "data" / "notes")
    with MemoryStore(tmp_path / "data", "notes", embedder=FakeEmbedder()) as store:
        assert store.stats()["count"] == 3  # as at the newest backup: before the third add
        assert store.get(first.id) == first and store.get(forgotten.id) is None
        assert [h.memory.id for h in store.search("first memory", limit=1)] == [first.id]
    fresh = restore_backup(paths[1], tmp_path / "elsewhere", "copy", replace=lambda target: False)
    with MemoryStore(tmp_path / "elsewhere", "copy", embedder=FakeEmbedder()) as store:
        assert fresh["collection"] == "notes" and store.stats()["count"] == 2


def test_what_is_not_a_backup_is_refused(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with pytest.raises(InvalidInputError, match="no memserver backup there"):
        restore_backup(tmp_path / "empty", tmp_path / "data", None, replace=lambda target: True)
    with MemoryStore(tmp_path / "data", "notes", embedder=FakeEmbedder()) as store:
        store.add("one")
        path = Path(store.backup(tmp_path / "backups")["path"])
        with pytest.raises(InvalidInputError, match="keep must be at least 1"):
            store.backup(tmp_path / "backups", keep=0)
    (path / "journal.jsonl").write_bytes(b"cut")
    with pytest.raises(InvalidInputError, match=r"journal\.jsonl is missing or not the size"):
        restore_backup(path, tmp_path / "other", None, replace=lambda target: True)


def test_rotation_leaves_other_collections_backups_alone(tmp_path: Path) -> None:
    dest = tmp_path / "backups"
    with MemoryStore(tmp_path / "data", "notes-old", embedder=FakeEmbedder()) as other:
        other.add("another collection")
        kept = other.backup(dest)["path"]
    with MemoryStore(tmp_path / "data", "notes", embedder=FakeEmbedder()) as store:
        store.add("one")
        store.backup(dest, keep=1)
        newest = store.backup(dest, keep=1)["path"]
    assert sorted(p.name for p in dest.iterdir()) == sorted([Path(kept).name, Path(newest).name])
