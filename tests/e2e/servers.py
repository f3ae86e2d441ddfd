"""Helpers for the end-to-end tests: real `memserver serve` processes (real store, real model) driven by the MCP
SDK's client. Sessions live on a background event loop (an anyio blocking portal) so a module can share one
server process across plain synchronous tests; every wait is bounded (anyio.fail_after, request timeouts, or a
deadline on the process)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
from anyio.from_thread import BlockingPortal
from mcp import Client, StdioServerParameters
from mcp.client.sse import sse_client
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client

TIMEOUT = 60.0  # the first call of a fresh server may wait for the model to load
START_TIMEOUT = 180.0  # until a server announces its URL: imports alone can take a minute on a loaded machine
SERVE = [sys.executable, "-m", "memserver", "serve"]
ROOT = Path(__file__).resolve().parents[2]
GATED = [sys.executable, "-m", "tests.e2e.gated_server"]  # + "stdio" or "http"; run from ROOT


def server_env(data_dir: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSERVER_TOKEN", "MCP_MEMORY_"))}
    env.update(MCP_MEMORY_PATH=str(data_dir), MEMSERVER_LOG_LEVEL="INFO", **extra)
    return env


class Live:
    """A connected MCP `Client`, called from synchronous code: `live.call_tool("recall", {...})`."""

    def __init__(self, portal: BlockingPortal, client: Client) -> None:
        self.portal = portal
        self.client = client

    def __getattr__(self, name: str) -> Any:
        method = getattr(self.client, name)
        if not callable(method):
            return method

        def call(*args: Any, **kwargs: Any) -> Any:
            async def bounded() -> Any:
                with anyio.fail_after(TIMEOUT):
                    return await method(*args, **kwargs)

            return self.portal.call(bounded)

        return call


@asynccontextmanager
async def _connected(transport: Any, mode: str = "legacy", **options: Any) -> AsyncIterator[Client]:
    # mode="legacy": the initialize handshake, as desktop clients do it today; "auto" discovers 2026-07-28.
    async with Client(transport, mode=mode, read_timeout_seconds=TIMEOUT, **options) as client:
        yield client


@contextmanager
def stdio_session(
    portal: BlockingPortal,
    data_dir: Path,
    log: Path,
    *,
    command: Sequence[str] = SERVE,
    mode: str = "legacy",
    env: dict[str, str] | None = None,
    **options: Any,
) -> Iterator[Live]:
    """Spawn `memserver serve` (stdio; or `command`) on `data_dir` and connect to it; its stderr goes to `log`.

    `mode` and `options` go to the SDK's Client (mode="auto" discovers 2026-07-28; logging_callback=...)."""
    params = StdioServerParameters(
        command=command[0], args=list(command[1:]), env=server_env(data_dir, **(env or {})), cwd=ROOT
    )
    with log.open("a") as errlog:
        connected = _connected(stdio_client(params, errlog), mode, **options)
        with portal.wrap_async_context_manager(connected) as client:
            yield Live(portal, client)


@asynccontextmanager
async def _http_connected(url: str, token: str | None, mode: str = "legacy", **options: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(TIMEOUT)) as http,
        _connected(streamable_http_client(url, http_client=http), mode, **options) as client,
    ):
        yield client


@contextmanager
def http_session(
    portal: BlockingPortal, url: str, token: str | None = None, *, mode: str = "legacy", **options: Any
) -> Iterator[Live]:
    with portal.wrap_async_context_manager(_http_connected(url, token, mode, **options)) as client:
        yield Live(portal, client)


@asynccontextmanager
async def _sse_connected(url: str, token: str | None, **options: Any) -> AsyncIterator[Client]:
    headers = {"Authorization": f"Bearer {token}"} if token else None
    async with _connected(sse_client(url, headers=headers, timeout=TIMEOUT), "legacy", **options) as client:
        yield client


@contextmanager
def sse_session(portal: BlockingPortal, url: str, token: str | None = None, **options: Any) -> Iterator[Live]:
    """The SDK's client over the legacy HTTP+SSE transport (`url`: the server's /sse); handshake era only."""
    with portal.wrap_async_context_manager(_sse_connected(url, token, **options)) as client:
        yield Live(portal, client)


@dataclass
class HttpServer:
    process: subprocess.Popen[str]
    url: str
    log: list[str] = field(default_factory=list)
    logged: threading.Condition = field(default_factory=threading.Condition)  # notified on each line of `log`

    def wait_for_log(self, text: str, timeout: float = TIMEOUT) -> str:
        """The first line of the server's stderr holding `text`, waiting up to `timeout` for it to be written."""
        with self.logged:
            if not self.logged.wait_for(lambda: any(text in line for line in self.log), timeout):
                raise AssertionError(f"the server did not log {text!r}; it logged:\n" + "".join(self.log[-30:]))
            return next(line for line in self.log if text in line)

    @property
    def sse_url(self) -> str:
        """The legacy HTTP+SSE endpoint of a server started with --sse."""
        return self.url.removesuffix("/mcp") + "/sse"


@contextmanager
def http_server(data_dir: Path, *args: str, command: Sequence[str] | None = None, **env: str) -> Iterator[HttpServer]:
    """Run `memserver serve --http --port 0 ARGS` (or `command`) and yield it once it prints its URL."""
    command = [*SERVE, "--http", "--port", "0", *args] if command is None else list(command)
    with _spawned(command, r"serving MCP at (\S+)", server_env(data_dir, **env)) as (process, url, lines, logged):
        yield HttpServer(process, url, lines, logged)


@contextmanager
def round_robin(*upstreams: str) -> Iterator[str]:
    """A proxy (tests/e2e/round_robin.py) that sends each request to the next of `upstreams` (base URLs, no path)
    in turn; yields its base URL."""
    command = [sys.executable, "-m", "tests.e2e.round_robin", *upstreams]
    with _spawned(command, r"proxying at (\S+)", dict(os.environ)) as (_, url, _lines, _logged):
        yield url


@contextmanager
def _spawned(
    command: Sequence[str], announcement: str, env: dict[str, str]
) -> Iterator[tuple[subprocess.Popen[str], str, list[str], threading.Condition]]:
    """Run `command` from ROOT; yield it, the URL its stderr announces, its stderr lines and the condition notified
    on each line; stop it afterwards."""
    process = subprocess.Popen(
        list(command),
        cwd=ROOT,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    logged = threading.Condition()
    found = threading.Event()
    url: list[str] = []

    def drain() -> None:  # keep reading so the pipe never fills; remember the URL line
        assert process.stderr is not None
        for line in process.stderr:
            with logged:
                lines.append(line)
                logged.notify_all()
            match = re.search(announcement, line)
            if match and not url:
                url.append(match.group(1))
                found.set()
        found.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        if not found.wait(START_TIMEOUT) or not url:
            try:
                how = f"exited with status {process.wait(5)}"
            except subprocess.TimeoutExpired:
                how = f"no URL announced within {START_TIMEOUT:g} s"
            raise RuntimeError(f"{' '.join(command[:6])} did not start ({how}):\n" + "".join(lines))
        yield process, url[0], lines, logged
    finally:
        process.terminate()
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)


def timed(fn: Any, *args: Any) -> tuple[Any, float]:
    start = time.perf_counter()
    result = fn(*args)
    return result, time.perf_counter() - start
