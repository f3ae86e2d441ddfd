"""The shell blocks the README and docs/ mark runnable run as pasted (docs/development.md, "Runnable blocks").

A block marked `<!-- runnable -->` on the line before its fence runs in bash (`set -euo pipefail`) from the
checkout, with a fresh HOME and data directory (a fresh store; the checkout's model cache and uv environment are
reused), within BLOCK_TIMEOUT_S. A command it starts in the background (`... &`) is stopped with the block's
process group afterwards. Only the blocks that matter are marked: each command loads the model again.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MARKER = "<!-- runnable -->"
BLOCK_TIMEOUT_S = 180
_BLOCK = re.compile(r"^" + re.escape(MARKER) + r"\n```[a-z]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_FENCE_AFTER_MARKER = re.compile(r"^" + re.escape(MARKER) + r"\n```", re.MULTILINE)


@dataclass(frozen=True)
class Block:
    doc: str  # path from the repository root
    line: int
    script: str

    def __str__(self) -> str:
        return f"{self.doc}:{self.line}"


def runnable_blocks() -> list[Block]:
    blocks = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        for m in _BLOCK.finditer(text):
            blocks.append(Block(str(path.relative_to(ROOT)), text.count("\n", 0, m.start()) + 1, m.group(1)))
    return blocks


def test_every_marker_is_followed_by_a_block() -> None:
    """A marker not directly above a fence would silently run nothing; and the marked blocks exist."""
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        text = path.read_text()
        markers = re.findall(r"^" + re.escape(MARKER) + r"$", text, re.MULTILINE)  # a marker line, not prose
        assert len(markers) == len(_FENCE_AFTER_MARKER.findall(text)), path
    assert {b.doc for b in runnable_blocks()} >= {"README.md", "docs/scale-out.md"}


@pytest.mark.parametrize("block", runnable_blocks(), ids=str)
def test_a_runnable_block_runs_as_pasted(block: Block, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_MEMORY_", "MEMSERVER_"))}
    env |= {"HOME": str(home), "MCP_MEMORY_PATH": str(tmp_path / "data"), "XDG_CACHE_HOME": str(home / ".cache")}
    env |= {"MEMSERVER_LOG_LEVEL": "WARNING"}
    script = "set -euo pipefail\n" + block.script
    run = subprocess.Popen(
        ["bash", "-c", script],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: what it started in the background is stopped with it
    )
    try:
        out, err = run.communicate(timeout=BLOCK_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        out, err = run.communicate()
        pytest.fail(f"{block} did not finish within {BLOCK_TIMEOUT_S} s\n{out}\n{err}")
    finally:
        with_children_stopped(run.pid)
        trial = home / ".cache" / "memserver" / "postgres-trial.json"
        if trial.exists():  # a PostgreSQL the block started and did not stop (it failed before its last line)
            subprocess.run(["uv", "run", "python", "examples/postgres_trial.py", "stop"], cwd=ROOT, env=env)
    assert run.returncode == 0, f"{block} failed ({run.returncode})\n--- stdout\n{out}\n--- stderr\n{err}"
    assert "Traceback" not in err, f"{block}\n{err}"


def with_children_stopped(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
