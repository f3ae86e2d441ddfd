"""The one place that names the storage engines: everything else asks `open_backend` for a `MemoryBackend`.

Engines are imported here lazily, inside the call, so importing this module costs nothing (the server's
start-up path imports the loader, which imports this) and an engine's dependencies load only when it is used.
A new engine adds its branch here and implements backend.MemoryBackend; tests/contract/ must pass on it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend
    from memserver.embedding.base import TextEmbedder


def open_backend(
    data_dir: str | os.PathLike[str] | None = None,
    collection: str | None = None,
    *,
    embedder: TextEmbedder | None = None,
    database: str | None = None,
    user: str | None = None,
) -> MemoryBackend:
    """Open a collection of memories.

    Args:
        data_dir: the local store's data directory (default: MCP_MEMORY_PATH or the platform's).
        collection: the collection (default: MCP_MEMORY_COLLECTION or "personal_memory").
        embedder: the embedding model (default: all-MiniLM-L6-v2, loaded on first use). Share one between
            backends of a process: it holds the model.
        database: a postgresql:// URL: the memories live in that PostgreSQL database (memserver[postgres]),
            and `data_dir` is not used.
        user: whose memories (an HTTP token's user; None: the single user). The local store keeps a named
            user under `<data_dir>/users/<user>/`; PostgreSQL gives each (user, collection) its own tenant.
    """
    from memserver import config

    name = config.validate_collection(collection) if collection else config.collection_name()
    if database:
        try:
            from memserver.postgres.tenants import open_tenant
        except ImportError as exc:
            from memserver.errors import ConfigError

            raise ConfigError(
                f"--database needs the PostgreSQL extra ({exc.name} is missing): pip install 'memserver[postgres]'"
            ) from None
        return open_tenant(database, name, user=user, embedder=embedder)
    from pathlib import Path

    from memserver.local.store import MemoryStore

    if user is not None:
        data_dir = Path(data_dir if data_dir is not None else config.data_dir()) / "users" / user
    return MemoryStore(data_dir, name, embedder)


def check_database(url: str) -> None:
    """Raise a MemserverError naming the server (never the password) if the database cannot be reached."""
    from memserver.postgres.pool import Database

    Database(url).connect_owner().close()


def migrate_database(url: str) -> tuple[int, int]:
    """Migrate the PostgreSQL database at `url` for memserver's model; (migrations applied, schema version)."""
    from memserver.embedding import sources
    from memserver.postgres.tenants import migrate

    return migrate(url, sources.MODEL_ID, sources.DIM)


def database_stats(url: str) -> dict[str, Any]:
    """The whole PostgreSQL database's figures, every tenant (`memserver db stats`: for its operator only)."""
    from memserver.postgres.tenants import database_stats as stats

    return stats(url)


def restore_backup(
    src: str | os.PathLike[str],
    data_dir: str | os.PathLike[str] | None,
    collection: str | None,
    *,
    replace: Callable[[str], bool],
) -> dict[str, Any]:
    """Restore a local store's backup (`memserver backup`: SRC itself, or the newest one under SRC) as the collection
    (default: the backup's) in `data_dir`. Into an empty place; where a store is, only if `replace(its folder)`
    says yes (else InvalidInputError). Returns the backup's manifest, with "backup" and "target" (the folder)."""
    from pathlib import Path

    from memserver import config
    from memserver.errors import InvalidInputError
    from memserver.local import backup

    found = backup.resolve(src, config.validate_collection(collection) if collection else None)
    manifest = backup.read_manifest(found)
    name = config.validate_collection(collection or str(manifest.get("collection") or config.collection_name()))
    root = Path(os.path.abspath(os.path.expanduser(data_dir))) if data_dir is not None else config.data_dir()
    target = root / name
    occupied = target.exists() and any(target.iterdir())
    if occupied and not replace(str(target)):
        raise InvalidInputError(f"{target} holds a store; not replaced")
    backup.restore(found, target, replace=occupied)
    return {**manifest, "backup": str(found), "target": str(target)}
