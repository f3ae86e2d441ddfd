"""Two more ideas for multi-part questions (issue 28, item 2): entity-centred recall and speaker-statement keys.

- entity-centred recall: an alias table built from the stored turns (the speakers, and the capitalised words seen
  mid-sentence at least twice, calendar words aside; a two-word name's first word is an alias of it), the entities
  a question names looked up in it, and, for a question naming two or more, `slots` places of the top k reserved
  for each entity's best turns (a turn mentions an entity when one of its aliases is a word of the turn's text,
  which for a speaker is every turn of theirs: the text opens with `Speaker:`).
- speaker-statement keys: a turn that speaks in the first person ("Aiko: my sister moved to Leeds") also indexed
  rewritten with the speaker's name ("Aiko's sister moved to Leeds"), an index-time option of the benchmark's store
  (in the memory text and its vector, in the text only, or in the vector only).

Measured as opt-in rows of benchmarks/conversations.py and judged leave-one-set-out by multipart_options.py;
neither was kept (benchmarks/README.md, "Retrieval III"), so they live here and not in memserver/retrieval/.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise

from benchmarks.lab.multipart import Turn

__all__ = ["alias_table", "mentioning", "query_entities", "reserve_per_entity", "speaker_statement"]

_CALENDAR = frozenset(
    {"January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November"}
    | {"December", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday", "Christmas", "Easter"}
)
_NAME = re.compile(r"\b[A-Z][a-z]+(?: [A-Z][a-z]+)?\b")
_SENTENCE_START = re.compile(r"(?:^|[.!?:\"]\s+|\[image:\s*)$")
_WORD = re.compile(r"[A-Za-z]+")


def alias_table(texts: Iterable[str], speakers: Sequence[str], min_count: int = 2) -> dict[str, str]:
    """alias (lower case) -> entity: every speaker, and each capitalised word or two-word name that appears at
    least `min_count` times not opening a sentence; a two-word name's first word is also an alias of it, unless
    that word is an entity of its own."""
    seen: Counter[str] = Counter()
    for text in texts:
        for m in _NAME.finditer(text):
            name = m.group(0)
            if _SENTENCE_START.search(text[: m.start()]) is not None:  # "Was Porto": the opener is no part of it
                name = name.partition(" ")[2]
            if name:
                seen[name] += 1
    names = [n for n, c in seen.items() if c >= min_count and not {w.removesuffix("s") for w in n.split()} & _CALENDAR]
    table = {s.lower(): s for s in speakers}
    for name in sorted(names, key=lambda n: n.count(" ")):  # one-word entities first: they keep their alias
        table.setdefault(name.lower(), name)
        if " " in name:
            table.setdefault(name.split()[0].lower(), name)
    return table


def query_entities(query: str, table: Mapping[str, str]) -> list[str]:
    """The distinct entities of `table` that `query` names (possessives included: "Tom's")."""
    words = [w.lower() for w in _WORD.findall(query)]
    found = [table[" ".join(p)] for p in pairwise(words) if " ".join(p) in table]
    found += [table[w] for w in words if w in table]
    return list(dict.fromkeys(found))


def mentioning(text: str, entity: str, table: Mapping[str, str]) -> bool:
    """Whether one of `entity`'s aliases is a word (or two-word name) of `text`."""
    words = [w.lower() for w in _WORD.findall(text)]
    grams = set(words) | {" ".join(p) for p in pairwise(words)}
    return any(table.get(g) == entity for g in grams)


def reserve_per_entity(
    ranking: Sequence[Turn], candidates: Mapping[str, Sequence[Turn]], slots: int, k: int
) -> list[Turn]:
    """`ranking` whose first `k` hold, for each entity, its `slots` best candidates (those of `ranking` first, in
    order, then the others given); the rest of the top k is `ranking`'s best other turns, and the top k keeps
    `ranking`'s order (a reserved turn from outside it comes after those that were ranked). The remainder follows."""
    position = {t.key: i for i, t in enumerate(ranking)}
    reserved: dict[str, Turn] = {}
    for turns in candidates.values():
        ordered = sorted(turns, key=lambda t: position.get(t.key, len(ranking)))
        for turn in ordered[:slots]:
            reserved.setdefault(turn.key, turn)
    if len(reserved) > k:
        return list(ranking)
    head = dict(reserved)
    for turn in ranking:
        if len(head) >= k:
            break
        head.setdefault(turn.key, turn)
    top = sorted(head.values(), key=lambda t: position.get(t.key, len(ranking)))
    return top + [t for t in ranking if t.key not in head]


_FIRST_PERSON = (
    (re.compile(r"\bI'm\b|\bI am\b"), "{s} is"),
    (re.compile(r"\bI've\b|\bI have\b"), "{s} has"),
    (re.compile(r"\bI'd\b"), "{s} would"),
    (re.compile(r"\bI'll\b"), "{s} will"),
    (re.compile(r"\bI was\b"), "{s} was"),
    (re.compile(r"\b(?:my|My|mine|Mine)\b"), "{s}'s"),
    (re.compile(r"\b(?:myself|me|Me|I)\b"), "{s}"),
)
_ANY_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I've|I'd|I'll|my|My|me|Me|mine|myself)\b")


def speaker_statement(text: str, speaker: str) -> str | None:
    """`text` (a turn's own words, without `Speaker:`) in the third person about `speaker` when it speaks in the
    first person ("my sister moved to Leeds" -> "Aiko's sister moved to Leeds"), else None. Rule-based: the
    pronoun forms above, nothing else (no verb agreement beyond I'm/I've/I was)."""
    if _ANY_FIRST_PERSON.search(text) is None:
        return None
    for pattern, replacement in _FIRST_PERSON:
        text = pattern.sub(replacement.format(s=speaker), text)
    return text
