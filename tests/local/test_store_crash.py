"""Durability under SIGKILL and several processes sharing one store (real processes, real kills)."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder

ROOT = Path(__file__).resolve().parents[2]
KILLS = 12  # kills of the writer in the SIGKILL loop, each after an acknowledged write
pytestmark = [pytest.mark.slow, pytest.mark.skipif(os.name != "posix", reason="SIGKILL and flock are POSIX")]

# The child adds continuously (single adds and small batches), deletes some of its own adds, and checkpoints
# often (a fixed spacing of 25 records) so that kills also land inside index saves. "A <id>" / "D <id>" is printed only
# after the call returned, i.e. after the store acknowledged the write; "X <id>" just before a delete starts.
WRITER = r"""
import os, random, sys
import memserver.local.store as ms
from tests.support.fakes import FakeEmbedder
os.environ["MEMSERVER_CHECKPOINT_EVERY"] = "25"
rng = random.Random(int(sys.argv[2]))
store = ms.MemoryStore(sys.argv[1], "crash", embedder=FakeEmbedder())
print("ready", flush=True)
mine = []
i = 0
while True:
    i += 1
    if rng.random() < 0.2 and mine:
        victim = mine.pop(rng.randrange(len(mine)))
        print("X", victim, flush=True)  # a delete in flight: may or may not happen if killed now
        store.delete(victim)
        print("D", victim, flush=True)
    elif rng.random() < 0.3:
        for m in store.add_many([f"batch {sys.argv[2]} {i} {j} {rng.random()}" for j in range(5)]):
            mine.append(m.id)
            print("A", m.id, flush=True)
    else:
        m = store.add(f"memory {sys.argv[2]} {i} {rng.random()}", tags=[f"t{i % 5}"])
        mine.append(m.id)
        print("A", m.id, flush=True)
"""


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_sigkill_loop_loses_no_acknowledged_write(tmp_path: Path) -> None:
    """Kill -9 a writer at random moments, many times: every acknowledged add is there, no acknowledged delete.

    A fixed number of kills, each once the writer has acknowledged a write (so every kill lands in a store being
    written, however slow the machine), at a random moment after that: no time limit to miss under load."""
    rng = random.Random(1234)
    added: set[str] = set()
    deleted: set[str] = set()
    attempted: set[str] = set()  # deletes started; only acknowledged ones ("D") must have happened
    for kills in range(1, KILLS + 1):
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(tmp_path), str(kills)],
            stdout=subprocess.PIPE,
            env=_env(),
            cwd=ROOT,
            text=True,
        )
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "ready"
        before = []  # the reports up to the first acknowledgement of this writer
        while not before or not before[-1].startswith("A "):
            line = child.stdout.readline()
            assert line, "the writer exited before acknowledging a write"
            before.append(line.rstrip("\n"))
        time.sleep(rng.uniform(0.02, 0.4))
        child.send_signal(signal.SIGKILL)
        out, _ = child.communicate()
        out = "\n".join([*before, out])
        lines = out.splitlines()
        for n, line in enumerate(lines):
            parts = line.split()
            if len(parts) != 2 or len(parts[1]) != 32:
                # A report cut short by the kill: only the last line can be, and what it reports had not been
                # acknowledged (or, for "X", the delete had not started) when the kill came.
                assert n == len(lines) - 1, f"malformed report line {line!r} before the last"
                continue
            {"A": added, "D": deleted, "X": attempted}[parts[0]].add(parts[1])
        with MemoryStore(tmp_path, "crash", embedder=FakeEmbedder()) as s:
            missing = [m for m in added - deleted - attempted if s.get(m) is None]
            resurrected = [m for m in deleted if s.get(m) is not None]
            assert not missing, f"after kill {kills}: acknowledged adds lost: {missing[:3]}"
            assert not resurrected, f"after kill {kills}: acknowledged deletes back: {resurrected[:3]}"
            found = {h.memory.id for h in s.search("memory batch", limit=1000)}
            assert not (found & deleted)
            # the keyword index (checkpoint + tail, or rebuilt) holds exactly the live memories
            stats = s.stats()
            assert stats["keyword_index"]["documents"] == stats["count"]
            for mid in sorted(added - deleted - attempted)[-5:]:
                content = s.get(mid).content  # type: ignore[union-attr]
                assert [h.memory.id for h in s.search(content, limit=1, mode="keyword")] == [mid]
            assert not {h.memory.id for h in s.search("memory batch", limit=1000, mode="keyword")} & deleted
    assert len(added) > 100, len(added)


PEER = r"""
import json, os, sys, time
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder
path, me, n, peers = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
store = MemoryStore(path, "shared", embedder=FakeEmbedder())
acked, deleted = [], []
for i in range(n):
    acked.append(store.add(f"peer {me} note {i} " + "word%d " % (i * 7 + me), tags=[f"p{me}"]).id)
    if i % 5 == 4:
        store.delete(acked[-2]); deleted.append(acked[-2])
    store.search(f"peer note {i}", limit=5)
    store.search("note", tags=[f"p{(me + 1) % peers}"], limit=3)
open(os.path.join(path, f"done-{me}"), "w").close()
while len([f for f in os.listdir(path) if f.startswith("done-")]) < peers:
    time.sleep(0.01)
seen = {}
for j in range(peers):
    seen[j] = sorted(h.memory.id for h in store.search("peer note", tags=[f"p{j}"], limit=1000))
everything = sorted(h.memory.id for h in store.search("peer note", limit=1000))
by_word = sorted(h.memory.id for h in store.search("peer", limit=1000, mode="keyword"))
print(json.dumps({"acked": acked, "deleted": deleted, "seen": seen, "all": everything, "by_word": by_word,
                  "count": store.stats()["count"]}))
store.close()
"""


def test_four_processes_write_and_search_one_store(tmp_path: Path) -> None:
    """4 processes add, delete and search concurrently; each then sees every acknowledged write of all of them."""
    peers, n = 4, 60
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PEER, str(tmp_path), str(me), str(n), str(peers)],
            stdout=subprocess.PIPE,
            env=_env(),
            cwd=ROOT,
            text=True,
        )
        for me in range(peers)
    ]
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        results.append(json.loads(out))
    live = {j: sorted(set(r["acked"]) - set(r["deleted"])) for j, r in enumerate(results)}
    everyone = sorted(m for ids in live.values() for m in ids)
    assert len(everyone) == peers * (n - n // 5)
    for r in results:
        assert r["count"] == len(everyone)
        assert r["all"] == everyone  # through HNSW over everything
        assert r["by_word"] == everyone  # through the keyword index
        for j in range(peers):
            assert r["seen"][str(j)] == live[j]  # through the tag filter
    with MemoryStore(tmp_path, "shared", embedder=FakeEmbedder()) as s:
        assert sorted(m["id"] for m in s.export()) == everyone
