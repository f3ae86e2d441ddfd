"""Write-path checkpoint spacing: single `add` latency with today's fixed 5,000 vs the cost-balanced spacing.

    uv run python -m benchmarks.lab.checkpoint_spacing                      # N = 100,000, 10,000 adds per side
    uv run python -m benchmarks.lab.checkpoint_spacing --n 2000 --writes 600 --block 100    # quick

Both sides are the same code in one process, on two copies of one cached store (benchmarks/_common.py's
`ensure_store`: N memories imported with stored MiniLM vectors): "fixed" opened with MEMSERVER_CHECKPOINT_EVERY=5000
(the spacing before checkpoints.py), "balanced" without it. Blocks of `--block` single adds alternate between the
two (fixed, balanced, balanced, fixed, ...), so the load of a shared machine hits both alike. The embedder returns
stored vectors (a row of the corpus plus noise): no model runs, so the time is the store's (lock, journal append
and fsync, catch-up, HNSW and BM25 insert, and the checkpoints the write path takes). Each checkpoint's duration
and the store's running cost estimates come from the store's own debug log line. Writes
benchmarks/results/checkpoint_spacing.json.
"""

from __future__ import annotations

import argparse
import logging
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._common import (
    COLLECTION,
    base_vectors,
    cache_dir,
    corpus,
    ensure_store,
    log,
    machine,
    pct,
    table,
    write_json,
)
from memserver.local.checkpoints import write_interval
from memserver.local.store import MemoryStore

RESULTS = Path(__file__).resolve().parents[1] / "results"
MODEL = "sentence-transformers/all-MiniLM-L6-v2"  # the cached store's journal header names it


class StoredVectors:
    """A TextEmbedder returning corpus vectors plus noise: remember's store side, without the model."""

    dim = 384
    model_name = MODEL

    def __init__(self, vecs: np.ndarray, seed: int) -> None:
        self.vecs = vecs
        self.rng = np.random.default_rng(seed)

    def embed(self, texts: list[str]) -> np.ndarray:
        rows = self.vecs[self.rng.integers(0, len(self.vecs), len(texts))]
        v = rows + 0.05 * self.rng.standard_normal(rows.shape).astype(np.float32)
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self.embed([text])[0]


class Checkpoints(logging.Handler):
    """Collects the store's "checkpoint of N memories in S s (replay R ms/record); the next after K" lines."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.side = ""
        self.seen: dict[str, list[tuple[int, float, float, int]]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage().startswith("checkpoint of ") and isinstance(record.args, tuple):
            count, took, replay_ms, interval = record.args
            self.seen.setdefault(self.side, []).append((int(count), float(took), float(replay_ms), int(interval)))


def open_side(folder: Path, fixed: int | None, vecs: np.ndarray, seed: int) -> MemoryStore:
    if fixed is None:
        os.environ.pop("MEMSERVER_CHECKPOINT_EVERY", None)
    else:
        os.environ["MEMSERVER_CHECKPOINT_EVERY"] = str(fixed)
    try:
        return MemoryStore(folder, COLLECTION, embedder=StoredVectors(vecs, seed))
    finally:
        os.environ.pop("MEMSERVER_CHECKPOINT_EVERY", None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--n", type=int, default=100_000, help="memories in the store before the adds")
    ap.add_argument("--writes", type=int, default=10_000, help="single adds per side")
    ap.add_argument("--block", type=int, default=500, help="adds per side before switching to the other")
    ap.add_argument("--cache", default=None)
    ap.add_argument("--out", default=str(RESULTS / "checkpoint_spacing.json"))
    args = ap.parse_args()

    cache = cache_dir(args.cache)
    root = ensure_store(cache, args.n)
    base, _ = corpus()
    vecs = base_vectors(cache, base)
    work = Path(tempfile.mkdtemp(prefix="checkpoint-spacing-", dir=cache))
    handler = Checkpoints()
    gen_log = logging.getLogger("memserver.local.generation")
    gen_log.addHandler(handler)
    gen_log.setLevel(logging.DEBUG)
    sides = {"fixed": 5000, "balanced": None}
    stores: dict[str, MemoryStore] = {}
    lat: dict[str, list[float]] = {s: [] for s in sides}
    try:
        for i, (side, fixed) in enumerate(sides.items()):
            shutil.copytree(root, work / side)
            handler.side = side
            stores[side] = open_side(work / side, fixed, vecs, seed=i)
        log(f"{args.writes:,} adds per side into {args.n:,}-memory stores, blocks of {args.block}")
        order = list(sides)
        done = 0
        t_start = time.perf_counter()
        while done < args.writes:
            count = min(args.block, args.writes - done)
            for side in order:
                handler.side, store = side, stores[side]
                for j in range(count):
                    text = f"checkpoint spacing note {done + j} about topic{(done + j) % 997} on {side}"
                    t0 = time.perf_counter()
                    store.add(text)
                    lat[side].append((time.perf_counter() - t0) * 1000)
            done += count
            order.reverse()
            log(f"  {done:,} / {args.writes:,} per side after {time.perf_counter() - t_start:.0f} s")
    finally:
        for side, store in stores.items():
            handler.side = f"{side} (close)"
            store.close()
        gen_log.removeHandler(handler)
        shutil.rmtree(work, ignore_errors=True)

    rows, result = [], {}
    for side in sides:
        xs = lat[side]
        cks = handler.seen.get(side, [])
        r = {
            "writes": len(xs),
            "p50_ms": statistics.median(xs),
            "p99_ms": pct(xs, 99),
            "p99_9_ms": pct(xs, 99.9),
            "max_ms": max(xs),
            "mean_ms": statistics.fmean(xs),
            "checkpoints": len(cks),
            "checkpoint_s": [round(c[1], 3) for c in cks],
            "checkpoint_total_s": sum(c[1] for c in cks),
            "intervals_after": [c[3] for c in cks],
            "replay_ms_per_record": [round(c[2], 3) for c in cks],
        }
        result[side] = r
        cells = ("writes", "p50_ms", "p99_ms", "p99_9_ms", "max_ms", "mean_ms", "checkpoints", "checkpoint_total_s")
        rows.append([side, *(r[c] for c in cells)])
    heads = ["side", "adds", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "mean ms", "checkpoints", "ckpt s total"]
    print(table(heads, rows))
    for k in ("p50_ms", "p99_ms", "p99_9_ms", "max_ms", "mean_ms"):
        result[f"ratio_{k}"] = result["balanced"][k] / result["fixed"][k]
    print("balanced / fixed: " + ", ".join(f"{k[6:]} {result[k]:.2f}" for k in result if k.startswith("ratio_")))
    # The balanced side's own estimates, extrapolated (not measured) to larger stores by the pure policy.
    measured = [c for s in sides for c in handler.seen.get(s, [])]
    if measured:
        per_memory = statistics.median(c[1] / c[0] for c in measured)
        replay_s = statistics.median(c[2] for c in measured) / 1000
        result["save_us_per_memory"] = per_memory * 1e6
        result["replay_ms_per_record"] = replay_s * 1000
        result["interval_at"] = {n: write_interval(per_memory * n, replay_s) for n in (args.n, 200_000, 1_000_000)}
        print(
            f"measured here: a checkpoint costs {per_memory * 1e6:.2f} us per memory, a record replays in "
            f"{replay_s * 1000:.3f} ms -> spacing "
            + ", ".join(f"{n:,}: {k:,}" for n, k in result["interval_at"].items())
            + " records (N > the run's N: extrapolated)"
        )
    print(f"wrote {write_json(args.out, {'n': args.n, 'block': args.block, 'machine': machine(), **result})}")


if __name__ == "__main__":
    main()
