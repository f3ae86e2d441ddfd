"""The long soak: mixed load for half an hour on one local store (or one HTTP server); nothing grows, nothing lost.

    uv run python -m benchmarks.soak                                # local: 8 processes x 30 min, a sample per 30 s
    uv run python -m benchmarks.soak --http                         # HTTP: 64 sessions opening/closing, 30 min
    uv run python -m benchmarks.soak --minutes 2 --interval 5       # shorter
    uv run python -m benchmarks.soak --quick                        # smoke run: 3 processes, 8 s, 1 s samples
    uv run python -m benchmarks.soak --refit benchmarks/results/soak.json --warmup 600   # slopes after 10 min

Local: `--procs` worker processes share one store, each paced to `--rate` operations per second (the machine is
shared: the soak measures growth, not throughput). Each interleaves remember (add), recall (hybrid search), list
(list_recent), forget (delete), forget_matching (select by a tag, then delete_many), replaces (add with
`replaces=`), imports (import_ of a few records with fresh ids); worker 0 also compacts and worker 1 checkpoints
every `--compact-every` / `--checkpoint-every` seconds. Each worker keeps about `--live` memories of its own
(forgetting its oldest), so the store reaches a steady state: growth after warm-up is a leak, not data.

Every write is appended to the worker's ack file (`A <id>` / `F <id>`, one line, after the store returned). A
reader process tails the ack files and checks each acknowledged change on a store it opened itself: an
acknowledged memory must be there (unless a later ack forgot it), a forgotten one must never come back from `get`
or from recall. At the end a fresh store must hold every acknowledged memory not forgotten, and none forgotten.

Every `--interval` seconds the parent samples each worker's and the reader's RSS, open fds and threads (/proc),
the journal's and the checkpoints' bytes, and the latency of a recall on its own store. After the warm-up
(`--warmup`, default a fifth of the run) it fits a least-squares slope per hour to each series.

HTTP (`--http`): `memserver serve --http` with a session cap and a short idle expiry; `--sessions` clients loop:
open a session, remember two memories, recall, list, forget one, then close it (or, one in four, abandon it to
the idle expiry). The server's RSS, fds and threads are sampled the same way; at the end every acknowledged
memory not forgotten is read back (lost) and every forgotten one must be gone.

Writes benchmarks/results/soak.json (local) or soak_http.json (HTTP), or --out.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
import uuid
from collections import deque
from pathlib import Path
from typing import Any

from benchmarks._common import RESULTS, ROOT, HashEmbedder, log, machine, summary, table, write_json
from benchmarks.multiprocess import WORDS

COLLECTION = "soak"


# --- what /proc says about a process -------------------------------------------------------------------------------


def proc_sample(pid: int) -> dict[str, float]:
    """RSS (MB), open fds and threads of `pid` (NaN for a process that is gone)."""
    out = {"rss_mb": float("nan"), "fds": float("nan"), "threads": float("nan")}
    with contextlib.suppress(OSError):
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                out["rss_mb"] = round(int(line.split()[1]) / 1024, 2)
            elif line.startswith("Threads:"):
                out["threads"] = int(line.split()[1])
        out["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
    return out


def store_bytes(folder: Path) -> dict[str, int]:
    """Bytes of the journal, the vector files and everything else (the checkpoints) under a collection folder."""
    sizes = {"journal": 0, "vectors": 0, "checkpoints": 0}
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if not path.is_file():
                continue
            size = path.stat().st_size
            if path.name == "journal.jsonl":
                sizes["journal"] += size
            elif path.name.startswith("vectors-"):
                sizes["vectors"] += size
            else:
                sizes["checkpoints"] += size
    return sizes


def slope_per_hour(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (seconds, value) points, in value per hour; None with fewer than 3 points."""
    pts = [(t, v) for t, v in points if v == v]  # NaN out
    if len(pts) < 3:
        return None
    n = len(pts)
    mt = sum(t for t, _ in pts) / n
    mv = sum(v for _, v in pts) / n
    var = sum((t - mt) ** 2 for t, _ in pts)
    if var == 0:
        return None
    return round(sum((t - mt) * (v - mv) for t, v in pts) / var * 3600, 3)


def slopes(samples: list[dict[str, Any]], warmup_s: float) -> dict[str, dict[str, Any]]:
    """For every numeric series of the samples: first and last value after warm-up, and the slope per hour."""
    after = [s for s in samples if s["t"] >= warmup_s] or samples[-3:]
    keys = [k for k in samples[0] if k != "t"] if samples else []
    out = {}
    for key in keys:
        pts = [(s["t"], float(s[key])) for s in after if isinstance(s.get(key), int | float)]
        if pts:
            out[key] = {"first": pts[0][1], "last": pts[-1][1], "per_hour": slope_per_hour(pts)}
    return out


class Pacer:
    """Spaces calls to `rate` per second (no catching up after a slow call: the load stays gentle)."""

    def __init__(self, rate: float) -> None:
        self.gap = 1.0 / rate
        self.next = time.monotonic()

    def wait(self) -> None:
        self.next = max(self.next + self.gap, time.monotonic())
        time.sleep(max(0.0, self.next - time.monotonic()))


# --- a local worker ------------------------------------------------------------------------------------------------


def worker(args: argparse.Namespace) -> int:
    from memserver.contract.backend import MemoryFilter
    from memserver.local.store import MemoryStore

    me = args.worker
    rng = random.Random(7000 + me)
    store = MemoryStore(args.path, COLLECTION, embedder=HashEmbedder())
    acks = os.open(Path(args.acks) / f"acks-{me}", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)

    def ack(kind: str, ids: list[str]) -> None:
        if ids:
            os.write(acks, "".join(f"{kind} {i}\n" for i in ids).encode())

    live: deque[str] = deque()  # this worker's current memories, oldest first
    history: deque[str] = deque()  # and the ones it replaced (still there, as history)
    counts: dict[str, int] = {}
    pace = Pacer(args.rate)
    end = args.end
    last_compact = last_checkpoint = time.time()
    k = 0
    print("ready", flush=True)
    while time.time() < end:
        pace.wait()
        k += 1
        text = f"w{me} n{k} tok{me}x{k} " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(4, 20)))
        roll = rng.random()
        if me == 0 and time.time() - last_compact > args.compact_every:
            op = "compact"
            store.compact()
            last_compact = time.time()
        elif me == 1 and time.time() - last_checkpoint > args.checkpoint_every:
            op = "checkpoint"
            store.checkpoint()
            last_checkpoint = time.time()
        elif len(live) + len(history) > args.live:
            op = "forget"
            victim = history.popleft() if len(history) > len(live) // 4 else live.popleft()
            assert store.delete(victim), victim
            ack("F", [victim])
        elif roll < 0.30:
            op = "remember"
            memory = store.add(text, tags=[f"w{me}"])
            if not memory.duplicate:
                live.append(memory.id)
                ack("A", [memory.id])
        elif roll < 0.55:
            op = "recall"
            store.search(" ".join(rng.choice(WORDS) for _ in range(3)), limit=5)
        elif roll < 0.65:
            op = "list"
            store.list_recent(limit=20)
        elif roll < 0.75 and live:
            op = "replaces"
            old = live.pop()
            memory = store.add(text + " (updated)", tags=[f"w{me}"], replaces=old)
            live.append(memory.id)
            ack("A", [memory.id])  # the old one stays as history: still there
            history.append(old)
        elif roll < 0.85:
            op = "forget_matching"
            tag = f"batch{me}x{k}"
            added = store.add_many([{"content": f"{text} b{j}", "tags": [tag]} for j in range(4)])
            ack("A", [m.id for m in added])
            selected = store.select(MemoryFilter(tags=[tag]))
            assert set(selected.ids) == {m.id for m in added}, (tag, selected.ids)
            assert store.delete_many(selected.ids) == len(added)
            ack("F", selected.ids)
        elif roll < 0.92:
            op = "import"
            records = [{"id": uuid.uuid4().hex, "content": f"{text} i{j}", "tags": [f"w{me}"]} for j in range(3)]
            assert store.import_(records) == len(records)
            live.extend(r["id"] for r in records)
            ack("A", [r["id"] for r in records])
        else:
            op = "get"
            if live:
                assert store.get(rng.choice(live)) is not None
        counts[op] = counts.get(op, 0) + 1
    store.close()
    print(json.dumps({"worker": me, "ops": counts}), flush=True)
    return 0


# --- the reader: every acknowledged change, checked from another process -------------------------------------------


class Acks:
    """Tails the writers' ack files: which ids were acknowledged, which forgotten."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.offsets: dict[Path, int] = {}
        self.added: set[str] = set()
        self.forgotten: set[str] = set()

    def read(self) -> tuple[list[str], list[str]]:
        """The adds and forgets acknowledged since the last call (whole lines only)."""
        new_a: list[str] = []
        new_f: list[str] = []
        for path in sorted(self.folder.glob("acks-*")):
            start = self.offsets.get(path, 0)
            with path.open("rb") as f:
                f.seek(start)
                data = f.read()
            whole = data[: data.rfind(b"\n") + 1]
            self.offsets[path] = start + len(whole)
            for line in whole.decode().splitlines():
                kind, mid = line.split()
                (new_a if kind == "A" else new_f).append(mid)
        self.added.update(new_a)
        self.forgotten.update(new_f)
        return new_a, new_f


def reader(args: argparse.Namespace) -> int:
    from memserver.local.store import MemoryStore

    rng = random.Random(99)
    store = MemoryStore(args.path, COLLECTION, embedder=HashEmbedder())
    acks = Acks(Path(args.acks))
    checks = returned = 0
    suspects: list[str] = []
    examples: list[str] = []
    print("ready", flush=True)
    pace = Pacer(args.rate)
    while time.time() < args.end:
        pace.wait()
        new_a, new_f = acks.read()
        older = rng.sample(sorted(acks.added - acks.forgotten), min(20, len(acks.added - acks.forgotten)))
        for mid in [*new_a, *older]:
            if mid in acks.forgotten:
                continue
            checks += 1
            if store.get(mid) is None:
                acks.read()  # forgotten since? (an ack written after this round began)
                if mid not in acks.forgotten and store.get(mid) is None:
                    suspects.append(mid)  # lost, unless its owner's forget was in flight (settled at the end)
        for mid in new_f:
            checks += 1
            if store.get(mid) is not None:
                returned += 1
                examples.append(f"forgotten {mid} returned by get")
        hits = store.search(" ".join(rng.choice(WORDS) for _ in range(2)), limit=50)
        checks += 1
        back = [h.memory.id for h in hits if h.memory.id in acks.forgotten]
        returned += len(back)
        examples.extend(f"forgotten {mid} returned by recall" for mid in back)
    store.close()
    report = {"checks": checks, "suspects": suspects, "forgotten_returned": returned, "examples": examples[:5]}
    print(json.dumps(report))
    return 0


# --- the local run -------------------------------------------------------------------------------------------------


def spawn(role: list[str], args: argparse.Namespace, path: Path, acks: Path, end: float) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "benchmarks.soak", *role, "--path", str(path), "--acks", str(acks)]
    command += ["--end", str(end), "--rate", str(args.rate), "--live", str(args.live)]
    command += ["--compact-every", str(args.compact_every), "--checkpoint-every", str(args.checkpoint_every)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)


def run_local(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    from memserver.local.store import MemoryStore

    path, acks = folder / "store", folder / "acks"
    acks.mkdir(parents=True, exist_ok=True)
    probe = MemoryStore(path, COLLECTION, embedder=HashEmbedder())  # created once; also the latency probe
    collection = Path(probe.folder)
    duration = args.minutes * 60
    end = time.time() + duration + 10  # + start-up of the children
    children = [spawn(["--worker", str(me)], args, path, acks, end) for me in range(args.procs)]
    children.append(spawn(["--reader"], args, path, acks, end))
    for child in children:
        assert child.stdout is not None
        if child.stdout.readline().strip() != "ready":
            raise SystemExit(f"a child did not start: {child.communicate()[1][-2000:]}")
    started = time.time()
    samples: list[dict[str, Any]] = []
    rng = random.Random(5)
    log(f"soak: {args.procs} workers + a reader, {args.minutes} min, a sample every {args.interval} s")
    while time.time() < end - 1:
        sample: dict[str, Any] = {"t": round(time.time() - started, 1)}
        for n, child in enumerate(children):
            name = "reader" if n == args.procs else f"w{n}"
            for key, value in proc_sample(child.pid).items():
                sample[f"{name}.{key}"] = value
        per = [k for k in sample if k.startswith("w")]
        for key in ("rss_mb", "fds", "threads"):
            sample[f"workers.{key}"] = sum(sample[k] for k in per if k.endswith(key))
        sample.update({f"bytes.{k}": v for k, v in store_bytes(collection).items()})
        ms = []
        for _ in range(5):
            t = time.perf_counter()
            probe.search(" ".join(rng.choice(WORDS) for _ in range(3)), limit=10)
            ms.append((time.perf_counter() - t) * 1000)
        sample["recall_ms"] = round(sorted(ms)[2], 3)
        sample["count"] = probe.stats()["count"]
        samples.append(sample)
        log(
            f"soak t={sample['t']:.0f}s count={sample['count']} workers RSS={sample['workers.rss_mb']:.0f} MB "
            f"fds={sample['workers.fds']} journal={sample['bytes.journal']:,} B recall={sample['recall_ms']} ms"
        )
        time.sleep(max(0.0, min(args.interval, end - 1 - time.time())))
    outs = []
    for child in children:
        out, err = child.communicate(timeout=600)
        if child.returncode != 0:
            raise SystemExit(f"a child failed (exit {child.returncode}): {err[-3000:]}")
        outs.append(json.loads(out.strip().splitlines()[-1]))
    probe.close()
    final = Acks(acks)
    final.read()
    with MemoryStore(path, COLLECTION, embedder=HashEmbedder()) as fresh:
        lost = sorted(m for m in final.added - final.forgotten if fresh.get(m) is None)
        back = sorted(m for m in final.forgotten if fresh.get(m) is not None)
        count = fresh.stats()["count"]
    ops: dict[str, int] = {}
    for out in outs[:-1]:
        for op, n in out["ops"].items():
            ops[op] = ops.get(op, 0) + n
    check = outs[-1]
    # A memory the reader missed is lost unless its owner forgot it: the owner acks a forget after the store
    # returned, so the reader can miss a memory whose forget is acknowledged a moment later.
    lost_during = [m for m in check["suspects"] if m not in final.forgotten]
    return {
        "mode": "local",
        "procs": args.procs,
        "minutes": args.minutes,
        "interval_s": args.interval,
        "rate_per_worker": args.rate,
        "warmup_s": args.warmup_s,
        "ops": ops,
        "acknowledged_adds": len(final.added),
        "acknowledged_forgets": len(final.forgotten),
        "count_after": count,
        "lost": len(lost) + len(lost_during),
        "lost_during": lost_during[:5],
        "missed_while_being_forgotten": len(check["suspects"]) - len(lost_during),
        "forgotten_returned": len(back) + check["forgotten_returned"],
        "lost_at_end": lost[:5],
        "returned_at_end": back[:5],
        "reader_checks": check["checks"],
        "reader_examples": check["examples"],
        "recall_ms": summary([s["recall_ms"] for s in samples]),
        "slopes_per_hour": slopes(samples, args.warmup_s),
        "samples": samples,
    }


# --- HTTP ------------------------------------------------------------------------------------------------------------


async def http_client(
    number: int, url: str, token: str, end: float, rate: float, tally: dict[str, Any], acked: dict[str, str]
) -> None:
    import httpx2

    from benchmarks.http_load import Session

    rng = random.Random(300 + number)
    gap = 1.0 / rate
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(120.0)) as http:
        while time.time() < end:
            session = Session(http, url, "user0", token)
            try:
                await session.open()
            except (httpx2.HTTPError, KeyError) as exc:
                status = getattr(getattr(exc, "response", None), "status_code", None)
                kind = f"http {status}" if status else type(exc).__name__
                tally["refused"][kind] = tally["refused"].get(kind, 0) + 1
                await asyncio.sleep(gap * 4)
                continue
            tally["opened"] += 1
            mine: list[str] = []
            for step in ("remember", "remember", "recall", "list", "forget"):
                await asyncio.sleep(gap * rng.uniform(0.5, 1.5))
                if step == "remember":
                    content = f"[soak-{number}-{tally['opened']}-{len(mine)}] {rng.choice(WORDS)} {rng.choice(WORDS)}"
                    params: dict[str, Any] = {"name": "remember", "arguments": {"content": content}}
                elif step == "recall":
                    params = {"name": "recall", "arguments": {"query": rng.choice(WORDS), "limit": 10}}
                elif step == "list":
                    params = {"name": "list_recent", "arguments": {"limit": 10}}
                else:
                    params = {"name": "forget", "arguments": {"memory_id": mine[0]}} if mine else {}
                if not params:
                    continue
                try:
                    answer = await session.request("tools/call", params)
                except httpx2.HTTPError as exc:
                    answer = {"exception": type(exc).__name__}
                tally["calls"] += 1
                if answer.get("http_status") in (429, 503):
                    tally["busy"] += 1  # the guard said "later": load shed, not a failure of the session
                    continue
                if answer.get("http_status") == 404:
                    tally["sessions_lost"] += 1  # the server forgot a session still in use
                    break
                result = answer.get("result")
                if not isinstance(result, dict) or result.get("isError"):
                    key = f"{step}: {str(answer)[:100]}"
                    tally["errors"][key] = tally["errors"].get(key, 0) + 1
                    continue
                if step == "remember" and result["structuredContent"].get("status") == "stored":
                    mine.append(result["structuredContent"]["id"])
                    acked[mine[-1]] = content
                elif step == "forget":
                    tally["forgotten"].add(mine[0])
                    acked.pop(mine[0], None)
            if rng.random() < 0.25:
                tally["abandoned"] += 1  # left to the idle expiry
            else:
                with contextlib.suppress(httpx2.HTTPError):
                    await session.close()
                tally["closed"] += 1


async def http_verify(url: str, token: str, acked: dict[str, str], forgotten: set[str]) -> tuple[int, int]:
    import httpx2

    from benchmarks.http_load import Session

    gate = asyncio.Semaphore(8)
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(120.0)) as http:
        session = Session(http, url, "user0", token)
        await session.open()

        async def text(mid: str) -> str | None:
            async with gate:
                answer = await session.request("resources/read", {"uri": f"memory://memories/{mid}"})
            got = answer.get("result", {}).get("contents", [{}])[0].get("text")
            return None if got is None else str(json.loads(got)["content"])

        got = await asyncio.gather(*(text(m) for m in acked))
        lost = sum(g != c for g, c in zip(got, acked.values(), strict=True))
        back = sum(g is not None for g in await asyncio.gather(*(text(m) for m in forgotten)))
        await session.close()
    return lost, back


def run_http(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    from benchmarks.http_load import serve

    token = f"soak-token-{'x' * 24}"
    server_args = ["--max-sessions", str(args.max_sessions), "--max-sessions-per-user", str(args.max_sessions)]
    server_args += ["--session-idle-timeout", str(args.idle_timeout)]
    tally: dict[str, Any] = {
        **{"opened": 0, "closed": 0, "abandoned": 0, "calls": 0, "busy": 0, "sessions_lost": 0},
        **{"errors": {}, "refused": {}, "forgotten": set()},
    }
    acked: dict[str, str] = {}
    samples: list[dict[str, Any]] = []
    with serve(folder, {"user0": token}, *server_args) as (url, process):
        duration = args.minutes * 60

        async def main() -> tuple[int, int]:
            end = time.time() + duration
            started = time.time()
            clients = [
                asyncio.create_task(http_client(n, url, token, end, args.rate, tally, acked))
                for n in range(args.sessions)
            ]
            while time.time() < end:
                await asyncio.sleep(max(0.0, min(args.interval, end - time.time())))
                sample: dict[str, Any] = {"t": round(time.time() - started, 1), **proc_sample(process.pid)}
                sample.update({"opened": tally["opened"], "calls": tally["calls"], "memories": len(acked)})
                samples.append(sample)
                log(
                    f"soak --http t={sample['t']:.0f}s sessions opened={tally['opened']} calls={tally['calls']} "
                    f"RSS={sample['rss_mb']} MB fds={sample['fds']} threads={sample['threads']}"
                )
            await asyncio.gather(*clients)
            return await http_verify(url, token, acked, tally["forgotten"])

        lost, back = asyncio.run(main())
        alive = process.poll() is None
    return {
        "mode": "http",
        "sessions": args.sessions,
        "minutes": args.minutes,
        "interval_s": args.interval,
        "rate_per_session": args.rate,
        "max_sessions": args.max_sessions,
        "idle_timeout_s": args.idle_timeout,
        "warmup_s": args.warmup_s,
        "sessions_opened": tally["opened"],
        "sessions_closed": tally["closed"],
        "sessions_abandoned": tally["abandoned"],
        "opens_refused": tally["refused"],
        "calls": tally["calls"],
        "busy": tally["busy"],
        "sessions_lost": tally["sessions_lost"],
        "errors": sum(tally["errors"].values()),
        "error_kinds": dict(sorted(tally["errors"].items(), key=lambda kv: -kv[1])[:5]),
        "acknowledged_memories": len(acked),
        "forgotten": len(tally["forgotten"]),
        "lost": lost,
        "forgotten_returned": back,
        "server_alive": alive,
        "slopes_per_hour": slopes(samples, args.warmup_s),
        "samples": samples,
    }


# --- the table and the command line ----------------------------------------------------------------------------------


def print_result(r: dict[str, Any]) -> None:
    keys = [k for k in r["slopes_per_hour"] if "." not in k or k.startswith(("workers.", "reader.", "bytes."))]
    rows = [[k, s["first"], s["last"], s["per_hour"]] for k, s in r["slopes_per_hour"].items() if k in keys]
    print(table(["series (after warm-up)", "first", "last", "slope per hour"], rows))
    print()
    if r["mode"] == "local":
        head = ["procs", "minutes", "ops", "acked adds", "acked forgets", "reader checks", "lost", "forgotten back"]
        row = [r["procs"], r["minutes"], sum(r["ops"].values()), r["acknowledged_adds"], r["acknowledged_forgets"]]
        row += [r["reader_checks"], r["lost"], r["forgotten_returned"]]
    else:
        head = ["sessions", "minutes", "opened", "abandoned", "refused", "calls", "busy", "404s", "errors", "lost"]
        head += ["forgotten back"]
        row = [r["sessions"], r["minutes"], r["sessions_opened"], r["sessions_abandoned"]]
        row += [sum(r["opens_refused"].values()), r["calls"], r["busy"], r["sessions_lost"], r["errors"], r["lost"]]
        row += [r["forgotten_returned"]]
    print(table(head, [row]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", action="store_true", help="soak `memserver serve --http` instead of a local store")
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--interval", type=float, default=30.0, help="seconds between two samples")
    parser.add_argument("--warmup", type=float, help="seconds left out of the slopes (default: a fifth of the run)")
    parser.add_argument("--procs", type=int, default=8, help="local: worker processes")
    parser.add_argument("--rate", type=float, help="operations per second per worker (5) or calls per session (0.5)")
    parser.add_argument("--live", type=int, default=300, help="local: memories each worker keeps")
    parser.add_argument("--compact-every", type=float, default=60.0, help="local: seconds between compactions")
    parser.add_argument("--checkpoint-every", type=float, default=30.0, help="local: seconds between checkpoints")
    parser.add_argument("--sessions", type=int, default=64, help="HTTP: concurrent clients")
    parser.add_argument("--max-sessions", type=int, default=128, help="HTTP: the server's session cap")
    parser.add_argument("--idle-timeout", type=float, default=10.0, help="HTTP: the server's session idle expiry")
    parser.add_argument("--quick", action="store_true", help="smoke run: 3 processes (or 6 sessions), 8 s")
    parser.add_argument("--out")
    parser.add_argument("--refit", metavar="JSON", help="only: the slopes of a result file again, with --warmup")
    parser.add_argument("--dir", help="folder for the store (default: a temporary one)")
    parser.add_argument("--worker", type=int, default=-1, help=argparse.SUPPRESS)
    parser.add_argument("--reader", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--path", help=argparse.SUPPRESS)
    parser.add_argument("--acks", help=argparse.SUPPRESS)
    parser.add_argument("--end", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.refit:
        result = json.loads(Path(args.refit).read_text())
        warmup = args.warmup if args.warmup is not None else result["warmup_s"]
        result["slopes_per_hour"] = slopes(result["samples"], warmup)
        print(f"slopes after {warmup} s of warm-up")
        print_result(result)
        return 0
    if args.rate is None:
        args.rate = 0.5 if args.http else 5.0
    if args.worker >= 0:
        return worker(args)
    if args.reader:
        return reader(args)
    if args.quick:
        args.procs, args.sessions, args.minutes, args.interval = 3, 6, 0.14, 1.0
        args.compact_every, args.checkpoint_every, args.live, args.idle_timeout = 3.0, 2.0, 20, 2.0
    args.warmup_s = args.warmup if args.warmup is not None else args.minutes * 60 / 5
    out = args.out or str(RESULTS / ("soak_http.json" if args.http else "soak.json"))
    with tempfile.TemporaryDirectory(prefix="memserver-soak-", dir=args.dir) as tmp:
        result = run_http(args, Path(tmp)) if args.http else run_local(args, Path(tmp))
    result["machine"] = machine()
    result["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    print_result(result)
    write_json(out, result)
    ok = result["lost"] == result["forgotten_returned"] == 0
    return 0 if ok and result.get("server_alive", True) and not result.get("errors") else 1


if __name__ == "__main__":
    sys.exit(main())
