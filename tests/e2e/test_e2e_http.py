"""`memserver serve --http` as a subprocess: transport security, bearer tokens and per-user isolation."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx2
import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal
from mcp.shared.exceptions import MCPError

from tests.e2e.raw import INITIALIZE, MCP_HEADERS
from tests.e2e.servers import SERVE, HttpServer, http_server, http_session, server_env
from tests.support.surface import MEMORY_TOOLS

ALICE = "alice-token-0123456789abcdef"
BOB = "bob-token-0123456789abcdef"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    """One HTTP server with two users' tokens, on a free loopback port."""
    with http_server(tmp_path_factory.mktemp("http-data"), MEMSERVER_TOKENS=f"alice:{ALICE}, bob:{BOB}") as running:
        yield running


def post(url: str, *, token: str | None = ALICE, body: bytes | None = None, **headers: str) -> httpx2.Response:
    all_headers = {**MCP_HEADERS, **headers}
    if token:
        all_headers["Authorization"] = f"Bearer {token}"
    with httpx2.Client(timeout=30) as http:
        return http.post(url, content=body or json.dumps(INITIALIZE).encode(), headers=all_headers)


def test_a_valid_token_initializes(server: HttpServer) -> None:
    """With a known bearer token, initialize succeeds and a session id is issued."""
    response = post(server.url)
    assert response.status_code == 200, response.text
    assert response.headers.get("mcp-session-id")


@pytest.mark.parametrize("token", [None, "not-a-known-token-at-all"])
def test_missing_or_unknown_token_is_401(server: HttpServer, token: str | None) -> None:
    """No token or a token nobody was given: 401 with a Bearer challenge."""
    response = post(server.url, token=token)
    assert response.status_code == 401
    assert response.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize("token", [ALICE, None, "not-a-known-token-at-all"], ids=["valid", "none", "unknown"])
def test_foreign_origin_is_403(server: HttpServer, token: str | None) -> None:
    """DNS-rebinding protection: a browser page from another origin gets 403 whatever its token: Host and Origin
    are checked first, so such a page does not even learn that a token is wanted (no 401, no challenge)."""
    response = post(server.url, token=token, Origin="http://evil.example")
    assert response.status_code == 403 and "www-authenticate" not in response.headers


@pytest.mark.parametrize("token", [ALICE, None], ids=["valid", "none"])
def test_foreign_host_is_421(server: HttpServer, token: str | None) -> None:
    """DNS-rebinding protection: a Host header that is not this server's gets 421, before the token is looked at."""
    assert post(server.url, token=token, Host="evil.example:8000").status_code == 421


def test_oversized_body_is_413(server: HttpServer) -> None:
    """A body over the limit (1 MiB by default) is refused before it is parsed."""
    assert post(server.url, body=b" " * (1024 * 1024 + 1)).status_code == 413


def test_a_session_cannot_be_used_with_another_users_token(server: HttpServer) -> None:
    """Alice's session id presented with Bob's token is not found (404)."""
    session_id = post(server.url).headers["mcp-session-id"]
    ping = json.dumps({"jsonrpc": "2.0", "id": 2, "method": "ping"}).encode()
    response = post(server.url, token=BOB, body=ping, **{"mcp-session-id": session_id})
    assert response.status_code == 404


def test_users_are_isolated(server: HttpServer, portal: BlockingPortal) -> None:
    """Each token's user has their own memories: Bob can neither see, read nor forget Alice's."""
    with http_session(portal, server.url, ALICE) as alice, http_session(portal, server.url, BOB) as bob:
        secret = "Alice's locker code is 4711."
        stored = alice.call_tool("remember", {"content": secret, "tags": ["private"]}).structured_content
        assert stored["status"] == "stored"

        found = bob.call_tool("recall", {"query": "locker code", "limit": 50}).structured_content["results"]
        assert secret not in [hit["content"] for hit in found]
        assert bob.call_tool("list_recent", {"limit": 100}).structured_content["memories"] == []
        assert bob.call_tool("remember", {"content": secret}).structured_content["status"] == "stored"  # own copy
        assert bob.call_tool("forget", {"memory_id": stored["id"]}).structured_content["deleted"] is False
        with pytest.raises(MCPError) as caught:
            bob.read_resource(f"memory://memories/{stored['id']}")
        assert caught.value.error.code == types.INVALID_PARAMS
        assert json.loads(bob.read_resource("memory://tags").contents[0].text)["tags"] == []

        mine = alice.call_tool("recall", {"query": "locker code", "limit": 1}).structured_content["results"]
        assert mine[0]["id"] == stored["id"]
        stats = [json.loads(s.read_resource("memory://stats").contents[0].text) for s in (alice, bob)]
        assert stats[0]["path"] != stats[1]["path"]


def test_plain_loopback_http_needs_no_token(tmp_path: Path, portal: BlockingPortal) -> None:
    """Without tokens, the default loopback server serves MCP and still refuses foreign origins; /sse is off."""
    with http_server(tmp_path) as running, http_session(portal, running.url) as live:
        assert [t.name for t in live.list_tools().tools] == MEMORY_TOOLS
        assert live.call_tool("remember", {"content": "HTTP without tokens works."}).structured_content["id"]
        assert post(running.url, token=None, Origin="http://evil.example").status_code == 403
        with httpx2.Client(timeout=30) as http:  # the legacy SSE endpoint is off unless asked for, and says so
            refused = http.get(running.url.removesuffix("/mcp") + "/sse")
        assert refused.status_code == 404 and "--sse" in refused.json()["error"]["message"]


def test_non_loopback_without_tokens_is_refused(tmp_path: Path) -> None:
    """Binding a non-loopback address without tokens exits 1 with an explanation."""
    done = subprocess.run(
        [*SERVE, "--http", "--host", "0.0.0.0"], env=server_env(tmp_path), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1
    assert "without authentication" in done.stderr and "MEMSERVER_TOKENS" in done.stderr


def test_a_token_file_others_can_read_stops_the_server(tmp_path: Path) -> None:
    """MEMSERVER_TOKEN_FILE with mode 0644: `serve --http` exits 1 naming the file, its mode and the fix, and
    never prints the token; with 0600 it serves."""
    token_file = tmp_path / "tokens"
    token_file.write_text(f"alice {ALICE}\n", encoding="utf-8")
    token_file.chmod(0o644)
    env = server_env(tmp_path / "data", MEMSERVER_TOKEN_FILE=str(token_file))
    done = subprocess.run([*SERVE, "--http", "--port", "0"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    assert "0644" in done.stderr and "chmod 600" in done.stderr and ALICE not in done.stderr + done.stdout
    token_file.chmod(0o600)
    with http_server(tmp_path / "data", MEMSERVER_TOKEN_FILE=str(token_file)) as running:
        assert post(running.url).status_code == 200
