"""benchmarks/lab/entities.py: entity-centred recall and speaker-statement keys (issue 28, item 2).

Pure functions: tested on hand-made turns and rankings (their worth on the conversation sets is in
benchmarks/README.md, "Retrieval III").
"""

from __future__ import annotations

from benchmarks.lab.entities import alias_table, mentioning, query_entities, reserve_per_entity, speaker_statement
from benchmarks.lab.multipart import Turn

TEXTS = [
    "Maya: We went to Porto with Rafael Silva. Rafael Silva loved it.",
    "Tom: Was Porto nice? Say hi to Rafael Silva for me.",
    "Maya: In May we took Pickle to the vet. The vet says Pickle is fine.",
    "Tom: Since then nothing.",
]


def test_the_alias_table_holds_speakers_repeated_names_and_first_names_but_not_sentence_openers_or_months():
    table = alias_table(TEXTS, ["Maya", "Tom"])
    assert table["maya"] == "Maya" and table["tom"] == "Tom"
    assert table["porto"] == "Porto" and table["pickle"] == "Pickle"
    assert table["rafael silva"] == "Rafael Silva" and table["rafael"] == "Rafael Silva"
    assert "since" not in table and "in" not in table and "may" not in table  # openers; a month


def test_a_question_names_the_entities_of_the_table_by_any_alias():
    table = alias_table(TEXTS, ["Maya", "Tom"])
    assert query_entities("What did Tom's friend Rafael think of Porto?", table) == ["Tom", "Rafael Silva", "Porto"]
    assert query_entities("What did they eat?", table) == []
    assert mentioning("Tom: say hi to Rafael for me", "Rafael Silva", table)
    assert mentioning("Tom: hi", "Tom", table) and not mentioning("Maya: hi", "Tom", table)


def _turns(*keys: str) -> list[Turn]:
    return [Turn(k, 1.0, "S", "") for k in keys]


def test_each_entity_gets_its_reserved_places_in_the_top_k_and_the_order_is_kept():
    ranking = _turns("a1", "a2", "a3", "x", "b1", "b2")
    candidates = {"A": _turns("a1", "a2", "a3"), "B": _turns("b1", "b2")}
    assert [t.key for t in reserve_per_entity(ranking, candidates, slots=1, k=3)] == ["a1", "a2", "b1", "a3", "x", "b2"]
    assert [t.key for t in reserve_per_entity(ranking, candidates, slots=2, k=4)] == ["a1", "a2", "b1", "b2", "a3", "x"]
    outside = {"A": _turns("a1"), "C": _turns("c9")}  # a candidate the ranking lacks comes last in the top k
    assert [t.key for t in reserve_per_entity(ranking, outside, slots=1, k=3)] == [
        "a1",
        "a2",
        "c9",
        "a3",
        "x",
        "b1",
        "b2",
    ]
    assert (
        reserve_per_entity(ranking, {"A": _turns("a1", "a2"), "B": _turns("b1")}, slots=2, k=2) == ranking
    )  # too many


def test_a_first_person_turn_is_rewritten_about_its_speaker_and_other_turns_are_not():
    assert speaker_statement("my sister moved to Leeds", "Aiko") == "Aiko's sister moved to Leeds"
    assert speaker_statement("I'm a V3 climber and I love it", "Bram") == "Bram is a V3 climber and Bram love it"
    assert speaker_statement("Tell me about it, I've been there", "Tom") == "Tell Tom about it, Tom has been there"
    assert speaker_statement("The weather was grim.", "Tom") is None
