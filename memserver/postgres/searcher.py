"""One tenant's search pipeline on PostgreSQL: which ranking a checked request runs (one side's, the hybrid one
with its session context, or either as of a past time), the second search for a tag the query names, and the
near-duplicates `add` reports. The statements are search.py's and ranking.py's; the hybrid fusion is the local
store's (hybrid.py). PostgresBackend checks the request and embeds the query; this object only ranks.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from memserver.contract import requests
from memserver.contract.backend import NEAR_DUPLICATE_SCORE, SIMILAR_MAX, Hit, Memory
from memserver.postgres import hybrid, ranking, rows, terms
from memserver.postgres.pool import Database
from memserver.postgres.rows import stored_text
from memserver.retrieval.hybrid_convex import DEPTH
from memserver.retrieval.terms import named_tags, query_words

KEYWORD_DEPTH = 20  # the keyword ranking's depth (a deeper one changes nothing but how ties are cut at `limit`)


class Searcher:
    """Ranks a tenant's memories for checked requests. `db` gives the backend's pool (StoreError once closed);
    `estimates`, the plans' inputs, are refreshed by every search."""

    def __init__(self, db: Callable[[], Database], tenant: str, estimates: ranking.Estimates) -> None:
        self.db, self.tenant, self.estimates = db, tenant, estimates

    def run(self, q: np.ndarray, request: requests.SearchRequest, explain: bool = False) -> list[Hit]:
        """The hits of a checked request for the query vector `q` (backend.MemoryBackend.search)."""
        mode, limit = request.mode, request.limit
        words = [stored_text(t) for t in terms.query_terms(request.query)] if mode != "semantic" else []
        if mode == "keyword" and not words:
            return []
        shown = [stored_text(t) for t in query_words(request.query)] if mode != "semantic" else []
        tags, hits = self._hits(q, request, words, shown, explain)
        f = request.filter
        if mode == "semantic" or f.as_of is not None:
            return hits
        # A query naming a tag (terms.named_tags) ranks that tag's memories first. Its tags are indexed terms, so
        # such memories reach the keyword pool: only a query whose pool holds one pays the second search.
        named = named_tags(request.query, sorted(tags))
        if not named:
            return hits
        tagged = request._replace(filter=f._replace(tags=tuple(named)))
        first = self._hits(q, tagged, words, shown, explain)[1]
        if f.tags:  # both: the filter's tags and a named one
            first = [h for h in first if not set(f.tags).isdisjoint(h.memory.tags)]
        return ranking.tagged_first(first, hits, limit, named)

    def _hits(
        self, q: np.ndarray, request: requests.SearchRequest, words: list[str], shown: list[str], explain: bool
    ) -> tuple[set[str], list[Hit]]:
        """The tags of the memories a request's statement fetched and its hits: one side's ranking, or the hybrid
        ranking of both with their session context (hybrid.py, the local store's)."""
        mode, f = request.mode, request.filter
        depth = request.limit if mode == "semantic" else max(request.limit, KEYWORD_DEPTH)
        if mode == "hybrid":
            depth = max(request.limit, DEPTH)
        if f.as_of is not None:
            if mode == "hybrid":  # every candidate, as the local store ranks as of a past time
                depth = max(depth, ranking.EVERY)
            near, keyed, found, bm25 = ranking.rankings_as_of(self.db(), self.tenant, q, request.query, f, depth, words)
            tags = {t for memory, _ in found.values() for t in memory.tags}
            if mode != "hybrid":
                return tags, ranking.hits(near, keyed, found, bm25, request, shown, explain)
            ctx = ranking.Context({}, set(), set(), every=True)  # exact over what stood then, no session context
            turns = {s: ranking.Turn(m.tags, m.speaker or "", m.occurred_at, c) for s, (m, c) in found.items()}

            def stood(seqs: list[int]) -> dict[int, Memory]:
                return {seq: found[seq][0] for seq in seqs}

            return tags, hybrid.hits(near, keyed, turns, bm25, ctx, request, shown, explain, stood)
        db, est, vector = self.db(), self.estimates, mode != "keyword"
        if mode != "hybrid":
            near, keyed, found, bm25 = ranking.rankings(db, self.tenant, est, q, f, depth, vector=vector, words=words)
            return {t for memory, _ in found.values() for t in memory.tags}, ranking.hits(
                near, keyed, found, bm25, request, shown, explain
            )
        near, keyed, turns, bm25, ctx, full = ranking.context_rankings(db, self.tenant, est, q, f, depth, words)

        def load(seqs: list[int]) -> dict[int, Memory]:  # the statement's full rows; others (explain) read now
            missing = [seq for seq in seqs if seq not in full]
            found = ranking.full_rows(db, self.tenant, missing) if missing else {}
            return found | {seq: rows.memory(full[seq]) for seq in seqs if seq in full}

        tags = {t for turn in turns.values() for t in turn.tags}
        return tags, hybrid.hits(near, keyed, turns, bm25, ctx, request, shown, explain, load)

    def similar(self, vector: np.ndarray, exclude: str, namespace: str) -> tuple[tuple[str, float], ...]:
        """The current memories of `namespace` nearest `vector` at NEAR_DUPLICATE_SCORE or above (but `exclude`):
        what `add` reports as similar."""
        f = requests.SearchFilter(namespace=namespace)
        near, _, found, _ = ranking.rankings(
            self.db(), self.tenant, self.estimates, vector, f, SIMILAR_MAX + 1, vector=True, words=[]
        )
        out = []
        for seq in near:
            memory, score = found[seq]
            if memory.id != exclude and score >= NEAR_DUPLICATE_SCORE:
                out.append((memory.id, round(score, 4)))
        return tuple(out[:SIMILAR_MAX])
