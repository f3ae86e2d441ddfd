"""What `compact` does to a store's size: bytes on disk before and after, per file kind, at 10 / 100 / 10k memories.

Each store grows as a person's does: its first memory in one session (a CLI command, a client run), the rest in a
later one; then it is opened again and compacted, once with nothing to purge, once after forgetting a tenth of its
memories. The embedder is a seeded random one (sizes do
not depend on what the vectors say), so a 10k store fills in seconds. "journal + vectors" is what the live memories
themselves take; the rest is checkpoints of the derived indexes (docs/storage.md, "What a store weighs").

    uv run python -m benchmarks.compaction            # 10, 100, 10,000 memories; writes results/compaction.json
    uv run python -m benchmarks.compaction --quick    # 10 and 100
"""

from __future__ import annotations

import argparse
import json
import tempfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._common import RESULTS, machine
from memserver.local.store import MemoryStore

COLLECTION = "bench"


class SeededEmbedder:
    """TextEmbedder of random unit vectors seeded by each text's CRC-32 (the same text, the same vector)."""

    dim = 384
    model_name = "bench/seeded-random"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.stack([self.embed_query(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)
        return out.astype(np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        v = np.random.default_rng(zlib.crc32(text.encode())).standard_normal(self.dim).astype(np.float32)
        return v / np.linalg.norm(v)


def kinds(folder: Path) -> dict[str, int]:
    """Bytes per kind of file: journal, vectors, graph (hnsw), keyword, snapshot, other."""
    out = {"journal": 0, "vectors": 0, "graph": 0, "keyword": 0, "snapshot": 0, "other": 0}
    for p in folder.iterdir():
        name, size = p.name, p.stat().st_size
        kind = (
            "journal"
            if name == "journal.jsonl"
            else "vectors"
            if name.startswith("vectors-")
            else "graph"
            if name.startswith("index")
            else "keyword"
            if name.startswith("keyword")
            else "snapshot"
            if name.startswith("meta-")
            else "other"
        )
        out[kind] += size
    return out


def measure(n: int, forget: bool) -> dict[str, Any]:
    embedder = SeededEmbedder()
    with tempfile.TemporaryDirectory() as tmp:
        texts = [f"memory {i}: a fact of the week, note {i * 7919}" for i in range(n)]
        with MemoryStore(tmp, COLLECTION, embedder=embedder) as store:
            ids = [store.add(texts[0]).id]
        with MemoryStore(tmp, COLLECTION, embedder=embedder) as store:
            ids += [m.id for m in store.add_many(texts[1:])]
            if forget:
                for memory_id in ids[::10]:
                    store.delete(memory_id)
        with MemoryStore(tmp, COLLECTION, embedder=embedder) as store:  # opened again, as a CLI command does
            before = kinds(store.folder)
            report = store.compact()
            after = kinds(store.folder)
    return {
        "memories": n,
        "forgot": len(ids[::10]) if forget else 0,
        "bytes_before": sum(before.values()),
        "bytes_after": sum(after.values()),
        "live_need_after": after["journal"] + after["vectors"],
        "before": before,
        "after": after,
        "report": report,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="10 and 100 memories only")
    parser.add_argument("--output", type=Path, default=RESULTS / "compaction.json")
    args = parser.parse_args()
    sizes = [10, 100] if args.quick else [10, 100, 10_000]
    rows = [measure(n, forget) for n in sizes for forget in (False, True)]
    print("| memories | forgotten | bytes before | bytes after | change | journal + vectors after |")
    print("|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        change = (r["bytes_after"] - r["bytes_before"]) / r["bytes_before"]
        print(
            f"| {r['memories']:,} | {r['forgot']:,} | {r['bytes_before']:,} | {r['bytes_after']:,} | {change:+.1%} "
            f"| {r['live_need_after']:,} |"
        )
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps({"machine": machine(), "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
