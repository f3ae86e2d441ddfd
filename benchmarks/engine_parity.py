"""The same retrieval figures on both engines: the local store and PostgreSQL ranked side by side, per category.

Runs the quality set (benchmarks/data/quality.json, as benchmarks/quality.py) and the conversation sets (as
benchmarks/conversations.py: variants hybrid and hybrid+fields) through MemoryStore and PostgresBackend with the same
vectors and the same queries, on a throwaway PostgreSQL (tests/support/pg_cluster.py), and prints R@5 / R@10 / MRR
per mode and category for each engine with the difference (PostgreSQL - local, points). Issue 25's bar: within 0.5
point everywhere.

    uv run python -m benchmarks.engine_parity            # both sets, full size
    uv run python -m benchmarks.engine_parity --quick    # 80 quality queries, each set's first 8 sessions

Prints a table per set and writes benchmarks/results/engine_parity.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _common as C

RESULTS = C.RESULTS / "engine_parity.json"
METRICS = ("recall@5", "recall@10", "mrr")
ENGINES = ("local", "postgresql")


def _mean(rows: list[dict[str, float]]) -> dict[str, float]:
    return {k: round(100 * statistics.fmean(r[k] for r in rows), 1) for k in METRICS} if rows else {}


def quality(url: str, embedder: Any, limit: int | None) -> dict[str, Any]:
    """quality.json on both engines: {engine: {mode: {category: metrics}}} (category "all" included)."""
    from benchmarks import quality as Q
    from memserver.local.store import MemoryStore
    from memserver.postgres.backend import PostgresBackend

    data = json.loads(C.QUALITY.read_text())
    queries = data["queries"][:limit] if limit else data["queries"]
    vectors = np.asarray(embedder.embed([m["content"] for m in data["memories"]]), np.float32)
    records = [
        {"id": Q.store_id(m["id"]), "content": m["content"], "created_at": m["created_at"], "tags": m.get("tags", [])}
        | {"vector": v}
        for m, v in zip(data["memories"], vectors, strict=True)
    ]
    name_of = {Q.store_id(m["id"]): m["id"] for m in data["memories"]}
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="memserver-parity-") as tmp:
        engines = {
            "local": MemoryStore(tmp, "quality", embedder=embedder),
            "postgresql": PostgresBackend(url, tenant="quality", embedder=embedder),
        }
        for name, engine in engines.items():
            engine.import_(records)
            per: dict[str, dict[str, Any]] = {}
            for mode in Q.MODES:
                rows: dict[str, list[dict[str, float]]] = {}
                for query in queries:
                    hits = engine.search(query["query"], limit=Q.DEPTH, mode=mode)
                    m = Q.rank_metrics([name_of[h.memory.id] for h in hits], set(query["relevant"]))
                    rows.setdefault("all", []).append(m)
                    rows.setdefault(query["category"], []).append(m)
                per[mode] = {c: {"n": len(r), **_mean(r)} for c, r in rows.items()}
            out[name] = per
            engine.close()
    return {"memories": len(records), "queries": len(queries), "engines": out}


def conversations(url: str, embedder: Any, cache: Path, quick: bool) -> dict[str, Any]:
    """The conversation sets on both engines: {set: {engine: {variant: {category: metrics}}}}."""
    from benchmarks import convdata
    from benchmarks import conversations as V
    from memserver.local.store import MemoryStore
    from memserver.postgres.backend import PostgresBackend

    tenants = itertools.count()

    class PostgresStore(PostgresBackend):
        """conversations.run_variant's store class: a fresh tenant of the parity database per store."""

        def __init__(self, _root: str, _collection: str, embedder: Any) -> None:
            super().__init__(url, tenant=f"conv{next(tenants)}", embedder=embedder)

    sets = V.find_sets([convdata.DATA_DIR], None)
    if quick:  # every set, its first conversation's first 8 sessions
        sets = {name: [V.shorten(convs[0], 8)] for name, convs in sets.items()}
    out: dict[str, Any] = {}
    classes: dict[str, type[Any]] = {"local": MemoryStore, "postgresql": PostgresStore}
    for name, convs in sets.items():
        out[name] = {}
        for engine, cls in classes.items():
            C.log(f"conversations: {name} on {engine}")
            fields = V.probe_fields(embedder, MemoryStore)
            data = V.evaluate_set(name, convs, embedder, cache, ["hybrid", "hybrid+fields"], fields, cls)
            variants = {k: v for k, v in data["variants"].items() if v["available"]}
            out[name][engine] = {k: {"all": v["overall"], **v["by_type"]} for k, v in variants.items()}
    return out


def differences(a: dict[str, Any], b: dict[str, Any]) -> list[list[Any]]:
    """Table rows (mode/variant, category, n, local R@5 R@10 MRR, PG R@5 R@10 MRR, max |difference|)."""
    rows = []
    for mode, cats in a.items():
        for cat, m in cats.items():
            p = b.get(mode, {}).get(cat, {})
            diff = max((abs(p.get(k, 0.0) - m.get(k, 0.0)) for k in METRICS), default=0.0)
            row = [mode, cat, m.get("n", "")]
            row += [m.get(k) for k in METRICS] + [p.get(k) for k in METRICS] + [round(diff, 1)]
            rows.append(row)
    return rows


HEADERS = ["mode", "category", "n", "L R@5", "L R@10", "L MRR", "PG R@5", "PG R@10", "PG MRR", "max |d|"]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="small size: 80 quality queries, 8 sessions of each set")
    parser.add_argument("--no-conversations", action="store_true", help="the quality set only")
    parser.add_argument("--cache", default=None, help="embedding cache (default: $MEMSERVER_BENCH_CACHE)")
    parser.add_argument("--out", type=Path, default=RESULTS, help="result file")
    parser.add_argument("--label", default="", help="a name for this run in the JSON (e.g. before, after)")
    args = parser.parse_args(argv)

    from memserver.embedding.embedder import Embedder
    from tests.support.pg_cluster import Cluster

    started = time.perf_counter()
    embedder = Embedder().load()
    cluster = Cluster.start()
    try:
        result: dict[str, Any] = {
            "command": "uv run python -m benchmarks.engine_parity " + " ".join(sys.argv[1:] if argv is None else argv),
            "label": args.label,
        }
        url = cluster.create_database("parity")
        q = quality(url, embedder, 80 if args.quick else None)
        result["quality"] = q
        print(f"\nquality set ({q['memories']} memories, {q['queries']} queries), points")
        print(C.table(HEADERS, differences(q["engines"]["local"], q["engines"]["postgresql"])))
        if not args.no_conversations:
            cache = C.cache_dir(args.cache) / "conversations"
            cache.mkdir(parents=True, exist_ok=True)
            conv = conversations(url, embedder, cache, args.quick)
            result["conversations"] = conv
            for name, engines in conv.items():
                print(f"\nconversation set {name}, points")
                print(C.table(HEADERS, differences(engines["local"], engines["postgresql"])))
        result["total_s"] = round(time.perf_counter() - started, 1)
        result["machine"] = C.machine()
        if not args.quick or args.out != RESULTS:
            C.write_json(args.out, result)
    finally:
        cluster.remove()
    return 0


if __name__ == "__main__":
    sys.exit(main())
