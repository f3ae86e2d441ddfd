"""Power loss, simulated, below the store: the journal, the lock and the checkpoint files (tests/powerloss/).

A workload of single adds, batches, deletes and checkpoints (keyword index, vector index with hnswlib's native
graph file, metadata snapshot) runs through a recording file layer; each crash state drawn from its log is opened
with the real Journal and checkpoint readers: every acknowledged line is there, no acknowledged delete is undone,
the repair of a torn tail is final, and a checkpoint whose save returned is the one in force (or a later one).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memserver.durable import make_dirs
from memserver.local import snapshot
from memserver.local.index import VectorIndex
from memserver.local.journal import JOURNAL_NAME, LOCK_NAME, FileLock, Journal
from memserver.local.keyword import KeywordDerivedIndex
from memserver.local.replay import AddRecord
from tests.powerloss.crashes import check_states
from tests.powerloss.recorder import PowerLossFiles

DIM = 8
GEN = "g"
WORDS = ["invoice", "staging", "password", "rotates", "monday", "ключ", "東京", "café", "naïve", "quartz", "zebra"]


@dataclass
class Step:
    """One call of the workload: what it wrote, and the log positions when it began and when it returned."""

    kind: str  # folder | journal | add | del | checkpoint
    start: int
    end: int
    records: list[dict[str, Any]] = field(default_factory=list)
    stamp: dict[str, Any] = field(default_factory=dict)
    live: int = 0
    payload: bytes = b""


def _content(rng: random.Random) -> str:
    """Text from a few words to ~3 kB, so that lines and batches straddle page boundaries."""
    n = rng.choice([3, 12, 60, 200, 400])
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _vectors(rng: random.Random, n: int) -> np.ndarray:
    v = np.array([[rng.gauss(0, 1) for _ in range(DIM)] for _ in range(n)], dtype=np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def run_workload(root: Path, seed: int, steps: int = 70) -> tuple[PowerLossFiles, list[Step]]:
    rng = random.Random(seed)
    files = PowerLossFiles(root)
    folder = root / "c"
    log: list[Step] = []

    def step(kind: str) -> Step:
        s = Step(kind, len(files.events), -1)
        log.append(s)
        return s

    s = step("folder")
    make_dirs(folder, files)
    s.end = len(files.events)
    lock = FileLock(folder / LOCK_NAME, files=files)
    s = step("journal")
    Journal.create(folder / JOURNAL_NAME, {"generation": GEN, "dim": DIM, "model": "m"}, files=files)
    s.end = len(files.events)
    journal = Journal(folder / JOURNAL_NAME, files=files)
    keyword = KeywordDerivedIndex(files=files)
    vector = VectorIndex(DIM, files=files)
    live: dict[str, AddRecord] = {}
    row = 0
    end = journal.header_end
    for i in range(steps):
        r = rng.random()
        if r < 0.75 or not live:
            n = 1 if r < 0.45 else rng.randint(2, 6)
            recs = [
                AddRecord(f"{seed:04x}{i:04x}{k:024x}", _content(rng), "2025-03-14T10:00:00+00:00", (), "", row + k)
                for k in range(n)
            ]
            row += n
            lines = [{"op": "add", **r._asdict(), "tags": list(r.tags)} for r in recs]
            s = step("add")
            s.records = lines
            end = journal.append(lines)
            s.end = len(files.events)
            vecs = _vectors(rng, n)
            keyword.add(recs, vecs)
            vector.add(recs, vecs)
            live.update((r.id, r) for r in recs)
        elif r < 0.88:
            gone = live.pop(rng.choice(sorted(live)))
            s = step("del")
            s.records = [{"op": "del", "id": gone.id, "at": "2025-03-14T11:00:00+00:00"}]
            end = journal.append(s.records)
            s.end = len(files.events)
            keyword.remove([gone])
            vector.remove([gone])
        else:
            stamp = {"generation": GEN, "offset": end, "count": len(live)}
            payload = "\n".join(sorted(live)).encode()
            s = step("checkpoint")
            s.stamp, s.live, s.payload = stamp, len(live), payload
            keyword.save(folder, stamp)
            vector.save(folder, stamp)
            snapshot.save(folder / f"meta-{GEN}.snap", stamp, payload, files=files)
            s.end = len(files.events)
    journal.close()
    lock.close()
    return files, log


def read_journal(path: Path) -> tuple[list[dict[str, Any]], int]:
    """Every good record (a torn tail set aside, as a writer does on open) and the end offset."""
    journal = Journal(path)
    try:
        records: list[dict[str, Any]] = []
        offset = journal.header_end
        while True:
            got = journal.read(offset)
            records += [rec for _, rec in got.entries]
            offset = got.end
            if got.done:
                break
        if got.size > offset:
            journal.set_aside_tail(offset)
        return records, offset
    finally:
        journal.close()


def check_crash_state(root: Path, point: int, log: list[Step]) -> None:
    acked = [s for s in log if s.end != -1 and s.end <= point]
    begun = [s for s in log if s.start < point]
    kinds = {s.kind for s in acked}
    folder = root / "c"
    if "folder" in kinds:
        assert folder.is_dir(), "the collection folder vanished after make_dirs returned"
    if "journal" not in kinds:
        return  # nothing was acknowledged yet: any state is fine
    path = folder / JOURNAL_NAME
    assert path.is_file(), "the journal vanished after Journal.create returned"
    records, end = read_journal(path)
    before = path.read_bytes()
    again, end2 = read_journal(path)
    assert (again, end2) == (records, end) and path.read_bytes() == before, "a second open changed the journal"
    live: dict[str, dict[str, Any]] = {}
    for rec in records:
        if rec["op"] == "add":
            live[rec["id"]] = {k: v for k, v in rec.items() if k != "crc"}
        else:
            live.pop(rec["id"], None)
    attempted = {r["id"]: r for s in begun if s.kind == "add" for r in s.records}
    deleted = {r["id"] for s in acked if s.kind == "del" for r in s.records}
    in_flight = {r["id"] for s in begun if s.kind == "del" and s not in acked for r in s.records}
    for s in acked:
        if s.kind == "add":
            for r in s.records:
                if r["id"] not in deleted | in_flight:
                    assert live.get(r["id"]) == r, f"acknowledged add {r['id']} lost or changed"
    assert not deleted & set(live), f"acknowledged deletes back: {sorted(deleted & set(live))[:3]}"
    for mid, rec in live.items():
        assert attempted.get(mid) == rec, f"{mid} is not a record that was written"
    _check_checkpoints(folder, acked, begun, end)


def _check_checkpoints(folder: Path, acked: list[Step], begun: list[Step], journal_end: int) -> None:
    """Each checkpoint kind loads one that was written (its content whole), at least the last acknowledged one."""
    saved = [s for s in begun if s.kind == "checkpoint"]
    last = max((s.stamp["offset"] for s in acked if s.kind == "checkpoint"), default=None)
    keyword = KeywordDerivedIndex()
    vector = VectorIndex(DIM)
    snap = snapshot.read_file(folder / f"meta-{GEN}.snap")
    loaded = {
        "keyword": keyword.load(folder, GEN),
        "vector": vector.load(folder, GEN),
        "snapshot": snap[0] if snap else None,
    }
    for kind, stamp in loaded.items():
        if stamp is None:
            assert last is None, f"the {kind} checkpoint at offset {last} was acknowledged, and is gone"
            continue
        match = [s for s in saved if s.stamp["offset"] == stamp["offset"]]
        assert match, f"the {kind} checkpoint names offset {stamp['offset']}, which no save wrote"
        assert last is None or stamp["offset"] >= last, f"the {kind} checkpoint went back to {stamp['offset']}"
        assert stamp["offset"] <= journal_end, f"the {kind} checkpoint covers more than the journal holds"
        want = match[-1]
        if kind == "keyword":
            assert len(keyword.index) == want.live
        elif kind == "vector":
            assert vector.live_count == want.live
        else:
            assert snap is not None and bytes(snap[1]) == want.payload


def test_the_workload_goes_through_the_layer_alone(tmp_path: Path) -> None:
    """Nothing bypasses the recorder (else a crash state would miss it); only hnswlib's graph is written natively."""
    (tmp_path / "data").mkdir()
    files, log = run_workload(tmp_path / "data", seed=1)
    assert files.unrecorded() == []
    assert set(files.externals) <= {"index-*.hnsw.tmp"} and files.externals
    assert {s.kind for s in log} == {"folder", "journal", "add", "del", "checkpoint"}


@pytest.mark.parametrize("seed", [1, 2])
def test_every_crash_state_of_journal_and_checkpoints_recovers(
    tmp_path: Path, powerloss_scratch: Path, powerloss_states: int, seed: int
) -> None:
    """Crash states drawn over the workload's log (fixed seed) all open with every acknowledged write in force."""
    (tmp_path / "data").mkdir()
    files, log = run_workload(tmp_path / "data", seed=seed)
    started = time.perf_counter()
    n = check_states(
        files,
        powerloss_states // 2,
        seed,
        powerloss_scratch,
        lambda folder, point: check_crash_state(folder, point, log),
    )
    print(
        f"power loss, journal level, seed {seed}: {n} states of {len(files.events)} events "
        f"in {time.perf_counter() - started:.1f} s"
    )
    assert n == powerloss_states // 2
