"""The lifecycle state column: a memory's kind, due date, done, pinned and archived flags as one short text.

Most memories are plain notes, so the catalog keeps the five fields as one label per row (columns.Labels: a code
per row and a short list of the distinct texts), "" for a plain note: a million notes cost a million small ints.
"""

from __future__ import annotations

from memserver.local.replay import AddRecord


def state_key(r: AddRecord) -> str:
    """ "" for a plain note (most memories), else "kind|due|<done><pinned><archived>" (each flag 0 or 1)."""
    if r.kind == "note" and not (r.due or r.done or r.pinned or r.archived):
        return ""
    return f"{r.kind}|{r.due}|{int(r.done)}{int(r.pinned)}{int(r.archived)}"


def parse_state(key: str) -> tuple[str, str, bool, bool, bool]:
    """(kind, due, done, pinned, archived) of a state_key."""
    if not key:
        return ("note", "", False, False, False)
    kind, due, flags = key.split("|")
    return (kind, due, flags[0] == "1", flags[1] == "1", flags[2] == "1")


def public_state(key: str) -> tuple[str, str | None, bool, bool, bool]:
    """parse_state as a Memory carries it: no due date is None."""
    kind, due, done, pinned, archived = parse_state(key)
    return (kind, due or None, done, pinned, archived)
