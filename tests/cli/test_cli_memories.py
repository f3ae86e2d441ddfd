"""The people's commands (memserver/cli/memories.py) through the real CLI: recall, list, show, remember, forget on a
temporary data directory with the real store and model. Aligned text by default, JSON lines with --json; a bulk forget
shows a count and a sample, asks on a terminal (driven through a pseudo-terminal here), and refuses without one."""

from __future__ import annotations

import json
import os
import pty
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from memserver.cli.command import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MCP_MEMORY_PATH", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "100")  # what shutil.get_terminal_size reads first
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    return tmp_path / "data"


def run(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> tuple[str, str]:
    assert main(list(argv)) == status
    captured = capsys.readouterr()
    return captured.out, captured.err


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


def remember(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    out, _ = run(capsys, "remember", *argv, "--json")
    (record,) = jsonl(out)
    return str(record["id"])


def test_remember_show_and_the_history_of_a_correction(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    old = remember(capsys, "Ana lives in Porto.", "--tag", "family", "--speaker", "Sam", "--role", "user",
                   "--session", "chat-1", "--occurred-at", "2024-03-05T10:00:00Z")  # fmt: skip
    out, _ = run(capsys, "remember", "Ana moved to Lisbon.", "--tag", "family", "--replaces", old)
    assert out.startswith("stored ") and out.strip().endswith(f"replacing {old}")
    new = out.split()[1].rstrip(",")
    out, _ = run(capsys, "show", old)
    lines = out.splitlines()
    assert lines[-1] == "Ana lives in Porto."
    fields = dict(line.split(None, 1) for line in lines if line and not line.startswith(("older", "newer")))
    assert fields["occurred_at"] == "2024-03-05 10:00:00 UTC" and fields["speaker"] == "Sam"
    assert fields["replaced_by"] == new and fields["namespace"] == "default" and fields["tags"] == "family"
    assert f"newer versions  {new} (" in out and "older versions  -" in out
    out, _ = run(capsys, "show", new, "--json")
    (record,) = jsonl(out)
    assert record["replaces"] == old and record["history"]["older"][0]["id"] == old
    out, _ = run(capsys, "remember", "Ana moved to Lisbon.")
    assert out.strip() == f"already stored as {new}; nothing stored"
    _, err = run(capsys, "show", "0" * 32, status=1)
    assert err.strip() == f"memserver: error: no memory {'0' * 32} in namespace default"


def test_recall_filters_and_prints_an_aligned_table(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    remember(capsys, "The boiler service is booked for 14 May at 9am.", "--speaker", "Sam", "--session", "home")
    remember(capsys, "Lena said the boiler makes a clicking noise " + "every morning " * 20, "--speaker", "Lena")
    remember(capsys, "The boiler warranty ends in 2027.", "--namespace", "landlord")
    out, _ = run(capsys, "recall", "boiler")
    header, *rows = out.splitlines()
    assert header.split() == ["ID", "FUSED", "WHEN", "(UTC)", "WHO", "TAGS,", "CONTENT"]
    assert len(rows) == 2 and all(len(line) <= 100 for line in out.splitlines())
    assert any(row.endswith("…") for row in rows)  # the long one is cut to the terminal's width
    assert [row.index("The") if "The" in row else row.index("Lena said") for row in rows] == [header.index("TAGS")] * 2
    out, _ = run(capsys, "recall", "boiler", "--speaker", "Lena", "--json")
    found = [r for r in jsonl(out) if "id" in r]  # (a last line may be the weak-match note)
    assert [r["speaker"] for r in found] == ["Lena"] and 0 < found[0]["score"] <= 1
    out, _ = run(capsys, "recall", "boiler", "--namespace", "landlord", "--json")
    assert [r["content"] for r in jsonl(out) if "id" in r] == ["The boiler warranty ends in 2027."]
    out, err = run(capsys, "recall", "boiler", "--session", "nowhere")
    assert out == "" and err.strip() == "memserver: Nothing found: no memory passed the filters (session)."
    _, err = run(capsys, "recall", "boiler", "--since", "someday", status=1)
    assert err.startswith("memserver: error: --since must be an ISO 8601 date") and "Traceback" not in err


def test_list_pages_through_everything_with_all(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """More memories than one page of the store's listing: --all lists each once, newest first; without it, the
    first --limit, and a note on stderr that there are more."""
    source = tmp_path / "many.jsonl"
    records = [
        {"content": f"Note {i}: day {i} of the log.", "occurred_at": f"2025-01-01T00:{i // 60:02d}:{i % 60:02d}Z",
         "session": "log" if i % 2 else "other"}
        for i in range(230)
    ]  # fmt: skip
    source.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    run(capsys, "import", str(source))
    out, _ = run(capsys, "list", "--all", "--json")
    listed = jsonl(out)
    assert [r["content"] for r in listed] == [r["content"] for r in records[::-1]]
    out, err = run(capsys, "list", "--limit", "3")
    assert len(out.splitlines()) == 4 and "Note 229" in out.splitlines()[1] and "the next page: --cursor c1." in err
    out, _ = run(capsys, "list", "--session", "log", "--all", "--json")
    assert len(jsonl(out)) == 115 and {r["session"] for r in jsonl(out)} == {"log"}


def test_forget_by_id(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = remember(capsys, "Forget me.")
    two = remember(capsys, "Keep me.", "--namespace", "work")
    out, err = run(capsys, "forget", one, "f" * 32, status=1)  # one unknown id: status 1, the other forgotten
    assert out.strip() == f"forgot {one}" and err.strip() == f"memserver: no memory {'f' * 32} in namespace default"
    out, _ = run(capsys, "forget", two, "--json", status=1)  # in another namespace
    assert jsonl(out) == [{"id": two, "deleted": False}]
    out, _ = run(capsys, "forget", two, "--namespace", "work", "--json")
    assert jsonl(out) == [{"id": two, "deleted": True}]


def test_bulk_forget_shows_the_count_and_a_sample_and_needs_yes_without_a_terminal(
    data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for i in range(8):
        remember(capsys, f"Draft {i} of the toast.", "--session", "wedding")
    keep = remember(capsys, "The toast is final.", "--session", "final")
    monkeypatch.setattr(sys, "stdin", open(os.devnull))  # noqa: SIM115 (no terminal)
    out, err = run(capsys, "forget", "--session", "wedding", status=1)
    assert out.splitlines()[0] == "8 memories of session wedding in namespace default:"
    assert len(out.splitlines()) == 1 + 1 + 5 + 1 and out.splitlines()[-1] == "... and 3 more"
    assert "stdin is not a terminal; add --yes" in err
    out, _ = run(capsys, "list", "--all", "--json")
    assert len(jsonl(out)) == 9  # nothing was forgotten
    out, _ = run(capsys, "forget", "--session", "wedding", "--yes")
    assert out.splitlines()[-1] == "forgot 8 memories"
    out, _ = run(capsys, "list", "--all", "--json")
    assert [r["id"] for r in jsonl(out)] == [keep]
    out, _ = run(capsys, "forget", "--tag", "nothing-has-it", "--yes", "--json")
    assert jsonl(out) == [{"matched": 0, "forgotten": 0}]
    _, err = run(capsys, "forget", status=1)
    assert "give the ids to forget, or --tag, --session, --speaker, --source, --before or --namespace" in err


def test_forget_a_whole_namespace(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for i in range(3):
        remember(capsys, f"Project X fact {i}.", "--namespace", "project-x")
    remember(capsys, "Unrelated default fact.")
    out, _ = run(capsys, "forget", "--namespace", "project-x", "--yes", "--json")
    assert jsonl(out) == [{"matched": 3, "forgotten": 3}]
    out, _ = run(capsys, "list", "--json")
    assert [r["content"] for r in jsonl(out)] == ["Unrelated default fact."]


@pytest.mark.parametrize(("answer", "forgotten"), [("y", True), ("n", False)])
def test_bulk_forget_asks_on_a_terminal(tmp_path: Path, answer: str, forgotten: bool) -> None:
    """At a terminal, forget --tag asks 'Forget these N memories? [y/N]' and does what the answer says."""
    env = {**os.environ, "MCP_MEMORY_PATH": str(tmp_path / "data")}
    for i in range(2):
        subprocess.run(
            [sys.executable, "-m", "memserver", "remember", f"Old password hint {i}.", "--tag", "secret"],
            env=env, cwd=ROOT, check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    primary, secondary = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "memserver", "forget", "--tag", "secret"],
        stdin=secondary, stdout=secondary, stderr=secondary, env=env, cwd=ROOT,
    )  # fmt: skip
    os.close(secondary)
    seen = read_until(primary, b"[y/N] ")
    assert b"2 memories tagged secret in namespace default:" in seen and b"Forget these 2 memories? [y/N] " in seen
    os.write(primary, answer.encode() + b"\n")
    rest = read_until(primary, b"\n", after=b"[y/N] ", everything=True)
    assert process.wait(60) == (0 if forgotten else 1)
    os.close(primary)
    assert (b"forgot 2 memories" in rest) is forgotten and (b"nothing forgotten" in rest) is not forgotten


def read_until(fd: int, marker: bytes, *, after: bytes = b"", everything: bool = False) -> bytes:
    """What the pseudo-terminal shows until `marker` (or, with `everything`, until the process closes it);
    bounded by a deadline, never a fixed sleep."""
    seen = b""
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        ready, _, _ = select.select([fd], [], [], 1)
        if not ready:
            continue
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # the other side closed (Linux: EIO)
            return seen
        if not chunk:
            return seen
        seen += chunk
        if not everything and marker in seen:
            return seen
    raise AssertionError(f"no {marker!r} on the terminal; it showed {seen!r}")
