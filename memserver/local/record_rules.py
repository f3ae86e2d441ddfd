"""The rules a journal record must keep before replay applies it.

A line's CRC says its bytes are the ones written; it cannot say the record makes sense. A line hand-edited and
re-checksummed, or written by a buggy tool, may carry a namespace with spaces, a row that is not a number or a memory
that replaces itself. Replay would then fail somewhere deep (a traceback) or, worse, lose a memory without a word,
so each record is checked here first against the write path's own rules (contract/inputs.py) and the first broken
rule is named: the caller refuses the store with one line giving the file, the byte offset and the field.

The checks are cheap (type tests and two compiled patterns per add) because every open replays the journal past
its checkpoint. Times are only required to be strings: the store has written more than one form of them.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from memserver.contract.inputs import KINDS, MAX_NAMESPACE_CHARS, ROLES, is_namespace

_TEXT_FIELDS = ("content", "created_at", "source")  # required strings of an add
_OPTIONAL_TEXT = ("occurred_at", "speaker", "session", "replaced_by", "replaced_at", "due")
_FLAGS = ("done", "pinned", "archived")
_ROLES = frozenset(("", *ROLES))
_KINDS = frozenset(KINDS)
# The store writes 32 hex digits, but its columns keep any id a journal holds (tests/local/test_store_columns.py):
# an id only has to be text a line and a URI can carry.
_is_id = re.compile(r"[^\x00-\x1f\x7f]{1,256}\Z").match
_BAD_ID = "id: not a memory id (1-256 characters of text)"
_good_namespace = lru_cache(maxsize=4096)(is_namespace)  # a store holds few namespaces, each on many lines


def broken_rule(rec: dict[str, Any]) -> str | None:
    """What is wrong with one journal record ("field: why"), or None if replay may apply it."""
    op = rec.get("op")
    if op == "add":
        return _add_rule(rec)
    if op == "del":
        return None if isinstance(rec.get("id"), str) and _is_id(rec["id"]) else _BAD_ID
    if op == "vfix":
        if not _is_row(rec.get("row")):
            return "row: not a row number"
        return None if _is_crc(rec.get("vcrc")) else "vcrc: not a CRC-32 in hex"
    return None  # the header, and kinds of record a later memserver may add: replay skips them


def _add_rule(rec: dict[str, Any]) -> str | None:
    memory_id = rec.get("id")
    if not isinstance(memory_id, str) or not _is_id(memory_id):
        return _BAD_ID
    for name in _TEXT_FIELDS:
        if not isinstance(rec.get(name), str):
            return f"{name}: missing or not a string"
    for name in _OPTIONAL_TEXT:
        if not isinstance(rec.get(name, ""), str):
            return f"{name}: not a string"
    if not _is_row(rec.get("row")):
        return "row: not a row number"
    tags = rec.get("tags")
    if not isinstance(tags, list) or not all(isinstance(tag, str) for tag in tags):
        return "tags: not a list of strings"
    if "vcrc" in rec and not _is_crc(rec["vcrc"]):
        return "vcrc: not a CRC-32 in hex"
    namespace = rec.get("namespace", "default")
    if not isinstance(namespace, str) or not _good_namespace(namespace):
        return f"namespace: {namespace!r} is not a namespace (1-{MAX_NAMESPACE_CHARS} of A-Z a-z 0-9 _ . : @ -)"
    if rec.get("role", "") not in _ROLES:
        return f"role: {rec['role']!r} is none of {', '.join(ROLES)}"
    if rec.get("kind", "note") not in _KINDS:
        return f"kind: {rec['kind']!r} is none of {', '.join(KINDS)}"
    for name in _FLAGS:
        if not isinstance(rec.get(name, False), bool):
            return f"{name}: not true or false"
    replaces = rec.get("replaces", "")
    if not isinstance(replaces, str) or (replaces and not _is_id(replaces)):
        return "replaces: not a memory id (1-256 characters of text)"
    if replaces == memory_id:
        return "replaces: the memory replaces itself"
    return None


def _is_row(value: object) -> bool:
    return type(value) is int and value >= 0


def _is_crc(value: object) -> bool:
    if not isinstance(value, str) or not 1 <= len(value) <= 8:
        return False
    try:
        int(value, 16)
    except ValueError:
        return False
    return True
