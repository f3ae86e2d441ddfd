"""Listings on PostgreSQL: pages newest first with their cursors, bulk selections, and the counts per tag, session
and namespace.

Every listing is in the order of the index memories_recent, newest first: (occurred_at, seq) descending, seq
(insertion order) breaking ties, the later-stored first, as the local store's row does. A cursor names the last
memory of a page by that key, and the next page is what sorts below it when it is asked: memories added meanwhile
sort above it (newer: not listed) or below it (listed once). seq never changes (compaction deletes forgotten rows
and renumbers nothing), so a cursor stays valid through compactions and in every process. A cursor is `p1.` +
base64url of the JSON list [occurred_at, seq].
"""

from __future__ import annotations

from typing import Any

from memserver.contract import cursors, inputs
from memserver.postgres.rows import COLUMNS, OCCURRED, namespace_of, stored_namespace
from memserver.postgres.search import filter_sql

__all__ = ["decode_cursor", "encode_cursor", "page_sql", "select_sql"]

_PREFIX = "p1."
NEWEST_FIRST = f"ORDER BY {OCCURRED} DESC, m.seq DESC"


def encode_cursor(occurred_at: str, seq: int) -> str:
    return cursors.encode(_PREFIX, [occurred_at, int(seq)])


def _cursor_fields(payload: Any) -> tuple[str, int]:
    occurred, seq = payload
    if not isinstance(occurred, str) or not isinstance(seq, int) or isinstance(seq, bool) or seq < 0:
        raise ValueError("fields")
    return inputs.stored_time(inputs.parse_time(occurred, "cursor")[0]), seq


def decode_cursor(cursor: str) -> tuple[str, int]:
    """(occurred_at, seq) of a cursor this engine returned; InvalidInputError naming `cursor` otherwise."""
    return cursors.decode(cursor, _PREFIX, _cursor_fields)


def page_sql(req: inputs.ListRequest, tenant: str) -> tuple[str, dict[str, Any]]:
    """One page of list_page (limit + 1 rows: the extra one says whether another page follows)."""
    where, params = filter_sql(req.filter)
    if req.cursor is not None:
        occurred, seq = decode_cursor(req.cursor)
        where += f" AND ({OCCURRED}, m.seq) < (%(after_time)s::timestamptz, %(after_seq)s)"
        params |= {"after_time": occurred, "after_seq": seq}
    sql = f"SELECT {COLUMNS} FROM memserver.memories m WHERE {where} {NEWEST_FIRST} LIMIT %(n)s"
    return sql, {"tenant": tenant, "n": req.limit + 1, **params}


def select_sql(s: inputs.SelectFilter, tenant: str, sample: int) -> list[tuple[str, dict[str, Any]]]:
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
