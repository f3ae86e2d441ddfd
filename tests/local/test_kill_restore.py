"""SIGKILL inside `memserver restore SRC --yes` (the CLI, as a user runs it) replacing a store, at each of its
durable steps (tests/support/kill_points.py): the staging folder made, each file copied, the syncs, the rename of the
whole copy, the old store moved aside, the copy taking the store's name. Whatever the kill left, the next open of the
store finds either the old memories or the backup's, every one of them, never an empty store; the restore run again
puts the backup in place and leaves nothing behind but, after a kill past the switch, the old store kept beside it as
`c.replaced-<time>`."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from memserver.local.store import MemoryStore
from tests.support import kill_points
from tests.support.fakes import FakeEmbedder

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="SIGKILL")]

CLI = "import sys\nfrom memserver.cli import main\nsys.exit(main(sys.argv[1:]))\n"
STEPS = ",".join(
    [
        "memserver.durable:FileLayer.mkdir",
        "memserver.local.backup:write_new_file",
        "memserver.durable:FileLayer.fsync_dir",
        "memserver.durable:FileLayer.replace",
    ]
)


def _restore(data: Path, backup: Path, **kw: object) -> kill_points.Run:
    args = ["restore", str(backup), "--yes", "--data-dir", str(data), "--collection", "c"]
    return kill_points.run(CLI, *args, started=True, **kw)  # type: ignore[arg-type]


def _ids(data: Path) -> set[str]:
    with MemoryStore(data, "c", embedder=FakeEmbedder()) as store:
        return {m["id"] for m in store.export()}


def test_a_restore_killed_at_each_step_leaves_the_old_store_or_the_backup_never_an_empty_one(tmp_path: Path) -> None:
    template = tmp_path / "template"
    with MemoryStore(template / "data", "c", embedder=FakeEmbedder()) as store:
        backed_up = {m.id for m in store.add_many([f"backed up fact {i}" for i in range(30)])}
        backup = Path(store.backup(template / "backups")["path"])
        later = {m.id for m in store.add_many([f"later fact {i}" for i in range(20)])}
    old = backed_up | later
    counted = tmp_path / "counted"
    shutil.copytree(template, counted)
    run = _restore(counted / "data", counted / "backups" / backup.name, label=STEPS, at=None)
    assert run.returncode == 0 and "restored 30 memories" in run.stdout, run.stderr[-2000:]
    assert _ids(counted / "data") == backed_up
    assert run.calls >= 6, run.calls
    outcomes = set()
    for n, when in kill_points.points(run.calls):
        where = f"killed {when} restore step {n} of {run.calls}"
        root = tmp_path / f"{n}-{when}"
        shutil.copytree(template, root)
        killed = _restore(root / "data", root / "backups" / backup.name, label=STEPS, at=n, when=when)
        assert killed.killed, f"{where}: not killed ({killed.returncode}) {killed.stderr[-2000:]}"
        found = _ids(root / "data")
        assert found in (old, backed_up), f"{where}: {len(found)} memories"
        outcomes.add("backup" if found == backed_up else "old")
        again = _restore(root / "data", root / "backups" / backup.name, label=STEPS, at=None)
        assert again.returncode == 0, f"{where}: {again.stderr[-2000:]}"
        assert _ids(root / "data") == backed_up, where
        left = [p for p in os.listdir(root / "data") if p != "c" and not p.startswith("c.replaced-")]
        assert not left, f"{where}: left {left}"  # the replaced store a kill kept beside it is the user's to remove
        shutil.rmtree(root)
    assert outcomes == {"old", "backup"}  # kills on both sides of the switch were reached
