"""Which tools a server serves: a `ToolSet` pairs the Tool constants `tools/list` shows with the work each
`tools/call` runs, so server.py's handlers stay the same whatever the set.

Two sets: MEMORY_TOOLS (tools.py: remember, recall, list_recent, forget, mark, forget_matching, consolidate; and
apps.py's browse_memories, whose page is among its `app_resources`), the default; and `chat_tools()` (chat.py:
CleverChatty's remember, recall, search_in_memory), `memserver serve --tools chat`, whose work depends on the
connection a call comes from (its conversation). The work's modules are imported at the first call, not here:
`initialize` and `tools/list` need none of them (issue 26, start-up).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import mcp_types as types

from memserver.features import apps, tools

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend
    from memserver.features import chat

    Payload = dict[str, Any] | str | chat.ContextBlock  # structured JSON, plain text, or a block to condense
    Work = Callable[[MemoryBackend, dict[str, Any]], Payload]
    NowaitWork = Callable[[MemoryBackend, dict[str, Any]], Payload | None]  # None: it would wait; run the Work

INSTRUCTIONS = (
    "memserver is the user's long-term memory, kept on their own machine. Call recall before answering when "
    "something the user said in an earlier conversation could matter (preferences, decisions, names, project "
    "facts); call remember when they tell you something worth keeping, one self-contained fact per call; call "
    "forget when they ask you to forget something or a memory turns out wrong."
)


@dataclass(frozen=True)
class ToolSet:
    """The tools a server serves, and the work each call runs.

    (forget_matching is no work of a worker thread: `call_tool` runs it, since it asks the user first.) `nowait`:
    read-only work that `call_tool` may run on the event loop, sparing the hop to a worker thread and back, when
    the store can answer at once.
    """

    name: str
    tools: tuple[types.Tool, ...]
    work: Callable[[str, chat.Conversation], Work]
    instructions: str
    nowait: Callable[[str], NowaitWork | None] = lambda name: None  # tool name -> its work on the loop, if any
    app_resources: tuple[types.Resource, ...] = ()  # the ui:// pages its tools link (apps.py: MCP Apps)
    checked: dict[str, dict[str, Any]] = field(default_factory=dict)  # whole schemas of tools advertised looser

    def find(self, name: str) -> types.Tool | None:
        return next((tool for tool in self.tools if tool.name == name), None)

    def prepare(self) -> None:
        """Build the tools' argument validators (the first call's jsonschema) and import the work a call runs on
        the loop: the store's background load runs this, so a first recall costs what a warm one does."""
        for tool in self.tools:
            tools.prepare(tool, self.checked.get(tool.name))
            self.nowait(tool.name)


def _memory_work(name: str, conversation: chat.Conversation) -> Work:
    """The memory tools' work by name (tool_work.py is imported at the first call: tools/list needs none of it)."""
    from memserver.features import tool_work

    return apps.browse if name == apps.BROWSE.name else tool_work.WORK[name]


def _memory_nowait(name: str) -> NowaitWork | None:
    from memserver.features import tool_work

    return tool_work.NOWAIT.get(name)


MEMORY_TOOLS = ToolSet(
    "memory",
    (*tools.TOOLS, apps.BROWSE),
    _memory_work,
    INSTRUCTIONS,
    _memory_nowait,
    app_resources=(apps.RESOURCE,),
    checked={apps.BROWSE.name: apps.CHECKED_INPUT},
)


def chat_tools(options: chat.ChatOptions | None = None) -> ToolSet:
    """The chat-memory interface (chat.py), with its own record of each connection's conversation."""
    from memserver.features import chat  # (only `--tools chat` serves it)

    memory = chat.ChatMemory(options)
    return ToolSet("chat", chat.TOOLS, memory.work, chat.INSTRUCTIONS)
