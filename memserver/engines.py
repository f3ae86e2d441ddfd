"""The one place that names the storage engines: everything else asks `open_backend` for a `MemoryBackend`.

Engines are imported here lazily, inside the call, so importing this module costs nothing (the server's
start-up path imports the loader, which imports this) and an engine's dependencies load only when it is used.
A new engine adds its branch here and implements backend.MemoryBackend; tests/contract/ must pass on it.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memserver.backend import MemoryBackend
    from memserver.embedder import TextEmbedder


def open_backend(
    data_dir: str | os.PathLike[str] | None = None,
    collection: str | None = None,
    *,
    embedder: TextEmbedder | None = None,
) -> MemoryBackend:
    """Open a collection of memories.

    Args:
        data_dir: the local store's data directory (default: MCP_MEMORY_PATH or the platform's).
        collection: the collection (default: MCP_MEMORY_COLLECTION or "personal_memory").
        embedder: the embedding model (default: all-MiniLM-L6-v2, loaded on first use). Share one between
            backends of a process: it holds the model.
    """
    from memserver.store import MemoryStore

    return MemoryStore(data_dir, collection, embedder)
