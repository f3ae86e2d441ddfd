"""A backup of a local store taken while four other processes keep writing (issue 24, item 6).

Each worker process adds memories one at a time and, after each add returns (acknowledged: synced), appends the
id to its own acks file. Once every worker has had `--before` writes acknowledged, the main process reads every
acks file (the writes acknowledged before the backup started), then runs `MemoryStore.backup` while the workers
go on writing, stops them, restores the backup into an empty folder and opens it. It reports how many memories
the backup holds, how long it took, the longest any lock was held by the backing-up process during it (every
FileLock.hold is timed), and the workers' longest exclusive hold for comparison (a write's commit); the run fails
if the restored store misses any write acknowledged before the backup started.

    uv run python -m benchmarks.backup_writers              # 4 writers, 2,000 writes each before the backup
    uv run python -m benchmarks.backup_writers --quick      # 4 x 20 (the test's size)
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, ROOT, log, machine, table, write_json
from benchmarks.multiprocess import HashEmbedder, timed_locks

COLLECTION = "backup_bench"


def worker(args: argparse.Namespace) -> int:
    """Add memories until the stop file exists; each acknowledged id appended to the acks file."""
    from memserver.local.store import MemoryStore

    waits: dict[str, list[float]] = {"exclusive": [], "shared": [], "held_exclusive": [], "held_shared": []}
    timed_locks(waits)
    stop = Path(args.path) / "stop"
    acks = open(Path(args.path) / f"acks-{args.worker}", "a", encoding="ascii")  # noqa: SIM115
    with MemoryStore(args.path, COLLECTION, embedder=HashEmbedder()) as store:
        n = 0
        while not stop.exists():
            memory = store.add(f"writer {args.worker} memory {n} token w{args.worker}n{n}")
            acks.write(memory.id + "\n")
            acks.flush()
            n += 1
            if n == args.before:
                print("warm", flush=True)
    acks.close()
    print(json.dumps({"writes": n, "longest_exclusive_ms": max(waits["held_exclusive"], default=0.0)}), flush=True)
    return 0


def acknowledged(folder: Path, procs: int) -> set[str]:
    out: set[str] = set()
    for i in range(procs):
        path = folder / f"acks-{i}"
        if path.exists():
            out |= {line for line in path.read_text().split("\n") if len(line) == 32}
    return out


def run(procs: int, before: int, root: Path) -> dict[str, Any]:
    from memserver.local import backup as backups
    from memserver.local.store import MemoryStore

    data = root / "data"
    waits: dict[str, list[float]] = {"exclusive": [], "shared": [], "held_exclusive": [], "held_shared": []}
    timed_locks(waits)
    store = MemoryStore(data, COLLECTION, embedder=HashEmbedder())
    cmd = [sys.executable, "-m", "benchmarks.backup_writers", "--path", str(data), "--before", str(before)]
    workers = [
        subprocess.Popen([*cmd, "--worker", str(i)], stdout=subprocess.PIPE, text=True, cwd=ROOT) for i in range(procs)
    ]
    try:
        for w in workers:
            assert w.stdout is not None and w.stdout.readline().strip() == "warm"
        acked = acknowledged(data, procs)  # read after every warm line: all acknowledged before the backup
        for w in waits.values():
            w.clear()
        started = time.perf_counter()
        result = store.backup(root / "backups")
        took = time.perf_counter() - started
        longest_lock = max([*waits["held_shared"], *waits["held_exclusive"]], default=0.0)
        shared_holds = len(waits["held_shared"])
        (data / "stop").touch()
        stats = []
        for w in workers:
            assert w.stdout is not None
            stats.append(json.loads(w.stdout.read().strip().splitlines()[-1]))
            w.wait(timeout=60)
    finally:
        (data / "stop").touch()
        for w in workers:
            if w.poll() is None:
                w.kill()
    store.close()
    restored = root / "restored" / COLLECTION
    backups.restore(Path(result["path"]), restored, replace=False)
    opened = time.perf_counter()
    with MemoryStore(root / "restored", COLLECTION, embedder=HashEmbedder()) as copy:
        open_s = time.perf_counter() - opened
        missing = [mid for mid in acked if copy.get(mid) is None]
        count = copy.stats()["count"]
    return {
        "procs": procs,
        "acknowledged_before": len(acked),
        "memories_in_backup": result["memories"],
        "restored_count": count,
        "missing": len(missing),
        "backup_s": took,
        "backup_lock_held_ms": result["lock_seconds"] * 1000,
        "longest_lock_held_ms": longest_lock,
        "shared_lock_holds": shared_holds,
        "writers_longest_exclusive_ms": max(s["longest_exclusive_ms"] for s in stats),
        "writes_total": sum(s["writes"] for s in stats),
        "restored_open_s": open_s,
        "backup_bytes": sum(result["files"].values()),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--procs", type=int, default=4)
    parser.add_argument("--before", type=int, default=2000, help="writes per worker before the backup starts")
    parser.add_argument("--quick", action="store_true", help="4 x 20")
    parser.add_argument("--dir", help="work here (default: a temporary folder)")
    parser.add_argument("--out", default=str(RESULTS / "backup_writers.json"))
    parser.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker >= 0:
        return worker(args)
    before = 20 if args.quick else args.before
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        log(f"{args.procs} writers, {before} writes each before the backup")
        result = run(args.procs, before, Path(tmp))
    result["machine"] = machine()
    write_json(args.out, result)
    rows = [[k, round(v, 2) if isinstance(v, float) else v] for k, v in result.items() if k != "machine"]
    print(table(["backup under writers", "value"], rows))
    return 1 if result["missing"] else 0


if __name__ == "__main__":
    sys.exit(main())
