"""The variants retrieval_lab.py measures: single changes against PostgreSQL's ranking (RRF), then combinations.

An experiment with one config is scored as is; one with a grid is tuned by leave-one-conversation-out (its label
says "LOO"). Names inside a grid say the constant.
"""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.lab.ranking import Config, replace

__all__ = ["EXPERIMENTS", "QUICK", "Experiment"]


@dataclass(frozen=True)
class Experiment:
    label: str
    grid: list[Config]
    note: str = ""
    steps: tuple[tuple[str, tuple[object, ...]], ...] = ()  # forward selection from grid[0], nested LOO
    train_group: str = ""  # with steps: select on this set only, score the others


def grid(base: Config, key: str, values: list[object]) -> list[Config]:
    return [replace(base, name=f"{key}={v}", **{key: v}) for v in values]


TODAY = Config(name="rrf, ties by row")
CONVEX = replace(TODAY, fusion="convex", weight=0.6, norm="max", recency=0.0)
K1_B = ((1.2, 0.75), (0.9, 0.4), (0.9, 0.2), (0.6, 0.3), (0.6, 0.1), (0.45, 0.2), (0.3, 0.1))

SINGLES = [
    Experiment("rrf, ties by row", [TODAY], "PostgreSQL's ranking (RRF); keyword ties cut by row (the proposed fix)"),
    Experiment("rrf, ties newest first", [replace(TODAY, tie_newest=True)], "ties cut newest row first"),
    Experiment("stem english", [replace(TODAY, stem="english")], "Snowball English (porter2) on the index terms"),
    Experiment("stem porter", [replace(TODAY, stem="porter")], "original Porter"),
    Experiment("BM25 k1/b LOO", [replace(TODAY, name=f"k1={k1},b={b}", k1=k1, b=b) for k1, b in K1_B]),
    Experiment("BM25F speaker field LOO", grid(TODAY, "field_speaker", [0.0, 0.5, 1.0, 2.0, 4.0])),
    Experiment("BM25F prev-turn field LOO", grid(TODAY, "field_prev", [0.0, 0.25, 0.5, 0.75, 1.0])),
    Experiment("prev turn, keyword LOO", grid(TODAY, "prev_kw", [0.0, 0.25, 0.5, 0.75, 1.0])),
    Experiment("prev turn, vector LOO", grid(TODAY, "prev_vec", [0.0, 0.25, 0.5, 0.75, 1.0])),
    Experiment("next turn, vector LOO", grid(TODAY, "next_vec", [0.0, 0.1, 0.2, 0.3])),
    Experiment("second key: joint prev+turn", [replace(TODAY, second_key="joint")], "a second embedding per turn"),
    Experiment("second key: dated", [replace(TODAY, second_key="dated")], "embedding of `[date] Speaker: text`"),
    Experiment("speaker boost LOO", grid(TODAY, "speaker", [0.0, 0.25, 0.5, 1.0, 2.0, 4.0])),
    Experiment(
        "speaker boost on sides LOO",
        grid(replace(TODAY, boost_sides=True), "speaker", [0.0, 0.05, 0.1, 0.2, 0.4, 0.8]),
    ),
    Experiment("when prior LOO", grid(TODAY, "when", [0.0, 0.25, 0.5, 1.0, 2.0, 4.0])),
    Experiment("time window LOO", grid(TODAY, "window", [0.0, 0.25, 0.5, 1.0, 2.0, 4.0])),
    Experiment("rrf depth LOO", grid(TODAY, "depth", [5, 10, 15, 20, 30, 50, 100])),
    Experiment("rrf k LOO", grid(TODAY, "rrf_k", [10, 30, 60, 100])),
    Experiment(
        "convex LOO",
        [
            replace(CONVEX, name=f"convex w={w},{norm},d={d}", weight=w, norm=norm, depth=d)
            for w in (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
            for norm in ("minmax", "max")
            for d in (20, 50, 100)
        ],
    ),
    Experiment(
        "PRF LOO",
        [replace(TODAY, name=f"prf={p},m={m}", prf=p, prf_m=m) for p in (0.0, 0.1, 0.2, 0.4) for m in (1, 3, 5)],
    ),
]

STEPS: tuple[tuple[str, tuple[object, ...]], ...] = (
    ("stem", ("", "porter", "english")),
    ("k1+b", K1_B),
    ("prev_kw", (0.0, 0.25, 0.5, 0.75, 1.0)),
    ("prev_vec", (0.0, 0.25, 0.5, 0.75, 1.0)),
    ("speaker", (0.0, 0.25, 0.5, 1.0, 2.0)),
    ("when", (0.0, 0.25, 0.5, 1.0, 2.0)),
    ("window", (0.0, 0.25, 0.5, 1.0, 2.0)),
    ("depth", (10, 15, 20, 30)),
)
CONVEX_STEPS = (
    *STEPS[:4],
    ("next_vec", (0.0, 0.1, 0.2)),
    ("weight", (0.4, 0.5, 0.6, 0.7, 0.8)),
    ("speaker", (0.0, 0.05, 0.1, 0.2, 0.4)),
    ("when", (0.0, 0.05, 0.1, 0.2, 0.4)),
    ("window", (0.0, 0.05, 0.1, 0.2, 0.4)),
    ("depth", (20, 50, 100)),
    ("recency", (0.0, 0.01, 0.03)),
)
STACKS = [
    Experiment("stack rrf (nested LOO)", [TODAY], "forward selection, redone per held-out conversation", STEPS),
    Experiment(
        "stack convex (nested LOO)", [CONVEX], "forward selection, redone per held-out conversation", CONVEX_STEPS
    ),
    Experiment(
        "stack convex, tuned on harbour only",
        [CONVEX],
        "forward selection on harbour; lantern unseen",
        CONVEX_STEPS,
        "harbour",
    ),
]

# The recommendation: the convex stack's picks, rounded to the values most folds agreed on.
RECOMMENDED = replace(
    CONVEX,
    name="final",
    stem="english",
    field_speaker=1.0,  # the speaker field's name indexed as a keyword term (what the `Speaker:` prefix gives)
    next_vec=0.1,
    k1=0.6,
    b=0.1,
    prev_kw=0.75,
    prev_vec=0.25,
    weight=0.6,
    speaker=0.3,
    when=0.2,
    window=0.2,
    depth=50,
    recency=0.0,
)
RRF_FINAL = replace(
    TODAY, stem="porter", k1=0.6, b=0.1, prev_kw=0.5, prev_vec=0.25, speaker=2.0, when=1.0, window=1.0, depth=15
)


def final(label: str, **changes: object) -> Experiment:
    return Experiment(f"final {label}", [replace(RECOMMENDED, name=label, **changes)])


FINALS = [
    Experiment("final", [RECOMMENDED], "the recommended ranking (constants from the convex stack, rounded)"),
    Experiment("final rrf", [replace(RRF_FINAL, name="rrf")], "the rrf stack's picks on all 6"),
    final("as an HNSW path finds it", pool_sim=True),
    final("- stemming", stem=""),
    final("stem porter", stem="porter"),
    final("k1/b 1.2/0.75 (today)", k1=1.2, b=0.75),
    final("k1/b 0.9/0.4", k1=0.9, b=0.4),
    final("- prev turn keyword", prev_kw=0.0),
    final("prev_kw 0.5", prev_kw=0.5),
    final("prev_kw 1.0", prev_kw=1.0),
    final("BM25F prev field 0.75 instead", prev_kw=0.0, field_prev=0.75),
    final("- prev turn vector", prev_vec=0.0),
    final("prev_vec 0.5", prev_vec=0.5),
    final("- speaker boost", speaker=0.0),
    final("speaker 0.15", speaker=0.15),
    final("speaker 0.5", speaker=0.5),
    final("- when prior", when=0.0),
    final("when 0.1", when=0.1),
    final("when 0.4", when=0.4),
    final("- time window", window=0.0),
    final("window 0.1", window=0.1),
    final("window 0.4", window=0.4),
    final("window_after 0", window_after=0.0),
    final("depth 20", depth=20),
    final("depth 100", depth=100),
    final("depth all", depth=0),
    final("weight 0.5", weight=0.5),
    final("weight 0.7", weight=0.7),
    final("norm minmax", norm="minmax"),
    final("recency 0.01", recency=0.01),
    final("recency 0.03", recency=0.03),
    final("+ ties newest first", tie_newest=True),
    final("- speaker field", field_speaker=0.0),
    final("speaker field 2", field_speaker=2.0),
    final("- next turn vector", next_vec=0.0),
    final("next turn vector 0.2", next_vec=0.2),
    final("- speaker field, - next turn (the first pick)", field_speaker=0.0, next_vec=0.0),
    final("+ second key dated", second_key="dated"),
    final("+ second key joint", second_key="joint"),
    final("+ PRF 0.2 m3", prf=0.2, prf_m=3),
    final("boosts on the sides", boost_sides=True, speaker=0.2, when=0.1, window=0.1),
]

EXPERIMENTS = SINGLES + STACKS + FINALS
QUICK = [
    *SINGLES[:2],
    SINGLES[12],  # the speaker boost, tuned by leave-one-out
    Experiment("final, no stemming", [replace(RECOMMENDED, name="final, no stemming", stem="")]),
]
