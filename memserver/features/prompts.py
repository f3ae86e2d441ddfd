"""The two prompts as MCP `Prompt` constants, their argument checks, and the messages `prompts/get` returns.

    recall-context    topic (required)  a user message holding the namespace's pinned memories ("always know
                      namespace         this", newest first), then the memories most relevant to the topic (hybrid
                      kind              search, best first, not repeating a pinned one), each with the day it
                                        happened, the day it was stored when another, its kind when not a note, and
                                        its tags, ready to paste into a conversation; of the hits only those in the
                                        range of relevant text (WEAK_MATCH_SCORE; none of them but the pinned when
                                        none is, else the best few under a warning); pinned and hits together bounded
                                        to RECALL_LIMIT memories and MAX_PROMPT_CHARS (many pins leave less room for
                                        hits); from `namespace` if given (else the default); with `kind`, only
                                        memories of that kind (pinned ones too)
    remember-session  focus (optional)  asks the model to pick out the facts of this conversation worth keeping
                                        and store each with `remember`, reusing the tags already in use

Prompts are user-controlled (the spec's word): a client shows them as slash commands or menu entries and sends the
result to the model as if the user had typed it. Arguments are strings. A prompt that does not exist or an argument
that is missing is a protocol error (spec, prompts: -32602); `check_arguments` says which.

`render` is blocking (it calls the store); the server runs it in a worker thread. Knows nothing about transports.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import mcp_types as types

from memserver.contract import inputs, lifecycle
from memserver.features import tool_results, tools

if TYPE_CHECKING:
    from memserver.contract.backend import Memory, MemoryBackend

RECALL_LIMIT = 10  # memories in a recall-context message at most: those scoring tool_results.WEAK_MATCH_SCORE or more
WEAK_LIMIT = 3  # when none does, the best few, under a warning
MAX_PROMPT_CHARS = 12_000  # the whole recall-context message at most (about 3k tokens)
MAX_MEMORY_CHARS = 1_500  # one memory in it at most; longer ones are cut with an ellipsis
MAX_ARGUMENT_CHARS = inputs.MAX_QUERY_CHARS
SESSION_TAGS = 30  # tags in use that remember-session lists, most used first

RECALL_CONTEXT = types.Prompt(
    name="recall-context",
    title="Recall context",
    description=(
        "A message holding the pinned memories, then those most relevant to a topic (searched by words and "
        f"meaning, best first, each with the day it happened and its tags; at most {RECALL_LIMIT} in all), to "
        "start or steer a conversation with what was remembered before."
    ),
    arguments=[
        types.PromptArgument(
            name="topic",
            description="What the conversation is about, e.g. 'the kitchen renovation' or a tag such as 'project-x'.",
            required=True,
        ),
        types.PromptArgument(
            name="namespace",
            description="Optional: whose or which memories, e.g. 'user:alice' or 'project-x' (default: the default "
            "namespace).",
            required=False,
        ),
        types.PromptArgument(
            name="kind",
            description=f"Optional: only memories of this kind ({', '.join(inputs.KINDS)}), e.g. 'task'.",
            required=False,
        ),
    ],
    icons=[tools.ICON],
)

REMEMBER_SESSION = types.Prompt(
    name="remember-session",
    title="Remember this session",
    description=(
        "Asks the model to pick out the facts of this conversation worth keeping (preferences, decisions, names, "
        "dates, commitments) and store each one with the remember tool."
    ),
    arguments=[
        types.PromptArgument(
            name="focus",
            description="Optional: what to concentrate on, e.g. 'decisions' or a project name.",
            required=False,
        )
    ],
    icons=[tools.ICON],
)

PROMPTS: tuple[types.Prompt, ...] = (RECALL_CONTEXT, REMEMBER_SESSION)
PROMPTS_BY_NAME: dict[str, types.Prompt] = {prompt.name: prompt for prompt in PROMPTS}


class UnknownPromptError(LookupError):
    """prompts/get (or completion/complete) named a prompt this server does not have."""


class PromptArgumentError(ValueError):
    """A prompt's arguments are missing, unknown, blank or too long; the message says which and what to do."""


def find(name: str) -> types.Prompt:
    """The prompt called `name`.

    Raises:
        UnknownPromptError: no such prompt; the message lists the ones there are.
    """
    prompt = PROMPTS_BY_NAME.get(name)
    if prompt is None:
        raise UnknownPromptError(f"Unknown prompt: {name} (prompts: {', '.join(PROMPTS_BY_NAME)})")
    return prompt


def check_arguments(prompt: types.Prompt, arguments: Mapping[str, str] | None) -> dict[str, str]:
    """The arguments of a prompts/get, checked against the prompt's declared arguments and stripped.

    Raises:
        PromptArgumentError: a required argument is missing or blank, an argument is unknown, or one is too long.
    """
    declared = {argument.name: argument for argument in prompt.arguments or []}
    given = dict(arguments or {})
    for name in given:
        if name not in declared:
            close = difflib.get_close_matches(name, list(declared), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else f" (arguments: {', '.join(declared) or 'none'})"
            raise PromptArgumentError(f"Prompt {prompt.name} has no argument {name!r}{hint}")
    checked: dict[str, str] = {}
    for name, argument in declared.items():
        value = given.get(name, "").strip()
        if not value:
            if argument.required:
                raise PromptArgumentError(f"Missing required argument {name!r} of prompt {prompt.name}")
            continue
        if len(value) > MAX_ARGUMENT_CHARS:
            raise PromptArgumentError(f"Argument {name!r} is longer than {MAX_ARGUMENT_CHARS} characters")
        checked[name] = value
    return checked


def render(store: MemoryBackend, prompt: types.Prompt, arguments: Mapping[str, str]) -> types.GetPromptResult:
    """The prompts/get result for checked `arguments` (blocking: call it from a worker thread)."""
    if prompt.name == RECALL_CONTEXT.name:
        return _recall_context(store, arguments["topic"], arguments.get("namespace"), arguments.get("kind"))
    return _remember_session(store, arguments.get("focus"))


def _recall_context(store: MemoryBackend, topic: str, namespace: str | None, kind: str | None) -> types.GetPromptResult:
    # (an InvalidInputError for a namespace or kind that cannot be one: the server answers -32602)
    kinds = list(inputs.check_kinds(kind)) or None
    pins = [m for m in lifecycle.pinned(store, namespace) if kinds is None or m.kind in kinds]
    given: dict[str, Any] = {"namespace": namespace} if namespace is not None else {}
    given |= {"kinds": kinds} if kinds else {}  # (only what was given: the call reads as before without them)
    hits = store.search(topic, limit=RECALL_LIMIT, mode="hybrid", **given)
    where = (f" (namespace {namespace})" if namespace else "") + (f" (only {kind} memories)" if kind else "")
    if not hits and not pins:
        text = f'My long-term memory (memserver) has nothing about "{topic}"{where}.'
        return _user_message(f"No memories about {topic!r}", text)
    first = "the pinned ones (always keep these in mind) first, then the most relevant" if pins else ""
    first = first or "most relevant first"
    lines = [f'What my long-term memory (memserver) holds about "{topic}"{where}, {first}:', ""]
    best = max((hit.score for hit in hits), default=1.0)
    if best < tool_results.WEAK_MATCH_SCORE and pins:  # the pinned ones are the answer; unrelated hits would be noise
        hits = []
    elif best < tool_results.WEAK_MATCH_SCORE:
        lines[1:1] = [f"None of these is a strong match for the topic (best score {best:.2f}); they may be unrelated."]
        hits = hits[:WEAK_LIMIT]
    else:  # unrelated memories are noise in a conversation: only those in the range of relevant text, and those
        # the topic names by a tag (the search ranks them first, whatever their words)
        hits = [
            hit for hit in hits if hit.score >= tool_results.WEAK_MATCH_SCORE or _names_a_tag(topic, hit.memory.tags)
        ]
    pinned_ids = {m.id for m in pins}
    memories = [*pins, *(hit.memory for hit in hits if hit.memory.id not in pinned_ids)][:RECALL_LIMIT]
    used = sum(len(line) + 1 for line in lines)
    shown = 0
    for memory in memories:
        line = f"{shown + 1}. {_memory_line(memory)}"
        if used + len(line) + 1 > MAX_PROMPT_CHARS - 200:  # keep room for the closing line
            break
        lines.append(line)
        used += len(line) + 1
        shown += 1
    lines += ["", "These notes come from earlier conversations and may be out of date; use them as background."]
    return _user_message(f"{shown} {'memory' if shown == 1 else 'memories'} about {topic!r}", "\n".join(lines))


def _names_a_tag(topic: str, tags: Sequence[str]) -> bool:
    """Whether `topic` is one of `tags`, compared as the keyword search compares them (case, spaces and punctuation
    aside: "project falcon" names project-falcon)."""
    key = "".join(ch for ch in topic.casefold() if ch.isalnum())
    return bool(key) and any("".join(ch for ch in tag.casefold() if ch.isalnum()) == key for tag in tags)


def _memory_line(memory: Memory) -> str:
    """One memory as a line: (date; pinned, kind; tags) content, the content cut at MAX_MEMORY_CHARS. The date is
    when it happened (occurred_at), with the day it was stored when that is another day: an imported or backdated
    memory must not read as today's."""
    content = " ".join(memory.content.split())
    if len(content) > MAX_MEMORY_CHARS:
        content = content[: MAX_MEMORY_CHARS - 1].rstrip() + "…"
    label = date_label(memory) + (f"; {kind_label(memory)}" if kind_label(memory) else "")
    label += f"; tags: {', '.join(memory.tags)}" if memory.tags else ""
    return f"({label}) {content}"


def kind_label(memory: Memory) -> str:
    """'pinned, task, due 2026-12-20, done': what a memory is, "" for an unpinned note."""
    parts = ["pinned"] if memory.pinned else []
    parts += [memory.kind] if memory.kind != "note" else []
    parts += [f"due {memory.due}"] if memory.due else []
    parts += ["done"] if memory.done else []
    return ", ".join(parts)


def date_label(memory: Memory) -> str:
    """'2026-11-25' (the day it happened), or '2026-11-25, stored 2026-12-01' when it was stored on another day."""
    happened, stored = memory.occurred_at[:10], memory.created_at[:10]
    return happened if happened == stored else f"{happened}, stored {stored}"


def _remember_session(store: MemoryBackend, focus: str | None) -> types.GetPromptResult:
    counts = store.tag_counts()
    tags = sorted(counts, key=lambda tag: (-counts[tag], tag))[:SESSION_TAGS]
    what = f", concentrating on {focus}" if focus else ""
    lines = [
        f"Look back over our conversation so far and pick out the facts worth remembering beyond it{what}: "
        "preferences, decisions, names, dates, commitments, project details. Leave out small talk, passing details "
        "and anything you already stored.",
        "",
        "Store each fact with the remember tool, one self-contained fact per call, written so it makes sense on its "
        "own later (e.g. 'The user prefers tabs over spaces in Python'), with tags where they help. If a fact "
        "changed since it was stored (remember lists close matches under 'similar'), store the new fact with "
        "replaces set to the old one's id: the old one is kept as history. Use forget only for what is plainly "
        "wrong or what I ask you to forget. Then tell me in one short list what you stored.",
    ]
    if tags:
        lines += ["", f"Tags already in use (reuse them where they fit): {', '.join(tags)}."]
    return _user_message("Store the facts of this conversation worth keeping", "\n".join(lines))


def _user_message(description: str, text: str) -> types.GetPromptResult:
    return types.GetPromptResult(
        description=description,
        messages=[types.PromptMessage(role="user", content=types.TextContent(type="text", text=text))],
    )
