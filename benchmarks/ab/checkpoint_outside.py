"""Write-path checkpoints outside the exclusive lock: single `add` latency, and a reader's, before and after.

    uv run python -m benchmarks.ab.checkpoint_outside --old OLD --n 1000000 --writes 20000 --block 1000
    uv run python -m benchmarks.ab.checkpoint_outside --old OLD --n 2000 --writes 600 --block 100 \\
        --readers                                                                                      # quick

Each side is a worker process importing its own checkout's `memserver` (PYTHONPATH: `--old` for "before", `--new`,
by default this checkout, for "after"), on its own copy of the cached store (benchmarks/_common.py's
`ensure_store`), with MEMSERVER_CHECKPOINT_EVERY=5000 (the spacing the issue calls "today") or unset (the spacing
by cost, checkpoints.py). The parent has the sides make blocks of `--block` single adds in turn, the order rotating
each round, so the load of a shared machine hits them alike. The embedder returns stored vectors plus noise
(checkpoint_spacing.StoredVectors: no model runs). Each side reports its adds' latencies and the write-path
checkpoints its store logged (count, duration), and, from this checkout's code, the phases of each checkpoint.

With `--readers`, each side also has a reader process (same checkout, same store copy) that searches (semantic,
by vector, limit 10) every 5 ms while its side's writer makes a block: every search first catches up on the
writer's adds, under the shared file lock, so it waits for whatever holds the exclusive one. Its latencies are
reported per side. Writes benchmarks/results/checkpoint_outside.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

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

ROOT = Path(__file__).resolve().parents[2]  # the repository: the new side, and where `benchmarks` is imported from
SIDES = {  # name -> (checkout: "old" or "new", MEMSERVER_CHECKPOINT_EVERY or None)
    "before 5000": ("old", "5000"),
    "after 5000": ("new", "5000"),
    "before balanced": ("old", None),
    "after balanced": ("new", None),
}


# --- the workers: each runs inside one side's checkout ---------------------------------------------------------------


class Logged(logging.Handler):
    """The store's "checkpoint of N memories in S s ..." lines, and (new code) each one's phases."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.checkpoints: list[tuple[int, float]] = []
        self.phases: list[list[float]] = []

    def emit(self, record: logging.LogRecord) -> None:
        msg, args = record.msg, record.args
        if not isinstance(args, tuple):
            return
        if isinstance(msg, str) and msg.startswith("checkpoint of "):
            self.checkpoints.append((int(args[0]), float(args[1])))
        elif isinstance(msg, str) and msg.startswith("checkpoint outside the lock"):
            self.phases.append([round(float(a), 3) for a in args])


def writer(folder: str, seed: int) -> None:
    from benchmarks.lab.checkpoint_spacing import StoredVectors
    from memserver import MemoryStore  # the public name: both checkouts have it

    cache = cache_dir(None)
    vecs = base_vectors(cache, corpus()[0])
    store = MemoryStore(folder, COLLECTION, embedder=StoredVectors(vecs, seed))
    handler = Logged()
    for name in ("memserver.local.generation", "memserver.local.checkpoint_job"):
        logging.getLogger(name).addHandler(handler)
        logging.getLogger(name).setLevel(logging.DEBUG)
    print(json.dumps({"ready": True}), flush=True)
    done = 0
    for line in sys.stdin:
        cmd = line.split()
        if cmd[0] == "quit":
            break
        lat = []
        for _ in range(int(cmd[1])):
            t0 = time.perf_counter()
            store.add(f"checkpoint outside note {done} about topic{done % 997} seed {seed}")
            lat.append((time.perf_counter() - t0) * 1000)
            done += 1
        out = {"lat": lat, "checkpoints": handler.checkpoints, "phases": handler.phases}
        handler.checkpoints, handler.phases = [], []
        print(json.dumps(out), flush=True)
    store.close()


def _set_on_line(event: threading.Event) -> None:
    sys.stdin.readline()
    event.set()


def reader(folder: str) -> None:
    from memserver import MemoryStore  # the public name: both checkouts have it

    class NoModel:
        dim = 384
        model_name = "sentence-transformers/all-MiniLM-L6-v2"

        def embed(self, texts: list[str]) -> np.ndarray:
            raise RuntimeError("the reader searches by vector")

        def embed_query(self, text: str) -> np.ndarray:
            raise RuntimeError("the reader searches by vector")

    vecs = base_vectors(cache_dir(None), corpus()[0])
    store = MemoryStore(folder, COLLECTION, embedder=NoModel())
    print(json.dumps({"ready": True}), flush=True)
    rng = np.random.default_rng(7)
    for line in sys.stdin:
        if line.strip() == "quit":
            break
        stop = threading.Event()
        threading.Thread(target=_set_on_line, args=(stop,), daemon=True).start()
        lat = []
        while not stop.is_set():
            q = vecs[int(rng.integers(0, len(vecs)))]
            t0 = time.perf_counter()
            store.search("(by vector)", limit=10, mode="semantic", query_vector=q)
            lat.append((time.perf_counter() - t0) * 1000)
            stop.wait(0.005)
        print(json.dumps({"lat": lat}), flush=True)
    store.close()


# --- the parent ---------------------------------------------------------------------------------------------------


class Proc:
    def __init__(self, tree: Path, role: str, folder: Path, every: str | None, seed: int) -> None:
        env = {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{ROOT}"}
        env.pop("MEMSERVER_CHECKPOINT_EVERY", None)
        if every is not None:
            env["MEMSERVER_CHECKPOINT_EVERY"] = every
        args = [sys.executable, str(Path(__file__).resolve()), "--worker", role, str(folder), str(seed)]
        self.p = subprocess.Popen(args, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def send(self, line: str) -> None:
        assert self.p.stdin is not None
        self.p.stdin.write(line + "\n")
        self.p.stdin.flush()

    def recv(self) -> dict[str, Any]:
        assert self.p.stdout is not None
        line = self.p.stdout.readline()
        if not line:
            raise RuntimeError(f"worker {self.p.args} exited ({self.p.wait()})")
        got: dict[str, Any] = json.loads(line)
        return got

    def quit(self) -> None:
        self.send("quit")
        self.p.wait(600)


def summary(xs: list[float]) -> dict[str, float]:
    return {
        "count": len(xs),
        "p50_ms": statistics.median(xs),
        "p99_ms": pct(xs, 99),
        "p99_9_ms": pct(xs, 99.9),
        "max_ms": max(xs),
        "mean_ms": statistics.fmean(xs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--worker", nargs=3, metavar=("ROLE", "FOLDER", "SEED"), help=argparse.SUPPRESS)
    ap.add_argument("--old", type=Path, help="the checkout of the code before (e.g. a detached worktree of main)")
    ap.add_argument("--new", type=Path, default=ROOT, help="the checkout after (default: this one)")
    ap.add_argument("--n", type=int, default=100_000, help="memories in the store before the adds")
    ap.add_argument("--writes", type=int, default=10_000, help="single adds per side")
    ap.add_argument("--block", type=int, default=1000, help="adds per side before the next side's turn")
    ap.add_argument("--sides", default=",".join(SIDES), help="comma-separated, of: " + ", ".join(SIDES))
    ap.add_argument("--readers", action="store_true", help="a searching reader process per side")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "checkpoint_outside.json"))
    args = ap.parse_args()
    if args.worker:
        role, folder, seed = args.worker
        writer(folder, int(seed)) if role == "writer" else reader(folder)
        return
    if args.old is None:
        ap.error("--old is required")
    sides = [s.strip() for s in args.sides.split(",")]
    cache = cache_dir(None)
    root = ensure_store(cache, args.n)
    work = Path(tempfile.mkdtemp(prefix="checkpoint-outside-", dir=cache))
    writers: dict[str, Proc] = {}
    readers: dict[str, Proc] = {}
    lat: dict[str, list[float]] = {s: [] for s in sides}
    rlat: dict[str, list[float]] = {s: [] for s in sides}
    cks: dict[str, list[tuple[int, float]]] = {s: [] for s in sides}
    phases: dict[str, list[list[float]]] = {s: [] for s in sides}
    try:
        for i, side in enumerate(sides):
            tree = args.old if SIDES[side][0] == "old" else args.new
            t0 = time.perf_counter()
            shutil.copytree(root, work / str(i))
            writers[side] = Proc(tree, "writer", work / str(i), SIDES[side][1], i)
            writers[side].recv()
            if args.readers:
                readers[side] = Proc(tree, "reader", work / str(i), None, i)
                readers[side].recv()
            log(f"  {side}: copied and opened in {time.perf_counter() - t0:.0f} s")
        log(f"{args.writes:,} adds per side into {args.n:,}-memory stores, blocks of {args.block}, sides {sides}")
        order = list(sides)
        done = 0
        t_start = time.perf_counter()
        while done < args.writes:
            count = min(args.block, args.writes - done)
            for side in order:
                if side in readers:
                    readers[side].send("go")
                writers[side].send(f"add {count}")
                got = writers[side].recv()
                if side in readers:
                    readers[side].send("stop")
                    rlat[side] += readers[side].recv()["lat"]
                lat[side] += got["lat"]
                cks[side] += [tuple(c) for c in got["checkpoints"]]
                phases[side] += got["phases"]
            done += count
            order = order[1:] + order[:1]
            log(f"  {done:,} / {args.writes:,} per side after {time.perf_counter() - t_start:.0f} s")
    finally:
        for proc in [*readers.values(), *writers.values()]:
            try:
                proc.quit()
            except Exception:
                proc.p.kill()
        shutil.rmtree(work, ignore_errors=True)

    result: dict[str, Any] = {}
    rows = []
    for side in sides:
        r = summary(lat[side])
        r["checkpoints"] = len(cks[side])
        r["checkpoint_s"] = [round(c[1], 3) for c in cks[side]]
        r["phases_s"] = phases[side]  # staged, written, lock waited, committed (this checkout's code only)
        if rlat[side]:
            r["reader"] = summary(rlat[side])
        result[side] = r
        row = [side, *(r[k] for k in ("count", "p50_ms", "p99_ms", "p99_9_ms", "max_ms", "mean_ms", "checkpoints"))]
        if args.readers:
            row += [r["reader"]["count"], r["reader"]["p50_ms"], r["reader"]["p99_9_ms"], r["reader"]["max_ms"]]
        rows.append(row)
    heads = ["side", "adds", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "mean ms", "checkpoints"]
    if args.readers:
        heads += ["searches", "search p50", "search p99.9", "search max"]
    print(table(heads, rows))
    for side in sides:
        if cks[side]:
            print(f"{side}: checkpoints {result[side]['checkpoint_s']} s; phases {result[side]['phases_s']}")
    for a, b in (("after 5000", "before 5000"), ("after balanced", "before balanced")):
        if a in result and b in result:
            ratios = {k: result[a][k] / result[b][k] for k in ("p50_ms", "p99_ms", "p99_9_ms", "max_ms", "mean_ms")}
            result[f"{a} / {b}"] = ratios
            print(f"{a} / {b}: " + ", ".join(f"{k[:-3]} {v:.2f}" for k, v in ratios.items()))
    meta = {"n": args.n, "block": args.block, "writes": args.writes, "machine": machine()}
    print(f"wrote {write_json(args.out, {**meta, **result})}")


if __name__ == "__main__":
    main()
