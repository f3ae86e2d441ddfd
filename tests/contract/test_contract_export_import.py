"""export / import_: a round trip keeps ids, times, tags and sources; vectors skip re-embedding; bad records are
refused by position and field, and nothing acknowledged is lost."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

from memserver.errors import InvalidInputError
from tests.contract.harness import SCORE_TOLERANCE, Backend, BackendUnderTest, vector

FIELDS = {"id", "content", "created_at", "occurred_at", "tags", "source"}
RECORDS = [
    {
        "id": f"{i:032x}",
        "content": text,
        "created_at": f"2025-0{1 + i % 3}-1{i}T08:00:00.00000{i}+00:00",
        "tags": tags,
        "source": source,
    }
    for i, (text, tags, source) in enumerate(
        [
            ("Marta's birthday is 17 April", ["people", "dates"], "chat"),
            ("Café Zoë opens at 8 😀", ["places"], ""),
            ("日本語のメモ: 会議は木曜日", [], "notes/ja"),
            ("שלום — the Hebrew greeting", ["words", "people"], "chat"),
            ("The boiler is serviced in October", ["home"], "email"),
        ]
    )
]
# As exported: occurred_at (not given, so = created_at) comes after created_at.
BY_TIME = [
    {**{k: v for k, v in r.items() if k != "tags" and k != "source"}, "occurred_at": r["created_at"], **r}
    for r in sorted(RECORDS, key=lambda r: r["created_at"])
]


def _vectors_match(exported: list[dict[str, Any]]) -> None:
    for r in exported:
        assert np.allclose(r["vector"], vector(r["content"]), atol=1e-6), r["content"]


def test_export_is_every_live_memory_oldest_first(store: Backend) -> None:
    """export yields one plain dict per live memory (id, content, created_at, tags as a list, source), oldest first."""
    assert store.import_(RECORDS) == 5
    out = list(store.export())
    assert out == BY_TIME
    assert all(set(r) == FIELDS for r in out)


def test_export_order_ties_by_insertion(store: Backend) -> None:
    """Memories with the same created_at are exported in insertion order."""
    same = "2025-01-01T00:00:00.000000+00:00"
    store.import_([{"content": f"tie {i}", "created_at": same} for i in range(4)])
    assert [r["content"] for r in store.export()] == [f"tie {i}" for i in range(4)]


def test_export_with_vectors_adds_the_stored_vector(store: Backend) -> None:
    """include_vectors=True adds "vector": the memory's 384 unit-length floats, as the embedder made them."""
    store.import_(RECORDS)
    out = list(store.export(include_vectors=True))
    assert [{k: v for k, v in r.items() if k != "vector"} for r in out] == BY_TIME
    assert all(isinstance(r["vector"], list) and len(r["vector"]) == 384 for r in out)
    assert all(isinstance(x, float) for x in out[0]["vector"])
    _vectors_match(out)


def test_a_round_trip_keeps_everything(backend: BackendUnderTest) -> None:
    """Importing an export into an empty backend reproduces it: ids, contents, times, tags, sources, vectors."""
    source = backend.store
    source.import_(RECORDS)
    source.add_many(["added now", {"content": "tagged now", "tags": ["t"], "source": "s"}])
    exported = list(source.export(include_vectors=True))
    target, _ = backend.another()
    assert target.import_(exported) == 7
    again = list(target.export(include_vectors=True))
    assert [{k: v for k, v in r.items() if k != "vector"} for r in again] == [
        {k: v for k, v in r.items() if k != "vector"} for r in exported
    ]
    for a, b in zip(again, exported, strict=True):
        assert np.allclose(a["vector"], b["vector"], atol=1e-7)
    assert target.tag_counts() == source.tag_counts()
    assert [m.to_dict() for m in target.list_recent()] == [m.to_dict() for m in source.list_recent()]


def test_importing_vectors_does_not_embed(backend: BackendUnderTest) -> None:
    """Records that carry a vector are stored without calling the embedder."""
    backend.store.import_(RECORDS)
    exported = list(backend.store.export(include_vectors=True))
    target, embedder = backend.another()
    assert target.import_(exported) == 5
    assert (embedder.calls, embedder.texts) == (0, 0)


def test_importing_without_vectors_embeds_the_content(backend: BackendUnderTest) -> None:
    """Records without a vector are embedded: the stored vector is the content's."""
    target, embedder = backend.another()
    assert target.import_(RECORDS) == 5
    assert embedder.texts >= 5
    _vectors_match(list(target.export(include_vectors=True)))


def test_an_imported_vector_is_used_as_given(store: Backend) -> None:
    """A record's vector is what search ranks by, not an embedding of its content."""
    store.add_many(["harbour master", "lantern oil"])
    store.import_([{"content": "apple pie recipe", "vector": vector("quill ink")}])
    hits = store.search("quill ink", limit=1, mode="semantic")
    assert [h.memory.content for h in hits] == ["apple pie recipe"]
    assert hits[0].score == pytest.approx(1.0, abs=SCORE_TOLERANCE)


def test_an_imported_vector_is_normalised(store: Backend) -> None:
    """A vector of any length is stored at unit length."""
    store.import_([{"content": "scaled", "vector": [3.0 * x for x in vector("scaled")]}])
    (out,) = list(store.export(include_vectors=True))
    assert np.allclose(out["vector"], vector("scaled"), atol=1e-6)


def test_known_ids_are_skipped_and_not_counted(store: Backend) -> None:
    """Importing the same records twice adds them once: the second import returns 0 and changes nothing."""
    assert store.import_(RECORDS) == 5
    before = list(store.export())
    assert store.import_(RECORDS) == 0
    assert list(store.export()) == before


def test_a_known_id_with_other_content_is_skipped(store: Backend) -> None:
    """A record whose id is stored is skipped even if its content differs: the stored memory is kept."""
    store.import_(RECORDS[:1])
    assert store.import_([{**RECORDS[0], "content": "something else entirely"}]) == 0
    assert list(store.export()) == [r for r in BY_TIME if r["id"] == RECORDS[0]["id"]]


def test_duplicate_content_is_skipped_and_not_counted(store: Backend) -> None:
    """A record whose content (whitespace aside) is stored under another id is skipped."""
    a = store.add("Marta's birthday is 17 April")
    assert store.import_([{**RECORDS[0], "content": "  Marta's  birthday is 17 April"}]) == 0
    assert [r["id"] for r in store.export()] == [a.id]


def test_the_count_is_of_the_memories_added(store: Backend) -> None:
    """import_ returns how many memories it added: known ids, known content and repeats within it are not counted."""
    store.import_(RECORDS[:2])
    batch = [
        RECORDS[0],  # known id
        {"content": RECORDS[1]["content"]},  # known content
        RECORDS[2],  # new
        {"content": "brand new"},  # new, no id
        {"content": " brand  new ", "id": "f" * 32},  # the same content again in this import
        RECORDS[3],  # new
    ]
    assert store.import_(batch) == 3
    assert store.stats()["count"] == 5
    assert store.get("f" * 32) is None


def test_import_applies_the_input_rules_of_add(store: Backend) -> None:
    """Imported content is trimmed, tags deduplicated in order, the id lower-cased; unknown fields are ignored."""
    rec = {"id": "ABCDEF" + "0" * 26, "content": "  padded  ", "tags": ["b", "a", "b"], "source": " s ", "score": 0.5}
    assert store.import_([rec]) == 1
    (out,) = list(store.export())
    assert {k: out[k] for k in ("id", "content", "tags", "source")} == {
        "id": "abcdef" + "0" * 26,
        "content": "padded",
        "tags": ["b", "a"],
        "source": "s",
    }


def test_import_reads_any_iterable_once(store: Backend) -> None:
    """import_ takes a generator (a file read line by line) and consumes it once."""

    def lines() -> Iterator[dict[str, Any]]:
        yield from RECORDS

    assert store.import_(lines()) == 5
    assert store.import_(iter([])) == 0


def test_a_repeated_id_within_one_import_is_refused(store: Backend) -> None:
    """Two records with one id (in any spelling) are refused by name, and nothing of that import is written."""
    same = "0123456789abcdef0123456789abcdef"
    with pytest.raises(InvalidInputError) as exc:
        store.import_(
            [{"id": same, "content": "first"}, {"content": "other"}, {"id": same.upper(), "content": "second"}]
        )
    assert str(exc.value) == f"records[2].id {same} appears twice in this import"
    assert store.stats()["count"] == 0


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("a string", "records[3] must be a dict, got str"),
        (None, "records[3] must be a dict, got NoneType"),
        (
            {"content": "x", "created_at": "yesterday"},
            "records[3].created_at must be an ISO 8601 date or date-time "
            "(e.g. 2026-11-30 or 2026-11-30T13:08:00Z), got 'yesterday'",
        ),
        ({"content": "x", "created_at": 20250301}, "records[3].created_at must be an ISO 8601 string, got int"),
        ({"content": "x", "vector": [0.5, 0.5, 0.5]}, "records[3].vector must be 384 finite numbers, got shape (3,)"),
        (
            {"content": "x", "vector": [[0.1] * 384] * 2},
            "records[3].vector must be 384 finite numbers, got shape (768,)",
        ),
        (
            {"content": "x", "vector": [float("nan")] * 384},
            "records[3].vector must be 384 finite numbers, got shape (384,)",
        ),
        ({"content": "x", "vector": [0.0] * 384}, "records[3].vector must not be the zero vector"),
        ({"content": "x", "vector": "abc"}, "records[3].vector must be a list of 384 numbers"),
        (
            {"content": "x", "id": "xyz"},
            "records[3].id must be 32 hexadecimal characters (as returned by add), got 'xyz'",
        ),
        ({"content": ""}, "records[3].content must not be empty"),
        ({"tags": ["a"]}, "records[3].content must be a string, got NoneType"),
        ({"content": "x", "tags": "a"}, "records[3].tags must be a list of strings, got str"),
    ],
)
def test_a_bad_record_is_refused_naming_its_position_and_field(store: Backend, bad: Any, message: str) -> None:
    """A bad record is an input error naming records[n].field; the records of its batch are not written."""
    with pytest.raises(InvalidInputError) as exc:
        store.import_([*RECORDS[:3], bad, RECORDS[3]])
    assert str(exc.value) == message
    assert store.stats()["count"] == 0


def test_earlier_batches_stay_written_and_a_rerun_completes(backend: BackendUnderTest) -> None:
    """A bad record late in a long import leaves a prefix written; the corrected import adds only the rest."""
    good = [{"content": f"bulk memory {i}", "vector": vector(f"bulk memory {i}")} for i in range(2500)]
    bad = [*good[:2400], {"content": "x", "created_at": "not a date"}, *good[2400:]]
    store = backend.store
    with pytest.raises(InvalidInputError, match=r"^records\[2400\]\.created_at "):
        store.import_(bad)
    written = [r["content"] for r in store.export()]
    assert 0 < len(written) <= 2400
    assert written == [g["content"] for g in good[: len(written)]]
    assert store.import_(good) == 2500 - len(written)
    assert [r["content"] for r in store.export()] == [g["content"] for g in good]


def test_export_is_a_snapshot_taken_at_its_first_item(store: Backend) -> None:
    """Writes made while an export is being read do not change what it yields."""
    store.import_(RECORDS)
    it = store.export()
    first = next(it)
    store.add("added during the export")
    store.delete(BY_TIME[-1]["id"])
    assert [first, *it] == BY_TIME
    assert store.stats()["count"] == 5
