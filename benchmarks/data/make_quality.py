"""Build quality.json, the retrieval evaluation set, from the hand-written core files and generated filler.

The core (core_part*.txt) is hand-written: memories an assistant would keep for one person over three years
(people, ids, amounts, dates, facts that changed, clusters of look-alike memories) and the queries whose relevant
memories are known. The filler is everyday chatter composed from hand-written phrases with a fixed seed: it only
exists to crowd the ranking the way a real store would, and no query targets it.

    uv run python benchmarks/data/make_quality.py      # rewrites benchmarks/data/quality.json
"""

from __future__ import annotations

import json
import random
import sys
from datetime import date, timedelta
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATEGORIES = ("paraphrase", "ident", "exact", "date", "changed", "distractor", "tags", "cjk", "forms")

# Filler: (template, slot lists). Names here never appear in the core set's queries.
_PEOPLE = [
    "Hannah",
    "Olu",
    "Bettina",
    "Carlos",
    "Mei",
    "Frederik",
    "Yusuf",
    "Ingrid",
    "Pablo",
    "Noor",
    "Greta",
    "Theo",
    "Leila",
    "Matthias",
    "Sunita",
    "Emil",
    "Chiara",
    "Bogdan",
    "Rosa",
    "Vikram",
]
_FILLER = [
    (
        "Bought {item} at {shop}; {price}.",
        {
            "item": [
                "a new kettle",
                "two bags of potting soil",
                "a phone charger",
                "batteries for the smoke alarm",
                "a birthday card",
                "dishwasher tablets",
                "a rain jacket for Lena",
                "a bike pump",
                "coffee beans",
                "printer paper",
                "light bulbs (E27, warm white)",
                "a yoga mat",
                "picture frames",
            ],
            "shop": ["dm", "Rewe", "Hornbach", "the Saturday market", "Decathlon", "Rossmann", "Edeka", "Saturn"],
            "price": [
                "cheaper than online",
                "was on sale",
                "keep the receipt",
                "the cashier gave a discount",
                "forgot the bag again",
                "paid with the new card",
            ],
        },
    ),
    (
        "{person} asked me to {favour} {when}.",
        {
            "favour": [
                "review their CV",
                "water their plants",
                "proofread a grant application",
                "lend them the drill",
                "recommend a pediatrician",
                "help move a sofa",
                "check a contract clause",
                "feed the cat",
                "introduce them to a recruiter",
                "look at a Python script",
            ],
            "when": [
                "next week",
                "before the weekend",
                "sometime in spring",
                "by Friday",
                "after their holiday",
                "when I have time",
            ],
        },
    ),
    (
        "Lunch with {person} at {place}: talked about {topic}.",
        {
            "place": [
                "the Thai place on Torstraße",
                "the canteen",
                "Markthalle Neun",
                "a falafel stand",
                "the new poke bowl shop",
                "the Italian deli near the office",
            ],
            "topic": [
                "their startup idea",
                "remote work",
                "kids and schools",
                "the housing market",
                "climbing",
                "a job change",
                "electric bikes",
                "learning Spanish",
                "burnout",
                "their trip to Japan",
            ],
        },
    ),
    (
        "Reminder: {task} {when}.",
        {
            "task": [
                "renew the library books",
                "call the insurance about the bike",
                "order contact lenses",
                "defrost the freezer",
                "book the chimney sweep",
                "update the emergency contact list",
                "send the photos from the party",
                "clean the gutter",
                "check the smoke detectors",
                "back up the laptop",
                "sort out the Lego boxes",
                "pay the kindergarten lunch money",
            ],
            "when": [
                "this weekend",
                "on Monday",
                "before the end of the month",
                "tomorrow morning",
                "next Tuesday",
                "after payday",
            ],
        },
    ),
    (
        "Read an article about {topic}; {take}.",
        {
            "topic": [
                "four-day work weeks",
                "sourdough hydration",
                "heat pumps",
                "Rust in the Linux kernel",
                "sleep and memory",
                "urban gardening",
                "the history of the bicycle",
                "microplastics",
                "productivity apps",
                "Zettelkasten note taking",
                "city trees and heat",
                "solar balconies",
            ],
            "take": [
                "worth a second read",
                "mostly hype",
                "sent it to the team",
                "some good ideas",
                "want to try it",
                "convincing numbers",
            ],
        },
    ),
    (
        "{person} recommended the {kind} {title}.",
        {
            "kind": ["podcast", "documentary", "board game", "novel", "series", "album"],
            "title": [
                "'Hardcore History'",
                "'My Octopus Teacher'",
                "'Wingspan'",
                "'The Overstory'",
                "'Severance'",
                "'Blue Lines'",
                "'Ticket to Ride'",
                "'Station Eleven'",
                "'Planet Earth III'",
                "'Azul'",
            ],
        },
    ),
    (
        "Workout: {workout}; felt {feeling}.",
        {
            "workout": [
                "5 km easy run in Volkspark Friedrichshain",
                "45 minutes of bouldering",
                "yoga class at 7",
                "swim, 1,500 m",
                "interval session on the track",
                "long bike ride to Wannsee",
                "strength session, mostly legs",
                "30 minutes of mobility work",
            ],
            "feeling": ["great", "slow", "tired but fine", "strong", "a bit of knee pain", "sore the next day"],
        },
    ),
    (
        "Work: {event}.",
        {
            "event": [
                "sprint planning took two hours again",
                "the design review for the search filters went well",
                "demo day: the team showed the new dashboard",
                "spent the afternoon on code reviews",
                "pair-programmed on the retry logic",
                "wrote the quarterly OKR draft",
                "the staging deploy failed twice because of a missing secret",
                "interviewed an intern candidate",
                "cleaned up old feature flags",
                "architecture guild discussed API versioning",
                "migrated two services to the new logger",
                "helped support with a tricky refund case",
                "the retro was about meeting overload",
            ]
        },
    ),
    (
        "Weekend: {activity} with {person}.",
        {
            "activity": [
                "a walk around Tempelhofer Feld",
                "a board game evening",
                "a flea market at Mauerpark",
                "pancakes and a museum visit",
                "a picnic at Plötzensee",
                "a trip to the zoo",
                "a long breakfast",
                "a visit to the Futurium",
                "a bike tour along the canal",
            ]
        },
    ),
    (
        "Cooked {dish} tonight; {verdict}.",
        {
            "dish": [
                "a Thai green curry",
                "shakshuka",
                "mushroom risotto",
                "lentil soup",
                "homemade pizza",
                "chili sin carne",
                "a tray bake with sweet potatoes",
                "pierogi with Lena",
                "ramen from scratch",
            ],
            "verdict": [
                "Lena ate all of it",
                "too salty",
                "will make again",
                "needs more garlic",
                "took forever",
                "freeze the rest",
            ],
        },
    ),
    (
        "{person}'s {thing} is {detail}.",
        {
            "thing": ["new flat", "daughter", "startup", "bike", "garden", "dog", "favourite bar"],
            "detail": [
                "in Wedding, near the Leopoldplatz",
                "starting school next year",
                "raising a seed round",
                "a Dutch cargo bike",
                "full of tomatoes this year",
                "a very loud husky",
                "the one with the jazz nights",
            ],
        },
    ),
    (
        "Idea: {idea}.",
        {
            "idea": [
                "set up a family calendar everyone can edit",
                "sell the old camera lenses",
                "write a short guide for new team members",
                "start a running group at work",
                "label the cables in the drawer",
                "plan a day without screens each month",
                "donate the baby clothes",
                "learn to sharpen knives properly",
                "build a small bookshelf for Lena's room",
                "try the library's tool rental",
            ]
        },
    ),
]

_FILLER_START = date(2023, 1, 1)
_FILLER_DAYS = (date(2025, 11, 28) - _FILLER_START).days


def _filler(count: int, rng: random.Random) -> list[dict]:
    seen: set[str] = set()
    out: list[dict] = []
    while len(out) < count:
        template, slots = rng.choice(_FILLER)
        values = {name: rng.choice(options) for name, options in slots.items()}
        values["person"] = rng.choice(_PEOPLE)
        text = template.format(**values)
        text = text[0].upper() + text[1:]
        if text in seen:
            continue
        seen.add(text)
        day = _FILLER_START + timedelta(days=rng.randrange(_FILLER_DAYS))
        out.append({"id": f"filler-{len(out):04d}", "content": text, "created_at": _stamp(day, rng), "filler": True})
    return out


def _stamp(day: date, rng: random.Random) -> str:
    return f"{day.isoformat()}T{rng.randrange(7, 23):02d}:{rng.randrange(60):02d}:{rng.randrange(60):02d}+00:00"


def parse_core(paths: list[Path], rng: random.Random) -> dict:
    """Read `M key date text`, `T key tag1,tag2` (the tags of memory key), `Q category key1,key2 text`, `D key text`,
    `R key1 key2`, `N text`; `#` comments."""
    memories: dict[str, dict] = {}
    queries: list[dict] = []
    duplicates: list[dict] = []
    related: list[list[str]] = []
    unanswerable: list[str] = []
    for path in paths:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            kind, rest = line.split(" ", 1)
            if kind == "M":
                key, day, text = rest.split(" ", 2)
                if key in memories:
                    raise SystemExit(f"{path.name}:{number}: duplicate memory {key}")
                memories[key] = {"id": key, "content": text, "created_at": _stamp(date.fromisoformat(day), rng)}
            elif kind == "T":
                key, tags = rest.split(" ", 1)
                if key not in memories:
                    raise SystemExit(f"{path.name}:{number}: tags for unknown memory {key}")
                memories[key]["tags"] = tags.split(",")
            elif kind == "Q":
                category, keys, text = rest.split(" ", 2)
                if category not in CATEGORIES:
                    raise SystemExit(f"{path.name}:{number}: unknown category {category}")
                queries.append({"query": text, "relevant": keys.split(","), "category": category})
            elif kind == "D":
                key, text = rest.split(" ", 1)
                duplicates.append({"of": key, "content": text})
            elif kind == "R":
                related.append(rest.split())
            elif kind == "N":
                unanswerable.append(rest)
            else:
                raise SystemExit(f"{path.name}:{number}: a line starts with M, T, Q, D, R, N or #")
    named = [key for q in queries for key in q["relevant"]] + [d["of"] for d in duplicates]
    for key in named + [key for pair in related for key in pair]:
        if key not in memories:
            raise SystemExit(f"unknown memory {key}")
    return {
        "memories": list(memories.values()),
        "queries": queries,
        "duplicates": duplicates,
        "related": related,
        "unanswerable": unanswerable,
    }


def main() -> int:
    rng = random.Random(20261130)
    core = parse_core(sorted(HERE.glob("core_part*.txt")), rng)
    memories, queries = core["memories"], core["queries"]
    filler = _filler(450, random.Random(20261202))  # its own seed: adding core memories leaves the filler as it is
    for i, query in enumerate(queries):
        query["id"] = f"q{i:03d}"
    data = {
        "description": "memserver retrieval evaluation: hand-written memories and queries plus generated filler",
        "categories": list(CATEGORIES),
        "memories": memories + filler,
        "queries": queries,
        "duplicates": core["duplicates"],  # restatements of a memory: near-duplicates `remember` should flag
        "related": core["related"],  # distinct memories on one topic: must not be flagged as duplicates
        "unanswerable": core["unanswerable"],  # queries with no relevant memory: what noise scores
    }
    out = HERE / "quality.json"
    out.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    counts = {c: sum(q["category"] == c for q in queries) for c in CATEGORIES}
    print(
        f"{out}: {len(memories)} core + {len(filler)} filler memories, {len(queries)} queries {counts}, "
        f"{len(data['duplicates'])} duplicate and {len(data['related'])} related pairs, "
        f"{len(data['unanswerable'])} unanswerable queries"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
