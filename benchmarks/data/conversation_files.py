"""Write a built conversation set to benchmarks/data/conversations/<set>/: one JSON file a conversation, and a line
on stdout saying what each holds. Shared by the set builders (make_harbour.py, make_meridian.py), so that every set
is written in the one format benchmarks/lab/conversation-sets.md describes."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def write_conversations(out: Path, conversations: Iterable[dict[str, Any]]) -> None:
    """Write each conversation to `out`/<id>.json (indent 1, UTF-8, a final newline) and print its size."""
    out.mkdir(parents=True, exist_ok=True)
    for conv in conversations:
        path = out / f"{conv['id']}.json"
        path.write_text(json.dumps(conv, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        turns = sum(len(s["turns"]) for s in conv["sessions"])
        print(
            f"{path.relative_to(ROOT)}: {len(conv['sessions'])} sessions, {turns} turns, "
            f"{len(conv['questions'])} questions"
        )
