"""`memserver consolidate` through the real CLI (memserver/cli/consolidate.py) on a temporary data directory with
the real store and model: --dry-run lists and writes nothing, y/n/q at a terminal applies what was confirmed,
--yes applies all, --json, and no terminal without --yes is one line on stderr."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from memserver.cli.command import main

RECORDS = [
    {"content": "The garden tomatoes need water every morning before the heat."},
    {"content": "The garden tomatoes need water every single morning before the heat arrives."},
    {"content": "I live in Oslo.", "speaker": "Ana", "occurred_at": "2025-02-01"},
    {"content": "I live in Lisbon now.", "speaker": "Ana", "occurred_at": "2025-07-01"},
    {"content": "The invoice for the roof repair is due on Friday."},
]


class Terminal(io.StringIO):
    """stdin at a terminal, with the answers already typed."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def store_with_proposals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> Path:
    monkeypatch.setenv("MCP_MEMORY_PATH", str(tmp_path / "data"))
    monkeypatch.delenv("MEMSERVER_DATABASE_URL", raising=False)
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
    assert main(["import", str(path)]) == 0
    capsys.readouterr()
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> tuple[str, str]:
    assert main(list(argv)) == status
    captured = capsys.readouterr()
    return captured.out, captured.err


def current_contents(capsys: pytest.CaptureFixture[str]) -> list[str]:
    out, _ = run(capsys, "export")
    return sorted(
        r["content"] for r in map(json.loads, out.splitlines()) if not r.get("replaced_by") and not r.get("archived")
    )


def test_dry_run_lists_both_proposals_with_evidence_and_writes_nothing(
    store_with_proposals: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = run(capsys, "consolidate", "--dry-run")
    assert "[1/2] merge 2 near-duplicates" in out and "shared words: " in out and "tomatoes" in out
    assert "[2/2] archive a stale statement of Ana" in out and "was oslo, now lisbon; update words: now" in out
    assert out.rstrip().endswith("2 proposals; nothing applied (--dry-run)")
    assert len(current_contents(capsys)) == 5


def test_at_a_terminal_each_proposal_is_applied_only_on_yes(
    store_with_proposals: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", Terminal("n\ny\n"))
    out, err = run(capsys, "consolidate")
    assert err.count("apply? [y/n/q]") == 2
    assert "applied 1 of 2 proposals, skipped 1" in out
    contents = current_contents(capsys)
    assert "I live in Oslo." not in contents and len(contents) == 4  # archived, the duplicates left as they were
    monkeypatch.setattr("sys.stdin", Terminal("q\n"))
    out, err = run(capsys, "consolidate")
    assert "[1/1] merge" in out and "applied 0 of 1 proposals, skipped 0" in out


def test_yes_applies_all_and_json_says_what_was_written(
    store_with_proposals: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("sys.stdin", io.StringIO(""))
    _, err = run(capsys, "consolidate", status=1)
    assert "not applying without a terminal" in err and "--yes" in err
    out, _ = run(capsys, "consolidate", "--json")
    assert [p["action"] for p in json.loads(out)["proposals"]] == ["merge", "archive"]
    out, _ = run(capsys, "consolidate", "--yes", "--json")
    result = json.loads(out)
    assert sorted(len(ids) for ids in result["applied"].values()) == [1, 2]
    assert current_contents(capsys) == [
        "I live in Lisbon now.",
        "The garden tomatoes need water every single morning before the heat arrives.",
        "The invoice for the roof repair is due on Friday.",
    ]
    out, _ = run(capsys, "consolidate", "--dry-run")
    assert out.strip() == "nothing to consolidate"


def test_a_terminal_sees_the_scans_progress(
    store_with_proposals: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    err = Terminal()
    monkeypatch.setattr("sys.stderr", err)
    assert main(["consolidate", "--dry-run"]) == 0
    drawn = err.getvalue()
    assert "looking for duplicates and stale statements [" in drawn and "5/5" in drawn
