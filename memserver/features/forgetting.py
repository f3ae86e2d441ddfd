"""What `forget_matching` asks the user, and what it answers: a bulk forget is destructive, so it happens only on an
explicit yes from the person (MCP elicitation), never on the model's word alone.

    1. the tool's arguments -> a MemoryFilter (tags: any of; source; session; namespace; before: stored before)
    2. select(filter) -> how many match, a sample (the newest SAMPLE), and every id
    3. the question: "Forget 42 memories tagged project-x?" with the sample, and one boolean field to tick
    4. the answer: accept with confirm=true -> delete_many(exactly the ids selected in 2), in one write;
       decline, cancel, confirm=false, no answer within CONFIRM_SECONDS -> nothing is deleted

server.py does the asking (elicitation/create in the handshake era, an input_required result in 2026-07-28); this
module builds the filter, the question and the payloads, and reads the answer. Blocking work: none.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from typing import Any

import mcp_types as types

from memserver.contract.backend import MemoryFilter, Selection

SAMPLE = 5  # memories shown in the question
SAMPLE_CHARS = 120  # of each
CONFIRM_SECONDS = 300.0  # how long a question waits for the person's answer (2026-07-28: how old it may be)
CONFIRM_FIELD = "confirm"
CRITERIA = ("tags", "source", "session", "namespace", "before")


def memory_filter(args: Mapping[str, Any]) -> MemoryFilter:
    """The filter the arguments describe. A namespace alone selects all of it (the person still has to say yes);
    no criterion at all is refused by the schema (minProperties), and again by the store."""
    return MemoryFilter(
        namespace=args.get("namespace"),
        tags=args.get("tags"),
        source=args.get("source"),
        session=args.get("session"),
        before=args.get("before"),
        everything=set(args) & set(CRITERIA) == {"namespace"},
    )


def described(args: Mapping[str, Any]) -> str:
    """The filter in words: "tagged project-x, stored before 2026-01-01"."""
    parts = []
    if args.get("tags"):
        parts.append("tagged " + " or ".join(args["tags"]))
    if args.get("source") is not None:
        parts.append(f"from source {args['source']!r}" if args["source"] else "without a source")
    if args.get("session"):
        parts.append(f"of session {args['session']!r}")
    if args.get("before"):
        parts.append(f"stored before {args['before']}")
    if args.get("namespace"):
        parts.append(f"in namespace {args['namespace']!r}")
    return ", ".join(parts)


def memories(n: int) -> str:
    return "1 memory" if n == 1 else f"{n} memories"


def question(selection: Selection, args: Mapping[str, Any]) -> types.ElicitRequestFormParams:
    """The elicitation form: the count, what the filter is, a sample, and one boolean to tick."""
    many = memories(selection.count)
    they = "They" if selection.count != 1 else "It"
    lines = [f"Forget {many} {described(args)}? {they} will be deleted for good."]
    if selection.sample:
        newest = (
            "The newest:" if selection.count > len(selection.sample) else f"{they} {'is' if they == 'It' else 'are'}:"
        )
        lines += ["", newest]
        for memory in selection.sample:
            text = " ".join(memory.content.split())
            shown = text if len(text) <= SAMPLE_CHARS else text[: SAMPLE_CHARS - 1] + "…"
            lines.append(f"- ({memory.occurred_at[:10]}) {shown}")
    title = "Forget them" if selection.count != 1 else "Forget it"
    schema = tick_box(
        CONFIRM_FIELD,
        title,
        f"Tick to delete {they.lower()}; leave unticked, decline or cancel to keep {they.lower()}.",
    )
    return types.ElicitRequestFormParams(message="\n".join(lines), requested_schema=schema)


def tick_box(name: str, title: str, description: str) -> dict[str, Any]:
    """An elicitation schema of one required boolean, unticked by default: the shape of every yes asked for."""
    field = {"type": "boolean", "title": title, "description": description, "default": False}
    return {"type": "object", "properties": {name: field}, "required": [name]}


def confirmed(answer: types.ElicitResult, name: str = CONFIRM_FIELD) -> bool:
    """Only an explicit yes: the form accepted with the box `name` ticked (true, not a truthy string)."""
    return answer.action == "accept" and (answer.content or {}).get(name) is True


def refusal(answer: types.ElicitResult) -> str:
    """The status of an answer that is not a yes."""
    return {"decline": "declined", "cancel": "cancelled"}.get(answer.action, "declined")


def digest(ids: list[str]) -> str:
    """What a 2026-07-28 round remembers of the selection it showed: a hash of its ids, not the ids (requestState
    goes to the client and back, so it is untrusted: a forged one can only fail to match, and then the person is
    asked again)."""
    return hashlib.sha256("\n".join(sorted(ids)).encode("ascii")).hexdigest()


def state(selection: Selection) -> str:
    """The requestState of a 2026-07-28 question: what it showed (a digest) and when it was asked."""
    return json.dumps({"v": 1, "selected": digest(selection.ids), "asked": time.time()})


def shown_digest(request_state: str | None) -> str | None:
    """The digest an echoed requestState names, or None if it names none (absent, not ours, garbled) or was asked
    more than CONFIRM_SECONDS ago (an answer to a stale question is not taken: the person is asked again)."""
    try:
        value = json.loads(request_state or "")
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("v") != 1:
        return None
    selected, asked = value.get("selected"), value.get("asked")
    if not isinstance(selected, str) or not isinstance(asked, float) or not 0 <= time.time() - asked <= CONFIRM_SECONDS:
        return None
    return selected


NOTES = {
    "forgotten": "Forgot the {matched} the user confirmed.",
    "partly forgotten": "Forgot {forgotten} of the {matched} the user confirmed (the others were gone).",
    "declined": "The user declined: nothing was forgotten ({matched} matched).",
    "cancelled": "The user dismissed the question: nothing was forgotten ({matched} matched).",
    "unanswered": "The user did not answer in time: nothing was forgotten ({matched} matched).",
    "nothing_matched": "No memory matches: nothing was forgotten.",
}


def outcome(status: str, matched: int, forgotten: int = 0) -> dict[str, Any]:
    """The tool's structured result (tools.FORGET_MATCHING's output schema)."""
    partly = status == "forgotten" and forgotten != matched
    note = NOTES["partly forgotten" if partly else status].format(matched=memories(matched), forgotten=forgotten)
    return {"status": status, "matched": matched, "forgotten": forgotten, "note": note}


def failed_to_ask(selection: Selection, reason: str) -> str:
    return (
        f"The client could not ask the user to confirm ({reason[:200]}): nothing was forgotten. "
        f"{memories(selection.count)} matched."
    )


def cannot_ask(selection: Selection) -> str:
    """The tool error for a client without elicitation (form mode)."""
    return (
        f"forget_matching needs the user's confirmation and this client cannot ask for it (it does not support MCP "
        f"elicitation): nothing was forgotten. {memories(selection.count)} matched; tell the user, who can forget "
        "them with a client that asks, or one by one."
    )


def can_ask(capabilities: types.ClientCapabilities | None) -> bool:
    """Whether the client takes form elicitations: `elicitation` declared, with `form` or (before 2025-11-25,
    which split the modes) with neither mode named."""
    elicitation = capabilities.elicitation if capabilities is not None else None
    if elicitation is None:
        return False
    return elicitation.form is not None or elicitation.url is None
