"""Issue 28, item 2: which multi-part option (benchmarks/lab/multipart.py, entities.py) to keep, leave-one-set-out.

Reads runs of benchmarks.conversations that have the hybrid+fields row and `hybrid+fields+<option>` rows side by side
(their per-question R@10; every run's hybrid+fields must agree), groups the options into families (cap: diversity;
two-stage: sessions by their turns' scores; centroid: sessions by their mean vector; change: "how did X change"
expansion; entity: places reserved per named entity; speaker-keys: first-person turns also indexed about their
speaker, an index-time option; windows, spread, facts: the third run's, benchmarks/lab/windows.py), and for each set
held out picks the family's option with the best mean R@10 on the other sets, then reports that option on the held-out
set against hybrid+fields: overall and per question type and shape. A family is kept only if its held-out option gains
R@10 on every set and loses on no type or shape of any set.

    uv run python -m benchmarks.conversations --variants hybrid+fields $(uv run python -c \\
        "from benchmarks.conversations import OPTION_VARIANTS as o; print(' '.join(o))") \\
        --out benchmarks/results/conversations-issue28-options.json
    uv run python -m benchmarks.conversations --variants hybrid+fields $(uv run python -c \\
        "from benchmarks.conversations import ENTITY_VARIANTS as o; print(' '.join(o))") \\
        --out benchmarks/results/conversations-issue28-entities.json
    uv run python -m benchmarks.lab.multipart_options    # writes benchmarks/results/lab-multipart-options.json
    uv run python -m benchmarks.conversations --variants hybrid+fields $(uv run python -c \\
        "from benchmarks.conversations import WINDOW_VARIANTS as o; print(' '.join(o))") \\
        --out benchmarks/results/conversations-issue28-windows.json
    uv run python -m benchmarks.lab.multipart_options --run benchmarks/results/conversations-issue28-windows.json \\
        --out benchmarks/results/lab-windows-options.json
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import _common, convdata
from benchmarks.conversations import ROOT

RUN = ROOT / "benchmarks" / "results" / "conversations-issue28-options.json"
OUT = ROOT / "benchmarks" / "results" / "lab-multipart-options.json"
BASE = "hybrid+fields"
ENTITIES = ROOT / "benchmarks" / "results" / "conversations-issue28-entities.json"
FAMILIES = ("cap", "two-stage", "centroid", "change", "entity", "speaker-keys")
# The third run's (benchmarks/lab/windows.py): time windows (each span a family of its own too), the timeline
# expansion, the rule-based fact line.
WINDOW_FAMILIES = ("windows", "windows-3m", "windows-10m", "windows-1440m", "spread", "facts")


def kinds_of(sets: Sequence[str]) -> dict[str, tuple[str, str | None]]:
    """conversation/question id -> (type, shape), from the data."""
    out = {}
    for name, convs in convdata.load().items():
        if name in sets:
            for conv in convs:
                for q in conv["questions"]:
                    out[f"{conv['id']}/{q['id']}"] = (q["type"], q.get("shape"))
    return out


def figures(per_question: dict[str, list[float]], kinds: dict[str, tuple[str, str | None]]) -> dict[str, float]:
    """R@10 in percent: overall, per type, per shape."""
    recall = {q: v[1] for q, v in per_question.items()}
    out = {"all": round(100 * statistics.fmean(recall.values()), 1)}
    for kind in (*convdata.TYPES, *convdata.SHAPES):
        part = [r for q, r in recall.items() if kind in kinds.get(q, ())]  # a question since removed: "all" only
        if part:
            out[kind] = round(100 * statistics.fmean(part), 1)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--run", type=Path, nargs="+", default=[RUN, ENTITIES], help="benchmarks.conversations results with options"
    )
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    runs = [json.loads(path.read_text()) for path in args.run]
    sets = list(runs[0]["sets"])
    kinds = kinds_of(sets)
    table: dict[str, dict[str, dict[str, float]]] = {name: {} for name in sets}
    for run in runs:
        for name in sets:
            for v, d in run["sets"][name]["variants"].items():
                if d["available"]:
                    row = figures(d["per_question"], kinds)
                    if table[name].setdefault(v, row) != row:  # each run's hybrid+fields must be the same ranking
                        raise SystemExit(f"{name}, {v}: the runs differ; run them on the same data and code")
    options = [v.removeprefix(BASE + "+") for v in table[sets[0]] if v.startswith(BASE + "+")]
    verdicts: dict[str, Any] = {}
    for family in (*FAMILIES, *WINDOW_FAMILIES):
        members = [o for o in options if o.startswith(family)]
        if not members:
            continue
        held: dict[str, Any] = {}
        for out_set in sets:
            tuning = [s for s in sets if s != out_set]
            best = max(members, key=lambda o: statistics.fmean(table[s][f"{BASE}+{o}"]["all"] for s in tuning))
            base, new = table[out_set][BASE], table[out_set][f"{BASE}+{best}"]
            delta = {k: round(new[k] - base[k], 1) for k in base}
            held[out_set] = {"chosen": best, "r10": new, "delta": delta}
        kept = all(h["delta"]["all"] > 0 and min(h["delta"].values()) >= 0 for h in held.values())
        verdicts[family] = {"kept": kept, "held_out": held}
    kinds_shown = ["all", *convdata.TYPES, *convdata.SHAPES]
    for family, v in verdicts.items():
        print(f"\n{family}: {'KEPT' if v['kept'] else 'rejected'} (held-out R@10 change against {BASE})")
        rows = [[s, h["chosen"], *(h["delta"].get(k, "-") for k in kinds_shown)] for s, h in v["held_out"].items()]
        print(_common.table(["held out", "option chosen on the others", *kinds_shown], rows))
    runs_read = [str(path.resolve().relative_to(ROOT)) for path in args.run]
    _common.write_json(args.out, {"runs": runs_read, "r_at_10": table, "families": verdicts})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
