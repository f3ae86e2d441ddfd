"""Each user of a server has their own query cache: a shared one would tell one user, by the speed of an answer,
whether another recently asked the very same question."""

from __future__ import annotations

from pathlib import Path

from memserver.loader import DefaultStoreFactory


def test_users_do_not_share_recent_queries(tmp_path: Path) -> None:
    """A query alice asked is a cache hit for alice, and not even known for bob; both use one model."""
    factory = DefaultStoreFactory(tmp_path)
    alice, bob = factory("alice"), factory("bob")
    try:
        alice.add("The staging database password rotates every Monday")
        alice.search("when does the password change?")
        assert "when does the password change?" in alice.embedder.query_cache
        assert "when does the password change?" not in bob.embedder.query_cache
        runs = bob.embedder.model_runs
        bob.search("when does the password change?")
        assert bob.embedder.model_runs == runs + 1  # one shared model; bob missed
        alice.search("when does the password change?")
        assert alice.embedder.model_runs == runs + 1  # alice hit: no run
    finally:
        alice.close()
        bob.close()
