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

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "KINDS",
    "NEAR_DUPLICATE_SCORE",
    "SIMILAR_MAX",
    "Hit",
    "Memory",
    "MemoryBackend",
    "MemoryFilter",
    "Page",
    "SearchesNowait",
    "Selection",
]

# add(): a live memory at least this close (cosine) is reported in Memory.similar. From 25 restatement pairs vs 30
# distinct memories on the same topic: 92% of restatements and 7% of distinct pairs score >= 0.82.
NEAR_DUPLICATE_SCORE = 0.82
SIMILAR_MAX = 3
DEFAULT_NAMESPACE = "default"  # (inputs.DEFAULT_NAMESPACE; repeated here so this module imports nothing)
# What a memory is (issue 24; inputs.KINDS, repeated here for the same reason): "note" unless given.
KINDS = ("fact", "preference", "decision", "task", "event", "instruction", "person", "note", "summary")


@dataclass(frozen=True)
class Memory:
    """A stored memory. `duplicate` and `similar` describe the add() that returned it; they are not stored.

    The conversation fields (issue 12): `occurred_at` is when the thing happened or was said (the storage time
    unless given; filled from `created_at` when left empty here); `speaker`, `role` and `session` are "" when not
    set; `namespace` is the partition the memory lives in ("default" unless given); `replaces` is the id of the
    memory this one updated, and `replaced_by` (derived from the newer memory's `replaces`, never given) the id
    of the memory that updated this one: a memory with `replaced_by` is history, returned by get() and export()
    but not by search() or the listings unless `as_of` asks for a time when it was current.

    The lifecycle fields (issue 24): `kind` (one of KINDS), `due` (an ISO date, a task's; None: none), `done`
    (a task marked done), `pinned` (always recalled first) and `archived` (kept, but out of search and the
    listings unless asked for). pin(), archive() and mark_done() change them by storing a new version
    (`replaces`): history keeps the old state and `as_of` answers as the memory stood (docs/care.md).
    """

    id: str
    content: str
    created_at: str
    tags: tuple[str, ...]
    source: str
    duplicate: bool = False
    similar: tuple[tuple[str, float], ...] = ()
    occurred_at: str = ""
    speaker: str = ""
    role: str = ""
    session: str = ""
    namespace: str = DEFAULT_NAMESPACE
    replaces: str = ""
    replaced_by: str = ""
    kind: str = "note"
    due: str | None = None
    done: bool = False
    pinned: bool = False
    archived: bool = False

    def __post_init__(self) -> None:
        if not self.occurred_at:
            object.__setattr__(self, "occurred_at", self.created_at)

    def to_dict(self) -> dict[str, Any]:
        """The public JSON shape of a memory (tool_results.MEMORY_SCHEMA, export lines, memory:// resources):
        `occurred_at` always, speaker/role/session/replaces/replaced_by when set, namespace when not "default",
        kind when not "note", due when set, done/pinned/archived when true."""
        d: dict[str, Any] = {
            "id": self.id,
            "content": self.content,
            "created_at": self.created_at,
            "occurred_at": self.occurred_at,
            "tags": list(self.tags),
            "source": self.source,
        }
        if self.speaker:
            d["speaker"] = self.speaker
        if self.role:
            d["role"] = self.role
        if self.session:
            d["session"] = self.session
        if self.namespace != DEFAULT_NAMESPACE:
            d["namespace"] = self.namespace
        if self.replaces:
            d["replaces"] = self.replaces
        if self.replaced_by:
            d["replaced_by"] = self.replaced_by
        if self.kind != "note":
            d["kind"] = self.kind
        if self.due:
            d["due"] = self.due
        for flag in ("done", "pinned", "archived"):
            if getattr(self, flag):
                d[flag] = True
        return d


@dataclass(frozen=True)
class Hit:
    """A search result: the memory, its cosine similarity to the query (1 is identical), and `rank_score`, the
    number the engine ordered the results by (descending): in "semantic" the cosine again, in "keyword" the BM25
    score, in "hybrid" the fused score (convex fusion, retrieval/hybrid_convex.py, on both engines). Its scale is the
    mode's: compare it only within one result list. A `limit` beyond the fusion's head (50 a side) is filled from a
    deeper fusion, after the head: the order is descending within each part.

    `explanation` (only from `search(..., explain=True)`, else None): why it ranked, as a JSON-ready dict: "rank",
    and what the engine knows of it: "semantic" (rank, cosine), "keyword" (rank, bm25, matched terms), in hybrid
    also "fused", the session context and "boosts"; "query" is the query's side (terms, named speakers, periods),
    the same for every hit (PostgreSQL adds "engine")."""

    memory: Memory
    score: float
    rank_score: float
    explanation: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        d = {**self.memory.to_dict(), "score": self.score, "rank_score": self.rank_score}
        if self.explanation is not None:
            d["explain"] = self.explanation
        return d


@dataclass(frozen=True)
class Page:
    """One page of `list_page`: memories newest first (in the order asked for), and the cursor of the next page
    (None: this is the last)."""

    memories: list[Memory]
    next_cursor: str | None = None

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"memories": [m.to_dict() for m in self.memories]}
        if self.next_cursor is not None:
            d["next_cursor"] = self.next_cursor
        return d


@dataclass(frozen=True)
class MemoryFilter:
    """Which memories of one namespace a bulk selection (`select`, then `delete_many`) takes: all criteria given
    must hold (`tags`: any of them). `since`/`until` bound occurred_at like search's; `before` is a storage-time
    bound (created_at < before). Replaced memories (history) are taken only with `include_replaced`; `kinds`:
    any of these kinds; archived memories only with `include_archived`.

    A filter with no criterion but the namespace is refused (InvalidInputError) unless `everything=True`: a bug
    that drops a criterion must not select, and then forget, a whole namespace.
    """

    namespace: str | None = None
    tags: Sequence[str] | None = None
    source: str | None = None
    session: str | None = None
    speaker: str | None = None
    role: str | None = None
    since: str | date | None = None
    until: str | date | None = None
    before: str | date | None = None
    include_replaced: bool = False
    everything: bool = False
    kinds: Sequence[str] | None = None
    include_archived: bool = False


@dataclass(frozen=True)
class Selection:
    """What a MemoryFilter selects: how many, a sample (the newest `limit`, newest occurred_at first), and every
    matching id (newest first too), e.g. to show "forget 212 memories like these?" and then `delete_many(ids)`."""

    count: int
    sample: list[Memory]
    ids: list[str]


class MemoryBackend(Protocol):
    """A collection of memories that outlives the process, safe to share between threads.

    Every call is atomic and sees every write acknowledged before it started, by this process or any other
    sharing the collection. A write is durable when it returns. Ids are 32 lower-case hex characters (uuid4 hex,
    unless imported); an id is never given to two memories of a collection.

    Namespaces: every memory lives in one namespace (`namespace=None` means "default"; a name is 1-64 characters
    of `inputs.NAMESPACE_PATTERN`, e.g. "user:alice"). Every read and write below sees one namespace only:
    memories of different namespaces never meet (search, get, the listings, tag_counts, delete, select, dedup).
    Only `namespaces()`, `stats()`, `export()` (a backup: every namespace unless one is named) and `compact()`
    span them.

    History: a memory added with `replaces=<id>` updates that one, which is kept (history) with `replaced_by`
    set; `forget`/`delete` leaves a tombstone (its time) until `compact()`, which purges forgotten memories for
    good. `as_of` reads answer from both, as the collection stood at that time (see `search`).
    """

    def add(
        self,
        content: str,
        tags: Sequence[str] | None = None,
        source: str | None = None,
        *,
        occurred_at: str | date | None = None,
        speaker: str | None = None,
        role: str | None = None,
        session: str | None = None,
        namespace: str | None = None,
        replaces: str | None = None,
        kind: str | None = None,
        due: str | date | None = None,
    ) -> Memory:
        """Store one memory and return it.

        `content` is trimmed, and must then be non-empty and at most `inputs.MAX_CONTENT_CHARS`; `tags` are
        trimmed, repeated ones dropped (first order kept), at most `inputs.MAX_TAGS` of at most
        `inputs.MAX_TAG_CHARS` each; `source` is trimmed ("" when None). created_at is the time of storing.

        Conversation fields (each optional, checked by inputs.py): `occurred_at` (ISO 8601 date or date-time,
        a date alone is 00:00 UTC that day, a naive time is UTC; default: created_at) is when it happened or was
        said; `speaker` (a name, trimmed, 1..inputs.MAX_SPEAKER_CHARS, no control characters), `role` (one of
        inputs.ROLES), `session` (a conversation id, trimmed, 1..inputs.MAX_SESSION_CHARS, no control
        characters), `namespace` (see the class docstring), `replaces` (the id of a current memory of the same
        namespace that this one updates: it becomes history with `replaced_by` = the new id; an unknown id, one
        of another namespace, or one already replaced is an InvalidInputError naming `replaces`), `kind` (one of
        KINDS, any case; default "note"), `due` (an ISO date). A new memory is neither done, pinned nor archived;
        add_many and import_ items may also carry "done", "pinned" and "archived" (booleans).

        Exact duplicates: when a current (not replaced) memory of the same namespace has the same content once
        whitespace is collapsed (`inputs.normalised`), nothing is stored and that memory comes back with
        `duplicate=True` (its own fields; the earliest stored if there are several): a duplicate stores nothing,
        so it replaces nothing either. (Not a duplicate: the same content as the memory `replaces` names, with
        other tags, source, speaker, role, session, lifecycle fields or a given occurred_at: a new version of it,
        e.g. retagged.)
        Otherwise the new memory carries in `similar` up to SIMILAR_MAX (id, cosine
        rounded to 4 places) of other current memories of its namespace scoring at least NEAR_DUPLICATE_SCORE
        against it, best first: still stored, so the caller may forget (or replace) an outdated one.
        """
        ...

    def add_many(self, items: Iterable[dict[str, Any] | str]) -> list[Memory]:
        """Store several memories (a str, or a dict of `inputs.MEMORY_FIELDS`: "content" and the optional
        arguments of add); one result per item.

        `items` must be a list or another iterable of items, not a str, bytes or dict (InvalidInputError naming
        `items`). All items are checked before any is embedded or written (errors name `items[n].<field>`,
        unless the items are a list of one). Exact duplicates, of a current memory of the item's namespace or of
        an earlier item of the same call, come back as `duplicate=True` with the id of the memory they
        duplicate. Two items replacing the same memory are an InvalidInputError. No `similar` here.
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
        speaker: str | None = None,
        role: str | None = None,
        session: str | None = None,
        namespace: str | None = None,
        as_of: str | date | None = None,
        query_vector: Sequence[float] | np.ndarray | None = None,
        explain: bool = False,
        kinds: Sequence[str] | None = None,
        include_archived: bool = False,
    ) -> list[Hit]:
        """The at most `limit` (1..inputs.MAX_LIMIT) current memories of `namespace` that best match `query`,
        best first.

        Filters restrict the candidates BEFORE ranking, so a selective filter still yields the true top-`limit`
        of the memories that pass it: `tags` matches a memory carrying any of them; `source` equals the memory's
        source ("" matches memories without one); `speaker`, `role` and `session` equal the memory's (exact,
        after trimming); `kinds`: any of these kinds; archived memories only with `include_archived`;
        `since`/`until` bound occurred_at, both inclusive; a date-only `until` includes that
        whole UTC day; a time without an offset is UTC; `since` after `until` is an error.

        `as_of` (ISO 8601; a date alone means the end of that UTC day): answer as the collection stood then,
        over the memories stored by then (created_at <= as_of), not yet replaced by a memory stored by then, and
        not forgotten by then (a tombstone; compaction purges forgotten memories and with them this history).
        Such a search ranks exactly over its candidates (slower; as_of is rare).

        `mode`: "semantic" ranks by cosine similarity to the query (the exact top-`limit`, but an approximate index may
        trade a near-tie at the boundary); "keyword" by BM25 over the content and the date words of occurred_at (only
        memories sharing a word with the query: possibly none); "hybrid" (default) by both: a memory first in both
        rankings comes first, one that matches neither word nor meaning last. Both engines fuse them alike
        (retrieval/hybrid_convex.py: with session context and soft speaker and time boosts); near-ties may still
        order differently (float rounding). Ties (equal cosine
        in "semantic", equal BM25 in "keyword") rank the earlier-stored memory first. In every mode `Hit.score` is the
        cosine similarity to the query and `Hit.rank_score` the number the list is ordered by; `min_score` (-1..1)
        drops hits whose cosine is below it, after ranking (so fewer than `limit` may come back). A smaller `limit`
        returns a prefix of a larger one.

        `query_vector`: the query's embedding, if the caller has it (benchmarks, tests): `dim` finite numbers,
        not all zero, normalised here; the query is then not embedded. `query` is still required and used by
        the keyword ranking.

        `explain`: each hit carries `Hit.explanation`, why it ranked (see Hit); the ranking is the same.
        """
        ...

    def get(self, memory_id: str, *, namespace: str | None = None) -> Memory | None:
        """The memory with this id (trimmed, any case) in `namespace`, current or replaced (history: it has
        `replaced_by`), or None (no such memory, forgotten, or in another namespace). A malformed id is an
        InvalidInputError."""
        ...

    def list_recent(
        self,
        limit: int = 10,
        tags: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        session: str | None = None,
        speaker: str | None = None,
        kinds: Sequence[str] | None = None,
        include_archived: bool = False,
    ) -> list[Memory]:
        """At most `limit` current memories of `namespace`, newest occurred_at first (equal times: the
        later-stored first); with `tags`, only memories carrying any of them; with `session`/`speaker`, only
        those of that session / speaker; `kinds` and `include_archived` as in search. (The first page of
        `list_page`.)"""
        ...

    def list_page(
        self,
        limit: int = 10,
        tags: Sequence[str] | None = None,
        *,
        namespace: str | None = None,
        session: str | None = None,
        speaker: str | None = None,
        role: str | None = None,
        source: str | None = None,
        since: str | date | None = None,
        until: str | date | None = None,
        cursor: str | None = None,
        as_of: str | date | None = None,
        order: str = "occurred",
        kinds: Sequence[str] | None = None,
        include_archived: bool = False,
    ) -> Page:
        """The memories list_recent lists (with `role`, `source`, `since`/`until` and `as_of` as in search), a page
        at a time, newest first: `cursor` is the `next_cursor` of the previous page (None: the first page).

        `order` (one of requests.LIST_ORDERS): "occurred" (default) sorts by occurred_at, as list_recent does;
        "stored" by created_at, the time of storing, newest first (equal times: the later-stored first), so a
        memory just added with an old occurred_at (backdated, imported) comes first. `since`/`until` bound
        occurred_at in either order. A cursor belongs to its order: one of the other order is an InvalidInputError
        naming `cursor`.

        Paging to the end returns every memory that passes the filters exactly once, also while memories are added
        meanwhile (those placed after the cursor appear; those placed before it, being newer, do not). A cursor is
        opaque (each engine encodes its own sort key); a string that is not one this backend returned is an
        InvalidInputError naming `cursor`."""
        ...

    def pin(self, memory_id: str, pinned: bool = True, *, namespace: str | None = None) -> Memory | None:
        """Pin (or with pinned=False unpin) the current memory `memory_id`: a new version of it with `pinned` set
        (`replaces` = that id; see lifecycle.py), returned; the memory itself when it is so already; None when
        `namespace` holds no such memory. A replaced memory (history) is an InvalidInputError naming `memory_id`
        (pin its newest version, its `replaced_by` chain)."""
        ...

    def archive(self, memory_id: str, archived: bool = True, *, namespace: str | None = None) -> Memory | None:
        """Archive (or with archived=False unarchive) the current memory `memory_id`, as pin() does: archived
        memories stay stored, out of search, the listings and select unless `include_archived`."""
        ...

    def mark_done(self, memory_id: str, done: bool = True, *, namespace: str | None = None) -> Memory | None:
        """Mark the current memory `memory_id` (a task, usually) done, or not done again, as pin() does."""
        ...

    def delete(self, memory_id: str, *, namespace: str | None = None) -> bool:
        """Forget a memory (durable when this returns): True if it was there (current or replaced), False if
        there is no such memory in `namespace`. It leaves a tombstone for `as_of` until `compact()`. Forgetting a
        memory of a replace chain forgets just that one: its neighbours keep their `replaces` / `replaced_by` ids,
        which then name no memory. A malformed id is an InvalidInputError."""
        ...

    def select(self, filter: MemoryFilter, limit: int | None = None) -> Selection:
        """The memories of `filter.namespace` that pass `filter` (current ones; replaced ones too with
        `include_replaced`): their count, every id, and a sample of the newest `limit` (1..inputs.MAX_LIMIT;
        None: no sample). An empty filter without `everything=True` is an InvalidInputError."""
        ...

    def delete_many(self, ids: Iterable[str], *, namespace: str | None = None) -> int:
        """Forget the memories with these ids in `namespace` in one durable write; returns how many were there
        (ids of no memory, of another namespace, or repeated count once or not at all). `ids` must be a list
        (or another iterable) of ids, not a str; a malformed id is an InvalidInputError naming `ids[n]`, and
        then nothing is forgotten."""
        ...

    def tag_counts(self, *, namespace: str | None = None) -> dict[str, int]:
        """Current memories of `namespace` per tag, most used first (equal counts by tag name); tags no current
        memory carries are absent."""
        ...

    def namespaces(self) -> dict[str, int]:
        """Current memories per namespace, by namespace name; namespaces without any are absent."""
        ...

    def sessions(self, *, namespace: str | None = None) -> dict[str, int]:
        """Current memories of `namespace` per session, the session with the newest occurred_at first (memories
        without a session are not counted)."""
        ...

    def stats(self) -> dict[str, Any]:
        """A JSON-able description of the collection. Every engine fills "engine" (its name), "count" (current
        memories, every namespace), "collection", "model" and "dim" (of the embeddings), "namespaces" (how many)
        and "replaced" (memories kept as history); anything else is the engine's own (the local store adds its
        path, index parameters and bytes on disk)."""
        ...

    def export(self, include_vectors: bool = False, *, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        """Every stored memory, current and replaced, as `Memory.to_dict()`, oldest occurred_at first (equal
        times: stored order); every namespace unless `namespace` names one. Forgotten memories are not exported.

        A snapshot taken at the first next(): later writes do not show. With `include_vectors`, each dict also
        has "vector" (the stored unit embedding, a list of `dim` floats), which lets import_ skip embedding.
        """
        ...

    def import_(self, records: Iterable[dict[str, Any]]) -> int:
        """Add exported records ("content" required; "tags", "source", "id", "created_at", "vector" and the
        conversation fields of add optional; "replaced_by" too), keeping id, created_at, occurred_at and every
        field; returns how many were added.

        Records whose id is stored, or whose content duplicates a current memory of the same namespace or an
        earlier record, are skipped. An id given twice in one import is an InvalidInputError (which record should
        win is a guess). `records` must be an iterable of dicts (not a str). Records are checked in batches before
        each batch is written: on an error, earlier batches may stay written, and running the same import again
        skips them. A "vector" must come from the same model.

        `replaces` may name a stored memory or a record of the same import, before or after it (a record
        replacing one further on is written after it): one that names neither, by the end of the import, is an
        InvalidInputError naming `records[n].replaces`, and the records before it stay written. `replaced_by` is
        otherwise derived; it is kept only when no record names its memory in `replaces` (its newer version was
        forgotten): the memory is then history from the time it was stored.
        """
        ...

    def compact(self) -> dict[str, Any]:
        """Reclaim the space of forgotten memories, and purge them (and their history for `as_of`) for good; the
        other memories, their ids, times, fields and replace links stay exactly as they were. Returns at least
        "count" (current memories) and "removed" (records dropped; 0 where the engine reclaims space by itself).
        Other processes may keep reading and writing meanwhile."""
        ...

    def health(self) -> dict[str, Any]:
        """How the collection is doing (memory://health, `memserver doctor`), as contract/health.py shapes it:
        "status" (ok | warning | failure: the worst check's), "engine", "version" (memserver's), "collection",
        "model" (name, dim, and "check": the model against sentence-transformers' reference vectors, checked once
        per embedder), "index" ("memories": current ones, and the engine's index figures), "pending_compaction"
        (forgotten memories compact() would purge), the engine's own facts (the local store: last checkpoint,
        journal bytes and the estimated replay of the next open, disk free; PostgreSQL: reachability and round
        trip, schema version against this version's), and "checks": [{"name", "status", "detail", "advice"
        (unless ok)}]. Never raises for what it finds: an unreachable database is a failed check."""
        ...

    def backup(self, dest: str | os.PathLike[str], keep: int | None = None) -> dict[str, Any]:
        """Write a consistent, restorable copy of the collection under folder `dest` while other processes keep
        writing (it holds every write acknowledged before it started); `keep`: then remove the oldest backups
        of the collection there beyond that many. Returns "written" (True) and what was written ("path",
        "memories", "files", "lock_seconds": the longest any lock was held, "removed"). An engine whose storage
        is backed up by other tools (PostgreSQL: pg_dump) writes nothing and returns "written": False and its
        "recipe"."""
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

    def ids_with_prefix(self, prefix: str, limit: int, *, namespace: str | None = None) -> list[str]:
        """The ids of the memories of `namespace` that get() returns (current or replaced) starting with `prefix`
        (0-32 hexadecimal characters, trimmed, any case), in ascending order, at most `limit`
        (1..inputs.MAX_LIMIT): what completing a memory id needs. An empty prefix gives the lowest ids. A prefix
        that is not hexadecimal, or longer than an id, is an InvalidInputError naming `prefix`. (A database
        answers it from an index on (namespace, id): a range scan from the prefix, no table scan.)
        """
        ...

    def __enter__(self) -> MemoryBackend: ...

    def __exit__(self, *exc: object) -> None: ...


@runtime_checkable
class SearchesNowait(Protocol):
    """Optional, for an engine that can tell: answer a search at once, or say it would have to wait.

    `search_nowait` takes what `search` takes and returns what `search` would, or None when answering would wait
    for anything that may take long: a lock held by another thread or process, catching up with another
    process's writes, a reload, or work not bounded by the query (the local store: an `as_of` search, ranked
    exactly over every candidate). It embeds the query (milliseconds) unless given `query_vector`, and raises
    what `search` raises for bad arguments. The server calls it on its event loop, where a wait would stall every
    request, and on None calls `search` in a worker thread. An engine that always waits on something (a database
    round trip) does not implement it.
    """

    def search_nowait(
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
        speaker: str | None = None,
        role: str | None = None,
        session: str | None = None,
        namespace: str | None = None,
        as_of: str | date | None = None,
        query_vector: Sequence[float] | np.ndarray | None = None,
        explain: bool = False,
        kinds: Sequence[str] | None = None,
        include_archived: bool = False,
    ) -> list[Hit] | None: ...
