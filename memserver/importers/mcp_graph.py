"""The official MCP memory server's knowledge graph (`memory.jsonl`): one JSON object a line, either
`{"type": "entity", "name", "entityType", "observations": [...]}` or `{"type": "relation", "from", "to",
"relationType"}`. Each observation becomes a memory "NAME: OBSERVATION" tagged with the entity type (an entity
without observations, "NAME (TYPE)"); each relation a memory "FROM RELATION TO". Sources:
`mcp-memory:NAME#N` (the N-th observation) and `mcp-memory:FROM|RELATION|TO`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memserver.importers.entries import Broken, Entry, ImportFormatError, Malformed, Record, Skip, expect

TAG = "mcp-memory"


def read(path: Path, user: str = "user") -> Iterator[Entry]:
    """Every entity's observations and every relation of the graph, in line order (`user` is not used)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{path}: byte {exc.start}: not UTF-8 text") from None
    except OSError as exc:
        raise ImportFormatError(f"cannot read {path}: {exc.strerror or exc}") from None
    for number, line in enumerate(lines, 1):
        at = f"line {number}"
        if not line.strip():
            continue
        try:
            try:
                item = json.loads(line)
            except json.JSONDecodeError as exc:
                raise Malformed(f"{at} column {exc.colno}", f"not JSON ({exc.msg})") from None
            yield from _item(item, at)
        except Malformed as exc:
            yield Broken(exc.position, exc.problem)


def _item(item: Any, at: str) -> list[Entry]:
    expect(item, dict, at, "a JSON object")
    kind = item.get("type")
    if kind == "entity":
        name = _label(item.get("name"), f"{at}: name")
        entity_type = _label(item.get("entityType"), f"{at}: entityType")
        observations = expect(item.get("observations", []), list, f"{at}: observations", "an array of strings")
        tags = [TAG, entity_type]
        if not observations:
            return [Record(at, f"{name} ({entity_type})", f"{TAG}:{name}", {"tags": tags})]
        out: list[Entry] = []
        for i, observation in enumerate(observations):
            text = expect(observation, str, f"{at}: observations[{i}]", "a string")
            if not text.strip():
                out.append(Skip(f"{at}: observations[{i}]", "empty observation"))
                continue
            out.append(Record(f"{at}: observations[{i}]", f"{name}: {text}", f"{TAG}:{name}#{i}", {"tags": tags}))
        return out
    if kind == "relation":
        source, target = _label(item.get("from"), f"{at}: from"), _label(item.get("to"), f"{at}: to")
        relation = _label(item.get("relationType"), f"{at}: relationType")
        content = f"{source} {relation.replace('_', ' ')} {target}"
        return [Record(at, content, f"{TAG}:{source}|{relation}|{target}", {"tags": [TAG, "relation"]})]
    raise Malformed(f"{at}: type", f'expected "entity" or "relation", got {kind!r}')


def _label(value: Any, at: str) -> str:
    text = str(expect(value, str, at, "a string")).strip()
    if not text:
        raise Malformed(at, "expected a non-empty string")
    return text
