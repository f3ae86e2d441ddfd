"""durable.py: the order of syncs and renames, failures that leave the old state in force, file modes.

Every test drives the real file system through a recording or failing FileLayer (tests/support/file_layers.py), the seam
the writing classes take as `files`; nothing is monkeypatched.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from memserver.durable import (
    FILE_MODE,
    CheckpointError,
    CheckpointFiles,
    atomic_write,
    make_dirs,
    pwrite_all,
)
from memserver.local import snapshot
from memserver.local.index import META_NAME, VectorIndex
from memserver.local.journal import FileLock, Journal
from memserver.local.keyword import KEYWORD_META, KeywordDerivedIndex
from memserver.local.replay import AddRecord
from tests.support.file_layers import FailingFiles, RecordingFiles, ShortWrites, SimulatedCrash, recorded_name

DIM = 16
OLD = {"generation": "g", "offset": 1, "count": 40}
NEW = {"generation": "g", "offset": 2, "count": 80}


def _records(rows: range) -> list[AddRecord]:
    return [
        AddRecord(f"{r:032x}", f"note {r} about invoice {r % 7}", "2025-03-14T10:00:00+00:00", (), "", r) for r in rows
    ]


def _vectors(n: int) -> np.ndarray:
    v = np.random.default_rng(n).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


# --- atomic replacement ----------------------------------------------------------------------------------------


def test_atomic_write_syncs_the_temp_file_before_the_rename_and_the_folder_after(tmp_path: Path) -> None:
    """Temp file created, written, synced and closed; renamed over the target; then the folder synced."""
    files = RecordingFiles()
    atomic_write(tmp_path / "state.json", b"new ", b"content", files=files)
    tmp = "state.json.tmp-*"
    assert files.calls == [
        ("create", tmp),
        ("write", tmp),
        ("write", tmp),
        ("fsync", tmp),
        ("close", tmp),
        ("replace", f"{tmp} -> state.json"),
        ("fsync_dir", recorded_name(tmp_path)),
    ]
    assert (tmp_path / "state.json").read_bytes() == b"new content"


@pytest.mark.parametrize(
    ("op", "error"), [("write", errno.ENOSPC), ("fsync", errno.EIO), ("replace", errno.EIO), ("replace", None)]
)
def test_a_failed_atomic_write_leaves_the_old_file_and_no_temp_file(tmp_path: Path, op: str, error: int | None) -> None:
    """A full disk, an I/O error or a crash before the rename: the old content stays, the error propagates."""
    target = tmp_path / "state.json"
    atomic_write(target, b"old")
    files = FailingFiles(lambda o, name: o == op, error)
    with pytest.raises(OSError if error else SimulatedCrash) as raised:
        atomic_write(target, b"new content that does not fit", files=files)
    if error:
        assert isinstance(raised.value, OSError) and raised.value.errno == error
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


# --- checkpoints: the order of operations --------------------------------------------------------------------------


def _keyword(rows: range) -> KeywordDerivedIndex:
    index = KeywordDerivedIndex()
    index.add(_records(rows), _vectors(len(rows)))
    return index


def _vector(rows: range) -> VectorIndex:
    index = VectorIndex(DIM)
    index.add(_records(rows), _vectors(len(rows)))
    return index


def _assert_checkpoint_order(files: RecordingFiles, folder: Path, data: str, meta: str, old: str) -> None:
    """Data synced before the folder is; the folder synced before the meta names the data; old data removed last."""
    data_synced = files.index("fsync", data)
    meta_renamed = files.index("replace", f"{meta}.tmp-* -> {meta}")
    dir_syncs = [i for i, call in enumerate(files.calls) if call == ("fsync_dir", recorded_name(folder))]
    assert files.index("fsync", f"{meta}.tmp-*") < meta_renamed
    assert any(data_synced < i < meta_renamed for i in dir_syncs), "the data file's name must be durable first"
    assert any(i > meta_renamed for i in dir_syncs), "the new meta must be made durable"
    assert files.index("unlink", old) > meta_renamed
    assert dir_syncs[-1] > files.index("unlink", old)


def test_keyword_checkpoint_commit_order(tmp_path: Path) -> None:
    """keyword-<nonce>.npz written and synced, the folder synced, keyword.json replaced, the old .npz removed."""
    _keyword(range(40)).save(tmp_path, OLD)
    files = RecordingFiles()
    index = _keyword(range(80))
    index.files = files
    index.save(tmp_path, NEW)
    assert files.calls[:3] == [("create", "keyword-*.npz"), ("write", "keyword-*.npz"), ("fsync", "keyword-*.npz")]
    _assert_checkpoint_order(files, tmp_path, "keyword-*.npz", KEYWORD_META, "keyword-*.npz")
    assert len(list(tmp_path.glob("keyword-*.npz"))) == 1


def test_vector_checkpoint_commit_order(tmp_path: Path) -> None:
    """hnswlib's file (written natively into .tmp) is synced and renamed, the folder synced, then index.json."""
    _vector(range(40)).save(tmp_path, OLD)
    files = RecordingFiles()
    index = VectorIndex(DIM, files=files)
    index.add(_records(range(80)), _vectors(80))
    index.save(tmp_path, NEW)
    tmp = "index-*.hnsw.tmp"
    assert files.calls[:6] == [
        ("create", tmp),  # created by us (so with FILE_MODE); hnswlib truncates it and writes the graph
        ("close", tmp),
        ("open", tmp),
        ("fsync", tmp),
        ("close", tmp),
        ("replace", f"{tmp} -> index-*.hnsw"),
    ]
    _assert_checkpoint_order(files, tmp_path, tmp, META_NAME, "index-*.hnsw")
    assert files.index("replace", f"{tmp} -> index-*.hnsw") < files.index("fsync_dir", recorded_name(tmp_path))
    assert len(list(tmp_path.glob("index-*.hnsw*"))) == 1


# --- checkpoints: failures -----------------------------------------------------------------------------------------

Rule = Callable[[str, str], bool]
KEYWORD_FAULTS: dict[str, tuple[Rule, int | None]] = {
    "data write ENOSPC": (lambda op, name: op == "write" and name.endswith(".npz"), errno.ENOSPC),
    "data fsync EIO": (lambda op, name: op == "fsync" and name.endswith(".npz"), errno.EIO),
    "folder sync EIO": (lambda op, name: op == "fsync_dir", errno.EIO),
    "meta write ENOSPC": (lambda op, name: op == "write" and name.startswith(KEYWORD_META), errno.ENOSPC),
    "meta fsync EIO": (lambda op, name: op == "fsync" and name.startswith(KEYWORD_META), errno.EIO),
    "crash at the meta rename": (lambda op, name: op == "replace", None),
}
VECTOR_FAULTS: dict[str, tuple[Rule, int | None]] = {
    "data fsync EIO": (lambda op, name: op == "fsync" and ".hnsw" in name, errno.EIO),
    "data rename EIO": (lambda op, name: op == "replace" and ".hnsw" in name, errno.EIO),
    "folder sync EIO": (lambda op, name: op == "fsync_dir", errno.EIO),
    "meta write ENOSPC": (lambda op, name: op == "write" and name.startswith(META_NAME), errno.ENOSPC),
    "meta fsync EIO": (lambda op, name: op == "fsync" and name.startswith(META_NAME), errno.EIO),
    "crash at the meta rename": (lambda op, name: op == "replace" and name.endswith(META_NAME), None),
}


def _no_temp_files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".tmp" in p.name)


@pytest.mark.parametrize("fault", list(KEYWORD_FAULTS))
def test_a_failed_keyword_checkpoint_keeps_the_old_one_in_force(tmp_path: Path, fault: str) -> None:
    """Whatever write, sync or rename fails, the error propagates with its errno and the old checkpoint loads."""
    old = _keyword(range(40))
    old.save(tmp_path, OLD)
    rule, error = KEYWORD_FAULTS[fault]
    new = _keyword(range(80))
    new.files = FailingFiles(rule, error)
    with pytest.raises(OSError if error else SimulatedCrash) as raised:
        new.save(tmp_path, NEW)
    if error:
        assert isinstance(raised.value, OSError) and raised.value.errno == error
    assert _no_temp_files(tmp_path) == []
    loaded = KeywordDerivedIndex()
    stamp = loaded.load(tmp_path, "g")
    assert stamp is not None and stamp["offset"] == OLD["offset"]
    assert loaded.search("invoice note", 100) == old.search("invoice note", 100)
    assert len(loaded.index) == 40


@pytest.mark.parametrize("fault", list(VECTOR_FAULTS))
def test_a_failed_vector_checkpoint_keeps_the_old_one_in_force(tmp_path: Path, fault: str) -> None:
    """Whatever write, sync or rename fails, the error propagates with its errno and the old checkpoint loads."""
    old = _vector(range(40))
    old.save(tmp_path, OLD)
    rule, error = VECTOR_FAULTS[fault]
    new = VectorIndex(DIM, files=FailingFiles(rule, error))
    new.add(_records(range(80)), _vectors(80))
    with pytest.raises(OSError if error else SimulatedCrash) as raised:
        new.save(tmp_path, NEW)
    if error:
        assert isinstance(raised.value, OSError) and raised.value.errno == error
    assert _no_temp_files(tmp_path) == []
    loaded = VectorIndex(DIM)
    stamp = loaded.load(tmp_path, "g")
    assert stamp is not None and stamp["offset"] == OLD["offset"] and loaded.live_count == 40


def test_checkpoint_files_refuse_names_outside_their_kind(tmp_path: Path) -> None:
    """A meta naming a path elsewhere, another kind's file or a non-string is refused before any read."""
    files = CheckpointFiles(tmp_path, "x.json", "x", "bin")
    for name in ("../x-1.bin", "x-1.bin/..", "y-1.bin", "x-1.txt", 7, None):
        with pytest.raises(CheckpointError):
            files.path_of({"file": name})
    assert files.path_of({"file": "x-1.bin"}) == tmp_path / "x-1.bin"
    (tmp_path / "x.json").write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="not a JSON object"):
        files.read_meta()


# --- modes and folders ---------------------------------------------------------------------------------------------


def test_every_file_is_created_with_FILE_MODE(tmp_path: Path) -> None:
    """Journal, lock, torn-tail copy, snapshot and both checkpoints (hnswlib's graph included) use one mode."""
    files = RecordingFiles()
    journal_path = tmp_path / "journal.jsonl"
    Journal.create(journal_path, {"generation": "g"}, files=files)
    journal = Journal(journal_path, files=files)
    end = journal.append([{"op": "add", "id": "a"}])
    with open(journal_path, "ab") as f:
        f.write(b'{"torn')
    journal.set_aside_tail(end)
    journal.close()
    FileLock(tmp_path / "lock", files=files).close()
    snapshot.save(tmp_path / "meta-g.snap", {"generation": "g"}, b"payload", files=files)
    keyword = _keyword(range(10))
    keyword.files = files
    keyword.save(tmp_path, OLD)
    vector = VectorIndex(DIM, files=files)
    vector.add(_records(range(10)), _vectors(10))
    vector.save(tmp_path, OLD)
    assert set(files.modes.values()) == {FILE_MODE}
    assert len(files.modes) >= 8
    on_disk = {p.name: stat.S_IMODE(p.stat().st_mode) for p in tmp_path.iterdir()}
    assert set(on_disk.values()) == {FILE_MODE & ~_umask()}, on_disk


def test_make_dirs_makes_each_new_folder_durable_in_its_parent(tmp_path: Path) -> None:
    """Each missing folder is created, then its parent synced, top down; existing ones are left alone."""
    files = RecordingFiles()
    make_dirs(tmp_path / "a" / "b", files=files)
    assert files.calls == [("mkdir", "a"), ("fsync_dir", recorded_name(tmp_path)), ("mkdir", "b"), ("fsync_dir", "a")]
    make_dirs(tmp_path / "a" / "b", files=files)
    assert len(files.calls) == 4 and (tmp_path / "a" / "b").is_dir()


# --- the snapshot codec --------------------------------------------------------------------------------------------


def test_snapshot_round_trip_and_damage(tmp_path: Path) -> None:
    """A snapshot reads back its stamp and payload; a flipped payload byte or a cut file reads as None."""
    path = tmp_path / "meta-g.snap"
    snapshot.save(path, {"generation": "g", "offset": 9}, b"\x00payload\xff")
    got = snapshot.read_file(path)
    assert got is not None and got[0]["offset"] == 9 and bytes(got[1]) == b"\x00payload\xff"
    data = path.read_bytes()
    path.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    assert snapshot.read_file(path) is None
    path.write_bytes(data[:-3])
    assert snapshot.read_file(path) is None
    assert snapshot.read_file(tmp_path / "absent.snap") is None


def test_pwrite_all_completes_short_pwrites_at_their_offsets(tmp_path: Path) -> None:
    """A pwrite may write fewer bytes than given; pwrite_all goes on from where it stopped, at the right offset."""
    files = ShortWrites()
    path = tmp_path / "rows.f32"
    path.write_bytes(b"." * 4)
    fd = files.open(path, os.O_RDWR)
    try:
        pwrite_all(fd, b"0123456789", 2, files)
    finally:
        files.close(fd)
    assert path.read_bytes() == b"..0123456789"
    assert files.calls.count(("pwrite", "rows.f32")) == 5  # 5, 2, 1, 1 and 1 of the 10 bytes
