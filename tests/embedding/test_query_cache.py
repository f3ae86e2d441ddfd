"""The query-embedding cache: hits skip the model, the bound holds, LRU order, copies, threads, configuration."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from memserver.embedding.embedder import Embedder
from memserver.embedding.query_cache import DEFAULT_ENTRIES, MAX_KEY_CHARS, QueryCache, entries_from_env
from memserver.errors import ConfigError


def _vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)


def test_a_repeated_query_is_answered_without_the_model(real_embedder):
    """The second embed_query of a text returns the identical vector and runs no model."""
    embedder = Embedder(real_embedder.files.directory, threads=1, query_cache=8)
    first = embedder.embed_query("where did I park the car?")
    runs = embedder.model_runs
    assert runs == 1
    again = embedder.embed_query("where did I park the car?")
    assert embedder.model_runs == runs
    np.testing.assert_array_equal(again, first)
    assert again.dtype == np.float32 and again.shape == (384,)
    assert (embedder.query_cache.hits, embedder.query_cache.misses) == (1, 1)
    embedder.embed_query("a different question")
    assert embedder.model_runs == runs + 1


def test_a_caller_cannot_change_what_the_next_caller_gets(real_embedder):
    """Vectors handed out are copies: writing into one leaves the cached vector as it was."""
    embedder = Embedder(real_embedder.files.directory, threads=1, query_cache=8)
    first = embedder.embed_query("tea or coffee")
    expected = first.copy()
    first[:] = 0.0
    second = embedder.embed_query("tea or coffee")
    np.testing.assert_array_equal(second, expected)
    second[:] = 1.0
    np.testing.assert_array_equal(embedder.embed_query("tea or coffee"), expected)


def test_zero_entries_disables_the_cache(real_embedder):
    """With query_cache=0 every embed_query runs the model and nothing is kept."""
    embedder = Embedder(real_embedder.files.directory, threads=1, query_cache=0)
    for _ in range(3):
        embedder.embed_query("the same text")
    assert embedder.model_runs == 3 and len(embedder.query_cache) == 0


def test_batch_embedding_does_not_fill_the_query_cache(real_embedder):
    """embed() (ingest) never touches the query cache; only embed_query does."""
    embedder = Embedder(real_embedder.files.directory, threads=1, query_cache=8)
    embedder.embed(["one memory", "another memory"])
    assert len(embedder.query_cache) == 0
    embedder.embed_query("one memory")
    assert embedder.model_runs == 2


def test_the_entry_bound_holds_and_the_least_recently_used_goes_first():
    """At most max_entries; a lookup refreshes an entry; the least recently used one is evicted."""
    cache = QueryCache(3)
    for i, text in enumerate(["a", "b", "c"]):
        cache.put(text, _vector(i))
    assert cache.get("a") is not None  # a is now the most recent: b is the oldest
    cache.put("d", _vector(3))
    assert cache.keys() == ["c", "a", "d"] and len(cache) == 3
    cache.put("c", _vector(4))  # re-inserting refreshes too
    cache.put("e", _vector(5))
    assert cache.keys() == ["d", "c", "e"]
    np.testing.assert_array_equal(cache.get("c"), _vector(4))
    assert cache.get("a") is None and cache.get("b") is None


def test_texts_longer_than_the_key_limit_are_not_cached():
    """The memory bound: no key longer than MAX_KEY_CHARS is ever stored."""
    cache = QueryCache(4)
    cache.put("x" * (MAX_KEY_CHARS + 1), _vector(0))
    cache.put("y" * MAX_KEY_CHARS, _vector(1))
    assert cache.keys() == ["y" * MAX_KEY_CHARS]


def test_keys_are_exact_texts():
    """No normalisation: texts differing in case or spacing are different entries (they may tokenise alike, but
    the cache does not guess)."""
    cache = QueryCache(4)
    cache.put("Tea time", _vector(0))
    assert cache.get("tea time") is None and cache.get("Tea  time") is None
    assert cache.get("Tea time") is not None


def test_concurrent_lookups_and_inserts_keep_the_bound_and_the_values():
    """Many threads putting and getting overlapping keys: the bound holds and every hit is the right vector."""
    cache = QueryCache(16)
    vectors = {f"q{i}": _vector(i) for i in range(64)}
    wrong: list[str] = []
    start = threading.Barrier(8)

    def worker(seed: int) -> None:
        rng = np.random.default_rng(seed)
        start.wait()
        for _ in range(2000):
            key = f"q{int(rng.integers(64))}"
            got = cache.get(key)
            if got is None:
                cache.put(key, vectors[key])
            elif not np.array_equal(got, vectors[key]):
                wrong.append(key)
            assert len(cache) <= 16

    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(worker, range(8)))
    assert not wrong
    assert len(cache) <= 16 and cache.hits + cache.misses == 8 * 2000


def test_concurrent_embed_query_calls_agree(real_embedder):
    """Threads asking the same few questions at once all get the vectors one thread gets."""
    texts = ["where is my passport", "what did Anna say about the trip", "the wifi password", "dentist on Monday"]
    expected = {t: real_embedder.embed_query(t) for t in texts}
    embedder = Embedder(real_embedder.files.directory, threads=1, query_cache=8)
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda i: (texts[i % 4], embedder.embed_query(texts[i % 4])), range(60)))
    for text, vector in results:
        np.testing.assert_allclose(vector, expected[text], atol=1e-6)
    assert embedder.model_runs < 60  # most calls were hits
    assert len(embedder.query_cache) == 4


def test_size_from_the_environment(monkeypatch):
    """MEMSERVER_QUERY_CACHE sets the entries; 0 disables; anything else is a ConfigError naming the variable."""
    monkeypatch.delenv("MEMSERVER_QUERY_CACHE", raising=False)
    assert entries_from_env() == DEFAULT_ENTRIES
    monkeypatch.setenv("MEMSERVER_QUERY_CACHE", " 16 ")
    assert entries_from_env() == 16 and Embedder().query_cache.max_entries == 16
    monkeypatch.setenv("MEMSERVER_QUERY_CACHE", "0")
    assert Embedder().query_cache.max_entries == 0
    assert Embedder(query_cache=5).query_cache.max_entries == 5  # the argument wins
    for bad in ("-1", "lots", "1.5"):
        monkeypatch.setenv("MEMSERVER_QUERY_CACHE", bad)
        with pytest.raises(ConfigError, match="MEMSERVER_QUERY_CACHE"):
            Embedder()
    with pytest.raises(ValueError, match="max_entries"):
        QueryCache(-1)
