"""`memserver demo`: the whole product in one command, through the same path a desktop client uses.

It starts `memserver serve` as a subprocess, talks to it over stdio with the MCP SDK's client, stores five sample
memories with `remember` and asks `recall` "what should I read next?", printing the top three with their scores.
Going through a real MCP session rather than calling the store directly costs about a second (the SDK's import
in the client), and in exchange proves what a user installing memserver wants to know: that a client can start
the server, find its tools and get answers.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SAMPLES: tuple[dict[str, object], ...] = (
    {
        "content": "I'm halfway through 'Designing Data-Intensive Applications' and want to finish it before "
        "starting another book.",
        "tags": ["reading"],
    },
    {
        "content": "Sam recommended 'The Pragmatic Programmer' as the next book to read after my current one.",
        "tags": ["reading", "recommendation"],
    },
    {"content": "Team standup moved to 9:30 on Tuesdays and Thursdays.", "tags": ["work"]},
    {"content": "I take my coffee black, dark roast, and avoid oat milk.", "tags": ["preference"]},
    {"content": "The memserver project uses uv; run its tests with `uv run pytest`.", "tags": ["project"]},
)
QUERY = "what should I read next?"


def cmd_demo(args: argparse.Namespace) -> int:
    """Store five sample memories and recall "what should I read next?" through a real MCP session."""
    return run_demo(args.data_dir)


def run_demo(data_dir: str | None = None) -> int:
    """Run the demo in `data_dir` (default: a temporary directory, removed afterwards). Returns the exit status."""
    import anyio

    temporary = data_dir is None
    path = Path(tempfile.mkdtemp(prefix="memserver-demo-")) if data_dir is None else Path(data_dir).absolute()
    try:
        print(f"memserver demo: data directory {path}{' (temporary)' if temporary else ''}")
        return anyio.run(_session, path)
    finally:
        if temporary:
            shutil.rmtree(path, ignore_errors=True)


async def _session(path: Path) -> int:
    from mcp import Client, StdioServerParameters

    env = {**os.environ, "MEMSERVER_LOG_LEVEL": os.environ.get("MEMSERVER_LOG_LEVEL", "WARNING")}
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memserver", "serve", "--data-dir", str(path)], env=env
    )
    started = time.perf_counter()
    async with Client(params, mode="legacy", read_timeout_seconds=120) as client:
        ready = time.perf_counter() - started
        tools = await client.list_tools()
        print(f"started `memserver serve` over stdio; tools: {', '.join(t.name for t in tools.tools)}\n")
        for sample in SAMPLES:
            result = await client.call_tool("remember", dict(sample))
            if result.is_error or result.structured_content is None:
                print(f"memserver: remember failed: {_text(result)}", file=sys.stderr)
                return 1
            status = result.structured_content["status"]
            print(f"  remember  {status:<9}  {sample['content']}")
        asked = time.perf_counter()
        result = await client.call_tool("recall", {"query": QUERY, "limit": 3})
        answered = time.perf_counter() - asked
        if result.is_error or result.structured_content is None:
            print(f"memserver: recall failed: {_text(result)}", file=sys.stderr)
            return 1
        print(f'\nrecall "{QUERY}"  (score = cosine similarity)')
        for rank, hit in enumerate(result.structured_content["results"], 1):
            print(f"  {rank}. {hit['score']:.3f}  {hit['content']}")
    print(f"\nserver answered initialize {ready:.1f} s after spawn; the recall took {answered * 1000:.0f} ms.")
    return 0


def _text(result: Any) -> str:
    """The text of a tool result's first content block (what an error result says)."""
    block = result.content[0] if result.content else None
    return str(getattr(block, "text", block))
