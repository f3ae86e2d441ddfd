"""Consolidation (memserver.contract.consolidation) on every engine: near-duplicate clusters within a namespace and
stale statements, with their evidence, current memories only, nothing written by proposing; applying a proposal
writes new versions only (history keeps every member)."""

from __future__ import annotations

import pytest

from memserver.contract import consolidation
from memserver.contract.consolidation import propose_merges
from memserver.errors import InvalidInputError
from tests.contract.harness import BackendUnderTest

TOMATOES = "the garden tomatoes need water every morning before the heat"
TOMATOES_AGAIN = "the garden tomatoes need water every single morning before the heat"
TOMATOES_THIRD = "garden tomatoes need water every morning before the heat arrives"
DISTINCT = "the invoice for the roof repair is due on friday"


def test_restatements_form_one_cluster_with_evidence_and_distinct_facts_stay_out(backend: BackendUnderTest) -> None:
    store = backend.store
    ids = [store.add(text).id for text in (TOMATOES, TOMATOES_AGAIN, TOMATOES_THIRD)]
    distinct = store.add(DISTINCT).id
    proposals = propose_merges(store)
    assert len(proposals) == 1
    (proposal,) = proposals
    assert set(proposal.ids) == set(ids) and distinct not in proposal.ids
    assert proposal.content == max((TOMATOES, TOMATOES_AGAIN, TOMATOES_THIRD), key=len)
    assert proposal.evidence and all(e["cosine"] >= 0.82 and "tomatoes" in e["shared_words"] for e in proposal.evidence)
    assert {m for e in proposal.evidence for m in e["pair"]} == set(ids)
    assert store.stats()["count"] == 4  # proposing writes nothing


def test_a_higher_threshold_finds_fewer_and_namespaces_never_mix(backend: BackendUnderTest) -> None:
    store = backend.store
    store.add(TOMATOES)
    store.add(TOMATOES_AGAIN, namespace="work")
    assert propose_merges(store) == []  # the two restatements are in different namespaces
    store.add(TOMATOES_AGAIN)
    assert len(propose_merges(store, namespace="default")) == 1
    assert propose_merges(store, namespace="work") == []
    assert propose_merges(store, namespace="default", threshold=0.999) == []


def test_a_replaced_memory_is_not_proposed_again(backend: BackendUnderTest) -> None:
    store = backend.store
    old = store.add(TOMATOES)
    store.add(TOMATOES_AGAIN, replaces=old.id)
    assert propose_merges(store) == []  # the old version is history, not a duplicate


def test_a_later_statement_of_another_value_makes_the_older_one_stale(backend: BackendUnderTest) -> None:
    store = backend.store
    old = store.add("I live in Oslo.", speaker="Ana", occurred_at="2025-02-01")
    new = store.add("I live in Lisbon now.", speaker="Ana", occurred_at="2025-07-01")
    store.add("I live in Madrid now.", speaker="Ben", occurred_at="2025-08-01")  # another speaker: not Ana's update
    store.add("I am also allergic to cats.", speaker="Ana", occurred_at="2025-08-01")  # an addition
    store.add("I am allergic to pollen.", speaker="Ana", occurred_at="2025-01-01")
    (proposal,) = consolidation.propose_stale(store)
    assert (proposal.stale, proposal.newer) == (old.id, new.id)
    assert proposal.evidence["was"] == ["oslo"] and proposal.evidence["now"] == ["lisbon"]
    assert proposal.evidence["update_words"] == ["now"] and proposal.evidence["speaker"] == "Ana"
    assert proposal.to_dict()["action"] == "archive" and store.stats()["count"] == 5


def test_applying_a_stale_proposal_archives_the_older_statement_with_history(backend: BackendUnderTest) -> None:
    store = backend.store
    old = store.add("I live in Oslo.", speaker="Ana", occurred_at="2025-02-01")
    store.add("I live in Lisbon now.", speaker="Ana", occurred_at="2025-07-01")
    (proposal,) = consolidation.propose(store)
    (archived,) = consolidation.apply(store, proposal)
    assert archived.archived and archived.replaces == old.id and archived.content == old.content
    history = store.get(old.id)
    assert history is not None and history.replaced_by == archived.id
    assert consolidation.propose(store) == []  # an archived statement is out of the scan
    with pytest.raises(InvalidInputError, match="changed since the proposal"):
        consolidation.apply(store, proposal)


def test_applying_a_merge_leaves_one_current_memory_and_keeps_every_member_in_history(
    backend: BackendUnderTest,
) -> None:
    store = backend.store
    a = store.add(TOMATOES, tags=["garden"])
    b = store.add(TOMATOES_AGAIN, tags=["chores"])
    c = store.add(TOMATOES_THIRD)
    (proposal,) = consolidation.propose_merges(store)
    written = consolidation.apply(store, proposal, content="Water the garden tomatoes every morning before the heat.")
    merged = written[0]
    assert merged.content.startswith("Water the garden") and set(merged.tags) == {"garden", "chores"}
    assert {m.replaces for m in written} == {a.id, b.id, c.id}
    assert all(m.archived for m in written[1:]) and not merged.archived
    hits = store.search("tomatoes water morning", limit=10, min_score=0.0)
    assert [h.memory.id for h in hits] == [merged.id]  # the archived members are out of recall
    assert all(store.get(i) is not None for i in (a.id, b.id, c.id))  # history keeps them
    assert consolidation.find(consolidation.propose(store), proposal.id) is None


def test_a_merge_with_the_longest_text_replaces_that_member(backend: BackendUnderTest) -> None:
    store = backend.store
    ids = [store.add(t).id for t in (TOMATOES, TOMATOES_AGAIN, TOMATOES_THIRD)]
    (proposal,) = consolidation.propose_merges(store)
    merged, *others = consolidation.apply(store, proposal)
    assert merged.content == TOMATOES_AGAIN and merged.replaces == ids[1]
    assert sorted(m.replaces for m in others) == sorted((ids[0], ids[2]))
    with pytest.raises(InvalidInputError, match="empty"):
        consolidation.apply(store, proposal, content="  ")


def test_a_task_is_no_duplicate_of_a_note_and_a_merge_takes_the_newest_members_fields(
    backend: BackendUnderTest,
) -> None:
    store = backend.store
    store.add(TOMATOES, kind="task")
    store.add(TOMATOES_AGAIN)  # a note
    assert propose_merges(store) == []  # a task and a note never merge
    store.add(TOMATOES_THIRD, kind="task", source="garden.md", speaker="Ana", occurred_at="2026-01-01")
    older = store.add(TOMATOES + " soon", kind="task", source="old.md", speaker="Ana", occurred_at="2025-01-01")
    (proposal,) = [p for p in propose_merges(store) if older.id in p.ids]
    (merged, *_) = consolidation.apply(store, proposal)
    assert (merged.source, merged.occurred_at[:10], merged.kind) == ("garden.md", "2026-01-01", "task")
