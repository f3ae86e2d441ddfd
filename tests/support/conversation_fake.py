"""A small in-memory backend with the conversation contract (namespaces, the conversation fields, replaces, pages,
bulk selection), for testing the surface (tools, resources, chat, CLI) without the engine. Arguments are checked by
inputs.py, as every engine checks them; scores are cosines of tests/fakes.FakeEmbedder's bag-of-words vectors.
Times are a clock that ticks a second per write, from 2026-05-01 09:00 UTC. The real engines are tested by
tests/contract/ and driven end to end by tests/e2e/."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from memserver.contract import inputs, requests
from memserver.contract.backend import Hit, Memory, MemoryFilter, Page, Selection
from memserver.errors import InvalidInputError
from tests.support.fakes import FakeEmbedder

START = datetime(2026, 5, 1, 9, 0, tzinfo=timezone.utc)


class ConversationFake:
    def __init__(self) -> None:
        self.memories: dict[str, Memory] = {}  # every stored memory, current and replaced, in stored order
        self.embedder = FakeEmbedder()
        self.ticks = itertools.count()
        self.ids = itertools.count(1)
        self.calls: list[tuple[str, dict[str, Any]]] = []

    # --- writing ----------------------------------------------------------------------------------------------------

    def now(self) -> str:
        return inputs.stored_time(START + timedelta(seconds=next(self.ticks)))

    def add(self, content: str, tags: Sequence[str] | None = None, source: str | None = None, **fields: Any) -> Memory:
        self.calls.append(("add", {"content": content, "tags": tags, "source": source, **fields}))
        return self._add(requests.new_memory(content, tags, source, **fields))

    def add_many(self, items: Iterable[dict[str, Any] | str]) -> list[Memory]:
        self.calls.append(("add_many", {"items": list(items) if not isinstance(items, (str, dict)) else items}))
        return [self._add(item) for item in requests.new_memories(self.calls[-1][1]["items"])]

    def _add(self, new: requests.NewMemory) -> Memory:
        for memory in self._current(new.namespace):
            if inputs.normalised(memory.content) == inputs.normalised(new.content):
                return replace(memory, duplicate=True)
        if new.replaces:
            old = self.memories.get(new.replaces)
            if old is None or old.namespace != new.namespace or old.replaced_by:
                raise InvalidInputError(f"replaces: no current memory {new.replaces} in namespace {new.namespace!r}")
        created = self.now()
        memory = Memory(
            f"{next(self.ids):032x}",
            new.content,
            created,
            new.tags,
            new.source,
            occurred_at=new.occurred_at or created,
            speaker=new.speaker,
            role=new.role,
            session=new.session,
            namespace=new.namespace,
            replaces=new.replaces,
        )
        self.memories[memory.id] = memory
        if new.replaces:
            self.memories[new.replaces] = replace(self.memories[new.replaces], replaced_by=memory.id)
        return memory

    def revision(self) -> str:
        """Changes with every write (the contract's watch token): the stored ids and who replaced whom."""
        return str(hash(tuple((m.id, m.replaced_by) for m in self.memories.values())))

    def delete(self, memory_id: str, *, namespace: str | None = None) -> bool:
        mid = inputs.check_id(memory_id)
        found = self.memories.get(mid)
        if found is None or found.namespace != inputs.check_namespace(namespace):
            return False
        del self.memories[mid]
        return True

    def delete_many(self, ids: Iterable[str], *, namespace: str | None = None) -> int:
        return sum(self.delete(mid, namespace=namespace) for mid in inputs.check_ids(ids))

    # --- reading ----------------------------------------------------------------------------------------------------

    def _current(self, namespace: str) -> list[Memory]:
        return [m for m in self.memories.values() if m.namespace == namespace and not m.replaced_by]

    def _passing(self, f: requests.SearchFilter) -> list[Memory]:
        found = []
        for m in self._current(f.namespace):
            if f.tags and not set(f.tags) & set(m.tags):
                continue
            if f.source is not None and m.source != f.source:
                continue
            if any(want is not None and want != have for want, have in _labels(f, m)):
                continue
            if f.since is not None and m.occurred_at < f.since:
                continue
            if f.until is not None and (
                m.occurred_at > f.until or (m.occurred_at == f.until and not f.until_inclusive)
            ):
                continue
            found.append(m)
        return found

    def search(self, query: str, limit: int = 5, tags: Any = None, source: Any = None, since: Any = None,
               until: Any = None, min_score: Any = None, mode: str = "hybrid", **fields: Any) -> list[Hit]:  # fmt: skip
        fields.pop("explain", None)  # this fake explains nothing (Hit.explanation stays None)
        self.calls.append(("search", {"query": query, "limit": limit, "tags": tags, "mode": mode, **fields}))
        fields.pop("query_vector", None)
        req = requests.search_request(query, limit, tags, source, since, until, min_score, mode, **fields)
        q = self.embedder.embed_query(req.query)
        cosines = ((m, float(np.dot(q, self.embedder.embed_query(m.content)))) for m in self._passing(req.filter))
        hits = [Hit(m, score, score) for m, score in cosines]
        hits.sort(key=lambda hit: -hit.score)
        if req.min_score is not None:
            hits = [hit for hit in hits if hit.score >= req.min_score]
        return hits[: req.limit]

    def get(self, memory_id: str, *, namespace: str | None = None) -> Memory | None:
        found = self.memories.get(inputs.check_id(memory_id))
        return found if found is not None and found.namespace == inputs.check_namespace(namespace) else None

    def list_recent(self, limit: int = 10, tags: Any = None, **filters: Any) -> list[Memory]:
        return self.list_page(limit, tags, **filters).memories

    def list_page(self, limit: int = 10, tags: Any = None, *, cursor: str | None = None, **filters: Any) -> Page:
        self.calls.append(("list_page", {"limit": limit, "tags": tags, "cursor": cursor, **filters}))
        req = requests.list_request(limit, tags, cursor=cursor, **filters)
        newest = sorted(self._passing(req.filter), key=lambda m: m.occurred_at, reverse=True)
        start = 0
        if req.cursor is not None:
            if not req.cursor.startswith("at:") or not req.cursor[3:].isdigit():
                raise inputs.bad_cursor(cursor)
            start = int(req.cursor[3:])
        end = start + req.limit
        return Page(newest[start:end], f"at:{end}" if end < len(newest) else None)

    def select(self, filter: MemoryFilter, limit: int | None = None) -> Selection:
        checked = requests.select_filter(filter)
        found = sorted(self._passing(checked.filter), key=lambda m: m.occurred_at, reverse=True)
        return Selection(len(found), found[: limit or 0], [m.id for m in found])

    def tag_counts(self, *, namespace: str | None = None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for m in self._current(inputs.check_namespace(namespace)):
            for tag in m.tags:
                counts[tag] = counts.get(tag, 0) + 1
        return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))

    def namespaces(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for m in self.memories.values():
            if not m.replaced_by:
                counts[m.namespace] = counts.get(m.namespace, 0) + 1
        return dict(sorted(counts.items()))

    def sessions(self, *, namespace: str | None = None) -> dict[str, int]:
        counts: dict[str, int] = {}
        for m in self._current(inputs.check_namespace(namespace)):
            if m.session:
                counts[m.session] = counts.get(m.session, 0) + 1
        return counts

    def stats(self) -> dict[str, Any]:
        return {"engine": "fake", "count": sum(self.namespaces().values()), "collection": "fake", "model": "fake",
                "dim": 384}  # fmt: skip

    def export(self, include_vectors: bool = False, *, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        return iter([m.to_dict() for m in self.memories.values()])

    def close(self) -> None:
        pass

    def __enter__(self) -> ConversationFake:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


def _labels(f: requests.SearchFilter, m: Memory) -> list[tuple[str | None, str]]:
    return [(f.speaker, m.speaker), (f.role, m.role), (f.session, m.session)]
