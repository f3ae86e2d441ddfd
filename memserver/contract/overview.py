"""A namespace summarised in a few hundred tokens (memory://overview, `memserver overview`): how many memories, the
most used tags, memories by kind, month and speaker, the pinned memories (id and first words), and what changed
this week, instead of a dump of every memory.

Read through the storage contract only (tag_counts, sessions and one pass of list_page with the archived ones, which
are counted apart and nowhere else), so it is the same on every engine.
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

from memserver.contract import inputs

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend

TOP = 10  # tags and speakers listed
MONTHS = 12  # months listed, newest first
NEWEST = 5  # memories of this week quoted
QUOTE_CHARS = 80
PINNED = 10  # pinned memories quoted, newest first
PINNED_CHARS = 60
WEEK = timedelta(days=7)


def overview(store: MemoryBackend, namespace: str | None = None, *, now: datetime | None = None) -> dict[str, Any]:
    """The summary of `namespace` (default: "default") as JSON-able data; `now` fixes "this week" (tests)."""
    space = inputs.check_namespace(namespace)
    since = inputs.stored_time((now or datetime.now(timezone.utc)) - WEEK)
    months: Counter[str] = Counter()
    speakers: Counter[str] = Counter()
    kinds: Counter[str] = Counter()
    count = added = updates = archived = 0
    newest: list[dict[str, Any]] = []
    pinned: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page = store.list_page(inputs.MAX_LIMIT, namespace=space, cursor=cursor, include_archived=True)
        for memory in page.memories:
            if memory.archived:
                archived += 1
                continue
            count += 1
            kinds[memory.kind] += 1
            if memory.pinned:
                pinned.append(_quote(memory.to_dict(), PINNED_CHARS, brief=True))
            months[memory.occurred_at[:7]] += 1
            speakers[memory.speaker or "(none)"] += 1
            if memory.created_at >= since:
                added += 1
                updates += bool(memory.replaces)
                newest.append(memory.to_dict())
        if page.next_cursor is None:
            break
        cursor = page.next_cursor
    newest.sort(key=lambda m: m["created_at"], reverse=True)
    tags = store.tag_counts(namespace=space)
    return {
        "namespace": space,
        "count": count,
        "sessions": len(store.sessions(namespace=space)),
        "tags": dict(list(tags.items())[:TOP]),
        "tags_total": len(tags),
        "months": dict(sorted(months.items(), reverse=True)[:MONTHS]),
        "speakers": dict(sorted(speakers.items(), key=lambda item: (-item[1], item[0]))[:TOP]),  # ties by name
        "by_kind": dict(sorted(kinds.items(), key=lambda item: (-item[1], item[0]))),
        "archived": archived,
        "pinned": pinned[:PINNED],  # newest first (by occurred_at, list_page's order)
        "pinned_total": len(pinned),
        "this_week": {
            "since": since,
            "added": added,
            "updates": updates,
            "newest": [_quote(m) for m in newest[:NEWEST]],
        },
    }


def _quote(memory: dict[str, Any], chars: int = QUOTE_CHARS, *, brief: bool = False) -> dict[str, Any]:
    """id, created_at and replaces when set, and the content's first `chars` characters; `brief`: id and the first
    words only."""
    text = " ".join(memory["content"].split())
    short = text if len(text) <= chars else text[: chars - 1] + "…"
    if brief:  # the first words: cut at a space where there is one
        words = short if len(text) <= chars else (text[:chars].rsplit(" ", 1)[0] or text[: chars - 1]) + "…"
        return {"id": memory["id"], "content": words}
    out = {"id": memory["id"], "created_at": memory["created_at"], "content": short}
    return out | ({"replaces": memory["replaces"]} if memory.get("replaces") else {})


def render(summary: dict[str, Any]) -> str:
    """The summary as a few lines of text (the CLI's), a few hundred tokens at most."""

    def counts(d: dict[str, int]) -> str:
        return ", ".join(f"{k} {v}" for k, v in d.items()) or "-"

    week = summary["this_week"]
    lines = [
        f"namespace {summary['namespace']}: {summary['count']} memories, {summary['sessions']} sessions",
        f"tags ({summary['tags_total']}): {counts(summary['tags'])}",
        f"by kind: {counts(summary['by_kind'])}"
        + (f" (and {summary['archived']} archived)" if summary["archived"] else ""),
        f"by month: {counts(summary['months'])}",
        f"by speaker: {counts(summary['speakers'])}",
    ]
    if summary["pinned_total"]:
        lines.append(f"pinned ({summary['pinned_total']}):")
        lines += [f"  {m['id'][:8]}  {m['content']}" for m in summary["pinned"]]
    lines += [
        f"this week (since {week['since'][:10]}): {week['added']} added, {week['updates']} of them updates",
    ]
    lines += [f"  {m['id'][:8]}  {m['created_at'][:10]}  {m['content']}" for m in week["newest"]]
    return "\n".join(lines)
