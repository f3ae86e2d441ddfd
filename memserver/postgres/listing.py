"""Listings on PostgreSQL: pages newest first with their cursors, bulk selections, and the counts per tag, session
and namespace.

Every listing is in the order of the index memories_recent, newest first: (occurred_at, seq) descending, seq
(insertion order) breaking ties, the later-stored first, as the local store's row does. A cursor names the last
memory of a page by that key, and the next page is what sorts below it when it is asked: memories added meanwhile
sort above it (newer: not listed) or below it (listed once). list_page's order "stored" sorts by (created_at, seq)
instead (no index: a sort of the filtered rows, as it is rarely asked for). seq never changes (compaction deletes
forgotten rows and renumbers nothing), so a cursor stays valid through compactions and in every process. A cursor is
`p1.` (by occurred_at) or `q1.` (by created_at) + base64url of the JSON list [time, seq].
"""

from __future__ import annotations

from typing import Any

from memserver.contract import cursors, inputs, requests
from memserver.contract.backend import Memory
from memserver.postgres.rows import COLUMNS, OCCURRED, namespace_of, stored_namespace
from memserver.postgres.search import filter_sql

__all__ = ["decode_cursor", "encode_cursor", "page_sql", "select_sql"]

_PREFIXES = {"occurred": "p1.", "stored": "q1."}
_TIMES = {"occurred": OCCURRED, "stored": "m.created_at"}
NEWEST_FIRST = f"ORDER BY {OCCURRED} DESC, m.seq DESC"


def encode_cursor(last: Memory, seq: int, order: str = "occurred") -> str:
    """The cursor of a page ending with `last` (row `seq`)."""
    time = last.created_at if order == "stored" else last.occurred_at
    return cursors.encode(_PREFIXES[order], [time, int(seq)])


def _cursor_fields(payload: Any) -> tuple[str, int]:
    time, seq = payload
    if not isinstance(time, str) or not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise ValueError("fields")
    return inputs.stored_time(inputs.parse_time(time, "cursor")[0]), seq


def decode_cursor(cursor: str, order: str = "occurred") -> tuple[str, int]:
    """(time, seq) of a cursor this engine returned for `order`; InvalidInputError naming `cursor` otherwise."""
    return cursors.decode(cursor, _PREFIXES[order], _cursor_fields)


def page_sql(req: requests.ListRequest, tenant: str) -> tuple[str, dict[str, Any]]:
    """One page of list_page (limit + 1 rows: the extra one says whether another page follows)."""
    where, params = filter_sql(req.filter)
    time = _TIMES[req.order]
    if req.cursor is not None:
        after, seq = decode_cursor(req.cursor, req.order)
        where += f" AND ({time}, m.seq) < (%(after_time)s::timestamptz, %(after_seq)s)"
        params |= {"after_time": after, "after_seq": seq}
    order = f"ORDER BY {time} DESC, m.seq DESC"
    sql = f"SELECT {COLUMNS} FROM memserver.memories m WHERE {where} {order} LIMIT %(n)s"
    return sql, {"tenant": tenant, "n": req.limit + 1, **params}


def select_sql(s: requests.SelectFilter, tenant: str, sample: int) -> list[tuple[str, dict[str, Any]]]:
    """The statements of select(): every matching id newest first, and the newest `sample` memories."""
    where, params = filter_sql(s.filter, held=s.include_replaced)
    if s.before is not None:
        where += " AND m.created_at < %(before)s::timestamptz"
        params["before"] = s.before
    params |= {"tenant": tenant, "n": sample}
    return [
        (f"SELECT m.id FROM memserver.memories m WHERE {where} {NEWEST_FIRST}", params),
        (f"SELECT {COLUMNS} FROM memserver.memories m WHERE {where} {NEWEST_FIRST} LIMIT %(n)s", params),
    ]


TAG_COUNTS = (
    "SELECT g.tag, count(*) FROM memserver.memory_tags g JOIN memserver.memories m "
    "ON m.tenant = g.tenant AND m.seq = g.seq WHERE g.tenant = %s AND m.namespace = %s "
    'GROUP BY g.tag ORDER BY count(*) DESC, g.tag COLLATE "C"'
)
SESSIONS = (
    f"SELECT m.session, count(*), max({OCCURRED}) FROM memserver.memories m WHERE m.tenant = %s "
    "AND m.namespace = %s AND m.replaced_by IS NULL AND m.forgotten_at IS NULL AND m.session IS NOT NULL "
    "GROUP BY m.session"
)
NAMESPACES = (
    "SELECT namespace, sum(docs) FROM memserver.tenant_stats WHERE tenant = %s GROUP BY namespace HAVING sum(docs) > 0"
)


def sessions(found: list[tuple[Any, ...]]) -> dict[str, int]:
    """The rows of SESSIONS, the session with the newest occurred_at first (equal: by name, descending)."""
    ordered = sorted(((newest, name, int(n)) for name, n, newest in found), reverse=True)
    return {name: n for _, name, n in ordered}


def namespaces(found: list[tuple[Any, ...]]) -> dict[str, int]:
    return dict(sorted((namespace_of(ns), int(n)) for ns, n in found))


def namespace_param(namespace: str | None) -> str:
    return stored_namespace(inputs.check_namespace(namespace))
