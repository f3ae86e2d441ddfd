"""What the memory tools answer: a memory and a hit as results show them, the result schemas, and recall's note.

`memory_result` is a memory as the tools' results show it (MEMORY_SCHEMA: compact, for the model's context);
RESULTS holds each tool's whole result schema, which the tests check every answer against and of which tools.py
advertises the `outline`; `recall_note` says plainly when a recall found nothing relevant. Knows nothing about the
engines or the transports (only the contract's Memory and limits).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memserver.contract.inputs import DEFAULT_NAMESPACE, KINDS, LIFECYCLE_FIELDS, MAX_LIST, MAX_RECALL, ROLES

if TYPE_CHECKING:
    from memserver.contract.backend import Memory

LIFECYCLE = LIFECYCLE_FIELDS  # kind, due, done, pinned, archived: shown in results when not their defaults

# all-MiniLM-L6-v2's cosine scale, measured in benchmarks/quality.py: the best hit of a query the store cannot
# answer scores median 0.31 (p95 0.43), a relevant memory median 0.52. A recall whose best score is below this
# gets a `note` saying there is no strong match; no results are dropped (min_score stays the caller's choice).
WEAK_MATCH_SCORE = 0.35

# --- the results: what a memory looks like in a tool's answer --------------------------------------------------------
# Compact, for the model's context: no empty fields, one timestamp unless two differ, to the second. The full shape
# (Memory.to_dict: both timestamps to the microsecond, every field) stays the export format and the memory://
# resources'. docs/tools.md, "Results", documents both.

MEMORY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A memory in a tool result: fields that are empty are left out.",
    "properties": {
        "id": {"type": "string", "description": "The memory's id (for forget, replaces, memory://memories/{id})."},
        "content": {"type": "string"},
        "created_at": {"type": "string", "description": "When it was stored: UTC (...Z), exact: usable as as_of."},
        "occurred_at": {
            "type": "string",
            "description": "When it happened or was said, UTC to the second; only when it differs from created_at.",
        },
        "tags": {"type": "array", "items": {"type": "string"}, "description": "Only when it has tags."},
        "source": {"type": "string", "description": "Where it came from; only when given."},
        "speaker": {"type": "string", "description": "Who said it; only when known."},
        "role": {"type": "string", "enum": list(ROLES), "description": "The speaker's role; only when known."},
        "session": {"type": "string", "description": "The conversation it belongs to; only when known."},
        "namespace": {"type": "string", "description": f"Only when not '{DEFAULT_NAMESPACE}'."},
        "replaces": {"type": "string", "description": "The id of the older memory this one updated."},
        "replaced_by": {
            "type": "string",
            "description": "The id of the newer memory that updated this one: this one is history.",
        },
        "kind": {
            "type": "string",
            "enum": list(KINDS),
            "description": "What it is; only when not 'note'.",
        },
        "due": {"type": "string", "description": "A task's due date (ISO); only when set."},
        "done": {"type": "boolean", "description": "A task marked done; only when true."},
        "pinned": {"type": "boolean", "description": "Always recalled first; only when true."},
        "archived": {"type": "boolean", "description": "Kept but out of recall and lists; only when true."},
    },
    "required": ["id", "content", "created_at"],
}


def result_time(stamp: str, exact: bool = False) -> str:
    """A stored timestamp (ISO 8601, UTC, microseconds) as results show it: to the second, with Z; `exact`: with its
    microseconds (created_at: a model passes it back as as_of, which must then include that very memory and not
    one stored later in the same second)."""
    if not stamp.endswith("+00:00") or len(stamp) < 19:
        return stamp
    return stamp[: -len("+00:00")] + "Z" if exact else stamp[:19] + "Z"


def memory_result(memory: Memory) -> dict[str, Any]:
    """A memory as a tool result shows it (MEMORY_SCHEMA): no empty fields, occurred_at only when it differs."""
    full = memory.to_dict()
    out: dict[str, Any] = {"id": memory.id, "content": memory.content}
    out["created_at"] = result_time(memory.created_at, exact=True)
    if memory.occurred_at != memory.created_at:
        out["occurred_at"] = result_time(memory.occurred_at)
    for name in ("tags", "source", "speaker", "role", "session", "namespace", "replaces", "replaced_by", *LIFECYCLE):
        if full.get(name):
            out[name] = full[name]
    return out


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

# The whole result schemas (RESULTS): what every answer is checked against in the tests, and what docs/tools.md
# documents. A tool advertises their `outline`: the top-level fields, their types and which are required (a result
# valid against the whole schema is valid against its outline).
SIMILAR_SCHEMA: dict[str, Any] = {
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
}
RESULTS: dict[str, dict[str, Any]] = {
    "remember": {
        "type": "object",
        "properties": {
            "id": {"type": "string"},
            "status": {"type": "string", "enum": ["stored", "duplicate"]},
            "replaces": {"type": "string", "description": "Present when the new memory replaced this id."},
            "note": {"type": "string", "description": "Present when something asked for did not happen."},
            "similar": SIMILAR_SCHEMA,
        },
        "required": ["id", "status"],
    },
    "recall": {
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
    "list_recent": {
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
    "forget": {
        "type": "object",
        "properties": {"id": {"type": "string"}, "deleted": {"type": "boolean"}},
        "required": ["id", "deleted"],
    },
    "mark": {
        "type": "object",
        "properties": {
            "id": {"type": "string", "description": "The memory's id now: a new version unless unchanged."},
            "status": {"type": "string", "enum": ["changed", "unchanged", "not_found"]},
            "replaces": {"type": "string", "description": "The id it had (kept as history)."},
        },
        "required": ["id", "status"],
    },
    "forget_matching": {
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
    "consolidate": {
        "type": "object",
        "properties": {
            "status": {
                "type": "string",
                "enum": ["applied", "proposed", "declined", "nothing_to_do"],
                "description": "applied: the user confirmed some; proposed: nothing applied, the user was not "
                "asked (apply with `memserver consolidate` or /ui/consolidate); declined: the user said no to each.",
            },
            "proposals": {
                "type": "array",
                "maxItems": 20,
                "description": "Each with its id, action (merge, archive), namespace, memories, merged content, "
                "evidence and outcome (applied, declined, cancelled, proposed, not_asked, failed).",
            },
            "applied": {"type": "integer", "description": "How many proposals were applied."},
            "more": {"type": "integer", "description": "Proposals found beyond those listed."},
            "note": {"type": "string", "description": "The outcome in one sentence."},
        },
        "required": ["status", "proposals", "applied", "note"],
    },
}


def outline(schema: dict[str, Any]) -> dict[str, Any]:
    """The advertised form of a result schema: its fields with their types, and which are required (no
    descriptions, bounds, enums or nested fields)."""
    return {
        "type": "object",
        "properties": {name: {"type": field["type"]} for name, field in schema["properties"].items()},
        "required": schema["required"],
    }


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
