"""Private by default: the store's folders are 0700 and its files 0600 whatever the umask; old stores are tightened.

(issue 13, item 5.) The modes live in memserver.durable (FILE_MODE, DIR_MODE); make_private tightens a folder made
before them, with one log line.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memserver.durable import DIR_MODE, FILE_MODE, FileLayer, StrPath, make_dirs, make_private
from memserver.local import snapshot
from memserver.local.index import VectorIndex
from memserver.local.journal import FileLock, Journal
from memserver.local.keyword import KeywordDerivedIndex
from memserver.local.replay import AddRecord

pytestmark = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


@pytest.fixture(params=[0o022, 0o000, 0o077, 0o277], ids=lambda m: f"umask {m:03o}")
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(old)


def _modes(folder: Path) -> dict[str, int]:
    return {str(p.relative_to(folder)): stat.S_IMODE(p.stat().st_mode) for p in [folder, *folder.rglob("*")]}


def _write_everything(folder: Path) -> None:
    """Each kind of file the store writes: journal (and its torn-tail copy), lock, snapshot, both checkpoints."""
    Journal.create(folder / "journal.jsonl", {"generation": "g"})
    journal = Journal(folder / "journal.jsonl")
    end = journal.append([{"op": "add", "id": "a"}])
    with open(folder / "journal.jsonl", "ab") as f:
        f.write(b'{"torn')
    journal.set_aside_tail(end)
    journal.close()
    FileLock(folder / "lock").close()
    snapshot.save(folder / "meta-g.snap", {"generation": "g"}, b"payload")
    records = [AddRecord(f"{r:032x}", f"note {r}", "2025-03-14T10:00:00+00:00", (), "", r) for r in range(5)]
    vectors = np.eye(5, 8, dtype=np.float32)
    keyword = KeywordDerivedIndex()
    keyword.add(records, vectors)
    keyword.save(folder, {"generation": "g", "offset": end, "count": 5})
    vector = VectorIndex(8)
    vector.add(records, vectors)
    vector.save(folder, {"generation": "g", "offset": end, "count": 5})


def test_new_folders_and_files_are_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    """Under umask 022 (the usual), 000, 077 and 277 (which would take the owner's write bit too): 0700 and 0600."""
    folder = tmp_path / "data" / "users" / "alice" / "notes"
    make_dirs(folder)
    _write_everything(folder)
    modes = _modes(tmp_path / "data")
    assert {name for name in modes if ".torn-" in name and "/" in name}, "the torn-tail copy was written"
    assert {m for name, m in modes.items() if (tmp_path / "data" / name).is_dir()} == {DIR_MODE}, modes
    assert {m for name, m in modes.items() if (tmp_path / "data" / name).is_file()} == {FILE_MODE}, modes


def _old_store(folder: Path) -> None:
    """A store as memserver made it before issue 13: a 0755 folder of 0644 files."""
    folder.mkdir(parents=True)
    _write_everything(folder)
    folder.chmod(0o755)
    for p in folder.iterdir():
        p.chmod(0o644)


def test_an_old_store_is_tightened_with_one_log_line(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Group and other bits are removed from the folder and every file; one INFO line names the folder."""
    folder = tmp_path / "old"
    _old_store(folder)
    (folder / "readonly-by-choice").write_text("x")
    (folder / "readonly-by-choice").chmod(0o444)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="memserver.durable"):
        make_private(folder)
    lines = [r for r in caplog.records if r.name == "memserver.durable"]
    assert len(lines) == 1 and str(folder) in lines[0].getMessage(), [r.getMessage() for r in lines]
    modes = _modes(folder)
    assert modes.pop(".") == 0o700
    assert modes.pop("readonly-by-choice") == 0o400  # tightened, never widened
    assert set(modes.values()) == {0o600}, modes
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="memserver.durable"):
        make_private(folder)
    assert not [r for r in caplog.records if r.name == "memserver.durable"], "nothing left to change: no log line"


class _ChmodRefused(FileLayer):
    """chmod fails as it does on a file of another account (EPERM) or on a read-only file system (EROFS)."""

    def __init__(self, error: int, only: str = "") -> None:
        self.error = error
        self.only = only

    def chmod(self, path: StrPath, mode: int) -> None:
        if not self.only or Path(path).name.startswith(self.only):
            raise OSError(self.error, os.strerror(self.error), str(path))
        super().chmod(path, mode)


@pytest.mark.parametrize("error", [errno.EPERM, errno.EROFS], ids=["another account's file", "read-only fs"])
def test_a_chmod_that_fails_is_logged_once_and_the_rest_is_tightened(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, error: int
) -> None:
    """make_private never raises for a chmod it cannot do: one warning names the folder and the files."""
    folder = tmp_path / "old"
    _old_store(folder)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="memserver.durable"):
        make_private(folder, files=_ChmodRefused(error, only="keyword"))
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING and r.name == "memserver.durable"]
    assert len(warnings) == 1, [r.getMessage() for r in caplog.records]
    message = warnings[0].getMessage()
    assert str(folder) in message and "keyword" in message and os.strerror(error) in message
    modes = _modes(folder)
    assert all(m == 0o644 for name, m in modes.items() if name.startswith("keyword")), modes
    assert modes["journal.jsonl"] == 0o600 and modes["."] == 0o700


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to own files as another user")
def test_files_of_another_account_are_left_and_named() -> None:
    """A real other-account file: run make_private as `nobody` in a child; it warns, tightens the rest, and exits 0."""
    import tempfile

    with tempfile.TemporaryDirectory() as top:  # (pytest's tmp_path sits in a folder `nobody` cannot enter)
        Path(top).chmod(0o755)
        _run_as_nobody(Path(top) / "old")


def _run_as_nobody(folder: Path) -> None:
    import subprocess
    import sys

    _old_store(folder)
    nobody = 65534
    os.chown(folder, nobody, nobody)
    for p in folder.iterdir():
        if not p.name.startswith("keyword"):
            os.chown(p, nobody, nobody)  # the keyword files stay root's: `nobody` cannot chmod them
    script = (
        "import logging, os, sys; from pathlib import Path; from memserver.durable import make_private\n"
        "logging.basicConfig(level=logging.INFO, format='%(levelname)s %(message)s')\n"
        f"os.setgid({nobody}); os.setuid({nobody}); make_private(Path(sys.argv[1]))\n"
    )
    run = subprocess.run(
        [sys.executable, "-c", script, str(folder)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    lines = run.stderr.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("INFO made ") and lines[1].startswith("WARNING could not"), lines
    assert "keyword" in lines[1] and "Operation not permitted" in lines[1]
    modes = _modes(folder)
    assert modes["journal.jsonl"] == 0o600 and modes["."] == 0o700
    assert all(m == 0o644 for name, m in modes.items() if name.startswith("keyword"))


# --- the whole store -------------------------------------------------------------------------------------------


def test_a_new_store_is_private_whatever_the_umask(tmp_path: Path, umask: int) -> None:
    """Every folder memserver makes (the data directory too) is 0700 and every file 0600, through a checkpoint
    and a compaction."""
    from memserver.local.store import MemoryStore
    from tests.support.fakes import FakeEmbedder

    with MemoryStore(tmp_path / "data" / "users" / "alice", "c", embedder=FakeEmbedder()) as store:
        # 250: past CHECKPOINT_RECORDS, so that the compaction writes checkpoints of its own too
        for m in store.add_many([f"private fact {i}" for i in range(250)])[:5]:
            store.delete(m.id)
        store.checkpoint()
        store.compact()
    modes = _modes(tmp_path / "data")
    dirs = {name: m for name, m in modes.items() if (tmp_path / "data" / name).is_dir()}
    regular = {name: m for name, m in modes.items() if (tmp_path / "data" / name).is_file()}
    assert len(dirs) == 4 and set(dirs.values()) == {0o700}, dirs
    assert len(regular) >= 6 and set(regular.values()) == {0o600}, regular


def test_an_old_store_is_tightened_on_open(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A store written with 0755/0644 (before issue 13) opens as before and is private afterwards: one log line."""
    from memserver.local.store import MemoryStore
    from tests.support.fakes import FakeEmbedder

    with MemoryStore(tmp_path, "c", embedder=FakeEmbedder()) as store:
        kept = store.add("written by an older memserver")
        store.checkpoint()
    folder = tmp_path / "c"
    folder.chmod(0o755)
    for p in folder.iterdir():
        p.chmod(0o644)
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="memserver"), MemoryStore(tmp_path, "c", embedder=FakeEmbedder()) as s:
        assert s.get(kept.id) is not None
    lines = [r.getMessage() for r in caplog.records if "private" in r.getMessage()]
    assert len(lines) == 1 and str(folder) in lines[0], [r.getMessage() for r in caplog.records]
    modes = _modes(folder)
    assert modes.pop(".") == 0o700 and set(modes.values()) == {0o600}, modes
