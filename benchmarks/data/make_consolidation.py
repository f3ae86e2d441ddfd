"""Builds benchmarks/data/consolidation.json, the made set of benchmarks/consolidation.py (issue 24 item 4).

Facts are (person, attribute, value) triples written out by several templates per attribute. The set has:
- duplicate clusters: one fact written by 2 or 3 different templates (a restatement), each a memory;
- hard negatives: the same template and value for another person, or the same person with another value (similar
  text, a distinct fact), never in a cluster;
- singletons: facts written once.
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
    return {"seed": seed, "memories": memories}


def main() -> None:
    data = build()
    OUT.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    memories = data["memories"]
    assert isinstance(memories, list)
    print(f"{len(memories)} memories, {len({m.get('cluster') for m in memories} - {None})} clusters -> {OUT}")


if __name__ == "__main__":
    main()
