"""Load over streamable HTTP: many sessions of two (or more) users calling tools at once on one `memserver serve
--http` process, counting errors, lost memories and cross-user reads, and timing every call.

Each session is a conversation: it calls one tool after another (remember 30%, recall 45%, list_recent 15%,
resources/read of one of its user's memories 10%, now and then of another user's), all sessions at once. Every
memory carries a marker naming its user; an answer to one user that shows another user's marker is a cross-user
read. Afterwards every acknowledged memory is read back by its owner (lost: missing or changed) and by another
user (who must not find it).

    uv run python -m benchmarks.http_load                          # 32 sessions x 1000 calls, 2 users
    uv run python -m benchmarks.http_load --sessions 8 --calls 50  # smaller
    uv run python -m benchmarks.http_load --quick                  # smoke run: 4 sessions x 10 calls
    uv run python -m benchmarks.http_load --session-cost 500       # only: the server's RSS per open session

Writes benchmarks/results/http_load.json (or --output). The raw JSON-RPC client is written here (httpx), so the
figures are the server's and the wire's, not an SDK client's.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2

from benchmarks._common import RESULTS, log, machine, rss_mb, summary, table, write_json

PROTOCOL = "2025-11-25"
HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
PHRASES = [
    "prefers green tea in the afternoon",
    "deploys on Thursdays after lunch",
    "is allergic to peanuts",
    "keeps the spare key under the blue pot",
    "wants the report in PDF, never Word",
    "uses tabs, four wide",
    "meets the dentist every March",
    "reads science fiction before sleeping",
]


@contextmanager
def serve(data_dir: Path, tokens: dict[str, str], *args: str) -> Iterator[tuple[str, subprocess.Popen[str]]]:
    """`memserver serve --http --port 0` with these users' tokens; yields (url, process) once it listens."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSERVER_TOKEN", "MCP_MEMORY_"))}
    env.update(MCP_MEMORY_PATH=str(data_dir), MEMSERVER_TOKENS=",".join(f"{u}:{t}" for u, t in tokens.items()))
    command = [sys.executable, "-m", "memserver", "serve", "--http", "--port", "0", *args]
    process = subprocess.Popen(
        command, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    found: list[str] = []
    ready = threading.Event()

    def drain() -> None:
        assert process.stderr is not None
        for line in process.stderr:
            if not found and (match := re.search(r"serving MCP at (\S+)", line)):
                found.append(match.group(1))
                ready.set()
        ready.set()

    threading.Thread(target=drain, daemon=True).start()
    try:
        if not ready.wait(120) or not found:
            raise RuntimeError("memserver serve --http did not start")
        yield found[0], process
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)


def messages(response: httpx2.Response) -> list[Any]:
    """The JSON-RPC messages of an answer (a JSON body or SSE events)."""
    if response.headers.get("content-type", "").startswith("application/json"):
        return [json.loads(response.content)]
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    return [json.loads(d) for d in data if d]


class Tally:
    def __init__(self) -> None:
        self.ms: dict[str, list[float]] = {}
        self.errors: Counter[str] = Counter()
        self.cross_user = 0
        self.calls = 0
        self.every = 1000  # calls between two progress lines
        self.stored: dict[str, dict[str, str]] = {}  # user -> id -> content


class Session:
    """One user's MCP session over HTTP: raw JSON-RPC POSTs, one at a time."""

    def __init__(self, http: httpx2.AsyncClient, url: str, user: str, token: str) -> None:
        self.http, self.url, self.user = http, url, user
        self.headers = {**HEADERS, "Authorization": f"Bearer {token}"}
        self.next_id = 0

    async def open(self) -> None:
        params = {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "load", "version": "0"}}
        response = await self.http.post(
            self.url, json={"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}, headers=self.headers
        )
        response.raise_for_status()
        self.headers |= {"mcp-session-id": response.headers["mcp-session-id"], "mcp-protocol-version": PROTOCOL}
        await self.http.post(
            self.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=self.headers
        )

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        request_id = self.next_id  # its own: several requests of one session may be in flight (verify)
        message = {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}
        response = await self.http.post(self.url, json=message, headers=self.headers)
        if response.status_code != 200:
            return {"http_status": response.status_code}
        answers = messages(response)
        return answers[0] if len(answers) == 1 and answers[0].get("id") == request_id else {"answers": len(answers)}

    async def close(self) -> None:
        await self.http.delete(self.url, headers=self.headers)


async def converse(session: Session, number: int, calls: int, tally: Tally, others: list[str], seed: int) -> None:
    """One session's calls; `others`: the markers of other users, which must never show up in its answers."""
    rng = random.Random(seed)
    mine = tally.stored.setdefault(session.user, {})
    for i in range(calls):
        roll = rng.random()
        if roll < 0.30 or not mine:
            op = "remember"
            content = f"[ld-{session.user}-{number}-{i}] {session.user} {rng.choice(PHRASES)}"
            params = {"name": "remember", "arguments": {"content": content, "tags": [f"s{number}"]}}
            method = "tools/call"
        elif roll < 0.75:
            op, method = "recall", "tools/call"
            params = {"name": "recall", "arguments": {"query": rng.choice(PHRASES), "limit": 10}}
        elif roll < 0.90:
            op, method = "list_recent", "tools/call"
            params = {"name": "list_recent", "arguments": {"limit": 20}}
        else:
            op, method = "read", "resources/read"
            memory_id = rng.choice(list(mine))
            params = {"uri": f"memory://memories/{memory_id}"}
        started = time.perf_counter()
        try:
            answer = await session.request(method, params)
        except httpx2.HTTPError as exc:
            answer = {"exception": type(exc).__name__}
        tally.ms.setdefault(op, []).append((time.perf_counter() - started) * 1000)
        tally.calls += 1
        if tally.calls % tally.every == 0:
            log(f"http_load: {tally.calls} calls, {sum(tally.errors.values())} errors")
        result = answer.get("result")
        if not isinstance(result, dict) or result.get("isError"):
            tally.errors[f"{op}: {str(answer)[:120]}"] += 1
            continue
        text = json.dumps(result, ensure_ascii=False)
        if any(marker in text for marker in others):
            tally.cross_user += 1
        if op == "remember" and result["structuredContent"]["status"] == "stored":
            mine[result["structuredContent"]["id"]] = content
        elif op == "read" and json.loads(result["contents"][0]["text"])["content"] != mine[memory_id]:
            tally.errors["read: content changed"] += 1


async def verify(sessions: dict[str, Session], tally: Tally) -> tuple[int, int]:
    """(lost, cross-user reads): every acknowledged memory read by its owner, and by another user (16 at a time)."""
    users = list(sessions)
    gate = asyncio.Semaphore(16)

    async def one(user: str, memory_id: str, content: str) -> tuple[int, int]:
        other = sessions[users[(users.index(user) + 1) % len(users)]]
        uri = {"uri": f"memory://memories/{memory_id}"}
        async with gate:
            answer = await sessions[user].request("resources/read", uri)
            got = answer.get("result", {}).get("contents", [{}])[0].get("text")
            lost = got is None or json.loads(got)["content"] != content
            cross = other is not sessions[user] and "result" in await other.request("resources/read", uri)
        return int(lost), int(cross)

    checks = [one(user, i, c) for user, stored in tally.stored.items() for i, c in stored.items()]
    log(f"http_load: reading back {len(checks)} memories")
    results = await asyncio.gather(*checks)
    return sum(lost for lost, _ in results), sum(cross for _, cross in results)


async def load(url: str, tokens: dict[str, str], sessions: int, calls: int, seed: int) -> dict[str, Any]:
    users = list(tokens)
    tally = Tally()
    tally.every = max(sessions * calls // 10, 1)
    limits = httpx2.Limits(max_connections=sessions + 8, max_keepalive_connections=sessions + 8)
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(120.0), limits=limits) as http:
        convos = [Session(http, url, users[n % len(users)], tokens[users[n % len(users)]]) for n in range(sessions)]
        await asyncio.gather(*(s.open() for s in convos))
        started = time.perf_counter()
        await asyncio.gather(
            *(
                converse(s, n, calls, tally, [f"[ld-{u}-" for u in users if u != s.user], seed + n)
                for n, s in enumerate(convos)
            )
        )
        elapsed = time.perf_counter() - started
        checkers = {user: Session(http, url, user, tokens[user]) for user in users}
        await asyncio.gather(*(s.open() for s in checkers.values()))
        lost, cross = await verify(checkers, tally)
        await asyncio.gather(*(s.close() for s in [*convos, *checkers.values()]))
    return {
        "calls": tally.calls,
        "seconds": round(elapsed, 2),
        "calls_per_s": round(tally.calls / elapsed, 1),
        "errors": sum(tally.errors.values()),
        "error_kinds": dict(tally.errors.most_common(10)),
        "lost": lost,
        "cross_user_reads": tally.cross_user + cross,
        "memories": sum(len(s) for s in tally.stored.values()),
        "ms": {op: summary(xs) for op, xs in sorted(tally.ms.items())},
    }


def run_load(
    sessions: int,
    calls: int,
    users: int = 2,
    seed: int = 13,
    data_dir: Path | None = None,
    server_args: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Start a server, run the load, stop it; the figures and counts as a dict (also used by the test suite)."""
    tokens = {f"user{u}": f"load-token-{u}-{'x' * 24}" for u in range(users)}
    with tempfile.TemporaryDirectory() as scratch:
        folder = data_dir or Path(scratch)
        with serve(folder, tokens, *server_args) as (url, process):
            rss_before = rss_mb(process.pid)
            result = asyncio.run(load(url, tokens, sessions, calls, seed))
            result["server_rss_mb"] = {"before": rss_before, "after": rss_mb(process.pid)}
            result["server_alive"] = process.poll() is None
    return {"sessions": sessions, "calls_per_session": calls, "users": users, **result}


async def session_cost(url: str, token: str, n: int, pid: int) -> dict[str, Any]:
    """RSS of the server before and after opening `n` sessions (one call each first, so the store is loaded)."""
    async with httpx2.AsyncClient(timeout=httpx2.Timeout(120.0)) as http:
        first = Session(http, url, "user0", token)
        await first.open()
        await first.request("tools/call", {"name": "list_recent", "arguments": {}})
        await asyncio.sleep(1.0)  # let the loading settle before the first reading
        before = rss_mb(pid)["rss"]
        for _ in range(n):
            await Session(http, url, "user0", token).open()
        after = rss_mb(pid)["rss"]
    return {
        "sessions": n,
        "rss_mb_before": before,
        "rss_mb_after": after,
        "kib_per_session": round((after - before) * 1024 / n, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sessions", type=int, default=32)
    parser.add_argument("--calls", type=int, default=1000, help="calls per session")
    parser.add_argument("--users", type=int, default=2)
    parser.add_argument("--seed", type=int, default=13)
    parser.add_argument("--quick", action="store_true", help="smoke run: 4 sessions x 10 calls")
    parser.add_argument("--output", default=str(RESULTS / "http_load.json"))
    parser.add_argument("--session-cost", type=int, metavar="N", help="only measure the RSS of N open sessions")
    args = parser.parse_args()
    if args.session_cost:
        token = f"load-token-0-{'x' * 24}"
        with (
            tempfile.TemporaryDirectory() as scratch,
            serve(
                Path(scratch),
                {"user0": token},
                "--max-sessions",
                str(args.session_cost + 10),
                "--max-sessions-per-user",
                str(args.session_cost + 10),
            ) as (url, process),
        ):
            cost = asyncio.run(session_cost(url, token, args.session_cost, process.pid))
        print(table(list(cost), [list(cost.values())]))
        return 0
    sessions, calls = (4, 10) if args.quick else (args.sessions, args.calls)
    log(f"http_load: {sessions} sessions x {calls} calls, {args.users} users")
    info = machine()
    result = run_load(sessions, calls, args.users, args.seed)
    result["machine"] = info
    result["loadavg_after"] = [round(x, 2) for x in os.getloadavg()]
    rows = [[op, s["n"], s["p50"], s["p95"], s["p99"]] for op, s in result["ms"].items()]
    print(table(["call", "n", "p50 ms", "p95 ms", "p99 ms"], rows))
    print()
    print(
        table(
            ["sessions", "users", "calls", "calls/s", "errors", "lost", "cross-user reads", "server RSS MB"],
            [
                [
                    sessions,
                    args.users,
                    result["calls"],
                    result["calls_per_s"],
                    result["errors"],
                    result["lost"],
                    result["cross_user_reads"],
                    "{} -> {}".format(
                        result["server_rss_mb"]["before"]["rss"], result["server_rss_mb"]["after"]["rss"]
                    ),
                ]
            ],
        )
    )
    write_json(args.output, result)
    return 0 if result["errors"] == result["lost"] == result["cross_user_reads"] == 0 and result["server_alive"] else 1


if __name__ == "__main__":
    sys.exit(main())
