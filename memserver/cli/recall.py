"""`memserver recall QUERY`: the best matches, as the MCP `recall` tool finds them, with the same filters and the same
note when nothing matches well (features/tools.py `recall_note`).

The rows come in the order of the search's score (Hit.rank_score: in hybrid mode the fused score of words and
meaning, in semantic the cosine, in keyword BM25), and that is the score column, labelled FUSED, COS or BM25: the
cosine alone is not what orders them. `--explain` prints, under each row, what it is made of; --json carries
"rank" (1, 2, ...), "rank_score", "score" (the cosine, what --min-score compares) and, with --explain, "explain".
"""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from memserver.cli import flags, output
from memserver.cli.options import open_store
from memserver.cli.tables import Table

if TYPE_CHECKING:
    from memserver.cli.command import StoreCommand
    from memserver.contract.backend import Hit


def add_commands(store_command: StoreCommand) -> None:
    recall = store_command(
        "recall",
        cmd_recall,
        "search the memories by words and meaning, best first",
        'memserver recall "where does Ana live?" --since 2026-01-01',
    )
    recall.add_argument("query", metavar="QUERY")
    recall.add_argument("--limit", type=int, default=10, help="how many at most (default 10)")
    recall.add_argument(
        "--mode",
        choices=["hybrid", "semantic", "keyword"],
        default="hybrid",
        help="hybrid (default): words and meaning; semantic: meaning only; keyword: words only",
    )
    recall.add_argument(
        "--min-score", type=float, metavar="X", help="drop matches whose cosine to the query is below X (-1..1)"
    )
    flags.filters(recall)
    flags.lifecycle(recall)
    recall.add_argument("--as-of", metavar="WHEN", help=flags.AS_OF_HELP)
    recall.add_argument("--explain", action="store_true", help="show what each match's rank is made of")
    flags.output(recall)


def cmd_recall(args: argparse.Namespace) -> int:
    with open_store(args) as store:
        hits = store.search(
            args.query,
            limit=args.limit,
            tags=args.tags,
            source=args.source,
            since=args.since,
            until=args.until,
            min_score=args.min_score,
            mode=args.mode,
            speaker=args.speaker,
            role=args.role,
            session=args.session,
            namespace=args.namespace,
            as_of=args.as_of,
            explain=args.explain,
            kinds=args.kinds,
            include_archived=args.include_archived,
        )
    note = _note(args, hits)
    if args.json:
        output.lines(_record(hit, n) for n, hit in enumerate(hits, 1))
        if note:
            output.lines([{"note": note}])
        return 0
    if hits:
        if args.explain and hits[0].explanation and "query" in hits[0].explanation:
            print("query: " + _flat(hits[0].explanation["query"]))
        table = Table(mode=args.mode, utc=args.utc, sample=[hit.memory for hit in hits])
        print(table.header())
        for hit in hits:
            print(table.row(hit))
            if args.explain:
                print("      " + _breakdown(hit))
    if note:
        print(f"memserver: {note}", file=sys.stderr)
    return 0


def _note(args: argparse.Namespace, hits: list[Hit]) -> str | None:
    """The MCP tool's note: nothing found (and why), or only weak matches."""
    from memserver.features.tool_results import recall_note

    names = ("tags", "source", "speaker", "role", "session", "since", "until", "min_score", "namespace", "as_of")
    asked = {name: getattr(args, name) for name in names} | {"mode": args.mode}
    return recall_note(asked, [float(hit.score) for hit in hits])


def _record(hit: Hit, rank: int) -> dict[str, Any]:
    record = {
        **hit.memory.to_dict(),
        "rank": rank,
        "rank_score": round(float(hit.rank_score), 4),
        "score": round(float(hit.score), 4),
    }
    if hit.explanation is not None:
        record["explain"] = hit.explanation
    return record


def _breakdown(hit: Hit) -> str:
    """One line of a hit's explanation: cosine first, then each side and what the engine adds."""
    parts = [f"ordered by {float(hit.rank_score):.4g}", f"cosine {float(hit.score):.3f}"]
    for name, value in (hit.explanation or {}).items():
        if name not in ("rank", "query"):
            parts.append(f"{name}: {_flat(value)}" if isinstance(value, dict) else f"{name} {_value(value)}")
    return "; ".join(parts)


def _flat(value: dict[str, Any]) -> str:
    return ", ".join(f"{key} {_value(item)}" for key, item in value.items() if item not in (None, False, [], {}, ""))


def _value(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list):
        return " ".join(_value(item) for item in value)
    if isinstance(value, dict):
        return "(" + _flat(value) + ")"
    return str(value)
