"""Power loss, simulated, on the whole local store (tests/powerloss/ has the crash model).

A workload of adds, batches (their lines carrying the conversation fields), deletes, an import, a checkpoint and a
compaction runs on a MemoryStore whose one file layer (`files=`) records everything it writes. Each crash state
drawn from the log is opened with a real store: it opens, every acknowledged add is there with its exact fields, no
acknowledged delete is back, nothing appears that was never written, searches find what is there, no temp file is
left over, and a second open after the first one's repairs finds the same store.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memserver.contract.backend import Memory
from memserver.local.store import MemoryStore
from tests.powerloss.crashes import check_states
from tests.powerloss.recorder import PowerLossFiles
from tests.support.fakes import FakeEmbedder

WORDS = ["invoice", "staging", "password", "rotates", "monday", "ключ", "東京", "café", "quartz", "zebra", "berlin"]


@dataclass
class Call:
    """One store call of the workload: what it acknowledged, and the log positions when it began and returned."""

    kind: str  # open | add | delete | import | checkpoint | compact | close
    start: int
    end: int = -1
    memories: list[Memory] = field(default_factory=list)
    attempted: list[dict[str, Any]] = field(default_factory=list)
    deleted: str = ""


def _fields(m: Memory | dict[str, Any]) -> tuple[Any, ...]:
    d = m.to_dict() if isinstance(m, Memory) else m
    fields = (d.get("occurred_at", d["created_at"]), d.get("speaker", ""), d.get("role", ""), d.get("session", ""))
    return (d["id"], d["content"], d["created_at"], tuple(d["tags"]), d["source"], *fields)


def _text(rng: random.Random, n: int) -> str:
    return f"note{n} " + " ".join(rng.choice(WORDS) for _ in range(rng.choice([3, 20, 120])))


def run_workload(root: Path, seed: int) -> tuple[PowerLossFiles, list[Call]]:
    """Open, ~40 adds (single and batched), deletes, an import, a checkpoint, a compaction, more writes, close."""
    rng = random.Random(seed)
    files = PowerLossFiles(root)
    calls: list[Call] = []

    def begin(kind: str) -> Call:
        call = Call(kind, len(files.events))
        calls.append(call)
        return call

    def done(call: Call) -> None:
        call.end = len(files.events)

    call = begin("open")
    store = MemoryStore(root, "c", embedder=FakeEmbedder(), files=files)
    done(call)
    live: list[str] = []
    n = 0
    plan = ["write"] * 14 + ["checkpoint"] + ["write"] * 10 + ["import"] + ["compact"] + ["write"] * 10 + ["close"]
    for step in plan:
        if step == "write":
            r = rng.random()
            if r < 0.2 and live:
                victim = live.pop(rng.randrange(len(live)))
                call = begin("delete")
                call.deleted = victim
                assert store.delete(victim)
                done(call)
                continue
            items = [{"content": _text(rng, n + k), "tags": [f"t{(n + k) % 3}"], "source": "s"} for k in range(3)]
            if r < 0.6:
                items = items[:1]
            else:  # a batch's lines carry the conversation fields too (their keys beside the batch mark)
                for k, item in enumerate(items):
                    item.update(speaker="Maya", role="user", session=f"chat-{n % 4}")
                    item["occurred_at"] = f"2023-05-{1 + (n + k) % 28:02d}T10:00:00Z"
            n += len(items)
            call = begin("add")
            call.memories = [store.add(**items[0])] if len(items) == 1 else store.add_many(items)
            done(call)
            live += [m.id for m in call.memories]
        elif step == "import":
            records = [
                {"id": f"{seed:08x}{k:024x}", "content": _text(rng, 1000 + k), "created_at": "2024-05-01T09:00:00Z"}
                for k in range(4)
            ]
            call = begin("import")
            call.attempted = records
            assert store.import_(records) == 4
            done(call)
            call.memories = [store.get(r["id"]) for r in records]  # type: ignore[misc]
            live += [r["id"] for r in records]
        elif step == "checkpoint":
            call = begin("checkpoint")
            store.checkpoint()
            done(call)
        elif step == "compact":
            call = begin("compact")
            store.compact()
            done(call)
        else:
            call = begin("close")
            store.close()
            done(call)
    return files, calls


def check_crash_state(root: Path, point: int, calls: list[Call]) -> None:
    acked = [c for c in calls if c.end != -1 and c.end <= point]
    begun = [c for c in calls if c.start < point]
    deleted = {c.deleted for c in acked if c.kind == "delete"}
    deleting = {c.deleted for c in begun if c.kind == "delete"}
    written = {m.id: _fields(m) for c in begun for m in c.memories}
    written.update((r["id"], r) for c in begun for r in c.attempted)  # an import in flight: ids known up front
    with MemoryStore(root, "c", embedder=FakeEmbedder()) as store:
        exported = {d["id"]: _fields(d) for d in store.export()}
        for c in acked:
            for m in c.memories:
                if m.id not in deleting:
                    assert exported.get(m.id) == _fields(m), f"acknowledged {c.kind} of {m.id} lost or changed"
        assert not deleted & set(exported), f"acknowledged deletes back: {sorted(deleted & set(exported))[:3]}"
        for mid, got in exported.items():
            want = written.get(mid)
            assert want is not None, f"{mid} was never written"
            if isinstance(want, dict):  # an import whose call had not returned: id and content are known
                assert (got[0], got[1]) == (want["id"], want["content"])
            else:
                assert got == want, f"{mid} changed"
        assert store.stats()["count"] == len(exported)
        for mid, got in list(exported.items())[-3:]:
            word = got[1].split()[0]  # "note<n>", unique to the memory
            assert [h.memory.id for h in store.search(word, limit=1, mode="keyword")] == [mid]
            assert store.search(got[1], limit=1, mode="semantic")[0].memory.id == mid  # its vector row came back
    folder = root / "c"
    leftovers = sorted(p.name for p in folder.iterdir() if ".tmp" in p.name and not p.name.startswith("compacting-"))
    assert not leftovers, f"temp files left after the open: {leftovers}"
    before = {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "lock"}
    with MemoryStore(root, "c", embedder=FakeEmbedder()) as again:
        assert {d["id"]: _fields(d) for d in again.export()} == exported
    after = {p.name: p.read_bytes() for p in folder.iterdir() if p.name != "lock"}
    assert after.keys() == before.keys(), f"a second open changed the files: {sorted(after.keys() ^ before.keys())}"
    assert after == before, "a second open rewrote a file"


def test_the_store_writes_through_its_one_file_layer(tmp_path: Path) -> None:
    """Every change the store makes to its folder goes through `files=` (else a crash state would miss it), and
    only hnswlib's graph files are written natively."""
    (tmp_path / "data").mkdir()
    files, calls = run_workload(tmp_path / "data", seed=1)
    assert files.unrecorded() == []
    assert set(files.externals) <= {"index-*.hnsw.tmp", "compacting-*.hnsw.tmp"}
    assert {c.kind for c in calls} == {"open", "add", "delete", "import", "checkpoint", "compact", "close"}


@pytest.mark.slow
def test_every_crash_state_of_a_store_workload_recovers(
    tmp_path: Path, powerloss_scratch: Path, powerloss_states: int
) -> None:
    """Crash states drawn over the whole-store workload's log (fixed seed) all open with nothing acknowledged lost."""
    (tmp_path / "data").mkdir()
    files, calls = run_workload(tmp_path / "data", seed=7)
    started = time.perf_counter()
    n = check_states(
        files, powerloss_states, 7, powerloss_scratch, lambda folder, point: check_crash_state(folder, point, calls)
    )
    print(f"power loss, store level: {n} states of {len(files.events)} events in {time.perf_counter() - started:.1f} s")
    assert n == powerloss_states


# --- the defects the crash states pointed at, each pinned by the order of the calls --------------------------------


def test_a_new_store_makes_its_folders_and_vector_file_durable_before_the_first_add(tmp_path: Path) -> None:
    """make_dirs syncs each new folder into its parent, and the new vector file's name is synced into the folder,
    all before the first add's journal sync acknowledges it."""
    from tests.support.file_layers import RecordingFiles

    files = RecordingFiles()
    with MemoryStore(tmp_path / "data", "c", embedder=FakeEmbedder(), files=files) as store:
        store.add("the first memory")
    calls = files.calls
    acknowledged = calls.index(("fdatasync", "journal.jsonl"))
    assert calls.index(("mkdir", "data")) < calls.index(("fsync_dir", tmp_path.name)) < acknowledged
    assert calls.index(("mkdir", "c")) < calls.index(("fsync_dir", "data")) < acknowledged
    created = calls.index(("create", "vectors-*.f32"))
    assert ("fsync_dir", "c") in calls[created:acknowledged], "the vector file's name is durable before the add"


def test_temp_files_a_crash_left_are_removed_on_open(tmp_path: Path) -> None:
    """An atomic write or a checkpoint cut short leaves `*.tmp-<nonce>` / `*.tmp`; the next open removes them,
    but not the files of a compaction another process may be running."""
    with MemoryStore(tmp_path, "c", embedder=FakeEmbedder()) as store:
        store.add("something")
    folder = tmp_path / "c"
    left = [
        "meta-0123.snap.tmp-0123abcd",
        "journal.jsonl.tmp-deadbeef",
        "index-4567.hnsw.tmp",
        "keyword.json.tmp-89abcdef",
    ]
    for name in [*left, "compacting-0123.jsonl"]:
        (folder / name).write_bytes(b"half")
    with MemoryStore(tmp_path, "c", embedder=FakeEmbedder()) as store:
        assert store.stats()["count"] == 1
    names = {p.name for p in folder.iterdir()}
    assert not names & set(left) and "compacting-0123.jsonl" in names
