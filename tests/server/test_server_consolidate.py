"""The consolidate tool: proposals (merge near-duplicates, archive a stale statement) applied only on the person's
yes, asked through MCP elicitation one proposal at a time (2026-07-28: all in one input_required round trip); a
merged text from the client's model when it offers sampling; a client that cannot ask gets the proposals and applies
the ones the user approved by id. In process, over the SDK's Client with its elicitation and sampling callbacks; the
store is a real MemoryStore with the fake embedder."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.support.fakes import FakeEmbedder

TIMEOUT = 10
TOMATOES = "the garden tomatoes need water every morning before the heat"
TOMATOES_AGAIN = "the garden tomatoes need water every single morning before the heat"
MERGED = "Water the garden tomatoes every morning, before the heat."


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


Opener = Callable[[], MemoryStore]


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Opener]:
    """Opens the store (each server closes the one it was given; the test reads through a fresh one)."""
    opened: list[MemoryStore] = []

    def open_store() -> MemoryStore:
        opened.append(MemoryStore(tmp_path, "consolidate", embedder=FakeEmbedder()))
        return opened[-1]

    first = open_store()
    first.add(TOMATOES, tags=["garden"])
    first.add(TOMATOES_AGAIN)
    first.add("I live in Oslo.", speaker="Ana", occurred_at="2025-02-01")
    first.add("I live in Lisbon now.", speaker="Ana", occurred_at="2025-07-01")
    first.add("the invoice for the roof repair is due on friday")
    yield open_store
    for each in opened:
        each.close()


def current(store: Opener) -> list[str]:
    return sorted(r["content"] for r in store().export() if not r.get("replaced_by") and not r.get("archived"))


def records(store: Opener) -> list[dict[str, Any]]:
    return list(store().export())


class Person:
    """The human behind the elicitation callback: answers a merge question with `merge` and an archive question
    with `archive` (True: tick the box; a str: that action), and records each question, in the order asked."""

    def __init__(self, merge: bool | str, archive: bool | str) -> None:
        self.merge, self.archive = merge, archive
        self.questions: list[types.ElicitRequestFormParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.questions.append(params)
        answer = self.merge if params.message.startswith("Merge") else self.archive
        if isinstance(answer, str):
            return types.ElicitResult(action=answer)  # type: ignore[arg-type]
        return types.ElicitResult(action="accept", content={"apply": answer})


async def call(
    store: Opener, arguments: dict[str, Any], mode: str = "legacy", **callbacks: Any
) -> types.CallToolResult:
    async with Client(build_server(lambda user: store()), mode=mode, **callbacks) as client:
        with anyio.fail_after(TIMEOUT):
            return await client.call_tool("consolidate", arguments)


def merged_by(text: str, asked: list[types.CreateMessageRequestParams]) -> Callable[..., Any]:
    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        asked.append(params)
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=text), model="m")

    return sampling


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_each_proposal_is_asked_about_and_only_a_yes_applies_it(store: Opener, mode: str) -> None:
    person = Person(False, True)
    result = await call(store, {}, mode, elicitation_callback=person)
    assert not result.is_error
    payload = result.structured_content
    assert payload is not None and payload["status"] == "applied" and payload["applied"] == 1
    assert [(p["action"], p["outcome"]) for p in payload["proposals"]] == [
        ("merge", "declined"),
        ("archive", "applied"),
    ]
    merge, stale = sorted(person.questions, key=lambda q: not q.message.startswith("Merge"))
    assert merge.message.startswith("Merge 2 near-duplicate memories into one?") and TOMATOES in merge.message
    assert stale.message.splitlines()[:3] == [
        "Archive a stale statement of Ana?",
        "- (2025-02-01) I live in Oslo.",
        "Said later (2025-07-01): I live in Lisbon now.",
    ]
    assert merge.requested_schema["properties"]["apply"]["type"] == "boolean"
    assert "I live in Oslo." not in current(store) and TOMATOES in current(store)


@pytest.mark.anyio
async def test_with_sampling_the_clients_merged_text_is_proposed_and_applied(store: Opener) -> None:
    asked: list[types.CreateMessageRequestParams] = []
    person = Person(True, "cancel")
    result = await call(store, {}, elicitation_callback=person, sampling_callback=merged_by(MERGED, asked))
    payload = result.structured_content
    assert payload is not None and payload["proposals"][0]["content"] == MERGED
    assert [p["outcome"] for p in payload["proposals"]] == ["applied", "cancelled"]
    assert payload["note"].startswith("Applied 1 of the 1 proposals the user confirmed")
    (request,) = asked  # one merge, one sampling request, listing its memories
    assert TOMATOES in request.messages[0].content.text  # type: ignore[union-attr]
    assert f"Into: {MERGED}" in person.questions[0].message
    contents = current(store)
    assert MERGED in contents and TOMATOES not in contents and TOMATOES_AGAIN not in contents
    merged = next(m for m in records(store) if m["content"] == MERGED)
    assert merged["tags"] == ["garden"] and merged.get("replaces")


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_without_elicitation_it_only_proposes_and_never_samples_or_applies(store: Opener, mode: str) -> None:
    asked: list[types.CreateMessageRequestParams] = []
    result = await call(store, {}, mode, sampling_callback=merged_by(MERGED, asked))
    payload = result.structured_content
    assert payload is not None and payload["status"] == "proposed" and payload["applied"] == 0
    assert "memserver consolidate" in payload["note"] and "/ui/consolidate" in payload["note"]
    assert asked == [] and len(current(store)) == 5  # no text sampled that nobody would see
    stale = next(p for p in payload["proposals"] if p["action"] == "archive")
    assert stale["namespace"] == "default"
    assert [m["content"] for m in stale["memories"]] == ["I live in Oslo.", "I live in Lisbon now."]
    result = await call(store, {"apply": [stale["id"]]}, mode, sampling_callback=merged_by(MERGED, asked))
    assert result.is_error and asked == [] and len(current(store)) == 5  # no way around the yes


@pytest.mark.anyio
async def test_without_a_namespace_only_the_default_one_is_scanned(store: Opener) -> None:
    other = store()
    other.add("I live in Oslo.", speaker="Bo", occurred_at="2025-02-01", namespace="work")
    other.add("I live in Lisbon now.", speaker="Bo", occurred_at="2025-07-01", namespace="work")
    other.close()
    payload = (await call(store, {})).structured_content
    assert payload is not None and {p["namespace"] for p in payload["proposals"]} == {"default"}
    payload = (await call(store, {"namespace": "work"})).structured_content
    assert payload is not None and [(p["namespace"], p["action"]) for p in payload["proposals"]] == [
        ("work", "archive")
    ]


@pytest.mark.anyio
async def test_bad_arguments_and_an_empty_store_say_so(tmp_path: Path) -> None:
    def empty() -> MemoryStore:
        return MemoryStore(tmp_path, "empty", embedder=FakeEmbedder())

    result = await call(empty, {})
    assert result.structured_content is not None and result.structured_content["status"] == "nothing_to_do"
    result = await call(empty, {"apply": ["not-an-id"]})
    assert result.is_error and "apply" in result.content[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_failed_or_empty_sampling_leaves_the_longest_text(store: Opener) -> None:
    async def refuse(context: Any, params: types.CreateMessageRequestParams) -> types.ErrorData:
        return types.ErrorData(code=-1, message="the user refused")

    for sampling in (refuse, merged_by("   ", [])):
        person = Person("decline", "decline")
        result = await call(store, {}, elicitation_callback=person, sampling_callback=sampling)
        payload = result.structured_content
        assert payload is not None and payload["status"] == "declined" and payload["applied"] == 0
        assert payload["proposals"][0]["content"] == TOMATOES_AGAIN  # the longer member's
    assert len(current(store)) == 5


@pytest.mark.anyio
async def test_an_answer_that_raises_counts_as_unanswered_and_the_rest_is_not_asked(store: Opener) -> None:
    async def broken(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        raise RuntimeError("the client fell over")

    result = await call(store, {}, elicitation_callback=broken)
    payload = result.structured_content
    assert not result.is_error and payload is not None and payload["applied"] == 0
    assert [p["outcome"] for p in payload["proposals"]] == ["unanswered", "not_asked"]
    assert len(current(store)) == 5


@pytest.mark.anyio
async def test_2026_07_28_a_forged_or_stale_state_asks_again_and_a_changed_memory_fails(store: Opener) -> None:
    async with Client(build_server(lambda user: store()), mode="auto", elicitation_callback=Person(True, True)) as c:
        with anyio.fail_after(TIMEOUT):
            first = await c.session.call_tool("consolidate", {}, allow_input_required=True)
            assert isinstance(first, types.InputRequiredResult) and first.input_requests
            yes = {pid: types.ElicitResult(action="accept", content={"apply": True}) for pid in first.input_requests}
            state = f'{{"v": 1, "asked": 1.0, "ids": {json.dumps(sorted(yes))}}}'  # asked long ago
            for forged in (None, "not json", state):
                reply = await c.session.call_tool(
                    "consolidate", {}, input_responses=yes, request_state=forged, allow_input_required=True
                )
                assert isinstance(reply, types.InputRequiredResult), reply
            assert len(current(store)) == 5  # nothing applied
            oslo = next(r for r in records(store) if r["content"] == "I live in Oslo.")
            gone = await c.call_tool("forget", {"memory_id": oslo["id"]})  # between the question and the yes
            assert not gone.is_error, gone
            done = await c.session.call_tool(
                "consolidate", {}, input_responses=yes, request_state=first.request_state, allow_input_required=True
            )
    assert isinstance(done, types.CallToolResult) and done.structured_content is not None
    outcomes = sorted(p["outcome"].split(":")[0] for p in done.structured_content["proposals"])
    assert outcomes == ["applied", "failed"]
