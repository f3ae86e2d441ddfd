"""The tools a memserver session lists, in `tools/list` order: the one list the protocol tests compare against, so
a new tool is added here once (test_server_protocol.py checks features/tools.py's own order beside it)."""

MEMORY_TOOLS = [
    "remember",
    "recall",
    "list_recent",
    "forget",
    "mark",
    "forget_matching",
    "consolidate",
    "browse_memories",
]
