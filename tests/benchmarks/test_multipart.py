"""benchmarks/lab/multipart.py: the re-rankings issue 28 measured for questions spread over several sessions.

Pure functions of a ranking: tested on hand-made rankings (their worth on the conversation sets is in
benchmarks/README.md, "Retrieval III"; the harness rows that apply them: tests/benchmarks/).
"""

from __future__ import annotations

import json

import pytest

from benchmarks.lab.multipart import (
    Turn,
    add_extremes,
    boost_sessions,
    cap_per_session,
    change_subject,
    is_multi_part,
    named_entities,
    session_scores,
    two_stage,
)


def _ranking(*spec: tuple[str, float, str, str]) -> list[Turn]:
    return [Turn(*s) for s in spec]


def _keys(turns: list[Turn]) -> list[str]:
    return [t.key for t in turns]


@pytest.mark.parametrize(
    ("query", "several"),
    [
        ("What do Aiko and Bram have in common?", True),
        ("Which two cities did Aiko travel to for work?", True),
        ("Tell me everything about Maya's dog Pickle.", True),
        ("What presents did Tom and Maya get?", True),
        ("Where does Maya live now?", False),
        ("How many driving tests did Maya take?", False),
    ],
)
def test_multi_part_questions_name_several_entities_or_ask_for_several_things(query, several):
    assert is_multi_part(query) is several


def test_named_entities_skip_the_first_word_and_question_words_and_strip_possessives():
    assert named_entities("Where did Ines's father and Kwame go? How did Kwame") == ["Ines", "Kwame"]


def test_the_cap_holds_back_a_sessions_extra_turns_until_after_the_top_k():
    ranking = _ranking(("a", 5, "S1", ""), ("b", 4, "S1", ""), ("c", 3, "S1", ""), ("d", 2, "S2", ""), ("e", 1, "", ""))
    assert _keys(cap_per_session(ranking, cap=2, k=3)) == ["a", "b", "d", "c", "e"]
    assert _keys(cap_per_session(ranking, cap=5, k=3)) == ["a", "b", "c", "d", "e"]


def test_two_stage_lifts_the_turns_of_the_best_sessions():
    ranking = _ranking(("a", 1.0, "S1", ""), ("b", 0.95, "S2", ""), ("c", 0.9, "S1", ""), ("d", 0.5, "S3", ""))
    assert session_scores(ranking) == {"S1": 1.0, "S2": 0.95, "S3": 0.5}
    assert session_scores(ranking, best_of=2) == {"S1": 1.9, "S2": 0.95, "S3": 0.5}
    lifted = two_stage(ranking, sessions=1, weight=0.1)
    assert _keys(lifted) == ["a", "c", "b", "d"] and lifted[0].score == pytest.approx(1.1)
    assert _keys(two_stage(ranking, sessions=1, weight=0.0)) == _keys(ranking)  # ties keep the order


def test_session_boost_by_min_max_of_given_session_scores():
    ranking = _ranking(("a", 1.0, "S1", ""), ("b", 0.99, "S2", ""), ("c", 0.98, "S3", ""))
    out = boost_sessions(ranking, {"S1": 0.2, "S2": 0.3, "S3": 0.4}, sessions=2, weight=0.1)
    assert _keys(out) == ["c", "b", "a"]  # S3 gains 0.1, S2 0.05, S1 (lowest) nothing
    assert _keys(boost_sessions(ranking, {}, sessions=2, weight=0.1)) == ["a", "b", "c"]


@pytest.mark.parametrize(
    ("query", "owner", "subject"),
    [
        ("How did Aiko's commute change between the first and the last time?", False, "commute"),
        ("How did Aiko's commute change between the first and the last time?", True, "Aiko's commute"),
        ("How did Juno's vet visits change between the first and last time?", False, "vet visits"),
        ("How did Dev's Kickstarter go?", False, "Kickstarter"),
        ("Where does Maya live now?", False, None),
    ],
)
def test_change_questions_name_their_subject(query, owner, subject):
    assert change_subject(query, owner=owner) == subject


def test_the_earliest_and_latest_mentions_join_the_top_k():
    ranking = _ranking(*((k, 1.0, "S", "") for k in "abcdef"))
    mentions = _ranking(("m2", 3, "S2", "2024-05-01"), ("m1", 2, "S1", "2024-01-01"), ("m3", 1, "S3", "2024-09-01"))
    assert _keys(add_extremes(ranking, mentions, at=2, k=4)) == ["a", "b", "m1", "m3", "c", "d", "e", "f"]
    first, last = ("m1", 1, "S1", "2024-01-01"), ("m3", 1, "S3", "2024-09-01")
    already = _ranking(first, *((k, 1.0, "S", "") for k in "abc"), last)
    assert _keys(add_extremes(already, mentions, at=2, k=3)) == ["m1", "a", "m3", "b", "c"]  # m1 stays, m3 moves up
    assert add_extremes(ranking, [], at=2, k=4) == ranking


def test_the_leave_one_set_out_verdicts_of_the_recorded_run_keep_nothing(tmp_path, capsys):
    from benchmarks.lab import multipart_options

    out = tmp_path / "verdicts.json"
    assert multipart_options.main(["--out", str(out)]) == 0
    families = json.loads(out.read_text())["families"]
    assert set(families) == set(multipart_options.FAMILIES)
    assert not any(f["kept"] for f in families.values())
    assert "rejected" in capsys.readouterr().out
