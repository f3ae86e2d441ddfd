"""What a client can read back from a store, through the public API only: compare two stores (a snapshot's
restore and a full replay, before and after a compaction, ...) by everything they answer."""

from __future__ import annotations

from typing import Any

from memserver.contract.backend import MemoryBackend


def readback(s: MemoryBackend) -> dict[str, Any]:
    """Every memory (export, get, list_recent, tag_counts), and rankings in every mode and under every filter for
    the memories the store tests write ("fact {i} about item{i}", tags t0..t2, source "notes", dates in 2024)."""

    def hits(**kw: Any) -> list[tuple[str, float]]:
        return [(h.memory.id, round(h.score, 5)) for h in s.search(**kw)]

    exported = list(s.export())
    got = [s.get(m["id"]) for m in exported[::7]]
    return {
        "count": s.stats()["count"],
        "export": exported,
        "get": [m.to_dict() if m is not None else None for m in got],
        "recent": [m.to_dict() for m in s.list_recent(limit=15)],
        "recent_tagged": [m.to_dict() for m in s.list_recent(limit=15, tags=["t1", "t2"])],
        "tag_counts": s.tag_counts(),
        "hybrid": hits(query="fact about item 12 Zoë", limit=10),
        "semantic": hits(query="fact about item 12", limit=10, mode="semantic"),
        "keyword": hits(query="item12 café", limit=10, mode="keyword"),
        "tags": hits(query="fact", limit=20, tags=["t0"]),
        "source": hits(query="fact", limit=20, source="notes"),
        "no_source": hits(query="fact", limit=20, source=""),
        "window": hits(query="fact", limit=20, since="2024-01-03", until="2024-01-05"),
        "window_tags": hits(query="fact", limit=20, tags=["t2"], since="2024-01-02T12:00:00Z"),
        "until": hits(query="fact", limit=20, source="notes", until="2024-01-04"),
    }
