"""The pruned BM25 top-k (maxscore.py behind KeywordIndex.search) against the exhaustive scorer it replaces.

Exact means the same keys, the same scores to the last bit and the same order, ties included, on random data:
Zipf vocabularies, duplicate texts (ties), adds one by one and in batches (the delta, merges, slot renumbering),
removes and re-adds, filters (candidate arrays with unknown, removed and out-of-range keys), any k, a checkpoint
round trip, and BM25 parameters other than the defaults.
"""

from __future__ import annotations

import random
from collections.abc import Iterator

import numpy as np
import pytest

from memserver.retrieval import bm25
from memserver.retrieval.bm25 import KeywordIndex


@pytest.fixture(autouse=True)
def prune_everywhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prune however few postings a query has (the default leaves small queries to the exhaustive scorer)."""
    monkeypatch.setattr(bm25, "PRUNE_MIN_POSTINGS", 0)
    monkeypatch.setattr(bm25, "PRUNE_MAX_K_SHARE", 1)


def random_text(rng: random.Random, words: list[str], weights: list[float]) -> str:
    return " ".join(rng.choices(words, weights, k=rng.randint(1, rng.choice([3, 8, 20]))))


def random_index(seed: int, **params: float) -> tuple[KeywordIndex, dict[int, str], random.Random]:
    """An index built by a random mix of single adds, batches, removes and re-adds; and its live texts."""
    rng = random.Random(seed)
    vocabulary = rng.choice([6, 40, 300])
    words = [f"w{i}" for i in range(vocabulary)]
    skew = rng.choice([0.0, 0.8, 1.2])
    weights = [1.0 / (i + 1) ** skew for i in range(vocabulary)]
    index = KeywordIndex(**params)
    live: dict[int, str] = {}
    keys = rng.choice([200, 1500, 4000])
    for _ in range(rng.choice([300, 2000])):
        roll = rng.random()
        if roll < 0.02:  # a batch: a merge when large, the delta when small
            size = rng.choice([20, 100, 700])
            batch = {rng.randrange(keys): random_text(rng, words, weights) for _ in range(size)}
            index.add_many(batch.items())
            live.update(batch)
        elif roll < 0.25 and live:
            key = rng.choice(list(live))
            assert index.remove(key)
            del live[key]
        else:
            key = rng.randrange(keys)
            live[key] = (
                rng.choice(list(live.values())) if live and rng.random() < 0.2 else random_text(rng, words, weights)
            )
            index.add(key, live[key])
    return index, live, rng


def random_queries(
    rng: random.Random, index: KeywordIndex, live: dict[int, str]
) -> Iterator[tuple[str, int, np.ndarray | None]]:
    """(query, k, candidates): 2-7 words (repeats, unknown words), k from 1 to past the matches, filters or none."""
    words = sorted({w for text in live.values() for w in text.split()}) or ["w0"]
    for _ in range(25):
        query = " ".join(rng.choice(words) for _ in range(rng.randint(2, 7)))
        if rng.random() < 0.2:
            query += " nosuchword"
        k = rng.choice([1, 2, 5, 10, 20, 50, 5000])
        candidates = None
        if rng.random() < 0.35:
            pool = list(live) + [rng.randrange(-5, 10_000) for _ in range(20)]
            candidates = np.asarray(rng.sample(pool, rng.randint(0, len(pool))), np.int64)
        yield query, k, candidates


@pytest.mark.parametrize("seed", range(60))
def test_pruned_search_equals_the_exhaustive_scorer(seed: int) -> None:
    """Same keys, scores (bit for bit) and order, ties at the k-th place included, for every query and filter."""
    index, live, rng = random_index(seed)
    assert len(index) == len(live)
    for query, k, candidates in random_queries(rng, index, live):
        assert index.search(query, k, candidates) == index.search_exhaustive(query, k, candidates), (query, k)


@pytest.mark.parametrize(("seed", "pruned"), [(seed, pruned) for seed in range(12) for pruned in (True, False)])
def test_search_arrays_are_the_search_as_two_arrays(seed: int, pruned: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """search_arrays (what the hybrid ranking reads) gives the exhaustive scorer's keys and scores, bit for bit and
    in its order, as int64 and float64 arrays, on the pruned path and on the exhaustive one."""
    if not pruned:
        monkeypatch.setattr(bm25, "PRUNE_MIN_POSTINGS", 1 << 62)
    index, live, rng = random_index(200 + seed)
    for query, k, candidates in random_queries(rng, index, live):
        keys, scores = index.search_arrays(query, k, candidates)
        assert keys.dtype == np.int64 and scores.dtype == np.float64
        expected = index.search_exhaustive(query, k, candidates)
        assert list(zip(keys.tolist(), scores.tolist(), strict=True)) == expected, (query, k)


@pytest.mark.parametrize("seed", range(8))
def test_equal_after_a_checkpoint_round_trip(seed: int) -> None:
    """A loaded checkpoint (all postings merged, dead slots kept) prunes exactly as well."""
    index, live, rng = random_index(100 + seed)
    loaded = KeywordIndex()
    loaded.load_state(index.state())
    for query, k, candidates in random_queries(rng, loaded, live):
        expected = index.search_exhaustive(query, k, candidates)
        assert loaded.search(query, k, candidates) == loaded.search_exhaustive(query, k, candidates) == expected


@pytest.mark.parametrize(("k1", "b"), [(0.0, 0.0), (0.5, 1.0), (2.0, 0.3), (1.2, 0.75), (1.5, 1.6), (-0.5, 0.75)])
def test_any_bm25_parameters(k1: float, b: float) -> None:
    """The bounds follow k1 and b (outside 0 <= b <= 1 or k1 < 0 they would not hold: every posting is scored)."""
    index, live, rng = random_index(7, k1=k1, b=b)
    assert index.prunable == (k1 >= 0 and 0 <= b <= 1)
    for query, k, candidates in random_queries(rng, index, live):
        assert index.search(query, k, candidates) == index.search_exhaustive(query, k, candidates)


def test_ties_at_the_cut_keep_insertion_order() -> None:
    """Equal scores rank by insertion order also at the k-th place, so a top k is the start of every larger one."""
    index = KeywordIndex()
    index.add_many((key, "invoice paid" if key % 3 else "invoice paid paid") for key in range(300, 0, -1))
    full = index.search_exhaustive("invoice paid", 300)
    for k in (1, 7, 50, 101, 299):
        assert index.search("invoice paid", k) == index.search_exhaustive("invoice paid", k) == full[:k]
    assert [key for key, _ in full[:3]] == [300, 297, 294]  # the strongest (tf 2), first inserted first


def test_prunes_postings_on_a_skewed_corpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """A rare word and two common ones: the pruned search weighs a fraction of the postings the exhaustive one does."""
    rng = random.Random(5)
    index = KeywordIndex()
    index.add_many(
        (key, " ".join(["common", "frequent", *rng.choices(["filler", "other", "rare"], [10, 10, 0.1], k=5)]))
        for key in range(20_000)
    )
    weighed = []
    real = bm25.bm25_weights

    def counting(idf: float, tfs: bm25.Floats, *args: float | bm25.Floats) -> bm25.Floats:
        weighed.append(len(tfs))
        return real(idf, tfs, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(bm25, "bm25_weights", counting)
    expected = index.search_exhaustive("rare common frequent", 10)
    exhaustive = sum(weighed)
    weighed.clear()
    assert index.search("rare common frequent", 10) == expected
    assert sum(weighed) * 4 < exhaustive
