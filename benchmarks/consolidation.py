"""Consolidation (memserver.contract.consolidation) on a made set: precision and recall of duplicate pairs and of
stale statements.

Loads benchmarks/data/consolidation.json (built by benchmarks/data/make_consolidation.py: duplicate clusters, hard
negatives, singletons, and first-person statements with updates, restatements and additions, split by fact into the
namespaces "dev" and "heldout"), adds every memory to a fresh MemoryStore with the real Embedder, and sweeps the
cosine threshold of `propose_merges` and the score threshold of `propose_stale`. A duplicate pair counts as found
when both are in one proposed cluster; a stale statement when the proposal names it and the statement that updated
it. The thresholds with the best F1 on "dev" are the ones reported on "heldout" (and the defaults, DUPLICATE_COSINE
and STALE_SCORE).

    uv run python -m benchmarks.consolidation          # full sweep, writes benchmarks/results/consolidation.json
    uv run python -m benchmarks.consolidation --quick  # smoke test: the fake embedder, a coarse sweep
    uv run python -m benchmarks.consolidation --scale 20000  # scan time of both proposals on N made memories
"""

from __future__ import annotations

import argparse
import itertools
import json
import tempfile
from pathlib import Path
from typing import Any

from memserver.contract import consolidation
from memserver.local.store import MemoryStore

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "benchmarks" / "data" / "consolidation.json"
RESULTS = ROOT / "benchmarks" / "results" / "consolidation.json"
Pair = frozenset[str]


def _pairs(groups: list[list[str]]) -> set[Pair]:
    return {frozenset(p) for g in groups for p in itertools.combinations(g, 2)}


def _score(found: set[Pair], truth: set[Pair]) -> dict[str, float]:
    hits = len(found & truth)
    precision = hits / len(found) if found else 1.0
    recall = hits / len(truth) if truth else 1.0
    f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"precision": round(precision, 4), "recall": round(recall, 4), "f1": round(f1, 4), "found": len(found)}


def run(quick: bool) -> dict[str, Any]:
    data = json.loads(DATA.read_text())
    embedder: Any
    if quick:
        from tests.support.fakes import FakeEmbedder

        embedder = FakeEmbedder()
    else:
        from memserver.embedding.embedder import Embedder

        embedder = Embedder()
    truth: dict[str, dict[str, list[str]]] = {"dev": {}, "heldout": {}}
    stale_truth: dict[str, set[Pair]] = {"dev": set(), "heldout": set()}
    fields = ("content", "namespace", "speaker", "occurred_at")
    with tempfile.TemporaryDirectory() as folder:
        store = MemoryStore(Path(folder), "consolidation", embedder=embedder)
        records = data["memories"]
        memories = store.add_many([{k: r[k] for k in fields if k in r} for r in records])
        keyed = {r["key"]: m.id for r, m in zip(records, memories, strict=True) if "key" in r}
        for record, memory in zip(records, memories, strict=True):
            if "cluster" in record:
                truth[record["namespace"]].setdefault(record["cluster"], []).append(memory.id)
            if "stale_of" in record:
                stale_truth[record["namespace"]].add(frozenset((memory.id, keyed[record["stale_of"]])))
        thresholds = [round(0.60 + 0.01 * n, 2) for n in range(0, 40, 5 if quick else 1)]
        stale_thresholds = [round(0.20 + 0.02 * n, 2) for n in range(0, 40, 5 if quick else 1)]
        sweep: dict[str, list[dict[str, Any]]] = {}
        stale_sweep: dict[str, list[dict[str, Any]]] = {}
        for space in ("dev", "heldout"):
            expected = _pairs(list(truth[space].values()))
            rows = []
            for threshold in thresholds:
                proposals = consolidation.propose_merges(store, namespace=space, threshold=threshold)
                rows.append({"threshold": threshold, **_score(_pairs([list(p.ids) for p in proposals]), expected)})
            sweep[space] = rows
            rows = []
            for threshold in stale_thresholds:
                stale = consolidation.propose_stale(store, namespace=space, threshold=threshold)
                found = {frozenset((p.stale, p.newer)) for p in stale}
                rows.append({"threshold": threshold, **_score(found, stale_truth[space])})
            stale_sweep[space] = rows
        store.close()
    best = max(sweep["dev"], key=lambda r: (r["f1"], r["threshold"]))
    heldout = next(r for r in sweep["heldout"] if r["threshold"] == best["threshold"])
    stale_best = max(stale_sweep["dev"], key=lambda r: (r["f1"], r["threshold"]))
    stale_heldout = next(r for r in stale_sweep["heldout"] if r["threshold"] == stale_best["threshold"])
    return {
        "memories": len(data["memories"]),
        "clusters": sum(len(t) for t in truth.values()),
        "stale_statements": {space: len(pairs) for space, pairs in stale_truth.items()},
        "min_word_overlap": consolidation.MIN_WORD_OVERLAP,
        "update_cue_bonus": consolidation.UPDATE_CUE_BONUS,
        "frame_weight": consolidation.FRAME_WEIGHT,
        "embedder": "fake" if quick else "all-MiniLM-L6-v2",
        "chosen_on_dev": best,
        "heldout_at_chosen": heldout,
        "stale_chosen_on_dev": stale_best,
        "stale_heldout_at_chosen": stale_heldout,
        "sweep": sweep,
        "stale_sweep": stale_sweep,
    }


def _table(title: str, result: dict[str, Any], sweep: str, best: str, held: str) -> None:
    print(f"\n{title}\n")
    print("| threshold | dev P | dev R | dev F1 | held-out P | held-out R | held-out F1 |")
    print("|---|---|---|---|---|---|---|")
    for d, h in zip(result[sweep]["dev"], result[sweep]["heldout"], strict=True):
        print(
            f"| {d['threshold']:.2f} | {d['precision']:.3f} | {d['recall']:.3f} | {d['f1']:.3f} "
            f"| {h['precision']:.3f} | {h['recall']:.3f} | {h['f1']:.3f} |"
        )
    b, h = result[best], result[held]
    print(
        f"\nchosen on dev: {b['threshold']:.2f} (F1 {b['f1']:.3f}); held-out there: "
        f"precision {h['precision']:.3f}, recall {h['recall']:.3f}, F1 {h['f1']:.3f}"
    )


def scale(n: int) -> dict[str, Any]:
    """Seconds of each scan on `n` memories of random words (the fake embedder: the time is the scan's, not the
    model's), all of one speaker (the worst case of the stale scan: every pair is a candidate) and of 40 speakers."""
    import random
    import time

    from tests.support.fakes import FakeEmbedder

    rng = random.Random(24)
    words = [f"w{i}" for i in range(3000)]
    rows = []
    for speakers in (1, 40):
        with tempfile.TemporaryDirectory() as folder:
            store = MemoryStore(Path(folder), "scale", embedder=FakeEmbedder())
            store.add_many(
                [
                    {
                        "content": " ".join(rng.sample(words, 8)),
                        "speaker": f"s{i % speakers}",
                        "occurred_at": f"2025-{1 + i % 12:02d}-01",
                    }
                    for i in range(n)
                ]
            )
            row: dict[str, Any] = {"memories": n, "speakers": speakers}
            scans = (
                ("merges", consolidation.propose_merges),
                ("stale", consolidation.propose_stale),
                ("both", consolidation.propose),
            )
            for name, scan in scans:
                started = time.perf_counter()
                scan(store)
                row[f"{name}_seconds"] = round(time.perf_counter() - started, 2)
            rows.append(row)
            store.close()
    return {"rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="smoke test: the fake embedder, a coarse sweep")
    parser.add_argument("--output", type=Path, default=RESULTS)
    parser.add_argument("--scale", type=int, metavar="N", help="time both scans on N made memories instead")
    args = parser.parse_args()
    if args.scale:
        timed = scale(args.scale)
        print(
            "| memories | speakers | merge scan s | stale scan s | both (propose, one pass) s |\n|---|---|---|---|---|"
        )
        for row in timed["rows"]:
            print(
                f"| {row['memories']:,} | {row['speakers']} | {row['merges_seconds']} | {row['stale_seconds']} "
                f"| {row['both_seconds']} |"
            )
        out = RESULTS.with_name("consolidation_scale.json") if args.output == RESULTS else args.output
        out.write_text(json.dumps(timed, indent=1) + "\n")
        return
    result = run(args.quick)
    _table("Duplicate pairs (propose_merges, cosine threshold)", result, "sweep", "chosen_on_dev", "heldout_at_chosen")
    _table(
        "Stale statements (propose_stale, score threshold)",
        result,
        "stale_sweep",
        "stale_chosen_on_dev",
        "stale_heldout_at_chosen",
    )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
