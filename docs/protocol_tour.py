"""The JSON of the Protocol tour (docs/protocol.md), from a real session with memserver.

    uv run python docs/protocol_tour.py            # print the tour's blocks
    uv run python docs/protocol_tour.py --write    # rewrite them in docs/protocol.md

The session is memserver's own `build_server()` with the real store and model (in a temporary directory), served by
the SDK's `Server.run` over in-memory streams and driven with raw JSON-RPC messages: exactly the JSON a client
writes and reads on stdio, without the newlines. Two connections: one in the handshake era (2025-11-25), one in
2026-07-28. The store build is held (an event) until the tour has shown a call waiting for it and its
cancellation, so the messages come in the same order every time. Memory ids and times are replaced by fixed ones.

tests/test_docs.py runs `blocks()` and compares them with docs/protocol.md: the tour cannot drift from the server.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
from mcp.shared.message import SessionMessage

from memserver.loader import DefaultStoreFactory
from memserver.server import build_server

TOUR_PAGE = Path(__file__).resolve().parent / "protocol.md"
WIDTH = 116
FIXED_IDS = [
    "6b4479b22baa4f85aa10563792b1b5d1",
    "9c2f0d7e41a84b3f8e5d2c1b0a9f8e7d",
    "3e8a1f5c7b2d4e6f9a0b1c2d3e4f5a6b",
    "d1e2f3a4b5c6478d9e0f1a2b3c4d5e6f",
]
FIXED_TIME = "2026-11-30T09:30:00.000000+00:00"
CLIENT = {"name": "tour", "version": "1.0"}
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": CLIENT,
    "io.modelcontextprotocol/clientCapabilities": {},
}
MEMORIES = [
    ("Ana, the user's sister, lives in Porto and visits every August.", ["family"]),
    ("The user's team ships the mobile app on the first Monday of each month.", ["work", "release"]),
]


class HeldFactory:
    """The default store factory, held at the end of its build until `opened` is set (a StagedStoreFactory)."""

    def __init__(self, data_dir: Path) -> None:
        self.inner = DefaultStoreFactory(data_dir)
        self.report_stage: Callable[[str | None, str], None] = lambda user, stage: None
        self.reported = threading.Event()
        self.opened = threading.Event()

    def __call__(self, user: str | None) -> Any:
        self.report_stage(user, "loading the embedding model and opening the memory store")
        self.reported.set()
        store = self.inner(user)
        self.opened.wait(120)
        return store


class Connection:
    """One raw JSON-RPC connection to `server`; `exchange` records what the tour shows."""

    def __init__(self, send: Any, receive: Any, shown: dict[str, list[tuple[str, dict[str, Any]]]]) -> None:
        self._send, self._receive, self.shown = send, receive, shown
        self.block: list[tuple[str, dict[str, Any]]] = []
        self.backlog: list[dict[str, Any]] = []  # messages received while waiting for others, in arrival order

    def show(self, name: str) -> None:
        """Start the block called `name`: the messages sent and received from now on go into it."""
        self.block = self.shown.setdefault(name, [])

    async def send(self, message: dict[str, Any], *, shown: bool = True) -> None:
        message = {"jsonrpc": "2.0", **message}
        if shown:
            self.block.append(("client", message))
        await self._send.send(SessionMessage(types.jsonrpc_message_adapter.validate_python(message, by_name=False)))

    async def receive(self, wanted: Callable[[dict[str, Any]], bool], *, shown: bool = True) -> dict[str, Any]:
        """The first message `wanted` accepts, received now or earlier; the others wait in the backlog (log records
        the tour does not show, a notification that came before the answer it follows in the tour)."""
        with anyio.fail_after(120):
            while True:
                found = next((m for m in self.backlog if wanted(m)), None)
                if found is not None:
                    self.backlog.remove(found)
                    if shown:
                        self.block.append(("server", found))
                    return found
                item = await self._receive.receive()
                self.backlog.append(item.message.model_dump(by_alias=True, exclude_unset=True, mode="json"))

    async def call(self, request_id: int, method: str, params: dict[str, Any], *, shown: bool = True) -> Any:
        await self.send({"id": request_id, "method": method, "params": params}, shown=shown)
        return await self.receive(lambda m: m.get("id") == request_id, shown=shown)


async def tour(data_dir: Path) -> dict[str, list[tuple[str, dict[str, Any]]]]:
    factory = HeldFactory(data_dir)
    server = build_server(factory)
    shown: dict[str, list[tuple[str, dict[str, Any]]]] = {}

    async with anyio.create_task_group() as tg:

        async def connect() -> tuple[Connection, Any]:
            to_server, from_client = anyio.create_memory_object_stream[SessionMessage | Exception](32)
            to_client, from_server = anyio.create_memory_object_stream[SessionMessage](32)
            tg.start_soon(server.run, from_client, to_client, server.create_initialization_options())
            return Connection(to_server, from_server, shown), to_server

        old, old_input = await connect()
        old.show("initialize")
        hello = {"protocolVersion": "2025-11-25", "capabilities": {"elicitation": {}}, "clientInfo": CLIENT}
        await old.call(1, "initialize", hello)
        old.show("initialized")
        await old.send({"method": "notifications/initialized"})
        old.show("tools/list")
        listed = await old.call(2, "tools/list", {})
        del listed["result"]["tools"][1:]  # the first of five, to keep the tour short
        old.show("logging/setLevel")
        await old.call(3, "logging/setLevel", {"level": "info"})

        old.show("progress and cancellation")
        await anyio.to_thread.run_sync(factory.reported.wait, 120)
        content, tags = MEMORIES[0]
        remember = {"name": "remember", "arguments": {"content": content, "tags": tags}, "_meta": {"progressToken": 4}}
        await old.send({"id": 4, "method": "tools/call", "params": remember})
        await old.receive(lambda m: m.get("method") == "notifications/progress")
        await old.send({"method": "notifications/cancelled", "params": {"requestId": 4, "reason": "stopped by user"}})
        old.show("notifications/message")
        factory.opened.set()
        await old.receive(lambda m: m.get("method") == "notifications/message" and m["params"]["data"] == "store ready")

        old.show("tools/call")
        stored = await old.call(5, "tools/call", {"name": "remember", "arguments": {"content": content, "tags": tags}})
        old.show("resources/subscribe")
        await old.call(6, "resources/subscribe", {"uri": "memory://recent"})
        for n, (other, other_tags) in enumerate(MEMORIES[1:], 7):
            arguments = {"content": other, "tags": other_tags}
            await old.call(n, "tools/call", {"name": "remember", "arguments": arguments}, shown=False)
        old.show("notifications/resources/updated")
        await old.receive(lambda m: m.get("method") == "notifications/resources/updated")
        memory_id = stored["result"]["structuredContent"]["id"]
        old.show("resources/read")
        await old.call(10, "resources/read", {"uri": f"memory://memories/{memory_id}"})
        old.show("prompts/list")
        await old.call(11, "prompts/list", {})
        old.show("prompts/get")
        await old.call(12, "prompts/get", {"name": "recall-context", "arguments": {"topic": "where does Ana live?"}})
        old.show("prompts/get error")
        await old.call(13, "prompts/get", {"name": "recall-context", "arguments": {}})
        old.show("completion/complete")
        tag = {
            "ref": {"type": "ref/resource", "uri": "memory://tags/{tag}"},
            "argument": {"name": "tag", "value": "fa"},
        }
        await old.call(14, "completion/complete", tag)
        old.show("completion/complete id")
        typed = memory_id[:3]
        PREFIXES[typed] = memory_id
        memory = {
            "ref": {"type": "ref/resource", "uri": "memory://memories/{id}"},
            "argument": {"name": "id", "value": typed},
        }
        await old.call(15, "completion/complete", memory)

        old.show("elicitation/create")
        await old.send(
            {
                "id": 16,
                "method": "tools/call",
                "params": {"name": "forget_matching", "arguments": {"tags": ["release"]}},
            }
        )
        question = await old.receive(lambda m: m.get("method") == "elicitation/create")
        await old.send({"id": question["id"], "result": {"action": "accept", "content": {"confirm": True}}})
        await old.receive(lambda m: m.get("id") == 16 and "method" not in m)

        old.show("MCP Apps")
        listed = await old.call(17, "tools/list", {})
        listed["result"]["tools"] = [t for t in listed["result"]["tools"] if t["name"] == "browse_memories"]
        await old.call(18, "tools/call", {"name": "browse_memories", "arguments": {}})
        page = await old.call(19, "resources/read", {"uri": "ui://memserver/browser"})
        html = page["result"]["contents"][0]["text"]
        page["result"]["contents"][0]["text"] = f"{html[:60]}..."  # (the whole page is long)

        new, new_input = await connect()  # 2026-07-28: no initialize; every request carries the envelope
        new.show("server/discover")
        await new.call(1, "server/discover", {"_meta": MODERN_META})
        new.show("2026-07-28 request")
        meta = {**MODERN_META, "io.modelcontextprotocol/logLevel": "warning"}
        await new.call(2, "prompts/get", {"name": "remember-session", "arguments": {}, "_meta": meta})

        new.show("subscriptions/listen")
        listen = {"notifications": {"resourceSubscriptions": ["memory://stats"]}, "_meta": MODERN_META}
        await new.send({"id": 3, "method": "subscriptions/listen", "params": listen})
        await new.receive(lambda m: m.get("method") == "notifications/subscriptions/acknowledged")
        errand = {"content": "Pick up the bike from the repair shop on Friday.", "tags": ["errand"]}
        await new.call(4, "tools/call", {"name": "remember", "arguments": errand, "_meta": MODERN_META}, shown=False)
        await new.receive(lambda m: m.get("method") == "notifications/resources/updated")

        new.show("input_required")
        asking = {**MODERN_META, "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}
        forget = {"name": "forget_matching", "arguments": {"tags": ["errand"]}, "_meta": asking}
        first = await new.call(5, "tools/call", forget)
        yes = {"confirm": {"action": "accept", "content": {"confirm": True}}}
        again = {**forget, "inputResponses": yes, "requestState": first["result"]["requestState"]}
        await new.call(6, "tools/call", again)

        await new_input.aclose()
        await old_input.aclose()
    return shown


STORED_TIME = re.compile(r"(\d{4}-\d{2}-\d{2})T\d{2}:\d{2}:\d{2}\.\d{6}\+00:00")
PREFIXES: dict[str, str] = {}  # a memory id's first characters, as typed in a completion request -> the id
REQUEST_STATE = re.compile(r'(\\"selected\\": \\")[0-9a-f]{64}(\\", \\"asked\\": )[0-9.]+')
FIXED_STATE = r"\g<1>" + "5" * 64 + r"\g<2>" + "1796031000.0"  # a digest of the ids asked about, and when


def normalised(texts: dict[str, str]) -> dict[str, str]:
    """Memory ids and times (and the days they fall on, wherever they are quoted) replaced by fixed ones."""
    ids: dict[str, str] = {}
    days = {day for text in texts.values() for day in STORED_TIME.findall(text)}
    out = {}
    for name, text in texts.items():
        text = re.sub(r"\b[0-9a-f]{32}\b", lambda m: ids.setdefault(m.group(), FIXED_IDS[len(ids)]), text)
        for typed, memory_id in PREFIXES.items():
            if memory_id in ids:
                text = text.replace(f'"value": "{typed}"', f'"value": "{ids[memory_id][: len(typed)]}"')
        text = REQUEST_STATE.sub(FIXED_STATE, text)
        text = STORED_TIME.sub(FIXED_TIME, text)
        for day in days:
            text = text.replace(day, FIXED_TIME[:10])
        out[name] = text
    return out


def pretty(value: Any, indent: int = 0, room: int = WIDTH) -> str:
    """JSON with small objects on one line and big ones spread out."""
    one = json.dumps(value, ensure_ascii=False)
    if len(one) <= room or not isinstance(value, dict | list) or not value:
        return one
    inner = " " * (indent + 2)
    if isinstance(value, dict):
        parts = []
        for key, item in value.items():
            head = json.dumps(key, ensure_ascii=False) + ": "
            parts.append(inner + head + pretty(item, indent + 2, WIDTH - indent - 2 - len(head) - 1))
        return "{\n" + ",\n".join(parts) + "\n" + " " * indent + "}"
    parts = [inner + pretty(item, indent + 2, WIDTH - indent - 3) for item in value]
    return "[\n" + ",\n".join(parts) + "\n" + " " * indent + "]"


def blocks() -> dict[str, str]:
    """Each block of the tour: its name and its text, ready for a ```jsonc fence."""
    memserver = logging.getLogger("memserver")
    level = memserver.level
    memserver.setLevel(logging.INFO)  # what `memserver serve` logs by default (MEMSERVER_LOG_LEVEL=INFO)
    try:
        with tempfile.TemporaryDirectory(prefix="memserver-tour-") as data_dir:
            shown = anyio.run(tour, Path(data_dir))
    finally:
        memserver.setLevel(level)
    out: dict[str, str] = {}
    for name, messages in shown.items():
        lines = []
        for side, message in messages:
            lines.append("// client → server" if side == "client" else "// server → client")
            lines.append(pretty(message))
        out[name] = "\n".join(lines)
    return normalised(out)


def fence(name: str) -> re.Pattern[str]:
    """A tour block of docs/protocol.md: the marker line, the opening fence, the JSON (group 2), the closing fence."""
    return re.compile(rf"^(<!-- tour: {re.escape(name)} -->\n```jsonc\n)(.*?)(^```$)", re.DOTALL | re.MULTILINE)


def main() -> None:
    generated = blocks()
    if "--write" not in sys.argv:
        for name, text in generated.items():
            print(f"<!-- tour: {name} -->\n```jsonc\n{text}\n```\n")
        return
    page = TOUR_PAGE.read_text(encoding="utf-8")
    for name, text in generated.items():
        page, count = fence(name).subn(lambda m, text=text: m.group(1) + text + "\n" + m.group(3), page)
        if count != 1:
            raise SystemExit(f"docs/protocol.md has {count} blocks marked <!-- tour: {name} -->; expected 1")
    TOUR_PAGE.write_text(page, encoding="utf-8")
    print(f"rewrote {len(generated)} blocks in {TOUR_PAGE}")


if __name__ == "__main__":
    main()
