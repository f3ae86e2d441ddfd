"""`memserver serve --tools chat` as CleverChatty uses it, over stdio and over HTTP: a real server process with the
real store and model, driven by the MCP SDK's client. A scripted chat of three sessions: remember(user) for each
prompt, recall() before it, remember(assistant) for each answer. The sessions are split by the idle gap, made tiny
here (--chat-idle-minutes 0.05, 3 s): between sessions the test polls recall() until the current session is over
(a bounded poll), it never sleeps a fixed time. Checked: a fact of session 1 is in recall() in session 3 when the
latest message is about it; the user's standing facts are there from the start of a session; every block is
within the budget (--chat-budget 1500); each session got its own id; two HTTP sessions are two conversations."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal

from tests.e2e.servers import HttpServer, Live, http_server, http_session, stdio_session

BUDGET = 1500
IDLE_MINUTES = 0.05  # 3 s
CHAT = ["--tools", "chat", "--chat-budget", str(BUDGET), "--chat-idle-minutes", str(IDLE_MINUTES)]
CHAT += ["--chat-user-name", "Priya"]
POLL_SECONDS = 60.0  # the most an idle gap may take to be noticed

SESSIONS = [
    [
        ("Hi! My name is Priya and I live in Leeds.", "Nice to meet you, Priya. How can I help?"),
        (
            "My sister Meera is getting married in Lisbon on 12 September. The wedding venue is the Palacio Verde, "
            "a garden estate by the river.",
            "Congratulations to Meera! A riverside garden wedding sounds lovely.",
        ),
    ],
    [
        ("Can you suggest a recipe for dinner tonight?", "How about a chickpea curry with spinach?"),
        ("Sounds good, but no coriander please.", "Noted: the curry works fine without coriander."),
    ],
    [
        ("I need to book a hotel close to the wedding venue in Lisbon.", "I can help with that."),
    ],
]


def text(result: types.CallToolResult) -> str:
    assert not result.is_error, result.content
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def recall(live: Live) -> str:
    block = text(live.call_tool("recall", {}))
    assert len(block) <= BUDGET, len(block)
    return block


def session_over(live: Live) -> None:
    """Poll recall() (bounded) until the current session has ended: its turns are no longer 'this conversation'."""
    deadline = time.monotonic() + POLL_SECONDS
    while "This conversation so far:" in recall(live):
        assert time.monotonic() < deadline, "the idle gap never ended the session"
        time.sleep(0.2)


def chat(live: Live) -> list[str]:
    """The scripted chat, CleverChatty's way; returns every recall() block, in order."""
    blocks = []
    for number, session in enumerate(SESSIONS):
        if number:
            session_over(live)
        for prompt, answer in session:
            assert text(live.call_tool("remember", {"role": "user", "message": prompt})) == "ok"
            blocks.append(recall(live))
            assert text(live.call_tool("remember", {"role": "assistant", "contents": answer})) == "ok"
    return blocks


def check(blocks: list[str], memories: list[dict]) -> None:
    last = blocks[-1]
    earlier = last.split("From earlier conversations, about the latest message:\n", 1)
    assert len(earlier) == 2, last
    assert "Palacio Verde" in earlier[1].split("\n\n")[0], last  # session 1's fact, about the latest message
    about = last.split("About the user:\n", 1)[1].split("\n\n")[0]
    assert "My name is Priya and I live in Leeds." in about and "My sister Meera is getting married" in about
    now = last.split("This conversation so far:\n", 1)[1]
    assert "hotel close to the wedding venue" in now and "recipe" not in now and "Leeds" not in now
    assert "Priya: I need to book a hotel" in now  # labelled with the speaker (--chat-user-name)
    sessions = {m["session"] for m in memories if m.get("source") == "chat"}
    assert len(sessions) == 3, sessions
    assert {m["role"] for m in memories} == {"user", "assistant"} and all(m["occurred_at"] for m in memories)


def memories_of(live: Live) -> list[dict]:
    """Every memory of the chat's turns, through memory://recent (served by the chat tool set too): in namespace
    "chat" (--chat-namespace's default), none in the curated facts' namespace."""
    default = live.read_resource("memory://recent").contents[0]
    assert isinstance(default, types.TextResourceContents) and json.loads(default.text)["memories"] == []
    contents = live.read_resource("memory://recent?namespace=chat").contents[0]
    assert isinstance(contents, types.TextResourceContents)
    memories = json.loads(contents.text)["memories"]
    assert memories and {m["namespace"] for m in memories} == {"chat"}
    return memories


def test_a_three_session_chat_over_stdio(portal: BlockingPortal, tmp_path: Path) -> None:
    started = time.perf_counter()
    with stdio_session(portal, tmp_path / "data", tmp_path / "server.log", command=[*_serve(), *CHAT]) as live:
        assert [t.name for t in live.list_tools().tools] == ["remember", "recall", "search_in_memory"]
        blocks = chat(live)
        check(blocks, memories_of(live))
        found = text(live.call_tool("search_in_memory", {"data": "where is the wedding?"}))
        assert found.startswith("1. [") and "Palacio Verde" in found
    print(f"\n[chat over stdio] {time.perf_counter() - started:.1f} s", file=sys.stderr)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    with http_server(tmp_path_factory.mktemp("chat-http"), *CHAT) as running:
        yield running


def test_a_three_session_chat_over_http(portal: BlockingPortal, server: HttpServer) -> None:
    started = time.perf_counter()
    with http_session(portal, server.url) as live:
        blocks = chat(live)
        check(blocks, memories_of(live))
    print(f"\n[chat over HTTP] {time.perf_counter() - started:.1f} s", file=sys.stderr)


def test_two_http_sessions_are_two_conversations(portal: BlockingPortal, server: HttpServer) -> None:
    """Each MCP session has its own current session: one's turns are not the other's 'this conversation'."""
    with http_session(portal, server.url) as one, http_session(portal, server.url) as two:
        assert text(one.call_tool("remember", {"role": "user", "message": "We are planning the garden shed."})) == "ok"
        assert text(two.call_tool("remember", {"role": "user", "message": "Let's review the tax forms."})) == "ok"
        mine, theirs = recall(one), recall(two)
    assert "garden shed" in mine.split("This conversation so far:")[1]
    assert "tax forms" not in mine.split("This conversation so far:")[1]
    assert "tax forms" in theirs.split("This conversation so far:")[1]


def _serve() -> list[str]:
    from tests.e2e.servers import SERVE

    return SERVE
