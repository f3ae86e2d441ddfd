"""Import rates of `memserver import --from` per format (issue 24, item 5): a generated export of each format, a
few thousand messages, imported into an empty local store with the real model (embedding is most of the cost),
then imported again (every record a duplicate: the cost of reading, checking and skipping).

    uv run python -m benchmarks.import_formats             # 3,000 messages per format
    uv run python -m benchmarks.import_formats --quick     # 200
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, embedder, log, machine, table, write_json

WORDS = [
    *(
        [
            "boiler",
            "service",
            "garden",
            "tomato",
            "Porto",
            "hotel",
            "flight",
            "Monday",
            "key",
            "pot",
            "warranty",
            "invoice",
            "Ana",
            "Lena",
            "Sam",
            "book",
        ]
    ),
    *(
        [
            "reading",
            "meeting",
            "project",
            "deadline",
            "budget",
            "kitchen",
            "paint",
            "window",
            "school",
            "music",
            "piano",
            "train",
            "ticket",
        ]
    ),
]


def sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(8, 24))).capitalize() + "."


def claude_export(n: int, rng: random.Random) -> list[dict[str, Any]]:
    conversations = []
    for c in range(0, n, 20):
        messages = [
            {
                "uuid": f"m-{c}-{i}",
                "text": f"{sentence(rng)} ({c}.{i})",
                "sender": "human" if i % 2 == 0 else "assistant",
                "created_at": f"2025-{1 + c % 12:02d}-{1 + i % 28:02d}T10:{i % 60:02d}:00Z",
            }
            for i in range(min(20, n - c))
        ]
        conversations.append({"uuid": f"conv-{c}", "name": f"chat {c}", "chat_messages": messages})
    return conversations


def chatgpt_export(n: int, rng: random.Random) -> list[dict[str, Any]]:
    conversations = []
    for c in range(0, n, 20):
        mapping: dict[str, Any] = {"root": {"id": "root", "message": None, "parent": None, "children": []}}
        parent = "root"
        for i in range(min(20, n - c)):
            node = f"n-{c}-{i}"
            message = {
                "id": node,
                "author": {"role": "user" if i % 2 == 0 else "assistant"},
                "create_time": 1.7e9 + c * 100 + i,
                "content": {"content_type": "text", "parts": [f"{sentence(rng)} ({c}.{i})"]},
                "metadata": {},
            }
            mapping[node] = {"id": node, "message": message, "parent": parent, "children": []}
            mapping[parent]["children"].append(node)
            parent = node
        conversations.append({"conversation_id": f"conv-{c}", "mapping": mapping, "current_node": parent})
    return conversations


def mcp_graph(n: int, rng: random.Random) -> str:
    lines = []
    for e in range(0, n, 5):
        observations = [f"{sentence(rng)} ({e}.{i})" for i in range(min(4, n - e))]
        lines.append(
            json.dumps({"type": "entity", "name": f"E{e}", "entityType": "thing", "observations": observations})
        )
        if n - e > 4:
            lines.append(json.dumps({"type": "relation", "from": f"E{e}", "to": f"E{e + 5}", "relationType": "knows"}))
    return "\n".join(lines) + "\n"


def markdown_notes(n: int, rng: random.Random, folder: Path) -> None:
    for f in range(0, n, 10):
        sections = [f"## Section {s}\n\n{sentence(rng)} ({f}.{s})\n" for s in range(min(10, n - f))]
        (folder / f"note-{f}.md").write_text(f"---\ntags: [bench, n{f % 7}]\n---\n" + "\n".join(sections))


def run(n: int, root: Path) -> dict[str, Any]:
    from memserver.importers.run import import_file
    from memserver.local.store import MemoryStore

    rng = random.Random(24)
    paths = {"claude": root / "claude.json", "chatgpt": root / "chatgpt.json", "mcp-memory": root / "memory.jsonl"}
    paths["claude"].write_text(json.dumps(claude_export(n, rng)))
    paths["chatgpt"].write_text(json.dumps(chatgpt_export(n, rng)))
    paths["mcp-memory"].write_text(mcp_graph(n, rng))
    notes = root / "notes"
    notes.mkdir()
    markdown_notes(n, rng, notes)
    paths["markdown"] = notes
    model = embedder()
    model.embed(["warm up"])
    out: dict[str, Any] = {}
    for fmt, path in paths.items():
        with MemoryStore(root / f"store-{fmt}", "bench", embedder=model) as store:
            started = time.perf_counter()
            first = import_file(store, fmt, path)
            took = time.perf_counter() - started
            started = time.perf_counter()
            again = import_file(store, fmt, path)
            took_again = time.perf_counter() - started
        out[fmt] = {
            "stored": first.stored,
            "seconds": took,
            "memories_per_s": first.stored / took,
            "reimport_stored": again.stored,
            "reimport_seconds": took_again,
            "reimport_records_per_s": again.duplicates / took_again,
        }
        log(f"{fmt}: {first.stored} in {took:.1f} s")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--messages", type=int, default=3000)
    parser.add_argument("--quick", action="store_true", help="200 messages per format")
    parser.add_argument("--out", default=str(RESULTS / "import_formats.json"))
    args = parser.parse_args(argv)
    n = 200 if args.quick else args.messages
    with tempfile.TemporaryDirectory() as tmp:
        result = {"messages": n, "formats": run(n, Path(tmp)), "machine": machine()}
    write_json(args.out, result)
    rows = [
        [
            fmt,
            r["stored"],
            round(r["seconds"], 1),
            round(r["memories_per_s"]),
            r["reimport_stored"],
            round(r["reimport_records_per_s"]),
        ]
        for fmt, r in result["formats"].items()
    ]
    print(table(["format", "stored", "s", "memories/s", "re-import stored", "re-import records/s"], rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
