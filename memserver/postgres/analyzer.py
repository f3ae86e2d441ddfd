"""Re-indexing a database whose keyword terms another analyzer made (the local store's keyword.py does the same).

A memory row's terms are computed in Python at write time (terms.py), and queries are tokenised by the running
memserver: when memserver's tokenizer changes (memserver.retrieval.terms.ANALYZER; e.g. Snowball stemming), the terms of
a database written before no longer match the queries, and keyword and hybrid recall silently miss. So `meta`'s
'keyword' row names the analyzer the database's terms were made with ("1": before Snowball stemming), and a
database made by another is re-indexed on open and by `memserver db migrate`:

  - under the migrations' advisory lock, so one process re-indexes and the others wait, then find it done;
  - in batches of rows in (tenant, seq) order, one transaction each: Python recomputes the terms from the content
    and the occurred_at, SQL rewrites the rows whose terms differ, and the memories_changed trigger (schema 3)
    moves their postings and BM25's total length along;
  - with progress logged to stderr;
  - safe to interrupt: the stamp is written only after the last batch, and a rerun recomputes every row but
    rewrites only those still made by the old analyzer.

What a row is indexed under (content, tags, occurred_at's date words) is postgres/terms.py's `indexed`.

Rows written meanwhile by this memserver already carry the new terms; rows written by an older memserver running
at the same time would carry the old ones (stop older processes before upgrading).
"""

from __future__ import annotations

import logging
import time
from typing import Any

import psycopg

from memserver.contract import inputs
from memserver.errors import StoreError
from memserver.postgres import rows, terms
from memserver.postgres.terms import ANALYZER

__all__ = ["BATCH", "is_current", "made_with", "reindex"]

log = logging.getLogger(__name__)

BATCH = 1000  # rows per transaction: big enough that round trips do not dominate, small enough to hold few locks
_PROGRESS_EVERY_S = 5.0
_ATTEMPTS = 3

_READ = """
    SELECT tenant, seq, content, coalesce(occurred_at, created_at), tags, speaker, terms, tfs, doc_len
    FROM memserver.memories
    WHERE (tenant, seq) > (%s, %s) ORDER BY tenant, seq LIMIT %s
"""
_REWRITE = """
    UPDATE memserver.memories m
    SET terms = string_to_array(u.terms, ' '), tfs = string_to_array(u.tfs, ' ')::smallint[], doc_len = u.doc_len
    FROM unnest(%s::text[], %s::bigint[], %s::text[], %s::text[], %s::int[]) AS u(tenant, seq, terms, tfs, doc_len)
    WHERE m.tenant = u.tenant AND m.seq = u.seq
"""


def made_with(conn: psycopg.Connection[Any]) -> str | None:
    """The analyzer the database's terms were made with (None: memserver's schema is not installed there)."""
    row = conn.execute("SELECT value FROM memserver.meta WHERE key = 'keyword'").fetchone()
    return str(row[0]) if row else None


def is_current(conn: psycopg.Connection[Any]) -> bool:
    return made_with(conn) == ANALYZER


def reindex(conn: psycopg.Connection[Any], lock: int, *, batch: int = BATCH) -> int:
    """Recompute every memory's terms under advisory lock `lock` unless the stamp says they are current; returns
    how many rows were rewritten. `conn`: autocommit, as the tables' owner (row-level security does not apply)."""
    conn.execute("SELECT pg_advisory_lock(%s)", [lock])
    try:
        old = made_with(conn)
        if old == ANALYZER:
            return 0  # another process did it while this one waited for the lock
        if conn.execute("SELECT row_security_active('memserver.memories')").fetchone() != (False,):
            raise StoreError(  # it would see no rows, and stamp a database it did not re-index
                f"the keyword terms of this database were made by the analyzer {old!r}, not this memserver's, and "
                "this role may not re-index them: run memserver db migrate --database URL as the tables' owner"
            )
        return _reindex_all(conn, old, batch)
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", [lock])


def _reindex_all(conn: psycopg.Connection[Any], old: str | None, batch: int) -> int:
    total = conn.execute("SELECT count(*) FROM memserver.memories").fetchone()[0]  # type: ignore[index]
    log.info("re-indexing the keyword terms of %d memories: made by analyzer %r, this memserver's is %r", total,
             old, ANALYZER)  # fmt: skip
    started = last_report = time.monotonic()
    after: tuple[str, int] = ("", -1)
    read = rewritten = 0
    while True:
        found, changes = _batch(conn, after, batch)
        if not found:
            break
        read += len(found)
        rewritten += len(changes[0])
        after = (found[-1][0], found[-1][1])
        if time.monotonic() - last_report >= _PROGRESS_EVERY_S:
            last_report = time.monotonic()
            log.info("re-indexed %d of %d memories (%.0f%%)", read, total, 100 * read / max(total, read, 1))
    conn.execute(
        "INSERT INTO memserver.meta (key, value) VALUES ('keyword', %s) "
        "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        [ANALYZER],
    )
    log.info("re-indexed the keyword terms of %d memories (%d rewritten) in %.1f s", read, rewritten,
             time.monotonic() - started)  # fmt: skip
    return rewritten


def _batch(conn: psycopg.Connection[Any], after: tuple[str, int], size: int) -> tuple[list[Any], list[list[Any]]]:
    """One transaction: the next `size` rows after `after`, and the rewrite of those whose terms differ. Retried
    when it deadlocks with a writer locking the same rows in another order (PostgreSQL aborts one of the two)."""
    for attempt in range(_ATTEMPTS):
        try:
            with conn.transaction():
                found = conn.execute(_READ, [*after, size]).fetchall()
                changes = _changed(found)
                if changes[0]:
                    conn.execute(_REWRITE, changes)
            return found, changes
        except psycopg.errors.DeadlockDetected:
            if attempt == _ATTEMPTS - 1:
                raise
            log.info("re-index batch deadlocked with a writer; retrying it")
    raise AssertionError("unreachable")


def _changed(found: list[tuple[Any, ...]]) -> list[list[Any]]:
    """The _REWRITE arrays (tenant, seq, terms, tfs, doc_len) of the rows whose stored terms differ from the
    running analyzer's."""
    out: list[list[Any]] = [[], [], [], [], []]
    for tenant, seq, content, occurred, tags, speaker, stored_terms, stored_tfs, doc_len in found:
        new = terms.indexed(rows.loaded_text(content), inputs.stored_time(occurred), tags, speaker)
        new_terms = [rows.stored_text(t) for t in new.terms]
        if new_terms == list(stored_terms) and new.tfs == list(stored_tfs) and new.length == doc_len:
            continue
        for column, value in zip(
            out, (tenant, seq, " ".join(new_terms), " ".join(map(str, new.tfs)), new.length), strict=True
        ):
            column.append(value)
    return out
