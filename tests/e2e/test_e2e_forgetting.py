"""forget_matching end to end: `memserver serve` (real store and model) over stdio and HTTP, in both protocol eras,
through the Python SDK's client with an elicitation callback (elicitation/create in the handshake era, the
input_required round trip in 2026-07-28), and through the TypeScript SDK's elicitation handler.

Each test stores its own memories under its own tag, so the sessions sharing a data directory never meet.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal

from tests.e2e import ts_client
from tests.e2e.servers import ROOT, SERVE, HttpServer, Live, http_server, http_session, server_env, stdio_session

MODERN = "2026-07-28"
SESSIONS = ["stdio-2025-11-25", "stdio-2026-07-28", "http-2025-11-25", "http-2026-07-28"]
_tags = itertools.count()


class Person:
    """The human behind the client: answers each question with `answer` (accept+confirm, decline, cancel)."""

    def __init__(self) -> None:
        self.answer = "accept"
        self.questions: list[str] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        self.questions.append(params.message)
        if self.answer == "accept":
            return types.ElicitResult(action="accept", content={"confirm": True})
        return types.ElicitResult(action=self.answer)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("forgetting-data")


@pytest.fixture(scope="module")
def http(data_dir: Path) -> Iterator[HttpServer]:
    with http_server(data_dir) as running:
        yield running


def connect(request: pytest.FixtureRequest, portal: BlockingPortal, data_dir: Path, name: str, **options: Any) -> Any:
    transport, era = name.split("-", 1)
    mode = "auto" if era == MODERN else "legacy"
    if transport == "stdio":
        return stdio_session(portal, data_dir, data_dir / f"{name}.log", mode=mode, **options)
    return http_session(portal, request.getfixturevalue("http").url, mode=mode, **options)


@pytest.fixture(scope="module", params=SESSIONS)
def asking(request: pytest.FixtureRequest, portal: BlockingPortal, data_dir: Path) -> Iterator[tuple[Live, Person]]:
    """A session whose client can ask its person (an elicitation callback), and the person."""
    person = Person()
    with connect(request, portal, data_dir, request.param, elicitation_callback=person) as live:
        yield live, person


def store_tagged(live: Live, n: int) -> tuple[str, list[str]]:
    """n memories under a tag of their own, and one more without it; the tag and the tagged ids."""
    tag = f"forget-e2e-{next(_tags)}"
    ids = [
        live.call_tool("remember", {"content": f"Fact {i} about the {tag} project.", "tags": [tag]}).structured_content[
            "id"
        ]
        for i in range(n)
    ]
    live.call_tool("remember", {"content": f"A fact that must survive the {tag} cleanup."})
    return tag, ids


def tagged(live: Live, tag: str) -> list[str]:
    return [
        m["id"] for m in live.call_tool("list_recent", {"tags": [tag], "limit": 100}).structured_content["memories"]
    ]


def test_a_yes_forgets_exactly_the_tagged_memories(asking: tuple[Live, Person]) -> None:
    live, person = asking
    person.answer = "accept"
    tag, _ = store_tagged(live, 3)
    result = live.call_tool("forget_matching", {"tags": [tag]})
    assert not result.is_error, result.content
    assert result.structured_content["status"] == "forgotten"
    assert (result.structured_content["matched"], result.structured_content["forgotten"]) == (3, 3)
    assert person.questions[-1].startswith(f"Forget 3 memories tagged {tag}? They will be deleted for good.")
    assert tagged(live, tag) == []
    survivor = live.call_tool("recall", {"query": f"must survive the {tag} cleanup", "limit": 1})
    assert tag in survivor.structured_content["results"][0]["content"]


@pytest.mark.parametrize(("answer", "status"), [("decline", "declined"), ("cancel", "cancelled")])
def test_a_no_forgets_nothing(asking: tuple[Live, Person], answer: str, status: str) -> None:
    live, person = asking
    person.answer = answer
    tag, ids = store_tagged(live, 2)
    result = live.call_tool("forget_matching", {"tags": [tag]})
    assert not result.is_error and result.structured_content["status"] == status
    assert sorted(tagged(live, tag)) == sorted(ids)


@pytest.mark.parametrize("name", SESSIONS)
def test_a_client_without_elicitation_gets_a_tool_error(
    request: pytest.FixtureRequest, portal: BlockingPortal, data_dir: Path, name: str
) -> None:
    with connect(request, portal, data_dir, name) as live:
        tag, ids = store_tagged(live, 2)
        result = live.call_tool("forget_matching", {"tags": [tag]})
        assert result.is_error and "does not support MCP elicitation" in result.content[0].text
        assert sorted(tagged(live, tag)) == sorted(ids)


# --- the TypeScript SDK's client ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ts_script() -> Path:
    return ts_client.install()


def check_ts(seen: dict[str, Any]) -> None:
    assert seen["accepted"]["structuredContent"]["status"] == "forgotten"
    assert seen["accepted"]["structuredContent"]["forgotten"] == 2
    assert seen["question"].startswith("Forget 2 memories tagged ts-forget-yes?")
    assert seen["leftAfterYes"] == 0
    assert seen["declined"]["structuredContent"]["status"] == "declined" and seen["leftAfterNo"] == 2
    assert seen["withoutElicitation"]["isError"] is True
    assert "does not support MCP elicitation" in seen["withoutElicitation"]["content"][0]["text"]


def test_typescript_client_over_stdio(ts_script: Path, tmp_path: Path) -> None:
    config = {"scenario": "forgetting", "transport": "stdio", "command": SERVE[0], "args": SERVE[1:]}
    check_ts(ts_client.run(ts_script, {**config, "env": server_env(tmp_path), "cwd": str(ROOT)}))


def test_typescript_client_over_http(ts_script: Path, http: HttpServer) -> None:
    check_ts(ts_client.run(ts_script, {"scenario": "forgetting", "transport": "http", "url": http.url}))
