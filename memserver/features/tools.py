"""The memory tools as MCP `Tool` constants, with hand-written JSON Schemas, and argument validation.

The schemas below are the contract: `tools/list` advertises them verbatim and `validate_arguments` checks every
`tools/call` against the very same dicts (the low-level SDK server validates nothing). Messages follow pydantic's
wording, field first: `limit: Input should be greater than or equal to 1`.

Knows nothing about the engines or the transports; the limits come from inputs.py, which the engines check too.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import mcp_types as types

# The bounds come from inputs.py, beside the engines' own checks, so a schema never allows what an engine refuses.
# Results are bounded: no tool can dump the whole store.
from memserver.contract.inputs import (
    DEFAULT_NAMESPACE,
    ISO_DATE_PATTERN,
    MAX_CONTENT_CHARS,
    MAX_CURSOR_CHARS,
    MAX_LIST,
    MAX_QUERY_CHARS,
    MAX_RECALL,
    MAX_SESSION_CHARS,
    MAX_SOURCE_CHARS,
    MAX_SPEAKER_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    NAMESPACE_PATTERN,
    ROLES,
    SEARCH_MODES,
    SOURCE_PATTERN,
    TAG_PATTERN,
    TEXT_PATTERN,
)

if TYPE_CHECKING:
    from jsonschema import ValidationError as SchemaViolation

# all-MiniLM-L6-v2's cosine scale, measured in benchmarks/quality.py: the best hit of a query the store cannot
# answer scores median 0.31 (p95 0.43), a relevant memory median 0.52. A recall whose best score is below this
# gets a `note` saying there is no strong match; no results are dropped (min_score stays the caller's choice).
WEAK_MATCH_SCORE = 0.35

_TAGS = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_CHARS, "pattern": TAG_PATTERN},
    "maxItems": MAX_TAGS,
}
_SOURCE = {"type": "string", "maxLength": MAX_SOURCE_CHARS, "pattern": SOURCE_PATTERN}
# A speaker or a session is, like a tag, something other than white space and no control characters.
_SPEAKER = {"type": "string", "minLength": 1, "maxLength": MAX_SPEAKER_CHARS, "pattern": TAG_PATTERN}
_SESSION = {"type": "string", "minLength": 1, "maxLength": MAX_SESSION_CHARS, "pattern": TAG_PATTERN}
_ROLE = {"type": "string", "enum": list(ROLES)}
_NAMESPACE = {
    "type": "string",
    "pattern": NAMESPACE_PATTERN,
    "description": f"The partition to work in, e.g. 'user:alice' or 'project-x' (default '{DEFAULT_NAMESPACE}'). "
    "Memories of different namespaces never meet: give the same namespace to every call about one person or "
    "project, and none when there is only one.",
}
_MEMORY_ID = {"type": "string", "minLength": 1, "maxLength": 64}
# A next_cursor as list_recent returns it: printable ASCII, something other than spaces (what the store's check
# takes is wider: any ASCII of at most MAX_CURSOR_CHARS once trimmed).
CURSOR_PATTERN = "^[ -~]*[!-~][ -~]*(?![\\s\\S])"

MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "The memory's id (use it with forget)."},
        "content": {"type": "string"},
        "created_at": {"type": "string", "description": "When it was stored, ISO 8601 UTC."},
        "occurred_at": {
            "type": "string",
            "description": "When it happened or was said, ISO 8601 UTC (the storage time unless given).",
        },
        "tags": {"type": "array", "items": {"type": "string"}},
        "source": {"type": "string", "description": "Where it came from; empty when not given."},
        "speaker": {"type": "string", "description": "Who said it; present when known."},
        "role": {"type": "string", "enum": list(ROLES), "description": "The speaker's role; present when known."},
        "session": {"type": "string", "description": "The conversation it belongs to; present when known."},
        "namespace": {"type": "string", "description": f"Present when not '{DEFAULT_NAMESPACE}'."},
        "replaces": {"type": "string", "description": "The id of the older memory this one updated."},
        "replaced_by": {
            "type": "string",
            "description": "The id of the newer memory that updated this one: this one is history.",
        },
    },
    "required": ["id", "content", "created_at", "occurred_at", "tags", "source"],
}

# recall(explain=true): why a result ranked. "rank" always; the rest is what the engine knows (see backend.Hit).
_SIDE_RANK = {"type": ["integer", "null"], "description": "Rank in this side's pool; null: not in it."}
EXPLAIN_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Why this result ranked where it did (only with explain: true).",
    "properties": {
        "rank": {"type": "integer", "description": "Its place in the results, 1 = first."},
        "fused": {"type": "number", "description": "The hybrid score it was ordered by (sides + boosts)."},
        "semantic": {
            "type": "object",
            "description": "The meaning side: rank, cosine, the neighbouring turns' cosines, its part of 'fused'.",
            "properties": {
                "rank": _SIDE_RANK,
                "cosine": {"type": "number"},
                "previous_turn": {"type": "number"},
                "next_turn": {"type": "number"},
                "part": {"type": "number"},
            },
        },
        "keyword": {
            "type": "object",
            "description": "The word side: rank, BM25 score, the query terms (stemmed) it matched, the previous "
            "turn's match, its part of 'fused'.",
            "properties": {
                "rank": _SIDE_RANK,
                "bm25": {"type": "number"},
                "terms": {"type": "array", "items": {"type": "string"}},
                "previous_turn": {"type": "object"},
                "part": {"type": "number"},
            },
        },
        "boosts": {
            "type": "object",
            "description": "Boosts applied: speaker (the query names who said it), time_window (it happened in a "
            "period the query names), when (a 'when' question, and it mentions a time).",
        },
    },
    "required": ["rank"],
}

HIT_SCHEMA: dict[str, Any] = {
    **MEMORY_SCHEMA,
    "properties": {
        **MEMORY_SCHEMA["properties"],
        "score": {"type": "number", "description": "Cosine similarity to the query, -1..1; higher is closer."},
        "rank_score": {
            "type": "number",
            "description": "What the results are ordered by, descending: the cosine (semantic), BM25 (keyword), "
            "the fused score (hybrid); compare it only within one result list.",
        },
        "explain": EXPLAIN_SCHEMA,
    },
    "required": [*MEMORY_SCHEMA["required"], "score", "rank_score"],
}


REMEMBER = types.Tool(
    name="remember",
    title="Remember",
    description=(
        "Store a fact in long-term memory so it can be recalled in later conversations. Call it when the user "
        "tells you something worth keeping beyond this conversation (a preference, a decision, a name, a project "
        "detail, a to-do) or asks you to remember something. Write one self-contained fact per call, in plain "
        "words that will make sense on their own later (e.g. 'The user prefers tabs over spaces in Python'), not "
        "a transcript. Storing exactly the same text again stores nothing and returns status 'duplicate' with the "
        "existing id. If the new fact is very close to memories already stored (a restatement or an update), it is "
        "still stored and the result lists them under 'similar' (id, score, content): if one is now outdated, "
        "store the corrected fact with replaces set to its id (the old one is kept as history), or forget it. "
        "When storing what was said in a conversation, give speaker, role, session and occurred_at (when it was "
        "said, if not now), so that later questions about who said what, and when, can be answered."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "content": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_CONTENT_CHARS,
                "pattern": TEXT_PATTERN,
                "description": "The fact to remember, self-contained.",
            },
            "tags": {
                **_TAGS,
                "description": "Optional labels to group and filter by, e.g. ['project:x', 'preference'].",
            },
            "source": {**_SOURCE, "description": "Optional origin, e.g. 'chat', a file path or a URL."},
            "occurred_at": {
                "type": "string",
                "pattern": ISO_DATE_PATTERN,
                "description": "When it happened or was said, ISO 8601 date or date-time (UTC unless an offset "
                "is given), e.g. '2023-05-14' for an event of that day or the time of an imported chat message. "
                "Default: now. recall's since/until and list_recent's order use it.",
            },
            "speaker": {**_SPEAKER, "description": "Who said it or whom it is about, e.g. 'Alice'."},
            "role": {
                **_ROLE,
                "description": "The speaker's role in the conversation: user, assistant, participant (another "
                "person in it), system or tool.",
            },
            "session": {
                **_SESSION,
                "description": "An id of the conversation it comes from, the same for every memory of that "
                "conversation, e.g. 'chat-2026-05-14'.",
            },
            "namespace": _NAMESPACE,
            "replaces": {
                **_MEMORY_ID,
                "description": "The id of a memory this one corrects or updates (from recall, list_recent or "
                "'similar'); it is kept as history and no longer recalled.",
            },
        },
        "required": ["content"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": ["stored", "duplicate"]},
            "replaces": {"type": "string", "description": "Present when the new memory replaced this id."},
            "note": {"type": "string", "description": "Present when something asked for did not happen."},
            "similar": {
                "type": "array",
                "description": "Present when stored memories say nearly the same (restated or updated); closest first.",
                "items": {
                    "type": "object",
                    "properties": {
                        "id": {"type": "string"},
                        "score": {"type": "number", "description": "Cosine similarity to the new memory."},
                        "content": {"type": "string"},
                    },
                    "required": ["id", "score", "content"],
                },
            },
        },
        "required": ["id", "status"],
    },
    annotations=types.ToolAnnotations(
        title="Remember",
        read_only_hint=False,
        destructive_hint=False,
        idempotent_hint=True,  # the same content again is a "duplicate", not a second copy
        open_world_hint=False,
    ),
)

RECALL = types.Tool(
    name="recall",
    title="Recall memories",
    description=(
        "Search long-term memory by words and meaning and return the most relevant memories, best first. Call it "
        "before answering whenever something the user told you earlier could matter: their preferences, past "
        "decisions, names, ids, dates, project facts. Phrase the query as what you need to know ('which editor "
        "does the user use?'); names, numbers and dates in it are matched exactly. Narrow it with tags, source, "
        "speaker, role, session, or a time window (since/until bound when it happened: an ISO 8601 date or "
        "date-time, UTC when no offset is given); as_of answers as the memory stood at a past time (memories "
        "replaced or forgotten since then come back, newer ones do not). Results are ordered by rank_score (the "
        "mode's own score); each also has a score, the cosine similarity to the query: unrelated text typically "
        "scores 0.1-0.35 (rarely above 0.45), a relevant memory 0.4-0.8; min_score drops weaker results. When "
        f"nothing matches, or nothing scores {WEAK_MATCH_SCORE} or more, the result carries a 'note' saying so: "
        "do not treat such results as "
        "facts about the question."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "pattern": TEXT_PATTERN,
                "description": "What to look for, in natural language.",
            },
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_RECALL,
                "default": 5,
                "description": "How many results at most.",
            },
            "tags": {**_TAGS, "description": "Only memories carrying at least one of these tags."},
            "source": {**_SOURCE, "description": "Only memories with exactly this source."},
            "since": {
                "type": "string",
                "pattern": ISO_DATE_PATTERN,
                "description": "Only memories of things that happened at or after this ISO 8601 date or date-time.",
            },
            "until": {
                "type": "string",
                "pattern": ISO_DATE_PATTERN,
                "description": "Only memories of things that happened at or before this ISO 8601 date or "
                "date-time (a date alone includes that whole day).",
            },
            "speaker": {**_SPEAKER, "description": "Only what this speaker said (exactly as stored, e.g. 'Alice')."},
            "role": {**_ROLE, "description": "Only memories of speakers in this role."},
            "session": {**_SESSION, "description": "Only memories of this conversation."},
            "namespace": _NAMESPACE,
            "as_of": {
                "type": "string",
                "pattern": ISO_DATE_PATTERN,
                "description": "Answer as the memory stood at this ISO 8601 date-time (a date alone: the end of "
                "that day): what had been stored by then and was not yet replaced or forgotten.",
            },
            "min_score": {
                "type": "number",
                "minimum": -1,
                "maximum": 1,
                "description": "Drop results whose score (cosine similarity) is below this.",
            },
            "mode": {
                "type": "string",
                "enum": list(SEARCH_MODES),
                "default": "hybrid",
                "description": "hybrid (default) ranks by words and meaning together; semantic by meaning only; "
                "keyword by matching words only (names, ids, exact phrases).",
            },
            "explain": {
                "type": "boolean",
                "default": False,
                "description": "Also say why each result ranked (its semantic and keyword ranks, the query terms it "
                "matched, the boosts applied), and how the query was read. For judging whether to trust a result.",
            },
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "results": {"type": "array", "items": HIT_SCHEMA, "maxItems": MAX_RECALL},
            "query": {
                "type": "object",
                "description": "With explain: how the query was read (mode, its stemmed terms, the speakers and "
                "periods it names, whether it asks 'when', the fusion used).",
            },
            "note": {
                "type": "string",
                "description": "Present when nothing relevant was found: no results, or none scoring "
                f"{WEAK_MATCH_SCORE} or more.",
            },
        },
        "required": ["results"],
    },
    annotations=types.ToolAnnotations(
        title="Recall memories", read_only_hint=True, idempotent_hint=True, open_world_hint=False
    ),
)

LIST_RECENT = types.Tool(
    name="list_recent",
    title="List recent memories",
    description=(
        "List memories newest first (by when they happened), optionally only those carrying one of the given "
        "tags, of one conversation (session), or of one speaker or role. Use it to review what was remembered "
        "lately, to browse a tag, or to read a conversation back; use recall instead when looking for something "
        "specific. When there are more, the result has next_cursor: pass it as cursor to get the next page, and "
        "so on until there is no next_cursor, to see everything."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "limit": {
                "type": "integer",
                "minimum": 1,
                "maximum": MAX_LIST,
                "default": 10,
                "description": "How many memories at most.",
            },
            "tags": {**_TAGS, "description": "Only memories carrying at least one of these tags."},
            "session": {**_SESSION, "description": "Only memories of this conversation."},
            "speaker": {**_SPEAKER, "description": "Only what this speaker said."},
            "role": {**_ROLE, "description": "Only memories of speakers in this role."},
            "namespace": _NAMESPACE,
            "cursor": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_CURSOR_CHARS,
                "pattern": CURSOR_PATTERN,
                "description": "The next_cursor of the previous page, with the same filters; omit it for the "
                "first page.",
            },
        },
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "memories": {"type": "array", "items": MEMORY_SCHEMA, "maxItems": MAX_LIST},
            "next_cursor": {
                "type": "string",
                "description": "Present when there are more memories: pass it as cursor for the next page.",
            },
        },
        "required": ["memories"],
    },
    annotations=types.ToolAnnotations(
        title="List recent memories", read_only_hint=True, idempotent_hint=True, open_world_hint=False
    ),
)

FORGET = types.Tool(
    name="forget",
    title="Forget a memory",
    description=(
        "Permanently delete one memory by its id (ids come from recall, list_recent or remember). Use it when the "
        "user asks you to forget something, or when a memory is plainly wrong. To correct or update a fact, prefer "
        "remember with replaces set to the old id: the old version is kept as history. An id that does not exist "
        "(in the namespace) returns deleted: false."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "memory_id": {**_MEMORY_ID, "description": "The id to delete."},
            "namespace": _NAMESPACE,
        },
        "required": ["memory_id"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"id": {"type": "string"}, "deleted": {"type": "boolean"}},
        "required": ["id", "deleted"],
    },
    annotations=types.ToolAnnotations(
        title="Forget a memory",
        read_only_hint=False,
        destructive_hint=True,
        idempotent_hint=True,  # forgetting twice leaves the same state; the second answer is deleted: false
        open_world_hint=False,
    ),
)

# --- bulk forgetting, confirmed by the person (issue 14: elicitation) -----------------------------------------------
# A tool of its own rather than a filter on forget: forget keeps its schema and answers, and stays idempotent; this
# one says in its description that the user will be asked, so a model reaches for it only for a whole group.

FORGET_MATCHING = types.Tool(
    name="forget_matching",
    title="Forget matching memories",
    description=(
        "Permanently delete every memory matching a filter, at once: carrying any of the given tags, from a "
        "source, of a conversation session, in a namespace, and/or stored before a date (all the criteria given "
        "must hold). Use it only when the user asks to forget a whole group ('forget everything about project "
        "X'); to forget one memory use forget. Before anything is deleted the user is shown how many memories "
        "match and a sample, and asked to confirm; nothing is deleted unless they say yes, and the result says "
        "what they answered. Clients that cannot ask the user get an error and nothing is deleted."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "tags": {**_TAGS, "minItems": 1, "description": "Memories carrying at least one of these tags."},
            "source": {**_SOURCE, "description": "Memories with exactly this source."},
            "session": {**_SESSION, "description": "Memories of this conversation session."},
            "namespace": {
                **_NAMESPACE,
                "description": "The namespace to forget in (default: the default namespace); given alone, all of it.",
            },
            "before": {
                "type": "string",
                "pattern": ISO_DATE_PATTERN,
                "description": "Memories stored before this ISO 8601 date or date-time (UTC when no offset is given).",
            },
        },
        "minProperties": 1,
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "status": {
                "type": "string",
                "enum": ["forgotten", "declined", "cancelled", "unanswered", "nothing_matched"],
                "description": "forgotten: the user confirmed; otherwise nothing was deleted, and this says why.",
            },
            "matched": {"type": "integer", "description": "How many memories matched (and were shown)."},
            "forgotten": {"type": "integer", "description": "How many were deleted."},
            "note": {"type": "string", "description": "The outcome in one sentence."},
        },
        "required": ["status", "matched", "forgotten", "note"],
    },
    annotations=types.ToolAnnotations(
        title="Forget matching memories",
        read_only_hint=False,
        destructive_hint=True,
        idempotent_hint=False,  # a second call forgets what has come to match since
        open_world_hint=False,
    ),
)

TOOLS: tuple[types.Tool, ...] = (REMEMBER, RECALL, LIST_RECENT, FORGET, FORGET_MATCHING)
TOOLS_BY_NAME: dict[str, types.Tool] = {tool.name: tool for tool in TOOLS}


class ArgumentError(ValueError):
    """Arguments that break a tool's input schema; `errors` holds one 'field: rule' line per problem."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


def validate_arguments(tool: types.Tool, arguments: Mapping[str, Any] | None) -> dict[str, Any]:
    """Check `arguments` against `tool.input_schema` and return them with the schema's defaults filled in.

    Raises:
        ArgumentError: listing every problem, pydantic-style (`limit: Input should be less than or equal to 50`).
    """
    schema = tool.input_schema
    args = dict(arguments or {})
    problems = sorted(_validator(schema).iter_errors(args), key=lambda e: [str(p) for p in e.absolute_path])
    not_unicode = _lone_surrogates(args)
    if problems or not_unicode:
        messages: list[str] = list(not_unicode)
        for problem in problems:
            for message in _describe(problem, schema):
                if message not in messages:
                    messages.append(message)
        raise ArgumentError(messages)
    for name, prop in schema.get("properties", {}).items():
        if name not in args and "default" in prop:
            args[name] = prop["default"]
        elif prop.get("type") == "integer" and isinstance(args.get(name), float):
            args[name] = int(args[name])  # JSON Schema counts 5.0 as an integer; the store wants an int
    return args


def _lone_surrogates(args: dict[str, Any]) -> list[str]:
    """'field: ...' lines for strings holding a lone surrogate (which JSON can carry, and which is not text). The
    wire refuses such messages before they get here; in-process callers are checked here."""
    found: list[str] = []
    stack: list[tuple[str, Any]] = [(_shown(str(k)), v) for k, v in args.items()]
    while stack:
        where, value = stack.pop()
        if isinstance(value, str) and not _is_unicode(value):
            found.append(f"{where}: Input should be valid Unicode text, not a lone surrogate")
        elif isinstance(value, list):
            stack.extend((f"{where}.{i}", item) for i, item in enumerate(value))
    return sorted(found)


def _is_unicode(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _shown(text: str, limit: int = 64) -> str:
    """Client input as it may appear in a message: cut short (no answer repeats large input), surrogates escaped."""
    shown = text if len(text) <= limit else f"{text[:limit]}..."
    return shown.encode("utf-8", "backslashreplace").decode("utf-8")


_VALIDATORS: dict[int, tuple[Mapping[str, Any], Any]] = {}


def _validator(schema: Mapping[str, Any]) -> Any:
    """The validator of a tool's input schema, built on first use. Keyed by the schema object, not the tool name:
    the chat tool set (chat.py) has its own `remember` and `recall`."""
    cached = _VALIDATORS.get(id(schema))
    if cached is not None and cached[0] is schema:
        return cached[1]
    # jsonschema is imported on the first tools/call, not at start-up (it is a dependency of mcp as well).
    from jsonschema import Draft202012Validator

    Draft202012Validator.check_schema(schema)
    validator = Draft202012Validator(schema)
    _VALIDATORS[id(schema)] = (schema, validator)
    return validator


_TYPE_NAMES = {
    "string": "a valid string",
    "integer": "a valid integer",
    "number": "a valid number",
    "boolean": "a valid boolean",
    "array": "a valid list",
    "object": "a valid dictionary",
}

_PATTERN_HINTS = {
    ISO_DATE_PATTERN: "Input should be an ISO 8601 date or date-time between 0001-01-01 and 9999-12-31, "
    "e.g. 2026-01-31 or 2026-01-31T09:30:00Z",
    TEXT_PATTERN: "String should contain more than white space",
    TAG_PATTERN: "String should contain more than white space, and no control characters (newlines, tabs, ...)",
    SOURCE_PATTERN: "String should contain no control characters (newlines, tabs, ...)",
    NAMESPACE_PATTERN: "String should be 1-64 letters, digits or _.:@- (e.g. user:alice)",
    CURSOR_PATTERN: "String should be a next_cursor returned by list_recent",
}


def _describe(error: SchemaViolation, root: Mapping[str, Any]) -> list[str]:
    """One jsonschema error -> 'field: rule' lines in pydantic's wording."""
    where = ".".join(_shown(str(part)) for part in error.absolute_path)
    rule = error.validator
    value: Any = error.validator_value  # the schema's value for that rule (jsonschema types it loosely)
    instance: Any = error.instance
    schema = error.schema if isinstance(error.schema, Mapping) else {}

    def at(message: str, field: str = where) -> str:
        return f"{field}: {message}" if field else message

    if rule == "minProperties":
        return [at("Name at least one of: " + ", ".join(schema.get("properties", {})))]
    if rule == "minItems":
        return [at(f"List should have at least {value} item{'s' if value != 1 else ''}")]
    if rule == "required":
        missing = [name for name in value if isinstance(instance, dict) and name not in instance]
        return [at("Field required", f"{where}.{name}" if where else name) for name in missing]
    if rule == "additionalProperties":
        known = list(schema.get("properties", {}))
        lines = []
        for extra in sorted(set(instance) - set(known)):
            close = difflib.get_close_matches(extra[:100], known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(known)})"
            name = _shown(extra)
            lines.append(at("Extra inputs are not permitted" + hint, f"{where}.{name}" if where else name))
        return lines
    if rule == "type":
        wanted = value if isinstance(value, str) else value[0]
        return [at(f"Input should be {_TYPE_NAMES.get(wanted, wanted)}")]
    if rule == "minimum":
        return [at(f"Input should be greater than or equal to {value}")]
    if rule == "maximum":
        return [at(f"Input should be less than or equal to {value}")]
    if rule == "minLength":
        return [at(f"String should have at least {value} character{'s' if value != 1 else ''}")]
    if rule == "maxLength":
        return [at(f"String should have at most {value} characters")]
    if rule == "maxItems":
        return [at(f"List should have at most {value} items, not {len(instance)}")]
    if rule == "enum":
        options = [repr(option) for option in value]
        listed = options[0] if len(options) == 1 else ", ".join(options[:-1]) + " or " + options[-1]
        return [at(f"Input should be {listed}")]
    if rule == "pattern":
        return [at(_PATTERN_HINTS.get(value, f"String should match pattern {value!r}"))]
    return [at(_shown(error.message, 200))]


RECALL_FILTERS = ("tags", "source", "speaker", "role", "session", "since", "until")


def recall_note(args: dict[str, Any], scores: list[float]) -> str | None:
    """Say plainly when recall found nothing relevant, rather than let weak results pass for answers."""
    if not scores:
        if args["mode"] == "keyword":
            return "Nothing found: no memory shares a word with the query. Try mode 'hybrid' to search by meaning."
        why = []
        given = [name for name in RECALL_FILTERS if args.get(name) is not None]
        if given and not {"speaker", "role", "session"} & set(given):
            why.append("the filters (tags, source, since, until)")  # as before the conversation filters came
        elif given:
            why.append(f"the filters ({', '.join(given)})")
        if args.get("min_score") is not None:
            why.append(f"min_score {args['min_score']}")
        if why:
            return "Nothing found: no memory passed " + " and ".join(why) + "."
        where = f"namespace {args['namespace']!r}" if args.get("namespace") else "the memory"
        return f"Nothing found: {where} {'held nothing then' if args.get('as_of') else 'is empty'}."
    best = max(scores)
    if best < WEAK_MATCH_SCORE:
        return (
            f"No strong match: the best score is {best:.2f}, in the range of unrelated text (below "
            f"{WEAK_MATCH_SCORE}). These results are probably not about the query; do not rely on them."
        )
    return None
