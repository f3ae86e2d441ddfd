"""The memory:// URI scheme: what `resources/list` and `resources/templates/list` show, how a URI is parsed, and
what reading one returns. No other module parses these URIs.

    memory://stats            count, collection, storage path, model, index parameters, bytes on disk
    memory://recent           the newest memories (at most RECENT_LIMIT)
    memory://tags             every tag with its count (at most TAGS_LIMIT, most used first)
    memory://tags/{tag}       the newest memories carrying that tag (at most TAG_LIMIT); the tag percent-encoded
    memory://memories/{id}    one memory

`read` is blocking (it calls the store); the server runs it in a worker thread. Knows nothing about transports.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote, unquote

import mcp_types as types

if TYPE_CHECKING:
    from memserver.backend import MemoryBackend

SCHEME = "memory://"
JSON = "application/json"
RECENT_LIMIT = 20
TAG_LIMIT = 50
TAGS_LIMIT = 500
MAX_URI_CHARS = 1024  # the longest URI of ours, a 64-character tag percent-encoded, is under 800
_MEMORY_ID = re.compile(r"[0-9a-f]{32}")

STATS = types.Resource(
    uri="memory://stats",
    name="stats",
    title="Memory statistics",
    description="How many memories there are, where they are stored, the embedding model and index parameters.",
    mime_type=JSON,
)
RECENT = types.Resource(
    uri="memory://recent",
    name="recent",
    title="Recent memories",
    description=f"The {RECENT_LIMIT} most recently stored memories, newest first.",
    mime_type=JSON,
)
TAGS = types.Resource(
    uri="memory://tags",
    name="tags",
    title="Tags",
    description=f"Every tag in use with how many memories carry it, most used first (at most {TAGS_LIMIT}).",
    mime_type=JSON,
)
TAG_TEMPLATE = types.ResourceTemplate(
    uri_template="memory://tags/{tag}",
    name="memories-by-tag",
    title="Memories with a tag",
    description=f"The {TAG_LIMIT} newest memories carrying the tag (percent-encode the tag in the URI).",
    mime_type=JSON,
)
MEMORY_TEMPLATE = types.ResourceTemplate(
    uri_template="memory://memories/{id}",
    name="memory",
    title="One memory",
    description="A single memory by id.",
    mime_type=JSON,
)

RESOURCES: tuple[types.Resource, ...] = (STATS, RECENT, TAGS)
TEMPLATES: tuple[types.ResourceTemplate, ...] = (TAG_TEMPLATE, MEMORY_TEMPLATE)


class UnknownResourceError(LookupError):
    """The URI names nothing this server has: not a memory:// URI we serve, or a memory that does not exist."""


Kind = Literal["stats", "recent", "tags", "tag", "memory"]
_FIXED: dict[str, Kind] = {"stats": "stats", "recent": "recent", "tags": "tags"}


@dataclass(frozen=True)
class Target:
    """A parsed memory:// URI."""

    kind: Kind
    arg: str = ""


def tag_uri(tag: str) -> str:
    """The URI of the memories carrying `tag`."""
    return f"memory://tags/{quote(tag, safe='')}"


def parse(uri: str) -> Target:
    """Parse a memory:// URI.

    Raises:
        UnknownResourceError: the URI matches none of the resources or templates.
    """
    if len(uri) > MAX_URI_CHARS:
        raise UnknownResourceError(f"Unknown resource: a URI of {len(uri)} characters; ours are under {MAX_URI_CHARS}")
    if not uri.startswith(SCHEME):
        raise UnknownResourceError(f"Unknown resource: {uri} (this server serves memory:// URIs only)")
    rest = uri[len(SCHEME) :]
    if rest in _FIXED:
        return Target(_FIXED[rest])
    head, _, tail = rest.partition("/")
    if head == "tags" and tail:
        return Target("tag", unquote(tail))
    if head == "memories" and tail and "/" not in tail:
        memory_id = unquote(tail)
        if not _MEMORY_ID.fullmatch(memory_id.strip().lower()):
            raise UnknownResourceError("Unknown resource: a memory id is 32 hexadecimal characters (see recall)")
        return Target("memory", memory_id)
    raise UnknownResourceError(f"Unknown resource: {uri}")


def read(store: MemoryBackend, target: Target) -> str:
    """The JSON text of a resource (blocking: call it from a worker thread).

    Raises:
        UnknownResourceError: a memory id that does not exist.
    """
    payload: Any
    if target.kind == "stats":
        payload = store.stats()
    elif target.kind == "recent":
        payload = {"memories": [m.to_dict() for m in store.list_recent(limit=RECENT_LIMIT)]}
    elif target.kind == "tags":
        counts = sorted(store.tag_counts().items(), key=lambda item: (-item[1], item[0]))
        payload = {
            "tags": [{"tag": tag, "count": n, "uri": tag_uri(tag)} for tag, n in counts[:TAGS_LIMIT]],
            "total": len(counts),
            "truncated": len(counts) > TAGS_LIMIT,
        }
    elif target.kind == "tag":
        memories = store.list_recent(limit=TAG_LIMIT, tags=[target.arg])
        payload = {"tag": target.arg, "memories": [m.to_dict() for m in memories]}
    else:
        memory = store.get(target.arg)
        if memory is None:
            raise UnknownResourceError(f"No memory with id {target.arg!r}; use recall or list_recent to find ids")
        payload = memory.to_dict()
    return json.dumps(payload, ensure_ascii=False, default=str)
