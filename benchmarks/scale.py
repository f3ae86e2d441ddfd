"""Scale: HNSW recall@10 against exact search, search latency, open time and RSS at 100k and 1M memories.

    uv run python -m benchmarks.scale                    # 100k
    uv run python -m benchmarks.scale --with-1m          # 100k and 1M (builds the 1M store once: minutes)
    uv run python -m benchmarks.scale --quick            # smoke run (2,000 memories)

Two views, side by side:
  - "sentences": the cached store of benchmarks/_common.py (vectors mixed from real sentence embeddings), the same
    store recall_mcp.py and startup.py serve. The 339 real queries are embedded with the Embedder, then
    `search(limit=10, mode="semantic", query_vector=...)` (search without embedding) is compared with the exact
    top-10 by numpy over the store's own vectors (read through `export(include_vectors=True)`). Open time and RSS
    come from a fresh process that only opens the store (checkpointed index, no model): the store's share of the
    server's memory.
  - "store.py": benchmarks/store.py (the store's own benchmark, random clustered vectors, its own fresh store) is
    run as is for each size up to --store-py-max, in its own process, and its figures are collected.
Prints a table and writes benchmarks/results/scale.json (and store.py's JSON as results/scale-storepy-<size>.json).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _common as C

RECALL_EPSILON = 1e-3  # ann-benchmarks' default for its k-nn recall (cosine distance units)

_OPEN = """
import json, sys, time
t0 = time.perf_counter()
from memserver.embedding.embedder import Embedder
from memserver.local.store import MemoryStore
t1 = time.perf_counter()
s = MemoryStore(sys.argv[1], sys.argv[2], embedder=Embedder())  # the model is never loaded here
t2 = time.perf_counter()
s.search("first search", limit=10, mode="semantic", query_vector=[1.0] * 384)
t3 = time.perf_counter()
status = dict(l.split(":", 1) for l in open("/proc/self/status") if l.startswith(("VmRSS", "VmHWM")))
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "first_search_ms": (t3 - t2) * 1000,
                  "count": s.stats()["count"], "rss_mb": int(status["VmRSS"].split()[0]) / 1024,
                  "peak_rss_mb": int(status["VmHWM"].split()[0]) / 1024}))
"""


def open_fresh(root: Path, repeat: int) -> dict[str, Any]:
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", _OPEN, str(root), C.COLLECTION],
            capture_output=True,
            text=True,
            check=True,
            cwd=C.ROOT,
        ).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    best = min(runs, key=lambda r: r["open_s"])
    return {k: round(v, 3) if isinstance(v, float) else v for k, v in best.items()}


def exact_top(store: Any, qs: np.ndarray, k: int) -> tuple[list[list[str]], np.ndarray]:
    """Exact top-k ids and their scores for each query, by numpy over every stored vector (read from an export,
    one batch at a time, so memory stays flat)."""
    best_s = np.full((len(qs), 0), -np.inf, dtype=np.float32)
    best_ids = np.empty((len(qs), 0), dtype=object)
    batch: list[dict[str, Any]] = []

    def fold(items: list[dict[str, Any]]) -> None:
        nonlocal best_s, best_ids
        mat = np.asarray([m["vector"] for m in items], dtype=np.float32)
        ids = np.asarray([m["id"] for m in items], dtype=object)
        sc = np.concatenate([best_s, qs @ mat.T], axis=1)
        cand = np.concatenate([best_ids, np.broadcast_to(ids, (len(qs), len(ids)))], axis=1)
        keep = np.argsort(-sc, axis=1, kind="stable")[:, :k]
        best_s, best_ids = np.take_along_axis(sc, keep, axis=1), np.take_along_axis(cand, keep, axis=1)

    for m in store.export(include_vectors=True):
        batch.append(m)
        if len(batch) == 20_000:
            fold(batch)
            batch = []
    if batch:
        fold(batch)
    return [list(row) for row in best_ids], best_s


def sentences_view(root: Path, qvecs: np.ndarray, repeat_open: int) -> dict[str, Any]:
    from memserver.embedding.embedder import Embedder
    from memserver.local.store import MemoryStore

    res: dict[str, Any] = {"open_fresh_process": open_fresh(root, repeat_open)}
    with MemoryStore(root, C.COLLECTION, embedder=Embedder()) as s:
        n = s.stats()["count"]
        for q in qvecs[:20]:  # warm-up
            s.search("warm-up", limit=10, mode="semantic", query_vector=q)
        lat, got, got_scores = [], [], []
        for q in qvecs:
            t0 = time.perf_counter()
            hits = s.search("query", limit=10, mode="semantic", query_vector=q)
            lat.append((time.perf_counter() - t0) * 1000)
            got.append({h.memory.id for h in hits})
            got_scores.append([h.score for h in hits])
        params = s.stats()["index"]
        t0 = time.perf_counter()
        truth, truth_scores = exact_top(s, qvecs, 10)
        res["exact_from_export_s"] = round(time.perf_counter() - t0, 2)
    hit = sum(len(g & set(t)) for g, t in zip(got, truth, strict=True))
    # ann-benchmarks' k-nn recall: a returned result counts when its distance is within EPSILON of the k-th exact
    # one, so near-ties (which strict recall counts as misses) count as found.
    hit_eps = sum(
        sum(score >= kth - RECALL_EPSILON for score in scores)
        for scores, kth in zip(got_scores, truth_scores[:, -1].tolist(), strict=True)
    )
    res.update(
        {
            "n": n,
            "index": params,
            "recall_at_10": round(hit / truth_scores.size, 4),
            "recall_at_10_eps": round(hit_eps / truth_scores.size, 4),
            "score_gap_1st_10th_p50": round(float(np.median(truth_scores[:, 0] - truth_scores[:, -1])), 4),
            "search_ms": C.summary(lat),
            "build": C.build_info(root),
        }
    )
    return res


def store_py_view(n: int, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "benchmarks.store", "--n", str(n), "--out", str(out)]
    if n < 10_000:
        cmd += ["--queries", "50"]
    t0 = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True, cwd=C.ROOT)
    if run.returncode != 0:
        return {"error": run.stderr.strip().splitlines()[-1] if run.stderr.strip() else f"exit {run.returncode}"}
    data = json.loads(out.read_text())
    data["wall_s"] = round(time.perf_counter() - t0, 1)
    return data


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000], help="store sizes (default 100000)")
    parser.add_argument("--with-1m", action="store_true", help="add 1,000,000")
    parser.add_argument("--no-store-py", action="store_true", help="do not run benchmarks/store.py")
    parser.add_argument(
        "--store-py-max",
        type=int,
        default=100_000,
        help="run store.py only up to this size (default 100000: at 1M it builds its own store, ~30 min here)",
    )
    parser.add_argument("--quick", action="store_true", help="smoke run: 2,000 memories, store.py skipped")
    parser.add_argument("--cache", default=None, help="where built stores are kept (default /tmp/memserver-bench)")
    parser.add_argument("--out", default=str(C.RESULTS / "scale.json"))
    args = parser.parse_args(argv)
    sizes = [2_000] if args.quick else list(args.sizes) + ([1_000_000] if args.with_1m else [])
    run_store_py = not (args.quick or args.no_store_py)

    host = C.machine()
    cache = C.cache_dir(args.cache)
    _, queries = C.corpus()
    qvecs = C.embedder().embed(queries)
    results: dict[str, Any] = {"machine": host, "queries": len(queries), "sizes": {}}
    for n in sizes:
        root = C.ensure_store(cache, n, quick=args.quick)
        C.log(f"scale at {n:,}: sentences view ...")
        entry: dict[str, Any] = {"sentences": sentences_view(root, qvecs, 1 if args.quick else 3)}
        if run_store_py and n <= args.store_py_max:
            C.log(f"scale at {n:,}: benchmarks/store.py --n {n} ...")
            entry["store_py"] = store_py_view(n, Path(args.out).parent / f"scale-storepy-{C.size_label(n)}.json")
        results["sizes"][str(n)] = entry
    results["machine"]["loadavg_at_end"] = C.machine()["loadavg"]

    rows = []
    for n, e in results["sizes"].items():
        s = e["sentences"]
        o = s["open_fresh_process"]
        rows.append(
            [
                C.size_label(int(n)),
                "sentences",
                s["recall_at_10"],
                s["recall_at_10_eps"],
                s["search_ms"]["p50"],
                s["search_ms"]["p95"],
                o["open_s"],
                o["rss_mb"],
                o["peak_rss_mb"],
                s["build"].get("per_s", float("nan")),
            ]
        )
        p = e.get("store_py")
        if p and "error" not in p:
            rows.append(
                [
                    C.size_label(int(n)),
                    f"store.py ({p.get('data', '?')})",
                    p["recall_at_10"],
                    "",
                    p["search_p50_ms"],
                    p["search_p95_ms"],
                    p["open_s"],
                    p["rss_mb"],
                    p["peak_rss_mb"],
                    p["bulk_load_per_s"],
                ]
            )
        elif p:
            rows.append([C.size_label(int(n)), "store.py", f"failed: {p['error']}", "", "", "", "", "", "", ""])
    print("scale: HNSW search (no embedding), limit 10")
    print(
        C.table(
            [
                "memories",
                "data",
                "recall@10",
                "recall@10, eps 1e-3",
                "search p50 ms",
                "p95 ms",
                "open s",
                "RSS MB",
                "peak RSS MB",
                "bulk load /s",
            ],
            rows,
        )
    )
    C.write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
