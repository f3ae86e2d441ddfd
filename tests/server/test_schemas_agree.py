"""The advertised input schemas promise only what the store accepts: for a few thousand generated values per field,
every value the schema accepts is accepted by the store, and on the values both can judge alike (the calendar, for
dates) they agree exactly. Values come from a seeded generator biased to the edges: month lengths, leap years,
years 0000/0001/9999/10000, 24:00, :60, offsets that cross the ends of the calendar once taken to UTC, full-width
digits, control characters, Unicode white space, lone surrogates, lengths around each limit."""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memserver.errors import InvalidInputError
from memserver.features import tools
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder

N = 3000
SEED = 20260131


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[MemoryStore]:
    with MemoryStore(path=tmp_path_factory.mktemp("agree"), embedder=FakeEmbedder()) as opened:
        yield opened


def schema_accepts(tool: Any, args: dict[str, Any]) -> dict[str, Any] | None:
    """The arguments as the server passes them on (defaults filled in), or None if the schema refuses them."""
    try:
        return tools.validate_arguments(tool, args)
    except tools.ArgumentError:
        return None


def store_accepts(call: Callable[[], Any]) -> bool:
    try:
        call()
    except InvalidInputError:
        return False
    return True


# --- generators ----------------------------------------------------------------------------------------------------

FULL_WIDTH = str.maketrans("0123456789", "０１２３４５６７８９")
SPACES = ["\t", "\n", "\r", "\x0b", "\x0c", "\x1c", "\x1f", " ", "\x85", "\xa0", "\u2003", "\u2028", "\u3000"]
ODD = ["\x00", "\x07", "\x7f", "\ufeff", "\u200f", "\u202e", "\u0301", "😀", "👩‍💻", "ß", "İ", "\ud83d", "\udc00", "é"]
PLAIN = "abcxyzABC019-_:./#@ "


def two_digits(rng: random.Random, edges: tuple[int, ...]) -> str:
    return f"{rng.choice(edges) if rng.random() < 0.6 else rng.randrange(100):02d}"


def a_date(rng: random.Random) -> str:
    year = rng.choice([0, 1, 2, 4, 100, 400, 1900, 1999, 2000, 2023, 2024, 2100, 9998, 9999, rng.randrange(10000)])
    text = f"{year:04d}-{two_digits(rng, (0, 1, 2, 12, 13))}-{two_digits(rng, (0, 1, 28, 29, 30, 31, 32))}"
    if rng.random() < 0.35:  # the first and last days of the calendar, where UTC conversion overflows
        text = rng.choice(["0001-01-01", "9999-12-31", "9999-12-30", "0001-01-02"])
    if rng.random() < 0.6:
        text += rng.choice("T ") + two_digits(rng, (0, 12, 23, 24)) + ":" + two_digits(rng, (0, 59, 60))
        if rng.random() < 0.7:
            text += ":" + two_digits(rng, (0, 59, 60, 61))
            if rng.random() < 0.4:
                text += "." + "".join(rng.choice("0123456789") for _ in range(rng.choice([1, 2, 3, 4, 6, 7])))
        if rng.random() < 0.7:
            offset = rng.choice("+-") + two_digits(rng, (0, 1, 5, 14, 23, 24)) + rng.choice([":", ":", ""])
            text += rng.choice(["Z", "z", offset + two_digits(rng, (0, 30, 59, 60))])
    return mangle_date(rng, text) if rng.random() < 0.1 else text


def mangle_date(rng: random.Random, text: str) -> str:
    return rng.choice(
        [text.translate(FULL_WIDTH), " " + text, text + "\n", text.replace("-", "/"), "1" + text, text[:-1], ""]
    )


CANONICAL_DATE = re.compile(
    r"[0-9]{4}-[0-9]{2}-[0-9]{2}([T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.([0-9]{3}|[0-9]{6}))?)?(Z|[+-][0-9]{2}:[0-9]{2})?)?"
)


def edge_day_with_offset(value: str) -> bool:
    """On 0001-01-01 and 9999-12-31 the schema refuses every offset that could cross the calendar's edge, also
    the ones that do not quite (9999-12-31T10:00-01:59): the one place where it refuses more than the store."""
    offset = re.search(r"[+-](?!00:00)[0-9]{2}:[0-9]{2}$", value)
    return value[:10] in ("0001-01-01", "9999-12-31") and offset is not None


def a_string(rng: random.Random, limit: int) -> str:
    length = rng.choice([0, 1, 2, 3, limit - 1, limit, limit + 1, rng.randrange(limit + 2)])
    alphabet = rng.choice([PLAIN, PLAIN + "".join(SPACES), PLAIN + "".join(ODD), "".join(SPACES)])
    piece = "".join(rng.choice(alphabet) for _ in range(min(length, 97)))  # long texts repeat a random piece
    text = (piece * (length // max(len(piece), 1) + 1))[:length]
    if rng.random() < 0.3:  # white space or a control character at an end
        text = rng.choice(SPACES + ODD[:3]) + text[1:] if rng.random() < 0.5 else text[:-1] + rng.choice(SPACES)
    return text


def strips_controls(text: str) -> bool:
    """Whether str.strip() could remove a control character from `text` (where the schema is stricter)."""
    return any(c in "\t\n\x0b\x0c\r\x1c\x1d\x1e\x1f" for c in text)


def values(make: Callable[[random.Random], Any], salt: int) -> list[Any]:
    rng = random.Random(SEED + salt)
    return [make(rng) for _ in range(N)]


# --- the fields ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("field", ["since", "until"])
def test_dates_agree(store: MemoryStore, field: str) -> None:
    """since/until: every date the pattern accepts the store takes; on canonical syntax they agree exactly (but for
    offsets on the calendar's first and last days, see edge_day_with_offset)."""
    accepted = 0
    for value in values(a_date, 1):
        by_schema = schema_accepts(tools.RECALL, {"query": "x", field: value}) is not None
        by_store = store_accepts(lambda v=value: store.search("x", **{field: v}))
        assert by_store or not by_schema, f"schema accepts {value!r}, the store refuses it"
        if CANONICAL_DATE.fullmatch(value) and not edge_day_with_offset(value):
            assert by_schema == by_store, f"{value!r}: schema {by_schema}, store {by_store}"
        accepted += by_schema
    assert N * 0.1 < accepted < N * 0.9  # the generator covers both sides


@pytest.mark.parametrize(
    ("tool", "field", "limit", "call"),
    [
        (tools.REMEMBER, "content", tools.MAX_CONTENT_CHARS, lambda s, v: s.search(v, limit=1)),
        (tools.RECALL, "query", tools.MAX_QUERY_CHARS, lambda s, v: s.search(v, limit=1)),
        (tools.RECALL, "tags", tools.MAX_TAG_CHARS, lambda s, v: s.search("x", tags=[v])),
        (tools.RECALL, "source", tools.MAX_SOURCE_CHARS, lambda s, v: s.search("x", source=v)),
    ],
    ids=["content", "query", "tags", "source"],
)
def test_texts_agree(store: MemoryStore, tool: Any, field: str, limit: int, call: Callable[..., Any]) -> None:
    """content/query/tag/source: what the schema accepts the store takes, and they agree wherever str.strip()
    cannot remove a control character (the store strips first; the schema cannot) and the length is in bounds.
    (content is checked by the store's text rule through search(), the same check add() makes, without a write.)"""
    required = {"content": "x"} if tool is tools.REMEMBER else {"query": "x"}
    accepted = 0
    for value in values(lambda rng: a_string(rng, limit), sum(map(ord, field))):
        arg = [value] if field == "tags" else value
        by_schema = schema_accepts(tool, {**required, field: arg}) is not None
        by_store = store_accepts(lambda v=value: call(store, v))
        assert by_store or not by_schema, f"schema accepts {value!r}, the store refuses it"
        if len(value) <= limit and not strips_controls(value):
            assert by_schema == by_store, f"{value!r}: schema {by_schema}, store {by_store}"
        accepted += by_schema
    assert N * 0.2 < accepted < N * 0.9


@pytest.mark.parametrize(
    ("tool", "field", "limit", "call"),
    [
        (tools.RECALL, "speaker", tools.MAX_SPEAKER_CHARS, lambda s, v: s.search("x", speaker=v)),
        (tools.RECALL, "session", tools.MAX_SESSION_CHARS, lambda s, v: s.search("x", session=v)),
        (tools.LIST_RECENT, "speaker", tools.MAX_SPEAKER_CHARS, lambda s, v: s.list_page(speaker=v)),
        (tools.LIST_RECENT, "session", tools.MAX_SESSION_CHARS, lambda s, v: s.list_page(session=v)),
    ],
    ids=["recall-speaker", "recall-session", "list-speaker", "list-session"],
)
def test_labels_agree(store: MemoryStore, tool: Any, field: str, limit: int, call: Callable[..., Any]) -> None:
    """speaker/session (the conversation labels): what the schema accepts the store takes; they agree wherever
    str.strip() cannot remove a control character and the length is in bounds (as for tags)."""
    required = {"query": "x"} if tool is tools.RECALL else {}
    accepted = 0
    for value in values(lambda rng: a_string(rng, limit), sum(map(ord, tool.name + field))):
        by_schema = schema_accepts(tool, {**required, field: value}) is not None
        by_store = store_accepts(lambda v=value: call(store, v))
        assert by_store or not by_schema, f"schema accepts {value!r}, the store refuses it"
        if len(value) <= limit and not strips_controls(value):
            assert by_schema == by_store, f"{value!r}: schema {by_schema}, store {by_store}"
        accepted += by_schema
    assert N * 0.2 < accepted < N * 0.9


def a_namespace(rng: random.Random) -> str:
    alphabet = rng.choice(["abcXYZ019_.:@-", "abc:@-" + "".join(SPACES), "ab/ ?#%&=" + "".join(ODD)])
    length = rng.choice([0, 1, 2, 63, 64, 65, rng.randrange(70)])
    text = "".join(rng.choice(alphabet) for _ in range(length))
    return rng.choice([" " + text, text + "\n"]) if rng.random() < 0.1 else text


def test_namespaces_agree(store: MemoryStore) -> None:
    """namespace: the schema accepts exactly what the store takes, but for white space around a name (the store
    trims it; the schema does not)."""
    accepted = 0
    for value in values(a_namespace, 7):
        by_schema = schema_accepts(tools.RECALL, {"query": "x", "namespace": value}) is not None
        by_store = store_accepts(lambda v=value: store.search("x", namespace=v))
        assert by_store or not by_schema, f"schema accepts {value!r}, the store refuses it"
        if value == value.strip():
            assert by_schema == by_store, f"{value!r}: schema {by_schema}, store {by_store}"
        accepted += by_schema
    assert N * 0.1 < accepted < N * 0.9


@pytest.mark.parametrize("field", ["occurred_at", "as_of"])
def test_conversation_dates_agree(store: MemoryStore, field: str) -> None:
    """occurred_at (remember) and as_of (recall): every date the pattern accepts the store takes; on canonical
    syntax they agree exactly, as since/until do (the same parser)."""
    tool = tools.REMEMBER if field == "occurred_at" else tools.RECALL
    required = {"content": "x"} if field == "occurred_at" else {"query": "x"}
    call = (  # the same content again stores nothing: a duplicate, checked as a new memory first
        (lambda v: store.add("Agreement.", occurred_at=v))
        if field == "occurred_at"
        else (lambda v: store.search("x", as_of=v))
    )
    accepted = 0
    for value in values(a_date, 3 + len(field)):
        by_schema = schema_accepts(tool, {**required, field: value}) is not None
        by_store = store_accepts(lambda v=value: call(v))
        assert by_store or not by_schema, f"schema accepts {value!r}, the store refuses it"
        if CANONICAL_DATE.fullmatch(value) and not edge_day_with_offset(value) and not minutes_over_59(value):
            assert by_schema == by_store, f"{value!r}: schema {by_schema}, store {by_store}"
        accepted += by_schema
    assert N * 0.1 < accepted < N * 0.9


def minutes_over_59(value: str) -> bool:
    """An offset such as -14:60, which Python's datetime takes (as -15:00) and the schema refuses."""
    offset = re.search(r"[+-][0-9]{2}:([0-9]{2})$", value)
    return offset is not None and int(offset.group(1)) > 59


def test_roles_and_cursors_agree(store: MemoryStore) -> None:
    """role: the schema's enum is the store's list; cursor: every next_cursor the store hands out matches the
    schema (the store refuses cursors it did not make, so the schema cannot promise more)."""
    for value in [*tools.ROLES, " user", "User", "USER", "", "bot", "assistant\n", 1]:
        by_schema = schema_accepts(tools.RECALL, {"query": "x", "role": value}) is not None
        assert by_schema == (value in tools.ROLES)
        assert store_accepts(lambda v=value: store.search("x", role=v)) or not by_schema
    for i in range(5):
        store.add(f"Cursor agreement {i}.", namespace="cursors")
    cursor = None
    seen = 0
    while True:
        page = store.list_page(limit=1, namespace="cursors", cursor=cursor)
        seen += len(page.memories)
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
        assert schema_accepts(tools.LIST_RECENT, {"cursor": cursor, "namespace": "cursors"}) is not None, cursor
    assert seen == 5


def a_number(rng: random.Random) -> Any:
    edges = [0, 1, 5, 49, 50, 51, 100, 101, 1000, 1001, -1, 2**63, 5.0, 2.5, 1e400, -1e400, True, False, "5", None]
    scores = [-1.0, 1.0, -0.0, 1.0000001, -1.0000001, round(rng.uniform(-1.5, 1.5), rng.choice([0, 1, 3]))]
    return rng.choice([*edges, *scores])


def test_numbers_and_modes_agree(store: MemoryStore) -> None:
    """limit, min_score and mode: what the schema accepts (as the server converts it) the store takes."""
    rng = random.Random(SEED)
    modes = [*tools.SEARCH_MODES, "HYBRID", "", "fuzzy", 0, None]
    for _ in range(N):
        args = {"query": "x", "limit": a_number(rng), "min_score": a_number(rng), "mode": rng.choice(modes)}
        args = {k: v for k, v in args.items() if v is not None}
        checked = schema_accepts(tools.RECALL, args)
        if checked is not None:
            assert store_accepts(lambda a=checked: store.search(**a)), f"schema accepts {args}, the store refuses"
    for limit in [0, 1, 100, 101, 2.0, 1e400]:
        checked = schema_accepts(tools.LIST_RECENT, {"limit": limit})
        if checked is not None:
            assert store_accepts(lambda a=checked: store.list_recent(**a))


def test_white_space_classes_are_pythons() -> None:
    """The schemas' white space is exactly str.isspace() (what the store's strip() removes)."""
    something = re.compile(tools.TEXT_PATTERN)  # one character that is not white space
    assert [c for c in range(0x110000) if not something.match(chr(c))] == [
        c for c in range(0x110000) if chr(c).isspace()
    ]


@pytest.mark.skipif(shutil.which("node") is None, reason="Node.js evaluates the patterns as a JavaScript client would")
def test_javascript_reads_the_patterns_as_python_does(tmp_path: Path) -> None:
    """JSON Schema patterns are ECMA-262: Node (with the u flag, as Ajv uses) gives the same verdicts as Python."""
    rng = random.Random(SEED)
    corpus = [a_date(rng) for _ in range(2000)] + [a_string(rng, 70) for _ in range(2000)]
    corpus = [text for text in corpus if text.encode("utf-8", "surrogatepass") == text.encode("utf-8", "replace")]
    corpus += [a_namespace(rng) for _ in range(1000)]
    patterns = [tools.ISO_DATE_PATTERN, tools.TAG_PATTERN, tools.SOURCE_PATTERN, tools.TEXT_PATTERN]
    patterns += [tools.NAMESPACE_PATTERN, tools.CURSOR_PATTERN]
    expected = [[bool(re.search(p, text)) for text in corpus] for p in patterns]
    script = (
        "const {patterns, corpus} = JSON.parse(require('fs').readFileSync(0, 'utf8'));"
        "console.log(JSON.stringify(patterns.map(p => corpus.map(t => new RegExp(p, 'u').test(t)))));"
    )
    done = subprocess.run(
        ["node", "-e", script],
        input=json.dumps({"patterns": patterns, "corpus": corpus}),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(done.stdout) == expected
