"""A bare `memserver` typed at a terminal says, in one line on stderr, that it speaks MCP over stdio (and where to
look instead), then serves as before: driven here through a pseudo-terminal as its stdin."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import IO

ROOT = Path(__file__).resolve().parents[2]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pty", "version": "1"}},
}


def line_of(stream: IO[bytes], deadline: float) -> bytes:
    """The next line of a pipe, bounded by a deadline (never a fixed sleep)."""
    seen = b""
    while time.monotonic() < deadline:
        ready, _, _ = select.select([stream], [], [], 1)
        if ready:
            chunk = os.read(stream.fileno(), 1)
            if not chunk:
                break
            seen += chunk
            if chunk == b"\n":
                return seen
    raise AssertionError(f"no line in time; got {seen!r}")


def test_a_bare_memserver_on_a_terminal_says_it_speaks_mcp_then_serves(tmp_path: Path) -> None:
    env = {**os.environ, "MCP_MEMORY_PATH": str(tmp_path / "data"), "MEMSERVER_LOG_LEVEL": "WARNING"}
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "memserver"], stdin=secondary, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        env=env, cwd=ROOT,
    )  # fmt: skip
    os.close(secondary)
    try:
        assert process.stdout is not None and process.stderr is not None
        deadline = time.monotonic() + 120
        hint = line_of(process.stderr, deadline).decode()
        assert "MCP over stdio" in hint and "memserver --help" in hint and "memserver demo" in hint
        os.write(primary, json.dumps(INITIALIZE).encode() + b"\n")  # the terminal hands it over as a line
        answer = json.loads(line_of(process.stdout, deadline))
        assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"]
    finally:
        process.terminate()
        process.wait(60)
        os.close(primary)
