"""What `completion/complete` suggests: values for a prompt argument or a resource template variable, by prefix.

    ref/resource memory://tags/{tag}       tag         tags in use starting with the prefix, most used first
    ref/resource memory://memories/{id}    id          ids of live memories starting with the prefix, in order
    ref/prompt   recall-context            topic       matching tags, then words of the recent memories
    ref/prompt   remember-session          focus       matching tags

Prefixes match case-insensitively. The spec allows at most 100 values per answer; `total` and `hasMore` say how
many more matched. A reference to a prompt or template this server does not have, or to an argument it does not
take, is a protocol error (-32602), like prompts/get's.

`suggest` is blocking (it calls the store); the server runs it in a worker thread. Knows nothing about transports.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mcp_types as types

from memserver import prompts, resources
from memserver.errors import InvalidInputError

if TYPE_CHECKING:
    from memserver.backend import MemoryBackend

MAX_VALUES = 100  # spec (completion): a response must not hold more than 100 values
RECENT_MEMORIES = 100  # the topic completion looks at the words of this many newest memories
MIN_WORD_CHARS = 4
_WORD = re.compile(r"[^\W\d_][\w'-]*[^\W_]", re.UNICODE)
_COMMON_WORDS = (  # too common to suggest as a topic
    "about after also been before because being between could does doing each from have having here into just "
    "like made make many more most much must only other over said same should some such than that their them "
    "then there these they this those through very want were what when where which while will with would your "
    "user user's"
)
_COMMON = frozenset(_COMMON_WORDS.split())


class UnknownCompletionError(LookupError):
    """completion/complete referred to a prompt, template or argument this server does not have."""


@dataclass(frozen=True)
class Target:
    """What is being completed: `kind` is "tag", "memory-id", "topic" or "focus"."""

    kind: str


def target(ref: types.PromptReference | types.ResourceTemplateReference, argument: str) -> Target:
    """Resolve a completion reference and argument name.

    Raises:
        UnknownCompletionError: the prompt, the template or the argument does not exist here.
    """
    if isinstance(ref, types.PromptReference):
        try:
            prompt = prompts.find(ref.name)
        except prompts.UnknownPromptError as exc:
            raise UnknownCompletionError(str(exc)) from None
        names = [a.name for a in prompt.arguments or []]
        if argument not in names:
            raise UnknownCompletionError(f"Prompt {prompt.name} has no argument {argument!r} (arguments: {names})")
        return Target(argument)
    variables = {resources.TAG_TEMPLATE.uri_template: "tag", resources.MEMORY_TEMPLATE.uri_template: "id"}
    variable = variables.get(ref.uri)
    if variable is None:
        templates = ", ".join(variables)
        raise UnknownCompletionError(f"Unknown resource template: {ref.uri} (templates: {templates})")
    if argument != variable:
        raise UnknownCompletionError(f"Template {ref.uri} has no variable {argument!r} (it has {variable!r})")
    return Target("tag" if variable == "tag" else "memory-id")


def suggest(store: MemoryBackend, target: Target, prefix: str) -> types.Completion:
    """The values for `target` starting with `prefix` (blocking: call it from a worker thread)."""
    return _SUGGESTERS[target.kind](store, prefix.strip().casefold())


def _tags(store: MemoryBackend, prefix: str) -> types.Completion:
    return _bounded(_matching_tags(store, prefix))


def _matching_tags(store: MemoryBackend, prefix: str) -> list[str]:
    counts = store.tag_counts()
    return sorted((t for t in counts if t.casefold().startswith(prefix)), key=lambda t: (-counts[t], t))


def _topics(store: MemoryBackend, prefix: str) -> types.Completion:
    """Tags first (the user's own labels), then words the recent memories use most, if a prefix was typed."""
    found = _matching_tags(store, prefix)
    if prefix:
        seen = {tag.casefold() for tag in found}
        words: Counter[str] = Counter()
        for memory in store.list_recent(limit=RECENT_MEMORIES):
            words.update(_words(memory.content, prefix))
        found += [word for word, _ in sorted(words.items(), key=lambda wc: (-wc[1], wc[0])) if word not in seen]
    return _bounded(found)


def _words(text: str, prefix: str) -> Iterable[str]:
    for match in _WORD.finditer(text):
        word = match.group().casefold()
        if len(word) >= MIN_WORD_CHARS and word.startswith(prefix) and word not in _COMMON:
            yield word


def _memory_ids(store: MemoryBackend, prefix: str) -> types.Completion:
    """The lowest ids starting with the prefix; one more than fits is asked for, to know whether there are more
    (`total` is then left out: counting every id that starts with "a" would cost a scan for a number)."""
    try:
        ids = store.ids_with_prefix(prefix, MAX_VALUES + 1)
    except InvalidInputError:  # not the start of an id (not hexadecimal, too long): nothing matches
        return types.Completion(values=[], total=0, has_more=False)
    if len(ids) > MAX_VALUES:
        return types.Completion(values=ids[:MAX_VALUES], has_more=True)
    return _bounded(ids)


def _bounded(values: list[str]) -> types.Completion:
    return types.Completion(values=values[:MAX_VALUES], total=len(values), has_more=len(values) > MAX_VALUES)


_SUGGESTERS: dict[str, Callable[[MemoryBackend, str], types.Completion]] = {
    "tag": _tags,
    "focus": _tags,
    "topic": _topics,
    "memory-id": _memory_ids,
}
