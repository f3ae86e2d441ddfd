"""Each benchmark script runs end to end in its --quick mode (the full runs stay outside pytest)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_embed_benchmark_quick(real_embedder, tmp_path):
    """benchmarks/embed.py --quick prints its table and writes the JSON result."""
    output = tmp_path / "embed.json"
    run = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "embed.py"), "--quick", "--output", str(output)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert run.returncode == 0, run.stderr
    assert "query median (ms)" in run.stdout
    result = json.loads(output.read_text())
    assert set(result["query"]) == {"bare", "embedder"}
    assert result["load"]["process_start_to_first_embedding_s"] > 0
