"""Raw JSON-RPC clients for real `memserver` processes: bytes in, parsed answers out, no SDK in between, so tests
can send what no well-behaved client would. Every wait is bounded; nothing here retries."""

from __future__ import annotations

import json
import queue
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx2

from tests.e2e.servers import SERVE, TIMEOUT, server_env

PROTOCOL = "2025-11-25"
INITIALIZE: dict[str, Any] = {
    "jsonrpc": "2.0",
    "id": "init",
    "method": "initialize",
    "params": {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}


def encode(message: Any) -> bytes:
    return json.dumps(message, ensure_ascii=False).encode("utf-8", "surrogatepass")


class RawStdio:
    """`memserver serve` over pipes. `answers` gets every stdout line parsed as JSON; `garbage` every line that
    is not JSON (there must be none)."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.answers: queue.Queue[Any] = queue.Queue()
        self.garbage: list[bytes] = []
        self.lines = 0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines += 1
            try:
                self.answers.put(json.loads(line))
            except ValueError:
                self.garbage.append(line[:200])

    def send(self, data: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(data if data.endswith(b"\n") else data + b"\n")
        self.process.stdin.flush()

    def next_answer(self, timeout: float = TIMEOUT) -> Any:
        """The next message the server writes (queue.Empty after `timeout` seconds)."""
        return self.answers.get(timeout=timeout)

    def call(self, message: dict[str, Any], timeout: float = TIMEOUT) -> dict[str, Any]:
        """Send one request and return the next answer, which must be its own."""
        self.send(encode(message))
        answer = self.next_answer(timeout)
        assert isinstance(answer, dict) and answer.get("id") == message.get("id"), (message.get("id"), answer)
        return answer

    def initialize(self) -> dict[str, Any]:
        answer = self.call(INITIALIZE)
        self.send(encode(INITIALIZED))
        return answer


@contextmanager
def raw_stdio(data_dir: Path, stderr: Path, **env: str) -> Iterator[RawStdio]:
    """Spawn `memserver serve` on `data_dir` (stderr appended to the file `stderr`), and stop it afterwards."""
    with stderr.open("ab") as err:
        process = subprocess.Popen(
            SERVE, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, env=server_env(data_dir, **env)
        )
    try:
        yield RawStdio(process)
    finally:
        if process.stdin is not None:
            process.stdin.close()
        try:
            process.wait(TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(TIMEOUT)


class RawHttp:
    """POSTs to a memserver HTTP endpoint, each answer parsed from JSON or from its SSE `message` events."""

    def __init__(self, url: str, token: str | None = None, timeout: float = TIMEOUT) -> None:
        self.url = url
        self.headers = dict(MCP_HEADERS)
        if token:
            self.headers["authorization"] = f"Bearer {token}"
        self.http = httpx2.Client(timeout=timeout)
        self.session: str | None = None

    def close(self) -> None:
        self.http.close()

    def post(self, body: bytes, *, session: bool = True, **headers: str) -> tuple[int, list[Any], httpx2.Response]:
        """(status, JSON-RPC messages in the answer, the response)."""
        all_headers = {**self.headers, **{name.lower(): value for name, value in headers.items()}}
        if session and self.session:
            all_headers.setdefault("mcp-session-id", self.session)
            all_headers.setdefault("mcp-protocol-version", PROTOCOL)
        response = self.http.post(self.url, content=body, headers=all_headers)
        return response.status_code, messages_of(response), response

    def call(self, message: dict[str, Any]) -> dict[str, Any]:
        """POST one request in this session and return its answer, which must carry its id."""
        status, answers, _ = self.post(encode(message))
        assert len(answers) == 1 and answers[0].get("id") == message.get("id"), (status, answers)
        return answers[0]

    def initialize(self) -> dict[str, Any]:
        status, answers, response = self.post(encode(INITIALIZE), session=False)
        assert status == 200, (status, response.text[:500])
        self.session = response.headers["mcp-session-id"]
        self.post(encode(INITIALIZED))
        return answers[0]

    def delete(self) -> int:
        assert self.session
        headers = {**self.headers, "mcp-session-id": self.session, "mcp-protocol-version": PROTOCOL}
        return self.http.delete(self.url, headers=headers).status_code


def messages_of(response: httpx2.Response) -> list[Any]:
    """The JSON-RPC messages of an HTTP answer: a JSON body, or the data of SSE events; [] when neither."""
    kind = response.headers.get("content-type", "")
    if kind.startswith("application/json"):
        try:
            return [json.loads(response.content)]
        except ValueError:
            return []
    if kind.startswith("text/event-stream"):
        found = []
        for event in response.text.split("\n\n"):
            data = "\n".join(line[5:].lstrip() for line in event.splitlines() if line.startswith("data:"))
            if data:
                found.append(json.loads(data))
        return found
    return []
