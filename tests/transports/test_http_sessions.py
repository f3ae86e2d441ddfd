"""The HTTP app and the mcp it runs on: memserver's session caps override two private methods of the SDK's session
manager, so the app refuses to start on an mcp where they are not what memserver expects (rather than serve
without its caps). The caps themselves, against a real server: tests/e2e/test_e2e_limits.py."""

from __future__ import annotations

from typing import Any

import pytest
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from memserver.server import build_server
from memserver.transports.http import http_app


def app() -> Any:
    return http_app(build_server(lambda user: None))


def test_the_app_builds_on_this_mcp() -> None:
    assert app() is not None


def test_a_hook_with_other_parameters_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def admit(self: Any, requestor: Any, scope: Any) -> None:  # as a later mcp might have it
        return None

    monkeypatch.setattr(StreamableHTTPSessionManager, "_admit_session", admit)
    with pytest.raises(RuntimeError, match=r"_admit_session is \('self', 'requestor', 'scope'\)"):
        app()


def test_a_missing_hook_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(StreamableHTTPSessionManager, "_discard_session")
    with pytest.raises(RuntimeError, match="_discard_session is missing"):
        app()


def test_a_hook_that_is_no_longer_async_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def discard(self: Any, session_id: str, transport: Any) -> None:
        return None

    monkeypatch.setattr(StreamableHTTPSessionManager, "_discard_session", discard)
    with pytest.raises(RuntimeError, match="not async"):
        app()
