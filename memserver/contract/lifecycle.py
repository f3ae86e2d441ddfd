"""pin / archive / mark_done for any engine: a new version of the memory (`replaces`) with one flag changed; and
`pinned`, a namespace's pinned memories (what recall-context and the chat recall() show first).

Why new versions and not flags changed in place: history and `as_of` then answer for the flags exactly as they do
for content (the old state is a stored version), both engines need no new kind of write, and the journal stays
append-only with the same line format. The cost: the memory's id moves to the new version; the old id still reads
(get() returns it as history, with `replaced_by` naming the new one). docs/care.md says so.
"""

from __future__ import annotations

import threading
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memserver.contract import inputs
from memserver.errors import InvalidInputError

if TYPE_CHECKING:
    from memserver.contract.backend import Memory, MemoryBackend

FLAGS = ("pinned", "archived", "done")
MAX_PINNED = 50  # pinned memories read per namespace at most (newest first): "always know this" is a short list

RESCAN_SECONDS = 30.0  # a namespace's pins are found by a full scan at most this often (see `pinned`)


@dataclass(frozen=True)
class _Pins:
    revision: str  # the store's revision() when `memories` was checked
    scanned: float  # the clock when the namespace was last scanned
    complete: bool  # scanned at `revision`: nothing can be missing
    memories: list[Memory]


_pinned_cache: weakref.WeakKeyDictionary[object, dict[str, _Pins]] = weakref.WeakKeyDictionary()
_pinned_lock = threading.Lock()


def set_flag(store: MemoryBackend, memory_id: str, flag: str, value: bool, namespace: str | None) -> Memory | None:
    """The memory `memory_id` with `flag` set to `value`: a new version, or the memory itself when it is so already;
    None when there is no such memory."""
    checked_id = inputs.check_id(memory_id, "memory_id")
    on = inputs.check_flag(value, flag)
    m = store.get(checked_id, namespace=namespace)
    if m is None:
        return None
    if m.replaced_by:
        raise InvalidInputError(
            f"memory_id {checked_id} is history (replaced by {m.replaced_by}): change its newest version instead"
        )
    if getattr(m, flag) == on:
        return m
    item = new_version(m, **{flag: on})
    changed = store.add_many([item])[0]
    with _pinned_lock:  # this process's pins and unpins show at once (see `pinned`)
        _pinned_cache.pop(store, None)
    return changed


def new_version(m: Memory, **changes: Any) -> dict[str, Any]:
    """The add_many item that stores a new version of `m` (`replaces` it) with `changes` (content, tags, a flag)
    and every other field kept, the lifecycle ones too: what a pin, an archive or an edit in the browser stores."""
    item: dict[str, Any] = {
        "content": m.content,
        "tags": list(m.tags),
        "source": m.source,
        "occurred_at": m.occurred_at,
        "speaker": m.speaker or None,
        "role": m.role or None,
        "session": m.session or None,
        "namespace": m.namespace,
        "replaces": m.id,
        **{f: getattr(m, f) for f in inputs.LIFECYCLE_FIELDS},
    }
    return item | changes


def pinned(
    store: MemoryBackend, namespace: str | None = None, *, clock: Callable[[], float] = time.monotonic
) -> list[Memory]:
    """The current, unarchived pinned memories of `namespace` (default: "default"), newest first, at most
    MAX_PINNED: what "always know this" puts first in recall-context and the chat recall().

    The contract has no pinned filter, so finding them is a scan of the namespace (list_page; about 0.7 s for 20k
    memories on the local store). It is kept per store and namespace: unchanged while revision() is; after a
    change, the kept pins are checked one get() each (forgotten, archived or unpinned ones drop out at once, an
    edited one is followed to its new version), and the namespace is scanned again only when the last scan is
    RESCAN_SECONDS old, or when this process pinned or unpinned something (set_flag). So a memory pinned by
    another process, or imported pinned, shows within RESCAN_SECONDS; a chat that writes every turn does not pay
    a scan every turn."""
    space = inputs.check_namespace(namespace)
    revision = store.revision()
    with _pinned_lock:
        held = _pinned_cache.get(store, {}).get(space)
    fresh = held is not None and clock() - held.scanned < RESCAN_SECONDS
    if held is not None and held.revision == revision and (held.complete or fresh):
        return list(held.memories)
    if held is not None and fresh:
        pins = _Pins(revision, held.scanned, False, _still_pinned(store, held.memories))
    else:
        pins = _Pins(revision, clock(), True, _scan(store, space))
    with _pinned_lock:
        _pinned_cache.setdefault(store, {})[space] = pins
    return list(pins.memories)


def _scan(store: MemoryBackend, space: str) -> list[Memory]:
    found: list[Memory] = []
    cursor: str | None = None
    while len(found) < MAX_PINNED:
        page = store.list_page(inputs.MAX_LIMIT, namespace=space, cursor=cursor)
        found += [m for m in page.memories if m.pinned]
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    return found[:MAX_PINNED]


def _still_pinned(store: MemoryBackend, memories: list[Memory]) -> list[Memory]:
    """Those of `memories` whose current version is still pinned and not archived (that version)."""
    kept: dict[str, Memory] = {}
    for memory in memories:
        now = store.get(memory.id, namespace=memory.namespace)
        for _ in range(20):  # an edit (or several) since: its newest version
            if now is None or not now.replaced_by:
                break
            now = store.get(now.replaced_by, namespace=memory.namespace)
        if now is not None and not now.replaced_by and now.pinned and not now.archived:
            kept.setdefault(now.id, now)
    return list(kept.values())
