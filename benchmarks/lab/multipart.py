"""Re-rankings for questions whose evidence is several turns in different sessions (issue 28, item 2).

Each is a pure function of a ranking that an engine already made (turns best first, with their fused score, session
and occurred_at), so both engines could apply it after their own fusion. They are measured as opt-in rows of
benchmarks/conversations.py (`hybrid+fields+<option>`). None was kept, so they live here and not in
memserver/retrieval/: what each was worth and why it failed, benchmarks/README.md, "Retrieval III"; the
leave-one-set-out verdicts, multipart_options.py.

- diversity: for a multi-part question (one that names several entities or asks which / both / all / everything /
  "in common"), at most `cap` turns of one session in the top k; the turns held back follow, in order.
- two-stage: sessions ranked by their best (or summed best three) turn scores, or by the cosine of the query to the
  session's mean turn vector; each turn of the best `sessions` gains `weight` times its session's normalised score,
  and the ranking is re-sorted.
- change expansion: for "how did X change" questions, the earliest and the latest turn that mention X (from a
  keyword search of X) are put into the top k.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import NamedTuple

__all__ = [
    "Turn",
    "add_extremes",
    "boost_sessions",
    "cap_per_session",
    "change_subject",
    "is_multi_part",
    "named_entities",
    "session_scores",
    "two_stage",
]


class Turn(NamedTuple):
    """One ranked turn: its key, the score its engine ordered it by, its session ("" for none) and occurred_at."""

    key: str
    score: float
    session: str
    at: str


_ASKS_SEVERAL = re.compile(r"\b(?:which|both|all|everything|in common)\b", re.IGNORECASE)
_CAPITALISED = re.compile(r"\b[A-Z][a-z]+(?:'s)?\b")
# Capitalised words that are not entities when they open a clause or are a title.
_NOT_NAMES = frozenset({"I", "How", "What", "Which", "Who", "Where", "When", "Why", "Did", "Does", "Do", "Is", "Was"})


def named_entities(query: str) -> list[str]:
    """The distinct capitalised words of `query` past its first word (names, places), possessives stripped."""
    words = [m.group(0).removesuffix("'s") for m in _CAPITALISED.finditer(query) if m.start() > 0]
    return list(dict.fromkeys(w for w in words if w not in _NOT_NAMES))


def is_multi_part(query: str) -> bool:
    """Whether `query` asks for several things at once: it names two or more entities, or asks which / both / all
    / everything / "in common"."""
    return _ASKS_SEVERAL.search(query) is not None or len(named_entities(query)) >= 2


def cap_per_session(ranking: Sequence[Turn], cap: int, k: int) -> list[Turn]:
    """`ranking` with at most `cap` turns of one session in its first `k`; the turns held back follow, in order.
    Turns without a session are never held back."""
    seen: Counter[str] = Counter()
    head: list[Turn] = []
    held: list[Turn] = []
    for turn in ranking:
        if len(head) < k and (not turn.session or seen[turn.session] < cap):
            head.append(turn)
            seen[turn.session] += 1
        else:
            held.append(turn)
    return head + held


def session_scores(ranking: Sequence[Turn], best_of: int = 1) -> dict[str, float]:
    """Each session's score: the sum of its `best_of` best turn scores in `ranking` (1: its best turn's)."""
    scores: dict[str, list[float]] = {}
    for turn in ranking:
        if turn.session:
            scores.setdefault(turn.session, []).append(turn.score)
    return {s: sum(sorted(v, reverse=True)[:best_of]) for s, v in scores.items()}


def two_stage(ranking: Sequence[Turn], sessions: int, weight: float, best_of: int = 1) -> list[Turn]:
    """`ranking` re-sorted after the turns of its `sessions` best sessions (by session_scores) gain `weight` x
    (their session's score / the best session's); ties keep the given order."""
    return boost_sessions(ranking, session_scores(ranking, best_of), sessions, weight, floor=0.0)


def boost_sessions(
    ranking: Sequence[Turn], scores: dict[str, float], sessions: int, weight: float, floor: float | None = None
) -> list[Turn]:
    """`ranking` re-sorted after the turns of the `sessions` best of `scores` (session -> score) gain `weight` x
    (score - floor) / (best - floor); floor None: the lowest score (min-max over every session scored)."""
    top = sorted(scores.items(), key=lambda kv: -kv[1])[:sessions]
    low = min(scores.values(), default=0.0) if floor is None else floor
    if not top or top[0][1] <= low:
        return list(ranking)
    gain = {s: weight * (v - low) / (top[0][1] - low) for s, v in top}
    rescored = [(turn.score + gain.get(turn.session, 0.0), -i, turn) for i, turn in enumerate(ranking)]
    rescored.sort(key=lambda t: (t[0], t[1]), reverse=True)
    return [Turn(t.key, score, t.session, t.at) for score, _, t in rescored]


_CHANGE = re.compile(
    r"\bhow (?:did|has|have|do|does) (?P<x>.+?) (?:change|changed|progress|progressed|fare|develop|evolve|go)\b",
    re.IGNORECASE,
)


_POSSESSIVE = re.compile(r"\b\w+'s?\b\s*")


def change_subject(query: str, owner: bool = False) -> str | None:
    """X of a "how did X change / progress / fare" question, else None; without its owner unless `owner` ("Aiko's
    commute": "commute"; the owner is often the speaker, whose name a keyword search finds in every turn of theirs,
    while a hybrid search boosts their turns)."""
    m = _CHANGE.search(query)
    if m is None:
        return None
    subject = m.group("x") if owner else _POSSESSIVE.sub("", m.group("x")).strip()
    return subject or None


def add_extremes(ranking: Sequence[Turn], mentions: Sequence[Turn], at: int, k: int) -> list[Turn]:
    """`ranking` with the earliest and the latest of `mentions` (by occurred_at, then given order) placed from
    position `at` on, unless already in its first `k`."""
    dated = [m for m in mentions if m.at]
    if not dated:
        return list(ranking)
    earliest = min(dated, key=lambda m: m.at)
    latest = max(reversed(dated), key=lambda m: m.at)
    head = {t.key for t in ranking[:k]}
    extra = [m for m in dict.fromkeys([earliest, latest]) if m.key not in head]
    if not extra:
        return list(ranking)
    keys = {m.key for m in extra}
    rest = [t for t in ranking if t.key not in keys]
    return rest[:at] + extra + rest[at:]
