"""The hybrid ranking on PostgreSQL: the local store's (retrieval/hybrid_convex.fused) over the rows one context
statement fetched (ranking.context_rankings: both candidate lists, the turns that follow them, and every session
neighbour they need, with their cosines, in one round trip). The ranked and following turns (every hit, the whole
pool) come as full rows, decoded only when read (`load`: the hits, the pool's contents when the query has time
words); the neighbours only their context needs come light (ranking.Turn: no content), and the few an explanation
names are read in a second round trip.

`Fetched` answers hybrid_convex.RowSource from those rows; `hits` orders them as local/search.py's `_hybrid` does (the
first DEPTH from pools of DEPTH a side, a deeper `limit` filled from deeper pools after them) and explains them with
hybrid_convex.explain_row. The speakers a query names are looked for among the fetched rows' speakers (the local
store knows every speaker of the store; a name only another, unfetched turn carries can boost nothing anyway).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime, timezone
from typing import Any

import numpy as np

from memserver.contract import requests
from memserver.contract.backend import Hit, Memory
from memserver.postgres.ranking import Context, Turn
from memserver.retrieval import hybrid_convex
from memserver.retrieval.hybrid_convex import DEPTH, Fused, QueryAnalysis
from memserver.retrieval.terms import date_text, tag_text, tokenize, variants
from memserver.retrieval.timewords import TIME_WORDS

__all__ = ["Fetched", "hits"]


class Fetched:
    """hybrid_convex.RowSource over the rows of one context statement."""

    def __init__(self, turns: dict[int, Turn], ctx: Context, load: Callable[[list[int]], dict[int, Memory]]) -> None:
        self.turns, self.ctx, self._load = turns, ctx, load
        self.loaded: dict[int, Memory] = {}

    def memories(self, seqs: list[int]) -> dict[int, Memory]:
        """The full rows of `seqs`, read once (one round trip for those not read yet)."""
        missing = [seq for seq in seqs if seq not in self.loaded]
        if missing:
            self.loaded |= self._load(missing)
        return {seq: self.loaded[seq] for seq in seqs}

    def has_sessions(self) -> bool:
        return True  # rows without a session have no neighbours: the context parts are then 0

    def neighbours(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        links, current = self.ctx.links, self.ctx.current
        pairs = [links.get(seq, (-1, -1)) for seq in rows.tolist()]
        prev = [p if p in current else -1 for p, _ in pairs]
        nxt = [n if n in current else -1 for _, n in pairs]
        return np.asarray(prev, np.int64).reshape(-1), np.asarray(nxt, np.int64).reshape(-1)

    def admitted(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray([seq for seq in rows.tolist() if seq in self.ctx.admitted], np.int64)

    def cosines(self, rows: np.ndarray) -> np.ndarray:
        return np.asarray([self.turns[seq].cosine for seq in rows.tolist()], np.float64)

    def speakers(self, rows: np.ndarray) -> list[str]:
        return [self.turns[seq].speaker for seq in rows.tolist()]

    def occurred(self, rows: np.ndarray) -> list[str]:
        return [self.turns[seq].occurred_at for seq in rows.tolist()]

    def timewords(self, rows: np.ndarray) -> np.ndarray:
        contents = (m.content for m in self.memories(rows.tolist()).values())
        return np.fromiter((TIME_WORDS.search(c) is not None for c in contents), bool, len(rows))


def hits(
    near: list[int],
    keyed: list[int],
    turns: dict[int, Turn],
    bm25: dict[int, float],
    ctx: Context,
    request: requests.SearchRequest,
    terms: list[str],
    explain: bool,
    load: Callable[[list[int]], dict[int, Memory]],
) -> list[Hit]:
    """The hybrid hits of `request` from a context statement's rankings (seqs, best first), cut by min_score and
    limit, each with its fused score; with `explain`, why each ranked. `load` reads full rows by seq."""
    f, limit = request.filter, request.limit
    source = Fetched(turns, ctx, load)
    today = date.fromisoformat(f.as_of[:10]) if f.as_of else datetime.now(timezone.utc).date()
    names = sorted({turn.speaker for turn in turns.values()} - {""})
    a = QueryAnalysis.of(request.query, hybrid_convex.named_speakers(request.query, names), today)

    def fused(depth: int) -> Fused:
        if ctx.every:
            vrows = np.asarray(sorted(near), np.int64)
            keys = np.asarray(sorted(keyed), np.int64)
        else:
            vrows = np.asarray(sorted(near[:depth]), np.int64)
            keys = np.asarray(sorted(keyed[: 2 * depth]), np.int64)
        vcos = source.cosines(vrows)
        values = np.asarray([bm25[seq] for seq in keys.tolist()], np.float64)
        return hybrid_convex.fused(source, a, depth, (vrows, vcos), (keys, values), ctx.every)

    passes = [fused(DEPTH)]
    order = passes[0].pool[passes[0].order]
    scores = passes[0].score[passes[0].order]
    if limit > DEPTH:
        passes.append(fused(limit))
        deeper = passes[1].order[~np.isin(passes[1].pool[passes[1].order], order)]
        order = np.concatenate([order, passes[1].pool[deeper]])
        scores = np.concatenate([scores, passes[1].score[deeper]])
    kept: list[tuple[int, float]] = []
    for seq, rank_score in zip(order.tolist(), scores.tolist(), strict=True):
        if request.min_score is not None and turns[seq].cosine < request.min_score:
            continue
        kept.append((seq, float(rank_score)))
        if len(kept) == limit:
            break
    wanted = [seq for seq, _ in kept]
    if explain:
        wanted += [seq for p in passes for seq in p.prev_row.tolist() if seq >= 0]
    memories = source.memories(list(dict.fromkeys(wanted)))
    query = {"mode": "hybrid", **hybrid_convex.describe_query(terms, a), "engine": "postgresql"}
    out: list[Hit] = []
    for seq, rank_score in kept:
        why = _why(passes, seq, len(out) + 1, terms, memories, query) if explain else None
        out.append(Hit(memories[seq], turns[seq].cosine, rank_score, why))
    return out


def _why(
    passes: list[Fused],
    seq: int,
    rank: int,
    terms: list[str],
    memories: dict[int, Memory],
    query: dict[str, Any],
) -> dict[str, Any]:
    for fused in passes:
        at = int(np.searchsorted(fused.pool, seq))
        if at < len(fused.pool) and fused.pool[at] == seq:
            break
    prev = int(fused.prev_row[at])
    prev_terms = _matched(terms, memories[prev]) if prev >= 0 and fused.prev_bm[at] > 0 else []
    memory = memories[seq]
    why = hybrid_convex.explain_row(fused, at, rank, _matched(terms, memory), prev_terms, memory.speaker or "")
    return {**why, "query": query}


def _matched(terms: list[str], memory: Memory) -> list[str]:
    """The query terms a memory is indexed under, itself or by a variant (as the local store's explain says)."""
    text = f"{memory.content} {date_text(memory.occurred_at)} {tag_text(list(memory.tags))} {memory.speaker}"
    held = set(tokenize(text))
    return [t for t in terms if t in held or not held.isdisjoint(variants(t))]
