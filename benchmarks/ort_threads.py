"""onnxruntime intra-op threads (1 vs 2) and spinning (session.intra_op.allow_spinning 1 vs 0), per query and batch.

    uv run python -m benchmarks.ort_threads              # 5 rounds x 4 settings, 200 queries + 20 batches each
    uv run python -m benchmarks.ort_threads --quick      # smoke run (1 round, a few calls)

Each setting runs in its own fresh process (a spinning pool in one session would take CPU from another), the
settings interleaved round by round (order reversed every other round) so a noisy neighbour slows all alike. A
process loads the model through memserver.embedding.embedder.load_session, warms up, then times one 10-word-piece
query (tokenise + run) --queries times and a batch of 32 texts of 20-40 word pieces --batches times: wall clock per
call, and the CPU the process burnt per call (all its threads, from time.process_time), which is what spinning
takes from the event loop and the client on a small machine. Prints medians over rounds; writes
benchmarks/results/ort_threads.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

from benchmarks import _common as C

QUERY = "where did I park my car yesterday?"  # 10 word pieces with [CLS] and [SEP]
SETTINGS = [(1, True), (1, False), (2, True), (2, False)]


def worker(threads: int, spinning: bool, queries: int, batches: int) -> dict[str, Any]:
    """Load a session with this setting and time queries and batches; the answer is printed as JSON."""
    import numpy as np

    from benchmarks.embed import ingest_texts
    from memserver.embedding.embedder import load_session, load_tokenizer
    from memserver.embedding.sources import resolve_model

    files = resolve_model(None)
    tokenizer = load_tokenizer(files.tokenizer)
    session = load_session(files.model, threads, spinning=spinning)
    needs_types = "token_type_ids" in {i.name for i in session.get_inputs()}

    def run(texts: list[str]) -> None:
        rows = [e.ids for e in tokenizer.encode_batch(texts)]
        longest = max(len(r) for r in rows)
        ids = np.zeros((len(rows), longest), dtype=np.int64)
        mask = np.zeros_like(ids)
        for i, r in enumerate(rows):
            ids[i, : len(r)], mask[i, : len(r)] = r, 1
        feed = {"input_ids": ids, "attention_mask": mask}
        if needs_types:
            feed["token_type_ids"] = np.zeros_like(ids)
        session.run(None, feed)

    batch = ingest_texts(32)
    out: dict[str, Any] = {}
    for name, texts, n in [("query", [QUERY], queries), ("batch32", batch, batches)]:
        for _ in range(max(3, n // 10)):
            run(texts)
        walls, cpus = [], []
        for _ in range(n):
            w, c = time.perf_counter(), time.process_time()
            run(texts)
            cpus.append((time.process_time() - c) * 1000)
            walls.append((time.perf_counter() - w) * 1000)
        out[name] = {"wall_p50": statistics.median(walls), "cpu_mean": statistics.fmean(cpus)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--worker", nargs=2, metavar=("THREADS", "SPIN"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.queries, args.batches = 1, 5, 2
    if args.worker:
        print(json.dumps(worker(int(args.worker[0]), args.worker[1] == "1", args.queries, args.batches)))
        return 0
    runs: dict[tuple[int, bool], list[dict[str, Any]]] = {s: [] for s in SETTINGS}
    for r in range(args.rounds):
        for threads, spin in SETTINGS if r % 2 == 0 else SETTINGS[::-1]:
            cmd = [sys.executable, "-m", "benchmarks.ort_threads", "--worker", str(threads), "1" if spin else "0"]
            cmd += ["--queries", str(args.queries), "--batches", str(args.batches)]
            done = subprocess.run(cmd, capture_output=True, text=True, check=True)
            runs[(threads, spin)].append(json.loads(done.stdout))
            C.log(f"round {r + 1}: threads={threads} spinning={spin} done")
    rows, results = [], []
    for (threads, spin), got in runs.items():
        med = {
            f"{kind}_{stat}": round(statistics.median(g[kind][stat] for g in got), 3)
            for kind in ("query", "batch32")
            for stat in ("wall_p50", "cpu_mean")
        }
        results.append({"threads": threads, "spinning": spin, **med})
        rows.append([threads, "on" if spin else "off", *med.values()])
    print(
        C.table(
            [
                "threads",
                "spinning",
                "query wall p50 ms",
                "query CPU ms",
                "batch of 32 wall p50 ms",
                "batch of 32 CPU ms",
            ],
            rows,
        )
    )
    C.write_json(
        "benchmarks/results/ort_threads.json", {"machine": C.machine(), "args": vars(args), "results": results}
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
