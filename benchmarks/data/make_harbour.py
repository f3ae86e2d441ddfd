"""Build the "harbour" conversation set (benchmarks/data/conversations/harbour/*.json) from its hand-written source.

The source, benchmarks/data/harbour_src/<conversation-id>.txt, is the literal conversation in a compact form:

    id: harbour-1
    speakers: Maya, Tom
    == 2023-01-07T18:40                     a session and the local time it started (sessions get S1, S2, ...)
    Maya: Guess who finally got a dog!
    Maya: Picked her up on Saturday. [img: a photo of a small brown terrier on a kitchen floor] {#dog}
    Q single | What breed is Maya's dog? | a wire-haired terrier cross | #dog
    Q multi which_two | Which two dogs? | Pickle and Bramble | #dog #bramble | Picked her up || Bramble's not great
    # a comment

`[img: ...]` is the caption of a photo the speaker shared; `{#label ...}` names the turn for the questions, whose
fourth field lists the evidence labels. A question's type may be followed by its shape (issue 28), and a fifth field
may give its `quotes`, one per evidence label, separated by ` || ` (the words of the fact that turn states, which
convdata.problems() checks). Turn ids (S<n>:<k>) are given here, so the source can be edited freely.
The format is the one benchmarks/lab/conversation-sets.md describes.

    uv run python -m benchmarks.data.make_harbour      # rewrites benchmarks/data/conversations/harbour/
"""

from __future__ import annotations

import re
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from benchmarks.data.conversation_files import write_conversations

HERE = Path(__file__).resolve().parent
SOURCE = HERE / "harbour_src"
OUT = HERE / "conversations" / "harbour"
TYPES = ("single", "temporal", "multi", "open")
SHAPES = ("which_two", "in_common", "change", "everything", "correction")

_TURN = re.compile(
    r"^(?P<speaker>[A-Z][\w'-]*): (?P<text>.*?)(?: \[img: (?P<image>[^\]]+)\])?(?: \{(?P<labels>#[^}]+)\})?$"
)


def parse(path: Path) -> dict[str, Any]:
    """One source file -> the conversation as the format wants it; raises ValueError naming the line."""
    conv: dict[str, Any] = {"id": "", "set": "harbour", "speakers": [], "sessions": [], "questions": []}
    labels: dict[str, str] = {}
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        line = raw.strip()
        where = f"{path.name}:{number}"
        if not line or line.startswith("#"):
            continue
        if line.startswith("id: "):
            conv["id"] = line[4:].strip()
        elif line.startswith("speakers: "):
            conv["speakers"] = [s.strip() for s in line[10:].split(",")]
        elif line.startswith("== "):
            started = datetime.fromisoformat(line[3:].strip())
            conv["sessions"].append(
                {"id": f"S{len(conv['sessions']) + 1}", "date": started.isoformat(timespec="seconds"), "turns": []}
            )
        elif line.startswith("Q "):
            conv["questions"].append(_question(line[2:], labels, f"q{len(conv['questions']) + 1}", where))
        else:
            match = _TURN.match(line)
            if not match or not conv["sessions"]:
                raise ValueError(f"{where}: not a turn, a session header or a question: {line[:60]!r}")
            if "{#" in match["text"] or "[img:" in match["text"]:
                raise ValueError(
                    f"{where}: a label or image in the middle of the text (they go last: [img: ...] {{#...}})"
                )
            if match["speaker"] not in conv["speakers"]:
                raise ValueError(f"{where}: {match['speaker']} is not among the speakers")
            session = conv["sessions"][-1]
            turn: dict[str, str] = {
                "id": f"{session['id']}:{len(session['turns']) + 1}",
                "speaker": match["speaker"],
                "text": match["text"],
            }
            if match["image"]:
                turn["image"] = match["image"]
            for label in (match["labels"] or "").split():
                if label in labels:
                    raise ValueError(f"{where}: label {label} used twice")
                labels[label] = turn["id"]
            session["turns"].append(turn)
    return conv


def _question(line: str, labels: dict[str, str], qid: str, where: str) -> dict[str, Any]:
    """`type [shape] | question | answer | #labels [| quote || quote ...]` -> a question of the format."""
    parts = [part.strip() for part in line.split(" | ")]
    if len(parts) not in (4, 5):
        raise ValueError(f"{where}: a question has 4 or 5 fields separated by ' | ', not {len(parts)}")
    kind, *shape = parts[0].split()
    if kind not in TYPES or len(shape) > 1 or (shape and shape[0] not in SHAPES):
        raise ValueError(f"{where}: unknown question type or shape {parts[0]!r}")
    try:
        ids = [labels[label] for label in parts[3].split()]
    except KeyError as e:
        raise ValueError(f"{where}: unknown label {e}") from None
    question: dict[str, Any] = {"id": qid, "type": kind}
    if shape:
        question["shape"] = shape[0]
    question |= {"question": parts[1], "answer": parts[2], "evidence": ids}
    if len(parts) == 5:
        quotes = [q.strip() for q in parts[4].split(" || ")]
        if len(quotes) != len(ids):
            raise ValueError(f"{where}: {len(quotes)} quotes for {len(ids)} evidence labels")
        question["quotes"] = quotes
    return question


def main() -> int:
    write_conversations(OUT, (parse(path) for path in sorted(SOURCE.glob("*.txt"))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
