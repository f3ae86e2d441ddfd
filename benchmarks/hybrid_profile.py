"""Hybrid search in process, query vector given: its latency and where each tenth of a millisecond goes.

    uv run python -m benchmarks.hybrid_profile --sizes 100000            # the cached 100k store (_common.py)
    uv run python -m benchmarks.hybrid_profile --sizes 100000 --fields   # ... the one with conversation fields
    uv run python -m benchmarks.hybrid_profile --quick                   # smoke run: a 300-memory store

The real queries of benchmarks/data/quality.json are embedded once (the Embedder, before timing), then each is
searched `MemoryStore.search(text, mode="hybrid", limit=5, query_vector=v)`: first `--repeat` plain passes
(the latency: p50/p95 over every call), then one pass with the parts wrapped in timers (the breakdown: each part's
median per query, in ms; wrapping adds a little to each). The parts nest: "searcher" is the ranking and the hits
inside the store call (the rest is the request check and the lock); inside it "vector side" (HNSW and the rows'
ordering), "keyword side" (BM25 MaxScore over the fusion's depth), "fusion" (hybrid_convex.fused: the pool, the
neighbours' and the pool's cosines, the boosts, the sort), "vector rows" (every read of stored vectors, inside the
fusion and for the hits' cosines). Prints a table, writes benchmarks/results/hybrid_profile.json.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import sys
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import numpy as np

from benchmarks import _common as C

PARTS = (
    ("searcher", "memserver.local.search", "Searcher", "search"),
    ("vector side", "memserver.local.search", "Searcher", "rank"),
    ("hnsw", "memserver.local.index", "VectorIndex", "search"),
    ("keyword side", "memserver.local.search", "Searcher", "_keyword"),
    ("fusion", "memserver.retrieval.hybrid_convex", None, "fused"),
    ("vector rows", "memserver.local.vectors", "VectorFile", "matrix"),
    ("neighbours", "memserver.local.row_context", "RowContext", "neighbours"),
)


def _wrap(spent: dict[str, float], name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def timed(*args: Any, **kwargs: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[name] += time.perf_counter() - t0

    return timed


def _instrument(spent: dict[str, float]) -> Callable[[], None]:
    """Wrap PARTS in timers adding to `spent`; returns the undo."""
    import importlib

    undo = []
    for name, module, cls, attr in PARTS:
        owner: Any = importlib.import_module(module)
        if cls is not None:
            owner = getattr(owner, cls)
        original = getattr(owner, attr)
        setattr(owner, attr, _wrap(spent, name, original))
        undo.append((owner, attr, original))  # (search.py calls hybrid_convex.fused through the module)

    def restore() -> None:
        for owner, attr, original in undo:
            setattr(owner, attr, original)

    return restore


def measure(root: Any, queries: list[str], vecs: np.ndarray, repeat: int, limit: int) -> dict[str, Any]:
    from memserver.embedding.embedder import Embedder
    from memserver.local.store import MemoryStore

    with MemoryStore(root, C.COLLECTION, embedder=Embedder()) as store:  # never loads the model: vectors given
        for text, v in zip(queries[:20], vecs[:20], strict=True):  # warm: pages, lazily derived context
            store.search(text, limit=limit, mode="hybrid", query_vector=v)
        lat = []
        for _ in range(repeat):
            for text, v in zip(queries, vecs, strict=True):
                t0 = time.perf_counter()
                store.search(text, limit=limit, mode="hybrid", query_vector=v)
                lat.append((time.perf_counter() - t0) * 1e3)
        spent: dict[str, float] = defaultdict(float)
        restore = _instrument(spent)
        per: dict[str, list[float]] = defaultdict(list)
        try:
            for text, v in zip(queries, vecs, strict=True):
                spent.clear()
                t0 = time.perf_counter()
                store.search(text, limit=limit, mode="hybrid", query_vector=v)
                per["store call"].append((time.perf_counter() - t0) * 1e3)
                for name, *_ in PARTS:
                    per[name].append(spent[name] * 1e3)
        finally:
            restore()
        count = store.stats().get("count")
    return {
        "memories": count,
        "search_ms": C.summary(lat),
        "breakdown_median_ms": {k: round(statistics.median(v), 3) for k, v in per.items()},
    }


def query_vectors(queries: list[str], cache: Any) -> np.ndarray:
    """The queries embedded by the Embedder (cached beside the stores)."""
    import hashlib

    key = hashlib.sha256("\n".join(queries).encode()).hexdigest()[:16]
    path = cache / f"queries-{key}.npy"
    if path.exists():
        return np.load(path)
    from memserver.embedding.embedder import Embedder

    emb = Embedder()
    vecs = np.stack([emb.embed_query(q) for q in queries]).astype(np.float32)
    np.save(path, vecs)
    return vecs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100_000], help="store sizes (cached stores)")
    parser.add_argument("--fields", action="store_true", help="the stores with conversation fields")
    parser.add_argument("--repeat", type=int, default=3, help="plain passes over the queries (default 3)")
    parser.add_argument("--limit", type=int, default=5, help="search limit (default 5, recall's default)")
    parser.add_argument("--quick", action="store_true", help="smoke run: a 300-memory store, 20 queries, 1 pass")
    parser.add_argument("--cache", default=None, help="where built stores are kept (default /tmp/memserver-bench)")
    parser.add_argument("--out", default=None, help="default results/hybrid_profile.json")
    args = parser.parse_args(argv)
    queries = C.corpus()[1][: 20 if args.quick else None]
    cache = C.cache_dir(args.cache)
    vecs = query_vectors(queries, cache)
    results: dict[str, Any] = {"machine": C.machine(), "settings": vars(args), "sizes": {}}
    for n in [300] if args.quick else args.sizes:
        root = C.ensure_store(cache, n, quick=args.quick, fields=args.fields)
        C.log(f"hybrid search in process at {n:,} memories{' with fields' if args.fields else ''} ...")
        results["sizes"][str(n)] = measure(root, queries, vecs, 1 if args.quick else args.repeat, args.limit)
    results["machine"]["loadavg_at_end"] = C.machine()["loadavg"]
    names = ["store call", *(name for name, *_ in PARTS)]
    rows = []
    for n, r in results["sizes"].items():
        b = r["breakdown_median_ms"]
        rows.append([C.size_label(int(n)), r["search_ms"]["p50"], r["search_ms"]["p95"], *(b[k] for k in names)])
    print(C.table(["memories", "p50 ms", "p95 ms", *names], rows))
    C.write_json(args.out or str(C.RESULTS / "hybrid_profile.json"), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
