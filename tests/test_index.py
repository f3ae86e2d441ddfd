"""The vector index: recall against brute force, k clamped, growth, deletes, checkpoint validation."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memserver.index import META_NAME, VectorIndex
from memserver.journal import AddRecord

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


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage", "meta", "missing"])
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
    else:
        graph.unlink()
    assert VectorIndex(DIM).load(tmp_path, "g") is None


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
