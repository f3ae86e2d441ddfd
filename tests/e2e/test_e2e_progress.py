"""Progress, cancellation and log forwarding end to end, while the store is still loading.

The server is tests/e2e/gated_server.py: memserver's own build_server and transports (stdio; HTTP with one store
per user), whose store build waits until the test writes into a FIFO. Every scenario runs the same three calls:

  1. remember, cancelled at its first notifications/progress: nothing is stored, the load goes on;
  2. remember while the test makes the load fail: an isError result, and its "remember failed" log record;
  3. remember, which retries the load; the test opens the gate: stored, with progress and an info log record
     ("tools/call waited ... for the memory store to load") at the level the client asked for.

Clients: the Python SDK's in both protocol eras over stdio and HTTP and over legacy SSE, the TypeScript SDK's
(handshake era) over all three, and raw JSON-RPC lines for the order on the wire (progress, then the call's log
record, then its answer). A stateless server (`--stateless`) gets a scenario of its own: there progress works and
cancellation does not.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import warnings
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal
from mcp import Client
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from tests.e2e import ts_client
from tests.e2e.gated_server import GATE_STAGE, release
from tests.e2e.servers import (
    GATED,
    ROOT,
    HttpServer,
    http_server,
    http_session,
    server_env,
    sse_session,
    stdio_session,
)

TIMEOUT = 60
CANCELLED = "A fact whose call was cancelled."
FAILED = "A fact stored on a failing load."
KEPT = "A fact stored once the gate opened."
USERS = {"sdk-legacy": "sdk-legacy-token-0123456789", "sdk-modern": "sdk-modern-token-0123456789"}
USERS |= {"ts": "ts-client-token-0123456789", "sdk-sse": "sdk-sse-token-0123456789", "ts-sse": "ts-sse-token-01234567"}
STAGES = {"Opening the memory store", GATE_STAGE[:1].upper() + GATE_STAGE[1:]}
INTERNAL = "remember failed because of an internal error in memserver; its log has the details"


class LogRecords:
    """The Client's logging_callback: every notifications/message params, and a bounded wait for one."""

    def __init__(self) -> None:
        self.items: list[types.LoggingMessageNotificationParams] = []
        self._changed: anyio.Event | None = None

    async def __call__(self, params: types.LoggingMessageNotificationParams) -> None:
        self.items.append(params)
        if self._changed is not None:
            self._changed.set()

    async def wait_for(self, wanted: Callable[[types.LoggingMessageNotificationParams], bool]) -> None:
        with anyio.fail_after(TIMEOUT):
            while not any(wanted(item) for item in self.items):
                self._changed = anyio.Event()
                await self._changed.wait()


async def three_calls(client: Client, gate: Path, records: LogRecords) -> dict[str, Any]:
    """The scenario of the module docstring, on a connected client whose store build waits on `gate`."""
    if client.protocol_version != "2026-07-28":
        with warnings.catch_warnings():  # the client's side of the deprecation (SEP-2577)
            warnings.simplefilter("ignore", MCPDeprecationWarning)
            await client.set_logging_level("info")
    seen: dict[str, Any] = {"progress": {}}

    first = anyio.Event()

    async def note(name: str, progress: float, message: str | None) -> None:
        seen["progress"].setdefault(name, []).append((progress, message))

    async def on_cancelled_progress(progress: float, total: float | None, message: str | None) -> None:
        await note("cancelled", progress, message)
        first.set()

    async with anyio.create_task_group() as tg:

        async def cancelled_call() -> None:
            await client.call_tool("remember", {"content": CANCELLED}, progress_callback=on_cancelled_progress)
            seen["cancelled_answered"] = True

        tg.start_soon(cancelled_call)
        with anyio.fail_after(TIMEOUT):
            await first.wait()
        tg.cancel_scope.cancel()  # the SDK client sends notifications/cancelled (or, on 2026-07-28 HTTP, hangs up)

    def opening(name: str, byte: bytes) -> Any:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            await note(name, progress, message)
            if len(seen["progress"][name]) == 1:
                await anyio.to_thread.run_sync(release, gate, byte)

        return on_progress

    with anyio.fail_after(TIMEOUT):
        seen["failed"] = await client.call_tool("remember", {"content": FAILED}, progress_callback=opening("f", b"f"))
        await records.wait_for(lambda r: r.level == "error" and r.data == "remember failed")
        seen["kept"] = await client.call_tool("remember", {"content": KEPT}, progress_callback=opening("k", b"x"))
        await records.wait_for(lambda r: r.level == "info" and "waited" in str(r.data))
        seen["recent"] = (await client.call_tool("list_recent", {})).structured_content
    return seen


def check(seen: dict[str, Any], records: list[types.LoggingMessageNotificationParams]) -> None:
    progress = seen["progress"]
    assert "cancelled_answered" not in seen
    assert progress["cancelled"][0][1] in STAGES  # says what the call is waiting for
    assert seen["failed"].is_error and seen["failed"].content[0].text == INTERNAL
    assert seen["kept"].structured_content["status"] == "stored"
    for name in ("f", "k"):
        assert {message for _, message in progress[name]} <= STAGES
        values = [value for value, _ in progress[name]]
        assert values == sorted(set(values)), "progress must increase"
    assert [m["content"] for m in seen["recent"]["memories"]] == [KEPT]  # the cancelled and the failed: not stored
    waited = [r for r in records if r.level == "info" and "waited" in str(r.data)]
    assert waited[0].logger == "memserver.server" and str(waited[0].data).startswith("tools/call waited ")


# --- the Python SDK's client --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
def test_over_stdio(portal: BlockingPortal, tmp_path: Path, mode: str) -> None:
    """stdio, both eras: progress while waiting, cancellation that stores nothing, log records at the asked level."""
    os.mkfifo(tmp_path / "default")
    records = LogRecords()
    gated = [*GATED, "stdio"]
    env = {"GATE_DIR": str(tmp_path)}
    options: dict[str, Any] = {"logging_callback": records, "log_level": "info"}
    with stdio_session(portal, tmp_path, tmp_path / "log", command=gated, mode=mode, env=env, **options) as live:
        assert live.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        seen = portal.call(three_calls, live.client, tmp_path / "default", records)
    check(seen, records.items)


@pytest.fixture(scope="module")
def gated_http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HttpServer, Path]]:
    """One gated HTTP server for the module (streamable HTTP and legacy SSE), one store (and FIFO) per user."""
    gates = tmp_path_factory.mktemp("gates")
    for user in USERS:
        os.mkfifo(gates / user)
    tokens = ",".join(f"{user}:{token}" for user, token in USERS.items())
    command = [*GATED, "http", "--sse"]
    with http_server(gates, command=command, GATE_DIR=str(gates), MEMSERVER_TOKENS=tokens) as running:
        yield running, gates


@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
def test_over_http(portal: BlockingPortal, gated_http: tuple[HttpServer, Path], mode: str) -> None:
    """Streamable HTTP, both eras (2026-07-28: cancelling closes the response stream)."""
    server, gates = gated_http
    user = "sdk-legacy" if mode == "legacy" else "sdk-modern"
    records = LogRecords()
    options: dict[str, Any] = {"logging_callback": records, "log_level": "info"}
    with http_session(portal, server.url, USERS[user], mode=mode, **options) as live:
        assert live.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
        seen = portal.call(three_calls, live.client, gates / user, records)
    check(seen, records.items)


def test_over_legacy_sse(portal: BlockingPortal, gated_http: tuple[HttpServer, Path]) -> None:
    """The legacy HTTP+SSE transport (handshake era only): progress, cancellation and log records on the session's
    stream, as over stateful streamable HTTP."""
    server, gates = gated_http
    records = LogRecords()
    with sse_session(portal, server.sse_url, USERS["sdk-sse"], logging_callback=records) as live:
        seen = portal.call(three_calls, live.client, gates / "sdk-sse", records)
    check(seen, records.items)


async def stateless_calls(client: Client, gate: Path, records: LogRecords) -> dict[str, Any]:
    """A failed load (with its error record), a call cancelled at its first progress, a call that opens the store;
    then the memories, once the cancelled call's work is done too."""
    seen: dict[str, Any] = {"progress": {}}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        try:
            await client.set_logging_level("info")
        except MCPError as exc:
            seen["set_level"] = exc.error

    def on_progress(name: str, byte: bytes | None, started: anyio.Event | None = None) -> Any:
        async def note(progress: float, total: float | None, message: str | None) -> None:
            seen["progress"].setdefault(name, []).append(message)
            if started is not None:
                started.set()
            if byte is not None and len(seen["progress"][name]) == 1:
                await anyio.to_thread.run_sync(release, gate, byte)

        return note

    with anyio.fail_after(TIMEOUT):
        seen["failed"] = await client.call_tool(
            "remember", {"content": FAILED}, progress_callback=on_progress("f", b"f")
        )
        await records.wait_for(lambda r: r.level == "error" and r.data == "remember failed")
        first = anyio.Event()
        async with anyio.create_task_group() as tg:
            tg.start_soon(
                partial(client.call_tool, progress_callback=on_progress("c", None, first)),
                "remember",
                {"content": CANCELLED},
            )
            await first.wait()
            tg.cancel_scope.cancel()
        seen["kept"] = await client.call_tool("remember", {"content": KEPT}, progress_callback=on_progress("k", b"x"))
        while True:  # the cancelled call goes on (and may finish after the kept one)
            recent = (await client.call_tool("list_recent", {})).structured_content
            seen["recent"] = sorted(m["content"] for m in recent["memories"])
            if len(seen["recent"]) >= 2:
                return seen
            await anyio.sleep(0.05)


def test_stateless_progress_comes_with_the_call_but_cancellation_does_not_reach_it(
    portal: BlockingPortal, tmp_path: Path
) -> None:
    """--stateless, handshake era, as docs/http.md says: a call's progress and its log records at warning and above
    come on its POST's own stream; logging/setLevel is refused (-32601, no session keeps a level); a cancelled call
    is not stopped (its notifications/cancelled is a POST of its own, served by a transport that knows nothing of
    the call): once the store opens, it stores its memory like any other."""
    os.mkfifo(tmp_path / "u")
    token = "stateless-gated-token-0123"
    command = [*GATED, "http", "--stateless"]
    records = LogRecords()
    with (
        http_server(tmp_path, command=command, GATE_DIR=str(tmp_path), MEMSERVER_TOKENS=f"u:{token}") as server,
        http_session(portal, server.url, token, logging_callback=records) as live,
    ):
        seen = portal.call(stateless_calls, live.client, tmp_path / "u", records)
    assert seen["set_level"].code == types.METHOD_NOT_FOUND and "stateless" in seen["set_level"].message
    assert seen["failed"].is_error and seen["failed"].content[0].text == INTERNAL
    assert all(set(messages) <= STAGES and messages for messages in seen["progress"].values())
    assert set(seen["progress"]) == {"f", "c", "k"}
    assert seen["kept"].structured_content["status"] == "stored"
    assert seen["recent"] == sorted([CANCELLED, KEPT])  # the cancelled call ran to its end
    assert not [r for r in records.items if r.level == "info"]  # below the default level: not forwarded


def test_stateless_2026_era_has_progress_cancellation_and_logs(portal: BlockingPortal, tmp_path: Path) -> None:
    """2026-07-28 is stateless by design (the SDK serves it on its per-request path whatever --stateless says):
    on a stateless server everything of the scenario works, cancellation (closing the response stream) included."""
    os.mkfifo(tmp_path / "u")
    token = "stateless-modern-token-012"
    records = LogRecords()
    options: dict[str, Any] = {"logging_callback": records, "log_level": "info"}
    with (
        http_server(
            tmp_path, command=[*GATED, "http", "--stateless"], GATE_DIR=str(tmp_path), MEMSERVER_TOKENS=f"u:{token}"
        ) as server,
        http_session(portal, server.url, token, mode="auto", **options) as live,
    ):
        assert live.protocol_version == "2026-07-28"
        seen = portal.call(three_calls, live.client, tmp_path / "u", records)
    check(seen, records.items)


# --- the TypeScript SDK's client ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ts_script() -> Path:
    return ts_client.install()


def check_ts(seen: dict[str, Any]) -> None:
    assert seen["cancelled"] is not None and seen["cancelledProgress"][0]["message"] in STAGES
    assert seen["failed"]["isError"] and seen["failed"]["content"][0]["text"] == INTERNAL
    assert seen["kept"]["structuredContent"]["status"] == "stored"
    assert {p["message"] for p in seen["keptProgress"]} <= STAGES
    assert [m["content"] for m in seen["recent"]["memories"]] == [KEPT]
    logs = [event["log"] for event in seen["events"] if "log" in event]
    assert any(log["level"] == "error" and log["data"] == "remember failed" for log in logs)
    assert any(log["level"] == "info" and str(log["data"]).startswith("tools/call waited ") for log in logs)


def test_typescript_client_over_stdio(ts_script: Path, tmp_path: Path) -> None:
    """The TypeScript SDK (AbortSignal cancellation, onprogress, setLoggingLevel) against the gated stdio server."""
    os.mkfifo(tmp_path / "default")
    env = server_env(tmp_path, GATE_DIR=str(tmp_path))
    config = {"scenario": "gated", "transport": "stdio", "command": GATED[0], "args": [*GATED[1:], "stdio"]}
    seen = ts_client.run(ts_script, {**config, "env": env, "cwd": str(ROOT), "gate": str(tmp_path / "default")})
    check_ts(seen)


def test_typescript_client_over_http(ts_script: Path, gated_http: tuple[HttpServer, Path]) -> None:
    """The TypeScript SDK over streamable HTTP (its records ride each POST's response stream)."""
    server, gates = gated_http
    config = {"scenario": "gated", "transport": "http", "url": server.url, "token": USERS["ts"]}
    check_ts(ts_client.run(ts_script, {**config, "gate": str(gates / "ts")}))


def test_typescript_client_over_legacy_sse(ts_script: Path, gated_http: tuple[HttpServer, Path]) -> None:
    """The TypeScript SDK's SSEClientTransport: its cancellation (notifications/cancelled) reaches the session."""
    server, gates = gated_http
    config = {"scenario": "gated", "transport": "sse", "url": server.sse_url, "token": USERS["ts-sse"]}
    check_ts(ts_client.run(ts_script, {**config, "gate": str(gates / "ts-sse")}))


# --- the wire itself --------------------------------------------------------------------------------------------


def test_on_the_wire_progress_then_the_calls_log_record_then_its_answer(tmp_path: Path) -> None:
    """Raw JSON-RPC over stdio: a progress notification names the wait; the call's log record precedes its answer."""
    os.mkfifo(tmp_path / "default")
    log = (tmp_path / "stderr.txt").open("w")
    process = subprocess.Popen(
        [*GATED, "stdio"],
        cwd=ROOT,
        env=server_env(tmp_path, GATE_DIR=str(tmp_path)),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=log,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(line) for line in process.stdout or ()], daemon=True).start()

    def send(message: dict[str, Any]) -> None:
        assert process.stdin is not None
        process.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        process.stdin.flush()

    def until(request_id: int) -> list[dict[str, Any]]:
        got: list[dict[str, Any]] = []
        while not got or got[-1].get("id") != request_id:
            got.append(json.loads(lines.get(timeout=TIMEOUT)))
        return got

    info = {"name": "raw", "version": "0"}
    try:
        send(
            {
                "id": 1,
                "method": "initialize",
                "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info},
            }
        )
        until(1)
        send({"method": "notifications/initialized"})
        send({"id": 2, "method": "logging/setLevel", "params": {"level": "info"}})
        assert until(2)[-1]["result"] == {}
        remember = {"name": "remember", "arguments": {"content": KEPT}, "_meta": {"progressToken": "p-1"}}
        send({"id": 3, "method": "tools/call", "params": remember})
        progress = json.loads(lines.get(timeout=TIMEOUT))
        assert progress["method"] == "notifications/progress"
        assert progress["params"]["progressToken"] == "p-1" and progress["params"]["message"] in STAGES
        release(tmp_path / "default", b"x")
        rest = until(3)
    finally:
        if process.stdin:
            process.stdin.close()
        process.wait(TIMEOUT)
        log.close()
    methods = [m.get("method", "answer") for m in rest]
    assert methods[-1] == "answer" and rest[-1]["result"]["structuredContent"]["status"] == "stored"
    records = [m["params"] for m in rest if m.get("method") == "notifications/message"]
    assert any(r["level"] == "info" and r["data"].startswith("tools/call waited ") for r in records), methods
    assert set(methods[:-1]) <= {"notifications/progress", "notifications/message"}
