"""Keyword index speed at scale: rebuild time, query latency, filtered queries, incremental add and remove.

The corpus is the evaluation set's memories recombined and re-numbered up to N (ids, amounts and dates change, so
the vocabulary grows the way a real store's does), each with its date words appended as the store indexes them.
The queries are the evaluation set's queries.

    uv run python -m benchmarks.lab.keyword_speed              # N = 100,000
    uv run python -m benchmarks.lab.keyword_speed --n 20000    # quicker
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

from memserver.retrieval.bm25 import KeywordIndex
from memserver.retrieval.terms import date_text

ROOT = Path(__file__).resolve().parents[2]

DATA = ROOT / "benchmarks" / "data" / "quality.json"
_DIGITS = re.compile(r"\d")


def corpus(n: int, seed: int = 7) -> list[str]:
    """n memory texts built from the evaluation set: one or two memories, digits re-drawn, date words appended."""
    data = json.loads(DATA.read_text(encoding="utf-8"))
    texts = [m["content"] for m in data["memories"]]
    dates = [m["created_at"] for m in data["memories"]]
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        text = rng.choice(texts)
        if rng.random() < 0.3:
            text += " " + rng.choice(texts)
        text = _DIGITS.sub(lambda _: str(rng.randrange(10)), text)
        out.append(text + " " + date_text(rng.choice(dates)))
    return out


def ms(values: list[float], p: float) -> float:
    return round(float(np.percentile(values, p)) * 1000, 3)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=100_000, help="memories (default 100000)")
    args = parser.parse_args()
    texts = corpus(args.n)
    queries = [q["query"] for q in json.loads(DATA.read_text(encoding="utf-8"))["queries"]]
    words = sum(len(t.split()) for t in texts) / len(texts)
    print(f"{args.n} memories, {words:.1f} words each on average; {len(queries)} queries")

    builds = []
    for _ in range(3):
        index = KeywordIndex()  # a fresh vocabulary each time: what opening a store costs
        started = time.process_time()  # CPU time: the machine is shared, wall time measures the neighbours
        index.add_many(enumerate(texts))
        builds.append(time.process_time() - started)
    print(
        f"bulk build (rebuild on open), CPU time: best {min(builds):.3f} s, median {sorted(builds)[1]:.3f} s "
        f"-> {min(builds) * 100_000 / args.n:.3f} s per 100k"
    )

    def run(label: str, **kwargs: object) -> dict[str, float]:
        latencies = []
        for query in queries:
            started = time.process_time()
            index.search(query, 50, **kwargs)  # type: ignore[arg-type]
            latencies.append(time.process_time() - started)
        row = {"p50_ms": ms(latencies, 50), "p95_ms": ms(latencies, 95), "p99_ms": ms(latencies, 99)}
        print(
            f"search k=50 {label:34} p50 {row['p50_ms']:.3f} ms  p95 {row['p95_ms']:.3f} ms  p99 {row['p99_ms']:.3f} ms"
        )
        return row

    result: dict[str, object] = {"n": args.n, "build_s": round(min(builds), 3)}
    result["search"] = run("no filter")
    rng = np.random.default_rng(1)
    for share in (0.01, 0.1, 0.5):
        chosen = rng.choice(args.n, int(args.n * share), replace=False)
        result[f"search_filter_{share}_array"] = run(f"filter {share:.0%} (int array)", candidates=chosen)

    started = time.perf_counter()
    for i in range(2000):
        index.add(args.n + i, texts[i])
    add_ms = (time.perf_counter() - started) / 2000 * 1000
    started = time.perf_counter()
    for i in range(2000):
        index.remove(i)
    remove_ms = (time.perf_counter() - started) / 2000 * 1000
    print(f"incremental add {add_ms:.3f} ms, remove {remove_ms:.4f} ms (mean of 2000, merges included)")
    result.update(add_ms=round(add_ms, 3), remove_ms=round(remove_ms, 4))
    result["search_after_updates"] = run("after 2000 adds + 2000 removes")
    result["machine"] = {"python": platform.python_version(), "numpy": np.__version__}
    out = ROOT / "benchmarks" / "results" / "keyword_speed.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
