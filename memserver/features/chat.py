"""The chat-memory interface (CleverChatty's `"interface": "memory"`), served by `memserver serve --tools chat`.

An assistant framework calls `remember(role, message)` with every chat message and `recall()` before each prompt,
and puts what recall returns in front of its model; `search_in_memory(data)` is a plain search its model may call.
Plain text in, plain text out. No LLM is involved (unless `--chat-condense` asks the client's own model).

Sessions. A conversation is the messages of one client connection (stdio: the server process; HTTP: the MCP
session, `mcp-session-id`; a 2026-07-28 HTTP client, which has no session, gets one conversation per user). A
conversation is split into sessions: the first message starts one, and a message that comes after an idle gap
(`idle_minutes` since the previous message) starts the next. Each message is stored as a memory with role,
speaker (the role's display name), session, source "chat" and occurred_at = now, in the chat namespace
(`--chat-namespace`, default CHAT_NAMESPACE): apart from the curated facts (the memory tools' namespace, `default`),
so that assistant chatter never outranks them there; a user's message that states a standing fact about themselves
(FIRST_PERSON, below) is tagged `profile` as well. recall() and search_in_memory read both namespaces.

What `recall()` returns, within `budget` characters, built in this order:
  (p) always know this: the pinned memories of both namespaces (lifecycle.pinned), newest first, shown whole; they
      take up to PINNED_SHARE of the budget first, and the sections below share what is left;
  (a) this conversation: the most recent turns of the current session, from this server's own record of the
      connection (the store keeps one copy of an exact repeat such as "yes", which would otherwise vanish);
  (c) about the user: memories tagged `profile` (of both namespaces), newest first: for a chat message, only its
      first-person sentences ("I live in Porto."), else the whole memory; not those already in (a);
  (b) earlier conversations: the memories most relevant to the latest user message (recall's `query` when the
      client passes one): hybrid search in each namespace, those of cosine at least tool_results.WEAK_MATCH_SCORE, in
      each search's own ranking, the namespaces' lists taken in turn (the curated facts' first), as many of the
      RELEVANT_CANDIDATES as fit, without memories of the current session or already shown whole in (a) or (c) (a
      message of which (c) showed only its first-person sentences may be shown whole here).
Each section first takes up to its share of the budget (SHARES: (a) 35%, (c) 25%, (b) 40%); what a section leaves
unused goes to the others, in the order (b), (a), (c), (p). A line is cut at `line_cap` characters with an
ellipsis. No section repeats a memory (p) showed. The block lists (p), (c), (b), (a), (a) oldest first; every
line is `- [YYYY-MM-DD HH:MM] Speaker: text` (UTC). With nothing to show it is "none", which CleverChatty reads as
no memory.

Knows the storage contract only. The tools' work is blocking (store calls); the server runs it in worker threads.
"""

from __future__ import annotations

import logging
import re
import secrets
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import partial
from itertools import zip_longest
from typing import TYPE_CHECKING, Any

import mcp_types as types

from memserver.contract import inputs, lifecycle
from memserver.errors import InvalidInputError
from memserver.features import tool_results

if TYPE_CHECKING:
    from memserver.contract.backend import Hit, Memory, MemoryBackend

logger = logging.getLogger(__name__)

DEFAULT_BUDGET = 4000  # characters of a recall() block
MIN_BUDGET = 200
DEFAULT_IDLE_MINUTES = 30.0
CHAT_NAMESPACE = "chat"  # where the turns go unless --chat-namespace says otherwise
PROFILE_TAG = "profile"
SOURCE = "chat"
SHARES = {"recent": 0.35, "profile": 0.25, "relevant": 0.40}
REFILL_ORDER = ("relevant", "recent", "profile", "pinned")  # who gets what a section leaves unused
PINNED_SHARE = 0.5  # the pinned memories' part of the budget at most, taken before the others
# Hits searched for (b), as many shown as fit: at 20 the block was short of hits, not of budget (issue 28: 40, in
# the search's ranking rather than by cosine, showed more evidence on every conversation set, no question type
# losing; benchmarks/README.md, "Retrieval III").
RELEVANT_CANDIDATES = 40
PROFILE_CANDIDATES = 100  # profile memories looked at for (c), newest first
SEARCH_LIMIT = 5  # results of search_in_memory
MAX_MESSAGE_CHARS = 10 * inputs.MAX_CONTENT_CHARS  # a longer message is refused; a long one is stored in pieces
TURNS_KEPT = 200  # turns of the current session this server keeps per conversation
CONVERSATIONS_KEPT = 1000  # conversations tracked at once (HTTP sessions end unannounced); the oldest go first

Conversation = tuple[str | None, str | None]
"""Whose and which connection: (the token's user or None, the MCP session id or None)."""

# --- the three tools, names and arguments as in the interface (seeds/003) -------------------------------------------

REMEMBER = types.Tool(
    name="remember",
    title="Remember a chat message",
    description=(
        "Store a chat message for later context recall. Call it with every message of the conversation: the "
        "user's (role 'user') and the assistant's (role 'assistant'). Returns 'ok'."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "role": {
                "type": "string",
                "enum": list(inputs.ROLES),
                "description": "Who wrote the message: 'user' or 'assistant' (or participant, system, tool).",
            },
            "message": {
                "type": "string",
                "maxLength": MAX_MESSAGE_CHARS,
                "description": "The message's text. A blank message is accepted and stores nothing.",
            },
            "contents": {
                "type": "string",
                "maxLength": MAX_MESSAGE_CHARS,
                "description": "The same as message, under the name CleverChatty's client sends; give one of them.",
            },
        },
        "required": ["role"],
    },
)

RECALL = types.Tool(
    name="recall",
    title="Recall the conversation context",
    description=(
        "Return a context summary from previous conversations: what the user said about themselves, what earlier "
        "conversations said about the latest message, and this conversation's recent turns, each line with its "
        "date and speaker; 'none' when there is nothing. Call it before each prompt."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "query": {
                "type": "string",
                "maxLength": inputs.MAX_QUERY_CHARS,
                "description": "Optional: what the coming prompt is about (CleverChatty passes the prompt). "
                "Default: the latest user message remembered in this conversation.",
            },
        },
        "required": [],
    },
    annotations=types.ToolAnnotations(title="Recall the conversation context", read_only_hint=True),
)

SEARCH_IN_MEMORY = types.Tool(
    name="search_in_memory",
    title="Search memory",
    description=(
        "Search all remembered conversations and facts by words and meaning; returns the best matches as text, one "
        "per line with date and speaker. Use it when the user asks about something said or decided earlier."
    ),
    input_schema={
        "type": "object",
        "properties": {
            "data": {
                "type": "string",
                "minLength": 1,
                "maxLength": inputs.MAX_QUERY_CHARS,
                "pattern": inputs.TEXT_PATTERN,
                "description": "What to look for, in plain words.",
            },
        },
        "required": ["data"],
    },
    annotations=types.ToolAnnotations(title="Search memory", read_only_hint=True),
)

TOOLS: tuple[types.Tool, ...] = (REMEMBER, RECALL, SEARCH_IN_MEMORY)
INSTRUCTIONS = (
    "memserver keeps this assistant's conversation memory (the chat-memory interface). Call remember(role, message) "
    "with every message of the conversation, and recall() before each prompt: put what it returns (unless 'none') "
    "in front of the model. search_in_memory(data) searches everything remembered."
)

# --- standing facts: what a user says about themselves ----------------------------------------------------------------

# A sentence that starts (after a filler such as "btw,") with one of these states a standing fact about the speaker.
FIRST_PERSON = re.compile(
    r"(?:i am|i'm|im|i've|i have|i live|i lived|i work|i worked|i prefer|i like|i love|i hate|i dislike|"
    r"i don't like|i do not like|i can't stand|i'd rather|i usually|i always|i never|i own|i use|i study|"
    r"i speak|i was born|i grew up|i moved|my name is|my name's|call me|"
    r"my (?:wife|husband|partner|girlfriend|boyfriend|son|daughter|kids?|children|mother|mom|mum|father|dad|"
    r"sister|brother|family|dog|cat|pet|birthday|job|work|email|phone|address|home|favou?rite|hobby|hobbies)\b)",
    re.IGNORECASE,
)
# ... unless it is only about the moment.
_TRANSIENT = re.compile(
    r"(?:i'm|i am|im) (?:sorry|not sure|thinking|wondering|going to|gonna|trying|looking|just|here|back|done|"
    r"fine|ok|okay|good|glad|afraid|asking|curious|confused|ready|about to)\b",
    re.IGNORECASE,
)
_FILLER = re.compile(r"^(?:(?:also|btw|by the way|actually|oh|and|well|so|fyi|just so you know|anyway)[,:]?\s+)+", re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def first_person_sentences(text: str) -> list[str]:
    """The sentences of `text` in which the speaker states a standing fact about themselves (not questions)."""
    found = []
    for sentence in _SENTENCE_END.split(text.replace("\u2019", "'")):
        sentence = " ".join(sentence.split())
        core = _FILLER.sub("", sentence)
        if len(core) < 8 or sentence.endswith("?") or _TRANSIENT.match(core):
            continue
        if FIRST_PERSON.match(core):
            found.append(sentence)
    return found


# --- configuration and state ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ChatOptions:
    """`memserver serve --tools chat`'s --chat-* flags."""

    budget: int = DEFAULT_BUDGET
    idle_minutes: float = DEFAULT_IDLE_MINUTES
    user_name: str = "User"
    assistant_name: str = "Assistant"
    namespace: str = CHAT_NAMESPACE  # the turns' namespace
    facts_namespace: str = inputs.DEFAULT_NAMESPACE  # the curated facts' (read, never written)
    condense: bool = False

    def __post_init__(self) -> None:
        if self.budget < MIN_BUDGET:
            raise ValueError(f"the recall budget must be at least {MIN_BUDGET} characters, got {self.budget}")
        if not self.idle_minutes > 0:
            raise ValueError(f"the idle gap must be more than 0 minutes, got {self.idle_minutes}")
        inputs.check_speaker(self.user_name, "user name")
        inputs.check_speaker(self.assistant_name, "assistant name")
        inputs.check_namespace(self.namespace)
        inputs.check_namespace(self.facts_namespace)

    @property
    def read_namespaces(self) -> tuple[str, ...]:
        """What recall() and search_in_memory read: the turns' namespace, and the curated facts' when another."""
        return tuple(dict.fromkeys([self.namespace, self.facts_namespace]))

    @property
    def line_cap(self) -> int:
        """The longest line of a recall() block."""
        return max(60, min(600, self.budget // 5))

    def speaker(self, role: str) -> str:
        if role == "user":
            return self.user_name
        if role == "assistant":
            return self.assistant_name
        return role.capitalize()


@dataclass(frozen=True)
class Turn:
    """One message of the current session, as this server received it."""

    memory_id: str
    role: str
    speaker: str
    text: str
    occurred_at: str


@dataclass
class ChatSession:
    id: str
    last_message: float  # clock() of the latest message
    turns: deque[Turn] = field(default_factory=lambda: deque(maxlen=TURNS_KEPT))


@dataclass(frozen=True)
class ContextBlock:
    """A recall() block that the server may have the client's model condense (MCP sampling, --chat-condense)."""

    text: str
    budget: int

    def sampling_request(self) -> tuple[str, str]:
        """(system prompt, user message) asking a model to condense the block within the budget."""
        system = (
            "You condense an assistant's memory notes. Keep every fact, name, date and preference that could matter "
            "in the coming conversation; drop small talk and repetition. Keep each remaining note's date and "
            f"speaker. Answer with the condensed notes only, at most {self.budget} characters."
        )
        return system, self.text


Work = Callable[["MemoryBackend", dict[str, Any]], "str | ContextBlock"]


class ChatMemory:
    """The chat tool set's state (the sessions of each conversation) and work (the three tools).

    `clock` measures idle gaps (seconds, monotonic); tests inject one. Safe to call from several threads.
    """

    def __init__(self, options: ChatOptions | None = None, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.options = options or ChatOptions()
        self.clock = clock
        self._sessions: OrderedDict[Conversation, ChatSession] = OrderedDict()
        self._lock = threading.Lock()

    def work(self, name: str, conversation: Conversation) -> Work:
        """The work of tool `name` for a call from `conversation`."""
        if name == REMEMBER.name:
            return partial(self.remember, conversation)
        if name == RECALL.name:
            return partial(self.recall, conversation)
        return self.search

    # --- sessions ---------------------------------------------------------------------------------------------------

    def session_id(self, conversation: Conversation) -> str | None:
        """The id of the conversation's current session; None before its first message or after the idle gap."""
        with self._lock:
            session = self._current(conversation)
            return session.id if session is not None else None

    def _current(self, conversation: Conversation) -> ChatSession | None:
        session = self._sessions.get(conversation)
        if session is None or self.clock() - session.last_message > self.options.idle_minutes * 60:
            return None
        return session

    def _session_for_message(self, conversation: Conversation) -> ChatSession:
        """The session a message arriving now belongs to: the current one, or a new one."""
        with self._lock:
            session = self._current(conversation)
            if session is None:
                stamp = datetime.now(timezone.utc).strftime("%Y%m%d-%H%M%S")
                session = ChatSession(f"chat-{stamp}-{secrets.token_hex(3)}", self.clock())
                self._sessions[conversation] = session
                logger.info("chat session %s started", session.id)
            session.last_message = self.clock()
            self._sessions.move_to_end(conversation)
            while len(self._sessions) > CONVERSATIONS_KEPT:
                self._sessions.popitem(last=False)
            return session

    # --- the tools ----------------------------------------------------------------------------------------------------

    def remember(self, conversation: Conversation, store: MemoryBackend, args: dict[str, Any]) -> str:
        """remember(role, message): store the message in the conversation's current session; 'ok'."""
        role = args["role"]
        text = _message(args)
        if not text.strip():
            return "ok"  # nothing to keep (a tool-call-only turn, say)
        session = self._session_for_message(conversation)
        speaker = self.options.speaker(role)
        tags = [PROFILE_TAG] if role == "user" and first_person_sentences(text) else None
        items = [
            {
                "content": piece,
                "tags": tags,
                "source": SOURCE,
                "speaker": speaker,
                "role": role,
                "session": session.id,
                "namespace": self.options.namespace,
            }
            for piece in _pieces(text.strip(), inputs.MAX_CONTENT_CHARS)
        ]
        stored = store.add_many(items)  # one write for all the pieces
        with self._lock:
            for memory in stored:  # a duplicate carries the earlier copy's time: this turn is now
                said = inputs.now() if memory.duplicate else memory.occurred_at
                session.turns.append(Turn(memory.id, role, speaker, memory.content, said))
        return "ok"

    def recall(self, conversation: Conversation, store: MemoryBackend, args: dict[str, Any]) -> str | ContextBlock:
        """recall(): the context block (see the module docstring), or 'none'."""
        with self._lock:
            session = self._current(conversation)
            session_id = session.id if session is not None else None
            turns = list(session.turns) if session is not None else []
        query = (args.get("query") or "").strip()
        if not query:
            query = next((turn.text for turn in reversed(turns) if turn.role == "user"), "")
        spaces = self.options.read_namespaces
        listed = [store.list_recent(PROFILE_CANDIDATES, tags=[PROFILE_TAG], namespace=space) for space in spaces]
        profile = sorted((m for memories in listed for m in memories), key=lambda m: m.occurred_at, reverse=True)
        profile = profile[:PROFILE_CANDIDATES]
        pins = [m for space in spaces for m in lifecycle.pinned(store, space)]
        pins.sort(key=lambda m: m.occurred_at, reverse=True)
        relevant: list[Memory] = []
        if query:
            hits = self._ranked(store, query[: inputs.MAX_QUERY_CHARS], RELEVANT_CANDIDATES)
            relevant = [hit.memory for hit in hits if not (session_id and hit.memory.session == session_id)]
        text = assemble(turns, profile, relevant, self.options, pins)
        if self.options.condense and text != NONE:
            return ContextBlock(text, self.options.budget)
        return text

    def _search(self, store: MemoryBackend, query: str, limit: int) -> list[Hit]:
        """The best `limit` hits of the read namespaces, by cosine (each search's own rank_score has its own scale);
        on a tie the curated fact first."""
        found: list[tuple[float, int, Hit]] = []
        for order, space in enumerate(reversed(self.options.read_namespaces)):  # the facts' namespace first
            found += [(-hit.score, order, hit) for hit in store.search(query, limit=limit, namespace=space)]
        found.sort(key=lambda item: item[:2])
        return [hit for *_, hit in found[:limit]]

    def _ranked(self, store: MemoryBackend, query: str, limit: int) -> list[Hit]:
        """The hits of cosine at least tool_results.WEAK_MATCH_SCORE of the read namespaces, each search in its own
        ranking order (what its fusion found best first), the lists taken in turn, the curated facts' first; `limit`
        in all."""
        lists = [
            [
                hit
                for hit in store.search(query, limit=limit, namespace=space)
                if hit.score >= tool_results.WEAK_MATCH_SCORE
            ]
            for space in reversed(self.options.read_namespaces)  # the facts' namespace first
        ]
        merged = [hit for rank in zip_longest(*lists) for hit in rank if hit is not None]
        return merged[:limit]

    def search(self, store: MemoryBackend, args: dict[str, Any]) -> str:
        """search_in_memory(data): the best matches as numbered lines."""
        hits = self._search(store, args["data"], SEARCH_LIMIT)
        if not hits:
            return "No results found"
        lines = []
        if max(hit.score for hit in hits) < tool_results.WEAK_MATCH_SCORE:
            lines.append("No strong match; the closest memories, probably unrelated:")
        cap = self.options.line_cap
        for n, hit in enumerate(hits, 1):
            lines.append(_cut(f"{n}. {label(hit.memory, self.options)}", cap) + f" (score {hit.score:.2f})")
        return "\n".join(lines)


# --- assembly ------------------------------------------------------------------------------------------------------

NONE = "none"
HEADER = "What memserver remembers (times UTC):"
PINNED_HEADING = "Always keep in mind (pinned):"
HEADINGS = {
    "profile": "About the user:",
    "relevant": "From earlier conversations, about the latest message:",
    "recent": "This conversation so far:",
}


@dataclass(frozen=True)
class _Line:
    memory_id: str
    text: str
    occurred_at: str
    whole: bool = True  # False: a profile memory's first-person sentences only


@dataclass
class _Section:
    name: str
    candidates: list[_Line]  # in the order they are taken
    share: int
    taken: list[_Line] = field(default_factory=list)
    next: int = 0


def assemble(
    turns: Sequence[Turn],
    profile: Sequence[Memory],
    relevant: Sequence[Memory],
    options: ChatOptions,
    pinned: Sequence[Memory] = (),
) -> str:
    """The recall() block from its sources, within `options.budget` characters (see the module docstring)."""
    cap = options.line_cap
    room = options.budget - len(HEADER) - 1
    pins = _Section("pinned", [_Line(m.id, "- " + label(m, options), m.occurred_at) for m in pinned], 0)
    shown: set[str] = set()  # memories shown whole
    extracted: set[str] = set()  # profile memories shown as their first-person sentences
    used = 0

    def fill(section: _Section, limit: int) -> None:
        """Take the section's next candidates while they fit in `limit` more characters (cutting the last)."""
        nonlocal used
        spent = 0
        while section.next < len(section.candidates):
            candidate = section.candidates[section.next]
            if candidate.memory_id in shown or (not candidate.whole and candidate.memory_id in extracted):
                section.next += 1  # shown already (an extract does not stop the whole memory being shown)
                continue
            heading = 0 if section.taken else len(_heading(section.name)) + 2  # blank line + heading
            line = _cut(candidate.text, cap)
            free = min(limit - spent, room - used) - heading - 1
            if free < len(line):
                if free < 60:
                    return
                line = _cut(line, free)
            section.taken.append(replace(candidate, text=line))
            section.next += 1
            (shown if candidate.whole else extracted).add(candidate.memory_id)
            spent += heading + len(line) + 1
            used += heading + len(line) + 1

    fill(pins, int(room * PINNED_SHARE))  # first: "always know this"
    left = room - used
    recent = _Section(
        "recent",
        [
            _Line(t.memory_id, f"- [{_when(t.occurred_at)}] {t.speaker}: {' '.join(t.text.split())}", t.occurred_at)
            for t in reversed(turns)
        ],
        int(left * SHARES["recent"]),
    )
    facts = []
    for memory in profile:
        sentences = " ".join(first_person_sentences(memory.content)) if memory.source == SOURCE else ""
        whole = not sentences or sentences == " ".join(memory.content.split())
        facts.append(_Line(memory.id, "- " + label(memory, options, sentences or None), memory.occurred_at, whole))
    about = _Section("profile", facts, int(left * SHARES["profile"]))
    earlier = _Section(
        "relevant",
        [_Line(m.id, "- " + label(m, options), m.occurred_at) for m in relevant],
        int(left * SHARES["relevant"]),
    )
    sections = {s.name: s for s in (pins, recent, about, earlier)}

    for section in (recent, about, earlier):  # first pass: each within its share, in dedup order
        fill(section, section.share)
    for name in REFILL_ORDER:  # second pass: what is left, to whoever still has something to show
        fill(sections[name], room - used)

    if not any(s.taken for s in sections.values()):
        return NONE
    lines = [HEADER]
    for section in (pins, about, earlier, recent):
        if section.taken:
            taken = sorted(section.taken, key=lambda line: line.occurred_at) if section is recent else section.taken
            lines += ["", _heading(section.name), *(line.text for line in taken)]
    return "\n".join(lines)


def _heading(section: str) -> str:
    return PINNED_HEADING if section == "pinned" else HEADINGS[section]


def label(memory: Memory, options: ChatOptions, text: str | None = None) -> str:
    """A memory as a line of the block: `[2026-05-03 14:02] Alice: text` (`text`: instead of its content)."""
    who = memory.speaker or (options.speaker(memory.role) if memory.role else "Note")
    body = " ".join((memory.content if text is None else text).split())
    return f"[{_when(memory.occurred_at)}] {who}: {body}"


# --- helpers ---------------------------------------------------------------------------------------------------------


def _message(args: dict[str, Any]) -> str:
    message, contents = args.get("message"), args.get("contents")
    if message is None and contents is None:
        raise InvalidInputError("message: Field required")
    if message is not None and contents is not None and message != contents:
        raise InvalidInputError("message: give message or contents (the same argument under two names), not both")
    return str(message if message is not None else contents)


def _pieces(text: str, limit: int) -> list[str]:
    """`text` in pieces of at most `limit` characters, cut at white space where there is some."""
    pieces = []
    while len(text) > limit:
        cut = text.rfind(" ", limit // 2, limit + 1)
        cut = cut if cut > 0 else limit
        pieces.append(text[:cut].strip())
        text = text[cut:].strip()
    return [*pieces, text] if text else pieces


def _when(stored: str) -> str:
    """'2026-05-03T14:02:11.000000+00:00' -> '2026-05-03 14:02'."""
    return stored[:16].replace("T", " ")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"
