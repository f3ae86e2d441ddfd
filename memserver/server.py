"""The MCP server: `build_server()` returns an `mcp.server.lowlevel.Server` whose handlers answer the MCP methods.

Read it in protocol order: `initialized` (the end of the handshake; the SDK's runner answers `initialize`
itself) and `discover` (2026-07-28's replacement for the handshake), then `list_tools`, `call_tool`,
`list_resources`, `list_resource_templates`, `read_resource`, `subscribe_resource`, `unsubscribe_resource` and
`subscriptions_listen`, `list_prompts`, `get_prompt`, and the utilities `complete` and `set_logging_level`, each
named after the method it answers and passed to the `Server` constructor as `on_<name>=`. `forward_logs` wraps
every request (middleware). The capabilities in the `initialize` result follow from which handlers are passed:
tools, resources (with `subscribe`), prompts, completions, logging; `listChanged` is false everywhere, since no
list ever changes while the server runs.

Two handlers talk back to the client outside a plain request/answer: subscriptions (subscriptions.py watches the
store for the lifespan and sends `notifications/resources/updated`), and `forget_matching`, which asks the user to
confirm before it forgets anything (elicitation: an `elicitation/create` request of the server's own in the
handshake era, an `input_required` answer in 2026-07-28).

Which tools: a `ToolSet` (features/tool_sets.py), the Tool constants `list_tools` shows and the work `call_tool`
runs for each. The default is MEMORY_TOOLS (tools.py: remember, recall, list_recent, forget, mark, forget_matching,
consolidate, answering structuredContent; and apps.py's browse_memories, answering text and linking the in-chat
browser, a ui:// page: MCP Apps); `memserver serve --tools chat` serves `chat_tools()` (chat.py: CleverChatty's
remember, recall, search_in_memory, answering plain text), whose work knows the connection a call comes from. With
--chat-condense, a chat recall asks the client's model to condense its block (`_condensed`: sampling/createMessage,
a request from the server to the client).

Errors land on three planes (see the SDK's "handling errors" guide):
  1. a tool call the model could get right next time (bad arguments, an InvalidInputError from the store)
     -> `CallToolResult(is_error=True)` with a message naming the field and the rule;
  2. a request for something that does not exist (unknown tool, resource, prompt or completion reference; a
     missing prompt argument) -> JSON-RPC error -32602 (for resources, listen, prompts and completions the handler's
     `with request_errors.resource_errors(...)` / `protocol_errors(...)` maps them: features/request_errors.py);
  3. anything else is a bug or a failing disk -> traceback on stderr, a short isError result (tools) or -32603
     (resources, prompts, completions), and the server keeps serving. The SDK would otherwise send `str(exc)`
     with code 0.

Start-up never waits on the model or the index: this module imports neither, `initialize` and `tools/list` need
neither, and the store (with its embedder) is built in a background thread (memserver/loader.py) that starts
when the client completes the handshake (over HTTP, when the server starts), beside a warm-up of what a first call
would pay for (`ToolSet.prepare`: the tools' argument validators, their work's module). The first call that needs
the store waits for it, and tells a client that sent a `progressToken` what it is waiting for
(`notifications/progress`).
A client's `notifications/cancelled` (on 2026-07-28 HTTP: closing the response stream) makes the SDK cancel the
handler: a wait for the store is abandoned (the store loads on for the next call); a store call already running
in its worker thread finishes (a write is all or nothing), and its answer is not sent. Blocking store calls run in
worker threads so the event loop keeps answering; a recall that the store can answer at once, when no other request
is in flight, is answered on the loop (`_nowait`). The server never touches files itself.
"""

from __future__ import annotations

import json
import logging
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.caching import CacheableMethod, CacheHint
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from memserver import __version__
from memserver.errors import CannotAskError, InvalidInputError, MemserverError, NotAuthenticatedError

# Only what `initialize` and `tools/list` need: the other features (chat, consolidating, forgetting, prompts,
# completions, tool_work) are imported by the handlers that use them, so start-up compiles none of them (issue 26).
from memserver.features import apps, client_log, request_errors, resources, tools
from memserver.features.subscriptions import Subscriptions
from memserver.features.tool_sets import MEMORY_TOOLS, ToolSet
from memserver.loader import TIMING, DefaultStoreFactory, StoreFactory, Stores, embedding_seconds

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend
    from memserver.features import chat
    from memserver.features.tool_sets import Payload

logger = logging.getLogger(__name__)
# Caching hints (SEP-2549, protocol 2026-07-28: ttlMs and cacheScope on these results; 2025-11-25 defines no cache
# hint for any list, and the SDK leaves them out of results on that wire). The tool, prompt and resource lists and
# server/discover are fixed for the life of the process and the same for every user: an hour, shareable. A read
# (resources/read) changes with every write and is the user's own: the SDK's default, 0 ms and private.
LISTS_TTL_MS = 3_600_000
CACHE_HINTS: dict[CacheableMethod, CacheHint] = {
    "tools/list": CacheHint(ttl_ms=LISTS_TTL_MS, scope="public"),
    "prompts/list": CacheHint(ttl_ms=LISTS_TTL_MS, scope="public"),
    "resources/list": CacheHint(ttl_ms=LISTS_TTL_MS, scope="public"),
    "resources/templates/list": CacheHint(ttl_ms=LISTS_TTL_MS, scope="public"),
    "server/discover": CacheHint(ttl_ms=LISTS_TTL_MS, scope="public"),
}
CONDENSE_SECONDS = 60.0  # how long a chat recall waits for the client's model to condense its block

# --- the handlers, in protocol order --------------------------------------------------------------------------------


@dataclass
class Lifespan:
    """What every handler reaches as `ctx.lifespan_context`: entered once per HTTP server, once per stdio connection.

    Per-session state lives here, keyed by session: the log levels (`logs`), the chat tool set's conversations (in
    its ToolSet), and the resource subscriptions (`subscriptions`, with the watch that tells the subscribers of
    changes).
    """

    stores: Stores
    logs: client_log.ClientLog
    tool_set: ToolSet
    subscriptions: Subscriptions
    in_flight: int = 0  # requests being answered now, every session's (`count_in_flight`)


Context = ServerRequestContext[Lifespan]


async def initialized(ctx: Context, params: types.NotificationParams) -> None:
    """notifications/initialized: the handshake is over, so the store and the model start loading now.

    Not earlier: loading holds the GIL for long stretches (hnswlib, numpy copies) and would delay the answer to
    `initialize`. Not later: the client's first tool call usually follows at once. (A call that comes first, or a
    client that never sends this notification, starts the loading itself.)
    """
    ctx.lifespan_context.stores.start()


async def discover(server: Server[Lifespan], ctx: Context, params: types.RequestParams) -> types.DiscoverResult:
    """server/discover (2026-07-28, which has no initialize): the SDK's answer, with `listChanged` made true to fact.

    The SDK sets `listChanged` wherever subscriptions/listen is served; our tools, resources and prompts never
    change, so it is false here as in the `initialize` result. (`subscribe` stays true: listen serves updates.)
    """
    capabilities = server.get_capabilities(protocol_version=ctx.protocol_version)
    for listed in (capabilities.tools, capabilities.resources, capabilities.prompts):
        if listed is not None:
            listed.list_changed = False
    return types.DiscoverResult(
        supported_versions=list(MODERN_PROTOCOL_VERSIONS), capabilities=capabilities, instructions=server.instructions
    )


async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    """tools/list: the tool set's tools (by default the memory tools), with the schemas `call_tool` validates
    against."""
    return types.ListToolsResult(tools=list(ctx.lifespan_context.tool_set.tools))


async def call_tool(
    ctx: Context, params: types.CallToolRequestParams
) -> types.CallToolResult | types.InputRequiredResult:
    """tools/call: validate the arguments against the advertised schema, then run the tool in a worker thread
    (forget_matching first asks the user: `forget_matching` below), or at once if it can (`_nowait`)."""
    tool_set = ctx.lifespan_context.tool_set
    tool = tool_set.find(params.name)
    if tool is None:
        # Spec (tools, error handling): an unknown tool is a protocol error, not an isError result.
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {request_errors.shown(params.name)}")
    try:
        args = tools.validate_arguments(tool, params.arguments, tool_set.checked.get(tool.name))
    except tools.ArgumentError as exc:
        # Spec: invalid arguments are a tool execution error, reported in the result so the model can correct them.
        return _tool_error(str(exc))
    started = time.perf_counter()
    timing: dict[str, float] = {}
    try:
        if tool is tools.FORGET_MATCHING:
            asked = await forget_matching(ctx, params, args)
            if isinstance(asked, types.InputRequiredResult):
                return asked
            payload: Payload = asked
        elif tool is tools.CONSOLIDATE:
            proposed = await consolidate(ctx, params, args)
            if isinstance(proposed, types.InputRequiredResult):
                return proposed
            payload = proposed
        else:
            store = await _store(ctx)
            answer = _nowait(ctx, tool.name, store, args, timing)
            if answer is None:
                work = tool_set.work(tool.name, _conversation(ctx))
                answer = await anyio.to_thread.run_sync(partial(_timed, work, store, args, timing))
            payload = answer
            if not isinstance(payload, dict | str):  # a chat.ContextBlock: --tools chat --chat-condense
                payload = await _condensed(ctx, payload)
    except (InvalidInputError, CannotAskError) as exc:
        return _tool_error(tools.in_tool_words(str(exc)))
    except NotAuthenticatedError as exc:  # a per-user server, and the request names no user
        raise MCPError(code=types.INVALID_REQUEST, message=str(exc)) from None
    except MemserverError as exc:  # the model is missing, the store is locked, ...: the message says what to do
        logger.error("%s failed: %s", tool.name, exc)
        return _tool_error(f"{tool.name} failed: {exc}")
    except Exception:
        logger.exception("%s failed", tool.name)
        return _tool_error(f"{tool.name} failed because of an internal error in memserver; its log has the details")
    if not (tool.annotations and tool.annotations.read_only_hint):
        ctx.lifespan_context.subscriptions.changed()  # subscribers hear of this write now, not at the next poll
    if isinstance(payload, str):  # the chat tools answer plain text (and have no outputSchema)
        result = types.CallToolResult(content=[types.TextContent(type="text", text=payload)])
    else:
        # Spec: structuredContent must match outputSchema; for older clients, the same JSON also goes in a text block.
        text = types.TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))
        links = _links(tool, payload) if isinstance(payload, dict) else []
        result = types.CallToolResult(content=[text, *links], structured_content=payload)
    if TIMING:  # spec: _meta keys may carry a prefix ending in "/"
        timing["handler_ms"] = round((time.perf_counter() - started) * 1000, 3)
        result.meta = {"memserver/timing": timing}
    return result


async def forget_matching(
    ctx: Context, params: types.CallToolRequestParams, args: dict[str, Any]
) -> dict[str, Any] | types.InputRequiredResult:
    """forget_matching: select what the filter matches, ask the person to confirm (elicitation), then forget
    exactly the memories they were shown, in one write; anything but an explicit yes forgets nothing.

    Handshake era: an elicitation/create request to the client, tied to this call, which waits for the answer.
    2026-07-28: a server sends no requests of its own (SEP-2322, multi round-trip requests): the call answers
    `input_required` with the question and a `requestState`, and the client calls again with the answer.
    """
    from memserver.features import forgetting  # (like every feature that initialize and tools/list do not need)

    store = await _store(ctx)
    selection = await anyio.to_thread.run_sync(store.select, forgetting.memory_filter(args), forgetting.SAMPLE)
    if not selection.count:
        return forgetting.outcome("nothing_matched", 0)
    if not forgetting.can_ask(ctx.session.client_capabilities):
        raise CannotAskError(forgetting.cannot_ask(selection))
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        answer = (params.input_responses or {}).get(forgetting.CONFIRM_FIELD)
        shown = forgetting.shown_digest(params.request_state)
        if not isinstance(answer, types.ElicitResult) or shown != forgetting.digest(selection.ids):
            # The first round, or the matching memories changed since the question: ask (again) about these.
            ask = types.ElicitRequest(params=forgetting.question(selection, args))
            return types.InputRequiredResult(
                input_requests={forgetting.CONFIRM_FIELD: ask}, request_state=forgetting.state(selection)
            )
    else:
        form = forgetting.question(selection, args)
        answer = None
        with anyio.move_on_after(forgetting.CONFIRM_SECONDS):
            try:
                answer = await ctx.session.elicit_form(form.message, form.requested_schema, ctx.request_id)
            except MCPError as exc:  # the client said elicitation, then failed to ask
                raise CannotAskError(forgetting.failed_to_ask(selection, exc.error.message)) from None
        if answer is None:
            return forgetting.outcome("unanswered", selection.count)
    if not forgetting.confirmed(answer):
        return forgetting.outcome(forgetting.refusal(answer), selection.count)
    forget = partial(store.delete_many, selection.ids, namespace=args.get("namespace"))
    forgotten = await anyio.to_thread.run_sync(forget)  # one write, exactly the ids the question counted
    return forgetting.outcome("forgotten", selection.count, forgotten)


async def consolidate(
    ctx: Context, params: types.CallToolRequestParams, args: dict[str, Any]
) -> dict[str, Any] | types.InputRequiredResult:
    """consolidate: the proposals, each applied on the person's yes (features/consolidating.py).

    Handshake era: elicitation/create per proposal, and sampling/createMessage for a merged text when the client
    offers it. 2026-07-28: the questions in one input_required result, the answers in the second call (no
    sampling: deprecated there, the longest member's text stands). A client without elicitation gets the
    proposals only: nothing is applied without an elicited yes (the CLI and the browser apply them).
    """
    from memserver.features import consolidating, forgetting

    store = await _store(ctx)
    capabilities = ctx.session.client_capabilities
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS and forgetting.can_ask(capabilities):
        answers = consolidating.answered(params.request_state, params.input_responses)
        if answers is None:  # the first round (or a stale one): ask about the proposals found now
            forms, state = await anyio.to_thread.run_sync(consolidating.questions, store, args)
            if not forms:
                return consolidating.outcome("nothing_to_do", [], 0, 0)
            asks: dict[str, types.InputRequest] = {pid: types.ElicitRequest(params=f) for pid, f in forms.items()}
            return types.InputRequiredResult(input_requests=asks, request_state=state)
        given = answers

        async def answer(proposal_id: str, form: types.ElicitRequestFormParams) -> types.ElicitResult | None:
            return given.get(proposal_id)

        return await consolidating.run(store, args, answer, None, only=sorted(given))
    legacy = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS and ctx.session.can_send_request

    async def ask(proposal_id: str, form: types.ElicitRequestFormParams) -> types.ElicitResult | None:
        with anyio.move_on_after(forgetting.CONFIRM_SECONDS):
            try:
                return await ctx.session.elicit_form(form.message, form.requested_schema, ctx.request_id)
            except MCPError as exc:  # the client said elicitation, then failed to ask: taken as no answer
                logger.warning("asking the user about a consolidation failed: %s", exc.error.message[:200])
        return None

    async def sample(system: str, text: str) -> str | None:
        return consolidating.merged_text(await _sampled(ctx, system, text, 400, consolidating.MERGE_SECONDS))

    can_ask = legacy and forgetting.can_ask(capabilities)
    can_sample = legacy and capabilities is not None and capabilities.sampling is not None
    return await consolidating.run(store, args, ask if can_ask else None, sample if can_sample else None)


async def list_resources(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    """resources/list: the fixed resources (the per-tag and per-memory ones are templates), and the tool set's
    ui:// pages."""
    return types.ListResourcesResult(resources=[*resources.RESOURCES, *ctx.lifespan_context.tool_set.app_resources])


async def list_resource_templates(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    """resources/templates/list: memory://tags/{tag} and memory://memories/{id} (every URI takes ?namespace=)."""
    return types.ListResourceTemplatesResult(resource_templates=list(resources.TEMPLATES))


async def read_resource(ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    """resources/read: parse the memory:// URI and read it from the store; a ui:// URI is a page (apps.py)."""
    uri = str(params.uri)
    if uri.startswith(apps.SCHEME):
        with request_errors.resource_errors(uri, "Reading"):
            page = apps.read(uri, ctx.lifespan_context.tool_set.app_resources)
        return types.ReadResourceResult(contents=[page])
    with request_errors.resource_errors(uri, "Reading"):
        target = resources.parse(uri)
        store = await _store(ctx)
        text = await anyio.to_thread.run_sync(resources.read, store, target)
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=resources.JSON, text=text)])


async def subscribe_resource(ctx: Context, params: types.SubscribeRequestParams) -> types.EmptyResult:
    """resources/subscribe: send this session notifications/resources/updated whenever the resource changes,
    whoever changes it (another process on the same store too: subscriptions.py watches the store).

    Replaced in 2026-07-28 by subscriptions/listen (SEP-2575); the SDK never calls this there.
    """
    uri = str(params.uri)
    key = client_log.connection_key(ctx)
    if ctx.request is not None and key is None:  # HTTP without a session: there is no stream to send updates on
        message = "resources/subscribe needs a session (stdio, or HTTP with sessions)"
        raise MCPError(code=types.INVALID_REQUEST, message=message)
    subscriptions = ctx.lifespan_context.subscriptions
    with request_errors.resource_errors(uri, "Subscribing to"):
        await _store(ctx)  # (a client that sent a progressToken hears what a first call waits for)
        if await subscriptions.subscribe(ctx.session, key, _user(ctx), uri):
            _when_connection_closes(ctx, partial(subscriptions.end_session, key))
    return types.EmptyResult()


async def unsubscribe_resource(ctx: Context, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    """resources/unsubscribe: no more updates of that resource for this session (none subscribed: no error).

    Replaced in 2026-07-28 by closing the subscriptions/listen stream (SEP-2575)."""
    ctx.lifespan_context.subscriptions.unsubscribe(client_log.connection_key(ctx), str(params.uri))
    return types.EmptyResult()


async def subscriptions_listen(
    ctx: Context, params: types.SubscriptionsListenRequestParams
) -> types.SubscriptionsListenResult:
    """subscriptions/listen (2026-07-28, SEP-2575: replaces resources/subscribe and unsubscribe): one request whose
    response stream first acknowledges the URIs honoured, then carries notifications/resources/updated for them
    until the client closes it. The SDK's ListenHandler serves the stream."""
    with request_errors.protocol_errors("Listening"):
        await _store(ctx)
        return await ctx.lifespan_context.subscriptions.listen(ctx, params, _user(ctx))


async def list_prompts(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    """prompts/list: recall-context and remember-session, with their arguments."""
    from memserver.features import prompts

    return types.ListPromptsResult(prompts=list(prompts.PROMPTS))


async def get_prompt(ctx: Context, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    """prompts/get: check the arguments, then build the prompt's messages from the store in a worker thread."""
    from memserver.features import prompts

    try:
        prompt = prompts.find(params.name)
        arguments = prompts.check_arguments(prompt, params.arguments)
    except (prompts.UnknownPromptError, prompts.PromptArgumentError) as exc:
        # Spec (prompts, error handling): an unknown prompt or a missing required argument is -32602.
        raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
    with request_errors.protocol_errors(f"Getting prompt {prompt.name}"):
        store = await _store(ctx)
        return await anyio.to_thread.run_sync(prompts.render, store, prompt, arguments)


async def complete(ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
    """completion/complete: values for a prompt argument or a template variable that start with what was typed."""
    from memserver.features import completions

    try:
        context = params.context.arguments if params.context is not None else None  # variables chosen already
        target = completions.target(params.ref, params.argument.name, context)
    except completions.UnknownCompletionError as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
    with request_errors.protocol_errors("Completion"):
        store = await _store(ctx)
        completion = await anyio.to_thread.run_sync(completions.suggest, store, target, params.argument.value)
    return types.CompleteResult(completion=completion)


async def set_logging_level(ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
    """logging/setLevel: send this client memserver's log records from `level` on (client_log.py says which).

    Deprecated in 2026-07-28 (SEP-2577): there a request opts in with _meta instead, and this is never called.
    """
    ctx.lifespan_context.logs.set_level(ctx, params.level)
    return types.EmptyResult()


async def count_in_flight(ctx: Context, call_next: CallNext) -> HandlerResult:
    """Middleware around every request: how many are being answered now (`_nowait` answers only the only one)."""
    lifespan = ctx.lifespan_context
    lifespan.in_flight += 1
    try:
        return await call_next(ctx)
    finally:
        lifespan.in_flight -= 1


async def forward_logs(ctx: Context, call_next: CallNext) -> HandlerResult:
    """Middleware around every request: what memserver logs while serving it goes to its client, before the answer."""
    logs = ctx.lifespan_context.logs
    with logs.scope(ctx) as route:
        result = await call_next(ctx)
        await logs.flush(route)
        return result


# --- the tools' work --------------------------------------------------------------------------------------------------


def _nowait(
    ctx: Context, name: str, store: MemoryBackend, args: dict[str, Any], timing: dict[str, float]
) -> Payload | None:
    """The answer of tool `name`, computed here on the event loop, if its work can run without waiting; else None
    (`call_tool` then runs it in a worker thread).

    Two conditions. The work must be in the tool set's `nowait` and the store must say it can answer at once
    (backend.SearchesNowait: no lock another thread or process holds, no catch-up, no reload; PostgreSQL never
    can), so nothing here waits on another process, the network or unbounded work. And this must be the only
    request in flight: the embedding of the query (3-10 ms) holds the loop, which is fine when nothing else is
    waiting for it and not when another request (a ping, a cancellation, another session's call) is. What it
    saves: the hop to a worker thread and the wake-up of the loop when it ends (benchmarks/README.md, finding 1).
    """
    nowait = ctx.lifespan_context.tool_set.nowait(name)
    if nowait is None or ctx.lifespan_context.in_flight > 1:
        return None
    return _timed(nowait, store, args, timing)


T = TypeVar("T")


def _timed(
    run: Callable[[MemoryBackend, dict[str, Any]], T],
    store: MemoryBackend,
    args: dict[str, Any],
    timing: dict[str, float],
) -> T:
    """Run a tool's work; with TIMING, record embed_ms and work_ms into `timing` (in the thread that runs it)."""
    if not TIMING:
        return run(store, args)
    with embedding_seconds() as embedded:
        started = time.perf_counter()
        payload = run(store, args)
        timing["work_ms"] = round((time.perf_counter() - started) * 1000, 3)
        timing["embed_ms"] = round(embedded() * 1000, 3)
    return payload


async def _store(ctx: Context) -> MemoryBackend:
    """The caller's store; while it is still loading, a client that sent a progressToken hears what it waits for."""
    step = 0

    async def waiting(stage: str) -> None:
        nonlocal step
        step += 1
        await ctx.session.report_progress(step, message=stage[:1].upper() + stage[1:])

    started = time.perf_counter()
    store = await ctx.lifespan_context.stores.get(_user(ctx), progress=waiting)
    if step:
        logger.info("%s waited %.1f s for the memory store to load", ctx.method, time.perf_counter() - started)
    return store


async def _condensed(ctx: Context, block: chat.ContextBlock) -> str:
    """sampling/createMessage: ask the client's model to condense a chat recall() block (--chat-condense).

    Only when the client declared the sampling capability and the request can carry a server-to-client request;
    the extractive block is the answer otherwise, and whenever the client refuses, fails, takes longer than
    CONDENSE_SECONDS, or answers something empty or over the budget.
    """
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.sampling is None or not ctx.session.can_send_request:
        return block.text
    system, text = block.sampling_request()
    condensed = await _sampled(ctx, system, text, max(64, block.budget // 3), CONDENSE_SECONDS)  # ~4 chars a token
    if not condensed or len(condensed) > block.budget:
        logger.warning("the client's condensed chat context was empty or over the budget; sending the extractive one")
        return block.text
    return condensed


async def _sampled(ctx: Context, system: str, text: str, max_tokens: int, seconds: float) -> str:
    """sampling/createMessage tied to this request: the client model's text answer, stripped; "" when it refuses,
    fails, takes longer than `seconds` or answers no text (logged). The caller checked the sampling capability."""
    try:
        with anyio.fail_after(seconds), warnings.catch_warnings():
            # Sampling is deprecated as of 2026-07-28 (SEP-2577); handshake-era clients still offer it.
            warnings.filterwarnings("ignore", category=MCPDeprecationWarning)
            answer = await ctx.session.create_message(
                [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=text))],
                max_tokens=max_tokens,
                system_prompt=system,
                related_request_id=ctx.request_id,  # over HTTP: on this call's response stream
            )
    except Exception as exc:  # MCPError, a timeout, a malformed answer
        logger.warning("asking the client's model (sampling) failed: %s", type(exc).__name__)
        return ""
    return answer.content.text.strip() if isinstance(answer.content, types.TextContent) else ""


def _links(tool: types.Tool, payload: dict[str, Any]) -> list[types.ResourceLink]:
    """recall's and list_recent's memories as resource links (spec 2025-11-25, tools: "resource_link" content) to
    memory://memories/{id}, which resources/read serves with the memory's history; after the JSON text block."""
    if tool is tools.RECALL:
        found = payload["results"]
    elif tool is tools.LIST_RECENT:
        found = payload["memories"]
    else:
        return []
    return [resources.memory_link(memory["id"], memory.get("namespace")) for memory in found]


def _tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def _conversation(ctx: Context) -> chat.Conversation:
    """The connection a call comes from: its user and its HTTP session id (None over stdio: the process is one)."""
    request = ctx.request
    session_id = request.headers.get("mcp-session-id") if request is not None else None
    return _user(ctx), session_id


def _when_connection_closes(ctx: Context, callback: Callable[[], None]) -> None:
    """Run `callback` when the connection of `ctx` closes, however it ends (the SDK's per-connection exit stack:
    stdio EOF, HTTP DELETE, idle expiry, shutdown).

    The low-level handler context has no way to the connection yet (SDK TODO L54; docs/upstream.md), so this takes
    the session's reference to it; if the SDK renames that, a session's subscriptions are dropped only when
    subscriptions.MAX_SESSIONS newer sessions push them out, and the server says so once.
    """
    stack = getattr(getattr(ctx.session, "_connection", None), "exit_stack", None)
    if isinstance(stack, AsyncExitStack):
        stack.callback(callback)
    elif not _NO_CLOSE_HOOK.is_set():
        _NO_CLOSE_HOOK.set()
        logger.warning("this MCP SDK gives no hook for a connection's end; subscriptions of closed sessions linger")


_NO_CLOSE_HOOK = threading.Event()


def _user(ctx: Context) -> str | None:
    """The user named by the request's bearer token (HTTP with tokens), else None."""
    request = ctx.request
    user = request.scope.get("user") if request is not None else None
    return user.access_token.client_id if isinstance(user, AuthenticatedUser) else None


# --- assembly ---------------------------------------------------------------------------------------------------------


def build_server(
    store_factory: StoreFactory | None = None,
    *,
    per_user: bool = False,
    data_dir: str | Path | None = None,
    load_at_start: bool = False,
    database: str | None = None,
    tool_set: ToolSet = MEMORY_TOOLS,
) -> Server[Lifespan]:
    """The memserver MCP server.

    Args:
        store_factory: builds a user's store; default `DefaultStoreFactory(data_dir)` (the real model).
            Tests pass one that uses a fake embedder.
        per_user: serve one store per authenticated user (HTTP with tokens); a request without a user is refused.
        data_dir: where the default factory keeps the memories (default: MCP_MEMORY_PATH or the platform's).
        load_at_start: start loading when the server starts (HTTP: clients come later) rather than when a client
            has finished the handshake (stdio: the client's `initialize` is already waiting on stdin).
        database: a postgresql:// URL: the default factory keeps the memories there instead of in data_dir.
        tool_set: the tools to serve: MEMORY_TOOLS (default), or `chat_tools(options)` (`--tools chat`).
    """
    factory = store_factory or DefaultStoreFactory(data_dir, database=database)
    stores = Stores(factory, per_user=per_user, warm_up=tool_set.prepare)

    @asynccontextmanager
    async def lifespan(server: Server[Lifespan]) -> AsyncIterator[Lifespan]:
        if load_at_start:
            stores.start()  # background: requests are answered meanwhile
        logs = client_log.ClientLog(per_user=per_user)
        subscriptions = Subscriptions(stores)
        try:
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(subscriptions.watch)  # idle (an event) while nothing is subscribed
                yield Lifespan(stores=stores, logs=logs, tool_set=tool_set, subscriptions=subscriptions)
                tasks.cancel_scope.cancel()
        finally:
            subscriptions.close()
            logs.close()
            await anyio.to_thread.run_sync(stores.close, abandon_on_cancel=True)

    with warnings.catch_warnings():
        # Logging is deprecated as of 2026-07-28 (SEP-2577) and the SDK warns when on_set_logging_level is passed;
        # handshake-era clients still use it. Only that warning is silenced, only here.
        warnings.filterwarnings("ignore", "The logging capability is deprecated", MCPDeprecationWarning)
        server = Server(
            "memserver",
            version=__version__,
            title="memserver",
            description="Long-term memory for MCP clients, searched by meaning, stored on this machine.",
            icons=[tools.ICON],
            instructions=tool_set.instructions,
            lifespan=lifespan,
            cache_hints=CACHE_HINTS,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_resource_templates,
            on_read_resource=read_resource,
            on_subscribe_resource=subscribe_resource,
            on_unsubscribe_resource=unsubscribe_resource,
            on_subscriptions_listen=subscriptions_listen,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_completion=complete,
            on_set_logging_level=set_logging_level,
        )
    # The lowlevel Server's constructor takes no handler for notifications/initialized; this is the SDK's way in.
    server.add_notification_handler("notifications/initialized", types.NotificationParams, initialized)
    server.add_request_handler("server/discover", types.RequestParams, partial(discover, server))
    server.middleware.extend([count_in_flight, forward_logs])
    if tool_set.app_resources:  # SEP-2133: the extensions a server speaks are in its capabilities
        server.extensions[apps.EXTENSION_ID] = {}
    return server
