"""Issue 28's last three ranking ideas: time windows, a timeline expansion, and a per-turn fact line.

- time windows: a window is the run of turns said within `span` seconds of a turn (by occurred_at alone, so it
  needs no session field and cuts a session into parts: turns one minute apart, sessions six or more days apart
  in the sets). Each ranked turn's window is scored by the best `best_of` other ranked turns inside it; the turns
  of the best `windows` windows gain `weight` x (window score / the best window's), and the ranking is re-sorted:
  windows ranked first, turns within them next, fused with today's scores.
- timeline expansion ("how did X change", "between the first and the last", "over time"): the mentions of X (a
  hybrid search of X, which also finds paraphrases by their vector) reduced to the best one per session, and up
  to `most` of them, spread over time (earliest, latest, then the middle), placed from position `at` on.
- fact line (the sampling fact line's best case, simulated by rule since no client offers sampling): per turn,
  its stated facts in the third person ("Tom ran his first 5k in 34 minutes"), its questions and fillers dropped,
  and, for a reply to a question, the question it answers ("Aiko, asked how the commute is: awful, 90 minutes").

Measured as opt-in rows of benchmarks/conversations.py and judged leave-one-set-out by multipart_options.py
(benchmarks/README.md, "Retrieval III").
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Sequence
from datetime import datetime

from benchmarks.lab.entities import speaker_statement
from benchmarks.lab.multipart import Turn

__all__ = ["fact_line", "is_timeline_question", "spread", "window_scores", "windows_first"]


def _seconds(at: str) -> float:
    return datetime.fromisoformat(at).timestamp()


def window_scores(ranking: Sequence[Turn], span: float, best_of: int) -> list[float]:
    """For each turn of `ranking`, the sum of the `best_of` best scores of the other ranked turns said within
    `span` seconds of it (0 for a turn without occurred_at)."""
    dated = sorted((_seconds(t.at), i) for i, t in enumerate(ranking) if t.at)
    times = [s for s, _ in dated]
    out = [0.0] * len(ranking)
    for s, i in dated:
        near = [ranking[j].score for _, j in dated[bisect_left(times, s - span) : bisect_right(times, s + span)]]
        near.remove(ranking[i].score)
        out[i] = sum(sorted(near, reverse=True)[:best_of])
    return out


def windows_first(ranking: Sequence[Turn], span: float, windows: int, weight: float, best_of: int = 2) -> list[Turn]:
    """`ranking` re-sorted after the turns of its `windows` best windows (window_scores, distinct windows: a turn
    within `span` of a better window's turn belongs to it) gain `weight` x (window score / the best one's)."""
    scores = window_scores(ranking, span, best_of)
    order = sorted(range(len(ranking)), key=lambda i: -scores[i])
    centres: list[tuple[float, float]] = []  # (time, score) of each window chosen
    for i in order:
        if len(centres) >= windows or scores[i] <= 0 or not ranking[i].at:
            break
        s = _seconds(ranking[i].at)
        if all(abs(s - c) > span for c, _ in centres):
            centres.append((s, scores[i]))
    if not centres:
        return list(ranking)
    best = centres[0][1]
    rescored = []
    for i, turn in enumerate(ranking):
        gain = 0.0
        if turn.at:
            s = _seconds(turn.at)
            gain = max((weight * v / best for c, v in centres if abs(s - c) <= span), default=0.0)
        rescored.append((turn.score + gain, -i, turn))
    rescored.sort(key=lambda t: (t[0], t[1]), reverse=True)
    return [Turn(t.key, score, t.session, t.at) for score, _, t in rescored]


_TIMELINE = re.compile(
    r"\bhow (?:did|has|have|do|does) .+? (?:change|changed|progress|progressed|fare|develop|evolve|go)\b"
    r"|\bbetween the first and the last\b|\bover (?:time|the (?:months|year|years))\b",
    re.IGNORECASE,
)


def is_timeline_question(query: str) -> bool:
    """Whether `query` asks how something went over time."""
    return _TIMELINE.search(query) is not None


def spread(ranking: Sequence[Turn], mentions: Sequence[Turn], most: int, at: int, k: int) -> list[Turn]:
    """`ranking` with up to `most` of `mentions` (the best per session, chosen earliest, latest, then middle ones)
    placed from position `at` on, unless already in its first `k`."""
    best: dict[str, Turn] = {}
    for m in mentions:
        if m.at:
            best.setdefault(m.session or m.key, m)
    timeline = sorted(best.values(), key=lambda m: m.at)
    picked: list[Turn] = []
    while timeline and len(picked) < most:
        picked.append(timeline.pop(0 if len(picked) % 2 == 0 else -1))
    head = {t.key for t in ranking[:k]}
    extra = [m for m in picked if m.key not in head]
    if not extra:
        return list(ranking)
    keys = {m.key for m in extra}
    rest = [t for t in ranking if t.key not in keys]
    return rest[:at] + extra + rest[at:]


_SENTENCE = re.compile(r"[^.!?]+[.!?]*")
_FILLER = re.compile(
    r"^\s*(?:ha+|haha\w*|oh|ooh|wow|yes|yeah|yep|no|nope|ok|okay|thanks|thank you|cheers|lol|aw+|omg|right|sure)"
    r"\W*$",
    re.IGNORECASE,
)


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SENTENCE.findall(text) if s.strip()]


def fact_line(text: str, speaker: str, previous: str | None = None) -> str | None:
    """The rule-based fact line of a turn (`text`: its words without `Speaker:`; `previous`: the turn before, by
    another speaker), or None when it states nothing: its statements (not questions or fillers) in the third
    person, prefixed with the question of `previous` it answers."""
    facts = []
    for sentence in _sentences(text):
        if sentence.endswith("?") or _FILLER.match(sentence):
            continue
        facts.append(speaker_statement(sentence, speaker) or sentence)
    if not facts:
        return None
    asked = [s for s in _sentences(previous or "") if s.endswith("?")]
    question = asked[-1][:-1].strip() if asked else ""
    opener = f"{speaker}, asked {question[:1].lower()}{question[1:]}:" if asked else f"{speaker}:"
    return f"{opener} {' '.join(facts)}"
