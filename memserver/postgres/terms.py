"""The keyword side on PostgreSQL: the same terms as the local store's BM25, and BM25 itself in SQL.

Text is tokenised here, in Python, by memserver's own tokenizer (memserver.retrieval.terms), never by PostgreSQL's
text search: both engines then index and query exactly the same terms (ids glued, accents folded, plurals stemmed,
CJK split into character pairs, the tags, the date words of occurred_at). A memory row carries its distinct terms
and their frequencies; triggers copy them into `postings` (see migrations/0001). BM25 is scored in SQL from
per-tenant statistics: documents and total length from `tenant_stats`, document frequencies counted from the postings of
the query's terms (the same index range the scoring reads anyway), with the local store's k1 and b. `ts_rank_cd` was
not used: it has no IDF.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from memserver.retrieval.bm25 import KeywordIndex
from memserver.retrieval.terms import ANALYZER as analyzer_version
from memserver.retrieval.terms import date_text, normalise, raw_tokens, tag_text
from memserver.retrieval.terms import query_terms as analyzer_query_terms

# The analyzer stamp of meta 'keyword' (analyzer.py): memserver's tokenizer, and the speaker among a row's terms (as
# the local store indexes it: local/keyword.indexed_text); a database stamped otherwise is re-indexed on open.
ANALYZER = f"{analyzer_version}+speaker"

_DEFAULTS = KeywordIndex()
K1 = _DEFAULTS.k1
B = _DEFAULTS.b
del _DEFAULTS


@dataclass(frozen=True)
class IndexedText:
    """What a memory row stores for the keyword index."""

    terms: list[str]  # distinct, in first-occurrence order
    tfs: list[int]
    length: int  # terms indexed, repeats included (BM25's document length)


# memserver.retrieval.terms.tokenize, with each distinct raw token normalised once per process (as the local index's
# vocabulary does): folding and stemming per occurrence made a bulk import spend ~1 ms per memory here.
_term = functools.lru_cache(maxsize=1 << 17)(normalise)


def indexed(content: str, occurred_at: str, tags: Sequence[str] = (), speaker: str | None = None) -> IndexedText:
    """The terms of a memory: its content, the date words of its occurred_at, its tags and its speaker's name (as
    the local store indexes them)."""
    raw = raw_tokens(f"{content} {date_text(occurred_at)} {tag_text(list(tags))} {speaker or ''}")
    counts = Counter(term for term in map(_term, raw) if term is not None)
    return IndexedText(list(counts), list(counts.values()), sum(counts.values()))


def query_terms(query: str) -> list[str]:
    """The distinct terms a query is scored on (memserver.retrieval.terms.query_terms: variants and dates included)."""
    return analyzer_query_terms(query)


# BM25 of the postings of %(terms)s for tenant %(tenant)s, one row per memory (seq, bm25). `df` counts a term's
# postings over the whole tenant, before any filter, like the local index (filters restrict candidates, not the
# statistics); the window count and the scoring read the same index-only range scan. Every literal is float8: a
# bare 2.2 is numeric in SQL, and numeric arithmetic is slower (review S2; benchmarks/postgres_keyword.py).
# Rounded to float32, the local store's precision: two scores equal in exact arithmetic but a unit apart in the last
# place of float8 (the terms summed in another order) tie, and the tie goes to the earlier-stored, as locally.
BM25_SCORES = f"""
    SELECT p.seq, sum(ln(1 + (st.n - p.df + 0.5::float8) / (p.df + 0.5::float8)) * {K1 + 1}::float8 * p.tf
                      / (p.tf + {K1}::float8 * (1 - {B}::float8 + {B}::float8 * p.doc_len / st.avgdl)))
                  ::real::float8 AS bm25
    FROM (SELECT seq, tf, doc_len, count(*) OVER (PARTITION BY term) AS df
          FROM memserver.postings WHERE tenant = %(tenant)s AND term = ANY(%(terms)s)) p,
         (SELECT coalesce(sum(docs), 0)::float8 AS n,
                 CASE WHEN sum(length) > 0 THEN sum(length)::float8 / sum(docs) ELSE 1 END AS avgdl
          FROM memserver.tenant_stats WHERE tenant = %(tenant)s) st
    GROUP BY p.seq
"""
