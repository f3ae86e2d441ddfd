"""Consolidation over the contract (issue 24 item 4), the same for every engine: proposals a person judges, and
applying one of them.

- Merges: clusters of near-duplicates within a namespace (cosine of the stored vectors plus shared words), to
  become one memory.
- Stale statements: the same speaker stating the same subject again later with another value ("I live in Oslo"
  then "I moved to Lisbon"): the older one is proposed for archiving. Heuristics, no model beyond the stored
  vectors: a pair of one speaker's current memories scores its cosine, plus UPDATE_CUE_BONUS when the newer one
  has an update word ("now", "switched", "moved", ...), plus FRAME_WEIGHT times the share of content words the two
  share (the subject's frame); both must have words of their own (the two values); an addition ("also", "too",
  "another", "still") or a pair the merge rule already links is no stale statement.

Each proposal carries its evidence (scores, words) and an `id` (a hash of what it acts on) by which it can be
applied later: `apply` recomputes nothing and writes new versions only, so history keeps everything. The thresholds
are the best F1 on the dev half of benchmarks/data/consolidation.json (benchmarks/consolidation.py).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memserver.contract import lifecycle
from memserver.contract.backend import Memory, MemoryBackend
from memserver.errors import InvalidInputError

# Cosine at or above which two memories of one namespace are candidate duplicates: the best F1 on the dev half of
# benchmarks/data/consolidation.json (benchmarks/consolidation.py; held-out figures in benchmarks/README.md).
DUPLICATE_COSINE = 0.82
# Share of the shorter memory's words the two must share (Jaccard over content words) to count as duplicates.
MIN_WORD_OVERLAP = 0.3
# Stale statements: the score (cosine + cue bonus + frame share) at or above which the older of a pair is stale.
STALE_SCORE = 0.40
UPDATE_CUE_BONUS = 0.1
# A pair is scored when one of the two is among the other's STALE_CANDIDATES nearest statements of that speaker:
# one speaker (the user) may have said thousands of things, and an update is close to what it updates.
STALE_CANDIDATES = 10
FRAME_WEIGHT = 0.2
UPDATE_CUES = frozenset(
    {"now", "switched", "moved", "changed", "instead", "since", "these", "days", "anymore", "longer", "new"}
)
ADDITION_CUES = frozenset({"also", "too", "well", "another", "second", "other", "still", "again"})
_STOP = frozenset(
    [
        "i",
        "a",
        "an",
        "the",
        "is",
        "am",
        "are",
        "was",
        "my",
        "our",
        "in",
        "on",
        "at",
        "to",
        "of",
        "for",
        "and",
        "it",
        "we",
        "me",
        "this",
        "that",
        "all",
        "every",
        "each",
        "do",
    ]
)
_ROWS = 256  # rows of the cosine matrix computed at once (memory: _ROWS x n floats)

_WORD = re.compile(r"\w+", re.UNICODE)
Progress = Callable[[int, int], None]  # (memories scanned, of) during a scan


@dataclass(frozen=True)
class MergeProposal:
    """Merge `ids` (oldest first) into one memory with `content` (see `apply`)."""

    namespace: str
    ids: tuple[str, ...]
    content: str
    evidence: list[dict[str, Any]] = field(default_factory=list)
    action = "merge"

    @property
    def id(self) -> str:
        return _proposal_id(self.action, self.namespace, sorted(self.ids))

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "action": self.action,
            "namespace": self.namespace,
            "ids": list(self.ids),
            "content": self.content,
            "evidence": self.evidence,
        }


@dataclass(frozen=True)
class StaleProposal:
    """Archive `stale` (the older statement), which `newer` (same speaker, same subject, later) contradicts."""

    namespace: str
    stale: str
    newer: str
    stale_content: str
    newer_content: str
    evidence: dict[str, Any] = field(default_factory=dict)
    action = "archive"

    @property
    def id(self) -> str:
        return _proposal_id(self.action, self.namespace, [self.stale, self.newer])

    @property
    def ids(self) -> tuple[str, ...]:
        return (self.stale, self.newer)

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "action": self.action,
            "namespace": self.namespace,
            "stale": self.stale,
            "newer": self.newer,
            "stale_content": self.stale_content,
            "newer_content": self.newer_content,
            "evidence": self.evidence,
        }


Proposal = MergeProposal | StaleProposal


def _proposal_id(action: str, namespace: str, ids: Sequence[str]) -> str:
    return hashlib.sha256(f"{action}\0{namespace}\0{','.join(ids)}".encode()).hexdigest()[:12]


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text) if len(w) > 2}


def _terms(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)} - _STOP


def _is_duplicate(a: dict[str, Any], b: dict[str, Any], score: float, threshold: float) -> set[str] | None:
    """The shared words when the pair passes the merge rule, else None. Duplicates have one speaker (or none):
    "I live in Oslo" said by two people is two facts, and a merged memory keeps one speaker; and one kind (a done
    task is no duplicate of a note)."""
    if score < threshold or _speaker(a) != _speaker(b) or (a.get("kind") or "note") != (b.get("kind") or "note"):
        return None
    wa, wb = _words(a["content"]), _words(b["content"])
    shared = wa & wb
    return shared if len(shared) / max(1, min(len(wa), len(wb))) >= MIN_WORD_OVERLAP else None


def _speaker(r: dict[str, Any]) -> str:
    return str(r.get("speaker") or "").casefold()


def _current(store: MemoryBackend, namespace: str | None) -> list[dict[str, Any]]:
    return [
        r
        for r in store.export(include_vectors=True, namespace=namespace)
        if not r.get("replaced_by") and not r.get("archived")
    ]


@dataclass(frozen=True)
class _Pairs:
    """What one kind of proposal looks at: pairs of one namespace and one speaker (or none; `speaker_required`:
    the memories without one are left out) with cosine >= `floor`; with `nearest`, only the pairs where one is among
    the other's `nearest` best."""

    floor: float
    speaker_required: bool = False
    nearest: int | None = None


def _scan(
    records: list[dict[str, Any]], wanted: Sequence[_Pairs], progress: Progress | None
) -> list[list[tuple[int, int, float]]]:
    """(i, j, cosine), i < j, for each of `wanted`, in one pass over the cosine matrix (256 rows at a time, filtered
    in numpy: only the pairs that pass reach Python)."""
    import numpy as np  # here, not at the top: the server imports the contract on its start-up path

    n = len(records)
    found: list[list[tuple[int, int, float]]] = [[] for _ in wanted]
    if n == 0:
        return found
    vectors = np.asarray([r["vector"] for r in records], dtype=np.float32).reshape(n, -1)
    speakers = [_speaker(r) for r in records]
    groups = [f"{r.get('namespace', 'default')}\0{who}" for r, who in zip(records, speakers, strict=True)]
    codes = np.unique(np.asarray(groups), return_inverse=True)[1].ravel()
    alone = -1 - np.arange(n)  # a group of one: never paired
    group_of = [
        np.where([bool(who) for who in speakers], codes, alone) if w.speaker_required else codes for w in wanted
    ]
    seen: list[set[tuple[int, int]]] = [set() for _ in wanted]
    columns = np.arange(n)
    for start in range(0, n, _ROWS):
        block = vectors[start : start + _ROWS] @ vectors.T  # stored vectors are unit length
        rows = np.arange(start, min(n, start + _ROWS))
        for k, want in enumerate(wanted):
            keep = (block >= want.floor) & (group_of[k][rows, None] == group_of[k][None, :])
            if want.nearest is None:
                keep &= columns[None, :] > rows[:, None]
            else:
                keep &= columns[None, :] != rows[:, None]
                if n > want.nearest:  # a row's best `nearest` that pass (a row of fewer keeps those)
                    best = np.argpartition(-np.where(keep, block, -np.inf), want.nearest - 1, axis=1)
                    chosen = np.zeros_like(keep)
                    np.put_along_axis(chosen, best[:, : want.nearest], True, axis=1)
                    keep &= chosen
            for r, j in zip(*np.nonzero(keep), strict=True):
                lo, hi = sorted((start + int(r), int(j)))
                if want.nearest is not None:  # (lo, hi) may come from both rows
                    if (lo, hi) in seen[k]:
                        continue
                    seen[k].add((lo, hi))
                found[k].append((lo, hi, float(block[r, j])))
        if progress is not None:
            progress(min(n, start + _ROWS), n)
    return found


def propose_merges(
    store: MemoryBackend,
    *,
    namespace: str | None = None,
    threshold: float = DUPLICATE_COSINE,
    progress: Progress | None = None,
) -> list[MergeProposal]:
    """Near-duplicate clusters among the current, unarchived memories of each namespace (single linkage over pairs
    that pass both the cosine threshold and the word overlap); the merged text is the longest member's."""
    current = _current(store, namespace)
    (pairs,) = _scan(current, [_Pairs(threshold)], progress)
    return _merges(current, pairs, threshold)


def _stale_pairs(threshold: float) -> _Pairs:
    return _Pairs(threshold - UPDATE_CUE_BONUS - FRAME_WEIGHT, speaker_required=True, nearest=STALE_CANDIDATES)


def _merges(
    current: list[dict[str, Any]], pairs: list[tuple[int, int, float]], threshold: float
) -> list[MergeProposal]:
    parent = list(range(len(current)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    evidence: dict[int, list[dict[str, Any]]] = {}
    for i, j, score in pairs:
        a, b = current[i], current[j]
        shared = _is_duplicate(a, b, score, threshold)
        if shared is None:
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


def _when(r: dict[str, Any]) -> tuple[str, str]:
    return (str(r.get("occurred_at") or r["created_at"]), str(r["created_at"]))


def propose_stale(
    store: MemoryBackend,
    *,
    namespace: str | None = None,
    threshold: float = STALE_SCORE,
    progress: Progress | None = None,
) -> list[StaleProposal]:
    """Likely stale statements among the current, unarchived memories with a speaker: for each older statement,
    the best-scoring later one of the same speaker and namespace (see the module docstring)."""
    current = _current(store, namespace)
    (pairs,) = _scan(current, [_stale_pairs(threshold)], progress)
    return _stale(current, pairs, threshold)


def _stale(current: list[dict[str, Any]], pairs: list[tuple[int, int, float]], threshold: float) -> list[StaleProposal]:
    best: dict[int, tuple[float, int, dict[str, Any]]] = {}
    for i, j, cosine in pairs:
        a, b = current[i], current[j]
        if _when(a) == _when(b) or _is_duplicate(a, b, cosine, DUPLICATE_COSINE) is not None:
            continue
        if _when(a) > _when(b):
            i, j, a, b = j, i, b, a
        older, newer = _terms(a["content"]), _terms(b["content"])
        if newer & ADDITION_CUES:
            continue
        cues = newer & UPDATE_CUES
        was, now = older - newer - UPDATE_CUES, newer - older - UPDATE_CUES
        if not was or not now:
            continue
        frame = (older & newer) - UPDATE_CUES
        share = len(frame) / max(1, min(len(older - UPDATE_CUES), len(newer - UPDATE_CUES)))
        score = cosine + (UPDATE_CUE_BONUS if cues else 0.0) + FRAME_WEIGHT * share
        if score < threshold or (i in best and best[i][0] >= score):
            continue
        best[i] = (
            score,
            j,
            {
                "score": round(score, 4),
                "cosine": round(cosine, 4),
                "speaker": a.get("speaker"),
                "subject_words": sorted(frame),
                "was": sorted(was),
                "now": sorted(now),
                "update_words": sorted(cues),
                "older_at": _when(a)[0],
                "newer_at": _when(b)[0],
            },
        )
    proposals = []
    for i, (_, j, proof) in sorted(best.items()):
        a, b = current[i], current[j]
        proposals.append(
            StaleProposal(
                namespace=a.get("namespace", "default"),
                stale=a["id"],
                newer=b["id"],
                stale_content=a["content"],
                newer_content=b["content"],
                evidence=proof,
            )
        )
    return proposals


def propose(store: MemoryBackend, *, namespace: str | None = None, progress: Progress | None = None) -> list[Proposal]:
    """Every proposal, merges first, from one read of the store and one pass over the cosines."""
    current = _current(store, namespace)
    merges, stale = _scan(current, [_Pairs(DUPLICATE_COSINE), _stale_pairs(STALE_SCORE)], progress)
    found: list[Proposal] = list(_merges(current, merges, DUPLICATE_COSINE))
    return found + list(_stale(current, stale, STALE_SCORE))


def _live(store: MemoryBackend, memory_id: str, namespace: str) -> Memory:
    m = store.get(memory_id, namespace=namespace)
    if m is None:
        raise InvalidInputError(f"memory {memory_id} is gone (forgotten?): propose again")
    if m.replaced_by or m.archived:
        state = f"replaced by {m.replaced_by}" if m.replaced_by else "archived"
        raise InvalidInputError(f"memory {memory_id} changed since the proposal ({state}): propose again")
    return m


def apply(store: MemoryBackend, proposal: Proposal, content: str | None = None) -> list[Memory]:
    """Apply one proposal: new versions only, in one add_many, so history keeps every earlier state.

    A merge stores one memory with `content` (default: the proposal's, the longest member's), the members' tags
    and the newest member's other fields; it `replaces` the member with that text (the newest when none has it),
    and each other member is archived (a new version: the contract has one `replaces` per memory, so the merged
    memory cannot replace them all; archived, they are out of recall and `unarchive` brings one back). A stale
    proposal archives the older statement. Returns the memories written (the merged one first). A member changed
    since the proposal (replaced, archived, forgotten) is an InvalidInputError: nothing is written.
    """
    if isinstance(proposal, StaleProposal):
        _live(store, proposal.newer, proposal.namespace)
        return store.add_many([lifecycle.new_version(_live(store, proposal.stale, proposal.namespace), archived=True)])
    text = (proposal.content if content is None else content).strip()
    if not text:
        raise InvalidInputError("content: the merged text is empty")
    members = [_live(store, i, proposal.namespace) for i in proposal.ids]
    members.sort(key=lambda m: (m.occurred_at, m.created_at))
    target = next((m for m in members if m.content == text), members[-1])
    tags = list(dict.fromkeys(t for m in members for t in m.tags))
    newest = members[-1]
    fields = lifecycle.new_version(newest)  # every non-content field from the newest member, consistently
    merged = {
        **fields,
        "content": text,
        "tags": tags,
        "replaces": target.id,
        "pinned": any(m.pinned for m in members),
        "archived": False,
    }
    others = [lifecycle.new_version(m, archived=True) for m in members if m.id != target.id]
    return store.add_many([merged, *others])


def find(proposals: Sequence[Proposal], proposal_id: str) -> Proposal | None:
    return next((p for p in proposals if p.id == proposal_id), None)
