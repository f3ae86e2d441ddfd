"""The one place that names the storage engines: everything else asks `open_backend` for a `MemoryBackend`.

Engines are imported here lazily, inside the call, so importing this module costs nothing (the server's
start-up path imports the loader, which imports this) and an engine's dependencies load only when it is used.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from memserver import config

if TYPE_CHECKING:
    from memserver.embedder import TextEmbedder
    from memserver.store import MemoryStore as MemoryBackend


def open_backend(
    data_dir: str | os.PathLike[str] | None = None,
    collection: str | None = None,
    *,
    embedder: TextEmbedder | None = None,
    database: str | None = None,
    user: str | None = None,
) -> MemoryBackend:
    """Open a collection of memories: in PostgreSQL when `database` (a postgresql:// URL) is given, else in the
    local store under `data_dir` (a named `user` gets `<data_dir>/users/<user>`; in PostgreSQL, its own tenant)."""
    name = config.validate_collection(collection) if collection else config.collection_name()
    if database:
        try:
            from memserver.postgres import open_tenant
        except ImportError as exc:
            from memserver.errors import ConfigError

            raise ConfigError(
                f"--database needs the PostgreSQL extra ({exc.name} is missing): pip install 'memserver[postgres]'"
            ) from None
        return open_tenant(database, name, user=user, embedder=embedder)  # type: ignore[return-value]
    from pathlib import Path

    from memserver.store import MemoryStore

    base = Path(data_dir) if data_dir is not None else config.data_dir()
    return MemoryStore(base if user is None else base / "users" / user, name, embedder)


def check_database(url: str) -> None:
    """Raise a MemserverError naming the server (never the password) if the database cannot be reached."""
    from memserver.postgres.pool import Database

    Database(url).connect_owner().close()


def migrate_database(url: str) -> tuple[int, int]:
    """Migrate the PostgreSQL database at `url` for memserver's model; (migrations applied, schema version)."""
    from memserver import model
    from memserver.postgres import migrate

    return migrate(url, model.MODEL_ID, model.DIM)
