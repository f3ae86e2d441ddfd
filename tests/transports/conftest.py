"""Fixtures of the transport tests: the loopback identity provider the OAuth tests sign tokens with."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.identity import IdentityProvider


@pytest.fixture
def idp() -> Iterator[IdentityProvider]:
    provider = IdentityProvider()
    yield provider
    provider.http.shutdown()
    provider.http.server_close()
