"""The care commands through the real CLI (memserver/cli/care.py) on a temporary data directory with the real store
and model: import --from with its summary and its one-line errors, overview, doctor (advice, exit 1 on a failure),
backup with --keep, restore (refusing without a terminal, replacing with --yes); on PostgreSQL backup gives the
pg_dump recipe."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memserver.cli.command import main
from memserver.embedding import reference

IMPORTS = Path(__file__).resolve().parents[1] / "data" / "imports"


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MCP_MEMORY_PATH", str(tmp_path / "data"))
    monkeypatch.delenv("MEMSERVER_DATABASE_URL", raising=False)
    return tmp_path / "data"


def run(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> tuple[str, str]:
    assert main(list(argv)) == status
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_import_from_prints_a_summary_and_stores_nothing_the_second_time(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = str(IMPORTS / "chatgpt_conversations.json")
    out, err = run(capsys, "import", "--from", "chatgpt", path, "--speaker", "Sam")
    assert out.splitlines() == [
        "stored 3, duplicates 0, skipped 2",
        "  skipped 1: hidden from the conversation",
        "  skipped 1: tool message",
    ]
    assert "memories/s" in err and "[" not in err  # no progress bar: stderr is not a terminal
    out, _ = run(capsys, "import", "--from", "chatgpt", path)
    assert out.splitlines()[0] == "stored 0, duplicates 3, skipped 2"
    out, _ = run(capsys, "recall", "Casa da Ribeira", "--json", "--limit", "1")
    hit = json.loads(out.splitlines()[0])
    assert hit["content"] == "The hotel is Casa da Ribeira." and hit["speaker"] == "Sam"


def test_a_malformed_import_is_one_line_on_stderr_and_nothing_stored(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = IMPORTS / "broken" / "mcp_bad_line.jsonl"
    out, err = run(capsys, "import", "--from", "mcp-memory", str(path), status=1)
    assert out == "" and err.count("\n") == 1
    assert err.startswith(f"memserver: error: {path}: line 2 column 78: not JSON")
    out, _ = run(capsys, "import", "--from", "mcp-memory", str(path), "--keep-going")
    assert out.startswith("stored 2, duplicates 0, skipped 1")


def test_overview_and_doctor(data_dir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any) -> None:
    run(capsys, "import", "--from", "claude", str(IMPORTS / "claude_conversations.json"))
    out, _ = run(capsys, "overview")
    assert out.splitlines()[0] == "namespace default: 4 memories, 2 sessions"
    assert "by speaker: Claude 2, user 2" in out and "by month: 2025-04 2, 2025-03 2" in out
    assert "by kind: note 4\n" in out and "pinned" not in out
    stored, _ = run(capsys, "remember", "Ask Lena before changing the boiler settings", "--kind", "instruction")
    memory_id = stored.split()[1]
    pinned, _ = run(capsys, "pin", memory_id)
    out, _ = run(capsys, "overview")
    assert "by kind: note 4, instruction 1\n" in out
    assert f"pinned (1):\n  {pinned.split()[1][:8]}  Ask Lena before changing the boiler settings\n" in out
    out, _ = run(capsys, "doctor")
    lines = out.splitlines()
    assert lines[-1] == "status: ok" and any(line.startswith("ok    model") for line in lines)
    assert any(line.startswith("ok    index       5 current memories") for line in lines)
    # vectors that are not the model's: the model check fails, with advice, and doctor exits 1
    items = reference.reference_items()
    wrong = [{**item, "embedding": list(reversed(item["embedding"]))} for item in items]
    monkeypatch.setattr(reference, "reference_items", lambda path=None: wrong)
    monkeypatch.setattr(reference, "_checked", type(reference._checked)())
    out, _ = run(capsys, "doctor", status=1)
    assert "FAIL  model" in out and "-> the model's vectors differ" in out and out.endswith("status: failure\n")


def test_backup_keep_and_restore(data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(capsys, "remember", "The spare key is under the blue pot.")
    dest = tmp_path / "backups"
    for _ in range(3):
        out, _ = run(capsys, "backup", str(dest), "--keep", "2")
        assert out.startswith("backed up 1 memories to ") and "lock held" in out
    assert "removed the older backup" in out and len(list(dest.iterdir())) == 2
    run(capsys, "remember", "A memory the backup does not have.")
    _, err = run(capsys, "restore", str(dest), status=1)  # stdin is not a terminal here
    assert "holds a store; not replacing it without confirmation: add --yes" in err
    out, _ = run(capsys, "restore", str(dest), "--yes")
    assert out.startswith("restored 1 memories from ")
    out, _ = run(capsys, "recall", "spare key", "--json")
    assert [json.loads(line)["content"] for line in out.splitlines()] == ["The spare key is under the blue pot."]
    out, _ = run(capsys, "restore", str(dest), "--data-dir", str(tmp_path / "fresh"))
    assert out.startswith("restored 1 memories") and str(tmp_path / "fresh") in out


def test_backup_on_postgresql_prints_the_pg_dump_recipe(
    postgres: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = postgres.database("care_cli")
    out, err = run(capsys, "backup", str(tmp_path / "b"), "--database", url, status=1)
    assert out == "" and "pg_dump --format=custom" in err and "pg_restore" in err
    assert not (tmp_path / "b").exists()
    health = json.loads(run(capsys, "doctor", "--json", "--database", url)[0])
    assert health["engine"] == "postgresql" and health["reachable"] is True
