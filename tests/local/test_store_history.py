"""The local store's side of the conversation fields: the journal lines they write, snapshot format 5 (and 4)
restoring exactly what a replay builds (labels, namespaces, replace links, tombstones), and compaction keeping
history while purging forgotten memories. Public API and the files' documented formats only."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

import memserver.local.folder as ms_collection
from memserver.contract.backend import MemoryFilter
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder, RecordingHooks

COLLECTION = "conv"


def _open(root: Path, hooks: RecordingHooks | None = None) -> MemoryStore:
    return MemoryStore(root, COLLECTION, embedder=FakeEmbedder(), hooks=hooks)


def _lines(root: Path) -> list[dict[str, Any]]:
    text = (root / COLLECTION / "journal.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()[1:]]


def _fill(s: MemoryStore, n: int = 240) -> None:
    """Turns of three namespaces and many sessions and speakers, chains of replaces, and forgotten memories."""
    s.import_(
        [
            {
                "content": f"turn {i} of chat {i // 10} about topic{i % 7}",
                "created_at": f"2024-03-{1 + i % 27:02d}T10:{i % 60:02d}:00Z",
                "occurred_at": f"2023-{1 + i % 12:02d}-{1 + i % 28:02d}T08:00:00Z",
                "speaker": ["Maya", "Ravi", "Zoë"][i % 3],
                "role": ["user", "assistant", "participant"][i % 3],
                "session": f"chat-{i // 10}",
                "namespace": ["default", "user:maya", "team"][i % 3],
                "tags": [f"t{i % 4}"],
            }
            for i in range(n)
        ]
    )
    for space in ("default", "user:maya"):
        current = s.list_recent(limit=30, namespace=space)
        for k, old in enumerate(current[:12]):
            s.add(f"{old.content} (corrected {k})", namespace=space, session=old.session, replaces=old.id)
    doomed = s.select(MemoryFilter(session="chat-3", namespace="team")).ids
    s.delete_many(doomed, namespace="team")
    assert s.delete(s.list_recent(limit=1)[0].id)


def _readback(s: MemoryStore) -> dict[str, Any]:
    def hits(**kw: Any) -> list[tuple[str, float]]:
        return [(h.memory.id, round(h.score, 5)) for h in s.search(**kw)]

    out: dict[str, Any] = {
        "stats": {k: s.stats()[k] for k in ("count", "namespaces", "replaced", "deleted_pending_compaction")},
        "export": list(s.export()),
        "namespaces": s.namespaces(),
    }
    for space in ("default", "user:maya", "team"):
        out[space] = {
            "recent": [m.to_dict() for m in s.list_recent(limit=20, namespace=space)],
            "sessions": s.sessions(namespace=space),
            "tags": s.tag_counts(namespace=space),
            "hybrid": hits(query="turn topic3 chat", limit=10, namespace=space),
            "speaker": hits(query="topic3", limit=10, mode="semantic", speaker="Ravi", namespace=space),
            "session": hits(query="turn", limit=10, mode="keyword", session="chat-4", namespace=space),
            "may": hits(query="what was said in May 2023", limit=10, mode="keyword", namespace=space),
            "as_of": hits(query="turn topic3", limit=10, as_of="2024-03-15", namespace=space),
            "page": [m.id for m in s.list_page(limit=50, namespace=space, as_of="2024-03-10").memories],
            "history": s.select(MemoryFilter(namespace=space, everything=True, include_replaced=True), limit=5),
        }
    return out


@pytest.fixture
def filled(tmp_path: Path) -> dict[str, Any]:
    with _open(tmp_path) as s:
        _fill(s)
        s.checkpoint()
        expected = _readback(s)
    assert expected["stats"]["replaced"] == 24 and expected["stats"]["deleted_pending_compaction"] == 4
    return expected


def test_a_snapshot_restores_what_the_replay_built(tmp_path: Path, filled: dict[str, Any]) -> None:
    """Reopened from the format-5 snapshot (nothing replayed), then from the journal alone: the same answers."""
    hooks = RecordingHooks()
    with _open(tmp_path, hooks) as s:
        assert _readback(s) == filled
    assert hooks.opens == [(0, True)]
    for p in (tmp_path / COLLECTION).glob("meta-*.snap"):
        p.unlink()
    hooks = RecordingHooks()
    with _open(tmp_path, hooks) as s:
        assert _readback(s) == filled
    assert hooks.opens[0][1] is False


def test_a_journal_tail_past_the_snapshot_is_replayed_onto_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Labels, replaces and forgets written after the checkpoint land on the restored catalog alike."""
    with _open(tmp_path) as s:
        _fill(s, 120)
        s.checkpoint()
        old = s.add("tail turn", speaker="Newcomer", session="tail", namespace="fresh")
        s.add("tail turn, corrected", speaker="Newcomer", session="tail", namespace="fresh", replaces=old.id)
        assert s.delete(s.list_recent(limit=1, namespace="team")[0].id, namespace="team")
        expected = _readback(s)
    monkeypatch.setattr(ms_collection, "CHECKPOINT_RECORDS", 10**9)  # keep the tail a tail on the next open
    hooks = RecordingHooks()
    with _open(tmp_path, hooks) as s:
        assert _readback(s) == expected
        assert s.namespaces()["fresh"] == 1
    assert hooks.opens == [(3, True)]


def test_compaction_keeps_history_and_purges_tombstones(tmp_path: Path, filled: dict[str, Any]) -> None:
    """After compact(): the same current memories and history, no tombstone; the compacted journal says which
    memories are history on their own lines (replaced_by, replaced_at)."""
    with _open(tmp_path) as s:
        result = s.compact()
        assert result["count"] == filled["stats"]["count"] and result["removed"] == 4
        after = _readback(s)
    assert after["stats"] == {**filled["stats"], "deleted_pending_compaction": 0}
    assert after["export"] == filled["export"]
    for space in ("default", "user:maya", "team"):
        assert {k: v for k, v in after[space].items() if k not in ("as_of", "page")} == {
            k: v for k, v in filled[space].items() if k not in ("as_of", "page")
        }
    history = [r for r in _lines(tmp_path) if r.get("op") == "add" and "replaced_by" in r]
    assert len(history) == 24 and all(r["replaced_at"] >= r["created_at"] for r in history)
    with _open(tmp_path) as s:
        assert _readback(s) == after


def test_the_journal_lines_carry_only_the_fields_set(tmp_path: Path) -> None:
    """A memory without fields writes exactly the line of before (so old and new lines look alike); each field
    is a key of its own when it differs from its default; occurred_at only when it is not created_at."""
    with _open(tmp_path) as s:
        plain = s.add("plain memory", tags=["a"], source="here")
        s.add("said then", occurred_at="2023-05-14", speaker="Maya", role="user", session="s1", namespace="team")
        s.import_([{"content": "stored then, said then", "created_at": "2023-01-01", "occurred_at": "2023-01-01"}])
        s.add("plain memory, corrected", replaces=plain.id)
        s.delete(plain.id)
    first, dated, same, newer, forget = _lines(tmp_path)
    old_shape = ["op", "id", "content", "created_at", "tags", "source", "row", "vcrc", "crc"]
    assert list(first) == old_shape and list(same) == old_shape
    assert list(dated) == [
        *old_shape[:6],
        "occurred_at",
        "speaker",
        "role",
        "session",
        "namespace",
        *old_shape[6:],
    ]
    assert (dated["occurred_at"], dated["namespace"]) == ("2023-05-14T00:00:00.000000+00:00", "team")
    assert list(newer) == [*old_shape[:6], "replaces", *old_shape[6:]] and newer["replaces"] == plain.id
    assert list(forget) == ["op", "id", "at", "crc"]


def test_the_format_4_fixture_opens_from_its_snapshot(tmp_path: Path) -> None:
    """The bc911d9 store's format-4 snapshot is decoded (not replayed over) when this Python wrote it."""
    fixture = Path(__file__).parent.parent / "data" / "store-format4"
    made_by = json.loads((fixture / "made_by.json").read_text())
    shutil.copytree(fixture / "fixture", tmp_path / "fixture")
    hooks = RecordingHooks()
    monkey = pytest.MonkeyPatch()
    monkey.setattr(ms_collection, "CHECKPOINT_RECORDS", 10**9)
    try:
        with MemoryStore(tmp_path, "fixture", embedder=FakeEmbedder(), hooks=hooks) as s:
            assert s.stats()["count"] == 41 and s.namespaces() == {"default": 41}
    finally:
        monkey.undo()
    if tuple(made_by["python"][:2]) == sys.version_info[:2]:
        assert hooks.opens == [(13, True)]
    else:
        assert hooks.opens[0][1] is False


class ReplaceDuringCopy(RecordingHooks):
    """At compaction_copied (no lock held), another store replaces a copied memory and forgets the newer one."""

    def __init__(self, root: Path, target: str) -> None:
        super().__init__()
        self.root, self.target = root, target

    def compaction_copied(self) -> None:
        with _open(self.root) as other:
            newer = other.add("the newer version, soon forgotten", replaces=self.target)
            assert other.delete(newer.id)


def test_a_replace_and_forget_during_a_compaction_keep_the_old_memory_history(tmp_path: Path) -> None:
    """A memory copied as current, then replaced by a memory forgotten before the switch: the compaction is
    dropped rather than bring the old memory back; the next one keeps it as history."""
    with _open(tmp_path) as s:
        old = s.add("the old version")
        s.add("something else")
    hooks = ReplaceDuringCopy(tmp_path, old.id)
    with MemoryStore(tmp_path, COLLECTION, embedder=FakeEmbedder(), hooks=hooks) as s:
        s.compact()
        assert s.get(old.id) is not None and s.get(old.id).replaced_by  # type: ignore[union-attr]
        assert [m.content for m in s.list_recent()] == ["something else"]
    with _open(tmp_path) as s:
        assert s.compact()["removed"] == 1
        assert [m.content for m in s.list_recent()] == ["something else"]
        assert s.get(old.id).replaced_by  # type: ignore[union-attr]


class ChangesDuringCopy(RecordingHooks):
    """At compaction_copied (no lock held), another store runs `action` (acknowledged changes the switch must keep)."""

    def __init__(self, root: Path) -> None:
        super().__init__()
        self.root = root
        self.action: Any = None

    def compaction_copied(self) -> None:
        with _open(self.root) as other:
            self.action(other)


def test_changes_during_a_compaction_are_kept_by_record_and_in_order(tmp_path: Path) -> None:
    """Between the copy and the switch another store (1) forgets X and imports X again under its id with new
    content, and (2) replaces the copied A with B and then forgets A. After the switch X has its new content, B is
    current, A is gone, and `as_of` between B and A's forget still sees B and not A (A read back as history first,
    then forgotten), exactly as before the compaction."""
    with _open(tmp_path) as s:
        x = s.add("version A of the note", tags=["t1"])
        s.import_([{"content": "the plan is to meet on Monday", "created_at": "2020-01-01T00:00:00Z"}])
        a = next(m for m in s.list_recent() if m.content.endswith("Monday"))
        s.add_many([f"fact {i} about item{i}" for i in range(5)])
    hooks = ChangesDuringCopy(tmp_path)

    def change(other: MemoryStore) -> None:
        assert other.delete(x.id)
        assert other.import_([{"id": x.id, "content": "version B of the note", "tags": ["t2"]}]) == 1
        newer = {"content": "the plan is to meet on Tuesday", "created_at": "2021-01-01T00:00:00Z", "replaces": a.id}
        assert other.import_([newer]) == 1
        assert other.delete(a.id)

    def state(s: MemoryStore) -> dict[str, Any]:
        return {
            "x": s.get(x.id),
            "a": s.get(a.id),
            "recent": [m.to_dict() for m in s.list_recent(limit=20)],
            "then": [m.content for m in s.list_page(limit=20, as_of="2022-01-01").memories],
            "export": list(s.export()),
        }

    hooks.action = change
    with MemoryStore(tmp_path, COLLECTION, embedder=FakeEmbedder(), hooks=hooks) as s:
        s.compact()
        got = state(s)
    assert got["x"] is not None and (got["x"].content, got["x"].tags) == ("version B of the note", ("t2",))
    assert got["a"] is None
    assert got["then"] == ["the plan is to meet on Tuesday"]
    lines = _lines(tmp_path)
    assert not any("replaced_by" in line for line in lines)  # A's state came from B's line, then A's tombstone
    with _open(tmp_path) as fresh:
        assert state(fresh) == got
        assert fresh.compact()["removed"] == 2  # the tombstones of X (its first version) and A, purged now
        assert [m.content for m in fresh.list_page(limit=20, as_of="2022-01-01").memories] == [
            "the plan is to meet on Tuesday"
        ]
