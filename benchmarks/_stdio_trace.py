"""`memserver serve` with a perf_counter_ns stamp at each boundary of the stdio path (stdio_path.py --trace).

Run as a script, with the checkout to trace as the working directory: `python PATH/_stdio_trace.py DATA_DIR OUT`.
The stamps wrap functions of memserver's stdio transport and of the MCP SDK (its dispatcher and runner) from outside;
both sides' code is unchanged. Each inbound line's stamps go to OUT (JSON lines) when the server exits. The clock is
CLOCK_MONOTONIC, the client's too, so a stamp can be compared with the client's send and receive times.
"""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
from typing import Any

sys.path.insert(0, os.getcwd())  # the checkout under test, not this script's

ns = time.perf_counter_ns
_records: list[tuple[bytes, dict[str, int]]] = []
_current: dict[str, int] | None = None


def stamp(name: str) -> None:
    """The first time `name` is passed for the line being served."""
    if _current is not None and name not in _current:
        _current[name] = ns()


def _dump(out: str) -> None:
    with open(out, "w") as f:
        for line, stamps in _records:
            try:
                request_id = json.loads(line).get("id")
            except (ValueError, AttributeError):
                request_id = None
            f.write(json.dumps({"id": request_id, "stamps": stamps}) + "\n")


def _wrap_async(owner: Any, name: str, before: str | None, after: str | None = None) -> None:
    original = getattr(owner, name)

    async def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before:
            stamp(before)
        result = await original(*args, **kwargs)
        if after:
            stamp(after)
        return result

    setattr(owner, name, wrapped)


def _wrap(owner: Any, name: str, before: str | None, after: str | None) -> None:
    original = getattr(owner, name)

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        if before:
            stamp(before)
        result = original(*args, **kwargs)
        if after:
            stamp(after)
        return result

    setattr(owner, name, wrapped)


def install() -> None:
    from mcp.server import runner
    from mcp.shared import jsonrpc_dispatcher

    from memserver import server
    from memserver.transports import stdio, wire

    read_line = stdio._read_pipe_line

    async def traced_read_line(reader: Any, limit: int) -> Any:
        global _current
        line = await read_line(reader, limit)
        _current = {"line": ns()}
        _records.append((bytes(line) if isinstance(line, bytes) else b"", _current))
        return line

    stdio._read_pipe_line = traced_read_line
    _wrap(wire, "inspect", None, "inspected")
    _wrap(wire, "encode", "encode", "encoded")
    pipe_writer = stdio._pipe_writer

    def traced_pipe_writer(writer: Any) -> Any:
        write = pipe_writer(writer)

        async def traced_write(data: bytes) -> None:
            await write(data)
            stamp("written")

        return traced_write

    stdio._pipe_writer = traced_pipe_writer
    dispatcher = jsonrpc_dispatcher.JSONRPCDispatcher
    _wrap_async(dispatcher, "_dispatch_request", "sdk_dispatch")
    _wrap_async(dispatcher, "_handle_request", "sdk_task")
    _wrap_async(dispatcher, "_write_result", "sdk_write_result")
    _wrap_async(runner.ServerRunner, "_on_request", "sdk_on_request")
    _wrap(runner.ServerRunner, "_serialize", "handler_done", "sdk_serialized")
    _wrap_async(server, "count_in_flight", "our_middleware")
    _wrap_async(server, "call_tool", "handler")


if __name__ == "__main__":
    data_dir, out = sys.argv[1], sys.argv[2]
    atexit.register(_dump, out)
    install()
    sys.argv = ["memserver", "serve", "--data-dir", data_dir]
    from memserver.cli.command import main

    main()
