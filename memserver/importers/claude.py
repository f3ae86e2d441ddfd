"""Claude's data export (`conversations.json`): an array of conversations, each with `uuid`, `name` and
`chat_messages`, a flat list in order (`uuid`, `sender` "human" or "assistant", `text` and/or `content` blocks of
`{"type": "text", "text": ...}`, `created_at` in ISO 8601). Each message becomes a memory in the conversation's
session, with the source `claude:CONV_UUID#MSG_UUID`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memserver.importers.entries import Broken, Entry, Malformed, Record, Skip, expect, iso_time, load_json

ROLES = {"human": "user", "assistant": "assistant"}
ASSISTANT = "Claude"


def read(path: Path, user: str = "user") -> Iterator[Entry]:
    """Every message of every conversation in a Claude export, in file order; `user` names the person."""
    conversations = load_json(path)
    if not isinstance(conversations, list):
        yield Broken("$", "expected an array of conversations (Claude's conversations.json)")
        return
    for n, conversation in enumerate(conversations):
        try:
            yield from _conversation(conversation, f"[{n}]", user)
        except Malformed as exc:
            yield Broken(exc.position, exc.problem)


def _conversation(conversation: Any, at: str, user: str) -> Iterator[Entry]:
    expect(conversation, dict, at, "a conversation object")
    conv_id = expect(conversation.get("uuid"), str, f"{at}.uuid", "the conversation's uuid")
    messages = expect(conversation.get("chat_messages"), list, f"{at}.chat_messages", "an array of messages")
    # checked whole before any of its messages is yielded: a broken conversation is skipped whole
    yield from [_message(message, f"{at}.chat_messages[{i}]", conv_id, user) for i, message in enumerate(messages)]


def _message(message: Any, at: str, conv_id: str, user: str) -> Entry:
    expect(message, dict, at, "a message object")
    msg_id = expect(message.get("uuid"), str, f"{at}.uuid", "the message's uuid")
    sender = message.get("sender")
    if sender not in ROLES:
        raise Malformed(f"{at}.sender", f'expected "human" or "assistant", got {sender!r}')
    occurred_at = iso_time(message.get("created_at"), f"{at}.created_at")
    text = _text(message, at)
    if not text.strip():
        return Skip(at, "empty message (attachments or files only)")
    fields: dict[str, Any] = {
        "speaker": user if sender == "human" else ASSISTANT,
        "role": ROLES[sender],
        "session": conv_id,
        "tags": ["claude"],
    }
    if occurred_at:
        fields["occurred_at"] = occurred_at
    return Record(at, text, f"claude:{conv_id}#{msg_id}", fields)


def _text(message: dict[str, Any], at: str) -> str:
    """The message's text: its `content` text blocks when there are any (newer exports), else `text`."""
    blocks = message.get("content")
    if blocks is not None:
        expect(blocks, list, f"{at}.content", "an array of content blocks")
        parts = []
        for i, block in enumerate(blocks):
            expect(block, dict, f"{at}.content[{i}]", "a content block")
            if block.get("type") == "text":
                parts.append(expect(block.get("text"), str, f"{at}.content[{i}].text", "a string"))
        if parts:
            return "\n\n".join(parts)
    text = message.get("text", "")
    return str(expect(text, str, f"{at}.text", "a string"))
