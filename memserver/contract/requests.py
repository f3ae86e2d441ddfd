"""The request objects every engine shares: a search's filters, a search, a listing, a selection, and a memory to
store (one, a batch, an import record), each built from the raw arguments by the checks of inputs.py.

An engine takes what a caller gave, builds one of these (raising InvalidInputError as inputs.py's checks do), and
works from the checked values only. Light for the same reason as inputs.py (on the server's start-up path):
the types are NamedTuples (a frozen dataclass costs ~1 ms to create at import), datetime is imported late.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from memserver.contract.inputs import (
    CONVERSATION_FIELDS,
    DEFAULT_KIND,
    DEFAULT_NAMESPACE,
    LIFECYCLE_FIELDS,
    MAX_CONTENT_CHARS,
    MEMORY_FIELDS,
    check_as_of,
    check_cursor,
    check_due,
    check_flag,
    check_id,
    check_items,
    check_kind,
    check_kinds,
    check_limit,
    check_min_score,
    check_mode,
    check_namespace,
    check_occurred_at,
    check_role,
    check_session,
    check_source,
    check_speaker,
    check_tags,
    check_text,
    check_vector,
    parse_time,
    stored_time,
)
from memserver.errors import InvalidInputError

if TYPE_CHECKING:
    import numpy as np

# --- what a search is restricted to --------------------------------------------------------------------------------


class SearchFilter(NamedTuple):
    """The checked filters of a search or a listing: they restrict the candidates before any ranking.

    `since`/`until` are in the stored time format, so they compare as strings with occurred_at: occurred_at >=
    since, and occurred_at <= until (< until when `until_inclusive` is False: a date-only until, moved to the
    next midnight). `speaker`, `role`, `session`: None, or the value to equal. `namespace` always names one.
    `as_of`: None (the memories as they are), or the stored time to answer for (see MemoryBackend.search).
    """

    tags: tuple[str, ...] = ()
    source: str | None = None
    since: str | None = None
    until: str | None = None
    until_inclusive: bool = True
    speaker: str | None = None
    role: str | None = None
    session: str | None = None
    namespace: str = DEFAULT_NAMESPACE
    as_of: str | None = None
    kinds: tuple[str, ...] = ()  # () = every kind
    include_archived: bool = False

    @property
    def lifecycle(self) -> bool:
        """Whether the kind or archived state narrows the candidates (archived ones are out by default)."""
        return bool(self.kinds) or not self.include_archived

    def admits(self, kind: str, archived: bool) -> bool:
        """Whether a memory of this kind and archived state passes the kind and archived filters."""
        return (not self.kinds or kind in self.kinds) and (self.include_archived or not archived)

    @property
    def timed(self) -> bool:
        return self.since is not None or self.until is not None

    @property
    def labelled(self) -> bool:
        """Whether a speaker, role or session is asked for."""
        return self.speaker is not None or self.role is not None or self.session is not None

    @property
    def empty(self) -> bool:
        """No criterion but the namespace (and no as_of)."""
        return (
            not self.tags
            and self.source is None
            and not self.timed
            and not self.labelled
            and self.as_of is None
            and not self.kinds
        )


def search_filter(
    tags: object = None,
    source: object = None,
    since: object = None,
    until: object = None,
    *,
    speaker: object = None,
    role: object = None,
    session: object = None,
    namespace: object = None,
    as_of: object = None,
    kinds: object = None,
    include_archived: object = False,
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
    return SearchFilter(
        wanted,
        src,
        lo,
        hi,
        hi_inclusive,
        None if speaker is None else check_speaker(speaker),
        None if role is None else check_role(role),
        None if session is None else check_session(session),
        check_namespace(namespace),
        check_as_of(as_of),
        check_kinds(kinds),
        check_flag(include_archived, "include_archived"),
    )


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
    *,
    speaker: object = None,
    role: object = None,
    session: object = None,
    namespace: object = None,
    as_of: object = None,
    kinds: object = None,
    include_archived: object = False,
) -> SearchRequest:
    text = check_text(query, "query", MAX_CONTENT_CHARS)
    checked_mode = check_mode(mode)
    n = check_limit(limit)
    filters = search_filter(
        tags,
        source,
        since,
        until,
        speaker=speaker,
        role=role,
        session=session,
        namespace=namespace,
        as_of=as_of,
        kinds=kinds,
        include_archived=include_archived,
    )
    return SearchRequest(text, n, filters, check_min_score(min_score), checked_mode)


LIST_ORDERS = ("occurred", "stored")  # list_page's orders: by occurred_at, or by created_at (storage time)


class ListRequest(NamedTuple):
    """A checked list_recent / list_page: the filters, the order and where the page starts."""

    limit: int
    filter: SearchFilter
    cursor: str | None
    order: str = "occurred"


def list_request(
    limit: object,
    tags: object,
    *,
    namespace: object = None,
    session: object = None,
    speaker: object = None,
    role: object = None,
    source: object = None,
    since: object = None,
    until: object = None,
    cursor: object = None,
    as_of: object = None,
    order: object = "occurred",
    kinds: object = None,
    include_archived: object = False,
) -> ListRequest:
    n = check_limit(limit)
    if order not in LIST_ORDERS:
        raise InvalidInputError(f"order must be one of {', '.join(LIST_ORDERS)}, got {order!r}")
    filters = search_filter(
        tags,
        source,
        since,
        until,
        speaker=speaker,
        role=role,
        session=session,
        namespace=namespace,
        as_of=as_of,
        kinds=kinds,
        include_archived=include_archived,
    )
    return ListRequest(n, filters, check_cursor(cursor), str(order))


class SelectFilter(NamedTuple):
    """A checked backend.MemoryFilter: the search filters plus a storage-time bound (created_at < before)."""

    filter: SearchFilter
    before: str | None
    include_replaced: bool


def select_filter(f: object) -> SelectFilter:
    """Check a backend.MemoryFilter (duck-typed: this module imports no backend); refuse an empty one unless it
    says `everything=True`."""
    fields = ("namespace", "tags", "source", "session", "speaker", "role", "since", "until", "before")
    if not all(hasattr(f, name) for name in fields):
        raise InvalidInputError(f"filter must be a MemoryFilter, got {type(f).__name__}")

    def get(name: str) -> object:
        return getattr(f, name)

    checked = search_filter(
        get("tags"),
        get("source"),
        get("since"),
        get("until"),
        speaker=get("speaker"),
        role=get("role"),
        session=get("session"),
        namespace=get("namespace"),
        kinds=getattr(f, "kinds", None),
        include_archived=getattr(f, "include_archived", False),
    )
    before = None if get("before") is None else stored_time(parse_time(get("before"), "before")[0])
    if checked.empty and before is None and getattr(f, "everything", False) is not True:
        raise InvalidInputError(
            f"filter selects every memory of namespace {checked.namespace!r}: give a criterion "
            "(tags, source, session, speaker, role, since, until, before), or everything=True"
        )
    return SelectFilter(checked, before, getattr(f, "include_replaced", False) is True)


# --- what is stored ------------------------------------------------------------------------------------------------


class NewMemory(NamedTuple):
    """A checked memory to store. `id`, `created_at`, `vector` and `replaced_by` are set by an import only."""

    content: str
    tags: tuple[str, ...]
    source: str
    id: str = ""
    created_at: str = ""
    vector: np.ndarray | None = None
    occurred_at: str = ""  # "" = created_at
    speaker: str = ""
    role: str = ""
    session: str = ""
    namespace: str = DEFAULT_NAMESPACE
    replaces: str = ""
    replaced_by: str = ""
    kind: str = DEFAULT_KIND
    due: str = ""
    done: bool = False
    pinned: bool = False
    archived: bool = False


def new_memory(
    content: object,
    tags: object = None,
    source: object = None,
    where: str = "",
    *,
    occurred_at: object = None,
    speaker: object = None,
    role: object = None,
    session: object = None,
    namespace: object = None,
    replaces: object = None,
    kind: object = None,
    due: object = None,
    done: object = False,
    pinned: object = False,
    archived: object = False,
) -> NewMemory:
    """Check what add() is given; `where` prefixes the argument names in messages (e.g. "items[3].")."""
    text = check_text(content, f"{where}content", MAX_CONTENT_CHARS)
    return NewMemory(
        text,
        check_tags(tags, f"{where}tags"),
        check_source(source, f"{where}source"),
        occurred_at=check_occurred_at(occurred_at, f"{where}occurred_at"),
        speaker=check_speaker(speaker, f"{where}speaker"),
        role=check_role(role, f"{where}role"),
        session=check_session(session, f"{where}session"),
        namespace=check_namespace(namespace, f"{where}namespace"),
        replaces="" if replaces is None else check_id(replaces, f"{where}replaces"),
        kind=check_kind(kind, f"{where}kind"),
        due=check_due(due, f"{where}due"),
        done=check_flag(done, f"{where}done"),
        pinned=check_flag(pinned, f"{where}pinned"),
        archived=check_flag(archived, f"{where}archived"),
    )


def _item(item: dict[str, object], where: str) -> NewMemory:
    return new_memory(
        item.get("content"),
        item.get("tags"),
        item.get("source"),
        where,
        **{name: item.get(name) for name in CONVERSATION_FIELDS},
        **{name: item[name] for name in LIFECYCLE_FIELDS if item.get(name) is not None},
    )


def new_memories(items: object) -> list[NewMemory]:
    """Check what add_many() is given: strings, or dicts of MEMORY_FIELDS."""
    out: list[NewMemory] = []
    batch = check_items(items, "items")
    for n, item in enumerate(batch):
        where = f"items[{n}]." if not isinstance(batch, list) or len(batch) != 1 else ""
        if isinstance(item, str):
            out.append(new_memory(item, None, None, where))
        elif isinstance(item, dict):
            unknown = set(item) - MEMORY_FIELDS
            if unknown:
                raise InvalidInputError(f"{where or 'item.'}{sorted(unknown)[0]} is not a memory field")
            out.append(_item(item, where))
        else:
            raise InvalidInputError(f"items[{n}] must be a string or a dict, got {type(item).__name__}")
    return out


def imported_memory(record: object, n: int, dim: int) -> NewMemory:
    """Check one record of an import (the n-th): an export line, optionally with its vector. Keys other than
    RECORD_FIELDS are ignored (an export of a later version may carry more)."""
    where = f"records[{n}]."
    if not isinstance(record, dict):
        raise InvalidInputError(f"records[{n}] must be a dict, got {type(record).__name__}")
    item = _item(record, where)
    memory_id = created_at = replaced_by = ""
    vector = None
    if record.get("id") is not None:
        memory_id = check_id(record["id"], f"{where}id")
    if record.get("created_at") is not None:
        created_at = stored_time(parse_time(record["created_at"], f"{where}created_at")[0])
    if record.get("vector") is not None:
        vector = check_vector(record["vector"], dim, f"{where}vector")
    if record.get("replaced_by") is not None:
        replaced_by = check_id(record["replaced_by"], f"{where}replaced_by")
    if item.replaces and item.replaces == memory_id:
        raise InvalidInputError(f"{where}replaces names the record itself ({memory_id})")
    return item._replace(id=memory_id, created_at=created_at, vector=vector, replaced_by=replaced_by)
