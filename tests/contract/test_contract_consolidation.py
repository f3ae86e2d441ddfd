"""Near-duplicate merge proposals (memserver.contract.consolidation) on every engine: clusters within a namespace,
with their evidence, current memories only, and nothing written."""

from __future__ import annotations

from memserver.contract.consolidation import propose_merges
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
