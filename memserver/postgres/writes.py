"""The write path on PostgreSQL: the rules both engines share (contract/write_rules), over rows.

One add, add_many or import batch is one transaction (pool.Database.transact):

  1. advisory transaction locks on (tenant, namespace, content hash) of every item, taken in one statement in
     ascending key order, so two writers of overlapping content wait for each other instead of deadlocking on
     the unique index; the dedup check that follows then sees every committed writer of the same content;
  2. what the rules need to know (`View`): the current memories with the items' (namespace, hash), and the
     stored memories their `replaces` and imported ids name (locked FOR UPDATE, in id order);
  3. the rules (`plan`: contract/write_rules over the View, the local store's rules: duplicates per namespace,
     what each item replaces);
  4. INSERT of the fresh rows, and UPDATE of the memories they replace (replaced_by, replaced_at).

Before embedding, the same rules run once over a plain read (writer.py, `Writer.precheck`), so a bad `replaces` is
refused and a known duplicate is not embedded; inside the transaction they run again on what is committed by then.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import psycopg

from memserver.contract import inputs, write_rules
from memserver.contract.backend import Memory
from memserver.contract.write_rules import Pending
from memserver.errors import StoreError
from memserver.postgres import rows, terms
from memserver.postgres.rows import COLUMNS, CURRENT

__all__ = ["View", "content_of", "load_view", "plan", "view_of", "view_statements", "write"]


def content_of(it: Pending) -> tuple[str, bytes]:
    """The (stored namespace, content hash) an item's duplicates are found by (the unique index's key)."""
    return (rows.stored_namespace(it.m.namespace), rows.content_hash(it.m.content))


class View(NamedTuple):
    """What the rules read (write_rules.RuleLookup): current memories by (stored namespace, hash), stored memories
    (not forgotten) by id."""

    dups: dict[tuple[str, bytes], Sequence[Any]]
    stored: dict[str, Sequence[Any]]

    def same_content(self, item: Pending) -> Memory | None:
        row = self.dups.get(content_of(item))
        return None if row is None else rows.memory(row, duplicate=True)

    def with_id(self, memory_id: str) -> Memory | None:
        row = self.stored.get(memory_id)
        return None if row is None else rows.memory(row, duplicate=True)

    def link(self, memory_id: str) -> write_rules.Link | None:
        row = self.stored.get(memory_id)
        if row is None:
            return None
        return write_rules.Link(rows.namespace_of(row[10]), row[12] is None, "" if row[12] is None else row[12].hex)


LOCKS = """
    SELECT count(pg_advisory_xact_lock(k)) FROM (
        SELECT DISTINCT hashtextextended(%s || '/' || u.ns || '/' || encode(u.h, 'hex'), 0) AS k
        FROM unnest(%s::text[], %s::bytea[]) AS u(ns, h) ORDER BY k) s
"""
DUPS = f"""
    SELECT u.ns, u.h, {COLUMNS} FROM unnest(%s::text[], %s::bytea[]) AS u(ns, h)
    JOIN memserver.memories m ON m.tenant = %s AND m.namespace = u.ns AND m.content_hash = u.h AND {CURRENT}
"""
STORED = f"SELECT {COLUMNS} FROM memserver.memories m WHERE m.tenant = %s AND m.id = ANY(%s) AND m.forgotten_at IS NULL"


def view_statements(tenant: str, items: Sequence[Pending], *, lock: bool) -> list[tuple[str, list[Any]]]:
    """The statements of the View of `items` (the dups, then the stored memories named by id, if any); with `lock`
    (inside the write transaction) the content locks first, and the memories named by id locked FOR UPDATE."""
    keys = list(dict.fromkeys(content_of(it) for it in items))
    spaces, hashes = [k[0] for k in keys], [k[1] for k in keys]
    statements: list[tuple[str, list[Any]]] = [(LOCKS, [tenant, spaces, hashes])] if lock else []
    statements.append((DUPS, [spaces, hashes, tenant]))
    named = sorted({i for it in items for i in (it.m.replaces, it.id) if i})
    if named:
        query = STORED + (" ORDER BY m.id FOR UPDATE OF m" if lock else "")
        statements.append((query, [tenant, [uuid.UUID(i) for i in named]]))
    return statements


def view_of(cursors: Sequence[psycopg.Cursor[Any]]) -> View:
    """The View from the cursors of view_statements (the lock statement's, if any, left out)."""
    dups = {(r[0], bytes(r[1])): r[2:] for r in cursors[0].fetchall()}
    stored = {r[0].hex: r for r in cursors[1].fetchall()} if len(cursors) > 1 else {}
    return View(dups, stored)


def load_view(conn: psycopg.Connection[Any], tenant: str, items: Sequence[Pending], *, lock: bool) -> View:
    """The View of `items` read on `conn` inside a transaction, in one round trip (a pipeline)."""
    with conn.pipeline():
        cursors = [conn.execute(query, params) for query, params in view_statements(tenant, items, lock=lock)]
    return view_of(cursors[1:] if lock else cursors)


def plan(view: View, items: list[Pending], defer: bool) -> tuple[list[Pending], list[Memory | None], list[Pending]]:
    """(the items to write, for the others the stored memory they duplicate, the items held back): the rules of
    write_rules, on the View."""
    fresh, out = write_rules.without_duplicates(view, items)
    return fresh, out, write_rules.check_links(view, fresh, defer)


def write(
    conn: psycopg.Connection[Any],
    tenant: str,
    model_id: int,
    items: list[Pending],
    embed: Callable[[Sequence[str]], np.ndarray],
    *,
    importing: bool = False,
) -> tuple[list[Memory], list[Pending], int]:
    """One write transaction's body: (a result per item not held back, the held items, rows inserted)."""
    fresh, out, held = plan(load_view(conn, tenant, items, lock=True), items, importing)
    if held:
        fresh = [it for it in fresh if it not in held]
    inserted: set[str] = set()
    stamp = inputs.now()
    if fresh:
        missing = [it for it in fresh if it.vector is None]
        if missing:  # was a duplicate when embedding began, and has been forgotten since: rare
            for it, v in zip(missing, embed([it.m.content for it in missing]), strict=True):
                it.vector = v
        for it in fresh:
            it.id = it.id or uuid.uuid4().hex
        given = [uuid.UUID(it.m.id) for it in fresh if it.m.id]
        if given:  # an imported id of a forgotten memory: its tombstone goes (the id is the table's key)
            conn.execute(
                "DELETE FROM memserver.memories WHERE tenant = %s AND id = ANY(%s) AND forgotten_at IS NOT NULL",
                [tenant, given],
            )
        # The stored memories replaced first: a new version with the same content (new tags, say) must not meet its
        # old version in the unique index of current content. Those of this batch once they are inserted.
        batch = {it.id for it in fresh}
        links = [(it.m.replaces, it.id, it.m.created_at or stamp) for it in fresh if it.m.replaces]
        mark_replaced(conn, tenant, [link for link in links if link[0] not in batch])
        query, params = insert_sql(tenant, model_id, fresh, stamp)
        inserted = {r[0].hex for r in conn.execute(query, params).fetchall()}
        lost = [it for it in fresh if it.id not in inserted]
        if lost:  # a conflict with a writer that took no content lock (or an imported id stored meanwhile)
            again = load_view(conn, tenant, lost, lock=False)
            for it in lost:
                row = again.dups.get(content_of(it)) or again.stored.get(it.m.id)
                if row is None:
                    raise StoreError("a memory was stored and forgotten by another writer meanwhile; store it again")
                if it.m.replaces:  # (the memory it replaces is marked replaced already: roll it all back)
                    raise StoreError("another writer stored the same content meanwhile; nothing replaced, try again")
                out[items.index(it)] = rows.memory(row, duplicate=True)
        mark_replaced(conn, tenant, [link for link in links if link[0] in batch and link[1] in inserted])
    result: list[Memory] = []
    for it, memory in zip(items, out, strict=True):
        if it in held:
            continue
        if memory is None:
            own = items[it.dup_of] if it.dup_of >= 0 else it
            memory = memory_of(own, stamp, duplicate=it.dup_of >= 0)
        result.append(memory)
    return result, held, len(inserted)


def mark_replaced(conn: psycopg.Connection[Any], tenant: str, links: list[tuple[str, str, str]]) -> None:
    """Mark memories replaced: (old id, new id, when) each."""
    if links:
        conn.execute(
            "UPDATE memserver.memories m SET replaced_by = u.new, replaced_at = u.at::timestamptz "
            "FROM unnest(%s::uuid[], %s::uuid[], %s::text[]) AS u(old, new, at) "
            "WHERE m.tenant = %s AND m.id = u.old",
            [[uuid.UUID(a) for a, _, _ in links], [uuid.UUID(b) for _, b, _ in links], [t for *_, t in links], tenant],
        )


def memory_of(it: Pending, stamp: str, duplicate: bool = False) -> Memory:
    """The memory an item written now is (its created_at: the item's own, if imported, else `stamp`)."""
    m = it.m
    created = m.created_at or stamp
    return Memory(
        it.id,
        m.content,
        created,
        m.tags,
        m.source,
        duplicate,
        (),
        m.occurred_at or created,
        m.speaker,
        m.role,
        m.session,
        m.namespace,
        m.replaces,
        m.replaced_by,
        m.kind,
        m.due or None,
        m.done,
        m.pinned,
        m.archived,
    )


def insert_sql(tenant: str, model_id: int, items: Sequence[Pending], stamp: str) -> tuple[str, list[Any]]:
    """INSERT ... SELECT FROM unnest(arrays) ON CONFLICT DO NOTHING RETURNING id: any number of rows at once.

    Ragged arrays (terms, tfs, tags) cannot be unnested as 2-D arrays, so terms and tfs travel space-joined
    (terms never contain whitespace) and tags as JSON arrays. Empty labels and links are NULL.
    """
    cols: dict[str, list[Any]] = {name: [] for name in INSERT_COLUMNS}
    for it in items:
        m = it.m
        created = m.created_at or stamp
        occurred = m.occurred_at or created
        indexed = terms.indexed(m.content, occurred, m.tags, m.speaker)
        values = (
            uuid.UUID(it.id),
            created,
            occurred,
            indexed.length,
            rows.content_hash(m.content),
            rows.stored_text(m.content),
            json.dumps(list(m.tags), ensure_ascii=False),
            m.source,
            rows.stored_text(" ".join(indexed.terms)),
            " ".join(map(str, indexed.tfs)),
            m.speaker or None,
            m.role or None,
            m.session or None,
            rows.stored_namespace(m.namespace),
            uuid.UUID(m.replaces) if m.replaces else None,
            uuid.UUID(m.replaced_by) if m.replaced_by else None,
            created if m.replaced_by else None,  # (when it was replaced is not known: from the start)
            m.kind,
            m.due or None,
            m.done,
            m.pinned,
            m.archived,
            np.asarray(it.vector, np.float32),
        )
        for name, value in zip(INSERT_COLUMNS, values, strict=True):
            cols[name].append(value)
    query = """
        INSERT INTO memserver.memories
            (id, created_at, occurred_at, doc_len, model_id, tenant, content_hash, content, tags, source, terms, tfs,
             speaker, role, session, namespace, replaces, replaced_by, replaced_at, kind, due, done, pinned, archived,
             embedding)
        SELECT u.id, u.created_at::timestamptz, u.occurred_at::timestamptz, u.doc_len, %s, %s, u.hash, u.content,
               ARRAY(SELECT jsonb_array_elements_text(u.tags::jsonb)), u.source,
               string_to_array(u.terms, ' '), string_to_array(u.tfs, ' ')::smallint[],
               u.speaker, u.role, u.session, u.namespace, u.replaces, u.replaced_by, u.replaced_at::timestamptz,
               u.kind, u.due::date, u.done, u.pinned, u.archived, u.vec
        FROM unnest(%s::uuid[], %s::text[], %s::text[], %s::int[], %s::bytea[], %s::text[], %s::text[], %s::text[],
                    %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[], %s::uuid[], %s::uuid[],
                    %s::text[], %s::text[], %s::text[], %s::bool[], %s::bool[], %s::bool[], %b::vector[])
             WITH ORDINALITY AS u(id, created_at, occurred_at, doc_len, hash, content, tags, source, terms, tfs,
                                  speaker, role, session, namespace, replaces, replaced_by, replaced_at,
                                  kind, due, done, pinned, archived, vec, n)
        ORDER BY u.n
        ON CONFLICT DO NOTHING
        RETURNING id
    """
    return query, [model_id, tenant, *(cols[name] for name in INSERT_COLUMNS)]


INSERT_COLUMNS = (
    "id",
    "created_at",
    "occurred_at",
    "doc_len",
    "hash",
    "content",
    "tags",
    "source",
    "terms",
    "tfs",
    "speaker",
    "role",
    "session",
    "namespace",
    "replaces",
    "replaced_by",
    "replaced_at",
    "kind",
    "due",
    "done",
    "pinned",
    "archived",
    "vec",
)
