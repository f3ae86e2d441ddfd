"""The ranking pieces of benchmarks/lab/retrieval_lab.py: query analysis, BM25 variants, and the fused ranking.

Everything here works on plain numpy arrays over one candidate set (a conversation, or the quality set), the way
the store's search path sees its candidates after the filters: the turn vectors, the BM25 scores of the rows, and
the per-row fields the catalog will hold (speaker code, previous-turn row, occurred_at as a day number, a "carries
time words" flag). `rank()` is the recommended ranking and its rejected alternatives, selected by a `Config`; the
store's own hybrid ranking (KeywordIndex + RRF of each side's top 20) is reproduced in retrieval_lab.py with the
public building blocks, and `Config()` (fusion "rrf", depth 20, ties by row) is PostgreSQL's ranking (the store's
at the time of issue 15) with only the keyword tie order made deterministic.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta

import numpy as np

from memserver.retrieval.terms import tokenize
from memserver.retrieval.timewords import TIME_WORDS, is_when

__all__ = [
    "TIME_WORDS",
    "Bm25",
    "Config",
    "Corpus",
    "Query",
    "analyse",
    "is_when",
    "named_speakers",
    "rank",
    "replace",
    "top_k",
]

DEEP = 50  # ranking depth returned (MRR looks this deep)

# --- query analysis ------------------------------------------------------------------------------------------------

_MONTHS = [m.lower() for m in calendar.month_name[1:]]
_MONTH_RE = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_MONTH_NUMBER = {m[:3]: i for i, m in enumerate(_MONTHS, 1)}
_DAY_RE = r"(\d{1,2})(?:st|nd|rd|th)?"
_WEEKDAYS = [d.lower() for d in calendar.day_name]
# The glued date terms the keyword index already matches (a copy of keyword._date_terms; the lab's BM25 is
# checked against KeywordIndex on every question, which checks this copy too).
_DATE_PATTERNS = (
    (re.compile(_DAY_RE + r"\s+(?:of\s+)?" + _MONTH_RE + r"\b(?:,?\s+(\d{4}))?"), (1, 2, 3)),
    (re.compile(_MONTH_RE + r"\b\s+" + _DAY_RE + r"\b(?:,?\s+(\d{4}))?"), (2, 1, 3)),
    (re.compile(_MONTH_RE + r"\b,?\s+(\d{4})"), (0, 1, 2)),
    (re.compile(r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b"), (1, 2, 3)),
)
# "When" questions and the time words of memories: the store's own (memserver.retrieval.timewords, ported from here).
_YEAR_RE = re.compile(r"\b((?:19|20)\d\d)\b")
_MONTH_YEAR_RE = re.compile(_MONTH_RE + r"\b(?:\s+(?:of\s+)?((?:19|20)\d\d))?", re.IGNORECASE)
_BETWEEN_RE = re.compile(
    r"\bbetween\s+" + _MONTH_RE + r"\b(?:\s+((?:19|20)\d\d))?\s+and\s+" + _MONTH_RE + r"\b(?:\s+((?:19|20)\d\d))?",
    re.IGNORECASE,
)
_RELATIVE_RE = re.compile(
    r"\b(?:(yesterday)|(last|this) (week|month|year|weekend)|(\d+|a|one|two|three|four|five|six) (day|week|month)s? ago"
    rf"|last ({'|'.join(_WEEKDAYS)}))\b",
    re.IGNORECASE,
)
_NUMBER_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}


def query_date_terms(query: str) -> list[str]:
    """The glued date terms of the dates a query names (see keyword.date_text)."""
    lower = query.lower()
    out: list[str] = []
    for pattern, (day_group, month_group, year_group) in _DATE_PATTERNS:
        for match in pattern.finditer(lower):
            month_text = match.group(month_group)
            month = int(month_text) if month_text.isdigit() else _MONTH_NUMBER[month_text[:3]]
            day = int(match.group(day_group)) if day_group else 0
            year = match.group(year_group)
            if not 1 <= month <= 12 or day > 31:
                continue
            if day and year:
                out.append(f"{year}{month:02d}{day:02d}")
            if year:
                out.append(f"{year}{month:02d}")
            if day:
                out.append(f"{_MONTHS[month - 1]}{day}")
    return out


def day_number(when: date | datetime) -> float:
    """Days since 1970-01-01 (the lab's occurred_at column; the store keeps the ISO text and can derive it)."""
    if isinstance(when, datetime):
        return (when - datetime(1970, 1, 1, tzinfo=when.tzinfo)).total_seconds() / 86400
    return float((when - date(1970, 1, 1)).days)


def _month_span(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def time_windows(query: str, now: datetime) -> list[tuple[float, float, bool]]:
    """The periods a query names, as (first day, last day, month-of-any-year) in day numbers.

    A named day, a month (with or without a year), a year, "between <month> and <month> <year>"; relative times
    ("yesterday", "last week", "three weeks ago", "last Tuesday") resolve against `now`, the time of the question
    (or the as_of the caller gives): "last Tuesday" in a query means the Tuesday before the question, not before
    each memory. A month without a year matches that month in any year (flag True; the caller tests month-of-year).
    """
    out: list[tuple[float, float, bool]] = []
    lower = query.lower()
    taken: list[tuple[int, int]] = []
    for m in _BETWEEN_RE.finditer(lower):
        y2 = int(m.group(4) or m.group(2) or now.year)
        y1 = int(m.group(2) or y2)
        a, b = _MONTH_NUMBER[m.group(1)[:3]], _MONTH_NUMBER[m.group(3)[:3]]
        out.append((day_number(_month_span(y1, a)[0]), day_number(_month_span(y2, b)[1]), False))
        taken.append(m.span())
    for pattern, (day_group, month_group, year_group) in _DATE_PATTERNS[:2]:
        for m in pattern.finditer(lower):
            if any(a <= m.start() < b for a, b in taken) or not m.group(year_group):
                continue
            month = _MONTH_NUMBER[m.group(month_group)[:3]]
            try:
                d = date(int(m.group(year_group)), month, int(m.group(day_group)))
            except ValueError:
                continue
            out.append((day_number(d), day_number(d), False))
            taken.append(m.span())
    for m in _MONTH_YEAR_RE.finditer(lower):
        if any(a <= m.start() < b for a, b in taken):
            continue
        word = m.group(1)
        if word == "may" and not m.group(2) and "May" not in query[m.start() : m.end()]:
            continue  # "may" the verb
        month = _MONTH_NUMBER[word[:3]]
        if len(word) == 3 and word not in ("may",) and not m.group(2):
            continue  # "mar", "jan" alone: too ambiguous without a year
        if m.group(2):
            lo, hi = _month_span(int(m.group(2)), month)
            out.append((day_number(lo), day_number(hi), False))
        else:
            out.append((float(month), float(month), True))
        taken.append(m.span())
    for m in _YEAR_RE.finditer(lower):
        if any(a <= m.start() < b for a, b in taken):
            continue
        year = int(m.group(1))
        out.append((day_number(date(year, 1, 1)), day_number(date(year, 12, 31)), False))
    today = now.date()
    for m in _RELATIVE_RE.finditer(lower):
        if m.group(1):
            d = today - timedelta(days=1)
            out.append((day_number(d), day_number(d), False))
        elif m.group(2):
            unit, shift = m.group(3), 1 if m.group(2) == "last" else 0
            if unit in ("week", "weekend"):
                start = today - timedelta(days=today.weekday() + 7 * shift)
                out.append((day_number(start), day_number(start + timedelta(days=6)), False))
            elif unit == "month":
                y, mo = (today.year, today.month - shift) if today.month > shift else (today.year - 1, 12)
                lo, hi = _month_span(y, mo)
                out.append((day_number(lo), day_number(hi), False))
            else:
                y = today.year - shift
                out.append((day_number(date(y, 1, 1)), day_number(date(y, 12, 31)), False))
        elif m.group(4):
            n = int(m.group(4)) if m.group(4).isdigit() else _NUMBER_WORDS[m.group(4)]
            days = {"day": 1, "week": 7, "month": 30}[m.group(5)] * n
            centre = today - timedelta(days=days)
            spread = max(1, days // 7)
            out.append(
                (day_number(centre - timedelta(days=spread)), day_number(centre + timedelta(days=spread)), False)
            )
        elif m.group(6):
            back = (today.weekday() - _WEEKDAYS.index(m.group(6))) % 7 or 7
            d = today - timedelta(days=back)
            out.append((day_number(d), day_number(d), False))
    return out


def named_speakers(query: str, speakers: Sequence[str]) -> list[int]:
    """Indexes of the speakers a query names: whole name, case-insensitive, possessive or not ("Maya's", "Maya’s")."""
    out = []
    for i, name in enumerate(speakers):
        if name and re.search(rf"(?<!\w){re.escape(name)}(?:['’]s?)?(?!\w)", query, re.IGNORECASE):
            out.append(i)
    return out


# --- BM25 ----------------------------------------------------------------------------------------------------------

_Stemmer = Callable[[list[str]], list[str]]


def stemmer(name: str) -> _Stemmer | None:
    """A Snowball stemmer (PyStemmer) applied to the index's terms, or None. Terms with digits stay as they are."""
    if not name:
        return None
    try:
        import Stemmer  # PyStemmer: `uv run --with PyStemmer` for the lab
    except ImportError:
        raise SystemExit("the stemming variants need PyStemmer: uv run --with PyStemmer python ...") from None

    stem = Stemmer.Stemmer(name)
    cache: dict[str, str] = {}

    def apply(words: list[str]) -> list[str]:
        out = []
        for w in words:
            s = cache.get(w)
            if s is None:
                s = cache[w] = stem.stemWord(w) if w.isalpha() else w
            out.append(s)
        return out

    return apply


class Bm25:
    """BM25 (BM25F when given extra fields) over a small corpus, dense: every row's score for a query.

    Same scoring as memserver.local.keyword.KeywordIndex (idf log(1 + (N - df + 0.5) / (df + 0.5)), query terms
    distinct, lengths in indexed terms); fields combine as BM25F: tf and length are the weighted sums over fields.
    """

    def __init__(
        self,
        fields: Sequence[Sequence[list[str]]],
        weights: Sequence[float],
        *,
        k1: float = 1.2,
        b: float = 0.75,
    ) -> None:
        self.k1, self.b = k1, b
        self.vocab: dict[str, int] = {}
        n = len(fields[0])
        rows: list[np.ndarray] = []
        cols: list[np.ndarray] = []
        vals: list[np.ndarray] = []
        length = np.zeros(n)
        for docs, w in zip(fields, weights, strict=True):
            if not w:
                continue
            for i, terms in enumerate(docs):
                ids = np.fromiter((self.vocab.setdefault(t, len(self.vocab)) for t in terms), np.int64, len(terms))
                rows.append(np.full(len(ids), i))
                cols.append(ids)
                vals.append(np.full(len(ids), w))
                length[i] += w * len(ids)
        self.tf = np.zeros((n, len(self.vocab)), np.float64)
        if rows:
            np.add.at(self.tf, (np.concatenate(rows), np.concatenate(cols)), np.concatenate(vals))
        self.df = np.count_nonzero(self.tf[:, :], axis=0)
        avg = length.mean() if n and length.sum() > 0 else 1.0
        self.norm = k1 * (1.0 - b + b * length / avg)
        self.idf = np.log(1.0 + (n - self.df + 0.5) / (self.df + 0.5))

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        ids = list(dict.fromkeys(self.vocab[t] for t in terms if t in self.vocab))
        if not ids:
            return np.zeros(self.tf.shape[0])
        tf = self.tf[:, ids]
        return ((self.idf[ids] * (self.k1 + 1.0)) * tf / (tf + self.norm[:, None])).sum(axis=1)

    def matched(self, terms: Sequence[str], row: int) -> list[str]:
        """The query terms that matched a row (for explain)."""
        return [t for t in dict.fromkeys(terms) if t in self.vocab and self.tf[row, self.vocab[t]] > 0]


# --- the corpus and the ranking --------------------------------------------------------------------------------------


@dataclass
class Corpus:
    """One candidate set as the search path sees it (the rows of one conversation, or the quality set)."""

    name: str
    texts: list[str]  # memory content
    vectors: np.ndarray  # (n, d) float32, unit rows
    created: list[str]  # created_at / occurred_at, ISO text (same here)
    occurred: np.ndarray  # occurred_at as day numbers (float64)
    speaker: np.ndarray  # speaker code per row (index into speakers), -1 = none
    speakers: list[str]
    prev: np.ndarray  # row of the previous turn of the same session, -1 = none
    timeword: np.ndarray  # bool: the content carries time words
    now: datetime  # the time of the questions
    extra_vectors: dict[str, np.ndarray] = field(default_factory=dict)  # "dated", "joint": second keys
    index_texts: list[str] = field(default_factory=list)  # what the keyword index holds (content + date words)
    _bm25: dict[tuple[object, ...], Bm25] = field(default_factory=dict)
    _terms: dict[tuple[str, str], list[list[str]]] = field(default_factory=dict)

    def terms(self, stem: str, which: str = "index") -> list[list[str]]:
        key = (stem, which)
        if key not in self._terms:
            texts = {"index": self.index_texts, "prev": self._prev_texts(), "speaker": self._speaker_texts()}[which]
            s = stemmer(stem)
            toks = [tokenize(t) for t in texts]
            self._terms[key] = [s(t) for t in toks] if s else toks
        return self._terms[key]

    def _prev_texts(self) -> list[str]:
        return [self.texts[p] if p >= 0 else "" for p in self.prev.tolist()]

    def _speaker_texts(self) -> list[str]:
        return [self.speakers[c] if c >= 0 else "" for c in self.speaker.tolist()]

    def bm25(self, cfg: Config) -> Bm25:
        key = (cfg.stem, cfg.k1, cfg.b, cfg.field_prev, cfg.field_speaker)
        if key not in self._bm25:
            fields = [self.terms(cfg.stem)]
            weights = [1.0]
            if cfg.field_prev:
                fields.append(self.terms(cfg.stem, "prev"))
                weights.append(cfg.field_prev)
            if cfg.field_speaker:
                fields.append(self.terms(cfg.stem, "speaker"))
                weights.append(cfg.field_speaker)
            self._bm25[key] = Bm25(fields, weights, k1=cfg.k1, b=cfg.b)
        return self._bm25[key]


@dataclass(frozen=True)
class Query:
    text: str
    vector: np.ndarray


@dataclass(frozen=True)
class Config:
    """One ranking. Defaults: PostgreSQL's ranking (RRF of each side's top 20, k 60, recency 0.1) with ties by row."""

    name: str = "rrf"
    fusion: str = "rrf"  # "rrf" | "convex"
    depth: int = 20  # candidates taken from each side (0: every candidate row)
    rrf_k: int = 60
    weight: float = 0.5  # convex: weight of the vector side (1 - weight: keyword)
    norm: str = "minmax"  # convex: "minmax" (cosine min-max over the pool, BM25 / max) | "max" (both / max)
    recency: float = 0.1  # rrf: weight of the newest-first ranking; convex: weight of the pool's time position
    tie_newest: bool = False  # keyword ties before the cut: newest row first (default oldest first)
    k1: float = 1.2
    b: float = 0.75
    stem: str = ""  # "" (today's S-stemmer only) | "english" | "porter" (Snowball, PyStemmer)
    field_prev: float = 0.0  # BM25F weight of the previous turn's words
    field_speaker: float = 0.0  # BM25F weight of the speaker's name as a field
    speaker: float = 0.0  # boost: the row's speaker is named in the query
    when: float = 0.0  # boost: "when" question and the row carries time words
    window: float = 0.0  # boost: the row's occurred_at falls in a period the query names
    window_after: float = 31.0  # days after a named period that still count (people talk about it afterwards)
    prev_vec: float = 0.0  # vector side: + prev_vec x cosine of the previous turn
    prev_kw: float = 0.0  # keyword side: + prev_kw x BM25 of the previous turn
    next_vec: float = 0.0  # vector side: + next_vec x cosine of the next turn
    prf: float = 0.0  # Rocchio: q + prf x mean of the top prf_m vectors of the first pass
    prf_m: int = 3
    second_key: str = ""  # "dated" | "joint": take the better cosine of the plain and the second vector
    boost_sides: bool = False  # apply the boosts to each side before its cut (else to the fused score only)
    pool_sim: bool = False  # vector candidates as an HNSW path finds them: own-cosine top D plus their next turns


def top_k(scores: np.ndarray, k: int, *, newest_first: bool = False) -> np.ndarray:
    """Indexes of the k best scores, best first, ties by index (ascending, or descending with newest_first).

    The deterministic cut proposed for KeywordIndex.search: argpartition finds the k-th score, then every index
    above it is kept and the tied ones are taken in index order, so the top k is always the first k of the full
    order (score desc, index) and a recall's first results never depend on `limit`.
    """
    n = len(scores)
    if k >= n:
        order = np.lexsort((-np.arange(n) if newest_first else np.arange(n), -scores))
        return order
    kth = np.partition(-scores, k - 1)[k - 1]
    above = np.flatnonzero(-scores < kth)
    tied = np.flatnonzero(-scores == kth)
    if newest_first:
        tied = tied[::-1]
    chosen = np.concatenate([above, tied[: k - len(above)]])
    sub = np.lexsort((-chosen if newest_first else chosen, -scores[chosen]))
    return chosen[sub]


@dataclass
class Analysed:
    """What a query carries beyond its text: named speakers, a when-question, the periods it names."""

    terms: list[str]
    speakers: list[int]
    when: bool
    windows: list[tuple[float, float, bool]]


def analyse(corpus: Corpus, text: str, stem: str) -> Analysed:
    terms = tokenize(text) + query_date_terms(text)
    s = stemmer(stem)
    return Analysed(
        terms=s(terms) if s else terms,
        speakers=named_speakers(text, corpus.speakers),
        when=is_when(text),
        windows=time_windows(text, corpus.now),
    )


def _in_windows(corpus: Corpus, windows: list[tuple[float, float, bool]], after: float) -> np.ndarray:
    hit = np.zeros(len(corpus.texts), bool)
    for lo, hi, any_year in windows:
        if any_year:
            months = np.array([int(c[5:7]) for c in corpus.created])
            hit |= months == int(lo)
        else:
            hit |= (corpus.occurred >= lo) & (corpus.occurred < hi + 1 + after)
    return hit


def _gather(values: np.ndarray, link: np.ndarray) -> np.ndarray:
    """values[link] where link >= 0, else 0 (the previous/next turn's score)."""
    out = np.zeros_like(values)
    ok = link >= 0
    out[ok] = values[link[ok]]
    return out


def boosts(cfg: Config, corpus: Corpus, a: Analysed) -> np.ndarray:
    """The additive boosts per row, in units of the fused score (convex: [0, 1]; RRF: one list's first rank)."""
    out = np.zeros(len(corpus.texts))
    if cfg.speaker and a.speakers:
        out += cfg.speaker * np.isin(corpus.speaker, a.speakers)
    if cfg.when and a.when:
        out += cfg.when * corpus.timeword
    if cfg.window and a.windows:
        out += cfg.window * _in_windows(corpus, a.windows, cfg.window_after)
    return out


def side_scores(cfg: Config, corpus: Corpus, q: np.ndarray, a: Analysed) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(vector side, keyword side, plain cosine) of every candidate row, context terms included."""
    cos = np.einsum("ij,j->i", corpus.vectors, q)
    if cfg.second_key:
        cos = np.maximum(cos, np.einsum("ij,j->i", corpus.extra_vectors[cfg.second_key], q))
    vec = cos
    if cfg.prev_vec:
        vec = vec + cfg.prev_vec * _gather(cos, corpus.prev)
    if cfg.next_vec:
        nxt = np.full(len(cos), -1)
        has = corpus.prev >= 0
        nxt[corpus.prev[has]] = np.flatnonzero(has)
        vec = vec + cfg.next_vec * _gather(cos, nxt)
    bm = corpus.bm25(cfg).scores(a.terms)
    kw = bm + cfg.prev_kw * _gather(bm, corpus.prev) if cfg.prev_kw else bm
    return vec.astype(np.float64), kw, cos


def rank(cfg: Config, corpus: Corpus, query: Query, a: Analysed | None = None) -> list[int]:
    """The first DEEP rows of the ranking `cfg` describes, best first."""
    a = a or analyse(corpus, query.text, cfg.stem)
    order = _rank_once(cfg, corpus, query.vector, a)
    if cfg.prf:
        top = order[: cfg.prf_m]
        q2 = query.vector + cfg.prf * corpus.vectors[top].mean(axis=0)
        q2 = (q2 / np.linalg.norm(q2)).astype(np.float32)
        order = _rank_once(cfg, corpus, q2, a)
    return order


def _rank_once(cfg: Config, corpus: Corpus, q: np.ndarray, a: Analysed) -> list[int]:
    vec, kw, cos = side_scores(cfg, corpus, q, a)
    boost = boosts(cfg, corpus, a)
    if cfg.boost_sides:
        vec = vec + boost * (vec.max() - vec.min()) if len(vec) else vec
        kw = kw + boost * kw.max() * (kw > 0) if len(kw) and kw.max() > 0 else kw
    n = len(vec)
    matched = np.flatnonzero(kw > 0)

    def pools(depth: int) -> tuple[np.ndarray, np.ndarray]:
        d = n if depth <= 0 else depth
        if cfg.pool_sim and d < n:
            found = top_k(cos, d)  # what an index over the turn vectors returns
            after = np.flatnonzero(np.isin(corpus.prev, found))  # the turns that follow them
            cand = np.union1d(found, after)
            near = cand[top_k(vec[cand], min(d, len(cand)))]
        else:
            near = top_k(vec, min(d, n))
        words = matched[top_k(kw[matched], min(d, len(matched)), newest_first=cfg.tie_newest)]
        return near, words

    if cfg.fusion == "rrf":
        head = _rrf(cfg, corpus, *pools(cfg.depth), boost)
        if len(head) < DEEP and (cfg.depth <= 0 or cfg.depth < DEEP):
            seen = set(head)
            head += [r for r in _rrf(cfg, corpus, *pools(max(DEEP, cfg.depth)), boost) if r not in seen]
        return head[:DEEP]
    head = _convex(cfg, corpus, vec, kw, *pools(cfg.depth), boost)
    if len(head) < DEEP and 0 < cfg.depth < DEEP:
        seen = set(head)
        head += [r for r in _convex(cfg, corpus, vec, kw, *pools(DEEP), boost) if r not in seen]
    return head[:DEEP]


def _rrf(cfg: Config, corpus: Corpus, near: np.ndarray, words: np.ndarray, boost: np.ndarray) -> list[int]:
    fused: dict[int, float] = {}
    for ranking, weight in ((near, 1.0), (words, 1.0)):
        for r, row in enumerate(ranking.tolist(), 1):
            fused[row] = fused.get(row, 0.0) + weight / (cfg.rrf_k + r)
    if cfg.recency:
        pool = list(fused)
        for r, row in enumerate(sorted(pool, key=corpus.created.__getitem__, reverse=True), 1):
            fused[row] += cfg.recency / (cfg.rrf_k + r)
    unit = 1.0 / (cfg.rrf_k + 1)
    if not cfg.boost_sides:
        for row in fused:
            fused[row] += unit * boost[row]
    return [row for row, _ in sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))]


def _convex(
    cfg: Config,
    corpus: Corpus,
    vec: np.ndarray,
    kw: np.ndarray,
    near: np.ndarray,
    words: np.ndarray,
    boost: np.ndarray,
) -> list[int]:
    pool = np.unique(np.concatenate([near, words]))
    v, k = vec[pool], kw[pool]
    if cfg.norm == "minmax":
        span = v.max() - v.min()
        nv = (v - v.min()) / span if span > 0 else np.ones_like(v)
    else:
        nv = v / v.max() if v.max() > 0 else v
    nk = k / k.max() if k.max() > 0 else k
    score = cfg.weight * nv + (1.0 - cfg.weight) * nk
    if not cfg.boost_sides:
        score = score + boost[pool]
    if cfg.recency:
        t = corpus.occurred[pool]
        span_t = t.max() - t.min()
        score = score + cfg.recency * ((t - t.min()) / span_t if span_t > 0 else 0.0)
    order = np.lexsort((pool, -score))
    return pool[order].tolist()
