"""ChatGPT's data export (`conversations.json`): an array of conversations whose messages form a tree (`mapping`:
node id -> {"message", "parent", "children"}); an edited prompt starts a sibling branch. The conversation as its
person last saw it is the branch from `current_node` up through the parents to the root, read root first. System
and tool messages, and nodes hidden from the conversation (`metadata.is_visually_hidden_from_conversation`, or a
weight of 0), are skipped; so are messages with no text (an image alone). Source: `chatgpt:CONV_ID#MSG_ID`."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memserver.importers.entries import Broken, Entry, Malformed, Record, Skip, expect, from_epoch, load_json

ASSISTANT = "ChatGPT"
KEPT_ROLES = ("user", "assistant")


def read(path: Path, user: str = "user") -> Iterator[Entry]:
    """The current branch of every conversation in a ChatGPT export, each root first; `user` names the person."""
    conversations = load_json(path)
    if not isinstance(conversations, list):
        yield Broken("$", "expected an array of conversations (ChatGPT's conversations.json)")
        return
    for n, conversation in enumerate(conversations):
        try:
            yield from list(_conversation(conversation, f"[{n}]", user))  # checked whole before any is yielded
        except Malformed as exc:
            yield Broken(exc.position, exc.problem)


def _conversation(conversation: Any, at: str, user: str) -> Iterator[Entry]:
    expect(conversation, dict, at, "a conversation object")
    conv_id = conversation.get("conversation_id") or conversation.get("id")
    conv_id = expect(conv_id, str, f"{at}.conversation_id", "the conversation's id")
    mapping = expect(conversation.get("mapping"), dict, f"{at}.mapping", "the message tree (an object)")
    node_id = conversation.get("current_node")
    if node_id is None:
        return  # an empty conversation
    expect(node_id, str, f"{at}.current_node", "a node id")
    branch: list[tuple[str, dict[str, Any]]] = []
    seen: set[str] = set()
    while node_id is not None:
        if node_id in seen:
            raise Malformed(f"{at}.mapping", f"the parents of node {node_id!r} loop")
        if node_id not in mapping:
            raise Malformed(f"{at}.mapping", f"node {node_id!r} is named as a parent or current_node but missing")
        seen.add(node_id)
        node = expect(mapping[node_id], dict, f"{at}.mapping[{node_id!r}]", "a node object")
        branch.append((node_id, node))
        node_id = node.get("parent")
        if node_id is not None:
            expect(node_id, str, f"{at}.mapping[{branch[-1][0]!r}].parent", "a node id or null")
    for node_id, node in reversed(branch):
        entry = _node(node, f"{at}.mapping[{node_id!r}]", conv_id, user)
        if entry is not None:
            yield entry


def _node(node: dict[str, Any], at: str, conv_id: str, user: str) -> Entry | None:
    message = node.get("message")
    if message is None:
        return None  # the synthetic root
    expect(message, dict, f"{at}.message", "a message object or null")
    author = expect(message.get("author"), dict, f"{at}.message.author", "an author object")
    role = expect(author.get("role"), str, f"{at}.message.author.role", "a role")
    metadata = message.get("metadata") if isinstance(message.get("metadata"), dict) else {}
    if metadata.get("is_visually_hidden_from_conversation") or message.get("weight") == 0:
        return Skip(at, "hidden from the conversation")
    if role not in KEPT_ROLES:
        return Skip(at, f"{role} message")
    content = expect(message.get("content"), dict, f"{at}.message.content", "a content object")
    parts = content.get("parts", [])
    expect(parts, list, f"{at}.message.content.parts", "an array of parts")
    text = "\n\n".join(part for part in parts if isinstance(part, str) and part.strip())
    if not text:
        return Skip(at, f"no text ({content.get('content_type', 'unknown')} content)")
    msg_id = expect(message.get("id", node.get("id")), str, f"{at}.message.id", "the message's id")
    fields: dict[str, Any] = {
        "speaker": user if role == "user" else ASSISTANT,
        "role": role,
        "session": conv_id,
        "tags": ["chatgpt"],
    }
    occurred_at = from_epoch(message.get("create_time"), f"{at}.message.create_time")
    if occurred_at:
        fields["occurred_at"] = occurred_at
    return Record(at, text, f"chatgpt:{conv_id}#{msg_id}", fields)
