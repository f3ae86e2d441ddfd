"""Time in queries and memories: the periods a query names, "when" questions, and texts that carry time words.

The hybrid ranking (hybrid_convex.py) turns these into two soft boosts, never filters: a memory whose occurred_at falls
in a period the query names ("in May 2024", "last Tuesday", "between March and June"), and, for a question whose
answer is a time ("When did Tom propose?"), a memory that mentions one ("a week on Friday", "in March", "10:30").
On the conversation sets, 84-94% of the turns answering a "when" question carry time words, against 16-21% of
all turns (benchmarks/lab/conversation-sets.md).

Relative times in a query resolve against the time of the question (`now`: the clock, or the search's as_of),
never against each memory: "last Tuesday" is the Tuesday before the question. A relative time inside a memory
("I signed it yesterday") is not resolved (that needs event times at ingest). Pure functions of the text.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta
from typing import NamedTuple

__all__ = ["TIME_WORDS", "Window", "is_when", "time_windows"]

_MONTHS = [m.lower() for m in calendar.month_name[1:]]
_WEEKDAYS = [d.lower() for d in calendar.day_name]
_MONTH_NUMBER = {m[:3]: i for i, m in enumerate(_MONTHS, 1)}
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DAY_MONTH_YEAR = re.compile(_DAY + r"\s+(?:of\s+)?" + _MONTH + r"\b,?\s+((?:19|20)\d\d)\b")
_MONTH_DAY_YEAR = re.compile(_MONTH + r"\b\s+" + _DAY + r"\b,?\s+((?:19|20)\d\d)\b")
_MONTH_YEAR = re.compile(_MONTH + r"\b(?:\s+(?:of\s+)?((?:19|20)\d\d))?", re.IGNORECASE)
_YEAR = re.compile(r"\b((?:19|20)\d\d)\b")
_BETWEEN = re.compile(
    r"\bbetween\s+" + _MONTH + r"\b(?:\s+((?:19|20)\d\d))?\s+and\s+" + _MONTH + r"\b(?:\s+((?:19|20)\d\d))?",
    re.IGNORECASE,
)
_RELATIVE = re.compile(
    r"\b(?:(yesterday)|(last|this) (week|month|year|weekend)|(\d+|a|one|two|three|four|five|six) (day|week|month)s? ago"
    rf"|last ({'|'.join(_WEEKDAYS)}))\b",
    re.IGNORECASE,
)
_NUMBER_WORDS = {"a": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6}

# "When ..." questions: the answer is a time.
_WHEN = re.compile(
    r"^\s*(?:when\b|what (?:date|day|time|year|month)\b|which (?:date|day|month|year)\b|how long ago\b|since when\b)",
    re.IGNORECASE,
)
# Time words in a memory: dates, months, weekdays, relative times, clock times, years, ordinals. "May" counts only
# capitalised (else every "may" the verb would).
_UNITS = r"day|days|week|weeks|month|months|year|years|fortnight|weekend|night|morning|evening|afternoon"
TIME_WORDS = re.compile(
    rf"\b(?:{'|'.join(_MONTHS[:4] + _MONTHS[5:])}|{'|'.join(_WEEKDAYS)})s?\b|\b(?-i:May)\b"
    r"|\b(?:yesterday|today|tonight|tomorrow|weekend|fortnight|ago|christmas|easter|new year)\b"
    rf"|\b(?:last|next|this|coming|following|same|on|by) (?:{_UNITS}|{'|'.join(_WEEKDAYS)})\b"
    rf"|\b(?:in|for|a|one|two|three|four|five|six|few|couple of) (?:{_UNITS})\b"
    r"|\b(?:19|20)\d\d\b|\b\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,2}[:.]\d\d\s*(?:am|pm)?\b|\b\d{1,2}\s*(?:am|pm)\b",
    re.IGNORECASE,
)


class Window(NamedTuple):
    """A period a query names: `first` to `last` (dates, inclusive), or with `any_year` the month of `first` in
    any year ("in May" without a year)."""

    first: date
    last: date
    any_year: bool = False

    def to_dict(self) -> dict[str, str]:
        if self.any_year:
            return {"month": calendar.month_name[self.first.month]}
        return {"from": self.first.isoformat(), "to": self.last.isoformat()}


def is_when(query: str) -> bool:
    """A question whose answer is a time ("When did ...", "What date ...", "How long ago ...")."""
    return bool(_WHEN.search(query))


def _month_span(year: int, month: int) -> tuple[date, date]:
    return date(year, month, 1), date(year, month, calendar.monthrange(year, month)[1])


def time_windows(query: str, today: date) -> list[Window]:
    """The periods `query` names: a day, a month (with or without a year), a year, "between <month> and <month>
    [year]", and relative times ("yesterday", "last week", "three weeks ago", "last Tuesday") resolved against
    `today`, the date of the question."""
    out: list[Window] = []
    lower = query.lower()
    taken: list[tuple[int, int]] = []

    def free(at: int) -> bool:
        return not any(a <= at < b for a, b in taken)

    for m in _BETWEEN.finditer(lower):
        y2 = int(m.group(4) or m.group(2) or today.year)
        y1 = int(m.group(2) or y2)
        a, b = _MONTH_NUMBER[m.group(1)[:3]], _MONTH_NUMBER[m.group(3)[:3]]
        out.append(Window(_month_span(y1, a)[0], _month_span(y2, b)[1]))
        taken.append(m.span())
    for pattern, (day_group, month_group, year_group) in ((_DAY_MONTH_YEAR, (1, 2, 3)), (_MONTH_DAY_YEAR, (2, 1, 3))):
        for m in pattern.finditer(lower):
            if not free(m.start()):
                continue
            try:
                d = date(int(m.group(year_group)), _MONTH_NUMBER[m.group(month_group)[:3]], int(m.group(day_group)))
            except ValueError:
                continue
            out.append(Window(d, d))
            taken.append(m.span())
    for m in _MONTH_YEAR.finditer(lower):
        if not free(m.start()):
            continue
        word, year = m.group(1), m.group(2)
        if word == "may" and not year and "May" not in query[m.start() : m.end()]:
            continue  # "may" the verb
        if len(word) == 3 and word != "may" and not year:
            continue  # "mar", "jan" alone: too ambiguous without a year
        month = _MONTH_NUMBER[word[:3]]
        if year:
            out.append(Window(*_month_span(int(year), month)))
        else:
            out.append(Window(date(2000, month, 1), date(2000, month, 1), any_year=True))
        taken.append(m.span())
    for m in _YEAR.finditer(lower):
        if free(m.start()):
            year = int(m.group(1))
            out.append(Window(date(year, 1, 1), date(year, 12, 31)))
    out += _relative(lower, today)
    return out


def _relative(lower: str, today: date) -> list[Window]:
    out: list[Window] = []
    for m in _RELATIVE.finditer(lower):
        if m.group(1):  # yesterday
            d = today - timedelta(days=1)
            out.append(Window(d, d))
        elif m.group(2):  # last / this week, weekend, month, year
            unit, shift = m.group(3), 1 if m.group(2) == "last" else 0
            if unit in ("week", "weekend"):
                start = today - timedelta(days=today.weekday() + 7 * shift)
                out.append(Window(start, start + timedelta(days=6)))
            elif unit == "month":
                y, mo = (today.year, today.month - shift) if today.month > shift else (today.year - 1, 12)
                out.append(Window(*_month_span(y, mo)))
            else:
                y = today.year - shift
                out.append(Window(date(y, 1, 1), date(y, 12, 31)))
        elif m.group(4):  # N days / weeks / months ago: around that day, wider the further back
            n = int(m.group(4)) if m.group(4).isdigit() else _NUMBER_WORDS[m.group(4)]
            days = {"day": 1, "week": 7, "month": 30}[m.group(5)] * n
            centre = today - timedelta(days=days)
            spread = timedelta(days=max(1, days // 7))
            out.append(Window(centre - spread, centre + spread))
        else:  # last <weekday>: the one before today
            back = (today.weekday() - _WEEKDAYS.index(m.group(6))) % 7 or 7
            d = today - timedelta(days=back)
            out.append(Window(d, d))
    return out
