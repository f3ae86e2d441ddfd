"""The rankings of a search on PostgreSQL: one statement (search.py's plans), run again when its plan proved wrong,
and the as_of path, which ranks exactly over the memories that stood then.

Each returns (vector ranking, keyword ranking, seq -> (memory, cosine), seq -> BM25 score of the keyword ranking);
backend.py cuts one of them as the local store does (min_score, limit), or, for hybrid, hands them with their session
context (`Context`) to hybrid.py, which ranks them with the local store's retrieval/hybrid_convex.fused.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np

from memserver.contract import inputs, requests
from memserver.contract.backend import Hit, Memory
from memserver.postgres import rows, search
from memserver.postgres.pool import Database
from memserver.postgres.rows import COLUMNS, CURRENT
from memserver.retrieval.bm25 import KeywordIndex
from memserver.retrieval.terms import date_text, tag_text

__all__ = [
    "Context",
    "Estimates",
    "Rankings",
    "Turn",
    "context_rankings",
    "full_rows",
    "rankings",
    "rankings_as_of",
    "tagged_first",
]

log = logging.getLogger(__name__)

# The context statement is long (~10 CTEs and their subplans): planning it took 1.3-1.6 ms of ~5 ms on an idle
# server, more under load. psycopg prepares a statement run 5 times on a connection; with a generic plan for it (this
# setting, for the statement's transaction only) later runs skip planning: unfiltered hybrid p50 19.8 -> 13.4 ms
# under load (benchmarks/README.md, "Engine parity"). Safe here because the statement's shape is fixed by search.py
# (the plan kind, exact / ann / probe, is chosen in Python and spelt in the SQL), and its generic plan, with
# statistics at 10 and 60 tenants, still looks each turn up by index (EXPLAIN (GENERIC_PLAN)), and takes the vector
# side from the HNSW index as long as its depth is spelt, not a parameter (search.search_sql's `depth`).
GENERIC = "force_generic_plan"
EVERY = 2_000  # a filtered search with this few candidates ranks each with its context (local/search.KEYWORD_ALL)

Rankings = tuple[list[int], list[int], dict[int, tuple[Memory, float]], dict[int, float]]


class Turn(NamedTuple):
    """What the hybrid ranking reads of a fetched turn (a light row) besides its content."""

    tags: tuple[str, ...]
    speaker: str
    occurred: datetime | str  # as the row holds it; `occurred_at` formats it (only a query's time window reads it)
    cosine: float

    @property
    def occurred_at(self) -> str:
        return self.occurred if isinstance(self.occurred, str) else inputs.stored_time(self.occurred)


@dataclass
class Context:
    """What a context statement (search.search_sql with `context`) adds for the hybrid ranking: each ranked or
    following turn's previous and next turn, which following turns pass the filters, which rows are current, and
    whether the rankings hold every candidate (few of them: hybrid_convex.fused's `every`)."""

    links: dict[int, tuple[int, int]]  # seq -> (previous, next) seq, -1 for none
    admitted: set[int]
    current: set[int]
    every: bool


@dataclass
class Estimates:
    """The counts a plan is chosen by, as the last search of this backend found them (they may be stale: a plan
    that proves wrong is run again)."""

    tenant_rows: int  # current memories of the tenant
    table_rows: int  # rows of the table, every tenant (an estimate)
    in_namespace: dict[str, int] = field(default_factory=dict)  # current memories per namespace


def rankings(
    db: Database,
    tenant: str,
    est: Estimates,
    q: np.ndarray,
    f: requests.SearchFilter,
    depth: int,
    *,
    vector: bool,
    words: list[str],
) -> Rankings:
    """(vector ranking, keyword ranking, seq -> (memory, cosine), seq -> BM25), one statement; again if the plan's
    counts were stale (the namespace is not the whole tenant any more) or HNSW ran short (then exactly)."""
    result, _ = _run(db, tenant, est, q, f, depth, vector=vector, words=words, context=False)
    near, keyed, bm25 = _sides(result)
    return near, keyed, found_rows(result), bm25


def context_rankings(
    db: Database, tenant: str, est: Estimates, q: np.ndarray, f: requests.SearchFilter, depth: int, words: list[str]
) -> tuple[list[int], list[int], dict[int, Turn], dict[int, float], Context, dict[int, tuple[Any, ...]]]:
    """rankings() for the hybrid ranking: the keyword ranking 2 x depth deep, light rows (seq -> Turn), the session
    context and the ranked turns' full rows (seq -> COLUMNS values: rows.memory makes a Memory of one), in one
    statement (search.search_sql with `context`)."""
    result, unfiltered = _run(db, tenant, est, q, f, depth, vector=True, words=words, context=True)
    turn_rows = [r for r in result if r[search.RANKING] in (search.RANKED_ROW, search.CONTEXT_ROW)]
    near = [
        seq for *_, seq in sorted((r[search.VDIST], r[search.SEQ]) for r in turn_rows if r[search.VDIST] is not None)
    ]
    keyword_rows = sorted((-r[search.BM25], r[search.SEQ]) for r in turn_rows if r[search.BM25] is not None)
    turns = {
        r[search.SEQ]: Turn(
            tuple(r[search.TAGS]),
            r[search.SPEAKER] or "",
            r[search.WHEN],
            1.0 - float(r[search.COSDIST]),
        )
        for r in turn_rows
    }
    full = {r[search.SEQ]: r[search.TURN] for r in turn_rows if r[search.CONTENT] is not None}
    keyed, bm25 = [seq for _, seq in keyword_rows], {seq: -neg_bm25 for neg_bm25, seq in keyword_rows}
    return near, keyed, turns, bm25, _context(result, turn_rows, filtered=not unfiltered), full


def _sides(result: list[tuple[Any, ...]]) -> tuple[list[int], list[int], dict[int, float]]:
    keyword_rows = ranked(result, 2)
    near = [seq for _, seq in ranked(result, 1)]
    return near, [seq for _, seq in keyword_rows], {seq: -neg_bm25 for neg_bm25, seq in keyword_rows}


def _run(
    db: Database,
    tenant: str,
    est: Estimates,
    q: np.ndarray,
    f: requests.SearchFilter,
    depth: int,
    *,
    vector: bool,
    words: list[str],
    context: bool,
) -> tuple[list[tuple[Any, ...]], bool]:
    """The rows of search_sql's statement (run again while its plan proved wrong) and whether it ran unfiltered."""
    tenant_rows, table_rows = est.tenant_rows, est.table_rows
    in_namespace = est.in_namespace.get(f.namespace, tenant_rows)
    unfiltered = f.empty and in_namespace >= tenant_rows
    plan = search.choose(in_namespace, table_rows, depth, not unfiltered)
    _, params = search.filter_sql(f)
    params |= {"tenant": tenant, "q": q, "depth": depth, "terms": words, "kdepth": 2 * depth, "every": EVERY}
    result: list[tuple[Any, ...]] = []
    for _ in range(3):
        keyword = bool(words)
        sql = search.search_sql(
            plan, f, depth=depth, vector=vector, keyword=keyword, unfiltered=unfiltered, context=context
        )
        settings: dict[str, str] = {}
        if plan.kind != "exact":
            settings |= {
                "hnsw.ef_search": str(search.ef_search(depth)),
                "hnsw.iterative_scan": "strict_order",
                "hnsw.max_scan_tuples": str(search.MAX_SCAN_TUPLES),
            }
        if context:  # see GENERIC
            settings["plan_cache_mode"] = GENERIC
        params["exact_max"] = plan.exact_max
        result = db.run(tenant, [(sql, params)], settings=settings or None)[0].fetchall()
        head = result[0]
        n, space = int(head[search.N]), int(head[search.IN_NAMESPACE])
        est.tenant_rows, est.table_rows = n, max(int(max(head[search.TABLE_ROWS] or 0, 0)), n)
        est.in_namespace[f.namespace] = space
        # The vector ranking's rows: ranking 1 rows, or in a context statement the turns with a vector distance
        # (counting ranking 1 there found none: every HNSW search was run again exactly, over the whole tenant,
        # ~300 ms of a ~340 ms hybrid search at 100k memories).
        if context:
            near_rows = sum(r[search.RANKING] == search.RANKED_ROW and r[search.VDIST] is not None for r in result)
        else:
            near_rows = sum(r[search.RANKING] == 1 for r in result)
        if unfiltered and space < n:
            log.info("the namespace is not the whole tenant any more; searching again with it as a filter")
            unfiltered = False
            plan = search.choose(space, est.table_rows, depth, True)
            continue
        if vector and not bool(head[search.EXACT]) and near_rows < min(depth, space):
            log.info("HNSW returned %d of %d rows; ranking exactly", near_rows, depth)
            plan = search.Plan("exact", plan.exact_max)
            continue  # an iterative scan that gave up (max_scan_tuples): rank exactly instead
        break
    return result, unfiltered


def full_rows(db: Database, tenant: str, seqs: list[int]) -> dict[int, Memory]:
    """The memories of `seqs` (those a context statement sent light rows of, when an explanation names them)."""
    sql = f"SELECT {COLUMNS} FROM memserver.memories m WHERE m.tenant = %(tenant)s AND m.seq = ANY(%(seqs)s)"
    return {r[1]: rows.memory(r) for r in db.run(tenant, [(sql, {"tenant": tenant, "seqs": seqs})])[0].fetchall()}


def rankings_as_of(
    db: Database, tenant: str, q: np.ndarray, text: str, f: requests.SearchFilter, depth: int, words: list[str]
) -> Rankings:
    """As of a past time: exact over the memories that stood then. When all of them are current, the keyword
    ranking is the tenant's BM25 (the statement of an exact search); when some are history or tombstones
    (no postings), a BM25 index of the candidates alone, as the local store does (search.py `_keyword`)."""
    where, params = search.filter_sql(f)
    params |= {"tenant": tenant, "q": q}
    held_sql = f"SELECT count(*) FROM memserver.memories m WHERE {where} AND NOT ({CURRENT})"
    if not db.run(tenant, [(held_sql, params)])[0].fetchone()[0]:  # type: ignore[index]
        plan = search.Plan("exact", search.EXACT_MAX)
        sql = search.search_sql(plan, f, depth=depth, vector=True, keyword=bool(words))
        params |= {"depth": depth, "terms": words, "exact_max": plan.exact_max}
        result = db.run(tenant, [(sql, params)])[0].fetchall()
        keyword_rows = ranked(result, 2)
        bm25_of = {seq: -neg_bm25 for neg_bm25, seq in keyword_rows}
        return [seq for _, seq in ranked(result, 1)], [seq for _, seq in keyword_rows], found_rows(result), bm25_of
    sql = f"SELECT {COLUMNS}, m.embedding <=> %(q)b FROM memserver.memories m WHERE {where}"
    candidates = db.run(tenant, [(sql, params)])[0].fetchall()
    found = {r[1]: (rows.memory(r), 1.0 - float(r[rows.WIDTH])) for r in candidates}
    near = [r[1] for r in sorted(candidates, key=lambda r: (r[rows.WIDTH], r[2], r[1]))][:depth]
    bm25: dict[int, float] = {}
    if words:
        scratch = KeywordIndex()
        scratch.add_many(
            (seq, f"{m.content} {date_text(m.occurred_at)} {tag_text(m.tags)}") for seq, (m, _) in found.items()
        )
        bm25 = {int(seq): float(score) for seq, score in scratch.search(text, depth)}
    return near, list(bm25), found, bm25


def _context(result: list[tuple[Any, ...]], turn_rows: list[tuple[Any, ...]], *, filtered: bool) -> Context:
    links: dict[int, tuple[int, int]] = {}
    for r in result:
        if r[search.RANKING] == search.LINK_ROW and r[search.LINK_SEQS] is not None:
            pairs = zip(r[search.LINK_PREVS], r[search.LINK_NEXTS], strict=True)
            links = {
                seq: (-1 if p is None else p, -1 if n is None else n)
                for seq, (p, n) in zip(r[search.LINK_SEQS], pairs, strict=True)
            }
    current = {r[search.SEQ] for r in turn_rows if r[search.IS_CURRENT]}
    admitted = {r[search.SEQ] for r in turn_rows if r[search.RANKING] == search.RANKED_ROW and r[search.ADMITTED]}
    head = result[0]
    ncand = head[search.NCAND]
    every = filtered and bool(head[search.EXACT]) and ncand is not None and ncand <= EVERY
    return Context(links, admitted, current, every)


def ranked(result: list[tuple[Any, ...]], ranking: int) -> list[tuple[float, int]]:
    """The rows of one ranking of search_sql's result, best first: (distance or -BM25, seq); ties go to the
    earlier-stored memory (the lower seq), as the local store's insertion order."""
    sign = 1.0 if ranking == 1 else -1.0
    found = [r for r in result if r[search.RANKING] == ranking]
    return sorted((sign * float(r[search.RANK_SCORE]), r[search.MEMORY + 1]) for r in found)


def found_rows(result: list[tuple[Any, ...]]) -> dict[int, tuple[Memory, float]]:
    """seq -> (memory, cosine) of search_sql's result rows."""
    return {
        r[search.MEMORY + 1]: (rows.memory(r[search.MEMORY : search.DIST]), 1.0 - float(r[search.DIST]))
        for r in result
        if r[search.RANKING] is not None
    }


def hits(
    near: list[int],
    keyed: list[int],
    found: dict[int, tuple[Memory, float]],
    bm25: dict[int, float],
    request: requests.SearchRequest,
    words: list[str],
    explain: bool,
) -> list[Hit]:
    """The request's hits from the two rankings (seqs, best first): one side, or their fusion, cut by min_score
    and limit, each with the score it was ordered by (cosine, BM25, RRF); with `explain`, each says where it
    stood."""
    mode, limit = request.mode, request.limit
    semantic = mode == "semantic"
    order = [(seq, found[seq][1]) for seq in near] if semantic else [(seq, bm25[seq]) for seq in keyed]
    if request.min_score is None:
        order = order[:limit]
    out: list[Hit] = []
    for seq, rank_score in order:
        memory, score = found[seq]
        if request.min_score is not None and score < request.min_score:
            continue
        why = _explanation(len(out) + 1, seq, score, near, keyed, mode, words) if explain else None
        out.append(Hit(memory, score, rank_score, why))
        if len(out) == limit:
            break
    return out


def tagged_first(first: list[Hit], rest: list[Hit], limit: int, tags: list[str]) -> list[Hit]:
    """The hits of a query naming `tags`: `first` (those tags' memories), then the others of `rest`, `limit` in
    all; explanations are renumbered, and those of `first` name the tags."""
    ids = {h.memory.id for h in first}
    merged = [*first, *(h for h in rest if h.memory.id not in ids)][:limit]
    out = []
    for rank, hit in enumerate(merged, 1):
        if hit.explanation is not None:
            tagged = {"tagged": tags} if hit.memory.id in ids else {}
            hit = replace(hit, explanation={**hit.explanation, "rank": rank, **tagged})
        out.append(hit)
    return out


def _explanation(
    rank: int, seq: int, cosine: float, near: list[int], keyed: list[int], mode: str, words: list[str]
) -> dict[str, Any]:
    """What PostgreSQL knows of why a hit ranked: its place on each side (see backend.Hit.explanation)."""
    why: dict[str, Any] = {"rank": rank}
    if mode != "keyword":
        why["semantic"] = {"rank": near.index(seq) + 1 if seq in near else None, "cosine": round(float(cosine), 4)}
    if mode != "semantic":
        why["keyword"] = {"rank": keyed.index(seq) + 1 if seq in keyed else None}
    why["query"] = {"mode": mode, "terms": words, "engine": "postgresql", "fusion": mode}
    return why
