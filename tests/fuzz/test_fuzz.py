"""Fuzz a real `memserver` process over stdio and over HTTP with seeded cases (tests/fuzz/cases.py): schema-aware
tool calls, protocol garbage, hostile resource URIs; one at a time, then in bursts.

Checks: the process never dies, every wait is bounded, every request gets exactly one answer with its id (an error
with id null only for what has no readable id), stdout carries only JSON-RPC, no answer shows internals or repeats
1 KB of its input, no internal errors; every acknowledged memory is still there afterwards, also after a restart;
the server's log shows no token and no memory content.

`uv run pytest tests/fuzz --fuzz-calls 5000 --fuzz-seed 7` for a long run (default: 250 cases over stdio and over
stateful HTTP, half as many over stateless HTTP and over the legacy SSE endpoint).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.raw import INITIALIZE, RawHttp, RawSse, encode, raw_stdio
from tests.e2e.servers import http_server
from tests.fuzz.cases import HOSTILE_HEADERS, MARK, Case, CaseMaker
from tests.fuzz.driver import LEAKS, Checker, HttpTarget, SseTarget, StdioTarget

ALICE = "fuzz-token-alice-4f1c9a0b7e"
BOB = "fuzz-token-bob-77d03e5a19c"
BURST = 40
PING = {"jsonrpc": "2.0", "id": 0, "method": "ping"}


@pytest.fixture
def fuzz_calls(request: pytest.FixtureRequest) -> int:
    return int(request.config.getoption("--fuzz-calls"))


@pytest.fixture
def fuzz_seed(request: pytest.FixtureRequest) -> int:
    return int(request.config.getoption("--fuzz-seed"))


def output_schemas(listed: dict) -> dict:
    # browse_memories answers text (no outputSchema): only the structured tools' answers are checked against one
    return {tool["name"]: tool["outputSchema"] for tool in listed["result"]["tools"] if "outputSchema" in tool}


def report(checker: Checker, more: list[str]) -> str:
    return "\n".join([*checker.findings.problems, *more][:60]) + f"\nanswers: {dict(checker.codes)}"


def assert_log_is_clean(log: str, secrets: tuple[str, ...]) -> None:
    """No memory content (every one carries MARK) and no token in the server's log."""
    assert log.strip(), "the server logged nothing at all: the check would prove nothing"
    for secret in (MARK, *secrets):
        assert secret not in log, f"{secret!r} is in the server's log"


def test_fuzz_stdio(tmp_path: Path, fuzz_calls: int, fuzz_seed: int) -> None:
    """`memserver serve` over stdio answers every fuzz case correctly and loses nothing it acknowledged."""
    data, log = tmp_path / "data", tmp_path / "stderr.log"
    maker = CaseMaker(fuzz_seed)
    with raw_stdio(data, log) as conn:
        conn.initialize()
        checker = Checker(output_schemas(conn.call({"jsonrpc": "2.0", "id": "tools", "method": "tools/list"})))
        target = StdioTarget(conn)  # from here on it takes every answer
        for _ in range(fuzz_calls):
            case = maker.case(http=False)
            maker.known_ids += checker.check(case, target.exchange(case))
        burst = [maker.case(http=False) for _ in range(BURST)]  # all at once: answers interleave
        for case in burst:
            target.send(case)
        for case in burst:
            maker.known_ids += checker.check(case, target.collect(case))
        over_long = Case("a line over 16 MiB", b'{"jsonrpc":"2.0","id":"big","params":"' + b"x" * (17 << 20), ["big"])
        checker.check(over_long, target.exchange(over_long))
        more = [f"answer nobody asked for: {str(a)[:200]}" for a in target.leftovers()]
        more += [f"stdout line that is not JSON: {line!r}" for line in conn.garbage]
        more += checker.ledger.check(target.read)
        assert conn.process.poll() is None, "the server died"
        assert not checker.findings.problems and not more, report(checker, more)
    with raw_stdio(data, log) as again:  # the same memories after a restart
        again.initialize()
        assert not checker.ledger.check(StdioTarget(again).read), "lost after a restart"
    assert len(checker.ledger.stored) > 10, f"too few memories stored to prove anything: {dict(checker.codes)}"
    assert_log_is_clean(log.read_text(errors="replace"), ())


def test_fuzz_http(tmp_path: Path, fuzz_calls: int, fuzz_seed: int) -> None:
    """`memserver serve --http` with two users' tokens answers every fuzz case correctly, alone and in bursts."""
    data = tmp_path / "data"
    maker = CaseMaker(fuzz_seed + 1)
    tokens = {"MEMSERVER_TOKENS": f"alice:{ALICE},bob:{BOB}"}
    with http_server(data, **tokens) as server:
        conn = RawHttp(server.url, ALICE)
        conn.initialize()
        target = HttpTarget(conn)
        checker = Checker(output_schemas(conn.call({"jsonrpc": "2.0", "id": "tools", "method": "tools/list"})))
        for _ in range(fuzz_calls):
            case = maker.case(http=True)
            maker.known_ids += checker.check(case, target.exchange(case))
        burst = [maker.case(http=True) for _ in range(BURST)]
        for case, answers in zip(burst, target.burst(burst), strict=True):
            maker.known_ids += checker.check(case, answers)
        for n in range(max(fuzz_calls // 10, len(HOSTILE_HEADERS))):  # hostile headers on a good request
            headers = HOSTILE_HEADERS[n % len(HOSTILE_HEADERS)]
            status, answers, response = conn.post(encode({**PING, "id": f"h{n}"}), **headers)
            text = response.text
            problems = [leak for leak in LEAKS if leak in text]
            if status >= 500 or problems or any(a.get("id") != f"h{n}" for a in answers if "jsonrpc" in a):
                checker.findings.problems.append(f"headers {str(headers)[:80]}: {status} {text[:200]}")
        for token in ("fuzz-token-mallory-00000000", ALICE[:-1], "x"):  # refused, and never logged
            status, _, _ = conn.post(
                encode({"jsonrpc": "2.0", "id": 1, "method": "ping"}), Authorization=f"Bearer {token}"
            )
            assert status == 401
        more = checker.ledger.check(target.read)
        first_log = server.log
        assert server.process.poll() is None, "the server died"
        assert not checker.findings.problems and not more, report(checker, more) + f"\n{dict(target.statuses)}"
        conn.close()
    with http_server(data, **tokens) as server:
        again = RawHttp(server.url, ALICE)
        again.initialize()
        assert not checker.ledger.check(HttpTarget(again).read), "lost after a restart"
        again.close()
        log = "".join(first_log + server.log)
    assert len(checker.ledger.stored) > 10, f"too few memories stored to prove anything: {dict(checker.codes)}"
    assert_log_is_clean(log, (ALICE, BOB, "fuzz-token-mallory"))


def test_fuzz_http_stateless(tmp_path: Path, fuzz_calls: int, fuzz_seed: int) -> None:
    """`memserver serve --http --stateless`: every POST stands alone, and every case is answered as over /mcp."""
    maker = CaseMaker(fuzz_seed + 2)
    with http_server(tmp_path / "data", "--stateless", MEMSERVER_TOKENS=f"alice:{ALICE}") as server:
        conn = RawHttp(server.url, ALICE)
        assert conn.post(encode(INITIALIZE))[0] == 200 and conn.session is None
        target = HttpTarget(conn)
        checker = Checker(output_schemas(conn.call({"jsonrpc": "2.0", "id": "tools", "method": "tools/list"})))
        for _ in range(max(fuzz_calls // 2, 1)):
            case = maker.case(http=True)
            maker.known_ids += checker.check(case, target.exchange(case))
        burst = [maker.case(http=True) for _ in range(BURST // 2)]
        for case, answers in zip(burst, target.burst(burst), strict=True):
            maker.known_ids += checker.check(case, answers)
        more = checker.ledger.check(target.read)
        assert server.process.poll() is None, "the server died"
        assert not checker.findings.problems and not more, report(checker, more) + f"\n{dict(target.statuses)}"
        log = "".join(server.log)
        conn.close()
    print(f"\n[fuzz stateless] answers {dict(checker.codes)}, HTTP {dict(target.statuses)}")
    assert len(checker.ledger.stored) >= 5, f"too few memories stored to prove anything: {dict(checker.codes)}"
    assert_log_is_clean(log, (ALICE,))


def test_fuzz_legacy_sse(tmp_path: Path, fuzz_calls: int, fuzz_seed: int) -> None:
    """The legacy SSE endpoint (`--sse`): every case POSTed to one session is answered exactly once, on the
    session's stream or (what cannot go there) in the POST's own answer; the session survives all of it."""
    maker = CaseMaker(fuzz_seed + 3)
    with (
        http_server(tmp_path / "data", "--sse", MEMSERVER_TOKENS=f"alice:{ALICE}") as server,
        RawSse(server.sse_url, ALICE) as conn,
    ):
        conn.initialize()
        target = SseTarget(conn)
        listed = target.exchange(
            Case("tools/list", encode({"jsonrpc": "2.0", "id": "t", "method": "tools/list"}), ["t"])
        )
        checker = Checker(output_schemas(listed[0]))
        for _ in range(max(fuzz_calls // 2, 1)):
            case = maker.case(http=True)
            maker.known_ids += checker.check(case, target.exchange(case))
        burst = [maker.case(http=True) for _ in range(BURST // 2)]  # all POSTed, then all collected
        in_posts = [target.send(case) for case in burst]
        for case, in_post in zip(burst, in_posts, strict=True):
            maker.known_ids += checker.check(case, target.collect(case, in_post))
        more = [f"answer nobody asked for: {str(a)[:200]}" for a in target.leftovers()]
        more += checker.ledger.check(target.read)
        assert server.process.poll() is None, "the server died"
        assert not checker.findings.problems and not more, report(checker, more) + f"\n{dict(target.statuses)}"
        log = "".join(server.log)
    print(f"\n[fuzz sse] answers {dict(checker.codes)}, HTTP {dict(target.statuses)}")
    assert len(checker.ledger.stored) > 5, f"too few memories stored to prove anything: {dict(checker.codes)}"
    assert_log_is_clean(log, (ALICE,))
