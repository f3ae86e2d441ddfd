"""Ingest throughput: `remember` one call at a time over MCP, and bulk import, against the Embedder's batched floor.

    uv run python -m benchmarks.ingest             # 300 remembers over MCP, 5,000-memory bulk import x 3 rounds
    uv run python -m benchmarks.ingest --quick     # smoke run

  - remember over MCP: an MCP SDK client spawns `python -m memserver serve` (empty store) and stores distinct
    realistic memories one `tools/call remember` at a time, as an assistant does: memories/s and latency
    p50/p95, with the server's embedding time (MEMSERVER_TIMING=1) split out. Each call is durable when
    answered (fsync of the vector row and of the journal line).
  - bulk import: `MemoryStore.import_(records)` of texts without vectors (the store embeds them in batches of
    1,000 and writes each batch with one group commit), into a fresh store, in this process.
  - floor: `Embedder.embed(texts)` of the very same texts (batches of 32, sorted by length), in this process.
  - bulk load with precomputed vectors (`import_` with "vector"): the store alone, no embedding.
Floor and import alternate in rounds (medians reported), so a noisy neighbour slows both alike. Prints a table and
writes benchmarks/results/ingest.json.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

from benchmarks import _common as C


async def remember_over_mcp(root: Path, texts: list[str]) -> dict[str, Any]:
    lat: list[float] = []
    embed: list[float] = []
    async with C.mcp_client(root) as (client, _pid):
        warm = await client.call_tool("remember", {"content": "warm-up: the store and the model are loaded"})
        if warm.is_error:
            raise RuntimeError(f"remember failed: {warm.content}")
        t_all = time.perf_counter()
        for i, text in enumerate(texts):
            t0 = time.perf_counter()
            result = await client.call_tool("remember", {"content": text, "tags": [f"t{i % 10}"]})
            lat.append((time.perf_counter() - t0) * 1000)
            if result.is_error or result.structured_content["status"] != "stored":  # type: ignore[index]
                raise RuntimeError(f"remember failed: {result.content}")
            t = C.timing_meta(result)
            if t:
                embed.append(t["embed_ms"])
        total = time.perf_counter() - t_all
    return {
        "n": len(texts),
        "per_s": round(len(texts) / total, 1),
        "latency_ms": C.summary(lat),
        "server_embed_p50_ms": round(statistics.median(embed), 3) if embed else None,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--remember", type=int, default=300, help="remember calls over MCP (default 300)")
    parser.add_argument("--bulk", type=int, default=5_000, help="texts per bulk import (default 5000)")
    parser.add_argument("--rounds", type=int, default=3, help="floor/import rounds (default 3)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 20 remembers, 100 texts, 1 round")
    parser.add_argument("--out", default=str(C.RESULTS / "ingest.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.remember, args.bulk, args.rounds = 20, 100, 1

    from memserver.local.store import MemoryStore

    host = C.machine()
    emb = C.embedder()
    texts = C.texts_only(args.bulk, seed=11)
    tmp = Path(tempfile.mkdtemp(prefix="memserver-ingest-"))
    try:
        floor_s: list[float] = []
        import_s: list[float] = []
        vec_s: list[float] = []
        emb.embed(texts[:64])  # warm-up
        vectors = None
        for r in range(args.rounds):
            t0 = time.perf_counter()
            vectors = emb.embed(texts)
            floor_s.append(time.perf_counter() - t0)
            folder = tmp / f"import-{r}"
            t0 = time.perf_counter()
            with MemoryStore(folder, C.COLLECTION, embedder=emb) as store:
                added = store.import_({"content": t} for t in texts)
            import_s.append(time.perf_counter() - t0)
            if added != len(texts):
                raise RuntimeError(f"import added {added} of {len(texts)}")
            shutil.rmtree(folder)
            C.log(f"round {r + 1}: floor {len(texts) / floor_s[-1]:.0f}/s, import {len(texts) / import_s[-1]:.0f}/s")
        assert vectors is not None
        for r in range(args.rounds):
            folder = tmp / f"vectors-{r}"
            t0 = time.perf_counter()
            with MemoryStore(folder, C.COLLECTION, embedder=emb) as store:
                store.import_({"content": t, "vector": v} for t, v in zip(texts, vectors, strict=True))
            vec_s.append(time.perf_counter() - t0)
            shutil.rmtree(folder)
        C.log(f"remember over MCP x {args.remember} ...")
        mcp = anyio.run(remember_over_mcp, tmp / "mcp", C.texts_only(args.remember, seed=12))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    n = len(texts)
    floor_rate = n / statistics.median(floor_s)
    import_rate = n / statistics.median(import_s)
    results = {
        "machine": {**host, "loadavg_at_end": C.machine()["loadavg"]},
        "settings": {"bulk_texts": n, "rounds": args.rounds, "threads": emb.threads, "batch_size": emb.batch_size},
        "floor_embed_per_s": round(floor_rate, 1),
        "bulk_import_per_s": round(import_rate, 1),
        "bulk_import_vs_floor": round(import_rate / floor_rate, 3),
        "bulk_load_with_vectors_per_s": round(n / statistics.median(vec_s)),
        "remember_mcp": mcp,
        "remember_mcp_vs_floor": round(mcp["per_s"] / floor_rate, 3),
        "raw_s": {"floor": floor_s, "import": import_s, "with_vectors": vec_s},
    }
    rows = [
        ["Embedder.embed, batched (floor)", results["floor_embed_per_s"], "1.00", "-"],
        [
            "bulk import_ (embeds in batches)",
            results["bulk_import_per_s"],
            f"{results['bulk_import_vs_floor']:.2f}",
            "-",
        ],
        [
            "remember over MCP, one at a time",
            mcp["per_s"],
            f"{results['remember_mcp_vs_floor']:.2f}",
            f"{mcp['latency_ms']['p50']:.1f} / {mcp['latency_ms']['p95']:.1f} (embed {mcp['server_embed_p50_ms']:.1f})",
        ],
        ["import_ with precomputed vectors", results["bulk_load_with_vectors_per_s"], "-", "-"],
    ]
    print(f"ingest: {n:,} texts for the bulk paths, {mcp['n']} remember calls (memories/s)")
    print(C.table(["path", "memories/s", "vs floor", "latency p50 / p95 ms"], rows))
    C.write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
