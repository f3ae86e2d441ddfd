"""The package type-checks: mypy --strict on memserver/ (settings and the modules still pending in pyproject.toml)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_mypy_strict_passes_on_the_package() -> None:
    """`mypy` (strict, [tool.mypy] in pyproject.toml) finds no error in memserver/."""
    run = subprocess.run([sys.executable, "-m", "mypy"], cwd=ROOT, capture_output=True, text=True)
    assert run.returncode == 0, run.stdout + run.stderr
