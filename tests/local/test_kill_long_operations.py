"""SIGKILL inside every long operation of the local store (issue 27 item 3): a compaction, an import, a backup.

A child process runs the operation on a copy of one store and kills itself at its N-th durable step (each write,
sync, rename and unlink through the store's file layer: tests/support/kill_points.py), for points spread over the
whole operation. Then the store is reopened here: every acknowledged memory is there and nothing forgotten came
back, nothing half-applied shows (an import batch is all there or not at all), the operation simply runs again, and
no file is left over that a clean run would not leave."""

from __future__ import annotations

import json
import re
import shutil
import uuid
from pathlib import Path
from typing import Any

from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder
from tests.support.kill_points import count_steps, run

POINTS = 14  # kill points per operation, spread evenly over its steps (first and last included)


def _open(root: Path) -> MemoryStore:
    return MemoryStore(root, "test", embedder=FakeEmbedder())


def _made(root: Path) -> None:
    """300 memories (enough for checkpoints), 60 forgotten, 10 replaced by a newer version."""
    with _open(root) as s:
        added = s.add_many([{"content": f"fact {i} about item{i}", "tags": [f"t{i % 3}"]} for i in range(300)])
        s.delete_many([m.id for m in added[:60]])
        for m in added[60:70]:
            s.add(f"{m.content}, corrected", replaces=m.id)


def _state(s: MemoryStore) -> dict[str, Any]:
    """What a client can see: every memory, the count, the newest ones, a search in each mode."""
    return {
        "export": sorted((m["id"], m["content"]) for m in s.export()),
        "count": s.stats()["count"],
        "recent": [m.id for m in s.list_recent(limit=20)],
        **{
            mode: [h.memory.id for h in s.search(query="fact about item12", limit=10, mode=mode)]
            for mode in ("hybrid", "semantic", "keyword")
        },
    }


def _copy(template: Path, root: Path) -> Path:
    shutil.copytree(template, root)
    return root


def _kinds(folder: Path) -> list[str]:
    """The folder's file names with their hex runs blanked: what kinds of file, how many of each."""
    return sorted(re.sub(r"[0-9a-f]{8,}", "X", p.name) for p in folder.iterdir())


def _points(steps: int) -> list[int]:
    if steps <= POINTS:
        return list(range(1, steps + 1))
    return sorted({1 + round(i * (steps - 1) / (POINTS - 1)) for i in range(POINTS)})


def test_a_kill_at_any_step_of_a_compaction_loses_nothing_and_it_runs_again(tmp_path: Path) -> None:
    template = tmp_path / "template"
    _made(template)
    clean = tmp_path / "clean"
    shutil.copytree(template, clean)
    with _open(clean) as s:
        s.compact()
        expected = _state(s)
    steps = count_steps(_copy(template, tmp_path / "count"), "compact()")
    assert steps >= 5, steps
    for n in _points(steps):
        root = _copy(template, tmp_path / f"kill-{n}")
        killed, said = run(root, "compact()", n)
        assert killed, said
        with _open(root) as s:
            assert _state(s) == expected, said
            s.compact()
            assert _state(s) == expected, said
        assert _kinds(root / "test") == _kinds(clean / "test"), said


def test_a_kill_at_any_step_of_an_import_leaves_whole_batches_and_it_runs_again(tmp_path: Path) -> None:
    template = tmp_path / "template"
    _made(template)
    with _open(template) as s:
        before = s.stats()["count"]
        known = {m["id"] for m in s.export()}
    records = [{"id": uuid.uuid4().hex, "content": f"imported note {i} on the ferry timetable"} for i in range(3500)]
    source = tmp_path / "records.json"
    source.write_text(json.dumps(records))
    expression = "import_(json.load(open(args)))"
    steps = count_steps(_copy(template, tmp_path / "count"), expression, str(source))
    for n in _points(steps):
        root = _copy(template, tmp_path / f"kill-{n}")
        killed, said = run(root, expression, n, str(source))
        assert killed, said
        with _open(root) as s:
            landed = s.stats()["count"] - before
            assert landed in (0, 1000, 2000, 3000, 3500), (landed, said)  # whole batches of 1,000, or all
            assert s.import_(records) == len(records) - landed, said  # runs again: the rest, nothing twice
            ids = [m["id"] for m in s.export()]
            assert len(ids) == len(set(ids)), said
            assert set(ids) == known | {r["id"] for r in records}, said
