"""Many processes on one local store: throughput, write and search latency, lock waits, and nothing lost or unseen.

    uv run python -m benchmarks.multiprocess             # 8 processes x 2,500 writes
    uv run python -m benchmarks.multiprocess --quick     # 3 x 30, a smoke run
    uv run python -m benchmarks.multiprocess --procs 8 --writes 100 --out mp.json

Each worker process opens the same collection and, after a start barrier, makes `--writes` writes: adds (one in
ten is later deleted by the same worker; every tenth write is such a delete), each followed by one hybrid search
of random words and by the visibility checks below. A constant-cost hashed bag-of-words embedder stands in for the
model, so the figures are the store's (journal appends with fdatasync, the cross-process lock, catching up on the
others' writes), not onnxruntime's.

What "each sees the others' writes on its next call" means here: after a write returns, its worker publishes it on
a board (a small file per worker, written after the store acknowledged the write): the latest add it will never
delete, and the latest delete. Before each check, a worker reads every other worker's board; anything it reads
there was acknowledged before its check began. Then, for every other worker j: `get(latest add of j)` returns the
memory, `get(latest delete of j)` returns None, and (for one j per write, in turn) a keyword search for the add's
unique token ranks it first. A failure of any of these is a "stale read" and is counted. At the end a fresh store
opened on the folder must hold exactly every acknowledged add minus the acknowledged deletes: "lost" counts the
acknowledged adds missing and "resurrected" the acknowledged deletes present. Both must be 0.

Lock waits: every FileLock.hold is timed from the call to the moment the lock is held (exclusive for writes and
checkpoints, shared for catching up). Writes benchmarks/results/multiprocess.json.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, ROOT, HashEmbedder, log, machine, summary, table, write_json

COLLECTION = "multi"
WORDS = [
    *("invoice", "staging", "password", "rotates", "monday", "deploy", "berlin", "coffee", "meeting", "budget"),
    *("review", "quarter", "client", "design", "release", "backup", "server", "laptop", "garden", "recipe"),
    *("flight", "hotel", "doctor", "birthday", "project", "contract"),
]
_BOARD = 128  # bytes per board record: "<writes> <keep id> <deleted id> <crc>\n", space-padded


# --- the board: what each worker has had acknowledged, for the others to check ----------------------------------


def publish(fd: int, writes: int, keep: str, deleted: str) -> None:
    body = f"{writes} {keep or '-'} {deleted or '-'}"
    record = f"{body} {zlib.crc32(body.encode()):08x}".ljust(_BOARD - 1) + "\n"
    os.pwrite(fd, record.encode(), 0)


def read_board(path: Path) -> tuple[int, str, str]:
    """(writes, latest kept add, latest delete) of one worker; a record caught mid-write is read again."""
    while True:
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return 0, "", ""
        parts = raw.decode("ascii", "replace").split()
        if len(parts) == 4 and f"{zlib.crc32(' '.join(parts[:3]).encode()):08x}" == parts[3]:
            writes, keep, deleted = int(parts[0]), parts[1], parts[2]
            return writes, "" if keep == "-" else keep, "" if deleted == "-" else deleted
        if not raw.strip():
            return 0, "", ""


# --- one worker --------------------------------------------------------------------------------------------------


def timed_locks(waits: dict[str, list[float]]) -> None:
    """Time every FileLock.hold from the call to the moment the lock is held (ms), by kind."""
    from memserver.local.journal import FileLock

    hold = FileLock.hold

    @contextlib.contextmanager
    def timed(self: FileLock, exclusive: bool) -> Iterator[None]:
        started = time.perf_counter()
        with hold(self, exclusive):
            held = time.perf_counter()
            waits["exclusive" if exclusive else "shared"].append((held - started) * 1000)
            try:
                yield
            finally:
                waits["held_exclusive" if exclusive else "held_shared"].append((time.perf_counter() - held) * 1000)

    FileLock.hold = timed  # type: ignore[method-assign]


def worker(args: argparse.Namespace) -> int:
    from memserver.local.store import MemoryStore

    me, procs = args.worker, args.procs
    boards = Path(args.boards)
    waits: dict[str, list[float]] = {"exclusive": [], "shared": [], "held_exclusive": [], "held_shared": []}
    timed_locks(waits)
    rng = random.Random(1000 + me)
    store = MemoryStore(args.path, COLLECTION, embedder=HashEmbedder())
    board = os.open(boards / f"board-{me}", os.O_RDWR | os.O_CREAT, 0o600)
    print("ready", flush=True)
    assert sys.stdin.readline().strip() == "go"
    for w in waits.values():
        w.clear()
    added: list[str] = []
    deleted: list[str] = []
    deletable: list[str] = []
    keep = gone = ""
    write_ms: list[float] = []
    search_ms: list[float] = []
    checks = stale = 0
    stale_examples: list[str] = []
    started = time.perf_counter()
    for k in range(1, args.writes + 1):
        t = time.perf_counter()
        if k % 10 == 0 and deletable:
            victim = deletable.pop(rng.randrange(len(deletable)))
            assert store.delete(victim)
            write_ms.append((time.perf_counter() - t) * 1000)
            deleted.append(victim)
            gone = victim
        else:
            text = f"worker {me} note {k} tok{me}x{k} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 30)))
            mid = store.add(text, tags=[f"w{me}"]).id
            write_ms.append((time.perf_counter() - t) * 1000)
            added.append(mid)
            if k % 10 == 5:
                deletable.append(mid)
            else:
                keep = mid
        publish(board, k, keep, gone)
        t = time.perf_counter()
        store.search(" ".join(rng.choice(WORDS) for _ in range(3)), limit=5)
        search_ms.append((time.perf_counter() - t) * 1000)
        # visibility: what every other worker had acknowledged before this check began
        others = [(j, read_board(boards / f"board-{j}")) for j in range(procs) if j != me]
        turn = others[k % len(others)][0] if others else -1
        for j, (_writes, their_keep, their_gone) in others:
            problems = []
            if their_keep and store.get(their_keep) is None:
                problems.append(f"get({their_keep}) of worker {j} found nothing")
            if their_gone and store.get(their_gone) is not None:
                problems.append(f"get({their_gone}) of worker {j} found a deleted memory")
            if j == turn and their_keep:
                memory = store.get(their_keep)
                if memory is not None:
                    word = next(t for t in memory.content.split() if t.startswith("tok"))  # unique to this memory
                    hits = store.search(word, limit=1, mode="keyword")
                    if not hits or hits[0].memory.id != their_keep:
                        problems.append(f"keyword search {word!r} missed {their_keep} of worker {j}")
            checks += 1
            if problems:
                stale += 1
                stale_examples.extend(problems[: 3 - len(stale_examples)])
    elapsed = time.perf_counter() - started
    store.close()
    result = {
        "worker": me,
        "added": added,
        "deleted": deleted,
        "elapsed_s": elapsed,
        "write_ms": write_ms,
        "search_ms": search_ms,
        "lock_ms": waits,
        "checks": checks,
        "stale": stale,
        "stale_examples": stale_examples,
    }
    print(json.dumps(result), flush=True)
    return 0


# --- the run -----------------------------------------------------------------------------------------------------


def run(procs: int, writes: int, folder: Path) -> dict[str, Any]:
    from memserver.local.store import MemoryStore

    boards = folder / "boards"
    boards.mkdir(parents=True, exist_ok=True)
    path = folder / "store"
    MemoryStore(path, COLLECTION, embedder=HashEmbedder()).close()  # created once, not raced by the workers
    load_start = [round(x, 2) for x in os.getloadavg()]
    children = [
        subprocess.Popen(
            [
                *(
                    sys.executable,
                    "-m",
                    "benchmarks.multiprocess",
                    "--worker",
                    str(me),
                    "--procs",
                    str(procs),
                    "--writes",
                    str(writes),
                ),
                *("--path", str(path), "--boards", str(boards)),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        for me in range(procs)
    ]
    for child in children:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    started = time.perf_counter()
    for child in children:
        assert child.stdin is not None
        child.stdin.write("go\n")
        child.stdin.flush()
    results = []
    for child in children:
        out, _ = child.communicate(timeout=3600)
        if child.returncode != 0:
            raise SystemExit(f"a worker failed (exit {child.returncode})")
        results.append(json.loads(out.strip().splitlines()[-1]))
    wall = time.perf_counter() - started
    load_end = [round(x, 2) for x in os.getloadavg()]
    added = {m for r in results for m in r["added"]}
    deleted = {m for r in results for m in r["deleted"]}
    with MemoryStore(path, COLLECTION, embedder=HashEmbedder()) as fresh:
        lost = sorted(m for m in added - deleted if fresh.get(m) is None)
        resurrected = sorted(m for m in deleted if fresh.get(m) is not None)
        count = fresh.stats()["count"]

    def merged(key: str) -> list[float]:
        return [x for r in results for x in r[key]]

    def lock(kind: str) -> dict[str, Any]:
        xs = [x for r in results for x in r["lock_ms"][kind]]
        return {**summary(xs), "max": round(max(xs), 3) if xs else None, "waited_over_1ms": sum(x > 1 for x in xs)}

    total_writes = sum(len(r["write_ms"]) for r in results)
    return {
        "procs": procs,
        "writes_per_proc": writes,
        "wall_s": round(wall, 2),
        "writes": total_writes,
        "writes_per_s": round(total_writes / wall, 1),
        "searches_per_s": round(len(merged("search_ms")) / wall, 1),
        "write_ms": summary(merged("write_ms")),
        "search_ms": summary(merged("search_ms")),
        "lock_wait_ms": {"exclusive": lock("exclusive"), "shared": lock("shared")},
        "lock_held_ms": {"exclusive": lock("held_exclusive"), "shared": lock("held_shared")},
        "visibility_checks": sum(r["checks"] for r in results),
        "stale_reads": sum(r["stale"] for r in results),
        "stale_examples": [e for r in results for e in r["stale_examples"]][:5],
        "acknowledged_adds": len(added),
        "acknowledged_deletes": len(deleted),
        "lost": len(lost),
        "resurrected": len(resurrected),
        "count_after": count,
        "count_expected": len(added - deleted),
        "load_avg_start": load_start,
        "load_avg_end": load_end,
    }


def print_table(r: dict[str, Any]) -> None:
    w, s, ex, sh = r["write_ms"], r["search_ms"], r["lock_wait_ms"]["exclusive"], r["lock_wait_ms"]["shared"]
    hx = r["lock_held_ms"]["exclusive"]
    rows = [
        ["processes x writes", f"{r['procs']} x {r['writes_per_proc']:,}"],
        ["wall time", f"{r['wall_s']} s"],
        ["throughput (all processes)", f"{r['writes_per_s']} writes/s, {r['searches_per_s']} searches/s"],
        ["write p50 / p95 / p99", f"{w['p50']} / {w['p95']} / {w['p99']} ms"],
        ["search p50 / p95 / p99", f"{s['p50']} / {s['p95']} / {s['p99']} ms"],
        ["exclusive lock wait p50 / p99 / max", f"{ex['p50']} / {ex['p99']} / {ex['max']} ms"],
        ["exclusive lock waits over 1 ms", f"{ex['waited_over_1ms']:,} of {ex['n']:,}"],
        ["shared lock wait p50 / p99 / max", f"{sh.get('p50')} / {sh.get('p99')} / {sh.get('max')} ms"],
        ["exclusive lock held p50 / p99 / max", f"{hx['p50']} / {hx['p99']} / {hx['max']} ms"],
        ["visibility checks / stale reads", f"{r['visibility_checks']:,} / {r['stale_reads']}"],
        ["acknowledged adds / deletes", f"{r['acknowledged_adds']:,} / {r['acknowledged_deletes']:,}"],
        ["lost / resurrected", f"{r['lost']} / {r['resurrected']}"],
        ["load average start -> end", f"{r['load_avg_start']} -> {r['load_avg_end']}"],
    ]
    print(table(["multi-process store", "value"], rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--procs", type=int, default=8)
    parser.add_argument("--writes", type=int, default=2500, help="writes per process")
    parser.add_argument("--quick", action="store_true", help="3 processes x 30 writes")
    parser.add_argument("--out", default=str(RESULTS / "multiprocess.json"))
    parser.add_argument("--dir", help="folder for the store and the boards (default: a temporary one)")
    parser.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--boards", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker >= 0:
        return worker(args)
    if args.quick:
        args.procs, args.writes = 3, 30
    log(f"{args.procs} processes x {args.writes} writes on one store ...")
    with tempfile.TemporaryDirectory(prefix="memserver-mp-", dir=args.dir) as tmp:
        result = run(args.procs, args.writes, Path(tmp))
    result["machine"] = machine()
    print_table(result)
    write_json(args.out, result)
    ok = result["lost"] == result["resurrected"] == result["stale_reads"] == 0
    ok = ok and result["count_after"] == result["count_expected"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
