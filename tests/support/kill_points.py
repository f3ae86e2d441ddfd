"""SIGKILL a child process at a named point: the N-th call of a callable, named by a label, not a byte position.

A label is `module:attribute.path`, the callable as the code under test looks it up:
`memserver.durable:FileLayer.replace` (every replace through any file layer),
`memserver.local.compaction:Compaction.switch`, or a function imported by name into the module that calls it
(`memserver.local.checkpoint_job:write_new_file`); several, comma-separated, share one count. The child runs
`script` with `python -c`, armed from the environment by `arm_from_env` (which `run` puts first in the script, with
this module as `kill_point`); it counts calls only once the script calls `kill_point.start()` (so that setting the
store up does not count) until `kill_point.stop()`, or from the start with `started=True`. With `at=None` it only
counts, and `run` returns the calls counted, so that a test can then kill at each of them. The child imports the
real memserver but embeds with tests.support.fakes.FakeEmbedder (the model is never loaded:
`memserver.embedding.embedder.Embedder` is patched), so a CLI command runs as a user runs it.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import inspect
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from tests.support.fakes import FakeEmbedder

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from memserver.contract.backend import MemoryBackend

ROOT = Path(__file__).resolve().parents[2]
_LABEL, _AT, _WHEN, _COUNTS, _STARTED = (
    f"MEMSERVER_TEST_KILL_{k}" for k in ("LABEL", "AT", "WHEN", "COUNTS", "STARTED")
)
_state = {"calls": 0, "counting": False}
PRELUDE = "import tests.support.kill_points as kill_point\nkill_point.arm_from_env()\n"


@dataclass
class Run:
    """How a child ended: its return code, output, and (counting runs) the calls of the label it made."""

    returncode: int
    stdout: str
    stderr: str
    calls: int

    @property
    def killed(self) -> bool:
        return self.returncode == -signal.SIGKILL

    def lines(self, prefix: str) -> list[str]:
        """The words after `prefix` on the stdout lines starting with it (acknowledgements the script printed)."""
        return [line[len(prefix) :].strip() for line in self.stdout.splitlines() if line.startswith(prefix)]


def run(
    script: str,
    *args: str,
    label: str,
    at: int | None,
    when: str = "before",
    started: bool = False,
    env: dict[str, str] | None = None,
    timeout: float = 300,
) -> Run:
    """Run `script` in a child that kills itself on the `at`-th call of `label` (before or after the call runs);
    at=None: run it through, counting the calls."""
    counts = None
    child_env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {}), _LABEL: label, _WHEN: when}
    child_env[_AT] = "" if at is None else str(at)
    child_env[_STARTED] = "1" if started else ""
    if at is None:
        fd, counts = tempfile.mkstemp(prefix="kill-counts-")
        os.close(fd)
        child_env[_COUNTS] = counts
    try:
        done = subprocess.run(
            [sys.executable, "-c", PRELUDE + script, *args],
            capture_output=True,
            text=True,
            env=child_env,
            cwd=ROOT,
            timeout=timeout,
        )
        calls = int(Path(counts).read_text() or 0) if counts else 0
    finally:
        if counts:
            os.unlink(counts)
    return Run(done.returncode, done.stdout, done.stderr, calls)


def points(calls: int) -> list[tuple[int, str]]:
    """Where a test kills, given the calls a counting run made: before each call, and after the last (the
    operation done, its process not yet exited); each as `run`'s (at, when)."""
    return [(n, "before") for n in range(1, calls + 1)] + [(calls, "after")]


class Kill(NamedTuple):
    """One kill of `kills`: the folder the child ran in, how it ended, and where it was killed (for messages)."""

    folder: Path
    run: Run
    where: str


def kills(
    calls: int, root: Path, what: str, run_at: Callable[[Path, int, str], Run], template: Path | None = None
) -> Iterator[Kill]:
    """The loop every kill test runs: at each of `points(calls)`, a fresh folder under `root` (a copy of `template`
    if one is given), the child `run_at(folder, at, when)` asserted killed there, handed to the test's checks; the
    folder is removed once they pass (a failing check leaves it to look at)."""
    for n, when in points(calls):
        where = f"killed {when} {what} {n} of {calls}"
        folder = root / f"{n}-{when}"
        if template is not None:
            shutil.copytree(template, folder)
        killed = run_at(folder, n, when)
        assert killed.killed, f"{where}: not killed ({killed.returncode}) {killed.stderr[-2000:]}"
        yield Kill(folder, killed, where)
        shutil.rmtree(folder, ignore_errors=True)


def start() -> None:
    """In the child: count the label's calls from now on (the operation under test begins)."""
    _state["counting"] = True


def stop() -> None:
    """In the child: stop counting (the operation under test is over; closing the store does not count)."""
    _state["counting"] = False


def arm_from_env() -> None:
    """In the child: patch the embedder to the fake and wrap the label's callables (see the module docstring)."""
    import memserver.embedding.embedder as embedder

    embedder.Embedder = lambda *a, **k: FakeEmbedder()  # type: ignore[misc,assignment]
    label = os.environ[_LABEL]
    at = int(os.environ[_AT]) if os.environ.get(_AT) else None
    after = os.environ.get(_WHEN) == "after"
    _state["counting"] = bool(os.environ.get(_STARTED))
    counts = os.environ.get(_COUNTS)
    if counts:
        atexit.register(lambda: Path(counts).write_text(str(_state["calls"])))
    for one in label.split(","):  # several labels: one count over all of their calls
        _wrap(one.strip(), at, after)


def _wrap(label: str, at: int | None, after: bool) -> None:
    module_name, _, path = label.partition(":")
    owner: Any = importlib.import_module(module_name)
    *parents, name = path.split(".")
    for part in parents:
        owner = getattr(owner, part)
    raw = inspect.getattr_static(owner, name)
    kind = type(raw) if isinstance(raw, (staticmethod, classmethod)) else None
    original = raw.__func__ if kind else raw

    @functools.wraps(original)
    def wrapped(*a: Any, **k: Any) -> Any:
        if not _state["counting"]:
            return original(*a, **k)
        _state["calls"] += 1
        hit = at is not None and _state["calls"] == at
        if hit and not after:
            os.kill(os.getpid(), signal.SIGKILL)
        try:
            return original(*a, **k)
        finally:
            if hit:  # (also when the call raised: a caller may have expected that)
                os.kill(os.getpid(), signal.SIGKILL)

    setattr(owner, name, kind(wrapped) if kind else wrapped)


def stale_files(folder: Path) -> list[str]:
    """The files of a closed store's folder that nothing in force names: anything but the journal, the lock, the
    current generation's vector file and snapshot, and each checkpoint's meta with the one data file it names.
    A crash may leave such files; the next open (or the operation run again) must remove them, or they grow."""
    generation = json.loads((folder / "journal.jsonl").read_text().split("\n", 1)[0])["generation"]
    keep = {"journal.jsonl", "lock", f"vectors-{generation}.f32", f"meta-{generation}.snap"}
    for meta in ("index.json", "keyword.json"):
        if (folder / meta).exists():
            keep |= {meta, str(json.loads((folder / meta).read_text())["file"])}
    return sorted(p.name for p in folder.iterdir() if p.name not in keep)


def check_store(store: MemoryBackend, present: set[str], gone: set[str]) -> None:
    """After a kill: every acknowledged memory there, none acknowledged gone, and export, count, the keyword index,
    list_recent and search agreeing on exactly the memories stored (nothing half-applied visible)."""
    exported = {m["id"] for m in store.export()}
    assert present <= exported, f"acknowledged memories lost: {sorted(present - exported)[:3]}"
    assert not exported & gone, f"forgotten memories back: {sorted(exported & gone)[:3]}"
    stats = store.stats()
    assert stats["count"] == len(exported)
    if "keyword_index" in stats:  # (the local store's; a PostgreSQL test checks the derived tables in SQL)
        assert stats["keyword_index"]["documents"] == len(exported)
    cap = min(len(exported), 1000)  # (one call's most results)
    recent = {m.id for m in store.list_recent(limit=max(cap, 1))}
    assert len(recent) == cap and recent <= exported
    # Each stored vector is its text's (the fake embedder hashes words into 384 buckets, so among thousands of
    # memories many share a vector and an approximate index need not rank a memory's own text first).
    records = list(store.export(include_vectors=True))
    expected = FakeEmbedder().embed([r["content"] for r in records])
    for record, vector in zip(records, expected, strict=True):
        assert np.allclose(record["vector"], vector, atol=1e-5), f"{record['id']}: not its text's vector"
    for mid in sorted(present)[:: max(1, len(present) // 5)]:
        memory = store.get(mid)
        assert memory is not None
        assert mid in {h.memory.id for h in store.search(memory.content, limit=3, mode="keyword")}
        hits = store.search(memory.content, limit=3, mode="semantic")
        assert hits and {h.memory.id for h in hits} <= exported - gone
    found = {h.memory.id for h in store.search("fact about item", limit=1000, mode="keyword")}
    assert not found & gone and found <= exported
