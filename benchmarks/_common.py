"""Shared helpers of the end-to-end benchmarks: corpus, synthetic stores, MCP spawning, percentiles, RSS, machine.

The large stores (100k, 1M) are filled through the documented bulk-load path, `MemoryStore.import_` with
precomputed vectors, so that filling them takes minutes rather than hours:

  1. the base corpus is every memory of benchmarks/data/quality.json (703 hand-written and filler memories) plus
     its 25 paraphrased duplicates: real sentences, embedded once with the Embedder (cached on disk);
  2. memory i of a large store mixes two base sentences a and b: its text is "<a> Also: <b> (#i)", and its vector
     is normalise(e_a + w * e_b + 0.25 * g) with w uniform in [0.2, 0.6] and g a random unit vector. The vectors
     therefore lie where real sentence embeddings lie (not uniform noise), every text is distinct, and the texts
     are of realistic length for the keyword index and the journal;
  3. queries are the 319 real queries of quality.json plus its 20 unanswerable ones, always embedded by the
     server (or by the system under test) at query time.

A built store is cached under the cache directory (default /tmp/memserver-bench, or MEMSERVER_BENCH_CACHE) as
`store-<n>/bench/`, and reused by recall_mcp.py, startup.py and scale.py.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import time
import zlib
from collections.abc import AsyncIterator, Iterator, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent

RESULTS = ROOT / "benchmarks" / "results"
QUALITY = ROOT / "benchmarks" / "data" / "quality.json"
COLLECTION = "bench"
DIM = 384


_WORD = re.compile(r"\w+")


class HashEmbedder:
    """A TextEmbedder at constant, tiny cost: hashed bag of words (like tests/support/fakes.py), unit float32 rows,
    for benchmarks that time the stores and not the model (multiprocess.py, soak.py, pg_hybrid.py)."""

    dim = DIM
    model_name = "bench/hashed-bag-of-words"

    def _one(self, text: str) -> np.ndarray:
        v = np.zeros(DIM, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            v[zlib.crc32(word.encode()) % DIM] += 1.0
        v[-1] += 0.05
        return v / np.linalg.norm(v)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self._one(t) for t in texts]) if texts else np.zeros((0, DIM), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return self._one(text)


def cache_dir(arg: str | None = None) -> Path:
    path = Path(arg or os.environ.get("MEMSERVER_BENCH_CACHE") or "/tmp/memserver-bench").absolute()
    path.mkdir(parents=True, exist_ok=True)
    return path


def log(msg: str) -> None:
    """Progress goes to stderr; stdout carries only the tables."""
    print(msg, file=sys.stderr, flush=True)


# --- statistics and tables -----------------------------------------------------------------------------------------


def pct(xs: list[float] | np.ndarray, p: float) -> float:
    return float(np.percentile(np.asarray(xs, dtype=np.float64), p)) if len(xs) else float("nan")


def summary(xs: list[float]) -> dict[str, float]:
    """p50/p95/p99/mean (and n) of a list of milliseconds, rounded."""
    if not xs:
        return {"n": 0}
    return {
        "n": len(xs),
        "p50": round(pct(xs, 50), 3),
        "p95": round(pct(xs, 95), 3),
        "p99": round(pct(xs, 99), 3),
        "mean": round(statistics.fmean(xs), 3),
    }


def table(headers: list[str], rows: list[list[Any]]) -> str:
    """A GitHub-flavoured Markdown table (prints well in a terminal too)."""
    cells = [[str(c) for c in headers]] + [[_fmt(c) for c in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)) + " |"  # noqa: E731
    return "\n".join([line(cells[0]), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells[1:])])


def _fmt(c: Any) -> str:
    if isinstance(c, float):
        if c != c:  # nan
            return "-"
        return f"{c:,.0f}" if abs(c) >= 1000 else f"{c:.3g}" if abs(c) < 10 else f"{c:.1f}"
    if isinstance(c, int) and not isinstance(c, bool):
        return f"{c:,}"
    return str(c)


def write_json(path: str | Path, data: dict[str, Any]) -> Path:
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, indent=2, default=str) + "\n")
    log(f"wrote {out}")
    return out


def size_label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 and n % 1_000_000 == 0 else f"{n // 1000}k" if n >= 1000 else str(n)


# --- the machine ---------------------------------------------------------------------------------------------------


def machine() -> dict[str, Any]:
    """What the figures were taken on: CPU, cores, memory, OS, Python and library versions, load, time."""
    cpu = platform.processor() or platform.machine()
    mem_gb = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_gb = round(int(line.split()[1]) / 1024 / 1024, 1)
    versions = {}
    for mod in ("mcp", "onnxruntime", "tokenizers", "hnswlib", "numpy", "chromadb"):
        with contextlib.suppress(Exception):
            from importlib.metadata import version

            versions[mod] = version(mod)
    return {
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "memory_gb": mem_gb,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "versions": versions,
        "loadavg": [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None,
        "taken_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }


# --- memory use ----------------------------------------------------------------------------------------------------


def rss_mb(pid: int | None = None) -> dict[str, float]:
    """{"rss": current, "peak": high-water mark} resident set size in MB of `pid` (default: this process)."""
    out = {"rss": float("nan"), "peak": float("nan")}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid or 'self'}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out["rss"] = round(int(line.split()[1]) / 1024, 1)
            elif line.startswith("VmHWM:"):
                out["peak"] = round(int(line.split()[1]) / 1024, 1)
    return out


def child_pids() -> set[int]:
    """Direct children of this process (Linux /proc)."""
    pids: set[int] = set()
    with contextlib.suppress(OSError):
        for task in Path("/proc/self/task").iterdir():
            with contextlib.suppress(OSError):
                pids.update(int(p) for p in (task / "children").read_text().split())
    return pids


def dir_bytes(path: str | Path) -> int:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file())


# --- corpus --------------------------------------------------------------------------------------------------------


def corpus() -> tuple[list[str], list[str]]:
    """(base sentences, queries): real text from benchmarks/data/quality.json."""
    data = json.loads(QUALITY.read_text())
    base = [m["content"] for m in data["memories"]] + [d["content"] for d in data["duplicates"]]
    queries = [q["query"] for q in data["queries"]] + list(data["unanswerable"])
    return base, queries


def embedder(threads: int | None = None) -> Any:
    from memserver.embedding.embedder import Embedder

    return Embedder(threads=threads).load()


def base_vectors(cache: Path, texts: list[str]) -> np.ndarray:
    """Embeddings of the base sentences, computed once with the Embedder and cached (keyed by text and model)."""
    from memserver.embedding.sources import resolve_model

    files = resolve_model(None)
    key = hashlib.sha256(("\n".join(texts) + str(files.model) + str(files.model.stat().st_size)).encode()).hexdigest()
    path = cache / f"base-{key[:16]}.npy"
    if path.exists():
        return np.load(path)
    t0 = time.perf_counter()
    vecs = embedder().embed(texts)
    log(f"embedded {len(texts)} base sentences in {time.perf_counter() - t0:.1f} s")
    np.save(path, vecs)
    return vecs


SESSION_TURNS = 20  # with conversation fields: consecutive records form sessions of this many turns
SPEAKERS = ("Avery", "Blake", "Casey", "Devon", "Emery", "Finley")  # two a session, taking turns


def synthetic(
    n: int, base: list[str], vecs: np.ndarray, seed: int = 0, start: int = 0, fields: bool = False
) -> Iterator[dict[str, Any]]:
    """`n` import records (content, tags, created_at, vector) mixing two real sentences each; see the docstring.

    created_at grows with the record number (one a minute), as `MemoryStore.export` yields them (oldest first).
    With `fields`, the conversation fields too: sessions of SESSION_TURNS records, two speakers taking turns in
    each, occurred_at = created_at (so the hybrid ranking's session context and speaker boost have work to do).
    """
    rng = np.random.default_rng(seed)
    t0 = datetime(2023, 1, 1, tzinfo=timezone.utc)
    tags = ["work", "family", "health", "travel", "finance", "home", "reading", "project", "idea", "todo"]
    chunk = 10_000
    for lo in range(0, n, chunk):
        m = min(chunk, n - lo)
        a = rng.integers(0, len(base), m)
        b = rng.integers(0, len(base), m)
        w = rng.uniform(0.2, 0.6, m).astype(np.float32)[:, None]
        g = rng.standard_normal((m, vecs.shape[1])).astype(np.float32)
        g /= np.linalg.norm(g, axis=1, keepdims=True)
        v = vecs[a] + w * vecs[b] + 0.25 * g
        v /= np.linalg.norm(v, axis=1, keepdims=True)
        for j in range(m):
            i = start + lo + j
            at = (t0 + timedelta(seconds=i * 60)).isoformat()  # oldest first, as export gives
            rec = {"content": f"{base[a[j]]} Also: {base[b[j]]} (#{i})", "tags": [tags[i % len(tags)]]}
            rec |= {"created_at": at, "vector": v[j]}
            if fields:
                s = i // SESSION_TURNS
                speaker = SPEAKERS[(s + i % 2) % len(SPEAKERS)]
                rec |= {"session": f"s{s}", "speaker": speaker, "occurred_at": at}
            yield rec


def texts_only(n: int, seed: int = 1) -> list[str]:
    """`n` distinct realistic texts (the contents `synthetic` would make), for paths that embed for real."""
    base, _ = corpus()
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, len(base), n), rng.integers(0, len(base), n)
    return [f"{base[a[i]]} Also: {base[b[i]]} (#{i})" for i in range(n)]


def store_root(cache: Path, n: int, *, quick: bool = False, fields: bool = False) -> Path:
    """Where the cached store of `n` memories lives (`-fields`: with the conversation fields)."""
    return cache / (f"quick-{n}" if quick else f"store-{n}") if not fields else cache / f"store-{n}-fields"


def ensure_store(cache: Path, n: int, *, log_every: int = 100_000, quick: bool = False, fields: bool = False) -> Path:
    """The data directory of a cached store of `n` synthetic memories (collection "bench"); built if missing.

    `quick` (smoke runs) mixes only the first 128 base sentences, so that embedding them takes a second; `fields`
    gives the records conversation fields (`synthetic`).
    """
    root = store_root(cache, n, quick=quick, fields=fields)
    done = root / "BUILT"
    if done.exists():
        return root
    if root.exists():
        shutil.rmtree(root)
    base, _ = corpus()
    base = base[:128] if quick else base
    vecs = base_vectors(cache, base)
    from memserver.embedding.embedder import Embedder
    from memserver.local.store import MemoryStore

    # import_ spaces write-path checkpoints (each saves the whole HNSW index) geometrically; fixtures are built
    # with one checkpoint at the end instead (a fixed spacing no import reaches); the index, journal and vectors
    # are the same. (See benchmarks/lab/research.md, "Findings".)
    saved_limit = os.environ.get("MEMSERVER_CHECKPOINT_EVERY")
    os.environ["MEMSERVER_CHECKPOINT_EVERY"] = str(1 << 62)
    log(f"building a store of {n:,} memories in {root} (import_ with precomputed vectors)")
    t0 = time.perf_counter()

    def progress(records: Iterator[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        for i, rec in enumerate(records):
            if i and i % log_every == 0:
                log(f"  {i:,} / {n:,} after {time.perf_counter() - t0:.0f} s")
            yield rec

    with MemoryStore(root, COLLECTION, embedder=Embedder()) as store:  # the model is never loaded: vectors given
        added = store.import_(progress(synthetic(n, base, vecs, fields=fields)))  # one call: one checkpoint at its end
    build_s = time.perf_counter() - t0
    if saved_limit is None:
        del os.environ["MEMSERVER_CHECKPOINT_EVERY"]
    else:
        os.environ["MEMSERVER_CHECKPOINT_EVERY"] = saved_limit
    if added != n:
        raise RuntimeError(f"built {added} memories, expected {n}")
    done.write_text(json.dumps({"n": n, "build_s": round(build_s, 1), "per_s": round(n / build_s)}) + "\n")
    log(f"built {n:,} memories in {build_s:.0f} s ({n / build_s:,.0f}/s)")
    return root


def build_info(root: Path) -> dict[str, Any]:
    with contextlib.suppress(OSError, ValueError):
        return json.loads((root / "BUILT").read_text())
    return {}


# --- the MCP server over stdio -------------------------------------------------------------------------------------


def server_params(
    data_dir: Path | None, *, timing: bool = True, extra_env: dict[str, str] | None = None, tree: Path = ROOT
) -> Any:
    """How a desktop client starts memserver: `python -m memserver serve` over stdio (no `uv run` in the way).

    `tree`: the checkout whose `memserver` serves (`-m` imports it from the working directory), e.g. an older one
    for an A/B run; the same interpreter and libraries either way."""
    from mcp import StdioServerParameters

    env = {**os.environ, "MEMSERVER_LOG_LEVEL": "WARNING", "MCP_MEMORY_COLLECTION": COLLECTION}
    env.pop("MEMSERVER_TIMING", None)
    if timing:
        env["MEMSERVER_TIMING"] = "1"
    env.update(extra_env or {})
    args = ["-m", "memserver", "serve"] + (["--data-dir", str(data_dir)] if data_dir is not None else [])
    return StdioServerParameters(command=sys.executable, args=args, env=env, cwd=str(tree))


@contextlib.asynccontextmanager
async def mcp_client(
    data_dir: Path | None, *, timing: bool = True, extra_env: dict[str, str] | None = None, tree: Path = ROOT
) -> AsyncIterator[tuple[Any, int | None]]:
    """(client, server pid): an MCP SDK client session with a freshly spawned memserver (of checkout `tree`)."""
    from mcp import Client

    before = child_pids()
    params = server_params(data_dir, timing=timing, extra_env=extra_env, tree=tree)
    async with Client(params, mode="legacy", read_timeout_seconds=600) as client:
        new = child_pids() - before
        yield client, (min(new) if new else None)


def timing_meta(result: Any) -> dict[str, float]:
    meta = getattr(result, "meta", None) or {}
    return dict(meta.get("memserver/timing") or {})


def sdk_import_s(repeat: int = 5) -> dict[str, float]:
    """Spawn -> exit of `python -c 'import <the SDK's server side>'` and of a bare `python -c pass` (medians)."""
    out = {}
    for name, code in (
        ("python", "pass"),
        ("sdk_import", "import anyio, mcp.server.lowlevel, mcp.server.stdio, mcp_types"),
    ):
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)
            times.append(time.perf_counter() - t0)
        out[name] = round(statistics.median(times), 3)
    return out


if __name__ == "__main__":  # pre-build cached stores: python -m benchmarks._common [--fields] 100000 1000000
    for size in (a for a in sys.argv[1:] if a != "--fields"):
        ensure_store(cache_dir(), int(size), fields="--fields" in sys.argv[1:])
