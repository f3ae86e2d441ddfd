"""SIGKILL inside `memserver backup DEST --keep 1` (the CLI, as a user runs it) at each of its durable steps
(tests/support/kill_points.py): the `.partial-*` folder made, each file copied into it, the manifest, its syncs, the
rename into place, and the rotation of the older backup (renamed to `.removing-*`, then removed). Whatever the kill
left, every backup visible under its own name restores whole, the store is untouched, and the next backup removes
the folders the killed one left (never one a running backup holds) and restores every memory."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

import pytest

from memserver.engines import restore_backup
from memserver.errors import InvalidInputError
from memserver.local.store import MemoryStore
from tests.support import kill_points
from tests.support.fakes import FakeEmbedder

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="SIGKILL, flock")]

CLI = "import sys\nfrom memserver.cli import main\nsys.exit(main(sys.argv[1:]))\n"
STEPS = ",".join(
    [
        "memserver.durable:FileLayer.mkdir",  # the .partial-* folder
        "memserver.local.backup:write_new_file",  # each file copied, then the manifest
        "memserver.durable:FileLayer.fsync_dir",  # the partial folder synced, DEST synced (after each rename)
        "memserver.durable:FileLayer.replace",  # the rename into place, the older backup's to .removing-*
    ]
)


def _backup(data: Path, dest: Path, **kw: object) -> kill_points.Run:
    args = ["backup", str(dest), "--keep", "1", "--data-dir", str(data), "--collection", "c"]
    return kill_points.run(CLI, *args, started=True, **kw)  # type: ignore[arg-type]


def _visible(dest: Path) -> list[Path]:
    return sorted(p for p in dest.iterdir() if not p.name.startswith("."))


def _restored_ids(backup: Path, into: Path) -> set[str]:
    """Restore `backup` into the empty data directory `into` (refused if it is not whole); the ids it holds."""
    restore_backup(backup, into, None, replace=lambda target: False)
    with MemoryStore(into, "c", embedder=FakeEmbedder()) as store:
        return {m["id"] for m in store.export()}


def _contents(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_a_backup_killed_at_each_step_shows_no_half_backup_and_the_next_one_cleans_up(tmp_path: Path) -> None:
    template = tmp_path / "template"
    data, dest = template / "data", template / "dest"
    with MemoryStore(data, "c", embedder=FakeEmbedder()) as store:
        made = store.add_many([f"fact {i} about item{i}" for i in range(250)])  # keeps checkpoints (>= 200)
        older = {m.id for m in made}
        store.backup(dest)  # the older backup, which --keep 1 rotates out
        made += store.add_many([f"fact {i} about newitem{i}" for i in range(50)])
        for m in made[:10]:
            store.delete(m.id)
        store.checkpoint()
    present, gone = {m.id for m in made[10:]}, {m.id for m in made[:10]}
    with MemoryStore(data, "c", embedder=FakeEmbedder()) as store:
        kill_points.check_store(store, present, gone)
    store_files = _contents(data / "c")  # what every backup, killed or not, leaves byte for byte as it was
    counted = tmp_path / "counted"
    shutil.copytree(template, counted)
    run = _backup(counted / "data", counted / "dest", label=STEPS, at=None)
    assert run.returncode == 0 and "backed up 290 memories" in run.stdout, run.stderr[-2000:]
    assert run.calls >= 10, run.calls

    def kill(root: Path, at: int, when: str) -> kill_points.Run:
        return _backup(root / "data", root / "dest", label=STEPS, at=at, when=when)

    for root, _, where in kill_points.kills(run.calls, tmp_path, "backup step", kill, template):
        visible = _visible(root / "dest")
        assert visible, f"{where}: no backup left at all"
        for i, path in enumerate(visible):  # each whole (else the restore refuses it): the older one, or the new one
            restored = restore_backup(path, root / f"check-{i}", None, replace=lambda target: False)
            assert restored["memories"] in (len(older), len(present)), f"{where}: {path.name}"
        assert _contents(root / "data" / "c") == store_files, f"{where}: the store changed"
        again = _backup(root / "data", root / "dest", label=STEPS, at=None)
        assert again.returncode == 0, f"{where}: {again.stderr[-2000:]}"
        assert len(os.listdir(root / "dest")) == 1, f"{where}: left {sorted(os.listdir(root / 'dest'))}"
        (newest,) = _visible(root / "dest")
        restore_backup(newest, root / "restored", None, replace=lambda target: False)
        with MemoryStore(root / "restored", "c", embedder=FakeEmbedder()) as store:
            kill_points.check_store(store, present, gone)
            assert store.stats()["count"] == len(present)


def test_the_next_backup_removes_only_the_folders_no_process_holds(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    dead = [dest / ".partial-c-20260101T000000.000000Z", dest / ".removing-c-20251231T000000.000000Z"]
    running = dest / ".partial-c-20260102T000000.000000Z"
    for folder in [*dead, running]:
        folder.mkdir(parents=True)
        (folder / "journal.jsonl").write_text("half\n")
    held = os.open(running, os.O_RDONLY | os.O_DIRECTORY)  # as a backup still writing holds its folder
    try:
        fcntl.flock(held, fcntl.LOCK_EX)
        with MemoryStore(tmp_path / "data", "c", embedder=FakeEmbedder()) as store:
            one = store.add("one memory")
            made = store.backup(dest)
        assert sorted(os.listdir(dest)) == sorted([running.name, Path(made["path"]).name])
        assert (running / "journal.jsonl").read_text() == "half\n"
    finally:
        os.close(held)
    assert _restored_ids(Path(made["path"]), tmp_path / "restored") == {one.id}


def test_a_restore_never_takes_a_backup_killed_before_its_rename(tmp_path: Path) -> None:
    dest = tmp_path / "dest"
    with MemoryStore(tmp_path / "data", "c", embedder=FakeEmbedder()) as store:
        store.add("one memory")
        made = Path(store.backup(dest)["path"])
    made.rename(dest / f".partial-{made.name}")  # whole, manifest and all, as a kill just before the rename leaves it
    with pytest.raises(InvalidInputError, match="no memserver backup there"):
        restore_backup(dest, tmp_path / "restored", None, replace=lambda target: False)
