"""Bad input to every method: an InvalidInputError whose message names the argument and the rule, word for word
(both engines share one set of input checks), and nothing written or lost."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from memserver.errors import InvalidInputError
from tests.contract.harness import Backend

ID_RULE = "must be 32 hexadecimal characters (as returned by add), got"
ISO_RULE = "must be an ISO 8601 date or date-time (e.g. 2026-11-30 or 2026-11-30T13:08:00Z), got"
TOO_MANY_TAGS = [f"t{i}" for i in range(21)]

Call = Callable[[Backend], Any]

CASES: list[tuple[str, Call, str]] = [
    # add: content
    ("add-empty", lambda s: s.add(""), "content must not be empty"),
    ("add-blank", lambda s: s.add("  \n\t "), "content must not be empty"),
    ("add-int", lambda s: s.add(42), "content must be a string, got int"),
    ("add-none", lambda s: s.add(None), "content must be a string, got NoneType"),
    ("add-long", lambda s: s.add("x" * 20_001), "content is 20001 characters; the limit is 20000"),
    ("add-surrogate", lambda s: s.add("bad \ud800 text"), "content is not valid Unicode text (a lone surrogate at 4)"),
    # add: tags
    ("tags-str", lambda s: s.add("x", tags="ops"), "tags must be a list of strings, got str"),
    ("tags-set", lambda s: s.add("x", tags={"ops"}), "tags must be a list of strings, got set"),
    ("tags-int-item", lambda s: s.add("x", tags=["a", 1]), "tags must be a list of strings; found int"),
    ("tags-empty-item", lambda s: s.add("x", tags=["a", ""]), "tags must not contain empty strings"),
    ("tags-blank-item", lambda s: s.add("x", tags=["  "]), "tags must not contain empty strings"),
    (
        "tags-long-item",
        lambda s: s.add("x", tags=["t" * 65]),
        "tags: tag 'tttttttttttttttttttt'... is 65 characters; the limit is 64",
    ),
    ("tags-control", lambda s: s.add("x", tags=["a\nb"]), "tags: tag 'a\\nb' contains a control character"),
    ("tags-too-many", lambda s: s.add("x", tags=TOO_MANY_TAGS), "tags has 21 distinct tags; the limit is 20"),
    ("tags-surrogate", lambda s: s.add("x", tags=["\ud800"]), "tags is not valid Unicode text (a lone surrogate at 0)"),
    # add: source
    ("source-int", lambda s: s.add("x", source=3), "source must be a string, got int"),
    (
        "source-control",
        lambda s: s.add("x", source="a\nb"),
        "source must not contain control characters (newlines, tabs, ...)",
    ),
    ("source-long", lambda s: s.add("x", source="s" * 201), "source is 201 characters; the limit is 200"),
    (
        "source-surrogate",
        lambda s: s.add("x", source="\ud800"),
        "source is not valid Unicode text (a lone surrogate at 0)",
    ),
    # add_many: items are named by position (a batch of one reads like add)
    ("many-int", lambda s: s.add_many(["ok", 5]), "items[1] must be a string or a dict, got int"),
    ("many-empty", lambda s: s.add_many(["ok", ""]), "items[1].content must not be empty"),
    ("many-one-empty", lambda s: s.add_many([""]), "content must not be empty"),
    (
        "many-no-content",
        lambda s: s.add_many(["ok", {"tags": ["a"]}]),
        "items[1].content must be a string, got NoneType",
    ),
    (
        "many-tags",
        lambda s: s.add_many(["ok", {"content": "x", "tags": "a"}]),
        "items[1].tags must be a list of strings, got str",
    ),
    (
        "many-field",
        lambda s: s.add_many(["ok", {"content": "x", "color": "red"}]),
        "items[1].color is not a memory field",
    ),
    ("many-one-field", lambda s: s.add_many([{"content": "x", "color": "red"}]), "item.color is not a memory field"),
    # search
    ("query-empty", lambda s: s.search(""), "query must not be empty"),
    ("query-none", lambda s: s.search(None), "query must be a string, got NoneType"),
    ("query-long", lambda s: s.search("q" * 20_001), "query is 20001 characters; the limit is 20000"),
    ("limit-zero", lambda s: s.search("q", limit=0), "limit must be between 1 and 1000, got 0"),
    ("limit-big", lambda s: s.search("q", limit=1001), "limit must be between 1 and 1000, got 1001"),
    ("limit-bool", lambda s: s.search("q", limit=True), "limit must be an integer, got bool"),
    ("limit-float", lambda s: s.search("q", limit=2.0), "limit must be an integer, got float"),
    ("limit-str", lambda s: s.search("q", limit="5"), "limit must be an integer, got str"),
    ("search-tags", lambda s: s.search("q", tags="x"), "tags must be a list of strings, got str"),
    ("search-tag-empty", lambda s: s.search("q", tags=[""]), "tags must not contain empty strings"),
    ("search-source", lambda s: s.search("q", source=5), "source must be a string, got int"),
    ("since-words", lambda s: s.search("q", since="last week"), f"since {ISO_RULE} 'last week'"),
    ("since-month-13", lambda s: s.search("q", since="2025-13-01"), f"since {ISO_RULE} '2025-13-01'"),
    ("until-int", lambda s: s.search("q", until=5), "until must be an ISO 8601 string, got int"),
    (
        "until-last-day",
        lambda s: s.search("q", until="9999-12-31"),
        "until '9999-12-31' is outside the supported calendar range once taken to UTC",
    ),
    (
        "since-first-instant",
        lambda s: s.search("q", since="0001-01-01T00:00:00+01:00"),
        "since '0001-01-01T00:00:00+01:00' is outside the supported calendar range once taken to UTC",
    ),
    (
        "since-after-until",
        lambda s: s.search("q", since="2025-02-01", until="2025-01-01"),
        "since (2025-02-01) must not be later than until (2025-01-01)",
    ),
    ("min-score-big", lambda s: s.search("q", min_score=2), "min_score must be between -1 and 1, got 2"),
    ("min-score-low", lambda s: s.search("q", min_score=-1.5), "min_score must be between -1 and 1, got -1.5"),
    (
        "min-score-nan",
        lambda s: s.search("q", min_score=float("nan")),
        "min_score must be a number between -1 and 1, got nan",
    ),
    (
        "min-score-bool",
        lambda s: s.search("q", min_score=True),
        "min_score must be a number between -1 and 1, got True",
    ),
    (
        "min-score-str",
        lambda s: s.search("q", min_score="0.5"),
        "min_score must be a number between -1 and 1, got '0.5'",
    ),
    ("mode", lambda s: s.search("q", mode="fuzzy"), "mode must be one of hybrid, semantic, keyword, got 'fuzzy'"),
    # get / delete
    ("get-short", lambda s: s.get("nope"), f"memory_id {ID_RULE} 'nope'"),
    ("get-none", lambda s: s.get(None), f"memory_id {ID_RULE} None"),
    ("get-int", lambda s: s.get(5), f"memory_id {ID_RULE} 5"),
    ("get-not-hex", lambda s: s.get("g" * 32), f"memory_id {ID_RULE} '{'g' * 32}'"),
    ("get-long", lambda s: s.get("a" * 33), f"memory_id {ID_RULE} '{'a' * 33}'"),
    ("delete-short", lambda s: s.delete("zz"), f"memory_id {ID_RULE} 'zz'"),
    ("delete-none", lambda s: s.delete(None), f"memory_id {ID_RULE} None"),
    # list_recent
    ("recent-zero", lambda s: s.list_recent(limit=0), "limit must be between 1 and 1000, got 0"),
    ("recent-negative", lambda s: s.list_recent(limit=-1), "limit must be between 1 and 1000, got -1"),
    ("recent-none", lambda s: s.list_recent(limit=None), "limit must be an integer, got NoneType"),
    ("recent-tags", lambda s: s.list_recent(tags="x"), "tags must be a list of strings, got str"),
    ("recent-tag-empty", lambda s: s.list_recent(tags=[""]), "tags must not contain empty strings"),
]


@pytest.mark.parametrize(("call", "message"), [pytest.param(c, m, id=name) for name, c, m in CASES])
def test_bad_input_is_refused_with_a_message_naming_the_rule(store: Backend, call: Call, message: str) -> None:
    """The call raises InvalidInputError with exactly this message, and the stored memories are unchanged."""
    kept = store.add("an existing memory", tags=["kept"], source="here")
    with pytest.raises(InvalidInputError) as exc:
        call(store)
    assert str(exc.value) == message
    assert list(store.export()) == [kept.to_dict()]


def test_a_bad_item_writes_nothing_of_its_batch(store: Backend) -> None:
    """add_many checks every item before writing any: one bad item, even the last, stores none of them."""
    with pytest.raises(InvalidInputError):
        store.add_many(["fine", "also fine", {"content": "x", "tags": "not a list"}])
    assert store.stats()["count"] == 0


def test_an_input_error_is_a_value_error(store: Backend) -> None:
    """InvalidInputError is a ValueError, so generic callers can catch it as one."""
    with pytest.raises(ValueError):
        store.get("nope")


# --- batches: named by position, and not mistaken for items -----------------------------------------------------


@pytest.mark.parametrize(
    ("call", "message"),
    [
        pytest.param(
            lambda s: s.add_many(["ok", {"content": "x", "source": 5}]),
            "items[1].source must be a string, got int",
            id="add_many",
        ),
        pytest.param(
            lambda s: s.import_([{"content": "ok"}, {"content": "x", "source": "a\nb"}]),
            "records[1].source must not contain control characters (newlines, tabs, ...)",
            id="import_",
        ),
    ],
)
def test_a_bad_source_in_a_batch_is_named_by_position(store: Backend, call: Call, message: str) -> None:
    """In add_many and import_, a bad source is named like every other field: items[n].source, records[n].source."""
    with pytest.raises(InvalidInputError) as exc:
        call(store)
    assert str(exc.value) == message


def test_add_many_refuses_a_string(store: Backend) -> None:
    """add_many("text") is an input error (a list of items was meant), and stores nothing."""
    with pytest.raises(InvalidInputError, match="items"):
        store.add_many("abc")
    assert store.stats()["count"] == 0


@pytest.mark.parametrize("call", [lambda s: s.add_many(None), lambda s: s.import_(None)], ids=["add_many", "import_"])
def test_none_instead_of_a_list_is_an_input_error(store: Backend, call: Call) -> None:
    """Passing None for the list of items or records is an InvalidInputError, like every other wrong type."""
    with pytest.raises(InvalidInputError):
        call(store)
