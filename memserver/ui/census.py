"""What the contract has no count method for: memories per month of occurred_at (the timeline, the plot) and per
speaker (a Browse facet). One pass over `export()`, kept per store and namespace until the store's `revision()`
moves, so page loads between writes cost nothing; the pass runs in a worker thread."""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend


@dataclass(frozen=True)
class Census:
    months: dict[str, int]  # "2026-03" -> current memories that occurred then, oldest month first
    speakers: dict[str, int]  # most memories first


class Censuses:
    """The census of each (store, namespace), recomputed only when the store's revision moved."""

    MAX_KEPT = 64

    def __init__(self) -> None:
        self._kept: dict[tuple[int, str | None], tuple[str, Census]] = {}
        self._lock = threading.Lock()

    def of(self, store: MemoryBackend, namespace: str | None) -> Census:
        """Blocking: call it in a worker thread. `namespace` None: every namespace of the store."""
        key = (id(store), namespace)
        revision = store.revision()
        with self._lock:
            kept = self._kept.get(key)
        if kept is not None and kept[0] == revision:
            return kept[1]
        months: Counter[str] = Counter()
        speakers: Counter[str] = Counter()
        for record in store.export(namespace=namespace):
            if record.get("replaced_by"):
                continue  # history: not a current memory
            months[str(record.get("occurred_at", ""))[:7]] += 1
            if record.get("speaker"):
                speakers[str(record["speaker"])] += 1
        census = Census(dict(sorted(months.items())), dict(speakers.most_common()))
        with self._lock:
            if len(self._kept) >= self.MAX_KEPT:
                self._kept.clear()
            self._kept[key] = (revision, census)
        return census
