"""Hybrid search in process: the local store, PostgreSQL, and PostgreSQL as another revision's code (by default
main's) has it, in one run on the same data (issue 25, item 2).

Loads the first conversation of the first conversation set (every turn, with speaker, session, occurred_at and the
conversation's tag, as benchmarks/conversations.py's hybrid+fields variant) into MemoryStore and into PostgresBackend
(throwaway PostgreSQL, tests/support/pg_cluster.py), with `--tenants` - 1 other tenants holding the same turns in
the same table, and times `search(question, limit=10)` for every question, tagged (tags=[conversation]) and
unfiltered, with a fake embedder (hashed bag of words: the time is the engines', not the model's).

A baseline's PostgresBackend is `git archive <rev> memserver` run in a child process (its own database in the same
cluster, the same rows); the passes alternate local, this tree, the baselines, so that a change of the machine's
load hits all alike.

    uv run python -m benchmarks.pg_hybrid                   # writes benchmarks/results/pg_hybrid.json
    uv run python -m benchmarks.pg_hybrid --baseline main,112e125   # two baselines (comma-separated revisions)
    uv run python -m benchmarks.pg_hybrid --baseline ''     # without a baseline
    uv run python -m benchmarks.pg_hybrid --tenants 1       # PostgreSQL's table holds the one tenant only
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks import _common as C

RESULTS = C.RESULTS / "pg_hybrid.json"
CASES = ("tagged", "unfiltered")


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


def one_pass(store: Any, questions: list[str], tags: list[str]) -> dict[str, list[float]]:
    """Milliseconds of each question's search, tagged and unfiltered (after one search of each, to warm up)."""
    times: dict[str, list[float]] = {}
    for case, filter_tags in zip(CASES, (tags, None), strict=True):
        store.search(questions[0], limit=10, tags=filter_tags)
        times[case] = []
        for q in questions:
            t0 = time.perf_counter()
            store.search(q, limit=10, tags=filter_tags)
            times[case].append((time.perf_counter() - t0) * 1000)
    return times


def load_postgres(backend: Any, url: str, rows: list[dict[str, Any]], tenants: int) -> None:
    """The timed tenant's rows and `tenants` - 1 others' (the same turns) into the database at `url`."""
    embedder = C.HashEmbedder()
    for tenant in [*(f"other{i}" for i in range(1, tenants)), "timed"]:
        with backend(url, tenant=tenant, embedder=embedder) as pg:
            pg.import_(rows)


def child(spec_path: str) -> int:
    """The baseline's side (`--child`): load or time PostgreSQL with the memserver package at spec["tree"]."""
    spec = json.loads(Path(spec_path).read_text())
    sys.path.insert(0, spec["tree"])
    import memserver
    from memserver.postgres.backend import PostgresBackend

    assert str(memserver.__file__).startswith(spec["tree"]), memserver.__file__  # the baseline's code, not ours
    if spec["step"] == "scale":  # benchmarks/pg_hybrid_scale.py's pass
        from benchmarks.pg_hybrid_scale import child_pass

        print(json.dumps(child_pass(spec["url"], spec["queries"], spec["vectors"])))
        return 0
    if spec["step"] == "load":
        load_postgres(PostgresBackend, spec["url"], spec["rows"], spec["tenants"])
        print("{}")
        return 0
    with PostgresBackend(spec["url"], tenant="timed", embedder=C.HashEmbedder()) as pg:
        print(json.dumps(one_pass(pg, spec["questions"], spec["tags"])))
    return 0


class Baseline:
    """PostgresBackend as revision `rev` has it, run in child processes on its own database."""

    def __init__(self, rev: str, tmp: Path) -> None:
        archive = subprocess.run(["git", "archive", rev, "memserver"], cwd=C.ROOT, capture_output=True, check=True)
        self.tree = tmp / f"baseline-{rev}"
        with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
            tar.extractall(self.tree, filter="data")
        self.commit = subprocess.run(
            ["git", "rev-parse", "--short", rev], cwd=C.ROOT, capture_output=True, text=True, check=True
        ).stdout.strip()
        self.spec = tmp / f"baseline-{rev}.json"

    def run(self, **spec: Any) -> Any:
        self.spec.write_text(json.dumps({"tree": str(self.tree), **spec}))
        cmd = [sys.executable, "-m", "benchmarks.pg_hybrid", "--child", str(self.spec)]
        out = subprocess.run(cmd, cwd=C.ROOT, capture_output=True, text=True)
        if out.returncode:
            raise RuntimeError(f"the baseline's child failed:\n{out.stderr}")
        return json.loads(out.stdout)


def figures(times: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, dict[str, float]]]:
    """engine -> case -> p50 / p95 / n of the milliseconds timed."""
    return {
        engine: {
            case: {"p50_ms": round(C.pct(ms, 50), 2), "p95_ms": round(C.pct(ms, 95), 2), "n": len(ms)}
            for case, ms in cases.items()
        }
        for engine, cases in times.items()
    }


def engine_table(engines: dict[str, dict[str, dict[str, float]]], first: str, cases: Sequence[str]) -> str:
    """Each case's p50 / p95 per engine and each engine's p50 over the first engine's (local)."""
    names = list(engines)
    headers = [first, *(f"{e} p50 / p95" for e in names), *(f"{e} / local p50" for e in names[1:])]
    rows = []
    for case in cases:
        f = [engines[e][case] for e in names]
        ratios = [round(x["p50_ms"] / f[0]["p50_ms"], 1) for x in f[1:]]
        rows.append([case, *(f"{x['p50_ms']} / {x['p95_ms']}" for x in f), *ratios])
    return C.table(headers, rows)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tenants", type=int, default=10, help="tenants in PostgreSQL's table (default 10)")
    parser.add_argument("--repeat", type=int, default=3, help="passes over the questions (default 3)")
    parser.add_argument("--baseline", default="main", help="revisions whose PostgresBackend runs beside, a,b ('' none)")
    parser.add_argument("--out", default=str(RESULTS), help="result file")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.child)

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
    tags = [conv["id"]]
    result: dict[str, Any] = {
        "command": "uv run python -m benchmarks.pg_hybrid " + " ".join(sys.argv[1:] if argv is None else argv),
        "set": name,
        "conversation": conv["id"],
        "turns": len(rows),
        "questions": len(questions),
        "tenants": args.tenants,
        "repeat": args.repeat,
        "engines": {},
    }
    times: dict[str, dict[str, list[float]]] = {}
    cluster = Cluster.start()
    try:
        with tempfile.TemporaryDirectory(prefix="memserver-pghybrid-") as tmp:
            url = cluster.create_database("hybrid")
            load_postgres(PostgresBackend, url, rows, args.tenants)
            local = MemoryStore(tmp, "hybrid", embedder=C.HashEmbedder())
            local.import_(rows)
            baselines: dict[str, tuple[Baseline, str]] = {}
            for n, rev in enumerate(filter(None, args.baseline.split(","))):
                baseline = Baseline(rev, Path(tmp))
                base_url = cluster.create_database(f"baseline{n}")
                baseline.run(step="load", url=base_url, rows=rows, tenants=args.tenants)
                baselines[f"postgresql {rev} ({baseline.commit})"] = baseline, base_url
            for n in range(args.repeat):
                C.log(f"pass {n + 1} of {args.repeat}")
                passes = {"local": one_pass(local, questions, tags)}
                with PostgresBackend(url, tenant="timed", embedder=C.HashEmbedder()) as pg:
                    passes["postgresql"] = one_pass(pg, questions, tags)
                for label, (baseline, base_url) in baselines.items():
                    spec = {"url": base_url, "questions": questions, "tags": tags}
                    passes[label] = baseline.run(step="time", **spec)
                for engine, cases in passes.items():
                    for case, ms in cases.items():
                        times.setdefault(engine, {}).setdefault(case, []).extend(ms)
            local.close()
    finally:
        cluster.remove()
    result["engines"] = figures(times)
    table = engine_table(result["engines"], "search", CASES)
    print(
        f"\n{name} {conv['id']}: {len(rows)} turns, {len(questions)} questions x {args.repeat}, {args.tenants} tenants"
    )
    print(table)
    result["machine"] = C.machine()
    C.write_json(args.out, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
