"""What the contract has no count method for: memories per month of occurred_at (the timeline, the plot) and per
speaker (a Browse facet). One pass over `export()` (about 2 s at 100k memories), kept per store and namespace.

When the store's revision moves, the kept census is still answered at once and a new pass starts in a background
thread (one at a time per store and namespace): page loads never wait for a pass but the very first, and the counts
catch up a moment after a write."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Census:
    months: dict[str, int]  # "2026-03" -> current memories that occurred then, oldest month first
    speakers: dict[str, int]  # most memories first


def count(store: MemoryBackend, namespace: str | None) -> Census:
    """One pass over the current memories of `namespace` (None: every namespace). Blocking."""
    months: Counter[str] = Counter()
    speakers: Counter[str] = Counter()
    for record in store.export(namespace=namespace):
        if record.get("replaced_by"):
            continue  # history: not a current memory
        months[str(record.get("occurred_at", ""))[:7]] += 1
        if record.get("speaker"):
            speakers[str(record["speaker"])] += 1
    return Census(dict(sorted(months.items())), dict(speakers.most_common()))


class Censuses:
    """The census of each (store, namespace): the kept one at once, renewed in the background when stale."""

    MAX_KEPT = 64

    def __init__(self) -> None:
        self._kept: dict[tuple[int, str | None], tuple[str, Census]] = {}
        self._renewing: set[tuple[int, str | None]] = set()
        self._lock = threading.Lock()

    def of(self, store: MemoryBackend, namespace: str | None) -> Census:
        """Blocking (the first pass, and the revision): call it in a worker thread."""
        key = (id(store), namespace)
        revision = store.revision()
        with self._lock:
            kept = self._kept.get(key)
            stale = kept is not None and kept[0] != revision and key not in self._renewing
            if stale:
                self._renewing.add(key)
        if kept is None:
            census = count(store, namespace)
            self._keep(key, revision, census)
            return census
        if stale:
            threading.Thread(target=self._renew, args=(key, store, namespace), daemon=True).start()
        return kept[1]

    def _renew(self, key: tuple[int, str | None], store: MemoryBackend, namespace: str | None) -> None:
        try:
            revision = store.revision()  # read first: a write during the pass leaves this census stale, not wrong
            self._keep(key, revision, count(store, namespace))
        except Exception as exc:  # a closed store, a database gone: the next page load tries again
            logger.info("renewing a census failed: %s", exc)
        finally:
            with self._lock:
                self._renewing.discard(key)

    def _keep(self, key: tuple[int, str | None], revision: str, census: Census) -> None:
        with self._lock:
            if len(self._kept) >= self.MAX_KEPT:
                self._kept.clear()
            self._kept[key] = (revision, census)
