"""Tables for a person at a terminal: memories as aligned rows that fit the terminal's width, one row per line.

Widths are measured in display cells, not characters: a CJK character or an emoji takes two cells, a combining mark
none (unicodedata.east_asian_width, unicodedata.combining). A row is never wrapped: the content is cut with … at the
terminal's edge. Output that goes to a pipe or a file (no terminal, no COLUMNS) keeps the full content.
"""

from __future__ import annotations

import os
import shutil
import sys
import unicodedata
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memserver.cli import ids, times

if TYPE_CHECKING:
    from memserver.contract.backend import Hit, Memory

MIN_CONTENT_WIDTH = 40  # what 80 columns leave for the content at least
WHO_WIDTH = 12  # at most; narrower when the speakers shown are shorter
WHEN_WIDTH = 16  # "2026-12-01 11:32"
SCORE_WIDTH = 5  # "0.773", "12.35"
SCORE_LABELS = {"hybrid": "FUSED", "semantic": "COS", "keyword": "BM25"}  # what orders a search of each mode
GAP = "  "


def cells(text: str) -> int:
    """The display cells `text` takes on a terminal: 2 for wide (CJK, emoji), 0 for combining marks, else 1."""
    return sum(_cell(ch) for ch in text)


def _cell(ch: str) -> int:
    if unicodedata.combining(ch) or unicodedata.category(ch) in ("Mn", "Me", "Cf"):
        return 0
    return 2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1


def cut(text: str, width: int | None) -> str:
    """`text` in at most `width` cells (None: all of it), ending with … when cut."""
    if width is None or cells(text) <= width:
        return text
    out, used = [], 0
    for ch in text:
        w = _cell(ch)
        if used + w > width - 1:
            break
        out.append(ch)
        used += w
    return "".join(out) + "…"


def pad(text: str, width: int) -> str:
    """`text` cut to `width` cells and padded with spaces to exactly that many."""
    shown = cut(text, width)
    return shown + " " * (width - cells(shown))


def terminal_width() -> int | None:
    """The width to fit: the terminal's (or COLUMNS, when set), or None when writing to a pipe or a file."""
    if "COLUMNS" in os.environ or sys.stdout.isatty():
        return shutil.get_terminal_size((100, 24)).columns
    return None


class Table:
    """Memories as aligned columns: ID (8 characters: any unique prefix of 4 or more is accepted back), [the score,]
    WHEN (occurred_at, in the local zone unless `utc`), WHO, then the tags (#tag) and the content, cut with … at the
    terminal's edge. `mode`: the rows are search results of that mode, and the score column is the number they are
    ordered by (Hit.rank_score), labelled with what it is: FUSED (hybrid), COS (the cosine), BM25 (keyword)."""

    def __init__(
        self,
        *,
        mode: str | None = None,
        utc: bool = False,
        width: int | None = None,
        fit: bool = True,
        sample: Sequence[Memory] = (),
    ) -> None:
        self.mode = mode
        self.utc = utc
        self.width = width if width is not None or not fit else terminal_width()
        whos = [cells(_who(m)) for m in sample]
        self.who_width = max(3, min(WHO_WIDTH, max(whos, default=WHO_WIDTH)))
        if self.width is not None:  # narrow terminals: the speaker column gives way first
            short = MIN_CONTENT_WIDTH - (self.width - self._fixed())
            if short > 0:
                self.who_width = max(3, self.who_width - short)

    def _fixed(self) -> int:
        columns = [ids.SHORT, WHEN_WIDTH, self.who_width] + ([SCORE_WIDTH] if self.mode else [])
        return sum(columns) + len(GAP) * len(columns)

    def render(self, items: Sequence[Memory | Hit]) -> str:
        return "\n".join([self.header(), *(self.row(item) for item in items)])

    def header(self) -> str:
        label = SCORE_LABELS.get(self.mode or "", "SCORE")
        return self._line("ID", label, f"WHEN ({times.zone_name(self.utc)})", "WHO", "TAGS, CONTENT")

    def row(self, item: Memory | Hit) -> str:
        from memserver.contract.backend import Hit

        memory, score = (item.memory, _score(item.rank_score)) if isinstance(item, Hit) else (item, "")
        text = " ".join([*(f"#{tag}" for tag in memory.tags), *memory.content.split()])
        when = times.when(memory.occurred_at, utc=self.utc)
        return self._line(ids.short(memory.id), score, when, _who(memory), text)

    def _line(self, memory_id: str, score: str, when: str, who: str, text: str) -> str:
        parts = [pad(memory_id, ids.SHORT)]
        if self.mode:
            parts.append(" " * (SCORE_WIDTH - cells(score)) + score)
        parts += [pad(when, WHEN_WIDTH), pad(who, self.who_width)]
        room = None if self.width is None else max(MIN_CONTENT_WIDTH, self.width - self._fixed())
        parts.append(cut(text, room))
        return GAP.join(parts).rstrip()


def _score(value: float) -> str:
    """Five characters: 0.773, 12.35, 123.4."""
    return f"{value:.3f}" if abs(value) < 10 else f"{value:.4g}"[:SCORE_WIDTH]


def _who(memory: Memory) -> str:
    return memory.speaker or memory.role or "-"


def aligned(rows: Sequence[Sequence[str]], *, right: Sequence[int] = ()) -> str:
    """Rows of cells as aligned columns (the columns numbered in `right` aligned right), the last one not padded."""
    widths = [max(cells(row[i]) for row in rows) for i in range(len(rows[0]))] if rows else []
    lines = []
    for row in rows:
        parts = []
        for i, cell in enumerate(row):
            fill = " " * (widths[i] - cells(cell))
            parts.append(fill + cell if i in right else cell + ("" if i == len(row) - 1 else fill))
        lines.append(GAP.join(parts).rstrip())
    return "\n".join(lines)
