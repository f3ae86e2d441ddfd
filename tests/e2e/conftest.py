"""Fixtures for the end-to-end tests; the helpers are in servers.py."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    """A background event loop for the module's MCP sessions, so tests can stay synchronous."""
    with start_blocking_portal() as portal:
        yield portal
