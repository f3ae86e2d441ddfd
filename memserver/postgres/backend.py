"""PostgresBackend: the MemoryBackend contract (backend.py) on PostgreSQL + pgvector.

The database stores and ranks; memserver still embeds, in this process, with its own model, and tokenises for
the keyword index with its own tokenizer (terms.py), so both engines answer alike. One backend is one tenant of
one database (the HTTP token's user and the collection); any number of processes on any number of hosts may
open the same tenant, and each sees the others' writes as soon as they are acknowledged.

Writes are one transaction each (writer.py: embed only what is new, then writes.py's content locks, rules, INSERT and
UPDATE), acknowledged after COMMIT; reads are one statement each (pool.Database.run: one round trip). Exact dedup per
namespace is the partial unique index on (tenant, namespace, content hash) of the current memories, behind advisory
locks on the same keys, so it holds under any concurrency. History stays in the table: a replaced memory has
replaced_by, a forgotten one forgotten_at (its tombstone, for as_of) until compact() deletes it. Inputs are checked by
memserver.contract.inputs, the rules every engine shares.
"""

from __future__ import annotations

import logging
import os
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import date
from typing import TYPE_CHECKING, Any, TypeVar

import numpy as np

from memserver.contract import importing, inputs, lifecycle, requests
from memserver.contract.backend import Hit, Memory, MemoryFilter, Page, Selection
from memserver.contract.write_rules import Pending
from memserver.embedding import base as embedding
from memserver.errors import StoreError
from memserver.postgres import analyzer, health, listing, ranking, rows, schema
from memserver.postgres.pool import CALL_DEADLINE_S, Database
from memserver.postgres.rows import COLUMNS, OCCURRED
from memserver.postgres.searcher import Searcher
from memserver.postgres.writer import Writer

if TYPE_CHECKING:
    from memserver.embedding.base import TextEmbedder

log = logging.getLogger(__name__)


IMPORT_BATCH = 1000
# An import adding more rows than this (PostgreSQL's autovacuum_analyze_threshold and _scale_factor defaults) ANALYZEs.
ANALYZE_AFTER, ANALYZE_SHARE = 50, 0.1
EXPORT_BATCH = 1000
T = TypeVar("T")


class PostgresBackend:
    """One tenant's memories in a PostgreSQL database (see docs/scale-out.md).

    Example::

        with PostgresBackend("postgresql://memserver@db/memories", tenant="personal_memory") as backend:
            backend.add("The staging DB password rotates every Monday", tags=["ops"])

    On open it connects, migrates the schema if needed (schema.py: advisory-locked, idempotent) and refuses a
    database built with another model. `database` may be a shared `Database` (one pool for many tenants); then
    close() closes this backend only (every later call raises StoreError), and the pool stays for the others.
    """

    def __init__(
        self,
        url: str | None = None,
        tenant: str = "personal_memory",
        embedder: TextEmbedder | None = None,
        *,
        database: Database | None = None,
        migrate: bool = True,
    ) -> None:
        if embedder is None:
            from memserver.embedding.embedder import Embedder

            embedder = Embedder()
        self.embedder: TextEmbedder = embedder
        self.dim = int(embedder.dim)
        self.tenant = tenant
        self._own_db = database is None
        if database is None:
            if not url:
                raise StoreError("no database URL given")
            database = open_database(url, str(embedder.model_name), self.dim, migrate=migrate)
        self._database = database
        if database.model != (str(embedder.model_name), self.dim):
            raise StoreError(f"the shared database was opened for the model {database.model}, not this embedder's")
        self.model_id = database.model_id
        self._closed = False
        self._lock = threading.Lock()
        estimates = ranking.Estimates(*self._count())  # the plans' inputs, refreshed by every search
        self._searcher = Searcher(lambda: self.db, tenant, estimates)  # the read path (searcher.py)
        self._writer = Writer(lambda: self.db, tenant, self.model_id, self._embed)  # the write path (writer.py)

    @property
    def db(self) -> Database:
        """The pool, while this backend is open (StoreError after close: M3 of the review)."""
        if self._closed:
            raise StoreError("this PostgreSQL backend is closed")
        return self._database

    # --- writing -----------------------------------------------------------------------------------------------

    def add(
        self,
        content: str,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        *,
        occurred_at: str | date | None = None,
        speaker: str | None = None,
        role: str | None = None,
        session: str | None = None,
        namespace: str | None = None,
        replaces: str | None = None,
        kind: str | None = None,
        due: str | date | None = None,
    ) -> Memory:
        """See backend.MemoryBackend.add."""
        new = requests.new_memory(
            content,
            tags,
            source,
            occurred_at=occurred_at,
            speaker=speaker,
            role=role,
            session=session,
            namespace=namespace,
            replaces=replaces,
            kind=kind,
            due=due,
        )
        item = Pending.of(new)
        memory = self._writer.write([item])[0]
        if memory.duplicate or item.vector is None:
            return memory
        similar = self._searcher.similar(item.vector, memory.id, memory.namespace)
        return replace(memory, similar=similar) if similar else memory

    def add_many(self, items: Iterable[dict[str, Any] | str]) -> list[Memory]:
        """See backend.MemoryBackend.add_many: one batched embedding, one transaction."""
        one = isinstance(items, list) and len(items) == 1
        news = requests.new_memories(items)
        if not news:
            return []
        pending = [Pending.of(m, "" if one else f"items[{n}].") for n, m in enumerate(news)]
        return self._writer.write(pending)

    def delete(self, memory_id: str, *, namespace: str | None = None) -> bool:
        """See backend.MemoryBackend.delete."""
        return self.delete_many([inputs.check_id(memory_id)], namespace=namespace) == 1

    def delete_many(self, ids: Iterable[str], *, namespace: str | None = None) -> int:
        """See backend.MemoryBackend.delete_many (writer.py: one UPDATE, the tombstones)."""
        return self._writer.forget(inputs.check_ids(ids), listing.namespace_param(namespace))

    # --- reading -----------------------------------------------------------------------------------------------

    def get(self, memory_id: str, *, namespace: str | None = None) -> Memory | None:
        """See backend.MemoryBackend.get."""
        mid = uuid.UUID(inputs.check_id(memory_id))
        space = listing.namespace_param(namespace)
        sql = (
            f"SELECT {COLUMNS} FROM memserver.memories m WHERE m.tenant = %s AND m.id = %s AND m.namespace = %s "
            "AND m.forgotten_at IS NULL"
        )
        row = self.db.run(self.tenant, [(sql, [self.tenant, mid, space])])[0].fetchone()
        return None if row is None else rows.memory(row)

    def list_recent(
        self,
        limit: int = 10,
        tags: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        session: str | None = None,
        speaker: str | None = None,
        kinds: Sequence[str] | None = None,
        include_archived: bool = False,
    ) -> list[Memory]:
        """See backend.MemoryBackend.list_recent."""
        return self.list_page(
            limit,
            tags,
            namespace=namespace,
            session=session,
            speaker=speaker,
            kinds=kinds,
            include_archived=include_archived,
        ).memories

    def list_page(
        self,
        limit: int = 10,
        tags: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        session: str | None = None,
        speaker: str | None = None,
        role: str | None = None,
        source: str | None = None,
        since: str | date | None = None,
        until: str | date | None = None,
        cursor: str | None = None,
        as_of: str | date | None = None,
        order: str = "occurred",
        kinds: Sequence[str] | None = None,
        include_archived: bool = False,
    ) -> Page:
        """See backend.MemoryBackend.list_page (listing.py has the orders and the cursors)."""
        fields = {"namespace": namespace, "session": session, "speaker": speaker, "role": role, "as_of": as_of}
        req = requests.list_request(
            limit,
            tags,
            source=source,
            since=since,
            until=until,
            cursor=cursor,
            order=order,
            kinds=kinds,
            include_archived=include_archived,
            **fields,
        )
        found = self.db.run(self.tenant, [listing.page_sql(req, self.tenant)])[0].fetchall()
        memories = [rows.memory(row) for row in found[: req.limit]]
        more = len(found) > req.limit
        last = found[req.limit - 1] if more else None
        return Page(memories, listing.encode_cursor(memories[-1], last[1], req.order) if last else None)

    def pin(self, memory_id: str, pinned: bool = True, *, namespace: str | None = None) -> Memory | None:
        """See backend.MemoryBackend.pin."""
        return lifecycle.set_flag(self, memory_id, "pinned", pinned, namespace)

    def archive(self, memory_id: str, archived: bool = True, *, namespace: str | None = None) -> Memory | None:
        """See backend.MemoryBackend.archive."""
        return lifecycle.set_flag(self, memory_id, "archived", archived, namespace)

    def mark_done(self, memory_id: str, done: bool = True, *, namespace: str | None = None) -> Memory | None:
        """See backend.MemoryBackend.mark_done."""
        return lifecycle.set_flag(self, memory_id, "done", done, namespace)

    def select(self, filter: MemoryFilter, limit: int | None = None) -> Selection:
        """See backend.MemoryBackend.select."""
        wanted = requests.select_filter(filter)
        n = 0 if limit is None else inputs.check_limit(limit)
        found, sample = self.db.run(self.tenant, listing.select_sql(wanted, self.tenant, n))
        ids = [r[0].hex for r in found.fetchall()]
        return Selection(len(ids), [rows.memory(r) for r in sample.fetchall()], ids)

    def search(
        self,
        query: str,
        limit: int = 5,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        since: str | date | None = None,
        until: str | date | None = None,
        min_score: float | None = None,
        mode: str = "hybrid",
        *,
        speaker: str | None = None,
        role: str | None = None,
        session: str | None = None,
        namespace: str | None = None,
        as_of: str | date | None = None,
        query_vector: Sequence[float] | np.ndarray | None = None,
        explain: bool = False,
        kinds: Sequence[str] | None = None,
        include_archived: bool = False,
    ) -> list[Hit]:
        """See backend.MemoryBackend.search."""
        fields = {"speaker": speaker, "role": role, "session": session, "namespace": namespace, "as_of": as_of}
        request = requests.search_request(
            query,
            limit,
            tags,
            source,
            since,
            until,
            min_score,
            mode,
            kinds=kinds,
            include_archived=include_archived,
            **fields,
        )
        if query_vector is not None:
            q = inputs.check_vector(query_vector, self.dim, "query_vector")
        else:
            q = embedding.query_vector(self.embedder, request.query, self.dim)
        return self._searcher.run(q, request, explain)

    def tag_counts(self, *, namespace: str | None = None) -> dict[str, int]:
        """See backend.MemoryBackend.tag_counts."""
        space = listing.namespace_param(namespace)
        found = self.db.run(self.tenant, [(listing.TAG_COUNTS, [self.tenant, space])])[0].fetchall()
        return {tag: int(n) for tag, n in found}

    def namespaces(self) -> dict[str, int]:
        """See backend.MemoryBackend.namespaces: from the per-namespace slots of tenant_stats."""
        return listing.namespaces(self.db.run(self.tenant, [(listing.NAMESPACES, [self.tenant])])[0].fetchall())

    def sessions(self, *, namespace: str | None = None) -> dict[str, int]:
        """See backend.MemoryBackend.sessions."""
        space = listing.namespace_param(namespace)
        return listing.sessions(self.db.run(self.tenant, [(listing.SESSIONS, [self.tenant, space])])[0].fetchall())

    def stats(self) -> dict[str, Any]:
        """See backend.MemoryBackend.stats: this tenant's figures only (an MCP user reads them as memory://stats);
        the whole database's are `memserver db stats` (postgres.database_stats)."""
        count, _ = self._count()
        replaced_sql = (
            "SELECT count(*) FROM memserver.memories WHERE tenant = %s AND replaced_by IS NOT NULL "
            "AND forgotten_at IS NULL"
        )
        spaces, held = self.db.run(self.tenant, [(listing.NAMESPACES, [self.tenant]), (replaced_sql, [self.tenant])])
        n_spaces = len(spaces.fetchall())
        replaced = int(held.fetchone()[0])  # type: ignore[index]
        return {
            "engine": "postgresql",
            "count": count,
            "collection": self.tenant.rpartition("/")[2],
            "tenant": self.tenant,
            "model": str(self.embedder.model_name),
            "dim": self.dim,
            "namespaces": n_spaces,
            "replaced": replaced,
            "index": self.db.index_parameters(self.tenant),
        }

    # --- for watchers and completions (resource subscriptions, completion/complete) ------------------------------

    def revision(self) -> str:
        """See backend.MemoryBackend.revision: the tenant's change counter (tenant_stats.changes, summed over its
        slots: every statement that adds, changes or deletes memories adds to it in its own transaction)."""
        sql = "SELECT coalesce(sum(changes), 0) FROM memserver.tenant_stats WHERE tenant = %s"
        row = self.db.run(self.tenant, [(sql, [self.tenant])])[0].fetchone()
        return str(int(row[0])) if row else "0"

    def ids_with_prefix(self, prefix: str, limit: int, *, namespace: str | None = None) -> list[str]:
        """See backend.MemoryBackend.ids_with_prefix: a range scan of the primary key (tenant, id)."""
        start = inputs.check_id_prefix(prefix)
        n = inputs.check_limit(limit)
        space = listing.namespace_param(namespace)
        low, high = uuid.UUID(start.ljust(32, "0")), uuid.UUID(start.ljust(32, "f"))
        sql = (
            "SELECT id FROM memserver.memories WHERE tenant = %s AND id BETWEEN %s AND %s AND namespace = %s "
            "AND forgotten_at IS NULL ORDER BY id LIMIT %s"
        )
        found = self.db.run(self.tenant, [(sql, [self.tenant, low, high, space, n])])[0].fetchall()
        return [row[0].hex for row in found]

    def _count(self) -> tuple[int, int]:
        sql = (
            "SELECT (SELECT coalesce(sum(docs), 0) FROM memserver.tenant_stats WHERE tenant = %s), "
            "(SELECT reltuples FROM pg_class WHERE oid = 'memserver.memories'::regclass)"
        )
        n, table = self.db.run(self.tenant, [(sql, [self.tenant])])[0].fetchone()  # type: ignore[misc]
        return int(n), max(int(table or 0), int(n))

    # --- bulk ----------------------------------------------------------------------------------------------------

    def export(self, include_vectors: bool = False, *, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        """See backend.MemoryBackend.export: from one snapshot (REPEATABLE READ, a server-side cursor)."""
        space = None if namespace is None else listing.namespace_param(namespace)
        db = self.db
        columns = COLUMNS + (", m.embedding" if include_vectors else "")
        where = "m.tenant = %s AND m.forgotten_at IS NULL" + ("" if space is None else " AND m.namespace = %s")
        sql = f"SELECT {columns} FROM memserver.memories m WHERE {where} ORDER BY {OCCURRED}, m.seq"
        params = [self.tenant] if space is None else [self.tenant, space]
        for row in db.stream(self.tenant, sql, params, EXPORT_BATCH):
            d = rows.memory(row).to_dict()
            if include_vectors:
                d["vector"] = np.asarray(row[rows.WIDTH].to_numpy(), np.float32).tolist()
            yield d

    def import_(self, records: Iterable[dict[str, Any]]) -> int:
        """See backend.MemoryBackend.import_: batches of IMPORT_BATCH, one transaction each; a record replacing
        one not there yet waits for the end of the import. Then, when it added more than autovacuum's threshold
        of what the tenant held, the statistics are refreshed (pool.py, Database.analyze: without them the next
        searches are planned for the table the statistics describe, e.g. an empty one). The tenant's share, not the
        table's: autovacuum waits for 10% of the whole table, and until then a tenant the statistics have not seen
        is estimated at 1 row, every index on `tenant` ties, and a lookup by seq could filter the tenant's every row
        (benchmarks/README.md, "Engine parity": a new tenant of 419 turns beside 9 others)."""
        before, _ = self._count()
        added = importing.import_records(records, self.dim, Pending.of, self._writer.import_batch, IMPORT_BATCH)
        if added > ANALYZE_AFTER + ANALYZE_SHARE * before:
            self.db.analyze()
        return added

    def compact(self) -> dict[str, Any]:
        """Purge the tenant's forgotten memories for good (their tombstones), then VACUUM (ANALYZE) memserver's
        tables (autovacuum reclaims space by itself; this does it now)."""
        purge = "DELETE FROM memserver.memories WHERE tenant = %s AND forgotten_at IS NOT NULL RETURNING seq"
        removed = len(self.db.run(self.tenant, [(purge, [self.tenant])], write=True)[0].fetchall())
        count, _ = self._count()
        result = self.db.vacuum()
        return {"count": count, **result, "removed": removed}

    def health(self) -> dict[str, Any]:
        """See backend.MemoryBackend.health (postgres/health.py)."""
        return health.health(self)

    def backup(self, dest: str | os.PathLike[str], keep: int | None = None) -> dict[str, Any]:
        """See backend.MemoryBackend.backup: a database is backed up with pg_dump; this says how."""
        return {"engine": "postgresql", "written": False, "recipe": health.BACKUP_RECIPE}

    # --- helpers -----------------------------------------------------------------------------------------------

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if vectors.shape != (len(texts), self.dim):
            raise StoreError(f"the embedder returned shape {vectors.shape}, expected ({len(texts)}, {self.dim})")
        return vectors

    def close(self) -> None:
        """See backend.MemoryBackend.close: closes the pool only if this backend opened it."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._own_db:
            self._database.close()

    def __enter__(self) -> PostgresBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_database(
    url: str, model: str, dim: int, *, migrate: bool = True, call_deadline: float = CALL_DEADLINE_S
) -> Database:
    """Connect, migrate (unless `migrate` is False: then a database behind the code is an error), open the pool.
    `call_deadline`: how long a call may wait for the server's answer (pool.py, watchdog.py)."""
    db = Database(url, call_deadline=call_deadline)
    owner = db.connect_owner()
    try:
        if migrate:
            schema.ensure_schema(owner, model, dim)
        elif schema.current_version(owner) < schema.latest_version():
            raise StoreError(
                f"the database at {db.where} is at schema version {schema.current_version(owner)}; this memserver "
                f"needs {schema.latest_version()}: run memserver db migrate --database URL"
            )
        elif not analyzer.is_current(owner):
            raise StoreError(
                f"the keyword terms of the database at {db.where} were made by the analyzer "
                f"{analyzer.made_with(owner)!r}, not this memserver's: run memserver db migrate --database URL"
            )
        db.model = (model, dim)
        db.model_id = schema.check_model(owner, model, dim)
        db.open(owner)
    finally:
        owner.close()
    return db


__all__ = ["PostgresBackend", "open_database"]
