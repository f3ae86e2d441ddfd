"""The rest of the server side of build_server(), in process, over the SDK's Client, in both protocol eras:
prompts, completions, progress and cancellation while the store loads, and log forwarding.

mode="legacy" is the initialize handshake (2025-11-25); mode="auto" discovers the server and speaks 2026-07-28.
The store is test_server_protocol's StubStore; tests/e2e drives the same features through real subprocesses.
"""

from __future__ import annotations

import logging
import threading
import warnings
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from memserver.contract.backend import Hit, Memory, Page
from memserver.features import client_log, completions, prompts
from memserver.server import build_server
from tests.server.test_server_protocol import StubStore

TIMEOUT = 10
ERAS = pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store() -> StubStore:
    return StubStore()


class Gate:
    """A StagedStoreFactory whose build waits for `opened` (an event, not a sleep) and counts its builds."""

    def __init__(self, store: StubStore) -> None:
        self.store = store
        self.opened = threading.Event()
        self.builds = 0
        self.report_stage: Any = None

    def __call__(self, user: str | None) -> StubStore:
        self.builds += 1
        self.report_stage(user, "waiting for the gate")
        assert self.opened.wait(TIMEOUT)
        return self.store


class Records:
    """notifications/message params as the client gets them."""

    def __init__(self) -> None:
        self.items: list[types.LoggingMessageNotificationParams] = []

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.items.append(params)

    def data(self) -> list[tuple[str, str]]:
        return [(item.level, str(item.data)) for item in self.items]


def add(store: StubStore, content: str, tags: tuple[str, ...] = (), created_at: str = "2026-01-31T09:00:00+00:00"):
    memory = Memory(f"{len(store.memories) + 1:032x}", content, created_at, tags, "")
    store.memories[memory.id] = memory
    return memory


async def settle() -> None:
    """Let notifications already sent reach the client's callbacks (they run in their own tasks)."""
    for _ in range(10):
        await anyio.lowlevel.checkpoint()


# --- assembly ---------------------------------------------------------------------------------------------------


def test_building_the_server_hides_only_the_logging_deprecation_warning() -> None:
    """The SDK warns that logging is deprecated (2026-07-28) when the handler is passed: that warning, nothing else."""
    before = list(warnings.filters)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_server(lambda user: StubStore())
        warnings.warn("an unrelated warning", UserWarning, stacklevel=1)
    assert not [w for w in caught if issubclass(w.category, MCPDeprecationWarning)]
    assert [str(w.message) for w in caught] == ["an unrelated warning"]
    assert warnings.filters == before


@pytest.mark.anyio
@ERAS
async def test_capabilities_show_exactly_what_is_served(mode: str) -> None:
    async with Client(build_server(lambda user: StubStore()), mode=mode) as client:
        assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        caps = client.server_capabilities.model_dump(by_alias=True, exclude_none=True)
    # The MCP Apps extension (test_apps.py): `extensions` is a 2026-07-28 field, dropped from 2025-11-25 answers.
    extensions = {"extensions": {"io.modelcontextprotocol/ui": {}}} if mode == "auto" else {}
    assert caps == {
        "tools": {"listChanged": False},
        "resources": {"subscribe": True, "listChanged": False},
        "prompts": {"listChanged": False},
        "completions": {},
        "logging": {},
        **extensions,
    }


# --- prompts ----------------------------------------------------------------------------------------------------


@pytest.mark.anyio
@ERAS
async def test_recall_context_is_bounded(store: StubStore, mode: str) -> None:
    """However long and many the memories, the message holds at most RECALL_LIMIT, each cut to MAX_MEMORY_CHARS."""
    for i in range(30):
        add(store, f"memory {i} " + "word " * 2000, tags=("t",))
    async with Client(build_server(lambda user: store), mode=mode) as client:
        result = await client.get_prompt("recall-context", {"topic": "  words  "})
    text = result.messages[0].content.text
    items = [line for line in text.splitlines() if line[:1].isdigit()]
    assert 1 <= len(items) <= prompts.RECALL_LIMIT and len(text) <= prompts.MAX_PROMPT_CHARS
    assert all(len(line) <= prompts.MAX_MEMORY_CHARS + 40 and line.endswith("…") for line in items)
    search = next(args for name, args in store.calls if name == "search")
    assert search == {"limit": prompts.RECALL_LIMIT, "mode": "hybrid"}
    assert 'about "words"' in text  # the topic, stripped


@pytest.mark.anyio
async def test_recall_context_says_when_nothing_or_nothing_strong_was_found(store: StubStore) -> None:
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        empty = (await client.get_prompt("recall-context", {"topic": "tea"})).messages[0].content.text
        add(store, "likes green tea", tags=("drinks",))
        store.score = 0.2
        weak = (await client.get_prompt("recall-context", {"topic": "tea"})).messages[0].content.text
        store.score = 0.6
        strong = (await client.get_prompt("recall-context", {"topic": "tea"})).messages[0].content.text
    assert empty == 'My long-term memory (memserver) has nothing about "tea".'
    assert "None of these is a strong match for the topic (best score 0.20)" in weak
    assert "strong match" not in strong and "1. (2026-01-31; tags: drinks) likes green tea" in strong


class ScoredStore(StubStore):
    """search() scores each memory by its content (`scores`), best first."""

    def __init__(self, scores: dict[str, float]) -> None:
        super().__init__()
        self.scores = scores
        for content in scores:
            add(self, content)

    def search(self, query: str, **kwargs: Any) -> list[Hit]:
        hits = [Hit(m, self.scores[m.content], self.scores[m.content]) for m in self.memories.values()]
        return sorted(hits, key=lambda hit: -hit.score)[: kwargs["limit"]]


@pytest.mark.anyio
async def test_recall_context_leaves_out_unrelated_memories_or_shows_a_few_under_a_warning() -> None:
    mixed = ScoredStore({"about tea": 0.61, "also tea": 0.4, "unrelated": 0.12})
    weak = ScoredStore({f"weak {i}": 0.3 - i / 100 for i in range(6)})
    texts = []
    for store in (mixed, weak):
        async with Client(build_server(lambda user, store=store: store), mode="legacy") as client:
            result = await client.get_prompt("recall-context", {"topic": "tea"})
        texts.append([line for line in result.messages[0].content.text.splitlines() if line[:1].isdigit()])
    assert [line.split(") ", 1)[1] for line in texts[0]] == ["about tea", "also tea"]
    assert len(texts[1]) == prompts.WEAK_LIMIT


@pytest.mark.anyio
async def test_remember_session_names_the_focus_and_the_most_used_tags(store: StubStore) -> None:
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        bare = (await client.get_prompt("remember-session")).messages[0].content.text
        add(store, "a", tags=("rare",))
        add(store, "b", tags=("common",))
        add(store, "c", tags=("common",))
        focused = (await client.get_prompt("remember-session", {"focus": "decisions"})).messages[0].content.text
    assert "Tags already in use" not in bare and "concentrating" not in bare
    assert "concentrating on decisions" in focused
    assert "Tags already in use (reuse them where they fit): common, rare." in focused


@pytest.mark.anyio
@ERAS
async def test_prompt_errors_are_invalid_params_and_do_not_touch_the_store(store: StubStore, mode: str) -> None:
    cases = [
        ("nope", {}, "Unknown prompt: nope (prompts: recall-context, remember-session)"),
        ("recall-context", None, "Missing required argument 'topic' of prompt recall-context"),
        ("recall-context", {"topic": "x" * 2001}, "Argument 'topic' is longer than 2000 characters"),
        ("remember-session", {"fokus": "x"}, "Prompt remember-session has no argument 'fokus' (did you mean 'focus'?)"),
    ]
    async with Client(build_server(lambda user: store), mode=mode) as client:
        for name, arguments, message in cases:
            with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as caught:
                await client.get_prompt(name, arguments)
            assert (caught.value.error.code, caught.value.error.message) == (types.INVALID_PARAMS, message)
    assert store.calls == []


@pytest.mark.anyio
async def test_a_failing_store_is_internal_error_without_internals(store: StubStore) -> None:
    store.fail = RuntimeError("disk on fire: /secret")
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as caught:
            await client.get_prompt("recall-context", {"topic": "tea"})
    assert caught.value.error.code == types.INTERNAL_ERROR and "/secret" not in caught.value.error.message


# --- completions ------------------------------------------------------------------------------------------------

TAG_REF = types.ResourceTemplateReference(type="ref/resource", uri="memory://tags/{tag}")


@pytest.mark.anyio
@ERAS
async def test_tag_completion_is_capped_at_100_with_total_and_has_more(store: StubStore, mode: str) -> None:
    for i in range(150):
        for _ in range(1 + i % 3):
            add(store, f"m{i}", tags=(f"Proj-{i:03d}",))
    add(store, "other", tags=("personal",))
    async with Client(build_server(lambda user: store), mode=mode) as client:
        completion = (await client.complete(TAG_REF, {"name": "tag", "value": "proj"})).completion
        none = (await client.complete(TAG_REF, {"name": "tag", "value": "zzz"})).completion
    assert len(completion.values) == completions.MAX_VALUES and (completion.total, completion.has_more) == (150, True)
    assert completion.values[:2] == ["Proj-002", "Proj-005"]  # most used first (3 memories each), then by name
    assert "personal" not in completion.values
    assert (none.values, none.total, none.has_more) == ([], 0, False)


@pytest.mark.anyio
async def test_prompt_argument_completion(store: StubStore) -> None:
    add(store, "The roof leaks above the attic window", tags=("house",))
    add(store, "Roofers quoted 4000 for the attic", tags=("hobbies",))
    topic = types.PromptReference(type="ref/prompt", name="recall-context")
    focus = types.PromptReference(type="ref/prompt", name="remember-session")
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        topics = (await client.complete(topic, {"name": "topic", "value": "ho"})).completion.values
        words = (await client.complete(topic, {"name": "topic", "value": "att"})).completion.values
        roofs = (await client.complete(topic, {"name": "topic", "value": "roo"})).completion.values
        focuses = (await client.complete(focus, {"name": "focus", "value": "H"})).completion.values
    assert topics == ["hobbies", "house"]  # tags first
    assert words == ["attic"] and roofs == ["roof", "roofers"]
    assert focuses == ["hobbies", "house"]


MEMORY_REF = types.ResourceTemplateReference(type="ref/resource", uri="memory://memories/{id}")


@pytest.mark.anyio
@ERAS
async def test_memory_id_completion_by_prefix(store: StubStore, mode: str) -> None:
    """The ids starting with what was typed (trimmed, any case), lowest first; more than 100: hasMore, no total."""
    made = [add(store, f"memory {n}").id for n in range(150)]

    async def complete(value: str) -> types.Completion:
        return (await client.complete(MEMORY_REF, {"name": "id", "value": value})).completion

    async with Client(build_server(lambda user: store), mode=mode) as client:
        with anyio.fail_after(TIMEOUT):
            everything, one, upper = await complete(""), await complete(made[17]), await complete(" " + made[5].upper())
            tens, junk, long = await complete(made[16][:31]), await complete("xyz"), await complete("0" * 33)
    assert (everything.values, everything.has_more, everything.total) == (made[:100], True, None)
    assert (one.values, one.total, one.has_more) == ([made[17]], 1, False)
    assert upper.values == [made[5]]
    assert tens.values == made[15:31] and tens.total == 16  # ids 0x10..0x1f share their first 31 characters
    assert [(c.values, c.total) for c in (junk, long)] == [([], 0), ([], 0)]  # not the start of an id


@pytest.mark.anyio
@ERAS
async def test_namespaces_complete_and_a_chosen_namespace_narrows_the_other_values(tmp_path: Any, mode: str) -> None:
    """A `namespace` (a prompt argument, or the {?namespace} of a template) completes to the namespaces in use, most
    memories first; once chosen (the request's context), tags, ids and topics come from that namespace only."""
    from memserver.local.store import MemoryStore
    from tests.support.fakes import FakeEmbedder

    store = MemoryStore(tmp_path, "ns", embedder=FakeEmbedder())
    alice = [store.add(f"alice likes kayaking {n}", tags=["sport"], namespace="user:alice").id for n in range(2)]
    store.add("bob likes knitting", tags=["crafts"], namespace="user:bob")
    store.add("a default memory", tags=["misc"])
    topic = types.PromptReference(type="ref/prompt", name="recall-context")
    tags_ns = replace_uri("memory://tags/{tag}{?namespace}")
    ids_ns = replace_uri("memory://memories/{id}{?namespace}")

    async def complete(ref: Any, name: str, value: str, **context: str) -> list[str]:
        with anyio.fail_after(TIMEOUT):
            done = await client.complete(ref, {"name": name, "value": value}, context_arguments=context or None)
        return list(done.completion.values)

    async with Client(build_server(lambda user: store), mode=mode) as client:
        namespaces = await complete(topic, "namespace", "")
        users = await complete(tags_ns, "namespace", "USER:")
        tags = await complete(tags_ns, "tag", "", namespace="user:bob")
        default_tags = await complete(TAG_REF, "tag", "")
        ids = await complete(ids_ns, "id", "", namespace="user:alice")
        words = await complete(topic, "topic", "k", namespace="user:alice")
    assert namespaces == ["user:alice", "default", "user:bob"]  # 2, 1 and 1 memories
    assert users == ["user:alice", "user:bob"]
    assert tags == ["crafts"] and default_tags == ["misc"]
    assert ids == sorted(alice)
    assert words == ["kayaking"]


@pytest.mark.anyio
async def test_recall_context_reads_the_namespace_it_is_given(tmp_path: Any) -> None:
    from memserver.local.store import MemoryStore
    from tests.support.fakes import FakeEmbedder

    store = MemoryStore(tmp_path, "ns", embedder=FakeEmbedder())
    store.add("alice paddles a sea kayak on weekends", namespace="user:alice")
    store.add("bob paddles a canoe on weekends", namespace="user:bob")
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        with anyio.fail_after(TIMEOUT):
            alice = await client.get_prompt("recall-context", {"topic": "paddles weekends", "namespace": "user:alice"})
            default = await client.get_prompt("recall-context", {"topic": "paddles weekends"})
            with pytest.raises(MCPError) as caught:
                await client.get_prompt("recall-context", {"topic": "x", "namespace": "not a namespace"})
    text = alice.messages[0].content.text  # type: ignore[union-attr]
    assert '"paddles weekends" (namespace user:alice)' in text and "sea kayak" in text and "canoe" not in text
    assert "has nothing about" in default.messages[0].content.text  # type: ignore[union-attr]
    assert caught.value.error.code == types.INVALID_PARAMS and "namespace" in caught.value.error.message


def replace_uri(uri: str) -> types.ResourceTemplateReference:
    return types.ResourceTemplateReference(type="ref/resource", uri=uri)


@pytest.mark.anyio
async def test_completion_of_unknown_references_is_invalid_params(store: StubStore) -> None:
    cases = [
        (types.PromptReference(type="ref/prompt", name="nope"), "topic", "Unknown prompt: nope"),
        (types.PromptReference(type="ref/prompt", name="recall-context"), "focus", "has no argument 'focus'"),
        (replace_uri("memory://tags"), "tag", "Unknown resource template: memory://tags"),
        (replace_uri("memory://memories/{id}"), "tag", "has no variable 'tag'"),
    ]
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        for ref, name, message in cases:
            with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as caught:
                await client.complete(ref, {"name": name, "value": ""})
            assert caught.value.error.code == types.INVALID_PARAMS and message in caught.value.error.message
    assert store.calls == []


# --- progress and cancellation ----------------------------------------------------------------------------------


@pytest.mark.anyio
@ERAS
async def test_a_call_waiting_for_the_store_reports_progress_then_answers(store: StubStore, mode: str) -> None:
    """The progress notifications say what the call waits for, with increasing values; then the call answers."""
    gate = Gate(store)
    seen: list[tuple[float, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, message))
        if message == "Waiting for the gate":
            gate.opened.set()

    async with Client(build_server(gate), mode=mode) as client:
        with anyio.fail_after(TIMEOUT):
            result = await client.call_tool("remember", {"content": "x"}, progress_callback=on_progress)
            read = await client.session.send_request(
                types.ReadResourceRequest(params=types.ReadResourceRequestParams(uri="memory://stats")),
                types.ReadResourceResult,
                progress_callback=on_progress,
            )
    assert result.structured_content["status"] == "stored" and read.contents
    assert [message for _, message in seen] in (
        ["Opening the memory store", "Waiting for the gate"],
        ["Waiting for the gate"],  # the build reported its stage before the call first looked
    )
    assert [value for value, _ in seen] == sorted({value for value, _ in seen})


@pytest.mark.anyio
@ERAS
async def test_no_progress_without_a_progress_token(store: StubStore, mode: str) -> None:
    gate = Gate(store)
    gate.opened.set()
    notifications: list[Any] = []

    async def on_message(message: Any) -> None:
        notifications.append(message)

    async with Client(build_server(gate), mode=mode, message_handler=on_message) as client:
        with anyio.fail_after(TIMEOUT):
            await client.call_tool("list_recent", {})
        await settle()
    assert not [n for n in notifications if isinstance(n, types.ProgressNotification)]


async def cancel_after_progress(
    client: Client, arguments: dict[str, Any], started: anyio.Event | None = None, then: Any = None
) -> None:
    """Call remember; cancel the call at its first progress notification (or when `started` is set), then `then()`."""
    first = started or anyio.Event()

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        first.set()

    async with anyio.create_task_group() as tg:

        async def call() -> None:
            await client.call_tool("remember", arguments, progress_callback=on_progress)
            raise AssertionError("the cancelled call was answered")

        tg.start_soon(call)
        with anyio.fail_after(TIMEOUT):
            await first.wait()
        tg.cancel_scope.cancel()
        if then is not None:
            then()


@pytest.mark.anyio
@ERAS
async def test_cancelling_a_call_that_waits_for_the_store_stores_nothing_and_the_load_goes_on(
    store: StubStore, mode: str
) -> None:
    gate = Gate(store)
    async with Client(build_server(gate), mode=mode) as client:
        await cancel_after_progress(client, {"content": "cancelled"})
        gate.opened.set()
        with anyio.fail_after(TIMEOUT):
            recent = await client.call_tool("list_recent", {})
            assert recent.structured_content == {"memories": []}
            assert (await client.call_tool("remember", {"content": "kept"})).structured_content["status"] == "stored"
    assert gate.builds == 1  # the cancelled call's load was the one the next calls used
    assert [m.content for m in store.memories.values()] == ["kept"]


class SlowWrites(StubStore):
    """add() tells `started`, then waits for `finish`: a write in progress when the cancellation comes."""

    def __init__(self) -> None:
        super().__init__()
        self.finish = threading.Event()
        self.finished = threading.Event()
        self.started: anyio.Event | None = None
        self.portal_token: Any = None

    def add(self, content: str, tags: Any = None, source: Any = None, **fields: Any) -> Memory:
        anyio.from_thread.run_sync(self.started.set, token=self.portal_token)  # type: ignore[union-attr]
        assert self.finish.wait(TIMEOUT)
        try:
            return super().add(content, tags, source, **fields)
        finally:
            self.finished.set()


@pytest.mark.anyio
async def test_cancelling_a_write_in_progress_lets_it_finish_whole() -> None:
    """The write already running in its worker thread completes (once); the server goes on serving.

    Handshake era only: in process at 2026-07-28 the SDK's DirectDispatcher runs the handler in the caller's own
    task, so a cancel there waits for the write and then returns its answer, which no transport does.
    """
    store = SlowWrites()
    store.started = anyio.Event()
    store.portal_token = anyio.lowlevel.current_token()
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        await cancel_after_progress(client, {"content": "written"}, started=store.started, then=store.finish.set)
        with anyio.fail_after(TIMEOUT):
            assert await anyio.to_thread.run_sync(store.finished.wait, TIMEOUT)  # no client can see this moment
            recent = (await client.call_tool("list_recent", {})).structured_content["memories"]
    assert [m["content"] for m in recent] == ["written"]


# --- logging ----------------------------------------------------------------------------------------------------


class LoggingStore(StubStore):
    """list_page (the list_recent tool's store call) logs what `logs` holds (in the worker thread serving the
    call), like the store does."""

    def __init__(self) -> None:
        super().__init__()
        self.logs: list[tuple[str, int, str]] = []  # (logger, level, message)

    def list_page(self, limit: int = 10, tags: Any = None, **filters: Any) -> Page:
        for name, level, message in self.logs:
            logging.getLogger(name).log(level, message)
        return super().list_page(limit, tags, **filters)


@pytest.fixture
def quiet() -> Any:
    """memserver logging at DEBUG (as with MEMSERVER_LOG_LEVEL=DEBUG), its records kept off stderr."""
    memserver = logging.getLogger("memserver")
    handler, level, propagate = logging.NullHandler(), memserver.level, memserver.propagate
    memserver.addHandler(handler)
    memserver.setLevel(logging.DEBUG)
    memserver.propagate = False
    yield
    memserver.removeHandler(handler)
    memserver.setLevel(level)
    memserver.propagate = propagate


async def set_level(client: Client, level: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        await client.set_logging_level(level)


@pytest.mark.anyio
async def test_a_calls_records_go_with_it_from_the_level_asked_for(quiet: None) -> None:
    store = LoggingStore()
    store.logs = [
        ("memserver.local.store", logging.INFO, "an info"),
        ("memserver.local.store", logging.WARNING, "a warning"),
    ]
    store.logs += [("memserver.local.store", logging.ERROR, "an error")]
    records = Records()
    async with Client(build_server(lambda user: store), mode="legacy", logging_callback=records) as client:
        with anyio.fail_after(TIMEOUT):
            await client.call_tool("list_recent", {})  # before any setLevel: warning and above
            await settle()
            default = records.data()
            records.items.clear()
            await set_level(client, "error")
            await client.call_tool("list_recent", {})
            await settle()
            errors_only = records.data()
            records.items.clear()
            await set_level(client, "debug")
            await client.call_tool("list_recent", {})
            await settle()
    assert default == [("warning", "a warning"), ("error", "an error")]
    assert errors_only == [("error", "an error")]
    assert records.data() == [("info", "an info"), ("warning", "a warning"), ("error", "an error")]
    assert {item.logger for item in records.items} == {"memserver.local.store"}


@pytest.mark.anyio
async def test_2026_07_28_sends_records_only_to_a_request_that_opted_in(quiet: None) -> None:
    store = LoggingStore()
    store.logs = [
        ("memserver.local.store", logging.INFO, "an info"),
        ("memserver.local.store", logging.WARNING, "a warning"),
    ]
    records = Records()
    async with Client(build_server(lambda user: store), mode="auto", logging_callback=records) as client:
        with anyio.fail_after(TIMEOUT):
            await client.call_tool("list_recent", {})
            await settle()
            assert records.items == []  # no opt-in: nothing (spec: MUST NOT)
            meta = {types.LOG_LEVEL_META_KEY: "warning"}
            await client.call_tool("list_recent", {}, meta=meta)  # type: ignore[arg-type]
            await settle()
            logging.getLogger("memserver.local.store").warning("outside any request")
            await settle()
    assert records.data() == [("warning", "a warning")]


@pytest.mark.anyio
@pytest.mark.parametrize("per_user", [False, True], ids=["one user", "per user"])
async def test_records_outside_requests_go_to_listening_clients_of_a_single_user_server(
    quiet: None, per_user: bool
) -> None:
    """After a setLevel, what the server logs outside any request (the store loading) reaches the client, unless
    the server keeps one store per user: then such records may concern someone else."""
    records = Records()
    server = build_server(lambda user: StubStore(), per_user=per_user)
    async with Client(server, mode="legacy", logging_callback=records) as client:
        with anyio.fail_after(TIMEOUT):
            await set_level(client, "info")
            logging.getLogger("memserver.loader").info("store ready")
            await settle()
            await client.list_tools()  # a round trip: anything sent before it has arrived
            await settle()
    assert records.data() == ([] if per_user else [("info", "store ready")])


@pytest.mark.anyio
async def test_only_memservers_content_free_loggers_are_forwarded_message_text_only(quiet: None) -> None:
    store = LoggingStore()
    store.logs = [
        ("memserver.transports.stdio", logging.WARNING, "ignoring a malformed message: 'my secret memory'"),
        ("memserver.local.columns", logging.WARNING, "'my secret memory' does not fit"),
        ("somelibrary", logging.ERROR, "not ours"),
        ("memserver.local.store", logging.WARNING, "ours"),
    ]
    records = Records()
    async with Client(build_server(lambda user: store), mode="legacy", logging_callback=records) as client:
        with anyio.fail_after(TIMEOUT):
            await client.call_tool("list_recent", {})
            store.fail = RuntimeError("disk on fire: /secret/path")
            await client.call_tool("list_recent", {})
            await settle()
    assert records.data() == [("warning", "ours"), ("warning", "ours"), ("error", "list_recent failed")]  # text only


@pytest.mark.anyio
async def test_a_log_storm_is_cut_and_counted(quiet: None) -> None:
    store = LoggingStore()
    store.logs = [("memserver.local.store", logging.WARNING, f"storm {i}") for i in range(500)]
    records = Records()
    async with Client(build_server(lambda user: store), mode="legacy", logging_callback=records) as client:
        with anyio.fail_after(TIMEOUT):
            assert not (await client.call_tool("list_recent", {})).is_error
            await settle()
    storm = [data for _, data in records.data() if data.startswith("storm")]
    notices = [data for _, data in records.data() if "not forwarded" in data]
    assert client_log.BURST <= len(storm) < 500
    assert all(notice.endswith(" log record(s) were not forwarded (more than 10 a second)") for notice in notices)
    assert sum(int(notice.split()[0]) for notice in notices) == 500 - len(storm)  # every one counted, by the answer


def test_every_memserver_logger_is_forwarded_or_deliberately_not() -> None:
    """Every module that logs is forwarded to clients by the prefix rule, but for the ones kept out on purpose: the
    columns (they can name user data), PostgreSQL's security warning, the transports and the CLI."""
    import re
    from pathlib import Path

    import memserver
    from memserver.features import client_log

    package = Path(memserver.__file__).parent
    logging_modules = {
        "memserver." + path.relative_to(package).with_suffix("").as_posix().replace("/", ".")
        for path in package.rglob("*.py")
        if re.search(r"getLogger\(__name__\)", path.read_text(encoding="utf-8"))
        and re.search(r"\b(log|logger)\.(info|warning|error|exception)\(", path.read_text(encoding="utf-8"))
    }
    kept_out = {name for name in logging_modules if not client_log.forwarded(name)}
    assert (
        kept_out
        == {
            "memserver.local.columns",
            "memserver.transports.wire",
            "memserver.transports.stdio",
            "memserver.transports.http",
            "memserver.transports.guard",
            "memserver.transports.limits",
            "memserver.transports.sse",
            "memserver.transports.bearer",
            "memserver.transports.oauth",
            "memserver.transports.introspection",
            "memserver.cli.command",
            "memserver.cli.demo",
        }
        & logging_modules
    )
    assert "memserver.local.folder" in logging_modules - kept_out
    assert not client_log.forwarded("memserver.local.columns")
    assert not client_log.forwarded("memserver.postgres.security")
    assert client_log.forwarded("memserver.local.columns_of_the_future")  # not the name, nor under it
    assert not client_log.forwarded("memserverx.local.store")
