"""The vector index: recall against brute force, k clamped, growth, deletes, checkpoint validation."""

from __future__ import annotations

import errno
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import memserver.local.folder
import memserver.local.store
from memserver.local.index import META_NAME, VectorIndex, graph_file_chunks
from memserver.local.journal import JOURNAL_NAME, Journal
from memserver.local.replay import AddRecord
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder
from tests.support.file_layers import FailingFiles, RecordingFiles, SimulatedCrash

FIXTURE = Path(__file__).parent.parent / "data" / "checkpoints-bc911d9"

DIM = 32


def _vectors(n: int, seed: int = 0) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def _records(rows: range) -> list[AddRecord]:
    return [AddRecord(f"{r:032x}", "", "", (), "", r) for r in rows]


def _filled(n: int) -> tuple[VectorIndex, np.ndarray]:
    index = VectorIndex(DIM)
    vecs = _vectors(n)
    index.add(_records(range(n)), vecs)
    return index, vecs


def test_recall_at_10_against_brute_force() -> None:
    """HNSW top-10 matches exact top-10 on at least 99% of the results."""
    index, vecs = _filled(3000)
    queries = _vectors(100, seed=1)
    exact = np.argsort(-(queries @ vecs.T), axis=1)[:, :10]
    found = sum(
        len(set(index.search(q, 10)[0].tolist()) & set(e.tolist())) for q, e in zip(queries, exact, strict=False)
    )
    assert found / exact.size >= 0.99


def test_scores_are_cosine_similarity() -> None:
    """The score of a stored vector queried by itself is 1, and scores equal dot products of unit vectors."""
    index, vecs = _filled(50)
    rows, scores = index.search(vecs[7], 5)
    assert rows[0] == 7 and scores[0] == pytest.approx(1.0, abs=1e-5)
    assert np.allclose(scores, vecs[rows] @ vecs[7], atol=1e-5)


def test_k_is_clamped_and_the_index_grows() -> None:
    """k above the live count returns everything; adding past the capacity resizes instead of failing."""
    index, _ = _filled(3)
    assert len(index.search(_vectors(1)[0], 50)[0]) == 3
    more = _vectors(3000, seed=2)
    index.add(_records(range(3, 3003)), more)
    assert index.live_count == 3003 and index.max_elements >= 3003


def test_deleted_rows_never_come_back() -> None:
    """A removed row is absent from results, even when k asks for everything, and the count drops."""
    index, vecs = _filled(20)
    index.remove(_records(range(0, 20, 2)))
    index.remove(_records(range(0, 4, 2)))  # removing twice is harmless
    assert index.live_count == 10
    rows, _ = index.search(vecs[0], 20)
    assert sorted(rows.tolist()) == list(range(1, 20, 2))


def test_save_load_round_trip_keeps_deletions(tmp_path: Path) -> None:
    """A checkpoint loads back with the same results and the same deletions."""
    index, vecs = _filled(500)
    index.remove(_records(range(10)))
    index.save(tmp_path, {"generation": "g", "offset": 123, "count": 490})
    loaded = VectorIndex(DIM)
    stamp = loaded.load(tmp_path, "g")
    assert stamp is not None and stamp["offset"] == 123
    assert loaded.live_count == 490
    assert loaded.search(vecs[3], 5)[0].tolist() == index.search(vecs[3], 5)[0].tolist()
    assert 3 not in loaded.search(vecs[3], 50)[0].tolist()
    assert VectorIndex(DIM).load(tmp_path, "another-generation") is None


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "meta", "meta-not-an-object", "missing"])
def test_damaged_checkpoints_are_refused_not_loaded(tmp_path: Path, damage: str) -> None:
    """Truncated, flipped, garbage or missing graph files (and a bad meta) are refused before hnswlib sees them."""
    index, _ = _filled(200)
    index.save(tmp_path, {"generation": "g", "offset": 1, "count": 200})
    graph = next(tmp_path.glob("index-*.hnsw"))
    data = graph.read_bytes()
    if damage == "truncate":
        graph.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        graph.write_bytes(data[:100] + bytes([data[100] ^ 0xFF]) + data[101:])
    elif damage == "garbage":
        graph.write_bytes(b"\xff" * len(data))
    elif damage == "meta":
        (tmp_path / META_NAME).write_text("{not json")
    elif damage == "meta-not-an-object":
        (tmp_path / META_NAME).write_text("[1, 2]")
    else:
        graph.unlink()
    assert VectorIndex(DIM).load(tmp_path, "g") is None


@pytest.mark.parametrize("n", [0, 1, 2, 300, 3000])
def test_the_graph_file_written_from_a_copy_is_the_one_hnswlib_writes(tmp_path: Path, n: int) -> None:
    """checkpoint_job.py writes the graph from `copy_graph`'s state, without hnswlib and after the index changed:
    byte for byte the file hnswlib's save_index writes of the graph copied (deleted rows, a grown graph)."""
    index = VectorIndex(DIM)
    if n:
        index.add(_records(range(n)), _vectors(n))
        index.remove(_records(range(0, n, 7)))
    state = index.copy_graph()
    assert state is not None
    meta = index.write_graph(tmp_path, {"generation": "g", "offset": 0, "count": n - len(range(0, n, 7))})
    index.add(_records(range(n, n + 50)), _vectors(50, seed=1))  # the index changes after the copy
    copied = b"".join(bytes(chunk) for chunk in graph_file_chunks(state))
    assert copied == (tmp_path / meta["file"]).read_bytes()


def test_checkpoint_built_with_another_ef_construction_is_used(tmp_path: Path) -> None:
    """ef_construction only shapes how a graph is built: a checkpoint built with another value loads as it is."""
    index = VectorIndex(DIM, ef_construction=200)
    vecs = _vectors(300, seed=3)
    index.add(_records(range(300)), vecs)
    index.save(tmp_path, {"generation": "g", "offset": 1, "count": 300})
    loaded = VectorIndex(DIM, ef_construction=64)
    assert loaded.load(tmp_path, "g") is not None and loaded.ef_construction == 200
    assert loaded.search(vecs[7], 1)[0].tolist() == [7]
    loaded.reset()
    assert loaded.ef_construction == 64


def test_an_empty_index_round_trips(tmp_path: Path) -> None:
    """A graph of no elements (e.g. compacting a store whose memories were all deleted) saves and loads."""
    VectorIndex(DIM).save(tmp_path, {"generation": "g", "offset": 1, "count": 0})
    loaded = VectorIndex(DIM)
    assert loaded.load(tmp_path, "g") is not None and loaded.live_count == 0
    assert len(loaded.search(_vectors(1)[0], 5)[0]) == 0


def test_a_checkpoint_written_by_the_previous_code_loads(tmp_path: Path) -> None:
    """index.json + index-*.hnsw as written at commit bc911d9 (tests/data/checkpoints-bc911d9) load, and search
    the same."""
    folder = shutil.copytree(FIXTURE, tmp_path / "c")
    expected = json.loads((folder / "expected.json").read_text())
    vectors = np.load(folder / "vectors.npy")
    index = VectorIndex(expected["dim"], M=8, ef_construction=32, ef=32)
    stamp = index.load(folder, "fixture-generation")
    assert stamp is not None and stamp["offset"] == 4321 and index.live_count == stamp["count"]
    for row, rows in expected["vector"].items():
        assert index.search(vectors[int(row)], 5)[0].tolist() == rows
    assert not set(expected["gone_rows"]) & set(index.search(vectors[3], 80)[0].tolist())


def test_a_short_graph_file_is_refused_before_the_meta_names_it(tmp_path: Path) -> None:
    """hnswlib reports no write error (a full disk leaves its file short): the file is checked and removed, the
    save raises OSError(EIO), and the old checkpoint stays in force."""

    class ShortNativeWrite(RecordingFiles):
        def fsync(self, fd: int) -> None:  # runs right after hnswlib wrote the file: cut it as a full disk would
            if self.names[fd].endswith(".hnsw.tmp"):
                path = next(tmp_path.glob("*.hnsw.tmp"))
                path.write_bytes(path.read_bytes()[:-5000])
            super().fsync(fd)

    old, _ = _filled(100)
    old.save(tmp_path, {"generation": "g", "offset": 1, "count": 100})
    new = VectorIndex(DIM, files=ShortNativeWrite())
    new.add(_records(range(300)), _vectors(300))
    with pytest.raises(OSError, match="unusable graph file") as raised:
        new.save(tmp_path, {"generation": "g", "offset": 2, "count": 300})
    assert raised.value.errno == errno.EIO
    assert len(list(tmp_path.glob("index-*"))) == 1
    loaded = VectorIndex(DIM)
    stamp = loaded.load(tmp_path, "g")
    assert stamp is not None and stamp["offset"] == 1 and loaded.live_count == 100


def test_a_crash_between_graph_and_meta_keeps_a_usable_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A checkpoint that dies after writing its graph, before index.json names it: the store opens on the old
    checkpoint plus the journal tail, and its next checkpoint removes the orphaned graph."""
    embedder = FakeEmbedder()
    with MemoryStore(tmp_path, "test", embedder=embedder) as s:  # closing checkpoints these 299
        first = s.add_many([f"fact {i} about item{i}" for i in range(300)])
        s.delete(first[0].id)
    monkeypatch.setattr(memserver.local.folder, "CHECKPOINT_RECORDS", 10**9)  # so that closing leaves a journal tail
    with MemoryStore(tmp_path, "test", embedder=embedder) as s:
        s.add_many([f"more {i}" for i in range(300)])
    monkeypatch.undo()
    folder = tmp_path / "test"
    journal = Journal(folder / JOURNAL_NAME)
    generation = journal.generation
    journal.close()
    crashing = VectorIndex(
        embedder.dim, files=FailingFiles(lambda op, name: op == "replace" and name.endswith(META_NAME), None)
    )
    assert crashing.load(folder, generation) is not None
    crashing.add(_records(range(300, 600)), embedder.embed([f"more {i}" for i in range(300)]))
    with pytest.raises(SimulatedCrash):
        crashing.save(folder, {"generation": generation, "offset": 1, "count": 599})
    assert len(list(folder.glob("index-*.hnsw"))) == 2  # the new graph exists, unreferenced
    with MemoryStore(tmp_path, "test", embedder=embedder) as s:
        assert s.stats()["count"] == 299 + 300
        assert s.search("more 42", limit=1)[0].memory.content == "more 42"
    assert len(list(folder.glob("index-*.hnsw"))) == 1
