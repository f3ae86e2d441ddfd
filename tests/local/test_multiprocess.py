"""Eight processes writing and searching one local store (issue 13, item 6), at a small size.

benchmarks/multiprocess.py runs the workers; its docstring defines what "each sees the others' writes on its next
call" means (every write another process had acknowledged before a call began is found by that call: get, and a
keyword search for its unique token; no acknowledged delete is found). The full size (8 x 2,500) is the benchmark.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="flock and fork-heavy")]


def test_eight_processes_lose_nothing_and_see_each_others_writes(tmp_path: Path) -> None:
    """8 x 100 writes (adds, one in ten a delete) with searches: 0 lost, 0 resurrected, 0 stale reads."""
    out = tmp_path / "mp.json"
    run = subprocess.run(
        [
            *(sys.executable, "-m", "benchmarks.multiprocess", "--procs", "8", "--writes", "100"),
            *("--out", str(out), "--dir", str(tmp_path)),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    # the workers inherit the runner's stderr: a failing run shows it before anything reads the (absent) results
    assert run.returncode == 0 and out.exists(), (
        f"exit {run.returncode}; stderr of the runner and its workers:\n" + (run.stderr[-4000:])
    )
    result = json.loads(out.read_text())
    assert not result.get("stale_examples") or result["stale_reads"] == 0, result["stale_examples"]
    assert result["writes"] == 800 and result["acknowledged_deletes"] == 80
    assert result["lost"] == result["resurrected"] == result["stale_reads"] == 0
    assert result["visibility_checks"] == 8 * 100 * 7
    assert result["count_after"] == result["count_expected"] == 720 - 80
