"""The chat-memory interface (chat.py, `--tools chat`) in process: its three tools over the SDK's Client, sessions
split by the idle gap (an injected clock), the recall() block's assembly and budget, standing facts, and condensing
through MCP sampling. The store is tests/support/conversation_fake.py; tests/e2e/test_e2e_chat.py drives a real
`memserver serve --tools chat` process with the real store and model over stdio and HTTP."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client

from memserver.cli.command import build_parser
from memserver.features import chat, tools
from memserver.features.chat import ChatMemory, ChatOptions
from memserver.features.tool_sets import chat_tools
from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.support.conversation_fake import ConversationFake
from tests.support.fakes import FakeEmbedder

TIMEOUT = 10
LINE = re.compile(r"- \[\d{4}-\d{2}-\d{2} \d{2}:\d{2}\] [^:]+: .+")
HERE: chat.Conversation = (None, None)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["fake", "local"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    """The contract's fake, and the local store itself (with the fake embedder)."""
    if request.param == "fake":
        yield ConversationFake()
        return
    with MemoryStore(path=tmp_path, embedder=FakeEmbedder()) as opened:
        yield opened


class Clock:
    """Seconds that pass only when a test says so."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def everything(store: Any) -> list[dict[str, Any]]:
    """Every stored memory, oldest first (the contract's export)."""
    return list(store.export())


def text(result: types.CallToolResult) -> str:
    assert not result.is_error, result.content
    assert result.structured_content is None
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def say(memory: ChatMemory, store: Any, role: str, message: str, who: chat.Conversation = HERE) -> None:
    assert memory.remember(who, store, {"role": role, "message": message}) == "ok"


def recall(memory: ChatMemory, store: Any, who: chat.Conversation = HERE) -> str:
    block = memory.recall(who, store, {})
    assert isinstance(block, str)
    return block


# --- the tools over MCP ---------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_chat_tool_set_is_exactly_the_interface(store: Any) -> None:
    """tools/list: remember(role, message), recall(), search_in_memory(data), as in CleverChatty's interface."""
    async with Client(build_server(lambda user: store, tool_set=chat_tools()), mode="legacy") as client:
        with anyio.fail_after(TIMEOUT):
            listed = (await client.list_tools()).tools
            instructions = client.instructions
    assert [tool.name for tool in listed] == ["remember", "recall", "search_in_memory"]
    assert set(listed[0].input_schema["properties"]) >= {"role", "message"}
    assert listed[0].input_schema["required"] == ["role"]  # message, or contents (CleverChatty's client's name)
    assert listed[1].input_schema["required"] == [] and listed[2].input_schema["required"] == ["data"]
    assert all(tool.output_schema is None for tool in listed)  # plain text
    assert "recall()" in (instructions or "")


@pytest.mark.anyio
async def test_remember_recall_and_search_answer_plain_text(store: Any) -> None:
    async with Client(build_server(lambda user: store, tool_set=chat_tools()), mode="legacy") as client:
        with anyio.fail_after(TIMEOUT):
            assert text(await client.call_tool("recall", {})) == "none"  # nothing yet: CleverChatty's "no memory"
            ok = await client.call_tool("remember", {"role": "user", "message": "My dog is called Pixel."})
            assert text(ok) == "ok"
            ok = await client.call_tool("remember", {"role": "assistant", "contents": "What a nice name!"})
            assert text(ok) == "ok"  # CleverChatty's client sends `contents`
            block = text(await client.call_tool("recall", {}))
            found = text(await client.call_tool("search_in_memory", {"data": "dog Pixel"}))
            nothing = text(await client.call_tool("search_in_memory", {"data": "zebra"}))
            stored = everything(store)  # (the server closes the store when the client goes)
    assert "This conversation so far:" in block and "User: My dog is called Pixel." in block
    assert "Assistant: What a nice name!" in block
    assert found.startswith("1. [") and "User: My dog is called Pixel." in found.splitlines()[0]
    assert nothing.startswith("No strong match")
    assert [(m["role"], m["speaker"], m["source"]) for m in stored] == [
        ("user", "User", "chat"),
        ("assistant", "Assistant", "chat"),
    ]
    assert stored[0]["session"] == stored[1]["session"] != ""
    assert stored[0]["tags"] == ["profile"] and stored[1]["tags"] == []


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("name", "arguments", "starts"),
    [
        ("remember", {"message": "hi"}, "role: Field required"),
        ("remember", {"role": "moderator", "message": "hi"}, "role: Input should be"),
        ("remember", {"role": "user"}, "message: Field required"),
        ("remember", {"role": "user", "message": "a", "contents": "b"}, "message: give message or contents"),
        ("remember", {"role": "user", "message": "x" * (chat.MAX_MESSAGE_CHARS + 1)}, "message: String should"),
        ("search_in_memory", {"data": "  "}, "data: String should contain more than white space"),
        ("recall", {"query": 5}, "query: Input should be a valid string"),
    ],
)
async def test_bad_arguments_are_tool_errors_naming_the_field(
    store: Any, name: str, arguments: dict[str, Any], starts: str
) -> None:
    async with Client(build_server(lambda user: store, tool_set=chat_tools()), mode="legacy") as client:
        with anyio.fail_after(TIMEOUT):
            result = await client.call_tool(name, arguments)
            assert everything(store) == []
    assert result.is_error and isinstance(result.content[0], types.TextContent)
    assert result.content[0].text.startswith(starts), result.content[0].text


def test_a_blank_message_stores_nothing_and_a_long_one_is_stored_in_pieces(store: Any) -> None:
    memory = ChatMemory()
    say(memory, store, "assistant", "   ")
    assert everything(store) == []
    long = " ".join(f"word{i}" for i in range(9000))  # ~80,000 characters
    say(memory, store, "assistant", long)
    pieces = [m["content"] for m in everything(store)]
    assert len(pieces) == 4 and all(len(p) <= 20_000 for p in pieces) and " ".join(pieces) == long
    assert len({m["session"] for m in everything(store)}) == 1


# --- sessions -------------------------------------------------------------------------------------------------------


def test_a_message_after_the_idle_gap_starts_a_new_session(store: Any) -> None:
    clock = Clock()
    memory = ChatMemory(ChatOptions(idle_minutes=30), clock=clock)
    assert memory.session_id(HERE) is None
    say(memory, store, "user", "Let's plan the trip to Kyoto.")
    first = memory.session_id(HERE)
    clock.now += 29 * 60  # within the gap: the same session, and the gap counts from this message
    say(memory, store, "assistant", "Sure, when do you leave?")
    clock.now += 29 * 60
    assert memory.session_id(HERE) == first
    assert "This conversation so far:" in recall(memory, store)
    clock.now += 2 * 60  # 31 minutes after the last message: the session is over
    assert memory.session_id(HERE) is None
    assert "This conversation so far:" not in recall(memory, store)
    say(memory, store, "user", "Back again.")
    second = memory.session_id(HERE)
    assert second is not None and second != first
    sessions = [m["session"] for m in everything(store)]
    assert sessions == [first, first, second]


def test_each_connection_has_its_own_conversation(store: Any) -> None:
    """Two HTTP sessions (or users) do not share the current session or its turns."""
    memory = ChatMemory()
    one, two = ("alice", "session-1"), ("alice", "session-2")
    say(memory, store, "user", "Conversation one is about gardening tomatoes.", one)
    say(memory, store, "user", "Conversation two is about tax forms.", two)
    assert memory.session_id(one) != memory.session_id(two)
    first, second = recall(memory, store, one), recall(memory, store, two)
    now_one = first.split("This conversation so far:")[1]
    assert "gardening" in now_one and "tax" not in now_one
    assert "tax" in second.split("This conversation so far:")[1]


# --- the block --------------------------------------------------------------------------------------------------------


def scripted_chat(memory: ChatMemory, store: Any, clock: Clock) -> list[str]:
    """Three sessions an hour apart; returns recall() before each of session 3's prompts."""
    session_1 = [
        ("user", "Hi! My name is Priya and I live in Leeds."),
        ("assistant", "Nice to meet you, Priya. How can I help?"),
        ("user", "My sister Meera is getting married in Lisbon on 12 September."),
        ("assistant", "Congratulations to Meera! Do you need help with travel?"),
        ("user", "The wedding venue in Lisbon is the Palacio Verde, near the river."),
    ]
    session_2 = [
        ("user", "Can you suggest a recipe for dinner tonight?"),
        ("assistant", "How about a chickpea curry with spinach?"),
        ("user", "I prefer dishes without coriander."),
    ]
    for role, message in session_1:
        say(memory, store, role, message)
    clock.now += 3600
    for role, message in session_2:
        say(memory, store, role, message)
    clock.now += 3600
    blocks = []
    for message in [
        "Which flights to Lisbon fit my sister's wedding?",
        "And a hotel near the wedding venue in Lisbon?",
    ]:
        say(memory, store, "user", message)
        blocks.append(recall(memory, store))
        say(memory, store, "assistant", "Let me look into that for you.")
    return blocks


def test_a_fact_of_session_1_is_recalled_in_session_3_when_the_latest_message_is_about_it(store: Any) -> None:
    clock = Clock()
    memory = ChatMemory(ChatOptions(idle_minutes=30), clock=clock)
    first, second = scripted_chat(memory, store, clock)
    about, _, now = (section(first, heading) for heading in chat.HEADINGS.values())
    # the user's own statements are standing facts; the rest of session 1 comes back when it is relevant
    assert "My sister Meera is getting married in Lisbon on 12 September." in about
    assert "My name is Priya and I live in Leeds." in about and "I prefer dishes without coriander." in about
    assert "Palacio Verde" in section(second, chat.HEADINGS["relevant"])
    assert "recipe" not in first + second  # session 2's other turns are not about the wedding
    assert now.splitlines() == [line for line in now.splitlines() if "Lisbon" in line]  # only session 3 so far
    assert "hotel" not in first and "hotel" in section(second, chat.HEADINGS["recent"])
    for block in (first, second):
        lines = [line for line in block.splitlines()[1:] if line and line not in chat.HEADINGS.values()]
        assert all(LINE.fullmatch(line) for line in lines), lines


def section(block: str, heading: str) -> str:
    """The lines under `heading` in a recall() block ("" when it has no such section)."""
    if heading not in block:
        return ""
    return block.split(heading + "\n", 1)[1].split("\n\n", 1)[0]


@pytest.mark.parametrize("budget", [200, 350, 1000, 4000, 12000])
def test_the_block_stays_within_the_budget(store: Any, budget: int) -> None:
    """However much there is to show, the block is at most the budget, and each section has a share of it."""
    clock = Clock()
    memory = ChatMemory(ChatOptions(budget=budget), clock=clock)
    for i in range(40):
        store.add(f"I like hiking trail number {i} " + "with long views " * 30, tags=["profile"], source="chat",
                  role="user", speaker="User")  # fmt: skip
        store.add(f"Hiking trail {i}: " + "steep climb, long views, " * 30)
    for i in range(30):
        say(memory, store, "user", f"Hiking trail {i}? " + "Steep climb, long views? " * 20)
    block = recall(memory, store)
    assert len(block) <= budget
    if budget >= 1000:
        assert all(heading in block for heading in chat.HEADINGS.values())
    assert block.splitlines()[0] == chat.HEADER and block.count("…") >= 1


def test_unused_shares_go_to_the_other_sections(store: Any) -> None:
    """With no standing facts and no current session, earlier conversations may use the whole budget."""
    for i in range(60):
        store.add(f"Meeting note {i}: the budget review for the garden project moved again.")
    memory = ChatMemory(ChatOptions(budget=2000))
    block = memory.recall(HERE, store, {"query": "garden project budget review"})
    assert isinstance(block, str) and len(block) <= 2000
    assert list(chat.HEADINGS.values())[1] in block and len(block) > 2000 * 0.8  # well over its 40% share


def test_earlier_conversations_show_as_many_hits_as_fit_in_the_searchs_own_order(store: Any) -> None:
    """Not 20 hits re-sorted by cosine: the search's ranking, as far as the budget goes (issue 28)."""
    for i in range(45):  # more keyword matches and fewer: the local store's fused order is not the cosine order
        store.add(f"Meeting note {i}: " + "the garden project " * (i % 4) + f"budget review moved again, item {i * 7}.")
    query = "garden project budget review"
    block = ChatMemory(ChatOptions(budget=12000)).recall(HERE, store, {"query": query})
    assert isinstance(block, str)
    shown = [line.split("] Note: ", 1)[1] for line in section(block, chat.HEADINGS["relevant"]).splitlines()]
    hits = store.search(query, limit=chat.RELEVANT_CANDIDATES, namespace="default")
    assert len(shown) > 20
    assert shown == [hit.memory.content for hit in hits if hit.score >= tools.WEAK_MATCH_SCORE]


def test_nothing_is_shown_twice(store: Any) -> None:
    """A profile fact said in this session appears once (in the session); a relevant one of a past session too."""
    clock = Clock()
    memory = ChatMemory(clock=clock)
    say(memory, store, "user", "I work as a nurse at St James hospital.")
    clock.now += 7200
    say(memory, store, "user", "I work as a nurse at St James hospital.")  # said again: the store keeps one copy
    block = recall(memory, store)
    assert block.count("nurse at St James") == 1
    assert "nurse" in section(block, chat.HEADINGS["recent"])


@pytest.mark.parametrize(
    ("message", "facts"),
    [
        ("Hi! My name is Priya and I live in Leeds.", ["My name is Priya and I live in Leeds."]),
        ("Thanks. Btw, I'm allergic to peanuts. What's for lunch?", ["Btw, I'm allergic to peanuts."]),
        ("I’m vegetarian.", ["I'm vegetarian."]),
        ("I'm not sure what to cook.", []),
        ("I'm going to the shop.", []),
        ("Am I free on Friday?", []),
        ("Do I have a dog?", []),
        ("My dog Rex hates thunder.\nMy wife is a pilot.", ["My dog Rex hates thunder.", "My wife is a pilot."]),
        ("The weather is nice.", []),
    ],
)
def test_first_person_sentences(message: str, facts: list[str]) -> None:
    assert chat.first_person_sentences(message) == facts


def test_profile_memories_not_from_chat_show_whole_and_the_store_is_asked_within_the_namespace(store: Any) -> None:
    store.add("The user's daughter starts school in September.", tags=["profile"], namespace="family")
    memory = ChatMemory(ChatOptions(namespace="family"))
    block = recall(memory, store)
    assert "Note: The user's daughter starts school in September." in section(block, chat.HEADINGS["profile"])
    say(memory, store, "user", "I live in Ghent.")
    assert {m["namespace"] for m in everything(store)} == {"family"}


def test_options_are_checked() -> None:
    for bad in [{"budget": 10}, {"idle_minutes": 0}, {"user_name": " "}, {"namespace": "a b"}]:
        with pytest.raises(Exception):  # noqa: B017 (ValueError or InvalidInputError, both reported by the CLI)
            ChatOptions(**bad)


def test_the_serve_help_shows_chat_pys_defaults() -> None:
    """cli.py writes the defaults out (importing chat.py would slow `--help`): they must stay chat.py's."""
    serve = next(a for a in build_parser()._actions if a.dest == "command").choices["serve"]
    helps = {action.option_strings[0]: action.help or "" for action in serve._actions if action.option_strings}
    assert f"default {chat.DEFAULT_BUDGET}" in helps["--chat-budget"]
    assert f"default {chat.DEFAULT_IDLE_MINUTES:g}" in helps["--chat-idle-minutes"]


# --- condensing through sampling ------------------------------------------------------------------------------------


async def recall_with(sampling: Any, options: ChatOptions) -> tuple[str, list[types.CreateMessageRequestParams]]:
    store, asked = ConversationFake(), []

    async def callback(context: Any, params: types.CreateMessageRequestParams) -> Any:
        asked.append(params)
        return await sampling(params)

    server = build_server(lambda user: store, tool_set=chat_tools(options))
    async with Client(server, mode="legacy", sampling_callback=callback if sampling else None) as client:
        with anyio.fail_after(TIMEOUT):
            await client.call_tool("remember", {"role": "user", "message": "I live in Porto and I like jazz."})
            block = text(await client.call_tool("recall", {}))
    return block, asked


def answer(text: str) -> Any:
    async def sampling(params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(role="assistant", content=types.TextContent(type="text", text=text), model="m")

    return sampling


@pytest.mark.anyio
async def test_condense_asks_the_clients_model_and_returns_its_answer() -> None:
    block, asked = await recall_with(answer("Lives in Porto; likes jazz."), ChatOptions(condense=True))
    assert block == "Lives in Porto; likes jazz."
    assert len(asked) == 1 and "I live in Porto and I like jazz." in asked[0].messages[0].content.text
    assert "at most 4000 characters" in (asked[0].system_prompt or "")


@pytest.mark.anyio
async def test_without_sampling_or_with_a_bad_answer_the_extractive_block_is_the_answer() -> None:
    extractive, asked = await recall_with(None, ChatOptions(condense=True))  # the client offers no sampling
    assert extractive.startswith(chat.HEADER) and asked == []
    too_long, asked = await recall_with(answer("x" * 5000), ChatOptions(condense=True))
    assert too_long == extractive and len(asked) == 1
    empty, _ = await recall_with(answer("   "), ChatOptions(condense=True))
    assert empty == extractive

    async def refuse(params: types.CreateMessageRequestParams) -> types.ErrorData:
        return types.ErrorData(code=-1, message="the user declined")

    refused, _ = await recall_with(refuse, ChatOptions(condense=True))
    assert refused == extractive
    not_asked, asked = await recall_with(answer("short"), ChatOptions(condense=False))
    assert not_asked == extractive and asked == []


def test_turns_go_to_the_chat_namespace_and_recall_reads_the_curated_facts_too(store: Any) -> None:
    """By default every turn is stored in namespace "chat", apart from the curated facts (the memory tools' default
    namespace); recall() and search_in_memory read both, a curated fact first when it scores as well."""
    fact = store.add("Lena is allergic to peanuts.", tags=["family"])
    memory = ChatMemory(ChatOptions())
    say(memory, store, "user", "Lena is allergic to peanuts, right?")
    say(memory, store, "assistant", "Lena is allergic to peanuts.")
    chat_turns = [m for m in everything(store) if m["id"] != fact.id]
    assert {m["namespace"] for m in chat_turns} == {chat.CHAT_NAMESPACE} and len(chat_turns) == 2
    assert store.list_recent(namespace="default") == [fact]  # the curated namespace holds the fact alone
    found = memory.search(store, {"data": "Lena allergy peanuts"})
    assert found.splitlines()[0].startswith("1. [") and "Note: Lena is allergic to peanuts." in found.splitlines()[0]
    assert "Assistant: Lena is allergic to peanuts." in found  # the chat's own turn is found too
    later = ChatMemory(ChatOptions())  # a new connection: the turns above are "earlier conversations" now
    say(later, store, "user", "What is Lena allergic to?")
    assert "Note: Lena is allergic to peanuts." in section(recall(later, store), chat.HEADINGS["relevant"])
