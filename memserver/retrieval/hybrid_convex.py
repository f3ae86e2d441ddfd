"""The local store's hybrid ranking: convex fusion of a vector side and a keyword side, each with the turn's
session context, plus soft boosts for the speaker, the time window and "when" questions.

For a row t among the candidates (the rows that pass the filters):

    vec(t)   = cos(t) + 0.25 cos(prev t) + 0.1 cos(next t)           the turns around t, as extra evidence
    kw(t)    = bm25(t) + 0.75 bm25(prev t)                           a short answer inherits its question's words
    score(t) = 0.6 vec(t) / max vec + 0.4 kw(t) / max kw              over the pool: each side's best 50
               + 0.3 [t's speaker is named in the query]
               + 0.2 [t's occurred_at falls in a period the query names, or up to 31 days after it]
               + 0.2 [the query asks "when" and t carries time words]

`prev`/`next` are the previous / next current turn of t's session (local/row_context.py): a store without sessions has
none, and the formula is then plain convex fusion of cosine and BM25. Ties go to the lower row (stored first). The
boosts are soft: another speaker's turn that matches clearly still wins; none applies unless the query names a speaker
or a time, or asks "when". `Hit.score` stays the row's own cosine.

Why these and not reciprocal-rank fusion (hybrid_rrf.py, which PostgreSQL uses): on two sets of long
multi-session conversations this scored R@10 81.3 / 68.4 against 60.5 / 49.3, and kept the general quality set
level; every constant was picked by leave-one-conversation-out. The measurements, the alternatives tried and
rejected (recency, Rocchio feedback, a second dated vector, BM25F fields, min-max normalisation), and what each
piece is worth: benchmarks/README.md, "Retrieval II".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any, NamedTuple, Protocol

import numpy as np

from memserver.retrieval.terms import normalise
from memserver.retrieval.timewords import Window, is_when, time_windows

__all__ = [
    "DEPTH",
    "NEXT_VECTOR",
    "PREV_KEYWORD",
    "PREV_VECTOR",
    "SPEAKER_BOOST",
    "TIME_WINDOW_BOOST",
    "VECTOR_WEIGHT",
    "WHEN_BOOST",
    "WINDOW_AFTER_DAYS",
    "Fused",
    "QueryAnalysis",
    "RowSource",
    "describe_query",
    "explain_row",
    "fuse",
    "fused",
    "named_speakers",
    "speaker_matcher",
    "top_rows",
    "window_mask",
]

DEPTH = 50  # rows each side contributes to the pool (a `limit` above it is appended from deeper pools)
VECTOR_WEIGHT = 0.6  # the keyword side gets 1 - this
PREV_VECTOR = 0.25
NEXT_VECTOR = 0.1
PREV_KEYWORD = 0.75
SPEAKER_BOOST = 0.3
TIME_WINDOW_BOOST = 0.2
WHEN_BOOST = 0.2
WINDOW_AFTER_DAYS = 31  # people talk about an event in the weeks after it


@dataclass(frozen=True)
class QueryAnalysis:
    """What a query carries beyond its words: the speakers it names (their stored names), whether it asks
    "when", and the periods it names."""

    speakers: list[str]
    when: bool
    windows: list[Window]

    @classmethod
    def of(cls, query: str, speakers: list[str], today: date) -> QueryAnalysis:
        return cls(speakers, is_when(query), time_windows(query, today))


def speaker_matcher(names: Sequence[str]) -> tuple[re.Pattern[str] | None, dict[str, list[int]]]:
    """(a case-insensitive whole-name pattern over `names`, casefolded name -> its positions in `names`), names
    that are stopwords or shorter than 2 letters left out ("Will", "May" would fire on words); position 0 is "no
    speaker" and is never matched."""
    codes: dict[str, list[int]] = {}
    for code, name in enumerate(names):
        if code and len(name) >= 2 and normalise(name.encode("utf-8", "replace")) is not None:
            codes.setdefault(name.casefold(), []).append(code)
    if not codes:
        return None, codes
    alternation = "|".join(re.escape(n) for n in sorted(codes, key=len, reverse=True))
    return re.compile(rf"(?<!\w)(?:{alternation})(?!\w)", re.IGNORECASE), codes


def named_speakers(query: str, names: Sequence[str]) -> list[str]:
    """Those of `names` (distinct speakers) that `query` names by their whole name, any case."""
    pattern, codes = speaker_matcher(["", *names])
    if pattern is None:
        return []
    found = dict.fromkeys(m.group(0).casefold() for m in pattern.finditer(query))
    return [names[c - 1] for name in found for c in codes[name]]


class RowSource(Protocol):
    """What `fused` asks an engine about its rows (keys: the engine's row numbers, stored order; int64 arrays)."""

    def has_sessions(self) -> bool: ...

    def neighbours(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(previous, next) current turn of each row in its session and namespace, -1 for none."""
        ...

    def admitted(self, rows: np.ndarray) -> np.ndarray:
        """Those of `rows` (current ones) that pass the search's filters."""
        ...

    def cosines(self, rows: np.ndarray) -> np.ndarray:
        """Each row's cosine to the query."""
        ...

    def speakers(self, rows: np.ndarray) -> list[str]:
        """Each row's speaker ("" for none)."""
        ...

    def occurred(self, rows: np.ndarray) -> list[str]:
        """Each row's occurred_at in the stored format ("" for none)."""
        ...

    def timewords(self, rows: np.ndarray) -> np.ndarray:
        """Which rows carry time words (timewords.TIME_WORDS) in their content: a mask."""
        ...


def top_rows(rows: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the `k` best `scores`, best first, ties by lower row: always the first k of the full order, so
    a shallower ranking is a prefix of a deeper one (whatever rows tie at the cut)."""
    n = len(scores)
    if k >= n:
        return np.lexsort((rows, -scores))
    kth = np.partition(-scores, k - 1)[k - 1]
    above = np.flatnonzero(-scores < kth)
    tied = np.flatnonzero(-scores == kth)
    if len(tied) > k - len(above):
        tied = tied[np.argsort(rows[tied], kind="stable")[: k - len(above)]]
    chosen = np.concatenate([above, tied])
    return chosen[np.lexsort((rows[chosen], -scores[chosen]))]


def window_mask(occurred: Sequence[str], windows: Sequence[Window]) -> np.ndarray:
    """Which occurred_at values (stored format) fall in one of `windows` or up to WINDOW_AFTER_DAYS after it."""
    hit = np.zeros(len(occurred), bool)
    for w in windows:
        if w.any_year:
            month = f"-{w.first.month:02d}-"
            hit |= np.fromiter((t[4:8] == month for t in occurred), bool, len(occurred))
        else:
            lo, hi = w.first.isoformat(), (w.last + timedelta(days=1 + WINDOW_AFTER_DAYS)).isoformat()
            hit |= np.fromiter((lo <= t < hi for t in occurred), bool, len(occurred))
    return hit


class Fused(NamedTuple):
    """The pool of one hybrid ranking and every per-row quantity the score was made of (pool order: by row).

    `order` indexes the pool best first. Kept so that `explain` costs nothing when it is off: the search reads
    `order` only."""

    pool: np.ndarray
    order: np.ndarray
    score: np.ndarray
    vec: np.ndarray
    cos: np.ndarray
    prev_cos: np.ndarray  # nan: no previous turn
    next_cos: np.ndarray
    kw: np.ndarray
    bm: np.ndarray
    prev_bm: np.ndarray
    prev_row: np.ndarray
    speaker: np.ndarray  # bool masks of the boosts applied
    window: np.ndarray
    when: np.ndarray
    near: np.ndarray  # the vector side's pool, best first
    words: np.ndarray  # the keyword side's pool, best first

    def side_rank(self, side: np.ndarray, row: int) -> int | None:
        at = np.flatnonzero(side == row)
        return int(at[0]) + 1 if len(at) else None

    def part(self, i: int) -> tuple[float, float]:
        """(vector, keyword) shares of row i's fused score."""
        vmax = float(self.vec.max()) if len(self.vec) else 0.0
        kmax = float(self.kw.max()) if len(self.kw) else 0.0
        nv = self.vec[i] / vmax if vmax > 0 else self.vec[i]
        nk = self.kw[i] / kmax if kmax > 0 else 0.0
        return VECTOR_WEIGHT * float(nv), (1.0 - VECTOR_WEIGHT) * float(nk)


def _present(rows: np.ndarray) -> np.ndarray:
    return rows[rows >= 0]


def _union(*parts: np.ndarray) -> np.ndarray:
    """The sorted distinct values of int64 arrays."""
    a = np.concatenate(parts) if len(parts) > 1 else parts[0].copy()
    a.sort()
    if len(a) > 1:
        a = a[np.concatenate(([True], a[1:] != a[:-1]))]
    return a


def _lookup(keys: np.ndarray, values: np.ndarray, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(values[keys == row] for each row, 0 where a row is not among the keys or is -1; and where it was), with
    `keys` sorted."""
    if not len(keys) or not len(rows):
        return np.zeros(len(rows)), np.zeros(len(rows), bool)
    at = np.minimum(np.searchsorted(keys, rows), len(keys) - 1)
    found = (keys[at] == rows) & (rows >= 0)
    return np.where(found, values[at], 0.0), found


def _cosines(source: RowSource, rows: np.ndarray, known: np.ndarray, known_cos: np.ndarray) -> np.ndarray:
    """Cosines of `rows`: those of `known` (sorted) as given, the others from the source."""
    cos, found = _lookup(known, known_cos, rows)
    if not found.all():
        missing = np.flatnonzero(~found)
        cos[missing] = source.cosines(rows[missing])
    return cos


def fused(
    source: RowSource,
    a: QueryAnalysis,
    depth: int,
    vector_side: tuple[np.ndarray, np.ndarray],
    keyword_side: tuple[np.ndarray, np.ndarray],
    every: bool,
) -> Fused:
    """The hybrid ranking over pools of `depth` rows a side, and what its scores were made of: the one ranking of
    both engines (the local store's numpy rows, PostgreSQL's fetched rows).

    `vector_side`: (rows, cosines) sorted by row: every candidate when `every` (few candidates: each is ranked
    with its context), else the vector ranking's best `depth`, whose following turns join (their question matched:
    the answer may be next). `keyword_side`: (rows, BM25) sorted by row: the BM25 matches (a row beyond them counts
    as unmatched), whose following turns join too."""
    vrows, vcos = vector_side
    keys, values = keyword_side
    if every:
        rows = vrows
        prev, nxt = source.neighbours(rows)
        eligible = np.ones(len(rows), bool)
    else:
        base = _union(vrows, keys)
        rows = _union(base, source.admitted(_present(source.neighbours(base)[1])))
        prev, nxt = source.neighbours(rows)
        followers = np.unique(_present(source.neighbours(vrows)[1]))  # sorted: _lookup's keys
        eligible = _lookup(vrows, vrows, rows)[1] | _lookup(followers, followers, rows)[1]
    # Every row's sides, its neighbours' parts included.
    cos = _cosines(source, rows, vrows, vcos)
    prev_cos = next_cos = np.zeros(len(rows))
    if source.has_sessions():
        around = np.unique(_present(np.concatenate([prev, nxt])))
        around_cos = _cosines(source, around, rows, cos)
        prev_cos, next_cos = _lookup(around, around_cos, prev)[0], _lookup(around, around_cos, nxt)[0]
    vec = cos + PREV_VECTOR * prev_cos + NEXT_VECTOR * next_cos
    bm, prev_bm = _lookup(keys, values, rows)[0], _lookup(keys, values, prev)[0]
    kw = bm + PREV_KEYWORD * prev_bm
    # Each side's best `depth`, ties by row; the pool is both.
    vpos = np.flatnonzero(eligible)
    near = vpos[top_rows(rows[vpos], vec[vpos], min(depth, len(vpos)))]
    wpos = np.flatnonzero(kw > 0)
    words = wpos[top_rows(rows[wpos], kw[wpos], min(depth, len(wpos)))]
    at = _union(near, words)
    pool = rows[at]
    speaker = np.zeros(len(pool), bool)
    if a.speakers:
        named = {s.casefold() for s in a.speakers}
        speaker = np.fromiter((s.casefold() in named for s in source.speakers(pool)), bool, len(pool))
    window = window_mask(source.occurred(pool), a.windows) if a.windows else np.zeros(len(pool), bool)
    when = source.timewords(pool) if a.when else np.zeros(len(pool), bool)
    order, score = fuse(pool, vec[at], kw[at], speaker, window, when)
    p, n = prev[at], nxt[at]
    return Fused(
        pool,
        order,
        score,
        vec[at],
        cos[at],
        np.where(p >= 0, prev_cos[at], np.nan),
        np.where(n >= 0, next_cos[at], np.nan),
        kw[at],
        bm[at],
        prev_bm[at],
        p,
        speaker,
        window,
        when,
        rows[near],
        rows[words],
    )


def fuse(
    pool: np.ndarray,
    vec: np.ndarray,
    kw: np.ndarray,
    speaker: np.ndarray,
    window: np.ndarray,
    when: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(order, score) of the pool rows: the convex score of the module docstring, best first, ties by row."""
    vmax = float(vec.max()) if len(vec) else 0.0
    kmax = float(kw.max()) if len(kw) else 0.0
    nv = vec / vmax if vmax > 0 else vec
    nk = kw / kmax if kmax > 0 else np.zeros_like(kw)
    score = VECTOR_WEIGHT * nv + (1.0 - VECTOR_WEIGHT) * nk
    score = score + SPEAKER_BOOST * speaker + TIME_WINDOW_BOOST * window + WHEN_BOOST * when
    return np.lexsort((pool, -score)), score


def _round(x: float) -> float:
    return round(float(x), 4)


def explain_row(
    fused: Fused,
    i: int,
    rank: int,
    terms: list[str],
    prev_terms: list[str],
    speaker_name: str,
) -> dict[str, Any]:
    """Why pool row `i` ranked `rank` (1-based): the sides, their context parts, and the boosts applied."""
    row = int(fused.pool[i])
    vector_part, keyword_part = fused.part(i)
    semantic: dict[str, Any] = {"rank": fused.side_rank(fused.near, row), "cosine": _round(fused.cos[i])}
    if not np.isnan(fused.prev_cos[i]):
        semantic["previous_turn"] = _round(fused.prev_cos[i])
    if not np.isnan(fused.next_cos[i]):
        semantic["next_turn"] = _round(fused.next_cos[i])
    semantic["part"] = _round(vector_part)
    keyword: dict[str, Any] = {"rank": fused.side_rank(fused.words, row), "bm25": _round(fused.bm[i]), "terms": terms}
    if fused.prev_bm[i] > 0:
        keyword["previous_turn"] = {"bm25": _round(fused.prev_bm[i]), "terms": prev_terms}
    keyword["part"] = _round(keyword_part)
    boosts: dict[str, Any] = {}
    if fused.speaker[i]:
        boosts["speaker"] = {"name": speaker_name, "value": SPEAKER_BOOST}
    if fused.window[i]:
        boosts["time_window"] = TIME_WINDOW_BOOST
    if fused.when[i]:
        boosts["when"] = WHEN_BOOST
    out: dict[str, Any] = {"rank": rank, "fused": _round(fused.score[i]), "semantic": semantic, "keyword": keyword}
    if boosts:
        out["boosts"] = boosts
    return out


def describe_query(terms: list[str], a: QueryAnalysis) -> dict[str, Any]:
    """The query side of an explanation: its index terms and what the boosts look for."""
    return {
        "terms": terms,
        "speakers": a.speakers,
        "when": a.when,
        "windows": [w.to_dict() for w in a.windows],
        "fusion": f"convex: {VECTOR_WEIGHT} semantic + {round(1 - VECTOR_WEIGHT, 2)} keyword, each side's best "
        f"{DEPTH}, with the previous/next turn as context",
    }
