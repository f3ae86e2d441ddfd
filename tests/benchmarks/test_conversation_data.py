"""The conversation evaluation sets (benchmarks/data/conversations/<set>/*.json): format, evidence, sanity bounds.

Every set found is checked the same way. The statistics that make a set realistic (who speaks the evidence,
images, time words; benchmarks/lab/conversation-sets.md) are printed by `benchmarks/conversations.py --stats`
(and by a failing test below); here only loose bounds are asserted, so that a set that has drifted far from the
format fails, not one that differs from another in the second decimal.
"""

from __future__ import annotations

import copy
import importlib.util
import itertools
import json
import re
from collections import Counter
from datetime import datetime

import pytest

from benchmarks import convdata

SETS = convdata.load()
FILES = sorted(convdata.DATA_DIR.glob("*/*.json"))
CONVERSATIONS = [(name, conv) for name, convs in SETS.items() for conv in convs]
IDS = [conv["id"] for _, conv in CONVERSATIONS]
_DATED_ANSWER = re.compile(
    r"\b(Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday),? (\d{1,2})(?:st|nd|rd|th)? "
    r"(January|February|March|April|May|June|July|August|September|October|November|December),? (\d{4})"
)


def test_the_harbour_set_is_there_with_a_group_chat():
    convs = SETS["harbour"]
    assert len(convs) >= 3
    assert any(len(c["speakers"]) >= 3 for c in convs)


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_each_file_is_named_after_its_conversation(path):
    conv = json.loads(path.read_text(encoding="utf-8"))
    assert (conv["set"], conv["id"]) == (path.parent.name, path.stem)


def test_conversation_ids_are_unique_across_sets():
    assert len(IDS) == len(set(IDS))


@pytest.mark.parametrize(("name", "conv"), CONVERSATIONS, ids=IDS)
def test_conversation_follows_the_format(name, conv):
    """ids, types, speakers among `speakers`, ISO dates ascending, sequential turn ids, evidence ids that exist."""
    assert convdata.problems(conv, name) == []


@pytest.mark.parametrize(("name", "conv"), CONVERSATIONS, ids=IDS)
def test_conversation_sizes(name, conv):
    """20-35 sessions weeks apart over many months, 10-30 turns each, 40-70 questions."""
    assert 20 <= len(conv["sessions"]) <= 35
    assert all(10 <= len(s["turns"]) <= 30 for s in conv["sessions"])
    assert 40 <= len(conv["questions"]) <= 70
    dates = [datetime.fromisoformat(s["date"]) for s in conv["sessions"]]
    assert all((b - a).days >= 1 for a, b in itertools.pairwise(dates))  # days to weeks apart
    assert (dates[-1] - dates[0]).days >= 180  # many months


@pytest.mark.parametrize(("name", "conv"), CONVERSATIONS, ids=IDS)
def test_evidence_counts_fit_the_question_types(name, conv):
    for q in conv["questions"]:
        low, high = convdata.evidence_count(q)
        assert low <= len(q["evidence"]) <= high, (q["id"], q["type"], q.get("shape"), q["evidence"])


@pytest.mark.parametrize(("name", "conv"), CONVERSATIONS, ids=IDS)
def test_every_conversation_asks_every_new_shape(name, conv):
    assert {q.get("shape") for q in conv["questions"]} >= set(convdata.SHAPES)


@pytest.mark.parametrize("name", sorted(SETS))
def test_every_set_asks_each_shape_seven_times(name):
    """Issue 28 reports R@10 per shape and set: fewer than seven questions make a shape's figure one question's luck."""
    shapes = Counter(q.get("shape") for conv in SETS[name] for q in conv["questions"])
    assert all(shapes[shape] >= 7 for shape in convdata.SHAPES), shapes


@pytest.mark.parametrize(("name", "conv"), CONVERSATIONS, ids=IDS)
def test_shaped_questions_quote_what_each_evidence_turn_says(name, conv):
    """Their evidence is spread over sessions, so each turn's part is quoted (problems() checks the quote is there)."""
    assert [q["id"] for q in conv["questions"] if q.get("shape") and not q.get("quotes")] == []


def _make_harbour():
    path = convdata.ROOT / "benchmarks" / "data" / "make_harbour.py"
    spec = importlib.util.spec_from_file_location("make_harbour", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("conv", SETS["harbour"], ids=[c["id"] for c in SETS["harbour"]])
def test_the_harbour_files_are_what_their_source_builds(conv):
    """harbour is written by make_harbour.py: a question added to the JSON alone would vanish at the next build."""
    assert _make_harbour().parse(convdata.ROOT / "benchmarks" / "data" / "harbour_src" / f"{conv['id']}.txt") == conv


_SOURCE = """id: tiny-1
speakers: Maya, Tom
== 2024-03-08T18:00
Maya: Guess who got a dog! {#dog}
Tom: Mine is called Rex. {#rex}
"""


def test_the_harbour_source_gives_a_question_its_shape_and_quotes(tmp_path):
    source = tmp_path / "tiny-1.txt"
    source.write_text(_SOURCE + "Q multi which_two | Which two dogs? | hers and Rex | #dog #rex | got a dog || Rex\n")
    (question,) = _make_harbour().parse(source)["questions"]
    assert question == {
        "id": "q1",
        "type": "multi",
        "shape": "which_two",
        "question": "Which two dogs?",
        "answer": "hers and Rex",
        "evidence": ["S1:1", "S1:2"],
        "quotes": ["got a dog", "Rex"],
    }


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("Q multi which_two | Which two? | both | #dog #rex | got a dog", "1 quotes for 2 evidence labels"),
        ("Q multi vibes | Which two? | both | #dog #rex", "unknown question type or shape 'multi vibes'"),
        ("Q multi | Which two? | both", "4 or 5 fields"),
    ],
)
def test_the_harbour_source_names_a_malformed_question(tmp_path, line, message):
    source = tmp_path / "tiny-1.txt"
    source.write_text(_SOURCE + line + "\n")
    with pytest.raises(ValueError, match=re.escape(message)):
        _make_harbour().parse(source)


@pytest.mark.parametrize(("name", "conv"), CONVERSATIONS, ids=IDS)
def test_no_two_turns_make_the_same_memory(name, conv):
    """The store keeps one memory per text, so a repeated `Speaker: text` would silently lose a turn."""
    assert convdata.duplicate_memories(conv) == []


@pytest.mark.parametrize(("name", "conv"), CONVERSATIONS, ids=IDS)
def test_dated_answers_name_the_right_weekday(name, conv):
    """An answer such as "Tuesday 5 March 2024" is checked against the calendar."""
    for q in conv["questions"]:
        for weekday, day, month, year in _DATED_ANSWER.findall(q["answer"]):
            when = datetime.strptime(f"{day} {month} {year}", "%d %B %Y").date()
            assert f"{when:%A}" == weekday, (q["id"], q["answer"])


@pytest.mark.parametrize("name", sorted(SETS))
def test_set_statistics_are_in_a_sane_range(name):
    """Loose bounds around the public benchmark's figures (benchmarks/lab/conversation-sets.md, "Statistics"): far
    off means broken.

    `benchmarks/conversations.py --stats` prints the figures; a failure here prints them too.
    """
    s = convdata.statistics(SETS[name])
    shown = "\n" + convdata.format_statistics({name: s})
    assert all(0.1 <= share <= 0.5 for share in s["type_share"].values()), shown
    assert s["evidence_by_named_speaker"] >= 0.8, shown
    assert s["evidence_naming_that_speaker"] <= 0.2, shown
    assert 0.1 <= s["image_share_all"] <= 0.4, shown
    assert s["image_share_evidence"] > s["image_share_all"], shown
    assert s["time_words_temporal_evidence"] >= 0.6, shown
    assert s["time_words_temporal_evidence"] > 2 * s["time_words_all"], shown
    assert s["evidence_after_question_turn"] > s["all_after_question_turn"], shown
    assert 0.05 <= s["questions_naming_month_or_year"] <= 0.3, shown
    assert s["question_words_in_evidence"]["single"] < 0.6, shown  # the questions are not copies of the turns


def _tiny() -> dict:
    return {
        "id": "tiny-1",
        "set": "tiny",
        "speakers": ["Maya", "Tom"],
        "sessions": [
            {
                "id": "S1",
                "date": "2024-03-08T18:00:00",
                "turns": [
                    {"id": "S1:1", "speaker": "Maya", "text": "Guess who got a dog!"},
                    {"id": "S1:2", "speaker": "Tom", "text": "No way!", "image": "a photo of a terrier"},
                ],
            },
            {
                "id": "S2",
                "date": "2024-03-22T18:00:00",
                "turns": [{"id": "S2:1", "speaker": "Tom", "text": "How is she?"}],
            },
        ],
        "questions": [{"id": "q1", "type": "single", "question": "What?", "answer": "A dog", "evidence": ["S1:1"]}],
    }


def test_a_well_formed_conversation_has_no_problems():
    assert convdata.problems(_tiny(), "tiny") == []


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        (lambda c: c["sessions"][0]["turns"][1].update(speaker="Sam"), "speaker 'Sam' is not among"),
        (lambda c: c["sessions"][0]["turns"][1].update(id="S1:3"), "expected 'S1:2'"),
        (lambda c: c["sessions"][1].update(date="2024-03-01T10:00:00"), "is not after the previous session"),
        (lambda c: c["sessions"][1].update(date="22/03/2024"), "is not ISO 8601"),
        (lambda c: c["sessions"][1].update(date="2024-03-22T18:00:00+01:00"), "has an offset"),
        (lambda c: c["sessions"][1].update(id="S3"), "expected 'S2'"),
        (lambda c: c["questions"][0].update(type="trivia"), "type 'trivia' is not one of"),
        (lambda c: c["questions"][0].update(shape="vibes"), "shape 'vibes' is not one of"),
        (lambda c: c["questions"][0].update(evidence=["S9:1"]), "evidence 'S9:1' is not a turn id"),
        (lambda c: c["questions"][0].update(evidence=[]), "non-empty list"),
        (lambda c: c["questions"].append(dict(c["questions"][0])), "question id used twice"),
        (lambda c: c.update(id="tiny_1"), "id should be <set>-<n>"),
        (lambda c: c["sessions"][0]["turns"][0].update(text=" "), "empty text"),
        (lambda c: c["sessions"][0]["turns"][0].update(picture="x"), "unknown keys ['picture']"),
        (lambda c: c["questions"][0].update(quotes=["a cat"]), "evidence S1:1 does not say 'a cat'"),
        (lambda c: c["questions"][0].update(quotes=["dog", "Tom"]), "one quote per evidence turn"),
    ],
)
def test_problems_names_each_defect(breakage, message):
    conv = copy.deepcopy(_tiny())
    breakage(conv)
    found = convdata.problems(conv, "tiny")
    assert any(message in p for p in found), found


def test_duplicate_memories_finds_a_repeated_turn():
    conv = _tiny()
    conv["sessions"][1]["turns"].append({"id": "S2:2", "speaker": "Maya", "text": "guess who got a  dog!"})
    assert convdata.duplicate_memories(conv) == ["S2:2"]


def test_statistics_count_what_they_say():
    conv = _tiny()
    conv["questions"] = [
        {"id": "q1", "type": "temporal", "question": "When did Maya get a dog?", "answer": "-", "evidence": ["S1:1"]},
        {"id": "q2", "type": "single", "question": "What did Tom send?", "answer": "-", "evidence": ["S1:2"]},
    ]
    conv["sessions"][0]["turns"][0]["text"] = "Guess who got a dog yesterday"
    s = convdata.statistics([conv])
    assert s["evidence_by_named_speaker"] == 1.0  # Maya's evidence is Maya's, Tom's is Tom's
    assert s["image_share_evidence"] == 0.5 and s["image_share_all"] == round(1 / 3, 3)
    assert s["time_words_temporal_evidence"] == 1.0 and s["time_words_all"] == round(1 / 3, 3)
    assert s["evidence_after_question_turn"] == 0.0 and s["all_after_question_turn"] == 0.0
    assert s["type_share"] == {"single": 0.5, "temporal": 0.5, "multi": 0.0, "open": 0.0}


@pytest.mark.parametrize(
    ("text", "timed"),
    [
        ("Picked her up last Saturday", True),
        ("See you in May!", True),
        ("you may be right", False),
        ("It was 2019, I think", True),
        ("a couple of weeks ago", True),
        ("The 29th, a Saturday.", True),
        ("Lovely to hear from you", False),
    ],
)
def test_time_words(text, timed):
    assert bool(convdata.TIME_WORDS.search(text)) is timed
