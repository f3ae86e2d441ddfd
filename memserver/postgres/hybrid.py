"""The hybrid ranking on PostgreSQL: the local store's (retrieval/hybrid_convex.fused) over the rows one context
statement fetched (ranking.rankings with `context`: both candidate lists, the turns that follow them, and every
session neighbour they need, with their cosines, in one round trip).

`Fetched` answers hybrid_convex.RowSource from those rows; `hits` orders them as local/search.py's `_hybrid` does (the
first DEPTH from pools of DEPTH a side, a deeper `limit` filled from deeper pools after them) and explains them with
hybrid_convex.explain_row. The speakers a query names are looked for among the fetched rows' speakers (the local
store knows every speaker of the store; a name only another, unfetched turn carries can boost nothing anyway).
"""

from __future__ import annotations

from datetime import date, datetime, timezone
from typing import Any

import numpy as np

from memserver.contract import inputs
from memserver.contract.backend import Hit, Memory
from memserver.postgres.ranking import Context
from memserver.retrieval import hybrid_convex
from memserver.retrieval.hybrid_convex import DEPTH, Fused, QueryAnalysis
from memserver.retrieval.terms import date_text, tag_text, tokenize, variants
from memserver.retrieval.timewords import TIME_WORDS

__all__ = ["Fetched", "hits"]


class Fetched:
    """hybrid_convex.RowSource over the rows of one context statement."""

    def __init__(self, found: dict[int, tuple[Memory, float]], ctx: Context) -> None:
        self.found, self.ctx = found, ctx

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
        return np.asarray([self.found[seq][1] for seq in rows.tolist()], np.float64)

    def speakers(self, rows: np.ndarray) -> list[str]:
        return [self.found[seq][0].speaker or "" for seq in rows.tolist()]

    def occurred(self, rows: np.ndarray) -> list[str]:
        return [self.found[seq][0].occurred_at for seq in rows.tolist()]

    def timewords(self, rows: np.ndarray) -> np.ndarray:
        contents = (self.found[seq][0].content for seq in rows.tolist())
        return np.fromiter((TIME_WORDS.search(c) is not None for c in contents), bool, len(rows))


def hits(
    near: list[int],
    keyed: list[int],
    found: dict[int, tuple[Memory, float]],
    bm25: dict[int, float],
    ctx: Context,
    request: inputs.SearchRequest,
    terms: list[str],
    explain: bool,
) -> list[Hit]:
    """The hybrid hits of `request` from a context statement's rankings (seqs, best first), cut by min_score and
    limit, each with its fused score; with `explain`, why each ranked."""
    f, limit = request.filter, request.limit
    source = Fetched(found, ctx)
    today = date.fromisoformat(f.as_of[:10]) if f.as_of else datetime.now(timezone.utc).date()
    names = sorted({found[seq][0].speaker or "" for seq in found} - {""})
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
    out: list[Hit] = []
    query = {"mode": "hybrid", **hybrid_convex.describe_query(terms, a), "engine": "postgresql"}
    for seq, rank_score in zip(order.tolist(), scores.tolist(), strict=True):
        memory, score = found[seq]
        if request.min_score is not None and score < request.min_score:
            continue
        why = _why(passes, seq, len(out) + 1, terms, found, query) if explain else None
        out.append(Hit(memory, score, float(rank_score), why))
        if len(out) == limit:
            break
    return out


def _why(
    passes: list[Fused],
    seq: int,
    rank: int,
    terms: list[str],
    found: dict[int, tuple[Memory, float]],
    query: dict[str, Any],
) -> dict[str, Any]:
    for fused in passes:
        at = int(np.searchsorted(fused.pool, seq))
        if at < len(fused.pool) and fused.pool[at] == seq:
            break
    prev = int(fused.prev_row[at])
    prev_terms = _matched(terms, found[prev][0]) if prev >= 0 and fused.prev_bm[at] > 0 else []
    memory = found[seq][0]
    why = hybrid_convex.explain_row(fused, at, rank, _matched(terms, memory), prev_terms, memory.speaker or "")
    return {**why, "query": query}


def _matched(terms: list[str], memory: Memory) -> list[str]:
    """The query terms a memory is indexed under, itself or by a variant (as the local store's explain says)."""
    text = f"{memory.content} {date_text(memory.occurred_at)} {tag_text(list(memory.tags))} {memory.speaker}"
    held = set(tokenize(text))
    return [t for t in terms if t in held or not held.isdisjoint(variants(t))]
