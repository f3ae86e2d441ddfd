"""benchmarks/conversations.py without the model: scoring, the memories it writes, and the hybrid+fields switch.

The full run (real model, every set) is benchmarks/README.md's "Conversations"; its --quick smoke run is in
tests/benchmarks/test_benchmarks_smoke.py. Here the fake embedder keeps it fast, and a store that keeps the
conversation fields (what issue 12 adds) stands in for the future one, so the hybrid+fields row is tested before
that store exists.
"""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from benchmarks import conversations
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder


def _conversation() -> dict[str, Any]:
    turn = lambda n, who, text, **extra: {"id": f"S{n[0]}:{n[1]}", "speaker": who, "text": text, **extra}  # noqa: E731
    return {
        "id": "tiny-1",
        "set": "tiny",
        "speakers": ["Maya", "Tom"],
        "sessions": [
            {
                "id": "S1",
                "date": "2024-03-08T18:40:00",
                "turns": [
                    turn((1, 1), "Maya", "Guess who finally got a dog!"),
                    turn((1, 2), "Tom", "No way, what breed?"),
                    turn((1, 3), "Maya", "A wire-haired terrier from the shelter", image="a small brown terrier"),
                ],
            },
            {
                "id": "S2",
                "date": "2024-03-22T09:00:00",
                "turns": [
                    turn((2, 1), "Tom", "How is the terrier settling in?"),
                    turn((2, 2), "Maya", "She sleeps on the sofa all day"),
                ],
            },
        ],
        "questions": [
            {"id": "q1", "type": "single", "question": "What breed is the dog?", "answer": "-", "evidence": ["S1:3"]},
            {
                "id": "q2",
                "type": "multi",
                "question": "Where does the terrier sleep?",
                "answer": "-",
                "evidence": ["S1:3", "S2:2"],
            },
        ],
    }


def test_rank_metrics():
    m = conversations.rank_metrics(["a", "b", "c", "d", "e", "f", "g"], {"c", "g", "z"})
    assert m == {"recall@5": 1 / 3, "recall@10": 2 / 3, "mrr": 1 / 3, "ev@10": 2 / 3, "all@10": 0.0, "first_rank": 3}
    assert conversations.rank_metrics(["a"], {"b"})["mrr"] == 0.0
    assert conversations.rank_metrics([*"abcdefghij", "k"], {"b", "j"})["all@10"] == 1.0
    assert conversations.rank_metrics([*"abcdefghij", "k"], {"b", "k"})["all@10"] == 0.0  # 11th is out


def test_turn_rows_write_the_held_out_convention_and_place_turns_in_time():
    rows = conversations.turn_rows(_conversation())
    assert rows[2]["plain"] == "Maya: A wire-haired terrier from the shelter [image: a small brown terrier]"
    assert rows[2]["dated"] == "[8 March 2024] " + rows[2]["plain"]
    assert [r["at"] for r in rows[:3]] == ["2024-03-08T18:40:00", "2024-03-08T18:41:00", "2024-03-08T18:42:00"]
    assert rows[3]["session"] == "tiny-1/S2" and rows[3]["speaker"] == "Tom"
    assert len({r["id"] for r in rows}) == len(rows)


class FieldStore(MemoryStore):
    """A store that keeps speaker/session/occurred_at/namespace (issue 12's fields), built on the public API."""

    imported: ClassVar[list[dict[str, Any]]] = []
    searched: ClassVar[list[dict[str, Any]]] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields: dict[str, dict[str, Any]] = {}

    def import_(self, records):  # type: ignore[no-untyped-def]
        plain = []
        for r in records:
            FieldStore.imported.append(dict(r))
            self.fields[r["id"]] = {f: r[f] for f in conversations.FIELDS if f in r}
            plain.append({k: v for k, v in r.items() if k not in conversations.FIELDS})
        return super().import_(plain)

    def get(self, memory_id):  # type: ignore[no-untyped-def]
        memory = super().get(memory_id)
        if memory is None:
            return None
        extra = self.fields.get(memory_id, {})

        class WithFields:
            id = memory.id

            def to_dict(self) -> dict[str, Any]:
                return {**memory.to_dict(), **extra}

        return WithFields()

    def search(self, query, limit=5, tags=None, mode="hybrid", namespace=None):  # type: ignore[no-untyped-def,override]
        FieldStore.searched.append({"namespace": namespace, "mode": mode, "tags": tags})
        return super().search(query, limit=limit, tags=tags, mode=mode)


@pytest.fixture
def field_store():
    FieldStore.imported.clear()
    FieldStore.searched.clear()
    return FieldStore


def test_today_the_store_keeps_no_conversation_fields_so_the_fields_row_is_na(tmp_path):
    embedder = FakeEmbedder()
    fields = conversations.probe_fields(embedder)
    result = conversations.evaluate_set(
        "tiny", [_conversation()], embedder, tmp_path, ["hybrid", "hybrid+fields"], fields
    )
    if fields:  # issue 12 has landed: the row runs
        assert result["variants"]["hybrid+fields"]["available"]
    else:
        assert result["variants"]["hybrid+fields"] == {
            "available": False,
            "why": "the store does not keep speaker/session/...",
        }
    assert result["variants"]["hybrid"]["available"]


def test_a_store_that_keeps_the_fields_gets_them_and_the_row_runs(tmp_path, field_store):
    embedder = FakeEmbedder()
    fields = conversations.probe_fields(embedder, field_store)
    assert fields == conversations.FIELDS
    field_store.imported.clear()
    result = conversations.evaluate_set(
        "tiny", [_conversation()], embedder, tmp_path, list(conversations.VARIANTS), fields, field_store
    )
    assert all(v["available"] for v in result["variants"].values())
    with_fields = [r for r in field_store.imported if "speaker" in r]
    assert len(with_fields) == 5  # one conversation of five turns, imported once with its fields
    first = next(r for r in with_fields if r["content"].startswith("Maya: A wire-haired"))
    assert first["speaker"] == "Maya" and first["session"] == "tiny-1/S1" and first["namespace"] == "tiny-1"
    assert first["occurred_at"] == "2024-03-08T18:42:00" and "created_at" not in first  # stored at import time
    assert any(r["content"].startswith("[22 March 2024] Tom: ") for r in field_store.imported)  # hybrid+date
    namespaced = [s for s in field_store.searched if s["namespace"] == "tiny-1"]
    assert namespaced and all(s["tags"] == ["tiny-1"] for s in field_store.searched)
    assert {s["mode"] for s in field_store.searched} == {"hybrid", "semantic", "keyword"}


def test_scores_and_latency_are_reported_per_type(tmp_path):
    result = conversations.evaluate_set("tiny", [_conversation()], FakeEmbedder(), tmp_path, ["semantic"], ())
    semantic = result["variants"]["semantic"]
    assert semantic["overall"]["recall@10"] == 100.0  # five memories: all of them are in a recall of 10
    assert set(semantic["by_type"]) == {"single", "multi"} and semantic["by_type"]["multi"]["n"] == 1
    assert semantic["memories_imported"] == 5 and semantic["search_ms"]["n"] == 2
    assert semantic["per_question"]["tiny-1/q1"][0] >= 1  # rank of the first evidence turn


def test_turn_vectors_are_cached(tmp_path):
    embedder = FakeEmbedder()
    texts = ["Maya: hello", "Tom: hi"]
    _, first = conversations.cached_vectors(tmp_path, embedder, texts, query=False)
    calls = embedder.calls
    again, second = conversations.cached_vectors(tmp_path, embedder, texts, query=False)
    assert first is not None and second is None and embedder.calls == calls and again.shape == (2, 384)


def _shaped() -> dict[str, Any]:
    """The tiny conversation padded to 14 turns, with a which_two question whose second turn is one of the last."""
    conv = _conversation()
    session = conv["sessions"][1]
    for k in range(3, 12):
        session["turns"].append({"id": f"S2:{k}", "speaker": "Tom", "text": f"Filler number {k} about the weather"})
    conv["questions"].append(
        {
            "id": "q3",
            "type": "multi",
            "shape": "which_two",
            "question": "Which two things did Maya say about the terrier?",
            "answer": "-",
            "evidence": ["S1:3", "S2:2"],
        }
    )
    return conv


def test_every_figure_is_reported_per_type_and_per_shape(tmp_path):
    result = conversations.evaluate_set("tiny", [_shaped()], FakeEmbedder(), tmp_path, ["semantic"], ())
    semantic = result["variants"]["semantic"]
    figures = {"n", *conversations.METRICS}
    assert set(semantic["by_shape"]) == {"which_two"} and set(semantic["by_shape"]["which_two"]) == figures
    assert set(semantic["by_type"]["multi"]) == figures and semantic["by_type"]["multi"]["n"] == 2  # q2 and q3
    for part in (semantic["overall"], *semantic["by_type"].values(), *semantic["by_shape"].values()):
        assert part["ev@10"] == part["recall@10"] and 0 <= part["all@10"] <= part["ev@10"] <= 100
    rows = conversations.breakdown(semantic)
    assert [r[0] for r in rows] == ["single", "multi", "shape which_two", "all"]
    assert rows[-1][1] == 3 and len(rows[2]) == 2 + len(conversations.METRICS)


def test_all_at_10_is_the_share_of_questions_with_every_evidence_turn_in_the_top_10(tmp_path):
    result = conversations.evaluate_set("tiny", [_shaped()], FakeEmbedder(), tmp_path, ["keyword"], ())
    keyword = result["variants"]["keyword"]
    per = keyword["per_question"]
    complete = [q for q, (_, r10) in per.items() if r10 == 1.0]
    assert keyword["overall"]["all@10"] == round(100 * len(complete) / len(per), 1)


def test_the_issue_28_options_are_rows_of_their_own_beside_hybrid_fields(tmp_path):
    embedder = FakeEmbedder()
    fields = conversations.probe_fields(embedder)
    assert fields == conversations.FIELDS  # the store keeps them (issue 12)
    options = (*conversations.OPTION_VARIANTS, *conversations.ENTITY_VARIANTS, *conversations.WINDOW_VARIANTS)
    rows = ["hybrid+fields", *options]
    result = conversations.evaluate_set("tiny", [_conversation()], embedder, tmp_path, rows, fields)
    assert list(result["variants"]) == rows and all(result["variants"][v]["available"] for v in rows)
    base = result["variants"]["hybrid+fields"]
    for v in options:  # five turns: every option keeps them all in the top 10
        assert result["variants"][v]["overall"]["recall@10"] == base["overall"]["recall@10"] == 100.0
