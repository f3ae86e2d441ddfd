"""The conversation fields (occurred_at, speaker, role, session, namespace, replaces): what is stored comes back,
the defaults, the checks and their messages, and occurred_at as the time every time filter and order uses."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest

from memserver.contract.backend import MemoryFilter
from memserver.errors import InvalidInputError
from tests.contract.harness import CREATED_AT, MODES, Backend, BackendUnderTest, records

ISO_RULE = "must be an ISO 8601 date or date-time (e.g. 2026-11-30 or 2026-11-30T13:08:00Z), got"
ROLE_RULE = "must be one of user, assistant, participant, system, tool, got"
NAMESPACE_RULE = "must be 1-64 characters of letters, digits and _.:@- (e.g. user:alice), got"
CURSOR_RULE = "must be a next_cursor returned by list_page, got"
ID_RULE = "must be 32 hexadecimal characters (as returned by add), got"
UNKNOWN = "0123456789abcdef0123456789abcdef"
FULL = {
    "occurred_at": "2023-05-14T18:30:00+02:00",
    "speaker": " Maya ",
    "role": "user",
    "session": "chat-2023-05-14",
    "namespace": "user:maya",
}


def test_every_field_is_stored_and_returned(store: Backend) -> None:
    """add keeps every field (trimmed, occurred_at in the stored UTC format); get, list and export return them."""
    m = store.add("We are moving to Lisbon in June", tags=["plans"], source="chat", **FULL)
    assert m.to_dict() == {
        "id": m.id,
        "content": "We are moving to Lisbon in June",
        "created_at": m.created_at,
        "occurred_at": "2023-05-14T16:30:00.000000+00:00",
        "tags": ["plans"],
        "source": "chat",
        "speaker": "Maya",
        "role": "user",
        "session": "chat-2023-05-14",
        "namespace": "user:maya",
    }
    assert (m.occurred_at, m.speaker, m.role, m.session, m.namespace) == (
        "2023-05-14T16:30:00.000000+00:00",
        "Maya",
        "user",
        "chat-2023-05-14",
        "user:maya",
    )
    assert (m.replaces, m.replaced_by) == ("", "")
    assert store.get(m.id, namespace="user:maya") == m
    assert store.list_recent(namespace="user:maya") == [m]
    assert list(store.export()) == [m.to_dict()]


def test_the_defaults(store: Backend) -> None:
    """Without the fields: occurred_at is created_at, speaker/role/session are "", the namespace is "default";
    to_dict carries occurred_at and nothing else new."""
    before = datetime.now(timezone.utc)
    m = store.add("plain memory")
    assert CREATED_AT.match(m.occurred_at) and m.occurred_at == m.created_at
    assert before <= datetime.fromisoformat(m.occurred_at)
    assert (m.speaker, m.role, m.session, m.namespace, m.replaces, m.replaced_by) == ("", "", "", "default", "", "")
    assert set(m.to_dict()) == {"id", "content", "created_at", "occurred_at", "tags", "source"}
    assert store.get(m.id) == m and store.get(m.id, namespace="default") == m
    explicit = store.add("named default", namespace="default", speaker=None, role=None, session=None)
    assert explicit.namespace == "default" and "namespace" not in explicit.to_dict()


@pytest.mark.parametrize(
    ("given", "stored"),
    [
        ("2023-05-14", "2023-05-14T00:00:00.000000+00:00"),
        ("2023-05-14T09:00:00", "2023-05-14T09:00:00.000000+00:00"),
        ("2023-05-14T09:00:00Z", "2023-05-14T09:00:00.000000+00:00"),
        ("2023-05-14T09:00:00-07:00", "2023-05-14T16:00:00.000000+00:00"),
        ("2023-05-14 09:00:00.25", "2023-05-14T09:00:00.250000+00:00"),
    ],
)
def test_occurred_at_is_stored_in_utc(store: Backend, given: str, stored: str) -> None:
    """A date alone is 00:00 UTC that day, a naive time is UTC, an offset is converted."""
    assert store.add("dated", occurred_at=given).occurred_at == stored


def test_add_many_and_import_take_the_fields(backend: BackendUnderTest) -> None:
    """add_many items and import_ records carry the same fields; an export imported elsewhere keeps them all."""
    store = backend.store
    a, b = store.add_many(
        [
            {"content": "first turn", **FULL},
            {"content": "second turn", "speaker": "Ravi", "role": "assistant", "session": "s9", "namespace": "team"},
        ]
    )
    assert (a.speaker, a.namespace, b.speaker, b.role, b.namespace) == (
        "Maya",
        "user:maya",
        "Ravi",
        "assistant",
        "team",
    )
    assert store.import_([{"content": "imported turn", "created_at": "2024-01-01", **FULL}]) == 1
    exported = list(store.export(include_vectors=True))
    target, _ = backend.another()
    assert target.import_(exported) == 3
    assert list(target.export()) == [{k: v for k, v in r.items() if k != "vector"} for r in exported]
    for r in exported:
        got = target.get(r["id"], namespace=r.get("namespace"))
        assert got is not None and got.to_dict() == {k: v for k, v in r.items() if k != "vector"}


Call = Callable[[Backend], Any]
CASES: list[tuple[str, Call, str]] = [
    ("role", lambda s: s.add("x", role="bot"), f"role {ROLE_RULE} 'bot'"),
    ("role-case", lambda s: s.add("x", role="User"), f"role {ROLE_RULE} 'User'"),
    ("role-int", lambda s: s.add("x", role=1), f"role {ROLE_RULE} 1"),
    ("speaker-long", lambda s: s.add("x", speaker="s" * 101), "speaker is 101 characters; the limit is 100"),
    ("speaker-empty", lambda s: s.add("x", speaker="  "), "speaker must not be empty"),
    (
        "speaker-control",
        lambda s: s.add("x", speaker="a\tb"),
        "speaker must not contain control characters (newlines, tabs, ...)",
    ),
    ("speaker-int", lambda s: s.add("x", speaker=5), "speaker must be a string, got int"),
    ("session-long", lambda s: s.add("x", session="s" * 201), "session is 201 characters; the limit is 200"),
    (
        "session-control",
        lambda s: s.add("x", session="a\nb"),
        "session must not contain control characters (newlines, tabs, ...)",
    ),
    ("namespace-space", lambda s: s.add("x", namespace="a b"), f"namespace {NAMESPACE_RULE} 'a b'"),
    ("namespace-long", lambda s: s.add("x", namespace="n" * 65), f"namespace {NAMESPACE_RULE} '{'n' * 65}'"),
    ("namespace-empty", lambda s: s.add("x", namespace=""), f"namespace {NAMESPACE_RULE} ''"),
    ("namespace-int", lambda s: s.add("x", namespace=3), "namespace must be a string, got int"),
    ("occurred-words", lambda s: s.add("x", occurred_at="last May"), f"occurred_at {ISO_RULE} 'last May'"),
    ("occurred-int", lambda s: s.add("x", occurred_at=2023), "occurred_at must be an ISO 8601 string, got int"),
    ("replaces-malformed", lambda s: s.add("x", replaces="nope"), f"replaces {ID_RULE} 'nope'"),
    (
        "replaces-unknown",
        lambda s: s.add("x", replaces=UNKNOWN),
        f"replaces: no memory with id {UNKNOWN} in namespace 'default'",
    ),
    ("many-role", lambda s: s.add_many(["ok", {"content": "x", "role": "bot"}]), f"items[1].role {ROLE_RULE} 'bot'"),
    (
        "many-namespace",
        lambda s: s.add_many(["ok", {"content": "x", "namespace": "no/slash"}]),
        f"items[1].namespace {NAMESPACE_RULE} 'no/slash'",
    ),
    (
        "many-replaces",
        lambda s: s.add_many(["ok", {"content": "x", "replaces": UNKNOWN}]),
        f"items[1].replaces: no memory with id {UNKNOWN} in namespace 'default'",
    ),
    (
        "import-occurred",
        lambda s: s.import_([{"content": "ok"}, {"content": "x", "occurred_at": "soon"}]),
        f"records[1].occurred_at {ISO_RULE} 'soon'",
    ),
    (
        "import-speaker",
        lambda s: s.import_([{"content": "ok"}, {"content": "x", "speaker": ""}]),
        "records[1].speaker must not be empty",
    ),
    ("search-role", lambda s: s.search("q", role="bot"), f"role {ROLE_RULE} 'bot'"),
    ("search-namespace", lambda s: s.search("q", namespace="a b"), f"namespace {NAMESPACE_RULE} 'a b'"),
    ("search-as-of", lambda s: s.search("q", as_of="then"), f"as_of {ISO_RULE} 'then'"),
    ("search-session", lambda s: s.search("q", session=""), "session must not be empty"),
    ("get-namespace", lambda s: s.get(UNKNOWN, namespace="a b"), f"namespace {NAMESPACE_RULE} 'a b'"),
    ("delete-namespace", lambda s: s.delete(UNKNOWN, namespace="?"), f"namespace {NAMESPACE_RULE} '?'"),
    ("tag-counts-namespace", lambda s: s.tag_counts(namespace="a b"), f"namespace {NAMESPACE_RULE} 'a b'"),
    ("list-speaker", lambda s: s.list_recent(speaker="s" * 101), "speaker is 101 characters; the limit is 100"),
    (
        "page-cursor",
        lambda s: s.list_page(cursor="abc"),
        "cursor must be a next_cursor returned by list_page, got 'abc'",
    ),
    ("page-cursor-int", lambda s: s.list_page(cursor=5), "cursor must be a next_cursor returned by list_page, got 5"),
    ("page-as-of", lambda s: s.list_page(as_of="2025-02-30"), f"as_of {ISO_RULE} '2025-02-30'"),
    ("delete-many-str", lambda s: s.delete_many("abc"), "ids must be a list of memory ids, got str"),
    ("delete-many-none", lambda s: s.delete_many(None), "ids must be a list of memory ids, got NoneType"),
    ("delete-many-bad", lambda s: s.delete_many([UNKNOWN, "zz"]), f"ids[1] {ID_RULE} 'zz'"),
    (
        "select-empty",
        lambda s: s.select(MemoryFilter()),
        "filter selects every memory of namespace 'default': give a criterion "
        "(tags, source, session, speaker, role, since, until, before), or everything=True",
    ),
    (
        "select-empty-namespace",
        lambda s: s.select(MemoryFilter(namespace="team")),
        "filter selects every memory of namespace 'team': give a criterion "
        "(tags, source, session, speaker, role, since, until, before), or everything=True",
    ),
    ("select-role", lambda s: s.select(MemoryFilter(role="bot")), f"role {ROLE_RULE} 'bot'"),
    ("select-before", lambda s: s.select(MemoryFilter(before="x")), f"before {ISO_RULE} 'x'"),
    (
        "select-limit",
        lambda s: s.select(MemoryFilter(everything=True), limit=0),
        "limit must be between 1 and 1000, got 0",
    ),
    ("select-not-a-filter", lambda s: s.select({"tags": ["a"]}), "filter must be a MemoryFilter, got dict"),
]


@pytest.mark.parametrize(("call", "message"), [pytest.param(c, m, id=name) for name, c, m in CASES])
def test_a_bad_field_is_refused_naming_it(store: Backend, call: Call, message: str) -> None:
    """InvalidInputError with exactly this message, and nothing stored or forgotten."""
    kept = store.add("an existing memory", tags=["kept"], speaker="Ana", session="s1")
    with pytest.raises(InvalidInputError) as exc:
        call(store)
    assert str(exc.value) == message
    assert list(store.export()) == [kept.to_dict()]


# --- occurred_at is the time of the time filters, the listings and the date words ---------------------------------

TODAY = "2026-01-10T12:00:00Z"
DATED = [  # stored today (an import of an old chat), said long ago
    ("We picked the green tiles for the kitchen", "2023-05-02T10:00:00Z"),
    ("Ravi's sister visits in the autumn", "2023-05-28T21:15:00Z"),
    ("The boiler needs a new valve", "2023-06-03T08:00:00Z"),
    ("Plant the tomatoes after the frost", "2023-04-30T23:59:59Z"),
]


@pytest.fixture
def dated(store: Backend) -> Backend:
    store.import_([{"content": c, "created_at": TODAY, "occurred_at": at} for c, at in DATED])
    return store


@pytest.mark.parametrize("mode", MODES)
def test_since_and_until_bound_occurred_at(dated: Backend, mode: str) -> None:
    """Memories stored today but said in May 2023 are found by a May 2023 window, and not by a window of today."""
    words = "tiles sister boiler tomatoes"
    may = {h.memory.content for h in dated.search(words, limit=10, mode=mode, since="2023-05-01", until="2023-05-31")}
    assert may == {DATED[0][0], DATED[1][0]}
    assert dated.search(words, limit=10, mode=mode, since="2026-01-01") == []


def test_list_recent_orders_by_occurred_at(dated: Backend) -> None:
    """Newest occurred_at first, whatever the storage order or time."""
    order = [m.content for m in dated.list_recent()]
    assert order == [DATED[2][0], DATED[1][0], DATED[0][0], DATED[3][0]]
    assert list(dated.export()) == sorted(dated.export(), key=lambda r: r["occurred_at"])


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_the_date_words_come_from_occurred_at(dated: Backend, mode: str) -> None:
    """ "What did we discuss in May 2023": the keyword side matches the memories said in May 2023 (their date
    words), although they were stored in 2026; none of their own words is in the question."""
    hits = dated.search("what did we discuss in May 2023", limit=2, mode=mode)
    assert {h.memory.content for h in hits} == {DATED[0][0], DATED[1][0]}
    assert dated.search("what did we discuss on 3 June 2023", limit=1, mode=mode)[0].memory.content == DATED[2][0]
    assert dated.search("notes of January 2026", limit=5, mode="keyword") == []


# --- speaker, role and session: filters before ranking ---------------------------------------------------------------

QUERY = "harbour"


def _population(store: Backend) -> dict[str, str]:
    """60 strong matches that miss the filter one way each, and one weak match that passes it."""
    strong = []
    for i in range(20):
        strong += [
            {"content": f"{QUERY} strong{i}a", "speaker": "Bob", "role": "user", "session": "s1"},
            {"content": f"{QUERY} strong{i}b", "speaker": "Alice", "role": "assistant", "session": "s1"},
            {"content": f"{QUERY} strong{i}c", "speaker": "Alice", "role": "user", "session": "s2"},
        ]
    weak = {"content": f"{QUERY} quay pier dock wharf mooring", "speaker": "Alice", "role": "user", "session": "s1"}
    store.add_many([*strong, weak])
    return weak


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "filters",
    [{"speaker": "Alice", "role": "user", "session": "s1"}, {"speaker": " Alice ", "role": "user", "session": "s1"}],
    ids=["exact", "trimmed"],
)
def test_speaker_role_and_session_filter_before_ranking(store: Backend, mode: str, filters: dict[str, str]) -> None:
    """The one memory passing all three filters is found, though 60 others rank above it without them."""
    weak = _population(store)
    assert weak["content"] not in {h.memory.content for h in store.search(QUERY, limit=10, mode=mode)}
    hits = store.search(QUERY, limit=5, mode=mode, **filters)
    assert [h.memory.content for h in hits] == [weak["content"]]


@pytest.mark.parametrize(
    ("filters", "expected"),
    [({"speaker": "Bob"}, 20), ({"role": "assistant"}, 20), ({"session": "s2"}, 20), ({"speaker": "alice"}, 0)],
)
def test_each_label_filter_alone(store: Backend, filters: dict[str, str], expected: int) -> None:
    """Each filter selects the memories with exactly that value (case counts)."""
    _population(store)
    assert len(store.search(QUERY, limit=100, mode="semantic", **filters)) == expected
    assert len(store.list_page(limit=100, **filters).memories) == expected


def test_list_recent_filters_by_session_and_speaker(store: Backend) -> None:
    _population(store)
    listed = store.list_recent(limit=100, session="s1", speaker="Alice")
    assert listed[0].content.endswith("mooring") and len(listed) == 21
    assert all((m.session, m.speaker) == ("s1", "Alice") for m in listed)


def test_sessions_counts_the_memories_of_each_session(store: Backend) -> None:
    """sessions(): current memories per session, the most recent session first; no session, no entry."""
    store.import_(
        [
            {"content": "old chat", "session": "a", "occurred_at": "2024-01-01"},
            {"content": "old chat again", "session": "a", "occurred_at": "2024-01-02"},
            {"content": "newer chat", "session": "b", "occurred_at": "2024-03-01"},
            {"content": "no session"},
            {"content": "elsewhere", "session": "c", "namespace": "other"},
        ]
    )
    assert list(store.sessions().items()) == [("b", 1), ("a", 2)]
    assert store.sessions(namespace="other") == {"c": 1}
    assert records(store.list_recent(session="a")) == records(
        [m for m in store.list_recent(limit=10) if m.session == "a"]
    )
