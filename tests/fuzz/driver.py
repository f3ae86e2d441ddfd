"""Runs fuzz cases against a real memserver process and checks every answer; remembers what the server
acknowledged so the test can ask for it again (also after a restart)."""

from __future__ import annotations

import json
import queue
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator

from tests.e2e.raw import RawHttp, RawSse, RawStdio, encode
from tests.fuzz.cases import Case

WAIT = 60.0  # the longest any one answer may take (a remember of 20 000 characters on a loaded machine)
LEAKS = ("Traceback", "pydantic", "errors.pydantic.dev", "site-packages", 'File "')
INTERNAL = (0, -32603)  # the SDK's code 0 and "internal error": a bug, never an answer to client input


@dataclass
class Findings:
    """What went wrong, one line per defect (the test prints them all)."""

    problems: list[str] = field(default_factory=list)

    def add(self, case: Case, what: str) -> None:
        if len(self.problems) < 200:
            self.problems.append(f"{case.label}: {what}")


class Ledger:
    """What the server acknowledged: memories stored (id -> content), found as duplicates, forgotten."""

    def __init__(self) -> None:
        self.stored: dict[str, str] = {}
        self.duplicates: set[str] = set()
        self.forgotten: set[str] = set()

    def absorb(self, case: Case, answer: dict[str, Any]) -> str | None:
        """Record what a tool answer acknowledges; returns a stored memory's id."""
        result = answer.get("result")
        if not isinstance(result, dict) or result.get("isError") or case.arguments is None:
            return None
        payload = result.get("structuredContent") or {}
        if case.tool == "remember":
            memory_id = payload["id"]
            if payload["status"] == "stored":
                self.stored[memory_id] = case.arguments["content"].strip()
                self.forgotten.discard(memory_id)
                return str(memory_id)
            self.duplicates.add(memory_id)
        elif case.tool == "forget" and payload.get("deleted"):
            memory_id = case.arguments["memory_id"].strip().lower()
            self.stored.pop(memory_id, None)
            self.duplicates.discard(memory_id)
            self.forgotten.add(memory_id)
        return None

    def check(self, read: Callable[[str], dict[str, Any]]) -> list[str]:
        """Ask for every acknowledged memory through `read(uri) -> answer`; the lines say what is wrong."""
        wrong = []
        for memory_id, content in self.stored.items():
            answer = read(f"memory://memories/{memory_id}")
            got = json.loads(answer["result"]["contents"][0]["text"]) if "result" in answer else None
            if got is None or got["content"] != content:
                wrong.append(f"stored memory {memory_id} is {'missing' if got is None else 'changed'}")
        for memory_id in self.duplicates - set(self.stored):
            if "result" not in read(f"memory://memories/{memory_id}"):
                wrong.append(f"memory {memory_id}, reported as a duplicate, is missing")
        for memory_id in self.forgotten:
            if "result" in read(f"memory://memories/{memory_id}"):
                wrong.append(f"forgotten memory {memory_id} is back")
        return wrong


class Checker:
    """The rules every answer must follow."""

    def __init__(self, output_schemas: dict[str, Any]) -> None:
        self.validators = {name: Draft202012Validator(schema) for name, schema in output_schemas.items()}
        self.findings = Findings()
        self.ledger = Ledger()
        self.codes: Counter[str] = Counter()

    def check(self, case: Case, answers: list[Any]) -> list[str]:
        """Check the answers to one case; returns the ids of memories it stored."""
        ids = [a.get("id") if isinstance(a, dict) else "<not an object>" for a in answers]
        if Counter(map(repr, ids)) != Counter(map(repr, case.answers)):
            self.findings.add(case, f"answered with ids {ids}, expected {case.answers}")
        stored = []
        for answer in answers:
            self.check_one(case, answer)
            if isinstance(answer, dict) and (memory_id := self.ledger.absorb(case, answer)):
                stored.append(memory_id)
        return stored

    def check_one(self, case: Case, answer: Any) -> None:
        if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0" or "id" not in answer:
            self.findings.add(case, f"not a JSON-RPC response: {str(answer)[:200]}")
            return
        if ("result" in answer) == ("error" in answer):
            self.findings.add(case, "needs exactly one of result and error")
            return
        text = json.dumps(answer, ensure_ascii=False)
        for leak in LEAKS:
            if leak in text:
                self.findings.add(case, f"the answer shows {leak!r}: {text[:300]}")
        error = answer.get("error")
        result = answer.get("result")
        if error is not None:
            code = error.get("code")
            self.codes[f"error {code}"] += 1
            if not isinstance(code, int) or not isinstance(error.get("message"), str) or code in INTERNAL:
                self.findings.add(case, f"bad error {str(error)[:300]}")
        elif isinstance(result, dict) and result.get("isError"):
            self.codes["isError"] += 1
        else:
            self.codes["result"] += 1
            if case.tool in self.validators and isinstance(result, dict):
                problems = list(self.validators[case.tool].iter_errors(result.get("structuredContent")))
                if problems:
                    self.findings.add(case, f"structuredContent breaks the output schema: {problems[0].message[:200]}")
        beyond_id = json.dumps({k: v for k, v in answer.items() if k != "id"}, ensure_ascii=False)  # the id is echoed
        failed = error is not None or (isinstance(result, dict) and result.get("isError"))
        if failed and _echoes(beyond_id, case.large):
            self.findings.add(case, "the error repeats 1 KB of the input")
        if isinstance(result, dict) and result.get("isError"):
            message = " ".join(block.get("text", "") for block in result.get("content", []))
            if "internal error" in message:
                self.findings.add(case, f"internal error: {message[:200]}")


def _echoes(answer_text: str, large: list[str]) -> bool:
    from tests.fuzz.cases import echoes

    return echoes(answer_text, large)


# --- the two transports ------------------------------------------------------------------------------------------


class _AnswerPool:
    """Answers taken from a queue by a thread and kept by id (errors with id null by count), until collected."""

    def __init__(self, source: queue.Queue[Any], alive: Callable[[], bool]) -> None:
        self.source = source
        self.alive = alive
        self.by_id: dict[str, list[Any]] = {}
        self.null: list[Any] = []
        self.lock = threading.Condition()
        threading.Thread(target=self._sort, daemon=True).start()

    def _sort(self) -> None:
        while True:
            try:
                answer = self.source.get(timeout=0.5)
            except queue.Empty:
                if not self.alive():
                    return
                continue
            with self.lock:
                for one in answer if isinstance(answer, list) else [answer]:
                    key = repr(one.get("id")) if isinstance(one, dict) else "<not an object>"
                    if key == "None":
                        self.null.append(one)
                    else:
                        self.by_id.setdefault(key, []).append(one)
                self.lock.notify_all()

    def _pool(self, key: str) -> list[Any]:
        return self.null if key == "None" else self.by_id.setdefault(key, [])

    def collect(self, ids: list[Any], timeout: float = WAIT) -> list[Any]:
        """The answers with `ids` once they are all in (what is missing after `timeout` is simply not there)."""
        wanted = Counter(repr(i) for i in ids)
        deadline = time.monotonic() + timeout
        with self.lock:
            while not all(len(self._pool(key)) >= n for key, n in wanted.items()):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                self.lock.wait(left)
            found = []
            for key, n in wanted.items():
                pool = self._pool(key)
                found.extend(pool[:n])
                del pool[:n]
            return found

    def leftovers(self) -> list[Any]:
        """Answers nobody asked for (a second answer to a request, an error for a notification)."""
        with self.lock:
            return self.null + [a for pool in self.by_id.values() for a in pool]


class StdioTarget:
    """Cases over a RawStdio: one line each; answers are matched by id (errors with id null by count)."""

    def __init__(self, conn: RawStdio) -> None:
        self.conn = conn
        self.pool = _AnswerPool(conn.answers, lambda: conn.process.poll() is None)

    def send(self, case: Case) -> None:
        self.conn.send(case.data)

    def collect(self, case: Case, timeout: float = WAIT) -> list[Any]:
        return self.pool.collect(case.answers, timeout)

    def exchange(self, case: Case) -> list[Any]:
        self.send(case)
        return self.collect(case)

    def leftovers(self) -> list[Any]:
        return self.pool.leftovers()

    def read(self, uri: str) -> dict[str, Any]:
        case = Case("read", b"", [f"read-{uri}"])
        case.data = encode(
            {"jsonrpc": "2.0", "id": case.answers[0], "method": "resources/read", "params": {"uri": uri}}
        )
        answers = self.exchange(case)
        assert answers, f"no answer to reading {uri}"
        return answers[0]


class SseTarget:
    """Cases over a legacy SSE session (RawSse): one POST each; the answers are those on the session's stream
    (202) and those in the POST's own answer (a refusal that could not go on the stream)."""

    def __init__(self, conn: RawSse) -> None:
        self.conn = conn
        self.pool = _AnswerPool(conn.events, lambda: True)
        self.statuses: Counter[int] = Counter()

    def send(self, case: Case) -> list[Any]:
        """POST the case; returns the answers of the POST itself (after checking its status)."""
        status, answers, _ = self.conn.post(case.data)
        self.statuses[status] += 1
        flat: list[Any] = []
        for answer in answers:
            flat.extend(answer if isinstance(answer, list) else [answer])
        if status not in (202, 400, 413) or (status == 202) == bool(flat):
            flat.append({"unexpected HTTP status": status})
        return flat

    def collect(self, case: Case, in_post: list[Any], timeout: float = WAIT) -> list[Any]:
        """`in_post`, and from the stream the answers with an id the case expects that `in_post` does not hold."""
        remaining = Counter(repr(i) for i in case.answers if i is not None)
        remaining.subtract(repr(a.get("id")) for a in in_post if isinstance(a, dict))
        wanted = [i for i in case.answers if i is not None and remaining[repr(i)] > 0]
        return in_post + (self.pool.collect(wanted, timeout) if wanted else [])

    def exchange(self, case: Case) -> list[Any]:
        return self.collect(case, self.send(case))

    def leftovers(self) -> list[Any]:
        return self.pool.leftovers()

    def read(self, uri: str) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": f"read-{uri}", "method": "resources/read", "params": {"uri": uri}}
        case = Case("read", encode(message), [message["id"]])
        answers = self.exchange(case)
        assert answers, f"no answer to reading {uri}"
        return answers[0]


class HttpTarget:
    """Cases over a RawHttp session: one POST each; `statuses` counts the HTTP statuses seen."""

    def __init__(self, conn: RawHttp) -> None:
        self.conn = conn
        self.statuses: Counter[int] = Counter()

    def exchange(self, case: Case) -> list[Any]:
        status, answers, _ = self.conn.post(case.data)
        self.statuses[status] += 1
        flat: list[Any] = []
        for answer in answers:
            flat.extend(answer if isinstance(answer, list) else [answer])
        if status not in (200, 202, 400, 413) or (status == 202) != (not case.answers):
            flat.append({"unexpected HTTP status": status})
        return flat

    def burst(self, cases: list[Case], workers: int = 8) -> list[list[Any]]:
        with ThreadPoolExecutor(workers) as pool:
            return list(pool.map(self.exchange, cases))

    def read(self, uri: str) -> dict[str, Any]:
        message = {"jsonrpc": "2.0", "id": "read", "method": "resources/read", "params": {"uri": uri}}
        return self.conn.call(message)
