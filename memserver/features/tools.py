"""The memory tools as MCP `Tool` constants, with hand-written JSON Schemas, and argument validation.

The schemas below are the contract: `validate_arguments` checks every `tools/call` against the whole input schema
of its tool (CHECKED; the low-level SDK server validates nothing), and `tools/list` advertises that schema less its
strict keywords (`advertised`, STRICT_ONLY: exactly where the advertised schema is looser is written down below and
in docs/tools.md) and an outline of the result schema (tool_results.py's RESULTS, `outline`), to keep the model's
context small (benchmarks/tool_list_size.py). Messages follow pydantic's wording, field first:
`limit: Input should be greater than or equal to 1`.

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
    ISO_DATE_PATTERN,
    KINDS,
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
from memserver.features.tool_results import RESULTS, WEAK_MATCH_SCORE, outline

# mark's "as": what each sets (the flag, its value).
MARKS: dict[str, tuple[str, bool]] = {
    "pinned": ("pinned", True),
    "unpinned": ("pinned", False),
    "archived": ("archived", True),
    "unarchived": ("archived", False),
    "done": ("done", True),
    "undone": ("done", False),
}

if TYPE_CHECKING:
    from jsonschema import ValidationError as SchemaViolation


# memserver's icon (spec 2025-11-25, Icon: a data: URI, SVG, any size), 199 bytes on the wire. It goes on the
# server's Implementation (serverInfo), the resources, templates and prompts; not on each tool: five copies in every
# tools/list would be ~1.2 KB of the model's context for a picture only the client's UI shows, and a client shows
# the server's icon beside its tools.
ICON = types.Icon(
    src="data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E%3Cpath d='M3 1h10v14l-5-3"
    "-5 3z' fill='%235b6ee1'/%3E%3C/svg%3E",
    mime_type="image/svg+xml",
    sizes=["any"],
)

# The contract's words in an engine's message, and the tools' words for them: an MCP client's model knows the
# tools, not the storage contract (add, list_page).
_CONTRACT_WORDS = (
    ("(as returned by add)", "(as returned by remember, recall or list_recent)"),
    ("returned by list_page", "returned by list_recent"),
)


def in_tool_words(message: str) -> str:
    """An engine's InvalidInputError message as a tool error says it: the tools' names for the contract's."""
    for contract, tool in _CONTRACT_WORDS:
        message = message.replace(contract, tool)
    return message


# --- the schemas: checked exactly, advertised compactly ---------------------------------------------------------------
# Each tool's input schema is written once, whole (`CHECKED`): validate_arguments checks every call against it. What
# tools/list advertises is that schema without the keywords in STRICT_ONLY (`advertised`): every `pattern`, every
# `minLength`/`maxLength` and `minItems`/`maxItems`. So the advertised schema is looser than the check in exactly
# these places (docs/tools.md, "What the schemas leave out"), and a value it allows may still be refused, with a
# message naming the field and the rule:
#   content, query                 non-blank (TEXT_PATTERN), at most MAX_CONTENT_CHARS / MAX_QUERY_CHARS characters
#   tags                           at most MAX_TAGS; each 1-MAX_TAG_CHARS characters, not blank, no control characters
#                                  (forget_matching: at least one tag when given)
#   source                         at most MAX_SOURCE_CHARS characters, no control characters
#   speaker, session               1-MAX_SPEAKER_CHARS / MAX_SESSION_CHARS characters, not blank, no control characters
#   namespace                      1-64 letters, digits or _.:@- (NAMESPACE_PATTERN)
#   occurred_at, since, until,     an ISO 8601 date or date-time of the real calendar, 0001-01-01..9999-12-31 once
#   as_of, before                  taken to UTC (ISO_DATE_PATTERN); the descriptions say "ISO 8601"
#   memory_id, replaces            1-64 characters (the store then wants 32 hexadecimal characters)
#   cursor                         1-MAX_CURSOR_CHARS printable ASCII characters, not blank (CURSOR_PATTERN)
# Everything else (types, enums, numeric ranges, defaults, required and unknown arguments) is advertised as checked.
# Why: those patterns were most of tools/list (the date pattern alone ~600 bytes, five times in recall), and a model
# writes "2026-05-14" from "ISO 8601" as well as from a regular expression; the check stays exact.
STRICT_ONLY = frozenset({"pattern", "minLength", "maxLength", "minItems", "maxItems"})

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
_DATE = {"type": "string", "pattern": ISO_DATE_PATTERN}
_NAMESPACE = {"type": "string", "pattern": NAMESPACE_PATTERN}
_MEMORY_ID = {"type": "string", "minLength": 1, "maxLength": 64}
_KIND = {"type": "string", "enum": list(KINDS)}
# A next_cursor as list_recent returns it: printable ASCII, something other than spaces (what the store's check
# takes is wider: any ASCII of at most MAX_CURSOR_CHARS once trimmed).
CURSOR_PATTERN = "^[ -~]*[!-~][ -~]*(?![\\s\\S])"


def advertised(schema: Any) -> Any:
    """`schema` without the STRICT_ONLY keywords, at every depth (what tools/list shows of a checked schema)."""
    if isinstance(schema, dict):
        return {key: advertised(value) for key, value in schema.items() if key not in STRICT_ONLY}
    if isinstance(schema, list):
        return [advertised(item) for item in schema]
    return schema


CHECKED: dict[str, dict[str, Any]] = {
    "remember": {
        "type": "object",
        "properties": {
            "content": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_CONTENT_CHARS,
                "pattern": TEXT_PATTERN,
                "description": "One fact that stands alone.",
            },
            "tags": _TAGS,
            "source": {**_SOURCE, "description": "e.g. 'chat', a URL"},
            "occurred_at": {**_DATE, "description": "When it happened or was said, if not now"},
            "speaker": {**_SPEAKER, "description": "Who said it"},
            "role": _ROLE,
            "session": {**_SESSION, "description": "The conversation's id"},
            "namespace": {
                **_NAMESPACE,
                "description": "A partition (e.g. user:alice) no other reads; the same for every call about one "
                "person or project",
            },
            "replaces": {**_MEMORY_ID, "description": "Id of the memory this corrects (kept as history)"},
            "kind": _KIND,
            "due": {**_DATE, "description": "A task's date"},
        },
        "required": ["content"],
        "additionalProperties": False,
    },
    "recall": {
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_QUERY_CHARS,
                "pattern": TEXT_PATTERN,
                "description": "What you need to know",
            },
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_RECALL, "default": 5},
            "tags": {**_TAGS, "description": "Any of these"},
            "source": _SOURCE,
            "since": _DATE,
            "until": {**_DATE, "description": "A date: to its end"},
            "speaker": _SPEAKER,
            "role": _ROLE,
            "session": _SESSION,
            "namespace": _NAMESPACE,
            "as_of": {**_DATE, "description": "As stored then"},
            "kind": {"type": "string"},  # the values: remember's enum; a wrong one is an error listing them
            "include_archived": {"type": "boolean"},
            "min_score": {"type": "number", "minimum": -1, "maximum": 1},
            "mode": {
                "type": "string",
                "enum": list(SEARCH_MODES),
                "default": "hybrid",
                "description": "keyword: words only (names, ids)",
            },
            "explain": {"type": "boolean", "default": False, "description": "Say why each ranked"},
        },
        "required": ["query"],
        "additionalProperties": False,
    },
    "list_recent": {
        "type": "object",
        "properties": {
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIST, "default": 10},
            "tags": {**_TAGS, "description": "Any of these"},
            "session": _SESSION,
            "speaker": _SPEAKER,
            "role": _ROLE,
            "namespace": _NAMESPACE,
            "kind": {"type": "string"},  # the values: remember's enum; a wrong one is an error listing them
            "include_archived": {"type": "boolean"},
            "cursor": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_CURSOR_CHARS,
                "pattern": CURSOR_PATTERN,
                "description": "The last page's next_cursor",
            },
        },
        "additionalProperties": False,
    },
    "forget": {
        "type": "object",
        "properties": {"memory_id": _MEMORY_ID, "namespace": _NAMESPACE},
        "required": ["memory_id"],
        "additionalProperties": False,
    },
    "mark": {
        "type": "object",
        "properties": {"memory_id": _MEMORY_ID, "as": {"type": "string", "enum": list(MARKS)}, "namespace": _NAMESPACE},
        "required": ["memory_id", "as"],
        "additionalProperties": False,
    },
    "forget_matching": {
        "type": "object",
        "properties": {
            "tags": {**_TAGS, "minItems": 1, "description": "Any of these"},
            "source": _SOURCE,
            "session": _SESSION,
            "namespace": {**_NAMESPACE, "description": "Alone: all of it"},
            "before": {**_DATE, "description": "Stored before"},
        },
        "minProperties": 1,
        "additionalProperties": False,
    },
    "consolidate": {
        "type": "object",
        "properties": {
            "namespace": _NAMESPACE,
        },
        "additionalProperties": False,
    },
}


REMEMBER = types.Tool(
    name="remember",
    title="Remember",
    description=(
        "Store one fact for later conversations: what the user told you worth keeping (a preference, decision, "
        "name, to-do) or asked you to remember, in words that stand alone later. The same text again: status "
        "'duplicate'. Close matches come back under 'similar': if one is outdated, pass its id as replaces. For "
        "a conversation give speaker, role, session, occurred_at. Dates: ISO 8601, UTC unless an offset is given."
    ),
    input_schema=advertised(CHECKED["remember"]),
    output_schema=outline(RESULTS["remember"]),
    annotations=types.ToolAnnotations(
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
        "Search memory by words and meaning; call it before answering whenever something said earlier could "
        "matter. Names, numbers and dates match exactly. since/until bound when it happened (ISO 8601); as_of "
        "answers as memory stood then. Results are ordered by rank_score; score is the cosine (unrelated text "
        f"0.1-0.35, relevant 0.4-0.8). A 'note' says when nothing scores {WEAK_MATCH_SCORE}+: then the results "
        "are not facts."
    ),
    input_schema=advertised(CHECKED["recall"]),
    output_schema=outline(RESULTS["recall"]),
    annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)

LIST_RECENT = types.Tool(
    name="list_recent",
    title="List recent memories",
    description=(
        "List memories newest first (by when they happened): to review, browse a tag or read a session back. "
        "Pass next_cursor as cursor for the next page."
    ),
    input_schema=advertised(CHECKED["list_recent"]),
    output_schema=outline(RESULTS["list_recent"]),
    annotations=types.ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False),
)

FORGET = types.Tool(
    name="forget",
    title="Forget a memory",
    description=(
        "Delete one memory by id, when asked or plainly wrong; to correct a fact use remember with replaces. "
        "An unknown id: deleted: false."
    ),
    input_schema=advertised(CHECKED["forget"]),
    output_schema=outline(RESULTS["forget"]),
    annotations=types.ToolAnnotations(
        read_only_hint=False,
        destructive_hint=True,
        idempotent_hint=True,  # forgetting twice leaves the same state; the second answer is deleted: false
        open_world_hint=False,
    ),
)

# One tool for pin/unpin, archive/unarchive, done/undone (issue 24): one schema costs less of the tool-list budget
# than six (tests/server/test_server_context_size.py).
MARK = types.Tool(
    name="mark",
    title="Mark a memory",
    description=(
        "Pin (recalled first), archive (hidden from recall) or mark a task done; un- undoes. Returns the new id."
    ),
    input_schema=advertised(CHECKED["mark"]),
    output_schema=outline(RESULTS["mark"]),
    annotations=types.ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    ),
)

# --- bulk forgetting, confirmed by the person (issue 14: elicitation) -----------------------------------------------
# A tool of its own rather than a filter on forget: forget keeps its schema and answers, and stays idempotent; this
# one says in its description that the user will be asked, so a model reaches for it only for a whole group.

FORGET_MATCHING = types.Tool(
    name="forget_matching",
    title="Forget matching memories",
    description=(
        "Delete every memory matching all criteria given, only when the user asks to forget a whole group. "
        "The user sees the count and a sample and must confirm; the result says their answer."
    ),
    input_schema=advertised(CHECKED["forget_matching"]),
    output_schema=outline(RESULTS["forget_matching"]),
    annotations=types.ToolAnnotations(
        read_only_hint=False,
        destructive_hint=True,
        idempotent_hint=False,  # a second call forgets what has come to match since
        open_world_hint=False,
    ),
)

# consolidate (issue 24): proposes, and applies a proposal only on the user's yes (elicited); a client that cannot
# ask gets the proposals only (the CLI and the browser apply them).
CONSOLIDATE = types.Tool(
    name="consolidate",
    title="Consolidate memories",
    description=(
        "Find near-duplicates to merge and stale statements to archive (history kept). The user confirms each."
    ),
    input_schema=advertised(CHECKED["consolidate"]),
    output_schema=outline(RESULTS["consolidate"]),
    annotations=types.ToolAnnotations(
        read_only_hint=False,
        destructive_hint=False,  # new versions only: merged members and stale statements are archived, not deleted
        idempotent_hint=False,
        open_world_hint=False,
    ),
)

TOOLS: tuple[types.Tool, ...] = (REMEMBER, RECALL, LIST_RECENT, FORGET, MARK, FORGET_MATCHING, CONSOLIDATE)
TOOLS_BY_NAME: dict[str, types.Tool] = {tool.name: tool for tool in TOOLS}


def checked_schema(tool: types.Tool) -> Mapping[str, Any]:
    """The schema a call of `tool` is checked against: the whole one of a memory tool written in CHECKED, else the
    tool's own (the chat tool set's, a tool that advertises its whole schema)."""
    if TOOLS_BY_NAME.get(tool.name) is tool and tool.name in CHECKED:
        return CHECKED[tool.name]
    return tool.input_schema


def prepare(tool: types.Tool, schema: Mapping[str, Any] | None = None) -> None:
    """Build the validator `validate_arguments` uses for `tool` now: its first build imports jsonschema and checks
    the schema (~100 ms), which the first call would otherwise pay (issue 26, item 5; the server's warm-up)."""
    _validator(checked_schema(tool) if schema is None else schema)


class ArgumentError(ValueError):
    """Arguments that break a tool's input schema; `errors` holds one 'field: rule' line per problem."""

    def __init__(self, errors: list[str]) -> None:
        super().__init__("\n".join(errors))
        self.errors = errors


def validate_arguments(
    tool: types.Tool, arguments: Mapping[str, Any] | None, schema: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Check `arguments` against the tool's whole schema (`schema`, else `checked_schema`) and return them with its
    defaults. (`schema`: for a tool written elsewhere that advertises less than it checks, apps.BROWSE.)

    Raises:
        ArgumentError: listing every problem, pydantic-style (`limit: Input should be less than or equal to 50`).
    """
    schema = checked_schema(tool) if schema is None else schema
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
