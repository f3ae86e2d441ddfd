"""Issue 28, item 3: how much of a question's evidence the chat tool set's `recall()` block shows, per allocation.

The chat `recall()` (memserver/features/chat.py) shows, besides this session's recent turns and the user's profile,
"earlier conversations": the hits of a hybrid search of the latest message, re-sorted by cosine, those of cosine
at least tools.WEAK_MATCH_SCORE, within the section's share of the budget. Here each conversation of the sets is
stored as benchmarks/conversations.py's hybrid+fields row does (one memory per turn, with speaker, session and
occurred_at, in the conversation's namespace), each question is the latest message, and the block is built by
chat.assemble from what each allocation selects. Scored: the share of a question's evidence turns shown in the
block (ev), and whether all of them are (all), in percent, per question type and shape.

Allocations of the "earlier conversations" section:
- today: 20 hits by cosine, weak ones dropped (what recall() did before issue 28);
- fused: the same hits in the hybrid ranking's order (the ranking R@10 is measured on) instead of by cosine;
- more: 40 hits by cosine (more turns, as many as the budget holds);
- fused-40: 40 hits in the hybrid ranking's order, as many as the budget holds (kept: what recall() does now,
  chat.RELEVANT_CANDIDATES);
- context-N: the best N hits by cosine, each shown after the turn before it in its session (session context).
Scenarios: an empty session (the section may take the whole budget), and a busy one (ten recent turns of ~150
characters take the recent share first, as in a running chat).

    uv run python -m benchmarks.lab.chat_block      # writes benchmarks/results/lab-chat-block.json
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from collections.abc import Sequence
from itertools import pairwise
from pathlib import Path
from typing import Any

from benchmarks import _common, convdata
from benchmarks.conversations import ROOT, QueryVectors, cached_vectors, probe_fields, records, turn_rows
from memserver.contract.backend import Hit, Memory
from memserver.features import chat, tools
from memserver.local.store import MemoryStore

OUT = ROOT / "benchmarks" / "results" / "lab-chat-block.json"
ALLOCATIONS = ("today", "fused", "more", "fused-40", "context-5", "context-10")
SCENARIOS = ("empty session", "busy session")
BEFORE = 20  # recall()'s hits before issue 28
BUSY = [
    chat.Turn(
        f"busy{i}",
        "user" if i % 2 == 0 else "assistant",
        "User" if i % 2 == 0 else "Assistant",
        text,
        f"2026-12-03T12:{i:02d}:00+00:00",
    )
    for i, text in enumerate(
        [
            "Could you help plan the week around the school run and the two deadlines that moved to Thursday? "
            "The printer at the office is broken again, so drafts go by email."
        ]
        * 10
    )
]


def select(allocation: str, hits: dict[int, list[Hit]], previous: dict[str, Memory]) -> list[Memory]:
    """The memories an allocation gives the "earlier conversations" section, in the order it takes them (`hits`:
    the search's results at each limit searched)."""
    limit = 40 if allocation in ("more", "fused-40") else BEFORE
    strong = [h for h in hits[limit] if h.score >= tools.WEAK_MATCH_SCORE]
    by_cosine = sorted(strong, key=lambda h: -h.score)
    if allocation == "today":
        return [h.memory for h in by_cosine[:BEFORE]]
    if allocation.startswith("fused"):
        return [h.memory for h in strong]
    if allocation == "more":
        return [h.memory for h in by_cosine[:40]]
    n = int(allocation.removeprefix("context-"))
    out: list[Memory] = []
    for h in by_cosine[:n]:
        before = previous.get(h.memory.id)
        out += [m for m in (before, h.memory) if m is not None and m not in out]
    return out


def shown(block: str, memory: Memory) -> bool:
    """Whether the block has the memory's line (its first 40 characters, as label() writes them)."""
    return " ".join(memory.content.split())[:40] in block


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", default=None)
    parser.add_argument("--budget", type=int, default=chat.DEFAULT_BUDGET)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    from memserver.embedding.embedder import Embedder

    embedder = Embedder().load()
    fields = probe_fields(embedder)
    cache = _common.cache_dir() / "conversations"
    cache.mkdir(parents=True, exist_ok=True)
    scored: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for name, convs in convdata.load().items():
        if args.sets and name not in args.sets:
            continue
        rows_of: dict[str, list[dict[str, Any]]] = {f"{s}: {a}": [] for s in SCENARIOS for a in ALLOCATIONS}
        for conv in convs:
            rows = turn_rows(conv)
            vectors, _ = cached_vectors(cache, embedder, [r["plain"] for r in rows], query=False)
            texts = [q["question"] for q in conv["questions"]]
            qvecs, _ = cached_vectors(cache, embedder, texts, query=True)
            with tempfile.TemporaryDirectory(prefix="memserver-chat-block-") as tmp:
                store = MemoryStore(
                    tmp, "chat-block", embedder=QueryVectors(embedder, dict(zip(texts, qvecs, strict=True)))
                )
                try:
                    store.import_(records(conv, rows, vectors, "plain", fields))
                    memories = {r["turn"]: store.get(r["id"], namespace=conv["id"]) for r in rows}
                    previous = {}  # memory id -> the memory of the turn before it in its session
                    for session in conv["sessions"]:
                        said = [memories[t["id"]] for t in session["turns"]]
                        previous |= {m.id: b for b, m in pairwise(said) if m is not None and b is not None}
                    options = chat.ChatOptions(budget=args.budget, namespace=conv["id"])
                    for q in conv["questions"]:
                        hits = {  # recall()'s search before issue 28 (20), and today's (40)
                            n: store.search(q["question"], limit=n, namespace=conv["id"]) for n in (BEFORE, 40)
                        }
                        evidence = set(q["evidence"])
                        for scenario in SCENARIOS:
                            recent = BUSY if scenario == "busy session" else []
                            for allocation in ALLOCATIONS:
                                block = chat.assemble(recent, [], select(allocation, hits, previous), options)
                                found = {k for k in evidence if (m := memories.get(k)) and shown(block, m)}
                                rows_of[f"{scenario}: {allocation}"].append(
                                    {
                                        "type": q["type"],
                                        "shape": q.get("shape"),
                                        "ev": len(found) / len(evidence),
                                        "all": float(found == evidence),
                                        "chars": len(block),
                                    }
                                )
                finally:
                    store.close()
            _common.log(f"  {conv['id']}: {len(conv['questions'])} questions")
        scored[name] = rows_of
    result = {name: {v: summarise(rs) for v, rs in per.items()} for name, per in scored.items()}
    kinds = ["all", *convdata.TYPES, *convdata.SHAPES]
    for name, per in result.items():
        print(f"\n{name}: evidence shown in the recall() block (ev / all, percent), budget {args.budget}")
        print(
            _common.table(
                ["scenario: allocation", "chars", *kinds],
                [
                    [v, s["chars"], *(f"{s[k]['ev']} / {s[k]['all']}" if k in s else "-" for k in kinds)]
                    for v, s in per.items()
                ],
            )
        )
    _common.write_json(args.out, {"budget": args.budget, "sets": result, "machine": _common.machine()})
    return 0


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(part: list[dict[str, Any]]) -> dict[str, float]:
        return {k: round(100 * statistics.fmean(r[k] for r in part), 1) for k in ("ev", "all")}

    out: dict[str, Any] = {"chars": round(statistics.fmean(r["chars"] for r in rows)), "all": mean(rows)}
    for kind in (*convdata.TYPES, *convdata.SHAPES):
        part = [r for r in rows if kind in (r["type"], r["shape"])]
        if part:
            out[kind] = mean(part)
    return out


if __name__ == "__main__":
    raise SystemExit(main())
