"""pin / archive / mark_done for any engine: a new version of the memory (`replaces`) with one flag changed; and
`pinned`, a namespace's pinned memories (what recall-context and the chat recall() show first).

Why new versions and not flags changed in place: history and `as_of` then answer for the flags exactly as they do
for content (the old state is a stored version), both engines need no new kind of write, and the journal stays
append-only with the same line format. The cost: the memory's id moves to the new version; the old id still reads
(get() returns it as history, with `replaced_by` naming the new one). docs/care.md says so.
"""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any

from memserver.contract import inputs
from memserver.errors import InvalidInputError

if TYPE_CHECKING:
    from memserver.contract.backend import Memory, MemoryBackend

FLAGS = ("pinned", "archived", "done")
MAX_PINNED = 50  # pinned memories read per namespace at most (newest first): "always know this" is a short list

# pinned() scans a namespace (the contract has no pinned filter); the answer is kept per store and namespace until
# the store's revision() changes, so a prompt or a chat recall() pays the scan once per change, not per call.
_pinned_cache: weakref.WeakKeyDictionary[object, dict[str, tuple[str, list[Memory]]]] = weakref.WeakKeyDictionary()
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
    return store.add_many([item])[0]


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


def pinned(store: MemoryBackend, namespace: str | None = None) -> list[Memory]:
    """The current, unarchived pinned memories of `namespace` (default: "default"), newest first, at most
    MAX_PINNED: what "always know this" puts first in recall-context and the chat recall()."""
    space = inputs.check_namespace(namespace)
    revision = store.revision()
    with _pinned_lock:
        held = _pinned_cache.get(store, {}).get(space)
    if held is not None and held[0] == revision:
        return list(held[1])
    found: list[Memory] = []
    cursor: str | None = None
    while True:
        page = store.list_page(inputs.MAX_LIMIT, namespace=space, cursor=cursor)
        found += [m for m in page.memories if m.pinned]
        if page.next_cursor is None or len(found) >= MAX_PINNED:
            break
        cursor = page.next_cursor
    found = found[:MAX_PINNED]
    with _pinned_lock:
        _pinned_cache.setdefault(store, {})[space] = (revision, found)
    return list(found)
