"""A memory's replace chain, walked through the storage contract: the older versions it updated (`replaces`) and
the newer ones that updated it (`replaced_by`). `memory://memories/{id}` and `memserver show` both show it.

A version forgotten since leaves its neighbour's link dangling (backend.MemoryBackend.delete): the walk reports
that id as forgotten and goes no further that way.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memserver.contract.backend import Memory, MemoryBackend

MAX_VERSIONS = 100  # versions walked each way at most


def history(store: MemoryBackend, memory: Memory) -> dict[str, list[dict[str, Any]]] | None:
    """{"older": [...], "newer": [...]}, nearest version first, each {id, occurred_at, created_at} (or {id,
    forgotten: true}); None when the memory is in no chain."""
    if not memory.replaces and not memory.replaced_by:
        return None
    return {
        "older": _walk(store, memory, lambda m: m.replaces),
        "newer": _walk(store, memory, lambda m: m.replaced_by),
    }


def _walk(store: MemoryBackend, start: Memory, step: Any) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    seen = {start.id}
    link: str = step(start)
    while link and link not in seen and len(found) < MAX_VERSIONS:
        seen.add(link)
        version = store.get(link, namespace=start.namespace)
        if version is None:
            found.append({"id": link, "forgotten": True})
            break
        found.append({"id": version.id, "occurred_at": version.occurred_at, "created_at": version.created_at})
        link = step(version)
    return found
