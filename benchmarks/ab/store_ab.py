"""Two checkouts of memserver side by side: the default recall path, single adds and the bulk import, alternated.

    uv run python -m benchmarks.ab.store_ab --old OLD            # N = 100,000
    uv run python -m benchmarks.ab.store_ab --old OLD --quick    # N = 10,000

For a change that must not slow the common path (issue 12's conversation fields: one namespace, nothing replaced,
no as_of), on a shared machine where single timings swing by ±30%: every measurement runs in a fresh process of
each side in turn (old, new, new, old, ...), each importing its own checkout's `memserver` (`--old`, `--new`; the
new one defaults to this one), and the table gives the medians of the rounds and their ratio.

- build: `import_` of N memories with precomputed clustered unit vectors (store.py's data) and a checkpoint, once,
  by the old side: both sides then open and search the same files (the same HNSW graph, whose build is not
  deterministic, and the same keyword index), so the rounds compare the code alone (the new side must read what
  the old one wrote);
- import: `import_` of `--import-n` memories into an empty store, `--rounds` times per side (bulk import rate);
- search: open (fresh process), then `--queries` searches of limit 10 with a query vector (no embedding), in
  "semantic" and in the default "hybrid" mode, p50 per round of the wall time and of the process's CPU time (less
  disturbed by other work on a shared machine);
- add: `--adds` single `add` calls into a fresh 1,000-memory store (fsync included, embedding a constant), p50.

Public API only, common to both sides. Writes benchmarks/results/store_ab.json.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

DIM = 384
ROOT = Path(__file__).resolve().parents[2]


def clustered(seed: int, n: int) -> np.ndarray:
    """Unit vectors around 1000 directions (as benchmarks/store.py draws them)."""
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((1000, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    v = centres[rng.integers(0, 1000, n)] + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32) / np.sqrt(DIM)
    return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)


def text(i: int) -> str:
    return f"memory {i} about topic{i % 1000} with word{i % 337} and note{i % 53}"


# --- the worker: runs inside one side's checkout ---------------------------------------------------------------------


class ConstantEmbedder:
    dim = DIM
    model_name = "bench/random-unit-vectors"

    def embed(self, texts: list[str]) -> np.ndarray:
        return clustered(len(texts), len(texts))

    def embed_query(self, text: str) -> np.ndarray:
        return clustered(0, 1)[0]


def worker(job: str, folder: str, n: int, count: int) -> dict[str, Any]:
    from memserver import MemoryStore  # the public name: both checkouts have it

    embedder = ConstantEmbedder()
    if job in ("build", "import"):
        vecs = clustered(1, n)
        records = [{"content": text(i), "vector": vecs[i]} for i in range(n)]
        t0 = time.perf_counter()
        store = MemoryStore(folder, "ab", embedder=embedder)
        store.import_(records)
        seconds = time.perf_counter() - t0
        store.close()
        return {"seconds": seconds, "rate": n / seconds}
    if job == "search":
        t0 = time.perf_counter()
        store = MemoryStore(folder, "ab", embedder=embedder)
        opened = time.perf_counter() - t0
        qs = clustered(2, count)
        out: dict[str, Any] = {"open_s": opened}
        for mode in ("semantic", "hybrid"):
            times, cpu = [], []
            for i, q in enumerate(qs):
                words = f"topic{(i * 7) % 1000} word{i % 337} memory"
                t, c = time.perf_counter(), time.process_time()
                store.search(words, limit=10, mode=mode, query_vector=q)
                cpu.append((time.process_time() - c) * 1000)
                times.append((time.perf_counter() - t) * 1000)
            out[f"{mode}_p50_ms"] = statistics.median(times)
            out[f"{mode}_cpu_p50_ms"] = statistics.median(cpu)
        store.close()
        return out
    if job == "add":
        store = MemoryStore(folder, "ab", embedder=embedder)
        vecs = clustered(3, 1000)
        store.import_([{"content": text(i), "vector": vecs[i]} for i in range(1000)])
        times = []
        for i in range(count):
            t = time.perf_counter()
            store.add(f"single add {i} of the benchmark")
            times.append((time.perf_counter() - t) * 1000)
        store.close()
        return {"add_p50_ms": statistics.median(times)}
    raise ValueError(job)


def run(tree: Path, job: str, folder: Path, n: int = 0, count: int = 0) -> dict[str, Any]:
    """One job in a fresh process importing `tree`'s memserver."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    args = [sys.executable, str(Path(__file__).resolve()), "--worker", job, str(folder), str(n), str(count)]
    got: dict[str, Any] = json.loads(subprocess.check_output(args, env=env, text=True).strip().splitlines()[-1])
    return got


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--old", help="the other checkout (a folder holding memserver/); required")
    parser.add_argument("--new", default=str(ROOT), help="this checkout (default)")
    parser.add_argument("--n", type=int, default=100_000, help="memories in the searched stores (default 100000)")
    parser.add_argument("--import-n", type=int, default=10_000, help="memories per timed import (default 10000)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds per side (default 6)")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--adds", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="N=10000, 4 rounds")
    parser.add_argument("--dir", default=None, help="where the stores go (default: a temp dir, removed after)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "store_ab.json"))
    parser.add_argument("--worker", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        job, folder, n, count = args.worker
        print(json.dumps(worker(job, folder, int(n), int(count))))
        return 0
    if not args.old:
        parser.error("--old is required")
    if args.quick:
        args.n, args.rounds = 10_000, 4
    sides = {"old": Path(args.old).resolve(), "new": Path(args.new).resolve()}
    root = Path(args.dir or tempfile.mkdtemp(prefix="memserver-ab-"))
    results: dict[str, dict[str, list[float]]] = {side: {} for side in sides}

    def note(side: str, got: dict[str, Any]) -> None:
        for key, value in got.items():
            results[side].setdefault(key, []).append(float(value))

    def order(r: int) -> list[str]:
        return ["old", "new"] if r % 2 == 0 else ["new", "old"]

    try:
        load = os.getloadavg()[0]
        shared = root / "store"
        got = run(sides["old"], "build", shared, n=args.n)
        print(f"built by old: {args.n} memories in {got['seconds']:.1f} s", file=sys.stderr)
        for r in range(args.rounds):
            for side in order(r):
                fresh = root / f"import-{side}-{r}"
                note(side, {"import_rate": run(sides[side], "import", fresh, n=args.import_n)["rate"]})
                shutil.rmtree(fresh, ignore_errors=True)
                note(side, run(sides[side], "search", shared, count=args.queries))
                fresh = root / f"add-{side}-{r}"
                note(side, run(sides[side], "add", fresh, count=args.adds))
                shutil.rmtree(fresh, ignore_errors=True)
            print(f"round {r + 1}/{args.rounds} done", file=sys.stderr)
        summary = {
            key: {
                "old": statistics.median(results["old"][key]),
                "new": statistics.median(results["new"][key]),
                "ratio": statistics.median(results["new"][key]) / statistics.median(results["old"][key]),
            }
            for key in results["old"]
        }
        out = {
            "n": args.n,
            "import_n": args.import_n,
            "rounds": args.rounds,
            "sides": {k: str(v) for k, v in sides.items()},
            "load_avg": [load, os.getloadavg()[0]],
            "summary": summary,
            "raw": results,
        }
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=2) + "\n")
        print(f"{'what':<18} {'old':>10} {'new':>10} {'new/old':>8}   (N={args.n}, {args.rounds} rounds)")
        for key, s in summary.items():
            print(f"{key:<18} {s['old']:>10.3f} {s['new']:>10.3f} {s['ratio']:>8.2f}")
        print(f"load average {load:.1f} -> {os.getloadavg()[0]:.1f}")
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
