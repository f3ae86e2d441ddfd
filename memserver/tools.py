"""The four memory tools as MCP `Tool` constants, with hand-written JSON Schemas, and argument validation.

The schemas below are the contract: `tools/list` advertises them verbatim and `validate_arguments` checks every
`tools/call` against the very same dicts (the low-level SDK server validates nothing). Messages follow pydantic's
wording, field first: `limit: Input should be greater than or equal to 1`.

Knows nothing about the engines or the transports; the limits come from inputs.py, which the engines check too.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

import mcp_types as types

# The bounds come from inputs.py, beside the engines' own checks, so a schema never allows what an engine refuses.
# Results are bounded: no tool can dump the whole store.
from memserver.inputs import (
    ISO_DATE_PATTERN,
    MAX_CONTENT_CHARS,
    MAX_LIST,
    MAX_QUERY_CHARS,
    MAX_RECALL,
    MAX_SOURCE_CHARS,
    MAX_TAG_CHARS,
    MAX_TAGS,
    SEARCH_MODES,
)

if TYPE_CHECKING:
    from jsonschema import ValidationError as SchemaViolation

# all-MiniLM-L6-v2's cosine scale, measured in benchmarks/quality.py: the best hit of a query the store cannot
# answer scores median 0.31 (p95 0.43), a relevant memory median 0.52. A recall whose best score is below this
# gets a `note` saying there is no strong match; no results are dropped (min_score stays the caller's choice).
WEAK_MATCH_SCORE = 0.35

_TAGS = {
    "type": "array",
    "items": {"type": "string", "minLength": 1, "maxLength": MAX_TAG_CHARS},
    "maxItems": MAX_TAGS,
}
_SOURCE = {"type": "string", "maxLength": MAX_SOURCE_CHARS}

MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "string", "description": "The memory's id (use it with forget)."},
        "content": {"type": "string"},
        "created_at": {"type": "string", "description": "When it was stored, ISO 8601 UTC."},
        "tags": {"type": "array", "items": {"type": "string"}},
        "source": {"type": "string", "description": "Where it came from; empty when not given."},
    },
    "required": ["id", "content", "created_at", "tags", "source"],
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
        "explain": EXPLAIN_SCHEMA,
    },
    "required": [*MEMORY_SCHEMA["required"], "score"],
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
        "forget it by id."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "content": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_CONTENT_CHARS,
                "description": "The fact to remember, self-contained.",
            },
            "tags": {
                **_TAGS,
                "description": "Optional labels to group and filter by, e.g. ['project:x', 'preference'].",
            },
            "source": {**_SOURCE, "description": "Optional origin, e.g. 'chat', a file path or a URL."},
        },
        "required": ["content"],
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": ["stored", "duplicate"]},
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
        "does the user use?'); names, numbers and dates in it are matched exactly. Narrow it with tags, source, or "
        "a time window (since/until: an ISO 8601 date or date-time, UTC when no offset is given). Each result has "
        "a score, the cosine similarity to the query: unrelated text typically scores 0.1-0.35 (rarely above "
        "0.45), a relevant memory 0.4-0.8; min_score drops weaker results. When nothing matches, or nothing "
        f"scores {WEAK_MATCH_SCORE} or more, the result carries a 'note' saying so: do not treat such results as "
        "facts about the question."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
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
                "description": "Only memories stored at or after this ISO 8601 date or date-time.",
            },
            "until": {
                "type": "string",
                "pattern": ISO_DATE_PATTERN,
                "description": "Only memories stored at or before this ISO 8601 date or date-time.",
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
        "List the most recently stored memories, newest first, optionally only those carrying one of the given tags. "
        "Use it to review what was remembered lately or to browse a tag; use recall instead when looking for "
        "something specific."
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
        },
        "additionalProperties": False,
    },
    output_schema={
        "type": "object",
        "properties": {"memories": {"type": "array", "items": MEMORY_SCHEMA, "maxItems": MAX_LIST}},
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
        "user asks you to forget something, or when a memory is wrong or out of date (then remember the corrected "
        "fact). An id that does not exist returns deleted: false."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "memory_id": {"type": "string", "minLength": 1, "maxLength": 64, "description": "The id to delete."},
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

TOOLS: tuple[types.Tool, ...] = (REMEMBER, RECALL, LIST_RECENT, FORGET)
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
    problems = sorted(_validator(tool.name).iter_errors(args), key=lambda e: [str(p) for p in e.absolute_path])
    if problems:
        messages: list[str] = []
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


@cache
def _validator(tool_name: str) -> Any:
    # jsonschema is imported on the first tools/call, not at start-up (it is a dependency of mcp as well).
    from jsonschema import Draft202012Validator

    schema = TOOLS_BY_NAME[tool_name].input_schema
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


_TYPE_NAMES = {
    "string": "a valid string",
    "integer": "a valid integer",
    "number": "a valid number",
    "boolean": "a valid boolean",
    "array": "a valid list",
    "object": "a valid dictionary",
}

_PATTERN_HINTS = {
    ISO_DATE_PATTERN: "Input should be an ISO 8601 date or date-time, e.g. 2026-01-31 or 2026-01-31T09:30:00Z",
}


def _describe(error: SchemaViolation, root: Mapping[str, Any]) -> list[str]:
    """One jsonschema error -> 'field: rule' lines in pydantic's wording."""
    where = ".".join(str(part) for part in error.absolute_path)
    rule = error.validator
    value: Any = error.validator_value  # the schema's value for that rule (jsonschema types it loosely)
    instance: Any = error.instance
    schema = error.schema if isinstance(error.schema, Mapping) else {}

    def at(message: str, field: str = where) -> str:
        return f"{field}: {message}" if field else message

    if rule == "required":
        missing = [name for name in value if isinstance(instance, dict) and name not in instance]
        return [at("Field required", f"{where}.{name}" if where else name) for name in missing]
    if rule == "additionalProperties":
        known = list(schema.get("properties", {}))
        lines = []
        for extra in sorted(set(instance) - set(known)):
            close = difflib.get_close_matches(extra, known, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (allowed: {', '.join(known)})"
            lines.append(at("Extra inputs are not permitted" + hint, f"{where}.{extra}" if where else extra))
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
    return [at(error.message)]
