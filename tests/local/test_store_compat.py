"""A store written by memserver at commit bc911d9 opens with today's code and reads back the same, byte for byte.

tests/data/store-format4/ was made by tests/data/make_store_fixture.py with that commit's code: 50 memories
imported (accents, emoji, CJK, right-to-left text; tags and sources), 9 deleted, a checkpoint (metadata snapshot
format 4, index.json and its hnswlib graph, keyword.json and its postings) and a journal tail of 13 records past
it; export.jsonl is what `export(include_vectors=True)` returned then, one `json.dumps(..., ensure_ascii=False)`
line per memory (as `memserver export --vectors` writes it).

The snapshot records the Python minor version that wrote it (made_by.json says which); under another version the
store replays the journal over it instead, which must give the same records, so these tests hold on any Python.
Each test works on a copy in tmp_path: the committed files are never opened for writing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import memserver.local.folder
import memserver.local.store
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder

FIXTURE = Path(__file__).parent.parent / "data" / "store-format4"
COLLECTION = "fixture"
WRITTEN_THEN = (FIXTURE / "export.jsonl").read_text(encoding="utf-8")


def _with_occurred_at(line: str) -> str:
    """An export line of bc911d9 as today's export writes it. Deliberately changed by issue 12 (conversation
    memory): every memory now has `occurred_at` (when it happened), right after created_at, and a memory stored
    before that field existed occurred when it was stored. Every other byte of the line stays as it was."""
    created = json.loads(line)["created_at"]
    member = f'"created_at": "{created}"'
    assert line.count(member) == 1
    return line.replace(member, f'{member}, "occurred_at": "{created}"')


EXPECTED = "".join(_with_occurred_at(line) + "\n" for line in WRITTEN_THEN.splitlines())
RECORDS = [json.loads(line) for line in EXPECTED.splitlines()]
CHECKPOINT_FILES = ("index.json", "keyword.json")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A copy of the fixture's store folder."""
    shutil.copytree(FIXTURE / COLLECTION, tmp_path / COLLECTION)
    return tmp_path


def _open(root: Path) -> MemoryStore:
    return MemoryStore(root, COLLECTION, embedder=FakeEmbedder())


def _exported(store: MemoryStore) -> str:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in store.export(include_vectors=True))


def _without_vectors(records: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k != "vector"} for r in records]


def test_the_fixture_is_a_checkpoint_with_a_journal_tail() -> None:
    """The committed store has a metadata snapshot and index checkpoints that end before its journal does."""
    folder = FIXTURE / COLLECTION
    journal_bytes = (folder / "journal.jsonl").stat().st_size
    assert len(list(folder.glob("meta-*.snap"))) == 1
    offsets = {json.loads((folder / name).read_text())["offset"] for name in CHECKPOINT_FILES}
    assert len(offsets) == 1 and offsets.pop() < journal_bytes
    assert len(RECORDS) == json.loads((FIXTURE / "made_by.json").read_text())["memories"] == 41


@pytest.mark.parametrize(
    "removed",
    [(), ("meta-*.snap",), ("index.json",), ("keyword.json",), ("meta-*.snap", "index.json", "keyword.json")],
    ids=["as-written", "no-snapshot", "no-vector-checkpoint", "no-keyword-checkpoint", "journal-only"],
)
def test_the_old_store_exports_the_same_records_byte_for_byte(root: Path, removed: tuple[str, ...]) -> None:
    """Opened from its checkpoints, or by replaying the journal with some or all of them gone, the export is
    exactly the committed one, and no memory is re-embedded."""
    for pattern in removed:
        for path in (root / COLLECTION).glob(pattern):
            path.unlink()
    embedder = FakeEmbedder()
    with MemoryStore(root, COLLECTION, embedder=embedder) as store:
        assert _exported(store) == EXPECTED
        assert embedder.texts == 0


def test_the_old_store_answers_search_and_list_recent(root: Path) -> None:
    """Searches in every mode and with filters, list_recent and tag_counts work on the old store."""
    by_content = {r["content"]: r for r in RECORDS}
    invoice = by_content["Invoice INV-2024-0173 from Hetzner was paid on 3 March"]["id"]
    tail = [r["id"] for r in RECORDS if "tail" in r["tags"]]
    with _open(root) as store:
        assert store.stats()["count"] == 41
        for mode in ("hybrid", "semantic", "keyword"):
            assert store.search("Invoice INV-2024-0173 from Hetzner", limit=1, mode=mode)[0].memory.id == invoice
        assert sorted(h.memory.id for h in store.search("memory", limit=50, tags=["tail"])) == sorted(tail)
        assert store.search("チェックポイントの後に追加されたメモ", limit=1)[0].memory.content == (
            "チェックポイントの後に追加されたメモ"
        )
        assert [m.to_dict() for m in store.list_recent(limit=50)] == _without_vectors(RECORDS)[::-1]
        expected_tags: dict[str, int] = {}
        for r in RECORDS:
            for t in r["tags"]:
                expected_tags[t] = expected_tags.get(t, 0) + 1
        assert store.tag_counts() == dict(sorted(expected_tags.items(), key=lambda kv: (-kv[1], kv[0])))


def test_a_checkpoint_written_by_todays_code_reopens_to_the_same_records(
    root: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Today's code checkpoints the old store (covering the tail), and reopening from that checkpoint gives the same."""
    folder = root / COLLECTION
    before = {name: (folder / name).read_bytes() for name in CHECKPOINT_FILES}
    # A threshold of one record makes the open checkpoint the replayed tail (MemoryStore.checkpoint() will do).
    monkeypatch.setattr(memserver.local.folder, "CHECKPOINT_RECORDS", 1)
    with _open(root) as store:
        assert _exported(store) == EXPECTED
    journal_bytes = (folder / "journal.jsonl").stat().st_size
    for name in CHECKPOINT_FILES:
        assert (folder / name).read_bytes() != before[name], f"{name} was not rewritten"
        assert json.loads((folder / name).read_text())["offset"] == journal_bytes
    monkeypatch.undo()
    with _open(root) as store:
        assert _exported(store) == EXPECTED


def test_compacting_the_old_store_keeps_the_same_records(root: Path) -> None:
    """Compaction of the old store rewrites it without its deleted memories; the export is unchanged, also reopened."""
    with _open(root) as store:
        assert store.compact()["count"] == 41
        assert _exported(store) == EXPECTED
    with _open(root) as store:
        assert _exported(store) == EXPECTED


def test_the_old_store_takes_new_writes(root: Path) -> None:
    """New adds and deletes land beside the old records and survive reopening."""
    gone = RECORDS[5]["id"]
    with _open(root) as store:
        new = store.add("written by today's code", tags=["new"])
        assert store.delete(gone)
        assert store.add(RECORDS[0]["content"]).id == RECORDS[0]["id"]  # old content is still deduplicated
        expected = [r for r in _without_vectors(RECORDS) if r["id"] != gone] + [new.to_dict()]
        assert list(store.export()) == expected
    with _open(root) as store:
        assert list(store.export()) == expected


def test_the_old_store_is_reindexed_for_tags_and_cjk(root: Path) -> None:
    """Its keyword checkpoint was made by an older analyzer (no tags, no CJK pairs): today's code rebuilds it on
    open, so a tag and a CJK word are found by keyword search (issue 23, items 13 and 15)."""
    by_content = {r["content"]: r["id"] for r in RECORDS}
    deploy = [r["id"] for r in RECORDS if "deploy" in r["tags"]]
    japan = {r["id"] for r in RECORDS if "日本" in r["tags"]}
    assert deploy and japan
    with _open(root) as store:
        assert {h.memory.id for h in store.search("deploy", limit=len(deploy), mode="keyword")} == set(deploy)
        assert [h.memory.id for h in store.search("会議", limit=5, mode="keyword")] == [
            by_content["会議は木曜日の午後3時に移動しました"]
        ]
        beijing = by_content["北京的办公室周五关闭"]
        assert [h.memory.id for h in store.search("北京", limit=5, mode="keyword")] == [beijing]
        assert {h.memory.id for h in store.search("日本", limit=len(japan), mode="keyword")} == japan
