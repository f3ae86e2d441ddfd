"""benchmarks/kill_import.py end to end at 3,000 records (the 100k run is by hand: benchmarks/README.md)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="SIGKILL")]


def test_the_kill_import_benchmark_kills_reopens_and_runs_again(tmp_path: Path) -> None:
    out = tmp_path / "kill_import.json"
    args = ["--records", "3000", "--dir", str(tmp_path), "--out", str(out)]
    run = subprocess.run(
        [sys.executable, "-m", "benchmarks.kill_import", *args], capture_output=True, text=True, timeout=300, cwd=ROOT
    )
    assert run.returncode == 0, run.stderr[-2000:]
    assert "killed before batch 2" in run.stdout
    result = json.loads(out.read_text())
    assert result["ok"] and result["killed"]["killed"]
    assert result["reopened"]["count"] == 1000 and result["final"]["count"] == 3000
    assert result["again"]["said"] == "imported 2000 new memories"
