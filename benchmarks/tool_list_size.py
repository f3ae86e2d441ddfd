"""The size of `tools/list`: what every conversation pays in context for memserver's tools, per tool set.

    uv run python -m benchmarks.tool_list_size            # table, and benchmarks/results/tool_list_size.json

For the memory tool set (`memserver serve`) and the chat tool set (`serve --tools chat`): the bytes of the
`tools` array of a `tools/list` result as the server sends it (compact JSON, UTF-8, camelCase, nothing unset), per
tool and in all, and its tokens under all-MiniLM-L6-v2's WordPiece tokenizer (the `tokenizers` library and the
model's tokenizer.json, offline; an uncased BERT vocabulary: a model's own tokenizer counts differently, usually
within ~20% for English and JSON). BUDGET is the memory tool set's limit, which
tests/server/test_server_context_size.py holds the server to.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import mcp_types as types

from benchmarks import _common as C
from memserver.embedding.embedder import load_tokenizer
from memserver.embedding.sources import resolve_model
from memserver.features.tool_sets import MEMORY_TOOLS, chat_tools

# issue 23 item 21: the whole memory tool set, browse_memories (the MCP App, apps.py) included: 6 KB (6124 bytes
# used), raised for issue 24 by what kinds cost (7101 bytes): remember kind (its enum) + due +174, recall and
# list_recent kind + include_archived +63 each, the mark tool (pin/archive/done and their undoing) +676; then
# the consolidate tool (issue 24 item 4: +619, 7720 bytes used: its description, namespace and result; no `apply`
# ids since nothing is applied in MCP without an elicited yes): 7 KB + 600.
BUDGET = 7 * 1024 + 600


def wire_json(value: Any) -> str:
    """`value` as the server puts it on the wire: compact JSON of the model's JSON form, aliases, no None."""
    if isinstance(value, types.Tool):
        value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def measure(tools: tuple[types.Tool, ...], count_tokens: Any) -> dict[str, Any]:
    dumped = [tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools]
    whole = wire_json(dumped)
    per_tool = {}
    for tool in dumped:
        text = wire_json(tool)
        per_tool[tool["name"]] = {
            "bytes": len(text.encode()),
            "input_schema_bytes": len(wire_json(tool["inputSchema"]).encode()),
            "output_schema_bytes": len(wire_json(tool["outputSchema"]).encode()) if "outputSchema" in tool else 0,
            "tokens": count_tokens(text),
        }
    return {"bytes": len(whole.encode()), "tokens": count_tokens(whole), "tools": per_tool}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default=str(C.RESULTS / "tool_list_size.json"))
    args = parser.parse_args()
    tokenizer = load_tokenizer(Path(resolve_model().tokenizer))
    tokenizer.no_truncation()

    def count_tokens(text: str) -> int:
        return len(tokenizer.encode(text, add_special_tokens=False).ids)

    sets = {"memory": measure(MEMORY_TOOLS.tools, count_tokens), "chat": measure(chat_tools().tools, count_tokens)}
    rows = []
    for set_name, found in sets.items():
        for name, t in found["tools"].items():
            rows.append([set_name, name, t["bytes"], t["input_schema_bytes"], t["output_schema_bytes"], t["tokens"]])
        rows.append([set_name, "**all** (the tools array)", found["bytes"], "", "", found["tokens"]])
    print(C.table(["tool set", "tool", "bytes", "inputSchema", "outputSchema", "MiniLM tokens"], rows))
    memory_bytes = sets["memory"]["bytes"]
    print(f"\nmemory tool set: {memory_bytes:,} of the {BUDGET:,}-byte budget ({BUDGET - memory_bytes:,} left)")
    C.write_json(args.out, {"budget_bytes": BUDGET, "tokenizer": "all-MiniLM-L6-v2 WordPiece", **sets})


if __name__ == "__main__":
    main()
