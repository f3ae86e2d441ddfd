"""The store commands of the CLI: stats, export, import, compact; errors are one line on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memserver.cli.command import main


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MCP_MEMORY_PATH", str(tmp_path / "data"))
    return tmp_path / "data"


def test_export_import_round_trip_keeps_ids_and_skips_what_is_known(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An export imported into another collection brings the same memories; importing it twice adds nothing."""
    source = tmp_path / "in.jsonl"
    source.write_text(
        json.dumps({"content": "The staging database lives on db-stage-02.", "tags": ["infra"]})
        + "\n\n"
        + json.dumps({"content": "Maria prefers morning meetings."})
        + "\n",
        encoding="utf-8",
    )
    assert main(["import", str(source)]) == 0
    assert "imported 2 new memories" in capsys.readouterr().err

    backup = tmp_path / "backup.jsonl"
    assert main(["export", "--vectors", "-o", str(backup)]) == 0
    exported = [json.loads(line) for line in backup.read_text(encoding="utf-8").splitlines()]
    assert [r["content"] for r in exported] == [
        "The staging database lives on db-stage-02.",
        "Maria prefers morning meetings.",
    ]
    assert exported[0]["tags"] == ["infra"] and len(exported[0]["vector"]) == 384

    assert main(["import", "--collection", "copy", str(backup)]) == 0
    assert main(["import", "--collection", "copy", str(backup)]) == 0
    assert "imported 0 new memories" in capsys.readouterr().err
    assert main(["export", "--collection", "copy"]) == 0
    copied = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["id"] for r in copied] == [r["id"] for r in exported]

    assert main(["stats", "--collection", "copy", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 2


def test_import_of_a_bad_line_is_one_error_line_and_writes_nothing(
    data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A line that is not JSON names its line number; no traceback, exit status 1, nothing stored."""
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"content": "fine"}\nnot json\n', encoding="utf-8")
    assert main(["import", str(bad)]) == 1
    err = capsys.readouterr().err
    assert "line 2 of the import is not JSON" in err and "Traceback" not in err
    assert main(["stats", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["count"] == 0


def test_compact_reports_and_keeps_live_memories(data_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """compact prints its report as JSON and the memories survive it."""
    from memserver.local.store import MemoryStore

    with MemoryStore() as store:
        keep = store.add("Keep this one.")
        gone = store.add("Delete this one.")
        assert store.delete(gone.id)
    assert main(["compact"]) == 0
    json.loads(capsys.readouterr().out)
    with MemoryStore() as store:
        assert store.get(keep.id) is not None and store.get(gone.id) is None
