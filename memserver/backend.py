"""The storage contract: what the server, the loader and the CLI may ask of a memory engine, and what it answers.

Engines implement `MemoryBackend`: the embedded local store (store.py, the default) and, for those who outgrow
one machine, a database engine. The server, the loader and the CLI import this module, inputs.py and errors.py,
never an engine; `engines.open_backend()` is the one place that names them.

The docstrings below ARE the contract: the semantics every engine honours, so that a client cannot tell engines
apart by their answers. tests/contract/ runs one suite over every engine. Arguments are checked by inputs.py (the
same rules and messages everywhere); a bad argument raises `InvalidInputError` naming it and the rule it broke,
before anything is embedded or written. Other failures are `MemserverError`s (errors.py) with a message a
person can act on. Times are strings in the stored format (`inputs.stored_time`: UTC, microseconds, "+00:00"),
so they sort in time order.

This module is light on purpose (no numpy, no engine): the server imports it on its start-up path.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import numpy as np

__all__ = ["NEAR_DUPLICATE_SCORE", "SIMILAR_MAX", "Hit", "Memory", "MemoryBackend"]

# add(): a live memory at least this close (cosine) is reported in Memory.similar. From 25 restatement pairs vs 30
# distinct memories on the same topic: 92% of restatements and 7% of distinct pairs score >= 0.82.
NEAR_DUPLICATE_SCORE = 0.82
SIMILAR_MAX = 3


@dataclass(frozen=True)
class Memory:
    """A stored memory. `duplicate` and `similar` describe the add() that returned it; they are not stored."""

    id: str
    content: str
    created_at: str
    tags: tuple[str, ...]
    source: str
    duplicate: bool = False
    similar: tuple[tuple[str, float], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape of a memory (tools.MEMORY_SCHEMA, export lines, memory:// resources)."""
        return {
            "id": self.id,
            "content": self.content,
            "created_at": self.created_at,
            "tags": list(self.tags),
            "source": self.source,
        }


@dataclass(frozen=True)
class Hit:
    """A search result: the memory and its cosine similarity to the query (1 is identical)."""

    memory: Memory
    score: float

    def to_dict(self) -> dict[str, Any]:
        return {**self.memory.to_dict(), "score": self.score}


class MemoryBackend(Protocol):
    """A collection of memories that outlives the process, safe to share between threads.

    Every call is atomic and sees every write acknowledged before it started, by this process or any other
    sharing the collection. A write is durable when it returns. Ids are 32 lower-case hex characters (uuid4 hex,
    unless imported); an id is never given to two memories of a collection.
    """

    def add(self, content: str, tags: Sequence[str] | None = None, source: str | None = None) -> Memory:
        """Store one memory and return it.

        `content` is trimmed, and must then be non-empty and at most `inputs.MAX_CONTENT_CHARS`; `tags` are
        trimmed, repeated ones dropped (first order kept), at most `inputs.MAX_TAGS` of at most
        `inputs.MAX_TAG_CHARS` each; `source` is trimmed ("" when None). created_at is the time of storing.

        Exact duplicates: when a live memory has the same content once whitespace is collapsed
        (`inputs.normalised`), nothing is stored and that memory comes back with `duplicate=True` (its own tags
        and source; the earliest stored if there are several). Otherwise the new memory carries in `similar` up
        to SIMILAR_MAX (id, cosine rounded to 4 places) of other live memories scoring at least
        NEAR_DUPLICATE_SCORE against it, best first: still stored, so the caller may forget an outdated one.
        """
        ...

    def add_many(self, items: Iterable[dict[str, Any] | str]) -> list[Memory]:
        """Store several memories (a str, or a dict with only "content", "tags", "source"); one result per item.

        All items are checked before any is embedded or written (errors name `items[n].<field>`, unless the
        items are a list of one). Exact duplicates, of a live memory or of an earlier item of the same call,
        come back as `duplicate=True` with the id of the memory they duplicate. No `similar` here.
        """
        ...

    def search(
        self,
        query: str,
        limit: int = 5,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        since: str | date | None = None,
        until: str | date | None = None,
        min_score: float | None = None,
        mode: str = "hybrid",
        *,
        query_vector: Sequence[float] | np.ndarray | None = None,
    ) -> list[Hit]:
        """The at most `limit` (1..inputs.MAX_LIMIT) memories that best match `query`, best first.

        Filters restrict the candidates BEFORE ranking, so a selective filter still yields the true top-`limit`
        of the memories that pass it: `tags` matches a memory carrying any of them; `source` equals the memory's
        source ("" matches memories without one); `since`/`until` bound created_at, both inclusive; a date-only
        `until` includes that whole UTC day; a time without an offset is UTC; `since` after `until` is an error.

        `mode`: "semantic" ranks by cosine similarity to the query (the exact top-`limit`, but an approximate
        index may trade a near-tie at the boundary); "keyword" by BM25 over the content and its date words
        (only memories sharing a word with the query: possibly none); "hybrid" (default) by reciprocal-rank
        fusion of the two (fusion.py: each ranking cut at FUSION_DEPTH, a weak recency prior). Ties (equal cosine
        in "semantic", equal BM25 in "keyword") rank the earlier-stored memory first. In every mode `Hit.score`
        is the cosine similarity to the query, and `min_score` (-1..1) drops hits below it after ranking (so
        fewer than `limit` may come back).

        `query_vector`: the query's embedding, if the caller has it (benchmarks, tests): `dim` finite numbers,
        not all zero, normalised here; the query is then not embedded. `query` is still required and used by
        the keyword ranking.
        """
        ...

    def get(self, memory_id: str) -> Memory | None:
        """The live memory with this id (trimmed, any case), or None. A malformed id is an InvalidInputError."""
        ...

    def list_recent(self, limit: int = 10, tags: Sequence[str] | None = None) -> list[Memory]:
        """At most `limit` live memories, newest created_at first (equal times: the later-stored first); with
        `tags`, only memories carrying any of them."""
        ...

    def delete(self, memory_id: str) -> bool:
        """Delete a memory for good (durable when this returns): True if it was live, False if there is no such
        memory. A malformed id is an InvalidInputError."""
        ...

    def tag_counts(self) -> dict[str, int]:
        """Live memories per tag, most used first (equal counts by tag name); tags no live memory carries are
        absent."""
        ...

    def stats(self) -> dict[str, Any]:
        """A JSON-able description of the collection. Every engine fills "engine" (its name), "count" (live
        memories), "collection", "model" and "dim" (of the embeddings); anything else is the engine's own
        (the local store adds its path, index parameters and bytes on disk)."""
        ...

    def export(self, include_vectors: bool = False) -> Iterator[dict[str, Any]]:
        """Every live memory as `Memory.to_dict()`, oldest created_at first (equal times: stored order).

        A snapshot taken at the first next(): later writes do not show. With `include_vectors`, each dict also
        has "vector" (the stored unit embedding, a list of `dim` floats), which lets import_ skip embedding.
        """
        ...

    def import_(self, records: Iterable[dict[str, Any]]) -> int:
        """Add exported records ("content" required; "tags", "source", "id", "created_at", "vector" optional),
        keeping id and created_at; returns how many were added.

        Records whose id is live, or whose content duplicates a live memory or an earlier record, are skipped.
        An id given twice in one import is an InvalidInputError (which record should win is a guess). Records
        are checked in batches before each batch is written: on an error, earlier batches may stay written,
        and running the same import again skips them. A "vector" must come from the same model.
        """
        ...

    def compact(self) -> dict[str, Any]:
        """Reclaim the space of deleted memories; the live memories, their ids and times stay exactly as they
        were. Returns at least "count" (live memories) and "removed" (records dropped; 0 where the engine
        reclaims space by itself). Other processes may keep reading and writing meanwhile."""
        ...

    def close(self) -> None:
        """Release files and connections. Safe to call twice; any other call afterwards raises StoreError."""
        ...

    # --- for watchers and completions (resource subscriptions, completion/complete) ------------------------------

    def revision(self) -> str:
        """An opaque token that changes whenever any memory of the collection changes, by this process or any
        other: compare two tokens for equality, nothing else. It may also change when no memory did (a re-read
        then finds the same content), never the other way round.

        Cheap enough to poll several times a second while something watches: the local store answers with one
        stat of its journal (identity and size: the journal only grows, and is replaced, as a new file, only by a
        compaction), without locks. A database engine answers from a per-collection change counter that every
        write bumps in its own transaction (or the highest sequence of a change log that records deletes too:
        max(id) of the live rows would miss them). Raises StoreError once closed.
        """
        ...

    def ids_with_prefix(self, prefix: str, limit: int) -> list[str]:
        """The ids of live memories starting with `prefix` (0-32 hexadecimal characters, trimmed, any case), in
        ascending order, at most `limit` (1..inputs.MAX_LIMIT): what completing a memory id needs. An empty
        prefix gives the lowest ids. A prefix that is not hexadecimal, or longer than an id, is an
        InvalidInputError naming `prefix`. (A database answers it from the id's b-tree index: a range scan from
        the prefix, no table scan.)
        """
        ...

    def __enter__(self) -> MemoryBackend: ...

    def __exit__(self, *exc: object) -> None: ...
