"""Resource subscriptions: how soon a subscriber hears of a write, and what watching costs while nothing happens.

    uv run python -m benchmarks.watch             # 40 + 10 writes, 3 idle windows of 20 s
    uv run python -m benchmarks.watch --quick     # smoke run (4 + 2 writes, one 2 s window)

Three `memserver serve` processes (stdio, the real model) on one fresh data directory, as three client windows:
  A subscribes to memory://recent and memory://stats (handshake era, the SDK's client);
  B writes (`remember`) at random moments (a uniform 0-0.5 s pause before each, so the writes fall at every phase
    of A's poll), and the latency is from B's answer to A's notifications/resources/updated for memory://recent,
    client side: A's wait for its next poll (at most subscriptions.POLL_SECONDS), its revision() stat, its re-read
    of the subscribed resources, and the stdio hops;
  A then writes itself: this server's own write wakes its watch at once;
  C is connected but subscribes to nothing: over each idle window the CPU time (utime + stime, /proc) of A and of C
    is read side by side, and A minus C is what watching costs a subscribed session.
Prints a table and writes benchmarks/results/watch.json.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
import warnings
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import anyio

from benchmarks import _common as C

URIS = ["memory://recent", "memory://stats"]


def cpu_seconds(pid: int) -> float:
    """utime + stime of `pid` (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Heard:
    """When each notifications/resources/updated arrived, by URI."""

    def __init__(self) -> None:
        self.times: dict[str, list[float]] = {}
        self.arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        import mcp_types as types

        if isinstance(message, types.ResourceUpdatedNotification):
            self.times.setdefault(message.params.uri, []).append(time.perf_counter())
            self.arrived.set()

    async def next(self, uri: str, seen: int) -> float:
        with anyio.fail_after(30):
            while len(self.times.get(uri, [])) <= seen:
                self.arrived = anyio.Event()
                await self.arrived.wait()
        return self.times[uri][seen]


async def spawn(stack: AsyncExitStack, data_dir: Path, **options: Any) -> tuple[Any, int]:
    from mcp import Client

    before = C.child_pids()
    params = C.server_params(data_dir, timing=False)
    client = await stack.enter_async_context(Client(params, mode="legacy", read_timeout_seconds=600, **options))
    await client.call_tool("list_recent", {"limit": 1})  # the store and the model are loaded
    return client, min(C.child_pids() - before)


async def run(writes: int, own_writes: int, windows: int, window_s: float) -> dict[str, Any]:
    rng = random.Random(20261130)
    with tempfile.TemporaryDirectory(prefix="memserver-watch-") as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the SDK's deprecation warning for resources/subscribe (2026-07-28)
        async with AsyncExitStack() as stack:
            heard = Heard()
            subscriber, a_pid = await spawn(stack, Path(tmp), message_handler=heard)
            writer, _ = await spawn(stack, Path(tmp))
            _, c_pid = await spawn(stack, Path(tmp))
            for uri in URIS:
                await subscriber.subscribe_resource(uri)

            other, own = [], []
            for n in range(writes):
                await anyio.sleep(rng.uniform(0, 0.5))
                seen = len(heard.times.get(URIS[0], []))
                await writer.call_tool("remember", {"content": f"Written by the other window, number {n}."})
                answered = time.perf_counter()
                other.append((await heard.next(URIS[0], seen)) - answered)
            for n in range(own_writes):
                await anyio.sleep(rng.uniform(0, 0.5))
                seen = len(heard.times.get(URIS[0], []))
                await subscriber.call_tool("remember", {"content": f"Written by the subscriber, number {n}."})
                answered = time.perf_counter()
                own.append((await heard.next(URIS[0], seen)) - answered)

            idle = []
            for _ in range(windows):
                a0, c0, t0 = cpu_seconds(a_pid), cpu_seconds(c_pid), time.perf_counter()
                await anyio.sleep(window_s)
                a1, c1, t1 = cpu_seconds(a_pid), cpu_seconds(c_pid), time.perf_counter()
                idle.append(
                    {"subscribed_ms_per_s": (a1 - a0) / (t1 - t0) * 1000, "idle_ms_per_s": (c1 - c0) / (t1 - t0) * 1000}
                )
    return {"other_process_s": other, "own_write_s": own, "idle_windows": idle, "window_s": window_s}


def summary(values: list[float]) -> dict[str, float]:
    ms = sorted(v * 1000 for v in values)
    return {
        "n": len(ms),
        "median_ms": statistics.median(ms),
        "p90_ms": ms[int(0.9 * (len(ms) - 1))],
        "max_ms": ms[-1],
        "min_ms": ms[0],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=40, help="writes by the other process (default 40)")
    parser.add_argument("--own-writes", type=int, default=10, help="writes by the subscriber itself (default 10)")
    parser.add_argument("--windows", type=int, default=3, help="idle windows (default 3)")
    parser.add_argument("--window", type=float, default=20.0, help="seconds per idle window (default 20)")
    parser.add_argument("--quick", action="store_true", help="smoke run")
    parser.add_argument("--out", default=str(C.RESULTS / "watch.json"))
    args = parser.parse_args(argv)
    if args.quick:
        args.writes, args.own_writes, args.windows, args.window = 4, 2, 1, 2.0
    from memserver.features import subscriptions

    raw = anyio.run(run, args.writes, args.own_writes, args.windows, args.window)
    other, own = summary(raw["other_process_s"]), summary(raw["own_write_s"])
    idle = raw["idle_windows"]
    subscribed = statistics.median(w["subscribed_ms_per_s"] for w in idle)
    unsubscribed = statistics.median(w["idle_ms_per_s"] for w in idle)
    rows = [
        ["write by another process", other["n"], other["median_ms"], other["p90_ms"], other["max_ms"]],
        ["write by the subscriber", own["n"], own["median_ms"], own["p90_ms"], own["max_ms"]],
    ]
    print(f"\nwrite -> notifications/resources/updated (poll every {subscriptions.POLL_SECONDS * 1000:.0f} ms)")
    print(C.table(["write", "n", "median ms", "p90 ms", "max ms"], rows))
    print(f"\nidle CPU over {len(idle)} window(s) of {args.window:g} s (median, ms of CPU per second)")
    print(C.table(["server", "CPU ms/s"], [["subscribed (2 URIs)", subscribed], ["not subscribed", unsubscribed]]))
    C.write_json(
        args.out,
        {
            "machine": C.machine(),
            "poll_seconds": subscriptions.POLL_SECONDS,
            "other_process": other,
            "own_write": own,
            "idle_cpu_ms_per_s": {"subscribed": subscribed, "not_subscribed": unsubscribed, "windows": idle},
            "raw": raw,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
