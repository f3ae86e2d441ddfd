"""The write rules both engines apply, one copy: a memory on its way to storage (`Pending`), which items of a write
are duplicates (per namespace), and what each item may replace.

An engine runs them where its writes are serialised (the local store under its locks, PostgreSQL inside the write
transaction after its content locks), so two writers adding the same content, or replacing the same memory, at once
cannot both win. The rules ask the engine only what `RuleLookup` names, so this module never reads a catalog or a
row and imports no numpy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NamedTuple, Protocol

from memserver.contract import inputs, requests
from memserver.contract.backend import Memory

if TYPE_CHECKING:
    import numpy as np

__all__ = ["Link", "Pending", "RuleLookup", "check_links", "without_duplicates"]


@dataclass(eq=False)  # compared by identity (the engines ask which items were held back)
class Pending:
    """A checked memory on its way to storage (`vector` set once embedded; `dup_of` an earlier item; `where` the
    prefix naming it in messages: "", "items[3]." or "records[3].")."""

    m: requests.NewMemory
    key: int  # inputs.content_key(m.content)
    where: str = ""
    id: str = ""
    created_at: str = ""
    vector: np.ndarray | None = None
    dup_of: int = -1  # index of an earlier item with the same content in the same batch

    @classmethod
    def of(cls, m: requests.NewMemory, where: str = "") -> Pending:
        return cls(m, inputs.content_key(m.content), where, m.id, m.created_at, m.vector)

    @property
    def history(self) -> bool:
        """An imported memory that is history from the start (its newer version is not in the store)."""
        return bool(self.m.replaced_by)


class Link(NamedTuple):
    """What the replace rule reads of a stored memory: its namespace, whether it is current, what replaced it."""

    namespace: str | None
    current: bool
    replaced_by: str  # "" if current


class RuleLookup(Protocol):
    """What the rules ask an engine, about what is stored as the write sees it."""

    def same_content(self, item: Pending) -> Memory | None:
        """The current memory of the item's namespace with its content (whitespace aside), as a duplicate
        (Memory.duplicate set), or None."""
        ...

    def with_id(self, memory_id: str) -> Memory | None:
        """The stored memory `memory_id` (current or history, not forgotten) as a duplicate, or None."""
        ...

    def link(self, memory_id: str) -> Link | None:
        """The stored memory `memory_id` (current or history, not forgotten) as the replace rule reads it, or None."""
        ...


def without_duplicates(lookup: RuleLookup, items: list[Pending]) -> tuple[list[Pending], list[Memory | None]]:
    """The items to write (`fresh`), and for the others the stored memory they duplicate (a current memory of
    their namespace with the same content, unless it is the memory the item replaces and the item changes its other
    fields, or an imported id that is stored); an item repeating an earlier one of
    `items` gets `dup_of` and None (it is written as that one). History (imported, already replaced) is matched by
    id only: its content may well equal a current memory's."""
    fresh: list[Pending] = []
    out: list[Memory | None] = [None] * len(items)
    first: dict[tuple[str, str], int] = {}  # (namespace, normalised content) -> first item
    for i, it in enumerate(items):
        it.dup_of = -1
        existing = None if it.history else lookup.same_content(it)
        if existing is not None and existing.id == it.m.replaces and _changes_fields(it.m, existing):
            existing = None  # a new version of that very memory, its tags, speaker, time, ... changed: stored
        if existing is None and it.id:
            existing = lookup.with_id(it.id)  # an imported id that is stored already
        text = (it.m.namespace, inputs.normalised(it.m.content))
        if existing is not None:
            out[i] = existing
        elif text in first and not it.history:
            it.dup_of = first[text]
        else:
            if not it.history:
                first[text] = i
            fresh.append(it)
    return fresh, out


def _changes_fields(m: requests.NewMemory, old: Memory) -> bool:
    """Whether a memory replacing `old` with the same content says something else of it (tags, source, speaker,
    role, session, or occurred_at when given)."""
    given = (m.tags, m.source, m.speaker, m.role, m.session, m.kind, m.due, m.done, m.pinned, m.archived)
    held = (old.tags, old.source, old.speaker, old.role, old.session, old.kind, old.due or "", old.done)
    return given != (*held, old.pinned, old.archived) or (m.occurred_at not in ("", old.occurred_at))


def check_links(lookup: RuleLookup, items: Sequence[Pending], defer: bool = False) -> list[Pending]:
    """Check what each item replaces: a current memory of its namespace (or of an earlier item), replaced by no
    other item. Raises InvalidInputError naming `<where>replaces`; with `defer`, an item whose memory is not (yet)
    there is returned instead (an import resolves it after the rest). The other items may be written."""
    deferred: list[Pending] = []
    earlier: dict[str, Pending] = {}  # id -> item of this batch (imports: ids are known before writing)
    taken: set[str] = set()
    for it in items:
        target = it.m.replaces
        if target:
            name = f"{it.where}replaces"
            if target in taken:
                raise inputs.replaced_twice(name, target)
            stored = lookup.link(target)
            before = earlier.get(target)
            if before is not None:
                if before.m.namespace != it.m.namespace:
                    raise inputs.no_such_memory(name, target, it.m.namespace)
                if before.history and before.m.replaced_by != it.id:
                    raise inputs.already_replaced(name, target, before.m.replaced_by)
            elif stored is None or stored.namespace != it.m.namespace:
                if defer:
                    deferred.append(it)
                    continue
                raise inputs.no_such_memory(name, target, it.m.namespace)
            elif not stored.current:
                by = stored.replaced_by
                if not it.id or by != it.id:  # (an import may name the memory that named it as its newer version)
                    raise inputs.already_replaced(name, target, by)
            taken.add(target)
        if it.id:
            earlier[it.id] = it
    return deferred
