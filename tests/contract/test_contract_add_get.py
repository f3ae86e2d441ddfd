"""add / add_many / get: what is stored is what comes back, with the input rules every backend shares."""

from __future__ import annotations

from datetime import datetime, timezone

from tests.contract.harness import CREATED_AT, ID, Backend, BackendUnderTest, records


def test_add_returns_the_memory_as_stored(store: Backend) -> None:
    """add trims the content, keeps tags once each in first-seen order, trims the source, and get returns the same."""
    m = store.add(
        "  The staging database password rotates every Monday \n", tags=[" ops", "db", "ops ", "db"], source=" chat "
    )
    assert ID.match(m.id) and CREATED_AT.match(m.created_at)
    assert m.to_dict() == {
        "id": m.id,
        "content": "The staging database password rotates every Monday",
        "created_at": m.created_at,
        "occurred_at": m.created_at,  # when it happened: the storage time, as none was given
        "tags": ["ops", "db"],
        "source": "chat",
    }
    assert (m.duplicate, m.similar) == (False, ())
    got = store.get(m.id)
    assert got is not None and got.to_dict() == m.to_dict() and (got.duplicate, got.similar) == (False, ())


def test_defaults_are_no_tags_and_an_empty_source(store: Backend) -> None:
    """Without tags or source a memory has tags () and source "" (None means the same)."""
    a = store.add("no labels at all")
    b = store.add("labels given as None", tags=None, source=None)
    assert [(m.tags, m.source) for m in (a, b)] == [((), ""), ((), "")]
    assert [store.get(m.id).to_dict() for m in (a, b)] == records([a, b])  # type: ignore[union-attr]


def test_inner_whitespace_is_kept(store: Backend) -> None:
    """Only the ends are trimmed: the content keeps its inner spaces and line breaks."""
    m = store.add("\tline one\n\nline  two  ")
    assert m.content == "line one\n\nline  two"
    assert store.get(m.id).content == "line one\n\nline  two"  # type: ignore[union-attr]


def test_created_at_is_the_time_of_the_add_in_utc(store: Backend) -> None:
    """created_at is ISO 8601 in UTC with microseconds and "+00:00", taken during the add."""
    before = datetime.now(timezone.utc)
    m = store.add("timestamped")
    after = datetime.now(timezone.utc)
    assert CREATED_AT.match(m.created_at)
    assert before <= datetime.fromisoformat(m.created_at) <= after


def test_ids_are_32_lowercase_hex_and_unique(store: Backend) -> None:
    """Every new memory gets its own id of 32 lower-case hexadecimal characters."""
    ms = store.add_many([f"memory number {i}" for i in range(50)])
    assert all(ID.match(m.id) for m in ms)
    assert len({m.id for m in ms}) == 50


def test_get_accepts_an_id_in_upper_case_or_with_spaces(store: Backend) -> None:
    """get normalises the id the way add returned it (trimmed, lower case)."""
    m = store.add("find me by any spelling of my id")
    assert store.get(m.id.upper()).to_dict() == m.to_dict()  # type: ignore[union-attr]
    assert store.get(f"  {m.id} ").to_dict() == m.to_dict()  # type: ignore[union-attr]


def test_get_of_an_unknown_id_is_none(store: Backend) -> None:
    """A well-formed id that names no memory returns None."""
    store.add("something else")
    assert store.get("0123456789abcdef0123456789abcdef") is None


def test_tags_are_case_sensitive(store: Backend) -> None:
    """Tags that differ only in case are different tags."""
    m = store.add("mixed case tags", tags=["Ops", "ops", "OPS"])
    assert m.tags == ("Ops", "ops", "OPS")
    assert store.tag_counts() == {"OPS": 1, "Ops": 1, "ops": 1}


def test_unicode_round_trips(store: Backend) -> None:
    """Accents, emoji, CJK and right-to-left text come back exactly, in content, tags and source."""
    content = "Zoë's café in São Paulo 😀 — 日本語のメモ — שלום עולם — مرحبا"
    m = store.add(content, tags=["café", "日本", "עברית", "😀"], source="ノート/é")
    assert m.to_dict() == {
        "id": m.id,
        "content": content,
        "created_at": m.created_at,
        "occurred_at": m.created_at,
        "tags": ["café", "日本", "עברית", "😀"],
        "source": "ノート/é",
    }
    assert store.get(m.id).to_dict() == m.to_dict()  # type: ignore[union-attr]
    assert list(store.export()) == [m.to_dict()]


def test_add_many_returns_the_memories_in_input_order(store: Backend) -> None:
    """add_many takes strings or dicts (content, tags, source) and returns one memory per item, in order."""
    ms = store.add_many(
        [
            "a plain string",
            {"content": " a dict ", "tags": ["x", "y", "x"], "source": "import"},
            {"content": "only content"},
            {"content": "labels None", "tags": None, "source": None},
        ]
    )
    assert [(m.content, m.tags, m.source, m.duplicate, m.similar) for m in ms] == [
        ("a plain string", (), "", False, ()),
        ("a dict", ("x", "y"), "import", False, ()),
        ("only content", (), "", False, ()),
        ("labels None", (), "", False, ()),
    ]
    assert [store.get(m.id).to_dict() for m in ms] == records(ms)  # type: ignore[union-attr]


def test_add_many_of_nothing_writes_nothing(store: Backend) -> None:
    """An empty batch returns [] and stores nothing."""
    assert store.add_many([]) == []
    assert store.stats()["count"] == 0


def test_values_at_the_limits_are_accepted(store: Backend) -> None:
    """20,000 characters of content (after trimming), 20 distinct tags of 64 characters, a 200-character source."""
    tags = [f"{i:02d}" + "t" * 62 for i in range(20)]
    m = store.add("  " + "x" * 20_000 + "  ", tags=[*tags, tags[0]], source="s" * 200)
    assert (len(m.content), m.tags, m.source) == (20_000, tuple(tags), "s" * 200)
    assert store.get(m.id).to_dict() == m.to_dict()  # type: ignore[union-attr]


def test_control_characters_are_allowed_in_content(store: Backend) -> None:
    """Content is free text: tabs, newlines and other control characters inside it are kept."""
    m = store.add("col1\tcol2\x00end\x1b")
    assert store.get(m.id).content == "col1\tcol2\x00end\x1b"  # type: ignore[union-attr]


def test_tags_may_be_a_tuple(store: Backend) -> None:
    """Any list or tuple of strings is accepted as tags."""
    assert store.add("tuple tags", tags=("a", "b")).tags == ("a", "b")
    assert store.list_recent(tags=("b",))[0].content == "tuple tags"


def test_reads_see_writes_of_another_backend_on_the_same_storage(backend: BackendUnderTest) -> None:
    """A memory added through one open backend is read at once through another open on the same storage."""
    other = backend.twin()
    m = backend.store.add("written by the first")
    assert other.get(m.id).to_dict() == m.to_dict()  # type: ignore[union-attr]
    n = other.add("written by the second")
    assert [x.id for x in backend.store.list_recent()] == [n.id, m.id]
    assert backend.store.add("written by the second").id == n.id  # dedup sees the other's write too
