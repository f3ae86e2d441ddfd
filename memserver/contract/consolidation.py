"""Consolidation proposals over the contract (issue 24 item 4), the same for every engine: clusters of
near-duplicates within a namespace (cosine of the stored vectors plus shared words) to merge into one memory that
`replaces` them. Each proposal carries its evidence (scores, shared words) for a person to judge; nothing here writes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from memserver.contract.backend import MemoryBackend

# Cosine at or above which two memories of one namespace are candidate duplicates: the best F1 on the dev half of
# benchmarks/data/consolidation.json (benchmarks/consolidation.py; held-out precision 0.925, recall 0.892).
DUPLICATE_COSINE = 0.82
# Share of the shorter memory's words the two must share (Jaccard over content words) to count as duplicates.
MIN_WORD_OVERLAP = 0.3

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class MergeProposal:
    """Merge `ids` (oldest first) into one memory with `content`, which `replaces` the newest of them."""

    namespace: str
    ids: tuple[str, ...]
    content: str
    evidence: list[dict[str, Any]] = field(default_factory=list)


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2}


def propose_merges(
    store: MemoryBackend, *, namespace: str | None = None, threshold: float = DUPLICATE_COSINE
) -> list[MergeProposal]:
    """Near-duplicate clusters among the current memories of each namespace (single linkage over pairs that pass
    both the cosine threshold and the word overlap); the merged text is the longest member's (rule-based)."""
    current = [r for r in store.export(include_vectors=True, namespace=namespace) if not r.get("replaced_by")]
    import numpy as np  # here, not at the top: the server imports the contract on its start-up path

    vectors = np.asarray([r["vector"] for r in current], dtype=np.float32).reshape(len(current), -1)
    cosines = vectors @ vectors.T  # stored vectors are unit length
    parent = list(range(len(current)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    evidence: dict[int, list[dict[str, Any]]] = {}
    for i, a in enumerate(current):
        for j in range(i + 1, len(current)):
            b = current[j]
            if a.get("namespace", "default") != b.get("namespace", "default"):
                continue
            score = float(cosines[i, j])
            if score < threshold:
                continue
            wa, wb = _words(a["content"]), _words(b["content"])
            shared = wa & wb
            overlap = len(shared) / max(1, min(len(wa), len(wb)))
            if overlap < MIN_WORD_OVERLAP:
                continue
            parent[root(j)] = root(i)
            item = {"pair": [a["id"], b["id"]], "cosine": round(score, 4), "shared_words": sorted(shared)}
            evidence.setdefault(i, []).append(item)
    clusters: dict[int, list[int]] = {}
    for i in range(len(current)):
        clusters.setdefault(root(i), []).append(i)
    proposals = []
    for members in clusters.values():
        if len(members) < 2:
            continue
        records = [current[i] for i in members]
        proof = [e for i in members for e in evidence.get(i, [])]
        longest = max(records, key=lambda r: len(r["content"]))
        proposals.append(
            MergeProposal(
                namespace=records[0].get("namespace", "default"),
                ids=tuple(r["id"] for r in records),
                content=longest["content"],
                evidence=proof,
            )
        )
    return proposals
