"""Builds benchmarks/data/consolidation.json, the made set of benchmarks/consolidation.py (issue 24 item 4).

Facts are (person, attribute, value) triples written out by several templates per attribute. The set has:
- duplicate clusters: one fact written by 2 or 3 different templates (a restatement), each a memory;
- hard negatives: the same template and value for another person, or the same person with another value (similar
  text, a distinct fact), never in a cluster;
- singletons: facts written once.
And first-person statements with a speaker and an occurred_at (the stale-statement half):
- updates: a speaker states a single-valued attribute, and later another value of it (often with a cue such as
  "now" or "switched"): the older one is stale (`stale_of` names the newer one's `key`);
- restatements: the same value stated again later in other words (a duplicate cluster, not stale);
- additions: a many-valued attribute (allergies, languages, pets) stated again with another value, half of them
  with "also": both stay true, not stale;
- other speakers: another speaker states another value of the same attribute: not stale.
Memories are split by fact into two namespaces, "dev" (the threshold is chosen there) and "heldout" (reported),
so no cluster spans both. Deterministic (seeded): `uv run python -m benchmarks.data.make_consolidation`.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent / "consolidation.json"

PEOPLE = [
    "Alice",
    "Bruno",
    "Chen",
    "Dana",
    "Emeka",
    "Farah",
    "Goran",
    "Hana",
    "Ines",
    "Jonas",
    "Kofi",
    "Lena",
    "Mateo",
    "Nadia",
    "Omar",
    "Priya",
    "Quinn",
    "Rosa",
    "Sven",
    "Tariq",
    "Uma",
    "Viktor",
    "Wen",
    "Ximena",
    "Yusuf",
    "Zoe",
]
# attribute: (templates, values); "{p}" the person, "{v}" the value
ATTRIBUTES: dict[str, tuple[list[str], list[str]]] = {
    "editor": (
        ["{p} writes code in {v}.", "{p}'s editor of choice is {v}.", "For programming, {p} uses the {v} editor."],
        ["Vim", "Emacs", "VS Code", "Helix", "Sublime Text", "IntelliJ"],
    ),
    "city": (
        ["{p} lives in {v}.", "{p}'s home is in {v}.", "{p} moved to {v} and lives there now."],
        ["Lisbon", "Nairobi", "Osaka", "Toronto", "Krakow", "Melbourne", "Bogota", "Oslo"],
    ),
    "allergy": (
        ["{p} is allergic to {v}.", "{p} has an allergy to {v}.", "Keep {v} away from {p}: allergic."],
        ["peanuts", "shellfish", "penicillin", "cats", "pollen", "latex"],
    ),
    "coffee": (
        ["{p} drinks {v} every morning.", "{p}'s morning coffee is always a {v}.", "Each morning {p} orders a {v}."],
        ["flat white", "double espresso", "oat latte", "cold brew", "cappuccino"],
    ),
    "birthday": (
        ["{p}'s birthday is on {v}.", "{p} was born on {v}.", "{p} celebrates a birthday every {v}."],
        ["3 March", "17 July", "29 October", "5 January", "12 August", "21 December"],
    ),
    "team": (
        ["{p} works on the {v} team.", "{p} is a member of the {v} team.", "{p}'s team at work is {v}."],
        ["payments", "search", "mobile", "infrastructure", "billing", "data platform"],
    ),
    "language": (
        ["{p} is learning {v}.", "{p} takes {v} lessons twice a week.", "{p} studies {v} in the evenings."],
        ["Japanese", "Portuguese", "Swahili", "Korean", "German", "Arabic"],
    ),
    "pet": (
        ["{p} has a dog named {v}.", "{p}'s dog is called {v}.", "{v} is the name of {p}'s dog."],
        ["Biscuit", "Pepper", "Luna", "Max", "Nori", "Tofu"],
    ),
    "diet": (
        ["{p} is vegetarian and eats no {v}.", "{p} avoids {v} entirely.", "{p} never eats {v}."],
        ["meat", "dairy", "gluten", "fish", "sugar"],
    ),
    "standup": (
        [
            "{p}'s team standup is at {v}.",
            "The daily standup of {p}'s team starts at {v}.",
            "{p} joins standup at {v}.",
        ],
        ["9:00", "9:30", "10:00", "10:30", "11:15"],
    ),
}


# first-person templates: (older statement, newer statements of another value, restatements of the same value)
SINGLE: dict[str, tuple[list[str], list[str], list[str], list[str]]] = {
    "city": (
        ["I live in {v}.", "My home is in {v}."],
        ["I live in {v} now.", "I moved to {v} last month.", "I live in {v}.", "Home is {v} these days."],
        ["I still live in {v}.", "My flat is in {v}."],
        ["Lisbon", "Nairobi", "Osaka", "Toronto", "Krakow", "Melbourne", "Bogota", "Oslo"],
    ),
    "editor": (
        ["I write all my code in {v}.", "My editor is {v}."],
        [
            "I switched to {v} for coding.",
            "My editor is {v} now.",
            "I write my code in {v}.",
            "These days I code in {v}.",
        ],
        ["{v} is still my editor.", "I do all my programming in {v}."],
        ["Vim", "Emacs", "VS Code", "Helix", "Sublime Text", "IntelliJ"],
    ),
    "team": (
        ["I work on the {v} team.", "My team at work is {v}."],
        [
            "I moved to the {v} team.",
            "I am on the {v} team now.",
            "I work on the {v} team.",
            "My team is {v} since May.",
        ],
        ["I am still on the {v} team.", "At work I belong to the {v} team."],
        ["payments", "search", "mobile", "infrastructure", "billing", "data platform"],
    ),
    "coffee": (
        ["I drink a {v} every morning.", "My morning coffee is a {v}."],
        [
            "I changed my morning coffee to a {v}.",
            "I drink a {v} in the mornings now.",
            "My morning coffee is a {v}.",
            "Mornings I have a {v} instead.",
        ],
        ["Every morning I still have a {v}.", "A {v} is what I drink each morning."],
        ["flat white", "double espresso", "oat latte", "cold brew", "cappuccino"],
    ),
    "standup": (
        ["Our standup is at {v}.", "My team's standup starts at {v}."],
        [
            "Our standup moved to {v}.",
            "Standup is at {v} now.",
            "Our standup starts at {v}.",
            "We changed standup to {v}.",
        ],
        ["Standup is still at {v}.", "The daily standup begins at {v}."],
        ["9:00", "9:30", "10:00", "10:30", "11:15"],
    ),
}
MANY: dict[str, tuple[list[str], list[str], list[str]]] = {
    "allergy": (
        ["I am allergic to {v}.", "I have an allergy to {v}."],
        ["I am also allergic to {v}.", "I am allergic to {v}.", "I found out I am allergic to {v} too."],
        ["peanuts", "shellfish", "penicillin", "cats", "pollen", "latex"],
    ),
    "language": (
        ["I am learning {v}.", "I take {v} lessons."],
        ["I am also learning {v}.", "I started {v} lessons as well.", "I am learning {v}."],
        ["Japanese", "Portuguese", "Swahili", "Korean", "German", "Arabic"],
    ),
    "pet": (
        ["I have a dog named {v}.", "My dog is called {v}."],
        ["We also got a dog named {v}.", "I have a second dog named {v}.", "My other dog is called {v}."],
        ["Biscuit", "Pepper", "Luna", "Max", "Nori", "Tofu"],
    ),
}


def _statement_pair(rng: random.Random, n: int, person: str, attribute: str) -> list[dict[str, object]]:
    """Two first-person statements of one (person, attribute): an update, a restatement, an addition or another
    speaker's (see the module docstring)."""
    namespace = "dev" if n % 2 == 0 else "heldout"
    day = 1 + n % 27
    older = {"namespace": namespace, "speaker": person, "occurred_at": f"2025-02-{day:02d}T09:00:00Z"}
    newer = {**older, "occurred_at": f"2025-07-{day:02d}T18:00:00Z"}
    if attribute in MANY:
        firsts, thens, values = MANY[attribute]
        value, other = rng.sample(values, 2)
        return [
            {**older, "content": rng.choice(firsts).format(v=value)},
            {**newer, "content": rng.choice(thens).format(v=other)},
        ]
    firsts, updates, again, values = SINGLE[attribute]
    value, other = rng.sample(values, 2)
    role = n % 5  # 0, 1, 2: update; 3: restatement; 4: another speaker
    if role <= 2:
        return [
            {**older, "content": rng.choice(firsts).format(v=value), "stale_of": f"s{n}"},
            {**newer, "content": rng.choice(updates).format(v=other), "key": f"s{n}"},
        ]
    if role == 3:
        return [
            {**older, "content": rng.choice(firsts).format(v=value), "cluster": f"r{n}"},
            {**newer, "content": rng.choice(again).format(v=value), "cluster": f"r{n}"},
        ]
    someone = f"{person}'s colleague"  # one per (person, attribute): states nothing else of it
    return [
        {**older, "content": rng.choice(firsts).format(v=value)},
        {**newer, "speaker": someone, "content": rng.choice(updates).format(v=other)},
    ]


def _statements(rng: random.Random) -> list[dict[str, object]]:
    """The first-person half. Contents are unique within a namespace: a store keeps one memory per text (exact
    duplicates are refused whoever says them), so a repeated text would merge two speakers' statements."""
    out: list[dict[str, object]] = []
    used: set[tuple[object, object]] = set()
    pairs = [(p, a) for p in PEOPLE for a in (*SINGLE, *MANY)]
    rng.shuffle(pairs)
    for n, (person, attribute) in enumerate(pairs[:160]):
        for _ in range(50):
            made = _statement_pair(rng, n, person, attribute)
            keys = {(m["namespace"], m["content"]) for m in made}
            if len(keys) == len(made) and not keys & used:
                used |= keys
                out.extend(made)
                break
    return out


def build(seed: int = 24) -> dict[str, object]:
    rng = random.Random(seed)
    memories: list[dict[str, object]] = []
    facts = [(p, a) for p in PEOPLE for a in ATTRIBUTES]
    rng.shuffle(facts)
    cluster_no = 0
    for n, (person, attribute) in enumerate(facts):
        templates, values = ATTRIBUTES[attribute]
        value = rng.choice(values)
        namespace = "dev" if n % 2 == 0 else "heldout"
        role = n % 4  # 0, 1: duplicate cluster; 2: hard negative pair; 3: singleton
        if role in (0, 1) and cluster_no < 140:
            size = rng.choice((2, 2, 3))
            cluster = f"c{cluster_no}"
            cluster_no += 1
            for template in rng.sample(templates, size):
                memories.append(
                    {"content": template.format(p=person, v=value), "namespace": namespace, "cluster": cluster}
                )
        elif role == 2:
            template = rng.choice(templates)
            memories.append({"content": template.format(p=person, v=value), "namespace": namespace})
            if rng.random() < 0.5:  # another person, same value: a distinct fact
                other = rng.choice([q for q in PEOPLE if q != person])
                memories.append(
                    {"content": template.format(p=other, v=value), "namespace": namespace, "hard_negative": True}
                )
            else:  # same person, another value: also distinct (not a restatement)
                other_value = rng.choice([v for v in values if v != value])
                memories.append(
                    {"content": template.format(p=person, v=other_value), "namespace": namespace, "hard_negative": True}
                )
        else:
            memories.append({"content": rng.choice(templates).format(p=person, v=value), "namespace": namespace})
    memories.extend(_statements(rng))
    return {"seed": seed, "memories": memories}


def main() -> None:
    data = build()
    OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    memories = data["memories"]
    assert isinstance(memories, list)
    clusters = len({m.get("cluster") for m in memories} - {None})
    stale = sum(1 for m in memories if "stale_of" in m)
    print(f"{len(memories)} memories, {clusters} clusters, {stale} stale statements -> {OUT}")


if __name__ == "__main__":
    main()
