"""The tenants of a database: one pool per database URL, shared by every tenant a process opens on it, and the
database-wide jobs (migrate, stats) that engines.py calls."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

from memserver.postgres.backend import PostgresBackend, open_database
from memserver.postgres.pool import Database

if TYPE_CHECKING:
    from memserver.embedding.base import TextEmbedder

__all__ = ["PostgresBackend", "database_stats", "migrate", "open_tenant", "tenant_name"]

_shared: dict[tuple[str, str, int], tuple[Database, int]] = {}  # (url, model, dim) -> (pool, backends open)
_lock = threading.Lock()


def tenant_name(user: str | None, collection: str) -> str:
    """Whose memories: the collection of the single user (stdio, HTTP without tokens), or "user/collection".
    Neither a user name nor a collection can contain "/", so no two (user, collection) pairs share a tenant."""
    return collection if user is None else f"{user}/{collection}"


class _SharedBackend(PostgresBackend):
    """A PostgresBackend on the process's shared pool for its URL; the last one closed closes the pool."""

    def close(self) -> None:
        with self._lock:  # check-then-close once, also when two threads close at the same time
            if self._closed:
                return
            self._closed = True
        key = (self._database.url, *self._database.model)
        with _lock:
            db, users = _shared[key]
            if users > 1:
                _shared[key] = (db, users - 1)
                return
            del _shared[key]
        db.close()


def open_tenant(
    url: str, collection: str, *, user: str | None = None, embedder: TextEmbedder | None = None
) -> PostgresBackend:
    """The backend of (user, collection) on the database at `url`, sharing the process's pool to it."""
    if embedder is None:
        from memserver.embedding.embedder import Embedder

        embedder = Embedder()
    key = (url, str(embedder.model_name), int(embedder.dim))
    with _lock:
        entry = _shared.get(key)
        if entry is None:
            entry = (open_database(url, key[1], key[2]), 0)
        _shared[key] = (entry[0], entry[1] + 1)
    try:
        return _SharedBackend(tenant=tenant_name(user, collection), embedder=embedder, database=entry[0])
    except BaseException:
        with _lock:
            db, users = _shared[key]
            _shared[key] = (db, users - 1)
        raise


def migrate(url: str, model: str, dim: int) -> tuple[int, int]:
    """`memserver db migrate`: bring the database to the latest schema; (migrations applied, version now)."""
    from memserver.postgres import schema

    db = Database(url)
    with db.connect_owner() as conn:
        applied = schema.ensure_schema(conn, model, dim)
        return applied, schema.current_version(conn)


def database_stats(url: str) -> dict[str, Any]:
    """`memserver db stats`: the whole database's figures (every tenant), for its operator; schema version too."""
    from memserver.postgres import schema

    db = Database(url)
    with db.connect_owner() as conn:
        version = schema.current_version(conn)
    return {"engine": "postgresql", "schema_version": version, **db.deployment_figures()}
