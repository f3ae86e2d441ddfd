"""health(), backup(), the overview and an import from another tool's export, on every engine: the same shape and
the same answers through the contract (the fake embedder fails the model check, which is what health must say)."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

from memserver.contract.overview import overview, render
from memserver.importers.run import import_file
from tests.contract.harness import Backend, BackendUnderTest

IMPORTS = Path(__file__).resolve().parents[1] / "data" / "imports"
STATUSES = {"ok", "warning", "failure"}


def test_health_reports_every_check_with_advice_for_each_that_is_not_ok(backend: BackendUnderTest) -> None:
    store = backend.store
    for n in range(5):
        store.add(f"memory number {n} about the garden")
    forgotten = [store.add(f"a memory to forget, number {n}").id for n in range(2)]
    assert store.delete_many(forgotten) == 2
    health = store.health()
    json.dumps(health)  # JSON-able: memory://health serves it as it is
    assert health["engine"] == store.stats()["engine"] and health["version"]
    assert health["index"]["memories"] == 5 and health["pending_compaction"] == 2
    checks = {c["name"]: c for c in health["checks"]}
    assert {"model", "compaction"} <= set(checks) and all(c["status"] in STATUSES for c in checks.values())
    assert all(c.get("advice") for c in checks.values() if c["status"] != "ok")
    # the fake embedder's vectors are not all-MiniLM-L6-v2's: the model check fails, and so does the whole
    assert checks["model"]["status"] == "failure" and health["status"] == "failure"
    assert health["model"]["check"]["ok"] is False and health["model"]["name"] == backend.embedder.model_name
    # two forgotten memories beside five kept are over the share where compacting is advised; after compact() it is not
    assert checks["compaction"]["status"] == "warning" and "compact" in checks["compaction"]["advice"]
    store.compact()
    after = {c["name"]: c for c in store.health()["checks"]}
    assert after["compaction"]["status"] == "ok"
    if backend.engine == "local":
        assert {"index", "checkpoint", "disk"} <= set(checks) and checks["index"]["status"] == "ok"
        assert health["disk"]["free_bytes"] > 0 and health["journal"]["bytes"] > 0
    else:
        assert health["reachable"] is True and checks["database"]["status"] == "ok"
        assert health["schema"]["version"] == health["schema"]["latest"] and checks["schema"]["status"] == "ok"


def test_backup_writes_a_copy_or_says_how(backend: BackendUnderTest, tmp_path: Path) -> None:
    store = backend.store
    kept = [store.add(f"kept memory {n}").id for n in range(3)]
    result = store.backup(tmp_path / "backups")
    if backend.engine == "local":
        assert result["written"] is True and result["memories"] == 3
        assert Path(result["path"]).parent == tmp_path / "backups"
    else:
        assert result["written"] is False and "pg_dump" in result["recipe"] and "pg_restore" in result["recipe"]
        assert not (tmp_path / "backups").exists()
    assert all(store.get(mid) is not None for mid in kept)


def _fill(store: Backend) -> None:
    store.add("Old note from January", tags=["home"], occurred_at="2025-01-05", speaker="Sam")
    store.add("Another January note", tags=["home", "ops"], occurred_at="2025-01-20", speaker="Lena")
    first = store.add("The boiler is serviced in May", tags=["home"], occurred_at="2025-05-02", speaker="Sam")
    store.add("The boiler is serviced in June", tags=["home"], speaker="Sam", replaces=first.id, session="s1")
    store.add("Elsewhere", namespace="work", tags=["ops"])


def test_overview_counts_a_namespace_and_this_weeks_changes(store: Backend) -> None:
    _fill(store)
    summary = overview(store)
    assert summary["count"] == 3 and summary["sessions"] == 1
    assert summary["tags"] == {"home": 3, "ops": 1} and summary["tags_total"] == 2
    assert summary["speakers"] == {"Sam": 2, "Lena": 1}
    months = summary["months"]
    assert months["2025-01"] == 2 and sum(months.values()) == 3 and list(months) == sorted(months, reverse=True)
    week = summary["this_week"]
    assert week["added"] == 3 and week["updates"] == 1
    assert week["newest"][0]["content"] == "The boiler is serviced in June" and week["newest"][0]["replaces"]
    text = render(summary)
    assert "3 memories" in text and "home 3" in text and len(text.split()) < 300
    later = overview(store, now=datetime(2100, 1, 1, tzinfo=timezone.utc))
    assert later["this_week"]["added"] == 0 and later["count"] == 3
    assert overview(store, "work")["count"] == 1


def test_overview_counts_kinds_and_quotes_the_pinned_memories(store: Backend) -> None:
    _fill(store)
    task = store.add("Renew the boiler insurance before the winter comes round again", kind="task", due="2025-11-01")
    store.add("Sam prefers tea", kind="preference")
    gone = store.add("An old decision nobody follows", kind="decision")
    assert store.archive(gone.id) is not None
    pinned = store.pin(task.id)
    assert pinned is not None
    summary = overview(store)
    assert summary["by_kind"] == {"note": 3, "preference": 1, "task": 1} and summary["archived"] == 1
    assert summary["count"] == 5  # the archived one is counted apart, nowhere else
    assert summary["pinned"] == [
        {"id": pinned.id, "content": "Renew the boiler insurance before the winter comes round…"}
    ]
    assert summary["pinned_total"] == 1
    text = render(summary)
    assert "by kind: note 3, preference 1, task 1 (and 1 archived)" in text
    assert f"pinned (1):\n  {pinned.id[:8]}  Renew the boiler" in text and len(text.split()) < 300
    assert overview(store, "work")["pinned"] == []


def test_an_import_from_claude_stores_each_message_once(store: Backend) -> None:
    path = IMPORTS / "claude_conversations.json"
    summary = import_file(store, "claude", path)
    assert (summary.stored, summary.duplicates, dict(summary.skipped)) == (
        4,
        0,
        {"empty message (attachments or files only)": 1},
    )
    again = import_file(store, "claude", path)
    assert (again.stored, again.duplicates) == (0, 4)
    assert store.stats()["count"] == 4
    (hit,) = store.search("boiler service booked", limit=1, speaker="user")
    memory = hit.memory
    assert memory.source == "claude:5b0c2f0e-1d7a-4d1e-9a3c-0c1e2d3f4a5b#m-0001" and memory.role == "user"
    assert memory.session == "5b0c2f0e-1d7a-4d1e-9a3c-0c1e2d3f4a5b"
    assert memory.occurred_at == "2025-03-04T09:15:02.123456+00:00"
