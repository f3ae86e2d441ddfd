"""forget_matching: a bulk forget happens only on the person's explicit yes, asked through MCP elicitation, and takes
exactly the memories the question counted. In process, over the SDK's Client (its elicitation callback), in both
protocol eras: elicitation/create in the handshake era, an input_required round trip in 2026-07-28.

The store is a real MemoryStore with the fake embedder; "another process" is a second MemoryStore on the same data
directory.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from memserver.features import forgetting, tools
from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.support.fakes import FakeEmbedder
from tests.support.surface import MEMORY_TOOLS

TIMEOUT = 10
ERAS = pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
Answer = Callable[[types.ElicitRequestParams], Awaitable[types.ElicitResult]]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def data(tmp_path: Path) -> Iterator[Callable[[], MemoryStore]]:
    opened: list[MemoryStore] = []

    def open_store() -> MemoryStore:
        opened.append(MemoryStore(tmp_path, "forget", embedder=FakeEmbedder()))
        return opened[-1]

    yield open_store
    for store in opened:
        store.close()


class Person:
    """The human behind the client's elicitation callback: records each question and answers with `answer`."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.questions: list[types.ElicitRequestFormParams] = []

    async def __call__(self, context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.questions.append(params)
        return await self.answer(params)


def saying(action: str, content: dict[str, Any] | None = None) -> Answer:
    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action=action, content=content)  # type: ignore[arg-type]

    return answer


YES = saying("accept", {"confirm": True})


def fill(store: MemoryStore) -> dict[str, list[str]]:
    """Eight project-x memories (one from a 'mail' source), three others; their ids by group."""
    x = [
        store.add(f"project x decision number {n}", tags=["project-x", *(["mail"] if n == 7 else [])]) for n in range(8)
    ]
    other = [store.add(f"an unrelated fact {n}", tags=["home"]) for n in range(3)]
    return {"x": [m.id for m in x], "other": [m.id for m in other]}


async def forget_matching(client: Client, arguments: dict[str, Any]) -> types.CallToolResult:
    with anyio.fail_after(TIMEOUT):
        return await client.call_tool("forget_matching", arguments)


def left(store: MemoryStore) -> set[str]:
    """The ids still stored (read after a session through a fresh store: the server closes its own)."""
    return {m["id"] for m in store.export()}


# --- the answers -------------------------------------------------------------------------------------------------


@pytest.mark.anyio
@ERAS
async def test_an_explicit_yes_forgets_exactly_the_matching_memories(data: Any, mode: str) -> None:
    store = data()
    ids = fill(store)
    person = Person(YES)
    async with Client(build_server(lambda user: store), mode=mode, elicitation_callback=person) as client:
        result = await forget_matching(client, {"tags": ["project-x"]})
    assert not result.is_error
    assert result.structured_content == {
        "status": "forgotten",
        "matched": 8,
        "forgotten": 8,
        "note": "Forgot the 8 memories the user confirmed.",
    }
    assert json.loads(result.content[0].text) == result.structured_content  # type: ignore[union-attr]
    assert left(data()) == set(ids["other"])
    [question] = person.questions
    lines = question.message.splitlines()
    assert lines[0] == "Forget 8 memories tagged project-x? They will be deleted for good."
    assert lines[2] == "The newest:" and len(lines) == 3 + forgetting.SAMPLE
    assert lines[3].endswith(") project x decision number 7")
    assert question.requested_schema["properties"]["confirm"]["type"] == "boolean"
    assert question.requested_schema["required"] == ["confirm"]


@pytest.mark.anyio
@ERAS
@pytest.mark.parametrize(
    ("answer", "status"),
    [
        (saying("decline"), "declined"),
        (saying("cancel"), "cancelled"),
        (saying("accept", {"confirm": False}), "declined"),
        (saying("accept", {}), "declined"),
    ],
    ids=["decline", "cancel", "unticked", "empty"],
)
async def test_anything_but_a_yes_forgets_nothing(data: Any, mode: str, answer: Answer, status: str) -> None:
    store = data()
    fill(store)
    before = left(store)
    async with Client(build_server(lambda user: store), mode=mode, elicitation_callback=Person(answer)) as client:
        result = await forget_matching(client, {"tags": ["project-x"]})
    assert not result.is_error
    assert result.structured_content["status"] == status  # type: ignore[index]
    assert (result.structured_content["matched"], result.structured_content["forgotten"]) == (8, 0)  # type: ignore[index]
    assert "nothing was forgotten" in result.structured_content["note"]  # type: ignore[index]
    assert left(data()) == before


@pytest.mark.anyio
@ERAS
async def test_without_elicitation_a_bulk_forget_is_a_tool_error_and_forgets_nothing(data: Any, mode: str) -> None:
    store = data()
    fill(store)
    before = left(store)
    async with Client(build_server(lambda user: store), mode=mode) as client:
        result = await forget_matching(client, {"tags": ["project-x"]})
        single = await client.call_tool("forget", {"memory_id": sorted(before)[0]})
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "does not support MCP elicitation" in text and "nothing was forgotten" in text and "8 memories" in text
    assert single.structured_content == {"id": sorted(before)[0], "deleted": True}  # forget by id: as before
    assert left(data()) == before - {sorted(before)[0]}


@pytest.mark.anyio
@ERAS
async def test_nothing_matching_asks_nothing(data: Any, mode: str) -> None:
    store = data()
    fill(store)
    person = Person(YES)
    async with Client(build_server(lambda user: store), mode=mode, elicitation_callback=person) as client:
        result = await forget_matching(client, {"tags": ["no-such-tag"]})
    assert result.structured_content["status"] == "nothing_matched"  # type: ignore[index]
    assert person.questions == []


# --- exactly what was shown --------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_handshake_era_forgets_what_was_counted_not_what_matches_when_the_person_answers(data: Any) -> None:
    """While the person reads the question, another process adds a matching memory and forgets a counted one: the
    new one stays, and the answer says how many of the counted ones were still there."""
    store, other = data(), data()
    ids = fill(store)
    late: list[str] = []

    async def meanwhile(params: types.ElicitRequestParams) -> types.ElicitResult:
        late.append(await anyio.to_thread.run_sync(lambda: other.add("project x, added meanwhile", ["project-x"]).id))
        await anyio.to_thread.run_sync(other.delete, ids["x"][0])
        return types.ElicitResult(action="accept", content={"confirm": True})

    person = Person(meanwhile)
    async with Client(build_server(lambda user: store), mode="legacy", elicitation_callback=person) as client:
        result = await forget_matching(client, {"tags": ["project-x"]})
    assert result.structured_content["status"] == "forgotten"  # type: ignore[index]
    assert (result.structured_content["matched"], result.structured_content["forgotten"]) == (8, 7)  # type: ignore[index]
    assert "Forgot 7 of the 8 memories" in result.structured_content["note"]  # type: ignore[index]
    assert left(data()) == set(ids["other"]) | set(late)


@pytest.mark.anyio
async def test_2026_07_28_asks_again_when_the_matching_memories_changed_between_the_rounds(data: Any) -> None:
    """The answer comes in a second tools/call; if what matches changed since the question, the person is asked
    about the new set before anything goes."""
    store, other = data(), data()
    ids = fill(store)
    added: list[str] = []

    async def answer(params: types.ElicitRequestParams) -> types.ElicitResult:
        if not added:  # the first question: change what matches before answering it
            added.append(await anyio.to_thread.run_sync(lambda: other.add("project x, one more", ["project-x"]).id))
        return types.ElicitResult(action="accept", content={"confirm": True})

    person = Person(answer)
    async with Client(build_server(lambda user: store), mode="auto", elicitation_callback=person) as client:
        result = await forget_matching(client, {"tags": ["project-x"]})
    assert [q.message.splitlines()[0] for q in person.questions] == [
        "Forget 8 memories tagged project-x? They will be deleted for good.",
        "Forget 9 memories tagged project-x? They will be deleted for good.",
    ]
    assert result.structured_content["matched"] == result.structured_content["forgotten"] == 9  # type: ignore[index]
    assert left(data()) == set(ids["other"])


@pytest.mark.anyio
async def test_2026_07_28_takes_no_answer_without_the_state_of_its_question(data: Any) -> None:
    """A retry that carries an answer but a forged or missing requestState gets the question, not a deletion."""
    store = data()
    fill(store)
    before = left(store)
    forged = {forgetting.CONFIRM_FIELD: types.ElicitResult(action="accept", content={"confirm": True})}
    person = Person(YES)  # (declares elicitation; this test drives the rounds itself)
    async with Client(build_server(lambda user: store), mode="auto", elicitation_callback=person) as client:
        for state in (None, '{"v": 1, "selected": "0000", "asked": 1.0}', "not json"):
            with anyio.fail_after(TIMEOUT):
                reply = await client.session.call_tool(
                    "forget_matching",
                    {"tags": ["project-x"]},
                    input_responses=forged,
                    request_state=state,
                    allow_input_required=True,
                )
            assert isinstance(reply, types.InputRequiredResult), reply
    assert left(data()) == before


@pytest.mark.anyio
async def test_2026_07_28_asks_again_when_the_answer_comes_after_the_question_expired(
    data: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = data()
    fill(store)
    before = left(store)
    yes = {forgetting.CONFIRM_FIELD: types.ElicitResult(action="accept", content={"confirm": True})}
    async with Client(build_server(lambda user: store), mode="auto", elicitation_callback=Person(YES)) as client:
        with anyio.fail_after(TIMEOUT):
            asked = await client.session.call_tool("forget_matching", {"tags": ["x"]}, allow_input_required=True)
            first = await client.session.call_tool(
                "forget_matching", {"tags": ["project-x"]}, allow_input_required=True
            )
            assert isinstance(first, types.InputRequiredResult)
            monkeypatch.setattr(forgetting, "CONFIRM_SECONDS", 0.0)  # from now on every question has expired
            again = await client.session.call_tool(
                "forget_matching",
                {"tags": ["project-x"]},
                input_responses=yes,
                request_state=first.request_state,
                allow_input_required=True,
            )
    assert isinstance(asked, types.CallToolResult) and asked.structured_content["status"] == "nothing_matched"  # type: ignore[index]
    assert isinstance(again, types.InputRequiredResult)
    assert left(data()) == before


@pytest.mark.anyio
async def test_a_question_left_unanswered_forgets_nothing(data: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    store = data()
    fill(store)
    before = left(store)
    monkeypatch.setattr(forgetting, "CONFIRM_SECONDS", 0.2)
    never = anyio.Event()

    async def silent(params: types.ElicitRequestParams) -> types.ElicitResult:
        await never.wait()
        raise AssertionError("unreachable")

    async with Client(build_server(lambda user: store), mode="legacy", elicitation_callback=Person(silent)) as client:
        result = await forget_matching(client, {"tags": ["project-x"]})
    assert result.structured_content["status"] == "unanswered"  # type: ignore[index]
    assert left(data()) == before


@pytest.mark.anyio
async def test_a_client_that_fails_to_ask_gets_a_tool_error(data: Any) -> None:
    store = data()
    fill(store)
    before = left(store)

    async def failing(params: types.ElicitRequestParams) -> types.ElicitResult:
        raise MCPError(code=types.INTERNAL_ERROR, message="no window to show it in")

    async with Client(build_server(lambda user: store), mode="legacy", elicitation_callback=Person(failing)) as client:
        result = await forget_matching(client, {"tags": ["project-x"]})
    assert result.is_error and "could not ask the user" in result.content[0].text  # type: ignore[union-attr]
    assert left(data()) == before


# --- the filters -------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_each_criterion_narrows_what_is_asked_about(data: Any) -> None:
    store = data()
    ids = fill(store)
    old = store.import_([{"content": "an old note", "created_at": "2020-05-01T00:00:00Z", "tags": ["home"]}])
    work = store.add("a work fact", namespace="work")
    chat = store.add("said in a chat", session="chat-42")
    person = Person(saying("decline"))
    cases = [
        ({"tags": ["project-x"], "source": ""}, 8, "Forget 8 memories tagged project-x, without a source?"),
        ({"tags": ["mail", "home"]}, 5, "Forget 5 memories tagged mail or home?"),
        ({"before": "2021-01-01"}, 1, "Forget 1 memory stored before 2021-01-01?"),
        ({"session": "chat-42"}, 1, "Forget 1 memory of session 'chat-42'?"),
        ({"namespace": "work"}, 1, "Forget 1 memory in namespace 'work'?"),  # a namespace alone: all of it
    ]
    async with Client(build_server(lambda user: store), mode="legacy", elicitation_callback=person) as client:
        for arguments, count, first_line in cases:
            result = await forget_matching(client, arguments)
            assert result.structured_content["matched"] == count, arguments  # type: ignore[index]
            they = "They" if count != 1 else "It"
            assert person.questions[-1].message.splitlines()[0] == first_line.replace(
                "?", f"? {they} will be deleted for good."
            )
    assert old == 1 and work.id and chat.id
    assert len(left(data())) == len(ids["x"]) + len(ids["other"]) + 3  # declined: every one is still there


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({}, "Name at least one of: tags, source, session, namespace, before"),
        ({"tags": []}, "tags: List should have at least 1 item"),
        ({"before": "yesterday"}, "before: Input should be an ISO 8601 date"),
        ({"memory_id": "0" * 32}, "memory_id: Extra inputs are not permitted"),
    ],
)
async def test_bad_arguments_are_tool_errors_and_ask_nothing(
    data: Any, arguments: dict[str, Any], message: str
) -> None:
    store = data()
    person = Person(YES)
    async with Client(build_server(lambda user: store), mode="legacy", elicitation_callback=person) as client:
        result = await forget_matching(client, arguments)
    assert result.is_error and result.content[0].text.startswith(message)  # type: ignore[union-attr]
    assert person.questions == []


@pytest.mark.anyio
async def test_tools_list_shows_forget_unchanged_and_forget_matching_as_destructive(data: Any) -> None:
    store = data()
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert list(listed) == MEMORY_TOOLS
    assert listed["forget"].input_schema["required"] == ["memory_id"]
    bulk = listed["forget_matching"].annotations
    assert bulk is not None and (bulk.destructive_hint, bulk.idempotent_hint, bulk.read_only_hint) == (
        True,
        False,
        False,
    )
    assert listed["forget_matching"] == tools.FORGET_MATCHING
