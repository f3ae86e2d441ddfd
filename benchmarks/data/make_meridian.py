"""Build the "meridian" conversation set (benchmarks/data/conversations/meridian/*.json) from templates, seeded.

harbour and lantern are hand-written; meridian is generated, so that the question shapes of issue 28 (which_two,
in_common, change, everything, correction) come in numbers (seven or more of each per set) with evidence that is
right by construction: every fact is a pair of turns (a question from one speaker, the answer from the fact's
owner) placed in a session chosen by the seeded generator, and each question lists the answering turns and, in
`quotes`, the words of the fact each of them says (tests/benchmarks/test_conversation_data.py checks every quote
is in its turn). Small talk around the facts is drawn from pools, never repeating a memory text.

    uv run python -m benchmarks.data.make_meridian      # rewrites benchmarks/data/conversations/meridian/
"""

from __future__ import annotations

import random
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from benchmarks.data.conversation_files import write_conversations

HERE = Path(__file__).resolve().parent
OUT = HERE / "conversations" / "meridian"
SEED = 2811
SESSIONS = 22

CONVERSATIONS = [
    {"id": "meridian-1", "speakers": ["Aiko", "Bram"], "start": "2024-02-03T19:10", "gap": (9, 20)},
    {"id": "meridian-2", "speakers": ["Lucia", "Femi"], "start": "2023-10-14T08:45", "gap": (10, 24)},
    {"id": "meridian-3", "speakers": ["Nadia", "Oskar", "Teodora"], "start": "2024-05-18T21:00", "gap": (8, 18)},
]

# Values the templates draw from (without replacement within a conversation).
POOL = {
    "city": ["Tromso", "Valencia", "Gdansk", "Porto", "Ljubljana", "Tallinn", "Bologna", "Lyon", "Ghent", "Cork"],
    "class": [
        "pottery",
        "salsa",
        "woodturning",
        "life drawing",
        "bouldering",
        "sign language",
        "fencing",
        "Italian",
        "welding",
        "choir",
        "bookbinding",
        "tai chi",
        "watercolour",
    ],
    "plant": ["a fig tree", "chillies", "broad beans", "sweet peas", "rhubarb", "a lemon tree", "dahlias"],
    "book": [
        "a book on tide tables",
        "a Norwegian crime novel",
        "a biography of Ada Lovelace",
        "a cookbook on ferments",
    ],
    "pet": [
        "a ginger kitten",
        "a rescue greyhound",
        "two chickens",
        "a tortoise",
        "a collie pup",
        "a lop-eared rabbit",
        "a grey parrot",
        "a beagle",
        "a pair of guinea pigs",
    ],
    "petname": ["Biscuit", "Nimbus", "Pickle", "Marlow", "Juniper", "Tansy"],
    "car": ["a green Fiat Panda", "a second-hand Skoda estate", "an old Volvo", "a white camper van"],
    "venue": [
        "the boathouse",
        "the old library",
        "a barn near Hexham",
        "the botanic gardens",
        "a church hall",
        "the cricket pavilion",
        "a pub by the weir",
        "the lido cafe",
        "the yacht club",
        "a tapas bar on the quay",
    ],
    "instrument": ["the cello", "the ukulele", "the accordion", "the banjo", "the trumpet"],
    "dish": ["a saffron risotto", "jollof rice", "a lamb tagine", "a mushroom pie", "a plum cake"],
    "race": [
        "a 10k along the canal",
        "a half marathon in the hills",
        "a charity swim",
        "a fell race",
        "a duathlon",
        "a night trail run",
        "a sea swim off the pier",
        "a park run in fancy dress",
        "a hill climb on the bike",
        "a rowing regatta",
        "a sportive over the moors",
        "an open-water mile",
        "a relay on the track",
    ],
    "job": ["a lab technician post", "a job at the ferry company", "a teaching contract", "a bakery shift lead role"],
}

FILLER_A = [
    "Ha, that is so typical",
    "Honestly I needed that laugh",
    "The kettle has just boiled",
    "I am sitting on the back step",
    "Still full from dinner",
    "The neighbours are painting again",
    "My phone is on two percent",
    "I have a mountain of washing",
    "The wifi keeps dropping",
    "I found your old postcard",
    "The rain has finally stopped",
    "There is a heron on the roof opposite",
    "I burnt the toast again",
    "The cat next door got in",
    "My knee is complaining",
    "I have been humming that song all day",
    "The bins did not get collected",
    "I bought far too many lemons",
    "The radiator is clanking",
    "Somebody is mowing at this hour",
]
FILLER_B = [
    "anyway.",
    "but never mind.",
    "so that is my news.",
    "which made me think of you.",
    "and I am not even sorry.",
    "so forgive the typos.",
    "and the light is lovely.",
    "so I am hiding in here.",
    "as usual.",
    "and now I want biscuits.",
    "and I regret nothing.",
    "so send help.",
]
FILLER_Q = [
    "How are things with you?",
    "What are you up to?",
    "Did you get my voice note?",
    "Are you around for a call at some point?",
    "Have you eaten?",
    "Is it raining there too?",
    "Any news?",
    "Did you see the photos I sent?",
]
FILLER_IMG = [
    "a photo of a cup of tea on a windowsill",
    "a photo of a wet street under orange lamps",
    "a photo of a messy desk with a laptop and a plant",
    "a photo of a sunset over rooftops",
    "a photo of a sleepy cat on a blanket",
    "a photo of a loaf of bread on a board",
    "a photo of a pile of muddy boots by a door",
    "a photo of a bus stop in the rain",
]
LEADS = (
    "Oh, ",
    "So, ",
    "Right, ",
    "Well, ",
    "Okay so ",
    "Ha, ",
    "Quick one: ",
    "Random question, ",
    "Hey, ",
    "Honestly, ",
    "Listen, ",
    "Anyway, ",
    "Also, ",
    "By the way, ",
    "Go on then, ",
    "Hmm, ",
    "Right then, ",
)
WEEKDAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
# The single-fact questions, taken in turn: (pool, the asker's turn, the owner's answer with the value {v}, the
# question about {owner}, the photo shared with the answer or None).
SINGLES = [
    (
        "book",
        "Reading anything good?",
        "I am halfway through {v}, it is oddly gripping.",
        "What is {owner} reading?",
        None,
    ),
    (
        "instrument",
        "What was that noise on the call?",
        "Me, practising {v}. Lessons started.",
        "Which instrument is {owner} learning?",
        None,
    ),
    (
        "dish",
        "What did you cook for the party?",
        "I made {v} and there was none left.",
        "What did {owner} cook for the party?",
        "a photo of {v} in a big dish on a crowded table",
    ),
    (
        "car",
        "How are you getting about these days?",
        "Bought {v} off a colleague.",
        "What vehicle did {owner} buy?",
        None,
    ),
    (
        "plant",
        "How is the garden doing?",
        "I finally planted {v} by the shed.",
        "What did {owner} plant by the shed?",
        "a photo of a small bed of fresh soil by a wooden shed",
    ),
    (
        "venue",
        "Where is the quiz night held now?",
        "At {v}, they have a proper bar.",
        "Where does {owner}'s quiz night take place?",
        None,
    ),
]


class Builder:
    """One conversation: facts placed in sessions, small talk around them, questions pointing at the facts."""

    def __init__(self, spec: dict[str, Any], rng: random.Random) -> None:
        self.spec, self.rng = spec, rng
        self.speakers: list[str] = spec["speakers"]
        self.pools = {k: rng.sample(v, len(v)) for k, v in POOL.items()}
        self.slots: list[list[dict[str, Any]]] = [[] for _ in range(SESSIONS)]
        self.questions: list[dict[str, Any]] = []
        self.dates = self._dates()
        self.texts: set[str] = set()

    def _dates(self) -> list[datetime]:
        when, out = datetime.fromisoformat(self.spec["start"]), []
        for _ in range(SESSIONS):
            out.append(when)
            when += timedelta(days=self.rng.randint(*self.spec["gap"]), minutes=self.rng.randint(-90, 90))
        return out

    def take(self, pool: str) -> str:
        return self.pools[pool].pop()

    def other(self, owner: str) -> str:
        return self.rng.choice([s for s in self.speakers if s != owner])

    def fact(self, session: int, owner: str, ask: str, says: str, image: str | None = None) -> dict[str, Any]:
        """A question turn and its answer by the owner in one session; returns the answer turn (its id comes later)."""
        answer = {"speaker": owner, "text": self.unique(owner, says), **({"image": image} if image else {})}
        asker = self.other(owner)
        self.slots[session].append({"pair": [{"speaker": asker, "text": self.unique(asker, ask)}, answer]})
        return answer

    def unique(self, speaker: str, text: str) -> str:
        """The text, or it with a lead-in when the speaker already said it (the store keeps one memory per text)."""
        for lead in ("", *LEADS):
            candidate = f"{lead}{text[0].lower()}{text[1:]}" if lead else text
            if (speaker, candidate) not in self.texts:
                self.texts.add((speaker, candidate))
                return candidate
        raise ValueError(f"{speaker} says {text!r} too often")

    def ask(self, kind: str, question: str, answer: str, evidence: list[tuple[dict[str, Any], str]], **extra: Any):
        """Record a question; evidence pairs each answering turn with the words of the fact it states."""
        self.questions.append({"type": kind, "question": question, "answer": answer, "evidence": evidence, **extra})

    def sessions_sorted(self, n: int, low: int = 0, high: int = SESSIONS) -> list[int]:
        return sorted(self.rng.sample(range(low, high), n))

    # --- the question kinds ----------------------------------------------------------------------------------------

    def single(self, owner: str) -> None:
        s = self.rng.randrange(SESSIONS)
        which = len(self.questions) % len(SINGLES)
        pool, ask, says, question, image = SINGLES[which]
        v = self.take(pool)
        t = self.fact(s, owner, ask, says.format(v=v), image=image.format(v=v) if image else None)
        self.ask("single", question.format(owner=owner), v, [(t, v)])
        if which in (1, 4):  # some questions say when the fact came up, as people do
            q = self.questions[-1]
            q["question"] = f"Back in {self.dates[s]:%B %Y}, {q['question'][0].lower()}{q['question'][1:]}"

    def temporal(self, owner: str) -> None:
        s = self.rng.randrange(SESSIONS)
        day = self.rng.choice(WEEKDAYS)
        back = (self.dates[s].weekday() - WEEKDAYS.index(day) - 1) % 7 + 1
        when = self.dates[s] - timedelta(days=back)
        v = self.take("race")
        t = self.fact(
            s,
            owner,
            "How did the race go?",
            f"I ran {v} last {day} and finished, just about.",
            image="a photo of a race number pinned to a damp running vest",
        )
        self.ask("temporal", f"When did {owner} do {v}?", f"{when:%A} {when.day} {when:%B %Y}", [(t, f"last {day}")])

    def open_(self, owner: str) -> None:
        s = self.rng.randrange(SESSIONS)
        v = self.take("pet")
        t = self.fact(s, owner, "Is the flat still quiet?", f"Not any more, we adopted {v}.", image=f"a photo of {v}")
        self.ask("open", f"Would {owner}'s home still suit someone allergic to animals?", f"No: {v}", [(t, v)])

    def _two_values(
        self,
        owner: str,
        pool: str,
        turns: tuple[tuple[str, str], tuple[str, str]],
        question: str,
        answer: str,
        image: str | None = None,
        **shape: str,
    ) -> None:
        """A multi question over two values of one pool, each the owner's answer in a session of its own; the
        templates name them {v1} and {v2} (and the owner {owner}); `image` is shared with the first answer."""
        a, b = self.sessions_sorted(2)
        v1, v2 = self.take(pool), self.take(pool)
        (ask1, says1), (ask2, says2) = turns
        t1 = self.fact(a, owner, ask1, says1.format(v1=v1), image=image.format(v1=v1) if image else None)
        t2 = self.fact(b, owner, ask2, says2.format(v2=v2))
        self.ask("multi", question.format(owner=owner), answer.format(v1=v1, v2=v2), [(t1, v1), (t2, v2)], **shape)

    def multi(self, owner: str) -> None:
        self._two_values(
            owner,
            "class",
            (
                ("What are you doing on weeknights now?", "Signed up for {v1} on Mondays."),
                ("Still busy in the evenings?", "Yes, and I added {v2} on Thursdays."),
            ),
            "How many evening classes has {owner} signed up for?",
            "two: {v1}, {v2}",
        )

    def which_two(self, owner: str) -> None:
        self._two_values(
            owner,
            "city",
            (
                ("Where have you been? You went quiet.", "Work sent me to {v1} for a conference."),
                ("Travelling again?", "Yes, {v2} this time, a site visit."),
            ),
            "Which two cities did {owner} travel to for work?",
            "{v1} and {v2}",
            image="a photo of a harbour front in {v1} at dusk",
            shape="which_two",
        )

    def in_common(self, first: str, second: str) -> None:
        a, b = self.sessions_sorted(2)
        v = self.take("class")
        t1 = self.fact(a, first, "Any new plans for the autumn?", f"I have booked a {v} course at the college.")
        t2 = self.fact(b, second, "You sound cheerful, what happened?", f"I started {v} too, you inspired me.")
        self.ask(
            "multi",
            f"What do {first} and {second} have in common?",
            f"both took up {v}",
            [(t1, v), (t2, v)],
            shape="in_common",
        )

    def change(self, owner: str) -> None:
        a, b, c = self.sessions_sorted(3)
        first, last = self.rng.sample([25, 40, 55, 70, 90], 2)
        t1 = self.fact(a, owner, "How is the commute?", f"Awful, {first} minutes each way on two buses.")
        t2 = self.fact(b, owner, "Still on the buses?", "Mostly, though I cycle when it is dry.")
        t3 = self.fact(c, owner, "And the commute now?", f"Down to {last} minutes since the new route.")
        self.ask(
            "multi",
            f"How did {owner}'s commute change between the first and the last time it came up?",
            f"{first} minutes, then {last} minutes",
            [(t1, f"{first} minutes"), (t2, "cycle"), (t3, f"{last} minutes")],
            shape="change",
        )

    def everything(self, owner: str) -> None:
        picks = self.sessions_sorted(4)
        name, pet = self.take("petname"), self.take("pet")
        parts = [
            ("Any news from home?", f"We got {pet} and named it {name}.", f"{pet}, {name}", name),
            ("How is the new arrival?", f"{name} chewed through a phone charger.", "chewed a charger", "charger"),
            ("Did the vet visit go well?", f"{name} needs a tooth out, poor thing.", "a tooth out", "tooth"),
            ("Is the little one behaving?", f"{name} won a rosette at the village show!", "won a rosette", "rosette"),
        ]
        evidence, answer = [], []
        for s, (ask, says, short, quote) in zip(picks, parts, strict=True):
            image = "a photo of a red rosette pinned to a basket" if quote == "rosette" else None
            evidence.append((self.fact(s, owner, ask, says, image=image), quote))
            answer.append(short)
        self.ask(
            "multi", f"Tell me everything {owner} said about {name}.", "; ".join(answer), evidence, shape="everything"
        )

    def correction(self, owner: str) -> None:
        self._two_values(
            owner,
            "venue",
            (
                ("Where is your birthday do?", "At {v1}, save the date."),
                ("Still on for the birthday?", "Yes, but it moved to {v2}, the other fell through."),
            ),
            "Where is {owner}'s birthday party being held now?",
            "{v2} (not {v1})",
            shape="correction",
        )

    # --- assembly --------------------------------------------------------------------------------------------------

    def filler(self, speaker: str) -> dict[str, Any]:
        while True:
            roll = self.rng.random()
            if roll < 0.2:
                text = self.rng.choice(FILLER_Q)
                text = f"{self.rng.choice(FILLER_A)}. {text}"
            else:
                text = f"{self.rng.choice(FILLER_A)}, {self.rng.choice(FILLER_B)}"
            if (speaker, text) not in self.texts:
                self.texts.add((speaker, text))
                turn: dict[str, Any] = {"speaker": speaker, "text": text}
                if self.rng.random() < 0.18:
                    turn["image"] = self.rng.choice(FILLER_IMG)
                return turn

    def build(self, plan: list[tuple[str, tuple[int, ...]]]) -> dict[str, Any]:
        for kind, who in plan:
            names = [self.speakers[i % len(self.speakers)] for i in who]
            getattr(self, kind)(*names)
        sessions = []
        for n, items in enumerate(self.slots):
            target = self.rng.randint(12, 18)
            units: list[list[dict[str, Any]]] = [item["pair"] for item in items]
            fill = max(target - 2 * len(units), 3)
            speaker = self.rng.choice(self.speakers)
            for _ in range(fill):
                speaker = self.rng.choice([s for s in self.speakers if s != speaker])
                units.append([self.filler(speaker)])
            opening = units.pop()  # small talk first, then facts and small talk mixed
            self.rng.shuffle(units)
            turns = []
            for turn in [t for unit in [opening, *units] for t in unit]:
                turn["id"] = f"S{n + 1}:{len(turns) + 1}"
                turns.append(turn)
            sessions.append({"id": f"S{n + 1}", "date": self.dates[n].isoformat(timespec="seconds"), "turns": turns})
        questions = []
        for k, q in enumerate(self.questions, 1):
            evidence = [t["id"] for t, _ in q["evidence"]]
            quotes = [quote for _, quote in q["evidence"]]
            questions.append({"id": f"q{k}", **q, "evidence": evidence, "quotes": quotes})
        conv = {"id": self.spec["id"], "set": "meridian", "speakers": self.speakers, "sessions": sessions}
        return {**conv, "questions": questions}


def plan_for(n_speakers: int, rng: random.Random) -> list[tuple[str, tuple[int, ...]]]:
    """Which questions one conversation asks and of whom: ~47, a third of them shaped."""
    plan: list[tuple[str, tuple[int, ...]]] = []
    plan += [("single", (i,)) for i in range(15)]
    plan += [("temporal", (i,)) for i in range(11)]
    plan += [("open_", (i,)) for i in range(5)]
    plan += [("multi", (i,)) for i in range(3)]
    for shape in ("which_two", "change", "everything", "correction"):
        plan += [(shape, (i,)) for i in range(rng.choice((2, 3)))]
    plan += [("in_common", (i, i + 1)) for i in range(rng.choice((2, 3)))]
    return plan


def main() -> int:
    rng = random.Random(SEED)
    write_conversations(OUT, (Builder(spec, rng).build(plan_for(len(spec["speakers"]), rng)) for spec in CONVERSATIONS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
