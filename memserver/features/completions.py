"""What `completion/complete` suggests: values for a prompt argument or a resource template variable, by prefix.

    ref/resource memory://tags/{tag}        tag        tags in use starting with the prefix, most used first
    ref/resource memory://memories/{id}     id         ids of stored memories starting with the prefix, in order
    ref/resource either, + {?namespace}     namespace  namespaces starting with the prefix, most memories first
    ref/prompt   recall-context             topic      matching tags, then words of the recent memories (never
                                                       a stopword: every topic offered matches by its words)
    ref/prompt   recall-context             namespace  namespaces, as above
    ref/prompt   recall-context             kind       the kinds (inputs.KINDS) starting with the prefix, in their
                                                       order (no resource template of ours takes a kind)
    ref/prompt   remember-session           focus      matching tags

Prefixes match case-insensitively. The spec allows at most 100 values per answer; `total` and `hasMore` say how
many more matched. A variable already chosen (the request's `context.arguments`, 2025-06-18 on) narrows the
others: with a `namespace` there, tags, ids and topics come from that namespace. Sessions are completed nowhere: no
resource template or prompt of ours takes one (tool arguments cannot be completed in MCP). A reference to a prompt
or template this server does not have, or to an argument it does not take, is a protocol error (-32602), like
prompts/get's.

`suggest` is blocking (it calls the store); the server runs it in a worker thread. Knows nothing about transports.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import mcp_types as types

from memserver.contract import inputs
from memserver.errors import InvalidInputError
from memserver.features import prompts, resources

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend

MAX_VALUES = 100  # spec (completion): a response must not hold more than 100 values
RECENT_MEMORIES = 100  # the topic completion looks at the words of this many newest memories
MIN_WORD_CHARS = 4
_WORD = re.compile(r"[^\W\d_][\w'-]*[^\W_]", re.UNICODE)
_COMMON_WORDS = (  # too common to suggest as a topic
    "about after also been before because being between could does doing each from have having here into just "
    "like made make many more most much must only other over said same should some such than that their them "
    "then there these they this those through very want were what when where which while will with would your "
    "user user's "
    # The keyword index's stopwords (memserver/retrieval/terms.py) of MIN_WORD_CHARS or more: a topic made of one
    # finds nothing by its words, so it is never offered (tests/contract/test_contract_keyword_terms.py).
    "above again against below both down during further hers herself himself itself myself once ours ourselves "
    "theirs themselves under until whom yours yourself yourselves"
)
_COMMON = frozenset(_COMMON_WORDS.split())


class UnknownCompletionError(LookupError):
    """completion/complete referred to a prompt, template or argument this server does not have."""


@dataclass(frozen=True)
class Target:
    """What is being completed: `kind` is "tag", "memory-id", "topic", "focus", "namespace" or "kind";
    `namespace` is the one already chosen in the request's context (None: the default)."""

    kind: str
    namespace: str | None = None


NAMESPACE_VARIABLE = "{?namespace}"  # RFC 6570 form-style query expansion: memory://tags/{tag}{?namespace}
_KINDS = {"tag": "tag", "id": "memory-id", "namespace": "namespace"}


def _template_variables() -> dict[str, tuple[str, ...]]:
    """Each template we serve, by its URI template, with its variables; each also spelled with {?namespace}."""
    plain: dict[str, tuple[str, ...]] = {
        resources.TAG_TEMPLATE.uri_template: ("tag",),
        resources.MEMORY_TEMPLATE.uri_template: ("id",),
    }
    for uri, variables in list(plain.items()):
        if NAMESPACE_VARIABLE not in uri:
            plain[uri + NAMESPACE_VARIABLE] = (*variables, "namespace")
    return plain


def target(
    ref: types.PromptReference | types.ResourceTemplateReference,
    argument: str,
    context: Mapping[str, str] | None = None,
) -> Target:
    """Resolve a completion reference and argument name (and what the context says was chosen already).

    Raises:
        UnknownCompletionError: the prompt, the template or the argument does not exist here.
    """
    namespace = (context or {}).get("namespace", "").strip() or None
    if isinstance(ref, types.PromptReference):
        try:
            prompt = prompts.find(ref.name)
        except prompts.UnknownPromptError as exc:
            raise UnknownCompletionError(str(exc)) from None
        names = [a.name for a in prompt.arguments or []]
        if argument not in names:
            raise UnknownCompletionError(f"Prompt {prompt.name} has no argument {argument!r} (arguments: {names})")
        return Target(argument, namespace)
    templates = _template_variables()
    variables = templates.get(ref.uri)
    if variables is None:
        raise UnknownCompletionError(f"Unknown resource template: {ref.uri} (templates: {', '.join(templates)})")
    if argument not in variables:
        has = ", ".join(repr(v) for v in variables)
        raise UnknownCompletionError(f"Template {ref.uri} has no variable {argument!r} (it has {has})")
    return Target(_KINDS[argument], namespace)


def suggest(store: MemoryBackend, target: Target, prefix: str) -> types.Completion:
    """The values for `target` starting with `prefix` (blocking: call it from a worker thread)."""
    return _SUGGESTERS[target.kind](store, prefix.strip().casefold(), target.namespace)


def _tags(store: MemoryBackend, prefix: str, namespace: str | None) -> types.Completion:
    return _bounded(_matching_tags(store, prefix, namespace))


def _matching_tags(store: MemoryBackend, prefix: str, namespace: str | None) -> list[str]:
    counts = store.tag_counts(namespace=namespace)
    return sorted((t for t in counts if t.casefold().startswith(prefix)), key=lambda t: (-counts[t], t))


def _topics(store: MemoryBackend, prefix: str, namespace: str | None) -> types.Completion:
    """Tags first (the user's own labels), then words the recent memories use most, if a prefix was typed."""
    found = _matching_tags(store, prefix, namespace)
    if prefix:
        seen = {tag.casefold() for tag in found}
        words: Counter[str] = Counter()
        recent = (
            store.list_recent(limit=RECENT_MEMORIES, namespace=namespace)
            if namespace
            else store.list_recent(limit=RECENT_MEMORIES)
        )
        for memory in recent:
            words.update(_words(memory.content, prefix))
        found += [word for word, _ in sorted(words.items(), key=lambda wc: (-wc[1], wc[0])) if word not in seen]
    return _bounded(found)


def _namespaces(store: MemoryBackend, prefix: str, namespace: str | None) -> types.Completion:
    counts = store.namespaces()
    return _bounded(sorted((n for n in counts if n.casefold().startswith(prefix)), key=lambda n: (-counts[n], n)))


def _kinds(store: MemoryBackend, prefix: str, namespace: str | None) -> types.Completion:
    return _bounded([kind for kind in inputs.KINDS if kind.startswith(prefix)])


def _words(text: str, prefix: str) -> Iterable[str]:
    for match in _WORD.finditer(text):
        word = match.group().casefold()
        if len(word) >= MIN_WORD_CHARS and word.startswith(prefix) and word not in _COMMON:
            yield word


def _memory_ids(store: MemoryBackend, prefix: str, namespace: str | None) -> types.Completion:
    """The lowest ids starting with the prefix; one more than fits is asked for, to know whether there are more
    (`total` is then left out: counting every id that starts with "a" would cost a scan for a number)."""
    try:
        ids = store.ids_with_prefix(prefix, MAX_VALUES + 1, namespace=namespace)
    except InvalidInputError:  # not the start of an id (not hexadecimal, too long), no namespace: nothing matches
        return types.Completion(values=[], total=0, has_more=False)
    if len(ids) > MAX_VALUES:
        return types.Completion(values=ids[:MAX_VALUES], has_more=True)
    return _bounded(ids)


def _bounded(values: list[str]) -> types.Completion:
    return types.Completion(values=values[:MAX_VALUES], total=len(values), has_more=len(values) > MAX_VALUES)


_SUGGESTERS: dict[str, Callable[[MemoryBackend, str, str | None], types.Completion]] = {
    "tag": _tags,
    "focus": _tags,
    "topic": _topics,
    "memory-id": _memory_ids,
    "namespace": _namespaces,
    "kind": _kinds,
}
