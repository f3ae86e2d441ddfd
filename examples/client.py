"""A minimal MCP client for memserver, using the MCP Python SDK.

    uv run python examples/client.py                      # spawns memserver in a temporary store, talks stdio
    MEMSERVER_URL=http://127.0.0.1:8000/mcp MEMSERVER_TOKEN=... uv run python examples/client.py   # HTTP

It lists the tools, remembers a fact, recalls it, and reads the memory://stats resource. Over stdio the server
works in a temporary data directory (removed afterwards), so your own memories are not touched, and logs only
warnings; over HTTP the fact goes to the server's store (of the token's user). Any failure is one line on stderr.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url = os.environ.get("MEMSERVER_URL")
    if not url:
        # Spawn the server over stdio (this Python's memserver), in a store of its own, logging warnings only.
        with tempfile.TemporaryDirectory(prefix="memserver-example-") as data:
            env = {**os.environ, "MCP_MEMORY_PATH": data, "MEMSERVER_LOG_LEVEL": "WARNING"}
            await session(StdioServerParameters(command=sys.executable, args=["-m", "memserver"], env=env))
        return
    token = os.environ.get("MEMSERVER_TOKEN")
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as http:
        await session(streamable_http_client(url, http_client=http))


async def session(server: Any) -> None:
    async with Client(server, mode="legacy", read_timeout_seconds=120) as client:
        tools = await client.list_tools()
        print("tools:", ", ".join(tool.name for tool in tools.tools))

        fact = {"content": "The user's favourite tea is genmaicha.", "tags": ["tea"]}
        stored = await client.call_tool("remember", fact)
        print("remember ->", stored.structured_content)

        found = await client.call_tool("recall", {"query": "what tea does the user like?", "limit": 3})
        if found.is_error:
            sys.exit(f"recall failed: {found.content[0].text}")
        for hit in found.structured_content["results"]:
            print(f"  {hit['score']:.3f}  {hit['content']}")

        stats = await client.read_resource("memory://stats")
        print("stats:", json.dumps(json.loads(stats.contents[0].text), indent=2))


def first_error(exc: BaseException) -> BaseException:
    """The first leaf of an exception group (the SDK's task groups wrap what went wrong)."""
    while getattr(exc, "exceptions", None):  # (BaseExceptionGroup: a builtin from Python 3.11 on)
        exc = exc.exceptions[0]  # type: ignore[attr-defined]
    return exc


if __name__ == "__main__":
    try:
        anyio.run(main)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as exc:  # one line, not the SDK's traceback: what failed and what to do
        cause = first_error(exc)
        text = str(cause).splitlines()[0] if str(cause) else type(cause).__name__
        hint = ""
        if os.environ.get("MEMSERVER_URL") and not os.environ.get("MEMSERVER_TOKEN"):
            hint = " (a server with tokens refuses a request without one: set MEMSERVER_TOKEN)"
        sys.exit(f"client.py: error: {text}{hint}")
