"""The backends the contract suite runs on: one fixture, `backend`, parametrised over ENGINES.

Each engine is a factory `(request, tmp_path) -> open(space, embedder)`: `open` returns the engine's backend on
the storage named `space`, created empty on first use and found again by a later `open` with the same name (a
reopen). A second engine (PostgreSQL) adds an entry to ENGINES, and its factory is free to use other fixtures
(`request.getfixturevalue`): a database per test, a schema or tenant per `space`. The tests never see more than
the `Backend` it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memserver.local.store import MemoryStore
from tests.contract.harness import Backend, BackendUnderTest, Opener
from tests.support.fakes import FakeEmbedder


def local_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """The embedded store: one folder per space under the test's tmp_path."""

    def open_space(space: str, embedder: FakeEmbedder) -> Backend:
        return MemoryStore(tmp_path / space, "contract", embedder=embedder)

    return open_space


def postgres_engine(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    """PostgreSQL (the session's real server): one database for the contract suite, a tenant per test and space."""
    from memserver.postgres.backend import PostgresBackend

    url = _contract_database(request)
    test = request.node.nodeid

    def open_space(space: str, embedder: FakeEmbedder) -> Backend:
        return PostgresBackend(url, tenant=f"{test}/{space}", embedder=embedder)

    return open_space


_DATABASE = pytest.StashKey[str]()


def _contract_database(request: pytest.FixtureRequest) -> str:
    if _DATABASE not in request.config.stash:
        request.config.stash[_DATABASE] = request.getfixturevalue("postgres").database("contract")
    return request.config.stash[_DATABASE]


ENGINES: dict[str, Callable[[pytest.FixtureRequest, Path], Opener]] = {
    "local": local_engine,
    "postgresql": postgres_engine,
}


@pytest.fixture(params=sorted(ENGINES))
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[BackendUnderTest]:
    """A fresh, empty backend of each engine, with the fake embedder; `.reopen()` opens its storage again."""
    harness = BackendUnderTest(request.param, ENGINES[request.param](request, tmp_path))
    try:
        yield harness
    finally:
        harness.close_all()


@pytest.fixture
def store(backend: BackendUnderTest) -> Backend:
    """The backend under test as first opened (tests that reopen use `backend.store` afterwards)."""
    return backend.store
