"""The input rules every engine shares: limits, argument checks, times, and what makes two memories duplicates.

Each check returns the value as engines store it (trimmed, normalised) or raises InvalidInputError naming the
argument and the rule, so every engine refuses the same inputs with the same messages. The limits are defined
here once; tools.py builds its JSON Schemas from them. The request objects built from these checks (a search, a
listing, a memory to store) are requests.py's.

Light on purpose: tools.py imports this on the server's start-up path, so numpy and datetime are imported by the
checks that need them.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

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
MAX_SPEAKER_CHARS = 100
MAX_SESSION_CHARS = 200
MAX_NAMESPACE_CHARS = 64
MAX_CURSOR_CHARS = 512
DEFAULT_NAMESPACE = "default"
ROLES = ("user", "assistant", "participant", "system", "tool")
# The conversation fields of a memory (issue 12), beside content, tags and source.
CONVERSATION_FIELDS = ("occurred_at", "speaker", "role", "session", "namespace", "replaces")
# The lifecycle fields of a memory (issue 24): what it is, a task's due date and state, pinned, archived.
KINDS = ("fact", "preference", "decision", "task", "event", "instruction", "person", "note", "summary")
DEFAULT_KIND = "note"
LIFECYCLE_FIELDS = ("kind", "due", "done", "pinned", "archived")
MEMORY_FIELDS = frozenset(
    {"content", "tags", "source", *CONVERSATION_FIELDS, *LIFECYCLE_FIELDS}
)  # what add_many takes in an item dict
RECORD_FIELDS = MEMORY_FIELDS | {"id", "created_at", "vector", "replaced_by"}  # what import_ reads of a record

# --- patterns: the schemas promise exactly what the store accepts ----------------------------------------------------
# JSON Schema patterns are ECMA-262 regular expressions that clients evaluate in JavaScript, while jsonschema here
# uses Python's re; these read the same in both: classes spelled out ([0-9], not the Unicode-aware \d; the white
# space of Python's str.strip(), not \s), and the end of the text written (?![\s\S]) ("no character follows"),
# because Python's $ also matches before a final newline. tests/server/test_schemas_agree.py checks them against the
# store on generated values, and against Node.js.
_END = r"(?![\s\S])"

# What str.strip() removes (str.isspace()): a tag, a query or a content must hold something else.
_SPACE = r"\t-\r\x1c-\x20\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
_CONTROL = r"\x00-\x1f\x7f"  # what the store refuses in tags and sources
TEXT_PATTERN = f"[^{_SPACE}]"  # (unanchored) something other than white space
TAG_PATTERN = f"^[^{_CONTROL}]*[^{_CONTROL}{_SPACE}][^{_CONTROL}]*{_END}"
SOURCE_PATTERN = f"^[^{_CONTROL}]*{_END}"
NAMESPACE_PATTERN = f"^[A-Za-z0-9_.:@-]{{1,64}}{_END}"  # e.g. user:alice, project-x, team@example.com

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
_NAMESPACE_RE = re.compile(NAMESPACE_PATTERN)
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


def check_source(source: object, name: str = "source") -> str:
    if source is None:
        return ""
    if not isinstance(source, str):
        raise InvalidInputError(f"{name} must be a string, got {type(source).__name__}")
    s = source.strip()
    if len(s) > MAX_SOURCE_CHARS:
        raise InvalidInputError(f"{name} is {len(s)} characters; the limit is {MAX_SOURCE_CHARS}")
    if _CONTROL_RE.search(s):
        raise InvalidInputError(f"{name} must not contain control characters (newlines, tabs, ...)")
    check_utf8(s, name)
    return s


def check_label(value: object, name: str, max_chars: int) -> str:
    """A speaker or session: a string, trimmed, 1..max_chars, no control characters ("" when None)."""
    if value is None:
        return ""
    text = check_text(value, name, max_chars)
    if _CONTROL_RE.search(text):
        raise InvalidInputError(f"{name} must not contain control characters (newlines, tabs, ...)")
    return text


def check_speaker(value: object, name: str = "speaker") -> str:
    return check_label(value, name, MAX_SPEAKER_CHARS)


def check_session(value: object, name: str = "session") -> str:
    return check_label(value, name, MAX_SESSION_CHARS)


def check_role(value: object, name: str = "role") -> str:
    """One of ROLES ("" when None)."""
    if value is None:
        return ""
    role = value.strip() if isinstance(value, str) else value
    if role not in ROLES:
        raise InvalidInputError(f"{name} must be one of {', '.join(ROLES)}, got {value!r}")
    return str(role)


def check_namespace(value: object, name: str = "namespace") -> str:
    """A namespace name (DEFAULT_NAMESPACE when None)."""
    if value is None:
        return DEFAULT_NAMESPACE
    if not isinstance(value, str):
        raise InvalidInputError(f"{name} must be a string, got {type(value).__name__}")
    if not _NAMESPACE_RE.match(value.strip()):
        raise InvalidInputError(
            f"{name} must be 1-{MAX_NAMESPACE_CHARS} characters of letters, digits and _.:@- "
            f"(e.g. user:alice), got {value!r}"
        )
    return value.strip()


def is_namespace(value: str) -> bool:
    """Whether `value` is a namespace name exactly as the store keeps it (trimmed)."""
    return bool(_NAMESPACE_RE.match(value))


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


def check_ids(ids: object, name: str = "ids") -> list[str]:
    """A list (or another iterable) of memory ids -> the checked ids, repeats dropped (first order kept)."""
    if ids is None or isinstance(ids, (str, bytes, dict)) or not isinstance(ids, Iterable):
        raise InvalidInputError(f"{name} must be a list of memory ids, got {type(ids).__name__}")
    return list(dict.fromkeys(check_id(mid, f"{name}[{n}]") for n, mid in enumerate(ids)))


def check_cursor(cursor: object) -> str | None:
    """The shape of a list_page cursor (None: the first page); what it holds is each engine's (see bad_cursor)."""
    if cursor is None:
        return None
    if not isinstance(cursor, str) or not 0 < len(cursor.strip()) <= MAX_CURSOR_CHARS or not cursor.isascii():
        raise bad_cursor(cursor)
    return cursor.strip()


def bad_cursor(cursor: object) -> InvalidInputError:
    """The one message for a cursor an engine cannot read (every engine raises this one)."""
    shown = cursor if not isinstance(cursor, str) or len(cursor) <= 40 else cursor[:40] + "..."
    return InvalidInputError(f"cursor must be a next_cursor returned by list_page, got {shown!r}")


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


def check_occurred_at(value: object, name: str = "occurred_at") -> str:
    """When it happened, in the stored format ("" when None: the storage time); a date alone is 00:00 UTC."""
    if value is None:
        return ""
    return stored_time(parse_time(value, name)[0])


def check_as_of(value: object, name: str = "as_of") -> str | None:
    """The moment an as_of read answers for, in the stored format; a date alone means the end of that UTC day."""
    from datetime import timedelta

    if value is None:
        return None
    dt, date_only = parse_time(value, name)
    if date_only:
        dt += timedelta(days=1, microseconds=-1)
    return stored_time(dt)


# --- kinds, due dates, flags, batches ----------------------------------------------------------------------------


def check_kind(kind: object, name: str = "kind") -> str:
    """One of KINDS (trimmed, any case); None is the default kind."""
    if kind is None:
        return DEFAULT_KIND
    if not isinstance(kind, str) or kind.strip().lower() not in KINDS:
        raise InvalidInputError(f"{name} must be one of {', '.join(KINDS)}, got {kind!r}")
    return kind.strip().lower()


def check_kinds(kinds: object, name: str = "kinds") -> tuple[str, ...]:
    """None, one kind, or a list of kinds (repeats dropped)."""
    if kinds is None:
        return ()
    if isinstance(kinds, str):
        kinds = [kinds]
    if not isinstance(kinds, (list, tuple)):
        raise InvalidInputError(f"{name} must be a list of kinds ({', '.join(KINDS)}), got {type(kinds).__name__}")
    return tuple(dict.fromkeys(check_kind(k, f"{name}[{i}]") for i, k in enumerate(kinds)))


def check_due(due: object, name: str = "due") -> str:
    """An ISO date (YYYY-MM-DD); None or "" is no due date ("")."""
    from datetime import date

    if due is None or due == "":
        return ""
    if isinstance(due, date):
        return due.isoformat()[:10]
    if isinstance(due, str):
        try:
            return date.fromisoformat(due.strip()).isoformat()
        except ValueError:
            pass
    raise InvalidInputError(f"{name} must be an ISO date like 2026-12-31, got {due!r}")


def check_flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInputError(f"{name} must be true or false, got {value!r}")
    return value


def check_items(items: object, name: str) -> Iterable[object]:
    """A list (or another iterable) of items or records: not None, a str, bytes or a dict."""
    if items is None or isinstance(items, (str, bytes, dict)) or not isinstance(items, Iterable):
        raise InvalidInputError(f"{name} must be a list (or another iterable), got {type(items).__name__}")
    return items


# --- the messages of the rules only an engine can check ---------------------------------------------------------


def no_such_memory(name: str, memory_id: str, namespace: str) -> InvalidInputError:
    """`replaces` names no current memory there (another namespace's memories are not told apart from none)."""
    return InvalidInputError(f"{name}: no memory with id {memory_id} in namespace {namespace!r}")


def already_replaced(name: str, memory_id: str, by: str) -> InvalidInputError:
    return InvalidInputError(f"{name}: memory {memory_id} is already replaced by {by}; replace that one instead")


def replaced_twice(name: str, memory_id: str) -> InvalidInputError:
    return InvalidInputError(f"{name}: memory {memory_id} is replaced by an earlier item of this call too")
