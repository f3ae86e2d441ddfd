"""A minimal MCP client for memserver, using the MCP Python SDK.

    uv run python examples/client.py                      # spawns `uv run memserver` and talks stdio
    MEMSERVER_URL=http://127.0.0.1:8000/mcp MEMSERVER_TOKEN=... uv run python examples/client.py   # HTTP

It lists the tools, remembers a fact, recalls it, and reads the memory://stats resource.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client


async def main() -> None:
    url = os.environ.get("MEMSERVER_URL")
    if not url:
        # Spawn the server over stdio, inheriting the environment so MCP_MEMORY_PATH and friends reach it.
        await session(StdioServerParameters(command="uv", args=["run", "memserver"], env=dict(os.environ)))
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


if __name__ == "__main__":
    anyio.run(main)
