"""The MCP server: `build_server()` returns an `mcp.server.lowlevel.Server` whose handlers answer the MCP methods.

Read it in protocol order: `initialized` (the end of the handshake; the SDK's runner answers `initialize`
itself), then `list_tools`, `call_tool`, `list_resources`, `list_resource_templates`, `read_resource`,
`list_prompts`, `get_prompt`, and the utilities `complete` and `set_logging_level`, each named after the method it
answers and passed to the `Server` constructor as `on_<name>=`. `forward_logs` wraps every request (middleware).
The capabilities in the `initialize` result follow from which handlers are passed: tools, resources, prompts,
completions, logging.

Errors land on three planes (see the SDK's "handling errors" guide):
  1. a tool call the model could get right next time (bad arguments, an InvalidInputError from the store)
     -> `CallToolResult(is_error=True)` with a message naming the field and the rule;
  2. a request for something that does not exist (unknown tool, resource, prompt or completion reference; a
     missing prompt argument) -> JSON-RPC error -32602;
  3. anything else is a bug or a failing disk -> traceback on stderr, a short isError result (tools) or -32603
     (resources, prompts, completions), and the server keeps serving. The SDK would otherwise send `str(exc)`
     with code 0.

Start-up never waits on the model or the index: this module imports neither, `initialize` and `tools/list` need
neither, and the store (with its embedder) is built in a background thread (memserver/loader.py) that starts
when the client completes the handshake (over HTTP, when the server starts). The first call that needs the store
waits for it, and tells a client that sent a `progressToken` what it is waiting for (`notifications/progress`).
A client's `notifications/cancelled` (on 2026-07-28 HTTP: closing the response stream) makes the SDK cancel the
handler: a wait for the store is abandoned (the store loads on for the next call); a store call already running
in its worker thread finishes (a write is all or nothing), and its answer is not sent. Blocking store calls run in
worker threads so the event loop keeps answering. The server never touches files itself.
"""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import mcp_types as types
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from memserver import __version__, client_log, completions, inputs, prompts, resources, tools
from memserver.errors import InvalidInputError, MemserverError, NotAuthenticatedError
from memserver.loader import TIMING, DefaultStoreFactory, StoreFactory, Stores, embedding_seconds

if TYPE_CHECKING:
    from memserver.backend import MemoryBackend

logger = logging.getLogger(__name__)

INSTRUCTIONS = (
    "memserver is the user's long-term memory, kept on their own machine. Call recall before answering when "
    "something the user said in an earlier conversation could matter (preferences, decisions, names, project "
    "facts); call remember when they tell you something worth keeping, one self-contained fact per call; call "
    "forget when they ask you to forget something or a memory turns out wrong."
)

# --- the handlers, in protocol order --------------------------------------------------------------------------------


@dataclass
class Lifespan:
    """What every handler reaches as `ctx.lifespan_context`: entered once per HTTP server, once per stdio connection.

    Per-session state lives here, keyed by session: the log levels (`logs`); resource subscriptions will too.
    """

    stores: Stores
    logs: client_log.ClientLog


Context = ServerRequestContext[Lifespan]


async def initialized(ctx: Context, params: types.NotificationParams) -> None:
    """notifications/initialized: the handshake is over, so the store and the model start loading now.

    Not earlier: loading holds the GIL for long stretches (hnswlib, numpy copies) and would delay the answer to
    `initialize`. Not later: the client's first tool call usually follows at once. (A call that comes first, or a
    client that never sends this notification, starts the loading itself.)
    """
    ctx.lifespan_context.stores.start()


async def list_tools(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    """tools/list: the four tools, with the schemas `call_tool` validates against."""
    return types.ListToolsResult(tools=list(tools.TOOLS))


async def call_tool(ctx: Context, params: types.CallToolRequestParams) -> types.CallToolResult:
    """tools/call: validate the arguments against the advertised schema, then run the tool in a worker thread."""
    tool = tools.TOOLS_BY_NAME.get(params.name)
    if tool is None:
        # Spec (tools, error handling): an unknown tool is a protocol error, not an isError result.
        raise MCPError(code=types.INVALID_PARAMS, message=f"Unknown tool: {params.name}")
    try:
        args = tools.validate_arguments(tool, params.arguments)
    except tools.ArgumentError as exc:
        # Spec: invalid arguments are a tool execution error, reported in the result so the model can correct them.
        return _tool_error(str(exc))
    started = time.perf_counter()
    timing: dict[str, float] = {}
    try:
        store = await _store(ctx)
        payload = await anyio.to_thread.run_sync(partial(_timed, _TOOL_WORK[tool.name], store, args, timing))
    except InvalidInputError as exc:
        return _tool_error(str(exc))
    except NotAuthenticatedError as exc:  # a per-user server, and the request names no user
        raise MCPError(code=types.INVALID_REQUEST, message=str(exc)) from None
    except MemserverError as exc:  # the model is missing, the store is locked, ...: the message says what to do
        logger.error("%s failed: %s", tool.name, exc)
        return _tool_error(f"{tool.name} failed: {exc}")
    except Exception:
        logger.exception("%s failed", tool.name)
        return _tool_error(f"{tool.name} failed because of an internal error in memserver; its log has the details")
    # Spec: structuredContent must match outputSchema; for older clients, the same JSON also goes in a text block.
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(payload, ensure_ascii=False))],
        structured_content=payload,
    )
    if TIMING:  # spec: _meta keys may carry a prefix ending in "/"
        timing["handler_ms"] = round((time.perf_counter() - started) * 1000, 3)
        result.meta = {"memserver/timing": timing}
    return result


async def list_resources(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListResourcesResult:
    """resources/list: the fixed resources (the per-tag and per-memory ones are templates)."""
    return types.ListResourcesResult(resources=list(resources.RESOURCES))


async def list_resource_templates(
    ctx: Context, params: types.PaginatedRequestParams | None
) -> types.ListResourceTemplatesResult:
    """resources/templates/list: memory://tags/{tag} and memory://memories/{id}."""
    return types.ListResourceTemplatesResult(resource_templates=list(resources.TEMPLATES))


async def read_resource(ctx: Context, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    """resources/read: parse the memory:// URI and read it from the store."""
    uri = str(params.uri)
    try:
        target = resources.parse(uri)
        store = await _store(ctx)
        text = await anyio.to_thread.run_sync(resources.read, store, target)
    except (resources.UnknownResourceError, InvalidInputError) as exc:
        # Spec (resources, error handling): a resource that does not exist is -32602, with the URI in data.
        raise MCPError(code=types.INVALID_PARAMS, message=str(exc), data={"uri": uri}) from None
    except NotAuthenticatedError as exc:
        raise MCPError(code=types.INVALID_REQUEST, message=str(exc)) from None
    except Exception:
        logger.exception("reading %s failed", uri)
        raise MCPError(
            code=types.INTERNAL_ERROR, message=f"Reading {uri} failed; the server log has the details"
        ) from None
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=uri, mime_type=resources.JSON, text=text)])


async def list_prompts(ctx: Context, params: types.PaginatedRequestParams | None) -> types.ListPromptsResult:
    """prompts/list: recall-context and remember-session, with their arguments."""
    return types.ListPromptsResult(prompts=list(prompts.PROMPTS))


async def get_prompt(ctx: Context, params: types.GetPromptRequestParams) -> types.GetPromptResult:
    """prompts/get: check the arguments, then build the prompt's messages from the store in a worker thread."""
    try:
        prompt = prompts.find(params.name)
        arguments = prompts.check_arguments(prompt, params.arguments)
    except (prompts.UnknownPromptError, prompts.PromptArgumentError) as exc:
        # Spec (prompts, error handling): an unknown prompt or a missing required argument is -32602.
        raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
    with _protocol_errors(f"Getting prompt {prompt.name}"):
        store = await _store(ctx)
        return await anyio.to_thread.run_sync(prompts.render, store, prompt, arguments)


async def complete(ctx: Context, params: types.CompleteRequestParams) -> types.CompleteResult:
    """completion/complete: values for a prompt argument or a template variable that start with what was typed."""
    try:
        target = completions.target(params.ref, params.argument.name)
    except completions.UnknownCompletionError as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
    with _protocol_errors("Completion"):
        store = await _store(ctx)
        completion = await anyio.to_thread.run_sync(completions.suggest, store, target, params.argument.value)
    return types.CompleteResult(completion=completion)


async def set_logging_level(ctx: Context, params: types.SetLevelRequestParams) -> types.EmptyResult:
    """logging/setLevel: send this client memserver's log records from `level` on (client_log.py says which).

    Deprecated in 2026-07-28 (SEP-2577): there a request opts in with _meta instead, and this is never called.
    """
    ctx.lifespan_context.logs.set_level(ctx, params.level)
    return types.EmptyResult()


async def forward_logs(ctx: Context, call_next: CallNext) -> HandlerResult:
    """Middleware around every request: what memserver logs while serving it goes to its client, before the answer."""
    logs = ctx.lifespan_context.logs
    with logs.scope(ctx) as route:
        result = await call_next(ctx)
        await logs.flush(route)
        return result


# --- the tools' work (blocking; runs in a worker thread) -------------------------------------------------------------


def _remember(store: MemoryBackend, args: dict[str, Any]) -> dict[str, Any]:
    memory = store.add(args["content"], tags=args.get("tags"), source=args.get("source"))
    payload: dict[str, Any] = {"id": memory.id, "status": "duplicate" if memory.duplicate else "stored"}
    similar = []
    for memory_id, score in memory.similar:
        other = store.get(memory_id)
        if other is not None:  # may have been forgotten meanwhile
            similar.append({"id": memory_id, "score": round(float(score), 4), "content": other.content})
    if similar:  # only when there is something to decide: the common answer stays two fields
        payload["similar"] = similar
    return payload


def _recall(store: MemoryBackend, args: dict[str, Any]) -> dict[str, Any]:
    hits = store.search(
        args["query"],
        limit=args["limit"],
        tags=args.get("tags"),
        source=args.get("source"),
        since=args.get("since"),
        until=args.get("until"),
        min_score=args.get("min_score"),
        mode=args["mode"],
        explain=args["explain"],
    )
    payload: dict[str, Any] = {"results": []}
    for hit in hits:
        result = {**hit.memory.to_dict(), "score": round(float(hit.score), 4)}
        if hit.explanation is not None:
            why = dict(hit.explanation)
            payload["query"] = why.pop("query", payload.get("query"))  # the query's side: once, not per result
            result["explain"] = why
        payload["results"].append(result)
    if payload.get("query") is None:
        payload.pop("query", None)
    note = _recall_note(args, [hit.score for hit in hits])
    if note:
        payload["note"] = note
    return payload


def _recall_note(args: dict[str, Any], scores: list[float]) -> str | None:
    """Say plainly when recall found nothing relevant, rather than let weak results pass for answers."""
    if not scores:
        if args["mode"] == "keyword":
            return "Nothing found: no memory shares a word with the query. Try mode 'hybrid' to search by meaning."
        why = []
        if any(args.get(name) is not None for name in ("tags", "source", "since", "until")):
            why.append("the filters (tags, source, since, until)")
        if args.get("min_score") is not None:
            why.append(f"min_score {args['min_score']}")
        return "Nothing found" + (": no memory passed " + " and ".join(why) if why else ": the memory is empty") + "."
    best = max(scores)
    if best < tools.WEAK_MATCH_SCORE:
        return (
            f"No strong match: the best score is {best:.2f}, in the range of unrelated text (below "
            f"{tools.WEAK_MATCH_SCORE}). These results are probably not about the query; do not rely on them."
        )
    return None


def _list_recent(store: MemoryBackend, args: dict[str, Any]) -> dict[str, Any]:
    memories = store.list_recent(limit=args["limit"], tags=args.get("tags"))
    return {"memories": [m.to_dict() for m in memories]}


def _forget(store: MemoryBackend, args: dict[str, Any]) -> dict[str, Any]:
    memory_id = args["memory_id"]
    if not inputs.is_memory_id(memory_id):  # contract: an id that names no memory is deleted: false, not an error
        return {"id": memory_id, "deleted": False}
    return {"id": memory_id, "deleted": bool(store.delete(memory_id))}


_TOOL_WORK: dict[str, Callable[[MemoryBackend, dict[str, Any]], dict[str, Any]]] = {
    tools.REMEMBER.name: _remember,
    tools.RECALL.name: _recall,
    tools.LIST_RECENT.name: _list_recent,
    tools.FORGET.name: _forget,
}


def _timed(
    run: Callable[[MemoryBackend, dict[str, Any]], dict[str, Any]],
    store: MemoryBackend,
    args: dict[str, Any],
    timing: dict[str, float],
) -> dict[str, Any]:
    """Run a tool's work; with TIMING, record embed_ms and work_ms into `timing` (in the worker thread)."""
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


@contextmanager
def _protocol_errors(what: str) -> Iterator[None]:
    """Failures answering a request that is not a tool call, as JSON-RPC errors without internals."""
    try:
        yield
    except InvalidInputError as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
    except NotAuthenticatedError as exc:  # a per-user server, and the request names no user
        raise MCPError(code=types.INVALID_REQUEST, message=str(exc)) from None
    except MemserverError as exc:  # the model is missing, the store is locked, ...: the message says what to do
        logger.error("%s failed: %s", what, exc)
        raise MCPError(code=types.INTERNAL_ERROR, message=f"{what} failed: {exc}") from None
    except Exception:
        logger.exception("%s failed", what)
        raise MCPError(code=types.INTERNAL_ERROR, message=f"{what} failed; the server log has the details") from None


def _tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


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
) -> Server[Lifespan]:
    """The memserver MCP server.

    Args:
        store_factory: builds a user's store; default `DefaultStoreFactory(data_dir)` (the real model).
            Tests pass one that uses a fake embedder.
        per_user: serve one store per authenticated user (HTTP with tokens); a request without a user is refused.
        data_dir: where the default factory keeps the memories (default: MCP_MEMORY_PATH or the platform's).
        load_at_start: start loading when the server starts (HTTP: clients come later) rather than when a client
            has finished the handshake (stdio: the client's `initialize` is already waiting on stdin).
    """
    stores = Stores(store_factory or DefaultStoreFactory(data_dir), per_user=per_user)

    @asynccontextmanager
    async def lifespan(server: Server[Lifespan]) -> AsyncIterator[Lifespan]:
        if load_at_start:
            stores.start()  # background: requests are answered meanwhile
        logs = client_log.ClientLog(per_user=per_user)
        try:
            yield Lifespan(stores=stores, logs=logs)
        finally:
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
            instructions=INSTRUCTIONS,
            lifespan=lifespan,
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_list_resources=list_resources,
            on_list_resource_templates=list_resource_templates,
            on_read_resource=read_resource,
            on_list_prompts=list_prompts,
            on_get_prompt=get_prompt,
            on_completion=complete,
            on_set_logging_level=set_logging_level,
        )
    # The lowlevel Server's constructor takes no handler for notifications/initialized; this is the SDK's way in.
    server.add_notification_handler("notifications/initialized", types.NotificationParams, initialized)
    server.middleware.append(forward_logs)
    return server
