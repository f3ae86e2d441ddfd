"""`memserver import` of a large export, SIGKILLed in the middle and run again (issue 27, item 3).

An export of `--records` memories with their vectors (the bulk-load path; made with the fake embedder, so no model
is loaded) is imported by the CLI, as a user runs it, three times through tests/support/kill_points.py: once
through (the wall and CPU time; the import batches counted), once killed before its middle batch, and that
store's import run again. The killed store is reopened and checked (whole batches only, the first ones of the
file; export, count, keyword index, listing and search agreeing: kill_points.check_store), as is the store after
the re-run (every record there, no file left that nothing names). tests/local/test_kill_import.py kills a 5,000
record import at every batch; this is the issue's 100k, once.

    uv run python -m benchmarks.kill_import                    # 100,000 records
    uv run python -m benchmarks.kill_import --records 3000     # a quick look
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, log, machine, table, write_json

CLI = "import sys\nfrom memserver.cli import main\nsys.exit(main(sys.argv[1:]))\n"
BATCH = "memserver.local.writes:import_batch"  # before each batch of the import (and once after the last)


def make_export(path: Path, records: int, scratch: Path) -> list[str]:
    """Write an export of `records` memories with vectors to `path`; their ids in file order."""
    from memserver.local.store import MemoryStore
    from tests.support.fakes import FakeEmbedder

    with MemoryStore(scratch, "c", embedder=FakeEmbedder()) as store:
        store.add_many([f"fact {i} about item{i} and topic{i % 97}" for i in range(records)])
        with path.open("w", encoding="utf-8") as out:
            ids = []
            for record in store.export(include_vectors=True):
                out.write(json.dumps(record) + "\n")
                ids.append(record["id"])
    shutil.rmtree(scratch)
    return ids


def cli_import(export: Path, data: Path, at: int | None) -> dict[str, Any]:
    """One `memserver import` (killed before batch `at`, or run through): how it ended, its wall and CPU time."""
    from tests.support import kill_points

    before, t0 = resource.getrusage(resource.RUSAGE_CHILDREN), time.perf_counter()
    args = ["import", str(export), "--data-dir", str(data), "--collection", "c"]
    run = kill_points.run(CLI, *args, label=BATCH, at=at, started=True, timeout=7200)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    summary = [line for line in run.stderr.splitlines() if line.startswith("imported")]
    if not run.killed and run.returncode != 0:
        raise SystemExit(f"memserver import failed ({run.returncode}): {run.stderr[-2000:]}")
    return {
        "killed": run.killed,
        "batches": run.calls,
        "wall_s": round(time.perf_counter() - t0, 1),
        "cpu_s": round(cpu, 1),
        "said": summary[-1] if summary else "",
    }


def check(data: Path, present: list[str], gone: list[str]) -> dict[str, Any]:
    """Open the store (timed) and check it holds exactly `present` (kill_points.check_store)."""
    from memserver.local.store import MemoryStore
    from tests.support import kill_points
    from tests.support.fakes import FakeEmbedder

    t0 = time.perf_counter()
    with MemoryStore(data, "c", embedder=FakeEmbedder()) as store:
        opened = time.perf_counter() - t0
        count = store.stats()["count"]
        kill_points.check_store(store, set(present), set(gone))
    return {"count": count, "open_s": round(opened, 1), "stale_files": kill_points.stale_files(data / "c")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--dir", help="scratch folder (default: a temporary one)")
    parser.add_argument("--out", default=str(RESULTS / "kill_import.json"))
    args = parser.parse_args(argv)
    from memserver.local.writes import IMPORT_BATCH

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        base = Path(tmp)
        export = base / "export.jsonl"
        t0 = time.perf_counter()
        ids = make_export(export, args.records, base / "source")
        log(f"export of {len(ids):,} records written in {time.perf_counter() - t0:.1f} s")
        through = cli_import(export, base / "through", None)
        log(f"import run through: {through}")
        middle = through["batches"] // 2
        killed = cli_import(export, base / "killed", middle)
        reopened = check(base / "killed", ids[: (middle - 1) * IMPORT_BATCH], ids[(middle - 1) * IMPORT_BATCH :])
        log(f"killed before batch {middle}: {killed}, reopened: {reopened}")
        again = cli_import(export, base / "killed", None)
        final = check(base / "killed", ids, [])
        log(f"run again: {again}, then: {final}")
    ok = (
        killed["killed"]
        and reopened["count"] == (middle - 1) * IMPORT_BATCH
        and final["count"] == len(ids)
        and not reopened["stale_files"]
        and not final["stale_files"]
    )
    result = {
        "records": len(ids),
        "batch": IMPORT_BATCH,
        "through": through,
        "killed_before_batch": middle,
        "killed": killed,
        "reopened": reopened,
        "again": again,
        "final": final,
        "ok": ok,
        "machine": machine(),
    }
    print(
        table(
            ["run", "wall s", "CPU s", "memories after", "open after (s)", "said"],
            [
                ["import through", through["wall_s"], through["cpu_s"], len(ids), "", through["said"]],
                [
                    f"killed before batch {middle}",
                    killed["wall_s"],
                    killed["cpu_s"],
                    reopened["count"],
                    reopened["open_s"],
                    "(SIGKILL)",
                ],
                ["same import again", again["wall_s"], again["cpu_s"], final["count"], final["open_s"], again["said"]],
            ],
        )
    )
    write_json(args.out, result)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
