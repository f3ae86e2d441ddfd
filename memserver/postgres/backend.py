"""PostgresBackend: the MemoryBackend contract (backend.py) on PostgreSQL + pgvector.

The database stores and ranks; memserver still embeds, in this process, with its own model, and tokenises for
the keyword index with its own tokenizer (terms.py), so both engines answer alike. One backend is one tenant of
one database (the HTTP token's user and the collection); any number of processes on any number of hosts may
open the same tenant, and each sees the others' writes as soon as they are acknowledged.

Writes are one transaction each (pool.Database.run: one round trip), acknowledged after COMMIT. Exact dedup is
the unique index on (tenant, namespace, content hash) with INSERT ... ON CONFLICT DO NOTHING, so it holds under
any concurrency. Inputs are checked by memserver.inputs, the rules every engine shares.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
import uuid
from collections.abc import Iterable, Iterator, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any

import numpy as np

from memserver import inputs
from memserver.backend import NEAR_DUPLICATE_SCORE, SIMILAR_MAX, Hit, Memory
from memserver.errors import InvalidInputError, StoreError
from memserver.fusion import FUSION_DEPTH, hybrid_order
from memserver.postgres import schema, search, terms
from memserver.postgres.pool import Database

if TYPE_CHECKING:
    from memserver.embedder import TextEmbedder

log = logging.getLogger(__name__)

IMPORT_BATCH = 1000
EXPORT_BATCH = 1000
COLUMNS = search.MEMORY_COLUMNS


def content_hash(content: str) -> bytes:
    """The dedup key: BLAKE2b-128 of the whitespace-normalised content (the unique index is on it)."""
    return hashlib.blake2b(inputs.normalised(content).encode("utf-8"), digest_size=16).digest()


# PostgreSQL's text cannot hold U+0000, and content is free text that may. So stored text escapes it with the
# private-use character U+E000 (itself escaped): "\x00" <-> "\ue000\ue002", "\ue000" <-> "\ue000\ue001". Text with
# neither (all but a few memories) is stored as it is.
_ESCAPED = re.compile("\ue000([\ue001\ue002])")


def stored_text(text: str) -> str:
    if "\x00" not in text and "\ue000" not in text:
        return text
    return text.replace("\ue000", "\ue000\ue001").replace("\x00", "\ue000\ue002")


def loaded_text(text: str) -> str:
    if "\ue000" not in text:
        return text
    return _ESCAPED.sub(lambda m: "\ue000" if m.group(1) == "\ue001" else "\x00", text)


def _memory(row: Sequence[Any], duplicate: bool = False) -> Memory:
    """A Memory from (id, seq, created_at, content, tags, source, ...)."""
    return Memory(row[0].hex, loaded_text(row[3]), inputs.stored_time(row[2]), tuple(row[4]), row[5], duplicate)


class PostgresBackend:
    """One tenant's memories in a PostgreSQL database (see docs/scale-out.md).

    Example::

        with PostgresBackend("postgresql://memserver@db/memories", tenant="personal_memory") as backend:
            backend.add("The staging DB password rotates every Monday", tags=["ops"])

    On open it connects, migrates the schema if needed (schema.py: advisory-locked, idempotent) and refuses a
    database built with another model. `database` may be a shared `Database` (one pool for many tenants).
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
            from memserver.embedder import Embedder

            embedder = Embedder()
        self.embedder: TextEmbedder = embedder
        self.dim = int(embedder.dim)
        self.tenant = tenant
        self._own_db = database is None
        if database is None:
            if not url:
                raise StoreError("no database URL given")
            database = open_database(url, str(embedder.model_name), self.dim, migrate=migrate)
        self.db = database
        if database.model != (str(embedder.model_name), self.dim):
            raise StoreError(f"the shared database was opened for the model {database.model}, not this embedder's")
        self.model_id = database.model_id
        self._closed = False
        self._lock = threading.Lock()
        self._rows = (0, 0)  # (tenant rows, table rows): plan estimates, refreshed by every search
        self._rows = self._count()

    # --- writing -----------------------------------------------------------------------------------------------

    def add(self, content: str, tags: Sequence[str] | None = None, source: str | None = None) -> Memory:
        new = inputs.new_memory(content, tags, source)
        existing = self._by_hashes([content_hash(new.content)])
        if existing:
            return _memory(next(iter(existing.values())), duplicate=True)
        vector = self._embed([new.content])[0]
        memory = self._write([new], [vector])[0]
        if memory.duplicate:
            return memory
        similar = self._similar(vector, memory.id)
        return Memory(memory.id, memory.content, memory.created_at, memory.tags, memory.source, False, similar)

    def add_many(self, items: Iterable[dict[str, Any] | str]) -> list[Memory]:
        news = inputs.new_memories(items)
        if not news:
            return []
        known = self._by_hashes([content_hash(new.content) for new in news])
        todo = [i for i, new in enumerate(news) if content_hash(new.content) not in known]
        vectors: list[np.ndarray | None] = [None] * len(news)
        if todo:
            for i, v in zip(todo, self._embed([news[i].content for i in todo]), strict=True):
                vectors[i] = v
        return self._write(news, vectors)

    def _write(self, news: Sequence[inputs.NewMemory], vectors: Sequence[np.ndarray | None]) -> list[Memory]:
        """Insert the items that have a vector (one statement, one transaction); results in item order."""
        hashes = [content_hash(new.content) for new in news]
        rows = [(new, h, v) for new, h, v in zip(news, hashes, vectors, strict=True) if v is not None]
        cursors = self.db.run(
            self.tenant,
            [self._insert(rows), (f"SELECT content_hash, {COLUMNS} FROM memserver.memories m "
                                  "WHERE m.tenant = %s AND m.namespace = '' AND m.content_hash = ANY(%s)",
                                  [self.tenant, hashes])],
            write=True,
        )  # fmt: skip
        fresh = {r[0] for r in cursors[0].fetchall()}
        by_hash = {bytes(r[0]): r[1:] for r in cursors[1].fetchall()}
        out: list[Memory] = []
        for h in hashes:
            row = by_hash.get(h)
            if row is None:  # deleted by another process between our insert and our read: rare
                raise StoreError("a memory was deleted while it was being stored; store it again")
            out.append(_memory(row, duplicate=row[0] not in fresh))
            fresh.discard(row[0])  # a repeat later in the same call is a duplicate of this one
        return out

    def _insert(self, rows: Sequence[tuple[inputs.NewMemory, bytes, np.ndarray | None]]) -> tuple[str, list[Any]]:
        """INSERT ... SELECT FROM unnest(arrays) ON CONFLICT DO NOTHING RETURNING id: any number of rows at once.

        Ragged arrays (terms, tfs, tags) cannot be unnested as 2-D arrays, so terms and tfs travel space-joined
        (terms never contain whitespace) and tags as JSON arrays.
        """
        import json

        ids, created, lengths, hashes, contents, tags, sources, words, tfs, vecs = ([] for _ in range(10))
        for new, h, v in rows:
            stamp = new.created_at or inputs.now()
            indexed = terms.indexed(new.content, stamp)
            ids.append(uuid.UUID(new.id) if new.id else uuid.uuid4())
            created.append(stamp)
            lengths.append(indexed.length)
            hashes.append(h)
            contents.append(stored_text(new.content))
            tags.append(json.dumps(list(new.tags), ensure_ascii=False))
            sources.append(new.source)
            words.append(stored_text(" ".join(indexed.terms)))
            tfs.append(" ".join(map(str, indexed.tfs)))
            vecs.append(np.asarray(v, np.float32))
        query = """
            INSERT INTO memserver.memories
                (id, created_at, doc_len, model_id, tenant, content_hash, content, tags, source, terms, tfs, embedding)
            SELECT u.id, u.created_at::timestamptz, u.doc_len, %s, %s, u.hash, u.content,
                   ARRAY(SELECT jsonb_array_elements_text(u.tags::jsonb)), u.source,
                   string_to_array(u.terms, ' '), string_to_array(u.tfs, ' ')::smallint[],
                   u.vec
            FROM unnest(%s::uuid[], %s::text[], %s::int[], %s::bytea[], %s::text[], %s::text[], %s::text[],
                        %s::text[], %s::text[], %b::vector[])
                 WITH ORDINALITY AS u(id, created_at, doc_len, hash, content, tags, source, terms, tfs, vec, n)
            ORDER BY u.n
            ON CONFLICT DO NOTHING
            RETURNING id
        """
        params = [self.model_id, self.tenant, ids, created, lengths, hashes, contents, tags, sources]
        return query, [*params, words, tfs, vecs]

    def delete(self, memory_id: str) -> bool:
        mid = uuid.UUID(inputs.check_id(memory_id))
        sql = "DELETE FROM memserver.memories WHERE tenant = %s AND id = %s RETURNING id"
        cursors = self.db.run(self.tenant, [(sql, [self.tenant, mid])], write=True)
        return cursors[0].fetchone() is not None

    # --- reading -----------------------------------------------------------------------------------------------

    def get(self, memory_id: str) -> Memory | None:
        mid = uuid.UUID(inputs.check_id(memory_id))
        sql = f"SELECT {COLUMNS} FROM memserver.memories m WHERE m.tenant = %s AND m.id = %s"
        row = self.db.run(self.tenant, [(sql, [self.tenant, mid])])[0].fetchone()
        return None if row is None else _memory(row)

    def list_recent(self, limit: int = 10, tags: Sequence[str] | None = None) -> list[Memory]:
        n = inputs.check_limit(limit)
        wanted = inputs.check_tags(tags)
        where, params = search.filter_sql(inputs.SearchFilter(tags=wanted))
        sql = (
            f"SELECT {COLUMNS} FROM memserver.memories m WHERE {where} "
            "ORDER BY m.created_at DESC, m.seq DESC LIMIT %(n)s"
        )
        rows = self.db.run(self.tenant, [(sql, {"tenant": self.tenant, "n": n, **params})])[0].fetchall()
        return [_memory(row) for row in rows]

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
        query_vector: Sequence[float] | np.ndarray | None = None,
    ) -> list[Hit]:
        request = inputs.search_request(query, limit, tags, source, since, until, min_score, mode)
        if query_vector is not None:
            q = inputs.check_vector(query_vector, self.dim, "query_vector")
        else:
            q = np.asarray(self.embedder.embed_query(request.query), dtype=np.float32).reshape(-1)
        return self._search(q, request)

    def _search(self, q: np.ndarray, request: inputs.SearchRequest) -> list[Hit]:
        mode, limit = request.mode, request.limit
        words = [stored_text(t) for t in terms.query_terms(request.query)] if mode != "semantic" else []
        if mode == "keyword" and not words:
            return []
        depth = limit if mode == "semantic" else max(limit, FUSION_DEPTH)
        found = self._rankings(q, request.filter, depth, vector=mode != "keyword", words=words)
        near, keyed, rows = found
        if mode == "semantic":
            order = near
        elif mode == "keyword":
            order = keyed
        else:
            order = hybrid_order(near, keyed, lambda seq: rows[seq][0].created_at)
        if request.min_score is None:
            order = order[:limit]
        hits = []
        for seq in order:
            memory, score = rows[seq]
            if request.min_score is not None and score < request.min_score:
                continue
            hits.append(Hit(memory, score))
            if len(hits) == limit:
                break
        return hits

    def _rankings(
        self, q: np.ndarray, f: inputs.SearchFilter, depth: int, *, vector: bool, words: list[str]
    ) -> tuple[list[int], list[int], dict[int, tuple[Memory, float]]]:
        """(vector ranking, keyword ranking, seq -> (memory, cosine)), one statement; exact again if HNSW ran short."""
        tenant_rows, table_rows = self._rows
        plan = search.choose(tenant_rows, table_rows, depth, not f.empty)
        for attempt in (plan, search.Plan("exact", plan.exact_max)):
            sql = search.search_sql(attempt, f, vector=vector, keyword=bool(words))
            _, params = search.filter_sql(f)
            params |= {"tenant": self.tenant, "q": q, "depth": depth, "terms": words, "exact_max": attempt.exact_max}
            settings = None
            if attempt.kind != "exact":
                settings = {
                    "hnsw.ef_search": str(search.ef_search(depth)),
                    "hnsw.iterative_scan": "strict_order",
                    "hnsw.max_scan_tuples": str(search.MAX_SCAN_TUPLES),
                }
            result = self.db.run(self.tenant, [(sql, params)], settings=settings)[0].fetchall()
            n, table, exact = int(result[0][0]), int(max(result[0][1] or 0, 0)), bool(result[0][2])
            self._rows = (n, max(table, n))
            near_rows = sorted((r[4], r[7], r[6]) for r in result if r[3] == 1)  # (distance, created_at, seq)
            if vector and not exact and len(near_rows) < min(depth, n):
                log.info("HNSW returned %d of %d rows; ranking exactly", len(near_rows), depth)
                continue  # an iterative scan that gave up (max_scan_tuples): rank exactly instead
            break
        rows = {r[6]: (_memory(r[5:11]), 1.0 - float(r[11])) for r in result if r[3] is not None}
        near = [seq for _, _, seq in near_rows]
        keyed = [seq for _, _, seq in sorted((-r[4], r[7], r[6]) for r in result if r[3] == 2)]
        return near, keyed, rows

    def _similar(self, vector: np.ndarray, exclude: str) -> tuple[tuple[str, float], ...]:
        near, _, rows = self._rankings(vector, inputs.SearchFilter(), SIMILAR_MAX + 1, vector=True, words=[])
        out = []
        for seq in near:
            memory, score = rows[seq]
            if memory.id != exclude and score >= NEAR_DUPLICATE_SCORE:
                out.append((memory.id, round(score, 4)))
        return tuple(out[:SIMILAR_MAX])

    def tag_counts(self) -> dict[str, int]:
        sql = (
            "SELECT tag, count(*) FROM memserver.memory_tags WHERE tenant = %s GROUP BY tag "
            'ORDER BY count(*) DESC, tag COLLATE "C"'
        )
        return {tag: int(n) for tag, n in self.db.run(self.tenant, [(sql, [self.tenant])])[0].fetchall()}

    def stats(self) -> dict[str, Any]:
        count, table = self._count()
        size, index = self.db.describe_storage(self.tenant)
        return {
            "engine": "postgresql",
            "count": count,
            "collection": self.tenant.rpartition("/")[2],
            "tenant": self.tenant,
            "database": self.db.where,
            "path": f"postgresql://{self.db.where}#{self.tenant}",
            "model": str(self.embedder.model_name),
            "dim": self.dim,
            "index": index,
            "table_rows": table,
            "bytes_on_disk": size,
        }

    # --- for watchers and completions (resource subscriptions, completion/complete) ------------------------------

    def revision(self) -> str:
        """See backend.MemoryBackend.revision: the tenant's highest seq (an identity column: every insert raises it,
        nothing lowers it but deleting that very row) and its count (tenant_stats: every delete lowers it), read
        from two indexes. Every write today inserts or deletes; an UPDATE that changes a memory would have to bump
        a counter of its own here."""
        sql = (
            "SELECT (SELECT coalesce(max(seq), 0) FROM memserver.memories WHERE tenant = %s), "
            "(SELECT coalesce(sum(docs), 0) FROM memserver.tenant_stats WHERE tenant = %s)"
        )
        top, n = self.db.run(self.tenant, [(sql, [self.tenant, self.tenant])])[0].fetchone()  # type: ignore[misc]
        return f"{int(top)}:{int(n)}"

    def ids_with_prefix(self, prefix: str, limit: int, *, namespace: str | None = None) -> list[str]:
        """See backend.MemoryBackend.ids_with_prefix: a range scan of the primary key (tenant, id). (Namespaces
        other than the default hold nothing here yet.)"""
        start = inputs.check_id_prefix(prefix)
        n = inputs.check_limit(limit)
        if inputs.check_namespace(namespace) != inputs.DEFAULT_NAMESPACE:
            return []
        low, high = uuid.UUID(start.ljust(32, "0")), uuid.UUID(start.ljust(32, "f"))
        sql = "SELECT id FROM memserver.memories WHERE tenant = %s AND id BETWEEN %s AND %s ORDER BY id LIMIT %s"
        rows = self.db.run(self.tenant, [(sql, [self.tenant, low, high, n])])[0].fetchall()
        return [row[0].hex for row in rows]

    def _count(self) -> tuple[int, int]:
        sql = (
            "SELECT (SELECT coalesce(sum(docs), 0) FROM memserver.tenant_stats WHERE tenant = %s), "
            "(SELECT reltuples FROM pg_class WHERE oid = 'memserver.memories'::regclass)"
        )
        n, table = self.db.run(self.tenant, [(sql, [self.tenant])])[0].fetchone()  # type: ignore[misc]
        return int(n), max(int(table or 0), int(n))

    # --- bulk ----------------------------------------------------------------------------------------------------

    def export(self, include_vectors: bool = False) -> Iterator[dict[str, Any]]:
        """Every memory oldest first, from one snapshot (a REPEATABLE READ transaction with a server-side cursor)."""
        columns = COLUMNS + (", m.embedding" if include_vectors else "")
        sql = f"SELECT {columns} FROM memserver.memories m WHERE m.tenant = %s ORDER BY m.created_at, m.seq"
        for row in self.db.stream(self.tenant, sql, [self.tenant], EXPORT_BATCH):
            d = _memory(row).to_dict()
            if include_vectors:
                d["vector"] = np.asarray(row[6].to_numpy(), np.float32).tolist()
            yield d

    def import_(self, records: Iterable[dict[str, Any]]) -> int:
        added = 0
        batch: list[inputs.NewMemory] = []
        ids: set[str] = set()
        for n, record in enumerate(records):
            item = inputs.imported_memory(record, n, self.dim)
            if item.id:
                if item.id in ids:
                    raise InvalidInputError(f"records[{n}].id {item.id} appears twice in this import")
                ids.add(item.id)
            batch.append(item)
            if len(batch) >= IMPORT_BATCH:
                added += self._import_batch(batch)
                batch = []
        if batch:
            added += self._import_batch(batch)
        return added

    def _import_batch(self, batch: list[inputs.NewMemory]) -> int:
        hashes = [content_hash(item.content) for item in batch]
        known = self._by_hashes(hashes)
        live_ids = self._live_ids([item.id for item in batch if item.id])
        todo = [i for i, it in enumerate(batch) if hashes[i] not in known and it.id not in live_ids]
        vectors: list[np.ndarray | None] = [None] * len(batch)
        missing = [i for i in todo if batch[i].vector is None]
        if missing:
            for i, v in zip(missing, self._embed([batch[i].content for i in missing]), strict=True):
                vectors[i] = v
        for i in todo:
            vectors[i] = batch[i].vector if batch[i].vector is not None else vectors[i]
        rows = [(batch[i], hashes[i], vectors[i]) for i in todo]
        if not rows:
            return 0
        cursors = self.db.run(self.tenant, [self._insert(rows)], write=True)
        return len(cursors[0].fetchall())

    def compact(self) -> dict[str, Any]:
        """VACUUM (ANALYZE) memserver's tables: autovacuum reclaims deleted rows by itself; this does it now."""
        count, _ = self._count()
        result = self.db.vacuum()
        return {"count": count, **result}

    # --- helpers -----------------------------------------------------------------------------------------------

    def _by_hashes(self, hashes: Sequence[bytes]) -> dict[bytes, Sequence[Any]]:
        sql = (
            f"SELECT content_hash, {COLUMNS} FROM memserver.memories m "
            "WHERE m.tenant = %s AND m.namespace = '' AND m.content_hash = ANY(%s)"
        )
        rows = self.db.run(self.tenant, [(sql, [self.tenant, list(hashes)])])[0].fetchall()
        return {bytes(r[0]): r[1:] for r in rows}

    def _live_ids(self, ids: Sequence[str]) -> set[str]:
        if not ids:
            return set()
        sql = "SELECT id FROM memserver.memories WHERE tenant = %s AND id = ANY(%s)"
        rows = self.db.run(self.tenant, [(sql, [self.tenant, [uuid.UUID(i) for i in ids]])])[0].fetchall()
        return {r[0].hex for r in rows}

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        vectors = np.asarray(self.embedder.embed(list(texts)), dtype=np.float32)
        if vectors.shape != (len(texts), self.dim):
            raise StoreError(f"the embedder returned shape {vectors.shape}, expected ({len(texts)}, {self.dim})")
        return vectors

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        if self._own_db:
            self.db.close()

    def __enter__(self) -> PostgresBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_database(url: str, model: str, dim: int, *, migrate: bool = True) -> Database:
    """Connect, migrate (unless `migrate` is False: then a database behind the code is an error), open the pool."""
    db = Database(url)
    owner = db.connect_owner()
    try:
        if migrate:
            schema.ensure_schema(owner, model, dim)
        elif schema.current_version(owner) < schema.latest_version():
            raise StoreError(
                f"the database at {db.where} is at schema version {schema.current_version(owner)}; this memserver "
                f"needs {schema.latest_version()}: run memserver db migrate --database URL"
            )
        db.model = (model, dim)
        db.model_id = schema.check_model(owner, model, dim)
        db.open(owner)
    finally:
        owner.close()
    return db


__all__ = ["PostgresBackend", "open_database"]
