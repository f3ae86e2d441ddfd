"""The input rules every engine shares: limits, argument checks, times, and what makes two memories duplicates.

Each check returns the value as engines store it (trimmed, normalised) or raises InvalidInputError naming the
argument and the rule, so every engine refuses the same inputs with the same messages. The limits are defined
here once; tools.py builds its JSON Schemas from them.

Light on purpose: tools.py imports this on the server's start-up path, so numpy and datetime are imported by the
checks that need them, and the value types are NamedTuples (a frozen dataclass costs ~1 ms to create at import).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from memserver.errors import InvalidInputError

if TYPE_CHECKING:
    from datetime import datetime

    import numpy as np

# --- limits ------------------------------------------------------------------------------------------------------

MAX_CONTENT_CHARS = 20_000  # a memory; also the longest query an engine takes
MAX_QUERY_CHARS = 2_000  # the recall tool's query
MAX_TAGS = 20
MAX_TAG_CHARS = 64
MAX_SOURCE_CHARS = 200
MAX_LIMIT = 1000  # results of one engine call
MAX_RECALL = 50  # results of one recall (tool)
MAX_LIST = 100  # results of one list_recent (tool)
MEMORY_ID_PATTERN = r"^[0-9a-f]{32}$"  # uuid4 hex, as add() makes them
SEARCH_MODES = ("hybrid", "semantic", "keyword")
MEMORY_FIELDS = frozenset({"content", "tags", "source"})  # what add_many takes in an item dict

# --- patterns: the schemas promise exactly what the store accepts ----------------------------------------------------
# JSON Schema patterns are ECMA-262 regular expressions that clients evaluate in JavaScript, while jsonschema here
# uses Python's re; these read the same in both: classes spelled out ([0-9], not the Unicode-aware \d; the white
# space of Python's str.strip(), not \s), and the end of the text written (?![\s\S]) ("no character follows"),
# because Python's $ also matches before a final newline. tests/test_schemas_agree.py checks them against the store
# on generated values, and against Node.js.
_END = r"(?![\s\S])"

# What str.strip() removes (str.isspace()): a tag, a query or a content must hold something else.
_SPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_CONTROL = r"\x00-\x1f\x7f"  # what the store refuses in tags and sources
TEXT_PATTERN = f"[^{_SPACE}]"  # (unanchored) something other than white space
TAG_PATTERN = f"^[^{_CONTROL}]*[^{_CONTROL}{_SPACE}][^{_CONTROL}]*{_END}"
SOURCE_PATTERN = f"^[^{_CONTROL}]*{_END}"

# ISO 8601 date or date-time, offset optional (none means UTC): 2026-01-31, 2026-01-31T09:30:00Z, ... Years
# 0001-9999, real calendar days (leap years included), seconds 00-59, fractions of 3 or 6 digits and offsets
# +HH:MM (what datetime.fromisoformat reads on every Python we support). The first and last days are special:
# the store takes every time to UTC, and a date-only time to the next midnight, which must stay in 0001-9999; on
# those two days only offsets that cannot cross the edge are accepted (a few the store would take are refused).
_MONTH_DAY = (
    "(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])"  # 31 days
    "|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)"  # 30 days
    "|02-(?:0[1-9]|1[0-9]|2[0-8]))"  # February; the 29th only in leap years, below
)
_LEAP = "(?:0[48]|[2468][048]|[13579][26])"
_DATE = f"(?:(?!0000)[0-9]{{4}}-{_MONTH_DAY}|(?:[0-9]{{2}}{_LEAP}|{_LEAP}00)-02-29)"
_HH_MM = "(?:[01][0-9]|2[0-3]):[0-5][0-9]"
_TIME = rf"[T ]{_HH_MM}(?::[0-5][0-9](?:\.(?:[0-9]{{6}}|[0-9]{{3}}))?)?"
ISO_DATE_PATTERN = (
    f"^(?:(?!0001-01-01|9999-12-31){_DATE}(?:{_TIME}(?:Z|[+-]{_HH_MM})?)?"
    rf"|0001-01-01(?:{_TIME}(?:Z|-{_HH_MM}|\+00:00)?)?"  # no offset east of UTC: it would end before year 1
    rf"|9999-12-31{_TIME}(?:Z|\+{_HH_MM}|-00:00)?){_END}"  # a time, no offset west of UTC: past year 9999
)

_ID_RE = re.compile(MEMORY_ID_PATTERN)
_ID_PREFIX_RE = re.compile(r"[0-9a-f]*\Z")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


# --- duplicates ----------------------------------------------------------------------------------------------------


def normalised(content: str) -> str:
    """What exact duplicates share: the content with whitespace trimmed and collapsed."""
    return " ".join(content.split())


def content_key(content: str) -> int:
    """Exact-duplicate key: 64 bits of a hash of `normalised(content)` (a match is confirmed on the text)."""
    digest = hashlib.blake2b(normalised(content).encode("utf-8"), digest_size=8).digest()
    return int.from_bytes(digest, "little")


# --- text, tags, source, ids, numbers ------------------------------------------------------------------------------


def check_utf8(text: str, name: str) -> None:
    """Refuse lone surrogates up front: they cannot be written as UTF-8, and the write would fail late."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInputError(f"{name} is not valid Unicode text (a lone surrogate at {exc.start})") from None


def check_text(value: object, name: str, max_chars: int) -> str:
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    text = value.strip()
    if not text:
        raise InvalidInputError(f"{name} must not be empty")
    if len(text) > max_chars:
        raise InvalidInputError(f"{name} is {len(text)} characters; the limit is {max_chars}")
    check_utf8(text, name)
    return text


def check_tags(tags: object, name: str = "tags") -> tuple[str, ...]:
    if tags is None:
        return ()
    if isinstance(tags, str) or not isinstance(tags, (list, tuple)):
        raise InvalidInputError(f"{name} must be a list of strings, got {type(tags).__name__}")
    out: dict[str, None] = {}
    for tag in tags:
        if not isinstance(tag, str):
            raise InvalidInputError(f"{name} must be a list of strings; found {type(tag).__name__}")
        t = tag.strip()
        if not t:
            raise InvalidInputError(f"{name} must not contain empty strings")
        if len(t) > MAX_TAG_CHARS:
            raise InvalidInputError(f"{name}: tag {t[:20]!r}... is {len(t)} characters; the limit is {MAX_TAG_CHARS}")
        if _CONTROL_RE.search(t):
            raise InvalidInputError(f"{name}: tag {t!r} contains a control character")
        check_utf8(t, name)
        out[t] = None
    if len(out) > MAX_TAGS:
        raise InvalidInputError(f"{name} has {len(out)} distinct tags; the limit is {MAX_TAGS}")
    return tuple(out)


def check_source(source: object) -> str:
    if source is None:
        return ""
    if not isinstance(source, str):
        raise InvalidInputError(f"source must be a string, got {type(source).__name__}")
    s = source.strip()
    if len(s) > MAX_SOURCE_CHARS:
        raise InvalidInputError(f"source is {len(s)} characters; the limit is {MAX_SOURCE_CHARS}")
    if _CONTROL_RE.search(s):
        raise InvalidInputError("source must not contain control characters (newlines, tabs, ...)")
    check_utf8(s, "source")
    return s


def is_memory_id(value: str) -> bool:
    """Whether `value` (trimmed, any case) has the shape of a memory id."""
    return bool(_ID_RE.match(value.strip().lower()))


def check_id(memory_id: object, name: str = "memory_id") -> str:
    if not isinstance(memory_id, str) or not is_memory_id(memory_id):
        raise InvalidInputError(f"{name} must be 32 hexadecimal characters (as returned by add), got {memory_id!r}")
    return memory_id.strip().lower()


def check_id_prefix(prefix: object, name: str = "prefix") -> str:
    """The start of a memory id (0-32 hexadecimal characters), trimmed and lower-cased."""
    if not isinstance(prefix, str):
        raise InvalidInputError(f"{name} must be a string of hexadecimal characters, got {type(prefix).__name__}")
    value = prefix.strip().lower()
    if len(value) > 32 or not _ID_PREFIX_RE.match(value):
        raise InvalidInputError(f"{name} must be at most 32 hexadecimal characters (the start of a memory id)")
    return value


def check_limit(limit: object, name: str = "limit") -> int:
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise InvalidInputError(f"{name} must be an integer, got {type(limit).__name__}")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidInputError(f"{name} must be between 1 and {MAX_LIMIT}, got {limit}")
    return limit


def check_min_score(min_score: object) -> float | None:
    if min_score is None:
        return None
    if isinstance(min_score, bool) or not isinstance(min_score, (int, float)) or math.isnan(min_score):
        raise InvalidInputError(f"min_score must be a number between -1 and 1, got {min_score!r}")
    if not -1.0 <= float(min_score) <= 1.0:
        raise InvalidInputError(f"min_score must be between -1 and 1, got {min_score}")
    return float(min_score)


def check_mode(mode: object) -> str:
    if mode not in SEARCH_MODES:
        raise InvalidInputError(f"mode must be one of {', '.join(SEARCH_MODES)}, got {mode!r}")
    return str(mode)


def check_vector(value: object, dim: int, name: str) -> np.ndarray:
    """`dim` finite numbers, not all zero -> a unit float32 vector."""
    import numpy as np

    try:
        v = np.asarray(value, dtype=np.float32).reshape(-1)
    except (TypeError, ValueError):
        raise InvalidInputError(f"{name} must be a list of {dim} numbers") from None
    if v.shape != (dim,) or not np.isfinite(v).all():
        raise InvalidInputError(f"{name} must be {dim} finite numbers, got shape {v.shape}")
    norm = float(np.linalg.norm(v))
    if norm == 0.0:
        raise InvalidInputError(f"{name} must not be the zero vector")
    return v / norm


# --- times -----------------------------------------------------------------------------------------------------------


def stored_time(dt: datetime) -> str:
    """The one stored time format: UTC, microseconds, '+00:00' (so strings sort in time order)."""
    from datetime import timezone

    return dt.astimezone(timezone.utc).isoformat(timespec="microseconds")


def now() -> str:
    from datetime import datetime, timezone

    return stored_time(datetime.now(timezone.utc))


def parse_time(value: object, name: str) -> tuple[datetime, bool]:
    """A date/datetime or ISO 8601 string -> (aware datetime, date_only); naive times are taken as UTC."""
    from datetime import date, datetime, timedelta, timezone

    if isinstance(value, datetime):
        dt, date_only = value, False
    elif isinstance(value, date):
        dt, date_only = datetime(value.year, value.month, value.day), True
    elif isinstance(value, str):
        text = value.strip()
        try:
            if len(text) == 10:
                d = date.fromisoformat(text)
                dt, date_only = datetime(d.year, d.month, d.day), True
            else:
                dt, date_only = datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00")), False
        except ValueError:
            raise InvalidInputError(
                f"{name} must be an ISO 8601 date or date-time (e.g. 2026-11-30 or 2026-11-30T13:08:00Z), got {value!r}"
            ) from None
    else:
        raise InvalidInputError(f"{name} must be an ISO 8601 string, got {type(value).__name__}")
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    try:
        dt.astimezone(timezone.utc)
        if date_only:
            dt + timedelta(days=1)  # a date-only `until` is shifted to the next midnight
    except OverflowError:
        raise InvalidInputError(f"{name} {value!r} is outside the supported calendar range once taken to UTC") from None
    return dt, date_only


# --- what a search is restricted to --------------------------------------------------------------------------------


class SearchFilter(NamedTuple):
    """The checked filters of a search: they restrict the candidates before any ranking.

    `since`/`until` are in the stored time format, so they compare as strings: created_at >= since, and
    created_at <= until (< until when `until_inclusive` is False: a date-only until, moved to the next midnight).
    """

    tags: tuple[str, ...] = ()
    source: str | None = None
    since: str | None = None
    until: str | None = None
    until_inclusive: bool = True

    @property
    def timed(self) -> bool:
        return self.since is not None or self.until is not None

    @property
    def empty(self) -> bool:
        return not self.tags and self.source is None and not self.timed


def search_filter(
    tags: object = None, source: object = None, since: object = None, until: object = None
) -> SearchFilter:
    """Check the filters of a search. A date-only `until` includes that whole (UTC) day."""
    from datetime import timedelta

    wanted = check_tags(tags)
    src = None if source is None else check_source(source)
    lo = hi = None
    hi_inclusive = True
    if since is not None:
        lo = stored_time(parse_time(since, "since")[0])
    if until is not None:
        dt, date_only = parse_time(until, "until")
        if date_only:
            dt, hi_inclusive = dt + timedelta(days=1), False
        hi = stored_time(dt)
    if lo is not None and hi is not None and (lo > hi or (lo == hi and not hi_inclusive)):
        raise InvalidInputError(f"since ({since}) must not be later than until ({until})")
    return SearchFilter(wanted, src, lo, hi, hi_inclusive)


class SearchRequest(NamedTuple):
    """A checked search: what `MemoryBackend.search` was asked."""

    query: str
    limit: int
    filter: SearchFilter
    min_score: float | None
    mode: str


def search_request(
    query: object,
    limit: object,
    tags: object,
    source: object,
    since: object,
    until: object,
    min_score: object,
    mode: object,
) -> SearchRequest:
    text = check_text(query, "query", MAX_CONTENT_CHARS)
    checked_mode = check_mode(mode)
    n = check_limit(limit)
    filters = search_filter(tags, source, since, until)
    return SearchRequest(text, n, filters, check_min_score(min_score), checked_mode)


# --- what is stored ------------------------------------------------------------------------------------------------


class NewMemory(NamedTuple):
    """A checked memory to store. `id`, `created_at` and `vector` are set by an import only ("" / None)."""

    content: str
    tags: tuple[str, ...]
    source: str
    id: str = ""
    created_at: str = ""
    vector: np.ndarray | None = None


def new_memory(content: object, tags: object = None, source: object = None, where: str = "") -> NewMemory:
    """Check what add() is given; `where` prefixes the argument names in messages (e.g. "items[3].")."""
    text = check_text(content, f"{where}content", MAX_CONTENT_CHARS)
    return NewMemory(text, check_tags(tags, f"{where}tags"), check_source(source))


def new_memories(items: Iterable[object]) -> list[NewMemory]:
    """Check what add_many() is given: strings, or dicts of MEMORY_FIELDS."""
    out: list[NewMemory] = []
    for n, item in enumerate(items):
        where = f"items[{n}]." if not isinstance(items, list) or len(items) != 1 else ""
        if isinstance(item, str):
            out.append(new_memory(item, None, None, where))
        elif isinstance(item, dict):
            unknown = set(item) - MEMORY_FIELDS
            if unknown:
                raise InvalidInputError(f"{where or 'item.'}{sorted(unknown)[0]} is not a memory field")
            out.append(new_memory(item.get("content"), item.get("tags"), item.get("source"), where))
        else:
            raise InvalidInputError(f"items[{n}] must be a string or a dict, got {type(item).__name__}")
    return out


def imported_memory(record: object, n: int, dim: int) -> NewMemory:
    """Check one record of an import (the n-th): an export line, optionally with its vector."""
    where = f"records[{n}]."
    if not isinstance(record, dict):
        raise InvalidInputError(f"records[{n}] must be a dict, got {type(record).__name__}")
    item = new_memory(record.get("content"), record.get("tags"), record.get("source"), where)
    memory_id = created_at = ""
    vector = None
    if record.get("id") is not None:
        memory_id = check_id(record["id"], f"{where}id")
    if record.get("created_at") is not None:
        created_at = stored_time(parse_time(record["created_at"], f"{where}created_at")[0])
    if record.get("vector") is not None:
        vector = check_vector(record["vector"], dim, f"{where}vector")
    return NewMemory(item.content, item.tags, item.source, memory_id, created_at, vector)
