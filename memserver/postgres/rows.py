"""How a memory is stored in a row and read back: the columns every statement selects, text escaping, the dedup
hash, the default namespace, and which rows are current.

A row written before schema 2 has no occurred_at (it is its created_at: `OCCURRED`), no labels (NULL) and the
namespace '' (the default namespace is stored as '' by every version, so old rows need no rewrite).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Any

from memserver.contract import inputs
from memserver.contract.backend import Memory

__all__ = [
    "COLUMNS",
    "CURRENT",
    "OCCURRED",
    "content_hash",
    "loaded_text",
    "memory",
    "namespace_of",
    "stored_namespace",
    "stored_text",
]

OCCURRED = "coalesce(m.occurred_at, m.created_at)"  # the expression memories_recent indexes
CURRENT = "m.replaced_by IS NULL AND m.forgotten_at IS NULL"  # the predicate of the partial indexes
COLUMNS = (
    f"m.id, m.seq, m.created_at, m.content, m.tags, m.source, {OCCURRED}, m.speaker, m.role, m.session, "
    "m.namespace, m.replaces, m.replaced_by, m.kind, m.due, m.done, m.pinned, m.archived"
)
WIDTH = 18  # how many values COLUMNS selects


def content_hash(content: str) -> bytes:
    """The dedup key: BLAKE2b-128 of the whitespace-normalised content (the unique index is on it)."""
    return hashlib.blake2b(inputs.normalised(content).encode("utf-8"), digest_size=16).digest()


def stored_namespace(namespace: str) -> str:
    """The namespace column's value for a checked namespace name ('' for the default namespace)."""
    return "" if namespace == inputs.DEFAULT_NAMESPACE else namespace


def namespace_of(stored: str) -> str:
    return stored or inputs.DEFAULT_NAMESPACE


# PostgreSQL's text cannot hold U+0000, and content is free text that may. So stored text escapes it with the
# private-use character U+E000 (itself escaped): "\x00" <-> "\ue000\ue002", "\ue000" <-> "\ue000\ue001". Text with
# neither (all but a few memories) is stored as it is.
_ESCAPED = re.compile("\ue000([\ue001\ue002])")


def stored_text(text: str) -> str:
    if "\x00" not in text and "\ue000" not in text:
        return text
    return text.replace("\ue000", "\ue000\ue001").replace("\x00", "\ue000\ue002")


def loaded_text(text: str) -> str:
    if "\ue000" not in text:
        return text
    return _ESCAPED.sub(lambda m: "\ue000" if m.group(1) == "\ue001" else "\x00", text)


def _hex(value: Any) -> str:
    return "" if value is None else str(value.hex)


def memory(row: Sequence[Any], duplicate: bool = False) -> Memory:
    """A Memory from the values of COLUMNS (id, seq, created_at, content, tags, source, occurred_at, ...)."""
    return Memory(
        row[0].hex,
        loaded_text(row[3]),
        inputs.stored_time(row[2]),
        tuple(row[4]),
        row[5],
        duplicate,
        (),
        inputs.stored_time(row[6]),
        row[7] or "",
        row[8] or "",
        row[9] or "",
        namespace_of(row[10]),
        _hex(row[11]),
        _hex(row[12]),
        row[13],
        None if row[14] is None else row[14].isoformat(),
        row[15],
        row[16],
        row[17],
    )
