"""The lifecycle commands (issue 24) through the real CLI: remember --kind --due, pin, archive, done, and their
undoing, each a new version printed with its id; an unknown id is one line on stderr and exit status 1."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from memserver.cli.command import main


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MCP_MEMORY_PATH", str(tmp_path / "data"))
    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    return tmp_path / "data"


def run(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> tuple[str, str]:
    assert main(list(argv)) == status
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_remember_a_task_then_pin_done_and_archive(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "remember", "Book the dentist", "--kind", "task", "--due", "2026-12-09", "--json")
    first = json.loads(out)["id"]
    out, _ = run(capsys, "pin", first[:8], "--json")
    pinned = json.loads(out)
    assert pinned["status"] == "changed" and pinned["replaces"] == first
    out, _ = run(capsys, "pin", pinned["id"])
    assert "already" in out
    out, _ = run(capsys, "done", pinned["id"], "--json")
    done = json.loads(out)["id"]
    out, _ = run(capsys, "show", done, "--json")
    shown = json.loads(out)
    assert (shown["kind"], shown["due"], shown["pinned"], shown["done"]) == ("task", "2026-12-09", True, True)
    out, _ = run(capsys, "archive", done)
    assert out.startswith("stored ")
    _, err = run(capsys, "unarchive", "0" * 32, status=1)
    assert len(err.strip().splitlines()) == 1


def test_a_bad_kind_is_one_line_and_nothing_stored(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, err = run(capsys, "remember", "Something", "--kind", "chore", status=1)
    assert "kind must be one of" in err and len(err.strip().splitlines()) == 1


def test_recall_and_list_by_kind_and_archived(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "remember", "Ana prefers window seats", "--kind", "preference", "--json")
    preference = json.loads(out)["id"]
    out, _ = run(capsys, "remember", "Ana flew to Lisbon", "--kind", "event", "--json")
    event = json.loads(out)["id"]
    out, _ = run(capsys, "list", "--kind", "preference", "--json")
    assert [json.loads(line)["id"] for line in out.splitlines()] == [preference]
    out, _ = run(capsys, "archive", event, "--json")
    archived = json.loads(out)["id"]
    out, _ = run(capsys, "recall", "Ana", "--json")
    assert archived not in out
    out, _ = run(capsys, "recall", "Ana", "--kind", "event", "--include-archived", "--json")
    assert [json.loads(line)["id"] for line in out.splitlines() if "id" in json.loads(line)] == [archived]
