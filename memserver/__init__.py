"""memserver: a local MCP server that gives any MCP client a long-term memory it can search by meaning.

The public names are imported lazily, so that `import memserver` (and the MCP server's start-up) never waits
on onnxruntime, tokenizers or hnswlib.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

__all__ = [
    "Embedder",
    "Hit",
    "Memory",
    "MemoryBackend",
    "MemoryFilter",
    "MemoryStore",
    "MemserverError",
    "Page",
    "Selection",
    "__version__",
    "open_backend",
]

_LAZY = {
    "Embedder": "memserver.embedding.embedder",
    "MemoryStore": "memserver.local.store",
    "Memory": "memserver.contract.backend",
    "Hit": "memserver.contract.backend",
    "MemoryBackend": "memserver.contract.backend",
    "MemoryFilter": "memserver.contract.backend",
    "Page": "memserver.contract.backend",
    "Selection": "memserver.contract.backend",
    "open_backend": "memserver.engines",
    "MemserverError": "memserver.errors",
}

if TYPE_CHECKING:
    from memserver.contract.backend import Hit, Memory, MemoryBackend, MemoryFilter, Page, Selection
    from memserver.embedding.embedder import Embedder
    from memserver.engines import open_backend
    from memserver.errors import MemserverError
    from memserver.local.store import MemoryStore


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memserver' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
