"""Memory ids as a person types them: tables show the first 8 characters, and every command that takes an id takes
any unique prefix of at least 4 (as git does), resolved in the namespace asked for."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from memserver.errors import InvalidInputError, MemserverError

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend

SHORT = 8  # characters of an id in a table
MIN_PREFIX = 4
CANDIDATES = 10  # ambiguous prefixes: how many of the ids starting with it to name
_HEX = re.compile(r"^[0-9a-fA-F]+$")
ID_WORDS = "an id as printed by `memserver remember` or `memserver list` (4 characters or more of it)"


class NoSuchMemory(MemserverError):
    """No memory of the namespace has this id (or an id starting with it)."""


def short(memory_id: str) -> str:
    return memory_id[:SHORT]


def resolve(store: MemoryBackend, given: str, namespace: str | None) -> str:
    """The full id of the one memory of `namespace` whose id starts with `given` (current or replaced)."""
    prefix = given.strip().lower()
    if len(prefix) < MIN_PREFIX or len(prefix) > 32 or not _HEX.match(prefix):
        raise InvalidInputError(f"{given.strip()!r} is not {ID_WORDS}")
    where = f"in namespace {namespace or 'default'}"
    if len(prefix) == 32:
        return prefix
    found = store.ids_with_prefix(prefix, CANDIDATES + 1, namespace=namespace)
    if not found:
        raise NoSuchMemory(f"no memory {prefix} {where}")
    if len(found) > 1:
        shared = _shared(found)  # each shown as far as it differs from the others
        named = ", ".join(memory_id[: max(12, shared + 2)] for memory_id in found[:CANDIDATES])
        more = ", ..." if len(found) > CANDIDATES else ""
        raise InvalidInputError(f"{prefix} is the start of several ids {where}: {named}{more}; give more of it")
    return found[0]


def _shared(ids: list[str]) -> int:
    """How many leading characters all of `ids` share."""
    first, last = min(ids), max(ids)
    n = 0
    while n < len(first) and first[n] == last[n]:
        n += 1
    return n
