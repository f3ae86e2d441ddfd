"""`serve --http --ui`: the browser mounted at /ui beside /mcp, signing people in with the same tokens and showing
each the store /mcp serves them (the MCP server's own `Stores`)."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

from memserver.cli.serve import _browser
from memserver.local.store import MemoryStore
from memserver.server import build_server
from memserver.transports.http import http_app
from memserver.transports.limits import HttpLimits
from tests.support.fakes import FakeEmbedder

BASE = "http://127.0.0.1:8000"
TOKENS = {"alice-token-0123456789": "alice", "bob-token-0123456789ab": "bob"}


def test_the_browser_beside_mcp_signs_in_with_the_bearer_tokens(tmp_path: Path) -> None:
    def factory(user: str | None) -> MemoryStore:
        store = MemoryStore(tmp_path / str(user), "ui", embedder=FakeEmbedder())
        if user == "alice" and not store.list_recent(1):
            store.add("alice keeps her bicycle in the shed")
        return store

    server = build_server(factory, per_user=True)
    app = http_app(server, tokens=TOKENS, ui=_browser(TOKENS, HttpLimits()))
    with TestClient(app, base_url=BASE, follow_redirects=False) as client:
        assert client.post("/mcp", json={}).status_code == 401  # /mcp still wants its bearer token
        assert client.get("/ui/browse").headers["location"] == "/ui/signin"
        page = client.get("/ui/signin").text
        csrf = re.search(r'data-csrf="([0-9a-f]+)"', page)
        assert csrf
        form = {"csrf": csrf.group(1), "token": "alice-token-0123456789"}
        assert client.post("/ui/signin", data=form, headers={"origin": BASE}).status_code == 303
        assert "bicycle in the shed" in client.get("/ui/browse").text
        assert client.get("/ui/browse", headers={"host": "evil.example"}).status_code == 421
