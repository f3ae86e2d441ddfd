"""Issue 28, idea "diversity": at most N turns per session in the top 10 for multi-part questions, on hybrid+fields.

Rejected (numbers in benchmarks/lab/README.md), so the cap lives here and not in memserver/retrieval/. The store's
ranking to depth 50 is reranked by cap_per_group below; multi-part questions are found by its
regex (no oracle), every other question keeps its ranking. The cap is chosen leave-one-set-out: the best cap on one
set is the one reported for the other. A cap is kept only if no question type or shape drops on any set.

    uv run python -m benchmarks.lab.session_diversity      # writes benchmarks/results/lab-session-diversity.json
"""

from __future__ import annotations

import json
import re
import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks import _common, convdata
from benchmarks import conversations as conv_bench
from memserver.embedding.embedder import Embedder

# Questions that ask for several things at once, from different times.
MULTI_PART = re.compile(
    r"\bwhich two\b|\bin common\b|\bchange[ds]?\b|\beverything\b|\bboth\b|\bcompare\b|"
    r"\b(?:which|what) \w+ (?:has|have|did)\b",
    re.IGNORECASE,
)


def is_multi_part(question: str) -> bool:
    return MULTI_PART.search(question) is not None


def cap_per_group(ranking: Sequence[str], group_of: Callable[[str], str], cap: int, k: int) -> list[str]:
    """The ranking with at most `cap` items of one group in its first k; the ones held back follow, in order."""
    seen: Counter[str] = Counter()
    head: list[str] = []
    held: list[str] = []
    for item in ranking:
        if len(head) < k and seen[group_of(item)] < cap:
            head.append(item)
            seen[group_of(item)] += 1
        else:
            held.append(item)
    return head + held


CAPS = (1, 2, 3, 4)
OUT = conv_bench.ROOT / "benchmarks" / "results" / "lab-session-diversity.json"


def rankings(name: str, convs: list[dict[str, Any]], embedder: Any, fields: tuple[str, ...]) -> list[dict[str, Any]]:
    """Per question of a set: type, shape, question, evidence, and the hybrid+fields ranking to depth 50."""
    cache = _common.cache_dir() / "conversations"
    out = []
    for conv in convs:
        rows = conv_bench.turn_rows(conv)
        vectors = {"plain": conv_bench.cached_vectors(cache, embedder, [r["plain"] for r in rows], query=False)[0]}
        texts = [q["question"] for q in conv["questions"]]
        qvecs = conv_bench.cached_vectors(cache, embedder, texts, query=True)[0]
        store_embedder = conv_bench.QueryVectors(embedder, dict(zip(texts, qvecs, strict=True)))
        scored, _, _ = conv_bench.run_variant(
            "hybrid+fields", conv, rows, vectors, conv["questions"], store_embedder, fields, keep_ranking=True
        )
        for q, r in zip(conv["questions"], scored, strict=True):
            out.append({**r, "text": q["question"], "evidence": q["evidence"]})
    return out


def score(questions: list[dict[str, Any]], cap: int | None) -> dict[str, float]:
    """R@10 overall, per type and per shape, with the cap applied to multi-part questions (None: no cap)."""
    recalls: list[tuple[dict[str, Any], float]] = []
    for q in questions:
        ranking = q["ranking"]
        if cap is not None and is_multi_part(q["text"]):
            ranking = cap_per_group(ranking, lambda turn: turn.split(":")[0], cap, 10)
        recalls.append((q, len(set(q["evidence"]) & set(ranking[:10])) / len(q["evidence"])))
    out = {"all": round(100 * statistics.fmean(v for _, v in recalls), 1)}
    for kind in (*convdata.TYPES, *convdata.SHAPES):
        part = [v for q, v in recalls if kind in (q["type"], q.get("shape"))]
        if part:
            out[kind] = round(100 * statistics.fmean(part), 1)
    return out


def main() -> int:
    embedder = Embedder().load()
    fields = conv_bench.probe_fields(embedder)
    sets = convdata.load()
    per_set = {name: rankings(name, convs, embedder, fields) for name, convs in sets.items()}
    table = {name: {str(cap): score(qs, cap) for cap in (None, *CAPS)} for name, qs in per_set.items()}
    chosen = {}
    for held_out in per_set:
        tuning = [n for n in per_set if n != held_out]
        best = max(CAPS, key=lambda c: sum(table[n][str(c)]["all"] for n in tuning))
        chosen[held_out] = best
    kinds = list(next(iter(table.values()))["None"])
    for name, rows in table.items():
        print(f"\n{name} (hybrid+fields R@10; cap chosen on the other set(s): {chosen[name]})")
        print(_common.table(["cap", *kinds], [[cap, *(r.get(k, "-") for k in kinds)] for cap, r in rows.items()]))
    OUT.write_text(json.dumps({"r_at_10": table, "cap_chosen_leave_one_set_out": chosen}, indent=2) + "\n")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
