"""Display cells (cli/tables.py): what a terminal gives a character, and cutting to a width without splitting one."""

from __future__ import annotations

import pytest

from memserver.cli.tables import cells, cut, pad


@pytest.mark.parametrize(
    ("text", "width"),
    [("abc", 3), ("東京", 4), ("😀", 2), ("cafe\u0301", 4), ("한국어", 6), ("ｱ", 1), ("", 0)],
)
def test_cells_count_wide_characters_twice_and_combining_marks_not_at_all(text: str, width: int) -> None:
    assert cells(text) == width


def test_cut_ends_with_an_ellipsis_inside_the_width() -> None:
    assert cut("東京のホテル", 7) == "東京の…"  # 6 cells + the ellipsis; a fourth wide character would be 9
    assert cells(cut("東京のホテル", 8)) <= 8
    assert cut("short", 10) == "short" and cut("long text", None) == "long text"
    assert cut("cafe\u0301 au lait", 6) == "cafe\u0301 …"  # the mark stays with its letter
    assert pad("東京", 6) == "東京  " and cells(pad("東京のホテル", 5)) == 5
