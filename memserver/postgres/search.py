"""Search on PostgreSQL with the local store's semantics: filters first, then the true top-k, in one statement.

pgvector applies a WHERE clause *after* its HNSW scan unless iterative scans are on, so a selective filter beside
`ORDER BY embedding <=> q LIMIT k` quietly returns fewer than k rows. Here every search is one of three plans,
each one SQL statement (one round trip), built by `search_sql`:

  exact  the candidates (tenant + filters) are few: a MATERIALIZED CTE computes their distances, the exact top-k
         is sorted out of it. MATERIALIZED keeps the planner from turning it back into an index scan.
  ann    the candidates are many and unfiltered beyond the tenant: HNSW with hnsw.iterative_scan = strict_order
         and hnsw.ef_search >= 2k (set for the transaction). If it still returns fewer than k rows, the caller
         reruns the search with the exact plan.
  probe  filters on a large tenant, selectivity unknown: the statement first counts up to EXACT_MAX + 1
         matching rows, then runs the exact branch or the HNSW branch (the other is cut by a one-time filter).

"Few" follows the local store's cost model: exact costs ~1 row read per candidate; HNSW with a filter passing a
fraction f of the table's N rows visits ~ef/f rows; they cross at sqrt(ratio * ef * N). The ratio is PostgreSQL's
own (exact rows cost far more here than in numpy: heap reads, the BM25 join), chosen from exact-vs-HNSW timings of
tag filters at 100k memories taken with a scratch script that is not in the repo (to re-measure); with it (and ef 256),
below ~150k memories the threshold sits at its floor, EXACT_MIN.

The keyword ranking (terms.BM25_SCORES) is restricted to the same candidates, and both rankings come back in one
result with each row's content and cosine; for hybrid search the same statement also brings the turns that follow
them and every session neighbour (`context`), so fusion (retrieval/hybrid_convex.fused, the local store's, through
hybrid.py) and the scores need nothing more from the database.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from memserver.contract.requests import SearchFilter
from memserver.postgres.rows import COLUMNS, CURRENT, OCCURRED, WIDTH, stored_namespace
from memserver.postgres.terms import BM25_SCORES

# hnsw.ef_search floor (pgvector: 40), the local store's ef (local/index.DEFAULT_EF). At 100k memories, the hybrid
# pool's vector side (k 50) against the exact top 50: recall 0.989 at 256, 0.996 at 400, the local store 0.985; the
# context statement 1-1.5 ms faster (benchmarks/README.md, "PostgreSQL + pgvector", hybrid in process at 100k).
# Lower floors fall short of the local store's recall: 0.962 at 128, 0.979 at 160, 0.984 at 200 (same section).
EF_SEARCH = 256
EF_SEARCH_MAX = 1000  # pgvector's limit
COST_RATIO = 0.025  # sqrt(0.025 * 256 * 100k) = 800 (the local store's is 4.0: numpy's exact rows are cheap)
EXACT_MIN = 1_000
EXACT_MAX = 20_000
MAX_SCAN_TUPLES = 100_000  # hnsw.max_scan_tuples: how far an iterative scan may go before giving up (default 20k)

# As of a time T (history.py's rule): stored by T, not replaced by a memory stored by T, not forgotten by T.
AS_OF = (
    "m.created_at <= %(as_of)s::timestamptz AND (m.replaced_at IS NULL OR m.replaced_at > %(as_of)s::timestamptz) "
    "AND (m.forgotten_at IS NULL OR m.forgotten_at > %(as_of)s::timestamptz)"
)


@dataclass(frozen=True)
class Plan:
    kind: str  # "exact" | "ann" | "probe"
    exact_max: int


def ef_search(depth: int) -> int:
    return min(EF_SEARCH_MAX, max(EF_SEARCH, 2 * depth))


def choose(candidates: int, table_rows: int, depth: int, filtered: bool) -> Plan:
    """The plan for a search of `depth` among at most `candidates` rows (of `table_rows` in the table), given
    cached counts; `filtered`: some filter (or the namespace) may pass fewer than `candidates`."""
    crossover = math.sqrt(COST_RATIO * ef_search(depth) * max(table_rows, candidates, 1))
    exact_max = int(min(EXACT_MAX, max(EXACT_MIN, crossover)))
    if candidates <= exact_max:
        return Plan("exact", exact_max)
    return Plan("probe" if filtered else "ann", exact_max)


def filter_sql(f: SearchFilter, *, held: bool = False, rowwise: bool = False) -> tuple[str, dict[str, Any]]:
    """The WHERE conditions (on alias m) for tenant %(tenant)s, the namespace and the filters, and their parameters.

    Current memories only, unless `f.as_of` asks for those that stood then, or `held` for the replaced ones too
    (select with include_replaced). Tags are matched through memory_tags for current memories (an index under
    row-level security, see migration 1), on the row's own array otherwise (memory_tags holds current ones only).
    The tagged seqs are read once into an array (an InitPlan): as `m.seq IN (subquery)`, a freshly imported tenant
    (no statistics yet: every estimate 1 row) got a nested loop re-reading the tag's postings per memory, quadratic
    in the tag's size (419 tagged turns: 87,571 index rows for 419 candidates; benchmarks/README.md, "Engine parity").
    `rowwise`: the conditions checked on rows already found (an HNSW scan's, a scored row's lookup) match tags on the
    row's own array, which memory_tags mirrors for current memories: `seq = ANY(array)` costs a pass over the array
    per row (a 10% tag at 100k memories: 10,000 seqs for each of ~7,000 scored rows, ~560 ms of a ~620 ms search).
    """
    conds = ["m.tenant = %(tenant)s", "m.namespace = %(namespace)s"]
    params: dict[str, Any] = {"namespace": stored_namespace(f.namespace)}
    every = held or f.as_of is not None
    if f.as_of is not None:
        conds.append(AS_OF)
        params["as_of"] = f.as_of
    elif held:
        conds.append("m.forgotten_at IS NULL")
    else:
        conds.append(CURRENT)
    if f.tags:
        conds.append(
            "m.tags && %(tags)s::text[]"
            if every or rowwise
            else "m.seq = ANY(ARRAY(SELECT g.seq FROM memserver.memory_tags g WHERE g.tenant = %(tenant)s "
            "AND g.tag = ANY(%(tags)s)))"
        )
        params["tags"] = list(f.tags)
    if f.source is not None:
        conds.append("m.source = %(source)s")
        params["source"] = f.source
    for name in ("speaker", "role", "session"):
        value = getattr(f, name)
        if value is not None:
            conds.append(f"m.{name} = %({name})s")
            params[name] = value
    if f.kinds:
        conds.append("m.kind = ANY(%(kinds)s)")
        params["kinds"] = list(f.kinds)
    if not f.include_archived:
        conds.append("NOT m.archived")
    if f.since is not None:
        conds.append(f"{OCCURRED} >= %(since)s::timestamptz")
        params["since"] = f.since
    if f.until is not None:
        conds.append(f"{OCCURRED} {'<=' if f.until_inclusive else '<'} %(until)s::timestamptz")
        params["until"] = f.until
    return " AND ".join(conds), params


# The tenant's current memories, the table's rows (an estimate), the namespace's current memories: plan inputs.
COUNTS = (
    "SELECT (SELECT coalesce(sum(docs), 0) FROM memserver.tenant_stats WHERE tenant = %(tenant)s) AS n, "
    "(SELECT reltuples FROM pg_class WHERE oid = 'memserver.memories'::regclass) AS table_rows, "
    "(SELECT coalesce(sum(docs), 0) FROM memserver.tenant_stats WHERE tenant = %(tenant)s "
    "AND namespace = %(namespace)s) AS in_namespace"
)
# Where search_sql's rows hold what: the counts, the ranking (1 vector, 2 keyword) and its score, the memory.
N, TABLE_ROWS, EXACT, IN_NAMESPACE, RANKING, RANK_SCORE, MEMORY = range(7)
DIST = MEMORY + WIDTH


def search_sql(
    plan: Plan,
    f: SearchFilter,
    *,
    depth: int,
    vector: bool,
    keyword: bool,
    unfiltered: bool = False,
    lateral: bool = True,
    context: bool = False,
) -> str:
    """One statement returning (n, table_rows, exact, in_namespace, ranking, rank_score, <COLUMNS>, distance) rows.

    ranking 1 rows are the vector ranking (rank_score: cosine distance), ranking 2 the keyword one (BM25); a
    memory in both comes twice. The first row always exists (LEFT JOIN from `info`), so `n` (the tenant's
    memories) and `exact` (which branch ran) arrive even when nothing matched. Parameters: tenant, q, depth,
    terms, exact_max and those of filter_sql. `unfiltered`: the caller knows that only current memories of the
    namespace are asked for and the namespace holds every current memory of the tenant (so every posting is a
    candidate: the keyword ranking may cut before joining; the caller checks `in_namespace` == `n` after).
    `lateral`: the HNSW/probe keyword branch looks each scored row up by (tenant, seq) (False: a plain join, which
    the planner answered with a scan of every row of the tenant; benchmarks/postgres_keyword.py compares them).
    `context`: what the hybrid ranking needs besides (context_sql): the keyword ranking is %(kdepth)s deep, and
    when the filters pass at most %(every)s candidates both rankings hold all of them (`ncand` says how many).
    `depth` (also the %(depth)s parameter) is spelt in the HNSW branch's LIMIT: a generic plan (ranking.GENERIC) sees
    a parameter there as "10% of the rows", and at 10k memories chose a scan and sort of all of them over the index
    (hybrid p50 16.4 -> 6.5 ms at limit 10 once spelt; benchmarks/README.md, "PostgreSQL + pgvector").
    """
    where, _ = filter_sql(f)
    rowwise, _ = filter_sql(f, rowwise=True)  # for the rows an HNSW scan or a scored row's lookup found
    ctes: list[str] = []
    branches: list[str] = []
    vlimit = klimit = "%(depth)s"
    # Unfiltered (the ann plan), the scans that find the ranked turns read their rows anyway: they carry what the
    # context statement's `l1` needs (_CARRIED), and no turn is looked up again (~150 memories_seq probes). `l1`
    # then relies on near and words holding each turn once (one part each in the ann plan, `scored` grouped by seq);
    # the keyword side's rows come with its lateral lookup, so only the lateral form carries them.
    carried = context and plan.kind == "ann" and lateral
    if context:
        klimit = "%(kdepth)s"
        if not unfiltered and plan.kind != "ann":  # few candidates: every one of them, as the local store does
            every = "(SELECT count(*) FROM cand) <= %(every)s"
            if plan.kind == "probe":  # (when the probe ran HNSW, `cand` is empty: not "few")
                every = f"(SELECT yes FROM small) AND {every}"
            vlimit = f"CASE WHEN {every} THEN %(every)s ELSE %(depth)s END"
            klimit = f"CASE WHEN {every} THEN %(every)s ELSE %(kdepth)s END"
    exact = {"exact": "true", "ann": "false", "probe": "(SELECT yes FROM small)"}[plan.kind]
    if plan.kind == "probe":
        ctes.append(
            "small AS MATERIALIZED (SELECT count(*) <= %(exact_max)s AS yes FROM "
            f"(SELECT 1 FROM memserver.memories m WHERE {where} LIMIT %(exact_max)s + 1) x)"
        )
    if plan.kind != "ann":
        guard = " WHERE (SELECT yes FROM small)" if plan.kind == "probe" else ""
        ctes.append(
            "cand AS MATERIALIZED (SELECT m.seq, m.created_at, m.embedding <=> %(q)b AS dist "
            f"FROM memserver.memories m WHERE {where}{' AND (SELECT yes FROM small)' if guard else ''})"
        )
    if vector:
        parts = []
        if plan.kind != "ann":
            parts.append(f"(SELECT seq, dist FROM cand ORDER BY dist, seq LIMIT {vlimit})")
        if plan.kind != "exact":
            guard = " AND NOT (SELECT yes FROM small)" if plan.kind == "probe" else ""
            what = _CARRIED if carried else "m.seq, m.embedding <=> %(q)b AS dist"
            parts.append(
                f"(SELECT {what} FROM memserver.memories m WHERE {rowwise}{guard} "
                f"ORDER BY m.embedding <=> %(q)b LIMIT {int(depth)})"
            )
        ctes.append(f"near AS ({' UNION ALL '.join(parts)})")
        branches.append("SELECT seq, 1 AS ranking, dist AS rank_score FROM near")
    if keyword:
        ctes.append(f"scored AS ({BM25_SCORES})")
        parts = []
        if plan.kind != "ann":
            # The scored candidates by an aggregate over both, not a join: a tenant without statistics yet (every
            # estimate 1 row) got a nested loop comparing every scored row with every candidate. (In a probe that
            # ran HNSW, `cand` is empty: the guard spares aggregating every scored row for nothing, ~8 ms at 7,000.)
            guard = " WHERE (SELECT yes FROM small)" if plan.kind == "probe" else ""
            parts.append(
                "(SELECT seq, max(bm25) AS bm25 FROM (SELECT seq, bm25, NULL::timestamptz AS created_at FROM scored"
                f"{guard} UNION ALL SELECT seq, NULL, created_at FROM cand) x GROUP BY seq "
                "HAVING count(bm25) > 0 AND count(created_at) > 0 "
                f"ORDER BY max(bm25) DESC, seq LIMIT {klimit})"
            )
        if plan.kind != "exact":
            # Only the rows scoring at least the depth-th best score (ties included) are joined to memories for the
            # filter; ties at the cut go to the earlier-stored (lower seq), as the local store's insertion order.
            guard = " AND NOT (SELECT yes FROM small)" if plan.kind == "probe" else ""
            cut = f"s.bm25 >= (SELECT min(bm25) FROM (SELECT bm25 FROM scored ORDER BY bm25 DESC LIMIT {klimit}) x)"
            if not unfiltered:
                cut = "true"  # the filter decides which rows count; it needs the join for every scored row anyway
            source = "scored"
            if unfiltered and lateral:  # the same rows by one bounded sort (the cut's subquery and a filter: 0.3 ms)
                source, cut = (
                    f"(SELECT seq, bm25 FROM scored ORDER BY bm25 DESC FETCH FIRST ({klimit}) ROWS WITH TIES)",
                    "true",
                )
            if f.tags and not unfiltered:  # the tag's scored rows first, by an aggregate as above: a lookup each
                source = (  # for them only (a 10% tag at 100k memories: ~700 of ~7,000 scored rows, 30 -> ~5 ms)
                    "(SELECT seq, max(bm25) AS bm25 FROM (SELECT seq, bm25 FROM scored UNION ALL SELECT g.seq, NULL "
                    "FROM memserver.memory_tags g WHERE g.tenant = %(tenant)s AND g.tag = ANY(%(tags)s)) x "
                    "GROUP BY seq HAVING count(bm25) > 0 AND count(bm25) < count(*))"
                )
            if lateral:  # one (tenant, seq) lookup per scored row passing the cut (review S1)
                what, read = ("s.bm25, m.*", _CARRIED) if carried else ("s.seq, s.bm25", "m.created_at")
                parts.append(
                    f"(SELECT {what} FROM {source} s CROSS JOIN LATERAL (SELECT {read} FROM "
                    f"memserver.memories m WHERE {rowwise} AND m.seq = s.seq OFFSET 0) m WHERE {cut}{guard} "
                    f"ORDER BY s.bm25 DESC, s.seq LIMIT {klimit})"
                )
            else:  # the join the planner turned into a scan of the tenant's time index (kept for the benchmark)
                parts.append(
                    "(SELECT s.seq, s.bm25 FROM scored s JOIN memserver.memories m "
                    f"ON m.tenant = %(tenant)s AND m.seq = s.seq WHERE {where} AND {cut}{guard} "
                    f"ORDER BY s.bm25 DESC, s.seq LIMIT {klimit})"
                )
        ctes.append(f"words AS ({' UNION ALL '.join(parts)})")
        branches.append("SELECT seq, 2 AS ranking, bm25 AS rank_score FROM words")
    ncand = "(SELECT count(*) FROM cand)" if plan.kind != "ann" else "NULL::bigint"
    ctes.append(f"info AS ({COUNTS}, {exact} AS exact, {ncand} AS ncand)")
    if context:
        return _with_context(ctes, branches, where, exact=plan.kind == "exact", carried=carried, words=keyword)
    ctes.append(f"hits AS ({' UNION ALL '.join(branches)})")
    return (
        "WITH " + ",\n".join(ctes) + "\n"
        f"SELECT i.n, i.table_rows, i.exact, i.in_namespace, h.ranking, h.rank_score, {COLUMNS}, "
        "m.embedding <=> %(q)b AS dist "
        "FROM info i LEFT JOIN (hits h JOIN memserver.memories m ON m.tenant = %(tenant)s AND m.seq = h.seq) ON true"
    )


# A context statement's rows (search_sql with `context`): one a distinct turn, each (n, table_rows, exact,
# in_namespace, ranking, its vector ranking's distance, its BM25, <COLUMNS>, cosine distance, previous turn, next
# turn, admitted, current, ncand). Ranking 5 rows are the ranked turns and the turns that follow them: their full
# rows (every hit is one of them: hybrid.py reads the hits from here, no second round trip); ranking 4 rows the turns
# only their context needs, in LIGHT columns (their contents would cross the wire for nothing); the one ranking 3 row
# (the rest NULL) carries the session links of the ranking 5 turns that have one, as three arrays (seqs, previous,
# next: NULL for none) in its last columns, NULL on every other row (a row a link: 419 more rows to decode at 419
# tagged turns, ~1 ms of the client's time).
LIGHT = COLUMNS.replace("m.content", "NULL::text")
VDIST, BM25 = RANKING + 1, RANKING + 2
SEQ, CREATED, CONTENT, TAGS, _SOURCE, WHEN, SPEAKER = range(BM25 + 2, BM25 + 9)
TURN = slice(BM25 + 1, BM25 + 1 + WIDTH)  # COLUMNS
COSDIST = TURN.stop
PREV, NEXT, ADMITTED, IS_CURRENT, NCAND, LINK_SEQS, LINK_PREVS, LINK_NEXTS = range(COSDIST + 1, COSDIST + 9)
RANKED_ROW, CONTEXT_ROW, LINK_ROW = 5, 4, 3

# The link row's memory columns: all NULL.
_LINK = ", ".join("NULL" for _ in range(WIDTH))
# One session's turns (alias s: namespace, session), by memories_session (migration 5: its predicate spelt out, so
# the planner need not prove it): an index-only range scan.
_SESSION = (
    "SELECT p.seq FROM memserver.memories p WHERE p.tenant = %(tenant)s AND p.namespace = s.namespace "
    "AND p.session = s.session AND p.session IS NOT NULL AND "
)
# A turn's previous / next turn is the one before / after it in its session and namespace, in any state (one that
# is not current counts as none, as in the local store). `chain` holds, per session of a ranked turn, every turn from
# the one before its first ranked turn to the second after its last (one range scan and two short ones a session,
# not two probes a turn: ~750 index probes for an unfiltered search at 10 ranked sessions, now ~30 scans), each with
# its neighbours and what it is to the ranking: ranked, following a ranked turn (its answer may be next), or a
# neighbour of one of those (its cosine and BM25 are context). The chain's ends are only ever the latter, so their
# missing outer neighbour is never read.
_CHAIN = (
    "SELECT seq, lag(seq) OVER w AS prev, lead(seq) OVER w AS next, ranked, "
    "NOT ranked AND coalesce(lag(ranked) OVER w, false) AS follows, "
    "NOT ranked AND NOT coalesce(lag(ranked) OVER w, false) AND (coalesce(lead(ranked) OVER w, false) "
    "OR coalesce(lag(ranked, 2) OVER w, false)) AS around "
    "FROM (SELECT s.namespace, s.session, t.seq, t.seq IN (SELECT seq FROM l1) AS ranked FROM spans s "
    f"CROSS JOIN LATERAL (({_SESSION}p.seq < s.lo ORDER BY p.seq DESC LIMIT 1) "
    f"UNION ALL ({_SESSION}p.seq BETWEEN s.lo AND s.hi) "
    f"UNION ALL ({_SESSION}p.seq > s.hi ORDER BY p.seq LIMIT 2)) t) c "
    "WINDOW w AS (PARTITION BY namespace, session ORDER BY seq)"
)


# What `l1` holds of a ranked turn (alias m) besides its place on each side: its row, cosine distance and whether it
# is current; and the names of those columns but the last (`_names`).
_CARRIED = (
    f"{COLUMNS.replace(OCCURRED, f'{OCCURRED} AS occurred')}, m.embedding <=> %(q)b AS dist, {CURRENT} AS current"
)
_NAMES = [*(c.split(".")[-1] for c in COLUMNS.replace(OCCURRED, "occurred").split(", ")), "dist"]


def _names(alias: str) -> str:
    return ", ".join(f"{alias}.{name}" for name in _NAMES)


def _row(seq: str) -> str:
    """The end of a lateral subquery over alias m reading the row of `seq` (one probe of memories_seq); OFFSET 0
    keeps the planner from pulling it up into a join (which it planned as a scan of the tenant per turn)."""
    return f" FROM memserver.memories m WHERE m.tenant = %(tenant)s AND m.seq = {seq} OFFSET 0"


def _with_context(ctes: list[str], branches: list[str], where: str, *, exact: bool, carried: bool, words: bool) -> str:
    """search_sql's statement with the session context of hybrid_convex.fused (see SEQ and _CHAIN): the ranked
    turns with their place on each side (`sides`: an aggregate, so a turn on both sides is one row, and no join of
    two CTEs a tenant without statistics could plan as a nested loop; when `carried`, words LEFT JOIN near and the
    near rows not in words do that), the turns that follow them with whether they
    pass the filters (a candidate, when the `exact` plan listed them all in `cand`; a ranked turn passes), the turns
    around both (LIGHT), and the links (`links`, arrays on the LINK_ROW); each row read by one probe (_row), but
    the ranked turns of an unfiltered search (`carried`: their rows came with near's and words' scans)."""
    if carried:  # the rows came with near and words (_CARRIED): a turn on both sides is one row, its words row
        l1 = f"SELECT n.dist AS vdist, NULL::float8 AS bm25, {_names('n')}, n.current FROM near n"
        if words:
            l1 = (
                f"SELECT n.dist AS vdist, w.bm25, {_names('w')}, w.current FROM words w LEFT JOIN near n "
                f"ON n.seq = w.seq UNION ALL {l1} WHERE NOT EXISTS (SELECT FROM words w WHERE w.seq = n.seq)"
            )
        ctes.append(f"l1 AS MATERIALIZED ({l1})")
    else:
        ctes.append(f"ranked AS ({' UNION ALL '.join(branches)})")
        ctes.append(
            "sides AS MATERIALIZED (SELECT seq, min(rank_score) FILTER (WHERE ranking = 1) AS vdist, "
            "max(rank_score) FILTER (WHERE ranking = 2) AS bm25 FROM ranked GROUP BY seq)"
        )
        ctes.append(
            f"l1 AS MATERIALIZED (SELECT u.vdist, u.bm25, m.* FROM sides u CROSS JOIN LATERAL (SELECT {_CARRIED}"
            f"{_row('u.seq')}) m)"
        )
    ctes.append(
        "spans AS MATERIALIZED (SELECT namespace, session, min(seq) AS lo, max(seq) AS hi FROM l1 "
        "WHERE session IS NOT NULL GROUP BY namespace, session)"
    )
    ctes.append(f"chain AS MATERIALIZED ({_CHAIN})")
    passes = "m.seq IN (SELECT seq FROM cand)" if exact else f"({where})"
    ctes.append(
        f"out AS (SELECT {RANKED_ROW} AS ranking, x.vdist, x.bm25, {_names('x')}, NULL::bigint AS prev, "
        "NULL::bigint AS next, true AS admitted, x.current FROM l1 x "
        f"UNION ALL SELECT {RANKED_ROW}, NULL, NULL, m.* FROM chain c CROSS JOIN LATERAL (SELECT {COLUMNS}, "
        f"m.embedding <=> %(q)b, NULL::bigint, NULL::bigint, {passes}, {CURRENT}{_row('c.seq')}) m WHERE c.follows "
        f"UNION ALL SELECT {CONTEXT_ROW}, NULL, NULL, m.* FROM chain c CROSS JOIN LATERAL (SELECT {LIGHT}, "
        f"m.embedding <=> %(q)b, NULL::bigint, NULL::bigint, NULL::boolean, {CURRENT}{_row('c.seq')}) m WHERE c.around "
        f"UNION ALL SELECT {LINK_ROW}, NULL, NULL, {_LINK}, NULL, NULL, NULL, NULL, NULL)"
    )
    ctes.append(
        "links AS (SELECT array_agg(seq) AS seqs, array_agg(prev) AS prevs, array_agg(next) AS nexts FROM chain "
        "WHERE ranked OR follows)"
    )
    return (
        "WITH " + ",\n".join(ctes) + "\n"
        "SELECT i.n, i.table_rows, i.exact, i.in_namespace, o.*, i.ncand, k.seqs, k.prevs, k.nexts "
        f"FROM info i LEFT JOIN out o ON true LEFT JOIN links k ON o.ranking = {LINK_ROW}"
    )
