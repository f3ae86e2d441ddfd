"""The in-chat memory browser: an MCP App, so that a host which renders apps shows it in the conversation.

The extension is MCP Apps, `io.modelcontextprotocol/ui`: SEP-1865, "MCP Apps: Interactive User Interfaces for MCP",
stable version 2026-01-26, https://github.com/modelcontextprotocol/ext-apps/blob/main/specification/2026-01-26/apps.mdx
(summary: https://modelcontextprotocol.io/seps/1865-mcp-apps-interactive-user-interfaces-for-mcp). What is followed,
by the spec's sections:

- "UI Resource Format": the page is one `ui://` resource (URI) served as `text/html;profile=mcp-app` (the SDK's
  `mcp.server.apps.APP_MIME_TYPE`), a complete HTML5 document (app_page.html, beside this module). Its `_meta.ui`,
  on the resources/list entry and on the resources/read content alike, declares `csp` with no external domain of
  any kind (the host then allows no connection, no outside script, style, image or frame) and `prefersBorder`.
  The page adds a policy of its own (a `<meta>` Content-Security-Policy, `page()`): only its one script and one
  style, by hash, may run, so even markup that slipped into the document could not execute.
- "Resource Discovery": the `browse_memories` tool (BROWSE) names the page in `_meta.ui.resourceUri`, and in the
  deprecated flat `_meta["ui/resourceUri"]` that older hosts still read (the ext-apps SDK's `registerAppTool` sets
  both). Visibility is left at its default, model and app.
- "Client<>Server Capability Negotiation": the server advertises the extension under `capabilities.extensions`
  (SEP-2133; `EXTENSION_ID`, server.py), a field of 2026-07-28: the SDK's 2025-11-25 wire models drop it from the
  initialize result, and hosts of that era find the page through the tool's `_meta` alone. "Graceful Degradation":
  the tool returns a meaningful text whether or not the host renders the page: the counts, the newest memories (or
  the best matches of `query`) with their ids, and how to go on with recall, memory://memories/{id} and forget
  (`browse`). The tool is listed to every client; a host that does not know the extension ignores the `_meta`.
- "Communication Protocol", "Standard MCP Messages", "Lifecycle": the page is a JSON-RPC 2.0 peer of the host over
  postMessage. It sends `ui/initialize` (protocolVersion 2026-01-26) and, once answered,
  `ui/notifications/initialized`; it then reads the memory tools through the host's proxy: `tools/call` of recall,
  list_recent and forget (only after a confirmation in the page), and `resources/read` of memory://memories/{id}
  for a memory with its history. It takes `ui/notifications/tool-input` (the tool's query and namespace: the page
  opens on that search), follows `ui/notifications/host-context-changed` and the `hostContext` of the initialize
  result ("Theming": `theme` light or dark, the standard CSS variables), reports its height with
  `ui/notifications/size-changed` ("Container Dimensions"), and answers `ui/resource-teardown` and `ping`.

Nothing here touches the store but `browse`, which a worker thread runs like the other tools' work (tool_work.py).
"""

from __future__ import annotations

import base64
import hashlib
import re
from functools import cache
from importlib import resources as package_files
from typing import TYPE_CHECKING, Any

import mcp_types as types
from mcp.server.apps import APP_MIME_TYPE, EXTENSION_ID

from memserver.contract.inputs import DEFAULT_NAMESPACE, MAX_QUERY_CHARS, NAMESPACE_PATTERN
from memserver.features.resources import UnknownResourceError
from memserver.features.tools import ICON, advertised

if TYPE_CHECKING:
    from memserver.contract.backend import Memory, MemoryBackend

__all__ = [
    "APP_MIME_TYPE",
    "BROWSE",
    "CHECKED_INPUT",
    "EXTENSION_ID",
    "RESOURCE",
    "SCHEME",
    "URI",
    "browse",
    "page",
    "read",
]

SCHEME = "ui://"
URI = "ui://memserver/browser"
LEGACY_URI_KEY = "ui/resourceUri"  # the flat tool _meta key, deprecated by the spec, still read by older hosts
PAGE_FILE = "app_page.html"
NEWEST = 5  # memories the text overview shows
TOP_TAGS = 8  # tags it names
CONTENT_CHARS = 160  # each memory's content cut to this in the overview

# No domain in any list: the page needs nothing from the network. ("Empty or omitted = no external connections";
# spelled out, so that a reviewer of the resource sees it.)
UI_META: dict[str, Any] = {
    "csp": {"connectDomains": [], "resourceDomains": [], "frameDomains": [], "baseUriDomains": []},
    "prefersBorder": True,
}

RESOURCE = types.Resource(
    uri=URI,
    name="memory-browser",
    title="Memory browser",
    description="The in-chat memory browser (an MCP App, shown by browse_memories): search, history, forget.",
    mime_type=APP_MIME_TYPE,
    icons=[ICON],
    _meta={"ui": UI_META},
)

# The whole schema a call is checked against (ToolSet.checked); tools/list shows it less the strict keywords, as it
# shows the memory tools' (tools.py, STRICT_ONLY).
CHECKED_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {
        "query": {"type": "string", "minLength": 1, "maxLength": MAX_QUERY_CHARS},  # (the store refuses blanks)
        "namespace": {"type": "string", "pattern": NAMESPACE_PATTERN},
    },
    "additionalProperties": False,
}

BROWSE = types.Tool(
    name="browse_memories",
    title="Browse memories",
    description=(
        "Show the user their memories: counts, the newest or the best matches for query, with ids. Hosts with MCP "
        "Apps show a browser: search, history, forget."
    ),
    input_schema=advertised(CHECKED_INPUT),
    annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
    _meta={"ui": {"resourceUri": URI}, LEGACY_URI_KEY: URI},
)

_BLOCK = re.compile(r"<(script|style)>(.*?)</\1>", re.DOTALL)
_POLICY_SLOT = "__CONTENT_SECURITY_POLICY__"


@cache
def page() -> str:
    """The browser's HTML, with its own Content-Security-Policy filled in (read once, on the first request).

    The policy allows exactly the page's inline script and style, by their SHA-256, and nothing else: no other
    script, no network (connect-src), no frames, forms or base URL. It only narrows what the host's policy allows.
    """
    html = package_files.files("memserver.features").joinpath(PAGE_FILE).read_text(encoding="utf-8")
    hashes: dict[str, list[str]] = {"script": [], "style": []}
    for kind, body in _BLOCK.findall(html):
        digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode("ascii")
        hashes[kind].append(f"'sha256-{digest}'")
    policy = (
        f"default-src 'none'; script-src {' '.join(hashes['script'])}; style-src {' '.join(hashes['style'])}; "
        "img-src data:; connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'none'; form-action 'none'"
    )
    return html.replace(_POLICY_SLOT, policy, 1)


def read(uri: str, served: tuple[types.Resource, ...]) -> types.TextResourceContents:
    """resources/read of a `ui://` URI: the page, if `served` (the tool set's app resources) has it.

    Raises:
        UnknownResourceError: any other `ui://` URI (the server answers -32602, as for an unknown memory:// URI).
    """
    if uri != URI or RESOURCE not in served:
        raise UnknownResourceError(f"Unknown resource: the only ui:// resource of this server is {URI}")
    return types.TextResourceContents(uri=URI, mime_type=APP_MIME_TYPE, text=page(), _meta={"ui": UI_META})


def browse(store: MemoryBackend, args: dict[str, Any]) -> str:
    """browse_memories' answer, plain text for the model and for hosts without apps (blocking: a worker thread).

    How many memories there are (here and in all), the newest few or the best matches of `query` with their
    ids, the most used tags, and what to call next.
    """
    namespace = args.get("namespace")
    query = args.get("query")
    counts = store.namespaces()
    here = counts.get(namespace or DEFAULT_NAMESPACE, 0)
    where = f" in namespace {namespace}" if namespace else ""
    lines = [_headline(here, where, counts)]
    if here:
        if query:
            hits = store.search(query, limit=NEWEST, namespace=namespace)
            lines.append(f"Best matches for {_quoted(query)}:" if hits else f"Nothing matches {_quoted(query)}.")
            lines += [_line(hit.memory, f"score {hit.score:.2f}") for hit in hits]
        else:
            lines.append(f"Newest {min(here, NEWEST)}:")
            lines += [_line(memory) for memory in store.list_recent(limit=NEWEST, namespace=namespace)]
        tags = list(store.tag_counts(namespace=namespace).items())[:TOP_TAGS]
        if tags:
            lines.append("Most used tags: " + ", ".join(f"{tag} ({n})" for tag, n in tags) + ".")
        lines.append(
            "Next: recall searches them by words and meaning; list_recent pages through them; reading "
            "memory://memories/{id} shows one with its history; forget deletes one by id."
        )
    else:
        lines.append("remember stores one.")
    return "\n".join(lines)


def _headline(here: int, where: str, counts: dict[str, int]) -> str:
    text = f"{here} {'memory' if here == 1 else 'memories'}{where}"
    total = sum(counts.values())
    if len(counts) > 1 or total != here:
        text += f" ({total} in {len(counts)} {'namespace' if len(counts) == 1 else 'namespaces'})"
    return text + "."


def _line(memory: Memory, *extra: str) -> str:
    """One memory on one line: id, when, what else matters, and the content cut short, its white space collapsed."""
    content = " ".join(memory.content.split())
    if len(content) > CONTENT_CHARS:
        content = content[: CONTENT_CHARS - 1] + "…"
    facts = [memory.occurred_at[:10], *extra]
    if memory.tags:
        facts.append("tags " + ", ".join(memory.tags))
    if memory.speaker:
        facts.append(f"speaker {memory.speaker}")
    return f"- {memory.id} ({'; '.join(facts)}): {content}"


def _quoted(query: str, limit: int = 80) -> str:
    """The query as the answer repeats it: on one line, cut short."""
    text = " ".join(query.split())
    return f'"{text if len(text) <= limit else text[: limit - 1] + "…"}"'
