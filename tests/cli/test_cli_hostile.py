"""Hostile stores as a user meets them (issue 27 item 4): the real `memserver` commands, each in its own process
(`python -m memserver ...`, embedding with the fake), on a data directory someone or something damaged.

A store that can be repaired works, and the repair is said once on stderr: the next command says nothing. A store
that is refused gives one line on stderr naming the file and what to do, and exit status 1. `memserver serve` over
stdio answers the handshake and tools/list either way; every request that needs a refused store gets an isError
result (tools) or a JSON-RPC error (resources, prompts) naming the problem, and the server keeps answering. Never a
traceback, on stderr or stdout. (tests/local/test_hostile_stores.py and test_hostile_journal.py hold the store-level
cases; this file runs a few of each through the commands; tests/support/hostile.py makes them.)
"""

from __future__ import annotations

import json
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from tests.support import hostile

pytestmark = pytest.mark.slow  # ~30 processes, each importing memserver and the MCP SDK

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 120.0  # one command or one answer, on a loaded machine
# `python -m memserver` as a user runs it, with the model patched to the fake (tests/support/kill_points.py does
# the same for its children): the same module, run as __main__.
MEMSERVER = (
    "import runpy, sys\n"
    "import memserver.embedding.embedder as embedder\n"
    "from tests.support.fakes import FakeEmbedder\n"
    "embedder.Embedder = lambda *a, **k: FakeEmbedder()\n"
    "sys.argv[0] = 'memserver'\n"
    "runpy.run_module('memserver', run_name='__main__', alter_sys=True)\n"
)
COMMANDS = (["list"], ["recall", "fact about item"], ["stats"])


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSERVER_", "MCP_MEMORY_"))}
    return env | {"PYTHONPATH": str(ROOT), "MCP_MEMORY_COLLECTION": "test", "MEMSERVER_LOG_LEVEL": "INFO"}


def _memserver(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """One command, as typed: `memserver COMMAND ... --data-dir DIR` (the collection from MCP_MEMORY_COLLECTION)."""
    command = [sys.executable, "-c", MEMSERVER, *args, "--data-dir", str(data_dir)]
    return subprocess.run(command, capture_output=True, text=True, env=_env(), cwd=ROOT, timeout=TIMEOUT)


# --- the hostile stores -----------------------------------------------------------------------------------------


def _damaged(damage: Callable[[Path], None]) -> Callable[[Path], None]:
    def make(root: Path) -> None:
        hostile.checkpointed(root)
        damage(root / "test")

    return make


def _impossible(edit: hostile.Edit) -> Callable[[Path], None]:
    def make(root: Path) -> None:
        hostile.store_three(root)
        hostile.rewrite(root, edit)

    return make


REPAIRABLE: dict[str, Callable[[Path], None]] = {case: _damaged(damage) for case, (damage, _) in hostile.DAMAGE.items()}
# each refused store, with words of the one line that refuses it
REFUSED: dict[str, tuple[Callable[[Path], None], str]] = {
    "a journal line with an impossible field": (_impossible(hostile.field(1, "namespace", "team notes")), "namespace"),
    "a cycle of replaces": (_impossible(hostile.cycle), "cycle of `replaces`"),
    "a damaged middle journal line": (hostile.damaged_middle_line, "damaged line at byte"),
}


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """A fresh copy of a hostile store, by case (each built once per module)."""
    built: dict[str, Path] = {}
    makers = {**REPAIRABLE, **{case: make for case, (make, _) in REFUSED.items()}}

    def copy(case: str) -> Path:
        if case not in built:
            built[case] = tmp_path_factory.mktemp("original")
            makers[case](built[case])
        fresh = tmp_path_factory.mktemp("copy")
        shutil.copytree(built[case], fresh, dirs_exist_ok=True)
        return fresh

    return copy


def _no_traceback(*outputs: str) -> None:
    for output in outputs:
        assert "Traceback" not in output, output


def _said(stderr: str) -> list[str]:
    """The lines of stderr that tell of trouble: the CLI's and the log's (not `list`'s paging hint, not INFO)."""
    return [line for line in stderr.splitlines() if line.strip() and not line.startswith(("(", "memserver INFO"))]


# --- the commands -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", list(REPAIRABLE))
def test_the_commands_work_on_a_repairable_store_and_say_the_repair_once(
    made: Callable[[str], Path], case: str
) -> None:
    data_dir = made(case)
    runs = [_memserver(data_dir, *command, "--collection", "test") for command in (*COMMANDS, ["list"])]
    for run in runs:
        assert run.returncode == 0, run.stderr
        _no_traceback(run.stdout, run.stderr)
    listed, recalled, stats, again = runs
    assert "fact 299 about item299" in listed.stdout and listed.stdout == again.stdout
    assert "fact" in recalled.stdout
    assert any(line.split() == ["count", "300"] for line in stats.stdout.splitlines()), stats.stdout
    first = _said(listed.stderr)
    assert first, f"the repair of {case} was not said"
    assert len(set(first)) == len(first), first  # each thing said once
    assert all(str(data_dir / "test") in line for line in first), first  # naming the store it repaired
    assert all(line.startswith("memserver: ") for line in first), first  # as every line the CLI prints to stderr
    for later in runs[1:]:
        assert _said(later.stderr) == [], later.stderr  # repaired: nothing to say again


@pytest.mark.parametrize("case", list(REFUSED))
def test_every_command_refuses_the_store_in_one_line_and_exits_1(made: Callable[[str], Path], case: str) -> None:
    data_dir = made(case)
    journal = data_dir / "test" / "journal.jsonl"
    before = journal.read_bytes()
    _, named = REFUSED[case]
    for command in COMMANDS:
        run = _memserver(data_dir, *command)
        assert run.returncode == 1, (command, run.stderr)
        assert run.stdout == ""
        lines = run.stderr.splitlines()
        assert len(lines) == 1, run.stderr
        assert str(journal) in lines[0] and named in lines[0] and "Restore a backup" in lines[0], lines[0]
    assert journal.read_bytes() == before  # refused: nothing repaired behind the user's back


# --- memserver serve over stdio -----------------------------------------------------------------------------------


class Served:
    """`memserver serve` over stdio, spoken to in raw JSON-RPC lines; answers are awaited one by one."""

    def __init__(self, data_dir: Path) -> None:
        command = [sys.executable, "-c", MEMSERVER, "serve", "--data-dir", str(data_dir)]
        self.process = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env(), cwd=ROOT,
            text=True,
        )  # fmt: skip
        assert self.process.stdout is not None and self.process.stderr is not None
        self.lines: queue.Queue[str | None] = queue.Queue()
        self.stdout: list[str] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._pump, args=(self.process.stdout, self.stdout, self.lines), daemon=True).start()
        self._err = threading.Thread(target=self._pump, args=(self.process.stderr, self.stderr, None), daemon=True)
        self._err.start()
        self.next_id = 0

    @staticmethod
    def _pump(stream: IO[str], seen: list[str], lines: queue.Queue[str | None] | None) -> None:
        for line in stream:
            seen.append(line)
            if lines is not None:
                lines.put(line)
        if lines is not None:
            lines.put(None)

    def notify(self, method: str) -> None:
        self._send({"jsonrpc": "2.0", "method": method})

    def request(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Send one request, then wait for its answer (log notifications on the way are skipped)."""
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        self._send(message if params is None else {**message, "params": params})
        while True:
            line = self.lines.get(timeout=TIMEOUT)
            assert line is not None, f"the server ended before answering {method}: {''.join(self.stderr)}"
            message = json.loads(line)
            if message.get("id") == self.next_id:
                return message

    def call(self, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
        answer = self.request("tools/call", {"name": tool, "arguments": arguments})
        assert "result" in answer, answer
        return answer["result"]

    def _send(self, message: dict[str, Any]) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message) + "\n")
        self.process.stdin.flush()

    def close(self) -> tuple[int, str, str]:
        """End the input as a client does on exit; the exit status and everything the server wrote."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        code = self.process.wait(TIMEOUT)
        self._err.join(TIMEOUT)
        while self.lines.get(timeout=TIMEOUT) is not None:  # the rest of stdout
            pass
        return code, "".join(self.stdout), "".join(self.stderr)


@pytest.fixture
def serve() -> Iterator[Callable[[Path], Served]]:
    started: list[Served] = []

    def start(data_dir: Path) -> Served:
        started.append(Served(data_dir))
        return started[-1]

    yield start
    for served in started:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait(TIMEOUT)


def _handshake(served: Served) -> None:
    init = served.request(
        "initialize",
        {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "hostile", "version": "1"}},
    )
    assert init["result"]["serverInfo"]["name"], init
    served.notify("notifications/initialized")
    tools = served.request("tools/list")
    assert "recall" in {tool["name"] for tool in tools["result"]["tools"]}, tools


def _all_json(stdout: str) -> None:
    """stdout is the protocol stream: JSON-RPC lines and nothing else."""
    for line in stdout.splitlines():
        assert json.loads(line)["jsonrpc"] == "2.0", line


@pytest.mark.parametrize("case", list(REPAIRABLE))
def test_serve_answers_from_a_repaired_store_and_says_the_repair_once(
    made: Callable[[str], Path], serve: Callable[[Path], Served], case: str
) -> None:
    data_dir = made(case)
    said = []
    for _ in range(2):
        served = serve(data_dir)
        _handshake(served)
        recalled = served.call("recall", {"query": "fact 7 about item7"})
        assert not recalled.get("isError"), recalled
        assert "fact 7 about item7" in {hit["content"] for hit in recalled["structuredContent"]["results"]}
        stats = served.request("resources/read", {"uri": "memory://stats"})
        assert json.loads(stats["result"]["contents"][0]["text"])["count"] == 300
        code, stdout, stderr = served.close()
        assert code == 0, stderr
        _no_traceback(stdout, stderr)
        _all_json(stdout)
        said.append(_said(stderr))
    first, second = said
    assert first, f"the repair of {case} was not said"
    assert len(set(first)) == len(first), first  # once, not once per request
    assert second == [], second


@pytest.mark.parametrize("case", list(REFUSED))
def test_serve_keeps_answering_a_refused_store_with_errors_naming_it(
    made: Callable[[str], Path], serve: Callable[[Path], Served], case: str
) -> None:
    data_dir = made(case)
    journal = str(data_dir / "test" / "journal.jsonl")
    _, named = REFUSED[case]
    served = serve(data_dir)
    _handshake(served)
    for tool, arguments in (("recall", {"query": "fact"}), ("list_recent", {}), ("recall", {"query": "item"})):
        result = served.call(tool, arguments)
        assert result["isError"] is True, result
        text = result["content"][0]["text"]
        assert journal in text and named in text and "Restore a backup" in text, text
    for method, params in (
        ("resources/read", {"uri": "memory://stats"}),
        ("prompts/get", {"name": "recall-context", "arguments": {"topic": "fact"}}),
    ):
        answer = served.request(method, params)
        assert journal in answer["error"]["message"] and named in answer["error"]["message"], answer
    assert served.request("ping") == {"jsonrpc": "2.0", "id": served.next_id, "result": {}}  # still answering
    code, stdout, stderr = served.close()
    assert code == 0, stderr
    _no_traceback(stdout, stderr)
    _all_json(stdout)
    assert named in stderr
