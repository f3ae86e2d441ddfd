"""benchmarks/lab/windows.py: time windows, the timeline expansion and the rule-based fact line (issue 28).

Pure functions: tested on hand-made rankings and turns (their worth on the conversation sets is in
benchmarks/README.md, "Retrieval III").
"""

from __future__ import annotations

import pytest

from benchmarks.lab.multipart import Turn
from benchmarks.lab.windows import fact_line, is_timeline_question, spread, window_scores, windows_first


def _at(minute: int, day: int = 1) -> str:
    return f"2024-03-{day:02d}T12:{minute:02d}:00"


def _keys(turns: list[Turn]) -> list[str]:
    return [t.key for t in turns]


def test_a_window_is_scored_by_the_other_ranked_turns_said_near_it():
    ranking = [Turn("a", 1.0, "S1", _at(0)), Turn("b", 0.5, "S1", _at(2)), Turn("c", 0.9, "S2", _at(0, day=9))]
    assert window_scores(ranking, span=180, best_of=2) == [0.5, 1.0, 0.0]


def test_the_turns_of_the_best_window_move_up_and_a_lone_turn_does_not():
    ranking = [
        Turn("lone", 1.0, "S2", _at(0, day=9)),
        Turn("a", 0.95, "S1", _at(0)),
        Turn("b", 0.9, "S1", _at(2)),
        Turn("far", 0.85, "S1", _at(30)),
    ]
    assert _keys(windows_first(ranking, span=180, windows=1, weight=0.2)) == ["a", "b", "lone", "far"]
    assert _keys(windows_first(ranking, span=180, windows=1, weight=0.0)) == ["lone", "a", "b", "far"]


@pytest.mark.parametrize(
    ("query", "timeline"),
    [
        ("How did Aiko's commute change between the first and the last time it came up?", True),
        ("How has Tom's running progressed?", True),
        ("What car does Maya drive now?", False),
    ],
)
def test_timeline_questions(query, timeline):
    assert is_timeline_question(query) is timeline


def test_spread_places_the_earliest_latest_and_a_middle_mention_one_per_session():
    ranking = [Turn(k, 1.0 - i / 10, "S9", _at(i)) for i, k in enumerate("abcdef")]
    mentions = [
        Turn("m2", 0.9, "S2", _at(0, day=5)),
        Turn("m1", 0.8, "S1", _at(0, day=1)),
        Turn("m1b", 0.7, "S1", _at(1, day=1)),
        Turn("m3", 0.6, "S3", _at(0, day=9)),
    ]
    assert _keys(spread(ranking, mentions, most=3, at=2, k=4)) == ["a", "b", "m1", "m3", "m2", "c", "d", "e", "f"]


def test_a_mention_already_in_the_top_k_is_not_moved():
    ranking = [Turn("a", 1.0, "S1", _at(0)), Turn("b", 0.5, "S2", _at(0, day=3))]
    assert _keys(spread(ranking, [ranking[1]], most=3, at=0, k=2)) == ["a", "b"]


def test_the_fact_line_keeps_statements_in_the_third_person_and_the_question_answered():
    line = fact_line("Awful. My commute is 90 minutes now! Can you believe it?", "Aiko", "How is the commute?")
    assert line == "Aiko, asked how is the commute: Awful. Aiko's commute is 90 minutes now!"


def test_a_turn_of_questions_and_fillers_has_no_fact_line():
    assert fact_line("Haha. Yes! How was the wedding?", "Bram") is None
