"""The catalog: the metadata of the memories of one journal generation, by row, and the lookups on it.

A memory is a row: the order of its add line in the journal, which is also its row in the vector file and its
label in the indexes. The catalog keeps each row's id, content, created_at, occurred_at, tags, source and the
conversation labels (speaker, role, session, namespace) by column (columns.py: a million memories are not
millions of Python objects), plus what the store looks up: id -> row, content key -> rows (exact duplicates),
tag/source/label -> rows, and the current rows in (occurred_at, row) order (time_order.py).

A row is current (`alive`: what search and the listings see, and what the derived indexes hold), history
(replaced by a newer memory: get() and export() still return it), or forgotten (a tombstone: its metadata stays
for `as_of` until compaction). history.py keeps the links and tombstones. Which rows pass a filter (sets of rows
at once: search's candidates, the listings' pages) is its `filters`' job (filters.py); the lifecycle state column's
encoding is states.py's.

It is fed by the store's replay of the journal (`add`, `supersede`, `forget`), restored from a snapshot
(snapshot.py), and built afresh for a compacted generation (compaction.py). It does no I/O and takes no lock: the
store serialises every call. Rows are never reused within a generation (the write path hands them out upwards),
so a row that stops being current is masked by `alive` rather than removed from every structure at once.
"""

from __future__ import annotations

import logging
from itertools import repeat
from typing import Any, NamedTuple

import numpy as np

from memserver.contract import inputs
from memserver.contract.backend import Memory
from memserver.local import columns
from memserver.local.filters import Filters
from memserver.local.history import History
from memserver.local.replay import AddRecord
from memserver.local.states import parse_state, public_state, state_key
from memserver.local.time_order import TimeOrder

log = logging.getLogger(__name__)

DEFAULT_NAMESPACE = inputs.DEFAULT_NAMESPACE


class ExportColumns(NamedTuple):
    """The columns of the stored memories, oldest first, copied at one moment (see `Catalog.export_columns`)."""

    rows: np.ndarray
    ids: np.ndarray
    created: np.ndarray
    occurred: np.ndarray
    texts: bytes | bytearray
    starts: np.ndarray
    ends: np.ndarray
    tags: list[tuple[str, ...] | None]  # (None only for a removed row, which these never are)
    sources: list[str | None]
    labels: tuple[tuple[list[str], np.ndarray], ...]  # speaker, role, session, namespace: (names, codes)
    replaces: dict[int, str]
    replaced: dict[int, tuple[str, str]]
    states: tuple[list[str], np.ndarray]

    def records(self, start: int, stop: int) -> list[AddRecord]:
        out = []
        (speakers, sp), (roles, ro), (sessions, se), (spaces, ns) = self.labels
        state_names, st = self.states
        for j in range(start, min(stop, len(self.rows))):
            row = int(self.rows[j])
            newer = self.replaced.get(row, ("", ""))
            out.append(
                AddRecord(
                    columns.as_str(self.ids[j]),
                    self.texts[self.starts[j] : self.ends[j]].decode("utf-8", "surrogatepass"),
                    columns.as_str(self.created[j]),
                    self.tags[j] or (),
                    self.sources[j] or "",
                    row,
                    columns.as_str(self.occurred[j]),
                    speakers[sp[j]],
                    roles[ro[j]],
                    sessions[se[j]],
                    spaces[ns[j]],
                    self.replaces.get(row, ""),
                    newer[0],
                    newer[1],
                    *parse_state(state_names[st[j]]),
                )
            )
        return out


class Catalog:
    """The memories' metadata by row. See the module docstring."""

    def __init__(self) -> None:
        self.ids = columns.IdMap()  # id -> row of the stored memories (current or history); also row -> id
        self.contents = columns.TextHeap()
        self.created = columns.FixedText(32)  # what inputs.stored_time writes: 32 ASCII characters
        self.tags: list[tuple[str, ...] | None] = []  # by row; None: a row never written
        self.sources: list[str | None] = []
        self.speakers = columns.Labels()
        self.roles = columns.Labels()
        self.sessions = columns.Labels()
        self.namespaces = columns.Labels(DEFAULT_NAMESPACE)
        self.states = columns.Labels()  # kind, due, done, pinned, archived as one short text (state_key); "": a note
        self.alive = np.zeros(0, dtype=bool)  # by row: current (capacity may exceed next_row)
        self.content_keys = columns.HashIndex()  # inputs.content_key -> rows
        self.tag_rows = columns.RowSets()
        self.source_rows = columns.RowSets()
        self.times = TimeOrder()  # occurred_at by row, and the current rows in (occurred_at, row) order
        self.history = History()
        self.per_namespace: dict[str, int] = {}  # current memories per namespace (none: absent)
        self.live = 0  # current memories
        self.plain = True  # no memory has a conversation label or a replace link yet: `memory` skips them
        self.next_row = 0  # one past the highest row ever added
        self._interned: dict[Any, Any] = {}  # one object per distinct tag tuple / source
        self.filters = Filters(self)  # which rows pass a search's or a listing's filter (filters.py)

    @property
    def occurred(self) -> columns.FixedText:
        return self.times.occurred

    def __len__(self) -> int:
        return self.live

    def __contains__(self, memory_id: object) -> bool:
        return memory_id in self.ids

    # --- changes (the replay path) --------------------------------------------------------------------------

    def add(self, r: AddRecord) -> bool:
        """Add the memory `r` at its row; False (and nothing done) if its id or its row is taken already.

        A record carrying `replaced_by` (written by a compaction or an import) is history from the start."""
        key = columns.id_key(r.id)
        if self.ids.get(r.id, key=key) is not None:
            return False
        row = r.row
        if row < self.next_row:
            # A row is never given twice: the write path hands out rows upwards, in journal order. The row sets and
            # key indexes rely on it (they drop a removed row lazily), so a line that reuses a row is refused.
            owner = self.id_at(row) or "a deleted memory"
            log.error("journal line of %s reuses row %d (of %s); ignoring it", r.id, row, owner)
            return False
        if row >= len(self.tags) or row >= len(self.alive):
            self._grow(row)
        current = not r.replaced_by
        state = state_key(r)
        if self.plain and (r.speaker or r.role or r.session or r.replaces or state or r.namespace != DEFAULT_NAMESPACE):
            self.plain = False
        self.plain = self.plain and current
        self.ids.insert(r.id, row, key)
        self.contents.set(row, r.content)
        self.created.set(row, r.created_at)
        occurred = r.occurred_at or r.created_at
        self.occurred.set(row, occurred)
        self.tags[row] = tags = self._interned.setdefault(r.tags, r.tags)
        self.sources[row] = self._interned.setdefault(r.source, r.source)
        self.speakers.set(row, r.speaker, current)
        self.roles.set(row, r.role, current)
        self.sessions.set(row, r.session, current)
        self.namespaces.set(row, r.namespace, current)
        self.states.set(row, state, current)
        if r.replaces:
            self.history.replaces[row] = r.replaces
        self.next_row = row + 1
        if not current:
            self.history.replaced[row] = (r.replaced_by, r.replaced_at or r.created_at)
            return True
        self.alive[row] = True
        self.live += 1
        self.per_namespace[r.namespace] = self.per_namespace.get(r.namespace, 0) + 1
        self.content_keys.add(inputs.content_key(r.content), row)
        for t in tags:
            self.tag_rows.add(t, row)
        self.source_rows.add(r.source, row)
        self.times.insert(row)
        return True

    def supersede(self, r: AddRecord) -> int | None:
        """`r` (just added) replaces `r.replaces`: that memory becomes history. Returns its row if it was current
        (the derived indexes drop it), else None. A link to a memory no longer stored is kept as written (get()
        shows it); one the write path would have refused is logged and kept, without changing the older memory."""
        row = self.ids.get(r.replaces)
        if row is None:
            # Legal: the older memory was forgotten and compaction has since dropped it (or an import kept a link).
            log.debug("memory %s replaces %s, which is not stored; keeping the link as written", r.id, r.replaces)
            return None
        newer = self.history.replaced.get(row)
        if newer is not None:
            if newer[0] == r.id:  # announced by the older memory's line (compaction, import): now with its time
                self.history.replaced[row] = (r.id, r.created_at)
            else:
                log.warning("memory %s replaces %s, already replaced by %s; ignoring", r.id, r.replaces, newer[0])
            return None
        if self.namespaces.get(row) != r.namespace:
            log.warning("memory %s replaces %s of another namespace; ignoring", r.id, r.replaces)
            return None
        self._retire(row)
        self.history.replaced[row] = (r.id, r.created_at)
        return row

    def forget(self, row: int, at: str) -> bool:
        """Forget the stored memory at `row` at time `at` (a tombstone: its metadata stays for as_of until
        compaction). True if it was current (the derived indexes drop it)."""
        was_current = bool(self.alive[row])
        if was_current:
            self._retire(row)
        memory_id = self.ids.id_at(row) or ""
        del self.ids[memory_id]
        self.history.forgotten[row] = (memory_id, at)
        return was_current

    def _retire(self, row: int) -> None:
        """The current memory at `row` stops being current (its tag, source, label and content-key entries go
        when next read: columns.RowSets)."""
        self.times.remove(row)
        self.alive[row] = False
        self.live -= 1
        namespace = self.namespaces.get(row)
        left = self.per_namespace.get(namespace, 1) - 1
        if left:
            self.per_namespace[namespace] = left
        else:
            self.per_namespace.pop(namespace, None)

    def _grow(self, row: int) -> None:
        """Make room for `row` in every column (the numpy ones share one capacity, doubled as needed)."""
        if row >= len(self.tags):
            more = row + 1 - len(self.tags)
            self.tags.extend(repeat(None, more))
            self.sources.extend(repeat(None, more))
        if row >= len(self.alive):
            capacity = max(1024, row + 1, 2 * len(self.alive))
            alive = np.zeros(capacity, dtype=bool)
            alive[: len(self.alive)] = self.alive
            self.alive = alive
            for col in (self.ids.ids, self.contents, self.created, self.occurred, *self.labels(), self.states):
                col.grow(capacity)

    def labels(self) -> tuple[columns.Labels, columns.Labels, columns.Labels, columns.Labels]:
        return self.speakers, self.roles, self.sessions, self.namespaces

    # --- one memory ----------------------------------------------------------------------------------------------

    def row_of(self, memory_id: str, namespace: str | None = None) -> int | None:
        """The row of the stored memory `memory_id` (current or history; in `namespace` if given), or None."""
        row = self.ids.get(memory_id)
        if row is not None and namespace is not None and self.namespaces.get(row) != namespace:
            return None
        return row

    def id_at(self, row: int) -> str | None:
        """The id of the stored memory at `row`, or None."""
        return self.ids.id_at(row)

    def is_current(self, row: int) -> bool:
        return bool(self.alive[row])

    def created_at(self, row: int) -> str:
        """created_at of the memory at `row` ("" for a row that holds none)."""
        return (self.created.get(row) or "") if 0 <= row < len(self.created.a) else ""

    def occurred_at(self, row: int) -> str:
        return self.occurred.get(row) or ""

    def record(self, row: int) -> AddRecord:
        """The memory at `row` as a record, with its replace links (the caller knows the row holds one)."""
        newer = self.history.replaced.get(row, ("", ""))
        return AddRecord(
            self.ids.id_at(row) or self.history.forgotten.get(row, ("", ""))[0],
            self.contents.get(row),
            self.created.get(row) or "",
            self.tags[row] or (),
            self.sources[row] or "",
            row,
            self.occurred.get(row) or "",
            self.speakers.get(row),
            self.roles.get(row),
            self.sessions.get(row),
            self.namespaces.get(row),
            self.history.replaces.get(row, ""),
            newer[0],
            newer[1],
            *parse_state(self.states.get(row)),
        )

    def memory(self, row: int, duplicate: bool = False) -> Memory:
        """The memory at `row` as the contract returns it (built directly: a search builds one per hit)."""
        created = self.created.get(row) or ""
        if self.plain:  # the common case: no labels or links to read (a forgotten row: its id is in the history)
            return Memory(
                self.ids.id_at(row) or self.history.forgotten.get(row, ("",))[0],
                self.contents.get(row),
                created,
                self.tags[row] or (),
                self.sources[row] or "",
                duplicate,
                (),
                self.occurred.get(row) or created,
            )
        history = self.history
        newer = history.replaced.get(row) if history.replaced else None
        return Memory(
            self.ids.id_at(row) or (history.forgotten[row][0] if row in history.forgotten else ""),
            self.contents.get(row),
            created,
            self.tags[row] or (),
            self.sources[row] or "",
            duplicate,
            (),
            self.occurred.get(row) or created,
            self.speakers.get(row),
            self.roles.get(row),
            self.sessions.get(row),
            self.namespaces.get(row),
            history.replaces.get(row, "") if history.replaces else "",
            newer[0] if newer else "",
            *public_state(self.states.get(row)),
        )

    def duplicate_row(self, key: int, content: str, namespace: str = DEFAULT_NAMESPACE) -> int | None:
        """The current row of `namespace` whose content equals `content` (whitespace aside; the lowest such row),
        or None."""
        found = None
        text = None
        for row in self.content_keys.rows(key):
            if (found is None or row < found) and self.alive[row] and self.namespaces.get(row) == namespace:
                if text is None:
                    text = inputs.normalised(content)
                if inputs.normalised(self.contents.get(row)) == text:
                    found = row
        return found

    # --- many memories -------------------------------------------------------------------------------------------

    def live_rows(self) -> np.ndarray:
        """Every current row, ascending."""
        return np.flatnonzero(self.alive[: self.next_row])

    def stored_rows(self) -> np.ndarray:
        """Every stored row (current or history, not forgotten), ascending."""
        history = self.history.replaced_rows()
        current = self.live_rows()
        return columns.sorted_union(current, np.asarray(history, np.int64)) if history else current

    def ids_with_prefix(self, prefix: str, limit: int, namespace: str = DEFAULT_NAMESPACE) -> list[str]:
        """The ids of the stored memories of `namespace` (current or history: get() reads both) starting with
        `prefix` (lower-case hex), ascending, at most `limit`.

        A scan of the id column in numpy (a forgotten or unwritten row holds b"", which no prefix but "" matches):
        1M memories, ~20 ms. Only the lowest `limit` matches are sorted (picked by their first 8 bytes), so an
        empty prefix costs the scan, not a sort of every id.
        """
        column = self.ids.ids
        if not column.fixed:  # an id that did not fit the fixed-width column (never one made by add)
            values = column.a[: self.next_row].tolist()
            found = [v for row, v in enumerate(values) if v and v.startswith(prefix) and self._in(row, namespace)]
            return sorted(found)[:limit]
        ids = column.a[: self.next_row]
        rows = np.flatnonzero(np.char.startswith(ids, prefix.encode("ascii")) if prefix else ids != b"")
        if self.namespaces.values():  # more than the default namespace was ever used
            rows = rows[self.namespaces.matching(rows, namespace)]
        matches = ids[rows]
        if len(matches) > limit:
            heads = np.ascontiguousarray(matches.view(np.uint8).reshape(-1, column.width)[:, :8]).view(">u8").ravel()
            matches = matches[heads <= np.partition(heads, limit - 1)[limit - 1]]
        return [v.decode("ascii") for v in np.sort(matches)[:limit].tolist()]

    def _in(self, row: int, namespace: str) -> bool:
        return self.namespaces.get(row) == namespace

    def tag_names(self) -> list[str]:
        """Every tag a memory was ever stored with (some may have no current memory left)."""
        return list(self.tag_rows.names())

    def export_columns(self, namespace: str | None = None) -> ExportColumns:
        """Copies of the stored memories' columns (of `namespace`, or all), oldest first (~130 MB at 1M
        memories; records would be ~0.5 GB).

        The text buffer is shared, not copied: its bytes never change (it is only appended to, or replaced by a
        compacted copy; see columns.TextHeap), so the copy stays valid while the catalog changes; so are the
        label names (only appended to).
        """
        rows = self.stored_rows()
        if namespace is not None:
            rows = rows[self.namespaces.matching(rows, namespace)]
        rows = self.times.sort(rows)
        listed = rows.tolist()
        history = self.history
        return ExportColumns(
            rows,
            self.ids.ids.a[rows],
            self.created.a[rows],
            self.occurred.a[rows],
            self.contents.buf,
            self.contents.start[rows],
            self.contents.end[rows],
            list(map(self.tags.__getitem__, listed)),
            list(map(self.sources.__getitem__, listed)),
            tuple((labels.names, labels.codes[rows]) for labels in self.labels()),
            {row: history.replaces[row] for row in history.replaces.keys() & set(listed)},
            {row: history.replaced[row] for row in history.replaced.keys() & set(listed)},
            (self.states.names, self.states.codes[rows]),
        )


def memory_of(r: AddRecord, duplicate: bool = False) -> Memory:
    """The memory a record describes, as the contract returns it."""
    return Memory(
        r.id,
        r.content,
        r.created_at,
        r.tags,
        r.source,
        duplicate,
        (),
        r.occurred_at,
        r.speaker,
        r.role,
        r.session,
        r.namespace,
        r.replaces,
        r.replaced_by,
        r.kind,
        r.due or None,
        r.done,
        r.pinned,
        r.archived,
    )
