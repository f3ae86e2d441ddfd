"""Benchmark the store at scale with random unit vectors (no model): search latency, recall, open time, RSS, add.

    uv run python -m benchmarks.store             # N = 100,000
    uv run python -m benchmarks.store --quick     # N = 10,000 smoke run
    uv run python -m benchmarks.store --n 1000000 # the 1M case (slow to build: HNSW insertion dominates)

Bulk-loads N memories through `import_` with precomputed vectors (the path that does not re-embed), then measures
`search(mode="semantic", query_vector=...)` (search excluding query embedding) p50/p95, recall@10 of the HNSW path
against exact brute force, exact vs filtered-HNSW cost by filter size (tag filters passing 1-20% of the store, each
plan forced through search.BRUTE_FORCE_MIN/MAX; fitting BRUTE_FORCE_COST_RATIO), open time of a fresh process with
a checkpoint (median of 5; imports and the store's open reported apart) and that process's RSS after 50 searches,
single `add` p50 (fsync included, embedding excluded via a constant-time embedder), and (N <= 200k, or --compact)
how long compaction takes, how long it holds the exclusive lock for its switch (StoreHooks), and the slowest add
another store makes meanwhile. Public API only. The machine's load average is recorded at start and end (the
machine may be shared). Writes benchmarks/results/store.json.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import hnswlib
import numpy as np

from memserver.local import search as search_mod
from memserver.local.store import MemoryStore, StoreHooks

DIM = 384


class ConstantEmbedder:
    """A TextEmbedder whose embedding costs nothing, so timings show the store alone."""

    dim = DIM
    model_name = "bench/random-unit-vectors"

    def __init__(self) -> None:
        v = np.ones(DIM, dtype=np.float32)
        self._v = v / np.linalg.norm(v)

    def embed(self, texts: list[str]) -> np.ndarray:
        rng = np.random.default_rng(len(texts))
        out = rng.standard_normal((len(texts), DIM)).astype(np.float32)
        return out / np.linalg.norm(out, axis=1, keepdims=True)

    def embed_query(self, text: str) -> np.ndarray:
        return self._v


class SwitchTimer(StoreHooks):
    """Times the compaction's switch: from taking the exclusive lock to just before releasing it."""

    def __init__(self) -> None:
        self.held_ms = 0.0
        self._t = 0.0

    def compaction_switching(self) -> None:
        self._t = time.perf_counter()

    def compaction_switched(self) -> None:
        self.held_ms = (time.perf_counter() - self._t) * 1000


def unit(rng: np.random.Generator, n: int) -> np.ndarray:
    v = rng.standard_normal((n, DIM)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def dataset(rng: np.random.Generator, n: int, queries: int, kind: str) -> tuple[np.ndarray, np.ndarray]:
    """(stored vectors, query vectors). "uniform": i.i.d. on the sphere, the worst case for any ANN index (no
    structure, every neighbour nearly as far as any other point). "clustered": a mixture of 1000 directions with
    noise, queries drawn fresh from the same mixture: closer to sentence embeddings, which have low intrinsic
    dimension."""
    if kind == "uniform":
        return unit(rng, n), unit(rng, queries)
    centres = unit(rng, 1000)

    def draw(m: int) -> np.ndarray:
        v = centres[rng.integers(0, len(centres), m)] + 0.6 * unit(rng, m)
        return (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float32)

    return np.concatenate([draw(min(50_000, n - i)) for i in range(0, n, 50_000)]), draw(queries)


def rss_mb() -> tuple[float, float]:
    """(current, peak) resident set size in MB."""
    current = 0.0
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                current = int(line.split()[1]) / 1024
    except OSError:
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / (1024 if sys.platform != "darwin" else 1024 * 1024)
    return current, peak


def exact_top10(vectors: np.ndarray, qs: np.ndarray) -> np.ndarray:
    """Row numbers of the exact top 10 per query, in chunks (a 1M x 300 score matrix would not fit comfortably)."""
    best_s = np.full((len(qs), 0), -np.inf, dtype=np.float32)
    best_i = np.zeros((len(qs), 0), dtype=np.int64)
    for i in range(0, len(vectors), 100_000):
        sc = np.einsum("ij,kj->ki", vectors[i : i + 100_000], qs)
        top = np.argpartition(-sc, 9, axis=1)[:, :10]
        best_s = np.concatenate([best_s, np.take_along_axis(sc, top, 1)], axis=1)
        best_i = np.concatenate([best_i, top + i], axis=1)
        keep = np.argpartition(-best_s, 9, axis=1)[:, :10]
        best_s, best_i = np.take_along_axis(best_s, keep, 1), np.take_along_axis(best_i, keep, 1)
    return best_i


def pct(xs: list[float], p: float) -> float:
    return float(np.percentile(np.asarray(xs), p))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=100_000, help="memories to load (default 100000)")
    parser.add_argument("--quick", action="store_true", help="smoke run: N=10000, fewer queries")
    parser.add_argument("--queries", type=int, default=300, help="search queries to time (default 300)")
    parser.add_argument("--ef", type=int, default=None, help="search ef (default: the store's)")
    parser.add_argument("--M", type=int, default=None, help="HNSW M (default: the store's)")
    parser.add_argument("--data", choices=["clustered", "uniform"], default="clustered", help="vector distribution")
    parser.add_argument("--dir", default=None, help="data directory (default: a temp dir, removed after)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "store.json"))
    parser.add_argument("--compact", action="store_true", help="also time compaction when N > 200k (slow)")
    args = parser.parse_args(argv)
    n = 10_000 if args.quick else args.n
    queries = 100 if args.quick else args.queries
    rng = np.random.default_rng(7)
    tmp = tempfile.TemporaryDirectory(prefix="memserver-bench-") if args.dir is None else None
    root = Path(args.dir or tmp.name)  # type: ignore[union-attr]
    params = {k: v for k, v in (("ef", args.ef), ("M", args.M)) if v is not None}
    results: dict[str, object] = {
        "n": n,
        "dim": DIM,
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "versions": {"numpy": np.__version__, "hnswlib": getattr(hnswlib, "__version__", "0.8")},
        "load_avg_start": [round(x, 1) for x in os.getloadavg()],
    }

    # --- bulk load -------------------------------------------------------------------------------------------
    vectors, qs = dataset(rng, n, queries, args.data)
    results["data"] = args.data
    tags = [f"tag{i}" for i in range(100)]
    t0 = time.perf_counter()
    with MemoryStore(root, "bench", embedder=ConstantEmbedder(), **params) as s:
        records = ({"content": f"memory number {i}", "tags": [tags[i % 100]], "vector": vectors[i]} for i in range(n))
        assert s.import_(records) == n
        load_s = time.perf_counter() - t0
        results["index"] = s.stats()["index"]
    results["bulk_load_s"] = round(load_s, 1)
    results["bulk_load_per_s"] = round(n / load_s)
    print(f"bulk load of {n} (with checkpoint on close): {load_s:.1f} s", file=sys.stderr)

    # --- open time: a fresh process, index from the checkpoint -----------------------------------------------
    code = (
        "import sys,time,json; t=time.perf_counter();"
        "from benchmarks.store import ConstantEmbedder, rss_mb, DIM; from memserver.local.store import MemoryStore;"
        "import numpy as np; t1=time.perf_counter();"
        "s=MemoryStore(sys.argv[1],'bench',embedder=ConstantEmbedder()); t2=time.perf_counter();"
        "q=np.random.default_rng(1).standard_normal((50, DIM)).astype(np.float32);"
        "[s.search('q', limit=10, mode='semantic', query_vector=v) for v in q];"
        "print(json.dumps({'imports': t1-t, 'open': t2-t1, 'rss': rss_mb()[0]}))"
    )
    repo = str(Path(__file__).resolve().parent.parent)
    opens = [
        json.loads(subprocess.check_output([sys.executable, "-c", code, str(root)], text=True, cwd=repo))
        for _ in range(5)
    ]
    results["open_s"] = round(float(np.median([o["open"] for o in opens])), 3)
    results["open_all_s"] = [round(o["open"], 3) for o in opens]
    results["imports_s"] = round(float(np.median([o["imports"] for o in opens])), 3)
    results["rss_fresh_process_mb"] = round(float(np.median([o["rss"] for o in opens])))

    # --- search ---------------------------------------------------------------------------------------------
    t0 = time.perf_counter()
    s = MemoryStore(root, "bench", embedder=ConstantEmbedder(), **params)
    results["open_in_process_s"] = round(time.perf_counter() - t0, 3)
    for q in qs[:10]:  # warm up
        s.search("q", limit=10, mode="semantic", query_vector=q)
    lat, hit = [], 0
    exact_top = exact_top10(vectors, qs)
    for q, exact in zip(qs, exact_top, strict=False):
        t = time.perf_counter()
        hits = s.search("q", limit=10, mode="semantic", query_vector=q)
        lat.append((time.perf_counter() - t) * 1000)
        got = {int(h.memory.content.rsplit(" ", 1)[1]) for h in hits}
        hit += len(got & set(exact.tolist()))
    results["search_p50_ms"] = round(pct(lat, 50), 3)
    results["search_p95_ms"] = round(pct(lat, 95), 3)
    results["recall_at_10"] = round(hit / exact_top.size, 4)

    # --- filtered: exact ranking vs HNSW with a filter, by matching-set size -----------------------------------
    # Memory i carries tag i % 100, so the first k tags pass k% of the store. Each plan is forced by the clamps of
    # search.exact_limit; both timings include the same candidate selection and hit building.
    ef = int(results["index"]["ef"])  # type: ignore[index]
    filt: dict[int, dict[str, float]] = {}
    clamps = (search_mod.BRUTE_FORCE_MIN, search_mod.BRUTE_FORCE_MAX)
    for pct_tags in [1, 2, 5, 10, 20]:
        size = n * pct_tags // 100
        if size < 500:
            continue
        wanted = tags[:pct_tags]
        t_exact, t_hnsw = [], []
        for q in qs[:50]:
            search_mod.BRUTE_FORCE_MIN = search_mod.BRUTE_FORCE_MAX = 1 << 62  # rank exactly
            t = time.perf_counter()
            s.search("q", limit=10, tags=wanted, mode="semantic", query_vector=q)
            t_exact.append((time.perf_counter() - t) * 1000)
            search_mod.BRUTE_FORCE_MIN = search_mod.BRUTE_FORCE_MAX = 0  # HNSW with a filter (exact if too few)
            t = time.perf_counter()
            s.search("q", limit=10, tags=wanted, mode="semantic", query_vector=q)
            t_hnsw.append((time.perf_counter() - t) * 1000)
        search_mod.BRUTE_FORCE_MIN, search_mod.BRUTE_FORCE_MAX = clamps
        filt[size] = {"exact_p50_ms": round(pct(t_exact, 50), 3), "hnsw_filter_p50_ms": round(pct(t_hnsw, 50), 3)}
        # exact ~ c_e*m, filtered HNSW ~ c_h*ef*N/m  =>  c_h/c_e = (t_hnsw/t_exact) * m^2 / (ef*N)
        filt[size]["cost_ratio"] = round(pct(t_hnsw, 50) / pct(t_exact, 50) * size**2 / (ef * n), 2)
    results["filtered"] = filt
    results["fitted_cost_ratio"] = (
        round(float(np.median([v["cost_ratio"] for v in filt.values()])), 2) if filt else None
    )
    # Where the two measured curves cross (log-log interpolation), and the ratio that puts the threshold there.
    sizes = sorted(filt)
    for a, b in itertools.pairwise(sizes):
        da = np.log(filt[a]["exact_p50_ms"] / filt[a]["hnsw_filter_p50_ms"])
        db = np.log(filt[b]["exact_p50_ms"] / filt[b]["hnsw_filter_p50_ms"])
        if da <= 0 < db:
            cross = float(np.exp(np.log(a) + (np.log(b) - np.log(a)) * -da / (db - da)))
            results["crossover_rows"] = round(cross)
            results["crossover_cost_ratio"] = round(cross**2 / (ef * n), 2)
            break
    lat_tag = []
    for q in qs[:100]:
        t = time.perf_counter()
        s.search("q", limit=10, tags=["tag3"], mode="semantic", query_vector=q)
        lat_tag.append((time.perf_counter() - t) * 1000)
    results["search_one_tag_of_100_p50_ms"] = round(pct(lat_tag, 50), 3)
    results["brute_force_threshold"] = search_mod.exact_limit(n, ef)
    results["brute_force_cost_ratio"] = search_mod.BRUTE_FORCE_COST_RATIO

    # --- single add with fsync --------------------------------------------------------------------------------
    add_lat = []
    for i in range(100):
        t = time.perf_counter()
        s.add(f"fresh single add {i}")
        add_lat.append((time.perf_counter() - t) * 1000)
    results["add_p50_ms"] = round(pct(add_lat, 50), 3)
    results["add_p95_ms"] = round(pct(add_lat, 95), 3)
    cur, peak = rss_mb()
    results["rss_mb"] = round(cur)
    results["peak_rss_mb"] = round(peak)
    results["bytes_on_disk"] = s.stats()["bytes_on_disk"]

    # --- compaction beside a writer: total time, and the slowest add of another store meanwhile -----------------
    if n <= 200_000 or args.compact:
        for m in list(itertools.islice(s.export(), n // 100)):  # 1% deleted, so there is something to compact
            s.delete(m["id"])
        s.close()
        switch = SwitchTimer()  # how long the compaction holds the exclusive lock for its switch
        s = MemoryStore(root, "bench", embedder=ConstantEmbedder(), hooks=switch, **params)
        other = MemoryStore(root, "bench", embedder=ConstantEmbedder(), **params)
        done = threading.Event()
        out: dict[str, float] = {}

        def run() -> None:
            t = time.perf_counter()
            s.compact()
            out["s"] = time.perf_counter() - t
            done.set()

        th = threading.Thread(target=run)
        th.start()
        during = []
        while not done.is_set():
            t = time.perf_counter()
            other.add(f"written during compaction {len(during)} {time.time()}")
            during.append((time.perf_counter() - t) * 1000)
            time.sleep(0.05)
        th.join()
        results["compact_s"] = round(out["s"], 1)
        results["adds_during_compaction"] = len(during)
        results["add_during_compaction_max_ms"] = round(max(during), 1)
        results["add_during_compaction_p50_ms"] = round(pct(during, 50), 1)
        results["compact_switch_lock_ms"] = round(switch.held_ms, 1)
        other.close()
    s.close()
    results["load_avg_end"] = [round(x, 1) for x in os.getloadavg()]

    rows = [
        ("memories", f"{n:,} ({args.data} random unit vectors)"),
        ("index (M / ef_construction / ef)", "{M} / {ef_construction} / {ef}".format(**results["index"])),  # type: ignore[arg-type]
        ("bulk load (import_ with vectors)", f"{results['bulk_load_s']} s ({results['bulk_load_per_s']:,}/s)"),
        ("open, fresh process (median of 5)", f"{results['open_s']} s (+ {results['imports_s']} s imports)"),
        ("RSS, fresh process after 50 searches", f"{results['rss_fresh_process_mb']} MB"),
        ("search p50 / p95 (no embedding)", f"{results['search_p50_ms']} / {results['search_p95_ms']} ms"),
        ("recall@10 vs exact", f"{results['recall_at_10']}"),
        ("search, tag filter (1% match) p50", f"{results['search_one_tag_of_100_p50_ms']} ms"),
        ("add p50 / p95 (fsync, no embedding)", f"{results['add_p50_ms']} / {results['add_p95_ms']} ms"),
        ("RSS bench process now / peak", f"{results['rss_mb']} / {results['peak_rss_mb']} MB"),
        ("bytes on disk", f"{results['bytes_on_disk'] / 1e6:.0f} MB"),
        ("exact-ranking threshold (rows)", f"{results['brute_force_threshold']:,}"),
        (
            "fitted c_h/c_e (BRUTE_FORCE_COST_RATIO)",
            f"{results['fitted_cost_ratio']} (store uses {search_mod.BRUTE_FORCE_COST_RATIO})",
        ),
        (
            "measured crossover exact = HNSW+filter",
            f"{results.get('crossover_rows', 'none')} rows (ratio {results.get('crossover_cost_ratio')})",
        ),
        ("load average start / end", f"{results['load_avg_start']} / {results['load_avg_end']}"),
    ]
    if "compact_s" in results:
        rows.append(
            (
                "compact (1% deleted) / other store's add",
                f"{results['compact_s']} s / p50 {results['add_during_compaction_p50_ms']}, "
                f"max {results['add_during_compaction_max_ms']} ms ({results['adds_during_compaction']} adds)",
            )
        )
        rows.append(("compact: exclusive lock held for the switch", f"{results['compact_switch_lock_ms']} ms"))
    rows += [
        (f"filter of {k:,}: exact / HNSW+filter p50", f"{v['exact_p50_ms']} / {v['hnsw_filter_p50_ms']} ms")
        for k, v in filt.items()
    ]
    width = max(len(k) for k, _ in rows)
    print("\n".join(f"{k:<{width}}  {v}" for k, v in rows))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {out}", file=sys.stderr)
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    sys.exit(main())
