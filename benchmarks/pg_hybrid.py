"""Hybrid search in process, the local store beside PostgreSQL, on one conversation (issue 25, item 2).

Loads the first conversation of the first conversation set (every turn, with speaker, session, occurred_at and the
conversation's tag, as benchmarks/conversations.py's hybrid+fields variant) into MemoryStore and into PostgresBackend
(throwaway PostgreSQL, tests/support/pg_cluster.py), with `--tenants` - 1 other tenants holding the same turns in
the same table, and times `search(question, limit=10)` for every question, tagged (tags=[conversation]) and
unfiltered, with a fake embedder (hashed bag of words: the time is the engines', not the model's).

    uv run python -m benchmarks.pg_hybrid                 # writes benchmarks/results/pg_hybrid.json
    uv run python -m benchmarks.pg_hybrid --tenants 1     # PostgreSQL's table holds the one tenant only
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
import zlib
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks import _common as C

RESULTS = C.RESULTS / "pg_hybrid.json"
DIM = 384
_WORD = re.compile(r"\w+")


class HashEmbedder:
    """A TextEmbedder at tiny cost: hashed bag of words (as tests/support/fakes.py)."""

    dim = DIM
    model_name = "bench/hashed-bag-of-words"

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(DIM, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            v[zlib.crc32(word.encode()) % DIM] += 1.0
        v[-1] += 0.05
        return v / np.linalg.norm(v)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, DIM), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


def records(conv: dict[str, Any]) -> list[dict[str, Any]]:
    from benchmarks import conversations as V

    return [
        {
            "id": r["id"],
            "content": r["plain"],
            "tags": [conv["id"]],
            "speaker": r["speaker"],
            "session": r["session"],
            "occurred_at": r["at"],
        }
        for r in V.turn_rows(conv)
    ]


def timed(store: Any, questions: list[str], tags: list[str] | None, repeat: int) -> dict[str, float]:
    store.search(questions[0], limit=10, tags=tags)  # warm: plans, caches
    times = []
    for _ in range(repeat):
        for q in questions:
            t0 = time.perf_counter()
            store.search(q, limit=10, tags=tags)
            times.append((time.perf_counter() - t0) * 1000)
    return {"p50_ms": round(C.pct(times, 50), 2), "p95_ms": round(C.pct(times, 95), 2), "n": len(times)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=10, help="tenants in PostgreSQL's table (default 10)")
    parser.add_argument("--repeat", type=int, default=2, help="passes over the questions (default 2)")
    parser.add_argument("--out", default=str(RESULTS), help="result file")
    args = parser.parse_args(argv)

    from benchmarks import convdata
    from benchmarks import conversations as V
    from memserver.local.store import MemoryStore
    from memserver.postgres.backend import PostgresBackend
    from tests.support.pg_cluster import Cluster

    sets = V.find_sets([convdata.DATA_DIR], None)
    name = next(iter(sets))
    conv = sets[name][0]
    rows = records(conv)
    questions = [q["question"] for q in conv["questions"]][:64]
    embedder = HashEmbedder()
    cluster = Cluster.start()
    result: dict[str, Any] = {
        "command": "uv run python -m benchmarks.pg_hybrid " + " ".join(sys.argv[1:] if argv is None else argv),
        "set": name,
        "conversation": conv["id"],
        "turns": len(rows),
        "questions": len(questions),
        "tenants": args.tenants,
        "engines": {},
    }
    try:
        url = cluster.create_database("hybrid")
        with tempfile.TemporaryDirectory(prefix="memserver-pghybrid-") as tmp:
            for other in range(1, args.tenants):
                with PostgresBackend(url, tenant=f"other{other}", embedder=embedder) as pg:
                    pg.import_(rows)
            engines = {
                "local": MemoryStore(tmp, "hybrid", embedder=embedder),
                "postgresql": PostgresBackend(url, tenant="timed", embedder=embedder),
            }
            for engine, store in engines.items():
                store.import_(rows)
                result["engines"][engine] = {
                    "tagged": timed(store, questions, [conv["id"]], args.repeat),
                    "unfiltered": timed(store, questions, None, args.repeat),
                }
                store.close()
    finally:
        cluster.remove()
    table = []
    for case in ("tagged", "unfiltered"):
        local, pg = result["engines"]["local"][case], result["engines"]["postgresql"][case]
        ratio = round(pg["p50_ms"] / local["p50_ms"], 1) if local["p50_ms"] else None
        table.append([case, local["p50_ms"], local["p95_ms"], pg["p50_ms"], pg["p95_ms"], ratio])
    print(
        f"\n{name} {conv['id']}: {len(rows)} turns, {len(questions)} questions x {args.repeat}, {args.tenants} tenants"
    )
    print(C.table(["search", "local p50", "local p95", "PG p50", "PG p95", "PG/local p50"], table))
    result["machine"] = C.machine()
    C.write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
