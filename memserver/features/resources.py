"""The memory:// URI scheme: what `resources/list` and `resources/templates/list` show, how a URI is parsed, and
what reading one returns. No other module parses these URIs.

    memory://stats            count, collection, storage path, model, index parameters, bytes on disk
    memory://recent           the newest memories (at most RECENT_LIMIT)
    memory://tags             every tag with its count (at most TAGS_LIMIT, most used first)
    memory://kinds            current memories by kind (fact, task, note, ...), and how many are archived
    memory://namespaces       every namespace with its count (at most NAMESPACES_LIMIT, by name)
    memory://health           the store's health: each check ok, warning or failure, with advice (contract/health.py)
    memory://overview         a namespace in a few hundred tokens: counts by tag, month, speaker; this week's changes
    memory://tags/{tag}       the newest memories carrying that tag (at most TAG_LIMIT); the tag percent-encoded
    memory://memories/{id}    one memory, with its history (the versions it replaced and that replaced it)

Every URI takes `?namespace=NAME` (percent-encoded): it then reads that namespace instead of the default one
(memory://stats adds the namespace's count; memory://namespaces lists them all either way). Nothing else may
follow the `?`.

`read` is blocking (it calls the store); the server runs it in a worker thread. Knows nothing about transports.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, unquote

import mcp_types as types

from memserver.contract import inputs
from memserver.features import tools

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend

SCHEME = "memory://"
JSON = "application/json"
RECENT_LIMIT = 20
TAG_LIMIT = 50
TAGS_LIMIT = 500
NAMESPACES_LIMIT = 500
MAX_URI_CHARS = 1024  # the longest URI of ours, a 64-character tag and a namespace percent-encoded, is under 1000
_MEMORY_ID = re.compile(r"[0-9a-f]{32}")
_NAMESPACE = re.compile(inputs.NAMESPACE_PATTERN)
_NAMESPACE_NOTE = " Every memory:// URI takes ?namespace=NAME to read another namespace than the default one."

STATS = types.Resource(
    uri="memory://stats",
    name="stats",
    title="Memory statistics",
    description="How many memories there are, where they are stored, the embedding model and index parameters.",
    mime_type=JSON,
    icons=[tools.ICON],
)
RECENT = types.Resource(
    uri="memory://recent",
    name="recent",
    title="Recent memories",
    description=f"The {RECENT_LIMIT} newest memories, by when they happened, newest first." + _NAMESPACE_NOTE,
    mime_type=JSON,
    icons=[tools.ICON],
)
TAGS = types.Resource(
    uri="memory://tags",
    name="tags",
    title="Tags",
    description=f"Every tag in use with how many memories carry it, most used first (at most {TAGS_LIMIT}).",
    mime_type=JSON,
    icons=[tools.ICON],
)
KINDS = types.Resource(
    uri="memory://kinds",
    name="kinds",
    title="Kinds",
    description="How many memories of each kind (fact, preference, decision, task, ...; note by default), and how "
    "many are archived (out of recall)." + _NAMESPACE_NOTE,
    mime_type=JSON,
    icons=[tools.ICON],
)
NAMESPACES = types.Resource(
    uri="memory://namespaces",
    name="namespaces",
    title="Namespaces",
    description="Every namespace (a person's or a project's partition of the memories) with how many memories it "
    f"holds and its memory://recent URI (at most {NAMESPACES_LIMIT}, by name).",
    mime_type=JSON,
    icons=[tools.ICON],
)
HEALTH = types.Resource(
    uri="memory://health",
    name="health",
    title="Memory health",
    description="How the memory store is doing: engine, version, the model and its check, the indexes, the last "
    "checkpoint and journal (local), reachability and schema (PostgreSQL), compaction, disk; each check ok, "
    "warning or failure, with advice.",
    mime_type=JSON,
    icons=[tools.ICON],
)
OVERVIEW = types.Resource(
    uri="memory://overview",
    name="overview",
    title="Memory overview",
    description="A namespace in a few hundred tokens: how many memories, the most used tags, memories by month and "
    "by speaker, and what was added this week." + _NAMESPACE_NOTE,
    mime_type=JSON,
    icons=[tools.ICON],
)
TAG_TEMPLATE = types.ResourceTemplate(
    uri_template="memory://tags/{tag}",
    name="memories-by-tag",
    title="Memories with a tag",
    description=f"The {TAG_LIMIT} newest memories carrying the tag (percent-encode the tag in the URI).",
    mime_type=JSON,
    icons=[tools.ICON],
)
MEMORY_TEMPLATE = types.ResourceTemplate(
    uri_template="memory://memories/{id}",
    name="memory",
    title="One memory",
    description="A single memory by id, with its history: the older versions it replaced and the newer ones that "
    "replaced it (ids and dates).",
    mime_type=JSON,
    icons=[tools.ICON],
)

RESOURCES: tuple[types.Resource, ...] = (STATS, RECENT, TAGS, KINDS, NAMESPACES, HEALTH, OVERVIEW)
TEMPLATES: tuple[types.ResourceTemplate, ...] = (TAG_TEMPLATE, MEMORY_TEMPLATE)


class UnknownResourceError(LookupError):
    """The URI names nothing this server has: not a memory:// URI we serve, or a memory that does not exist."""


Kind = Literal["stats", "recent", "tags", "kinds", "namespaces", "health", "overview", "tag", "memory"]
_FIXED: dict[str, Kind] = {
    "stats": "stats",
    "recent": "recent",
    "tags": "tags",
    "kinds": "kinds",
    "namespaces": "namespaces",
    "health": "health",
    "overview": "overview",
}


@dataclass(frozen=True)
class Target:
    """A parsed memory:// URI. `namespace` None: the default namespace (no ?namespace= in the URI)."""

    kind: Kind
    arg: str = ""
    namespace: str | None = None


def tag_uri(tag: str, namespace: str | None = None) -> str:
    """The URI of the memories carrying `tag` (in `namespace`)."""
    return f"memory://tags/{quote(tag, safe='')}" + _query(namespace)


def memory_uri(memory_id: str, namespace: str | None = None) -> str:
    """The URI of one memory (in `namespace`; None or the default: no query)."""
    return f"memory://memories/{memory_id}" + _query(None if namespace == inputs.DEFAULT_NAMESPACE else namespace)


def memory_link(memory_id: str, namespace: str | None = None) -> types.ResourceLink:
    """A tool result's link to one memory (resources/read gives it whole, with its history)."""
    return types.ResourceLink(name=memory_id, uri=memory_uri(memory_id, namespace), mime_type=JSON)


def recent_uri(namespace: str | None = None) -> str:
    """The URI of the newest memories (of `namespace`)."""
    return "memory://recent" + _query(namespace)


def _query(namespace: str | None) -> str:
    return f"?namespace={quote(namespace, safe='')}" if namespace is not None else ""


def parse(uri: str) -> Target:
    """Parse a memory:// URI. The messages never repeat the URI's query, tag or id (they may be anything).

    Raises:
        UnknownResourceError: the URI matches none of the resources or templates.
    """
    if len(uri) > MAX_URI_CHARS:
        raise UnknownResourceError(f"Unknown resource: a URI of {len(uri)} characters; ours are under {MAX_URI_CHARS}")
    if not uri.startswith(SCHEME):
        raise UnknownResourceError(f"Unknown resource: {uri} (this server serves memory:// URIs only)")
    rest, _, query = uri[len(SCHEME) :].partition("?")
    namespace = _namespace(query) if query or uri.endswith("?") else None
    if rest in _FIXED:
        return Target(_FIXED[rest], namespace=namespace)
    head, _, tail = rest.partition("/")
    if head == "tags" and tail:
        return Target("tag", unquote(tail), namespace)
    if head == "memories" and tail and "/" not in tail:
        memory_id = unquote(tail)
        if not _MEMORY_ID.fullmatch(memory_id.strip().lower()):
            raise UnknownResourceError("Unknown resource: a memory id is 32 hexadecimal characters (see recall)")
        return Target("memory", memory_id, namespace)
    raise UnknownResourceError(f"Unknown resource: {uri.partition('?')[0]}")


def _namespace(query: str) -> str:
    """The NAME of a `namespace=NAME` query; anything else is refused."""
    key, equals, value = query.partition("=")
    name = unquote(value)
    if key != "namespace" or not equals or "&" in value or "=" in value:
        raise UnknownResourceError("Unknown resource: the only query a memory:// URI takes is ?namespace=NAME")
    if not _NAMESPACE.match(name) or name != name.strip():
        raise UnknownResourceError(
            f"Unknown resource: a namespace is 1-{inputs.MAX_NAMESPACE_CHARS} letters, digits or _.:@- "
            "(percent-encoded in the URI)"
        )
    return name


def read(store: MemoryBackend, target: Target) -> str:
    """The JSON text of a resource (blocking: call it from a worker thread).

    Raises:
        UnknownResourceError: a memory id that does not exist (in the namespace).
    """
    from memserver.contract import overview, versions  # (a read's, not start-up's: the server imports this module)

    payload: Any
    namespace = target.namespace
    if target.kind == "stats":
        payload = store.stats()
        if namespace is not None:
            payload = {**payload, "namespace": {"name": namespace, "count": store.namespaces().get(namespace, 0)}}
    elif target.kind == "recent":
        payload = {"memories": [m.to_dict() for m in store.list_recent(limit=RECENT_LIMIT, namespace=namespace)]}
    elif target.kind == "tags":
        counts = sorted(store.tag_counts(namespace=namespace).items(), key=lambda item: (-item[1], item[0]))
        payload = {
            "tags": [{"tag": tag, "count": n, "uri": tag_uri(tag, namespace)} for tag, n in counts[:TAGS_LIMIT]],
            "total": len(counts),
            "truncated": len(counts) > TAGS_LIMIT,
        }
    elif target.kind == "kinds":
        payload = kind_counts(store, namespace)
    elif target.kind == "namespaces":
        names = sorted(store.namespaces().items())
        payload = {
            "namespaces": [
                {"namespace": name, "count": n, "uri": recent_uri(None if name == inputs.DEFAULT_NAMESPACE else name)}
                for name, n in names[:NAMESPACES_LIMIT]
            ],
            "total": len(names),
            "truncated": len(names) > NAMESPACES_LIMIT,
        }
    elif target.kind == "health":
        payload = store.health()
    elif target.kind == "overview":
        payload = overview.overview(store, namespace)
    elif target.kind == "tag":
        memories = store.list_recent(limit=TAG_LIMIT, tags=[target.arg], namespace=namespace)
        payload = {"tag": target.arg, "memories": [m.to_dict() for m in memories]}
    else:
        memory = store.get(target.arg, namespace=namespace)
        if memory is None:
            where = " in that namespace" if namespace is not None else ""
            raise UnknownResourceError(f"No memory with that id{where}; use recall or list_recent to find ids")
        payload = memory.to_dict()
        chain = versions.history(store, memory)
        if chain is not None:
            payload["history"] = chain
    return json.dumps(payload, ensure_ascii=False, default=str)


def kind_counts(store: MemoryBackend, namespace: str | None) -> dict[str, Any]:
    """{"kinds": {kind: current, unarchived memories}, kinds without any left out; "archived": how many are},
    through the contract's select (a count per kind)."""
    from memserver.contract.backend import MemoryFilter

    counts = {}
    for kind in inputs.KINDS:
        n = store.select(MemoryFilter(namespace=namespace, kinds=[kind])).count
        if n:
            counts[kind] = n
    shown = store.select(MemoryFilter(namespace=namespace, everything=True)).count
    every = store.select(MemoryFilter(namespace=namespace, everything=True, include_archived=True)).count
    return {"kinds": counts, "archived": every - shown}
