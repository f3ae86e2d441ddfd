"""The variants retrieval_lab.py measures: single changes against today's ranking, then combinations.

An experiment with one config is scored as is; one with a grid is tuned by leave-one-conversation-out (its label
says "LOO"). Names inside a grid say the constant.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab_ranking import Config, replace

__all__ = ["EXPERIMENTS", "QUICK", "Experiment"]


@dataclass(frozen=True)
class Experiment:
    label: str
    grid: list[Config]
    note: str = ""


def grid(base: Config, key: str, values: list[object]) -> list[Config]:
    return [replace(base, name=f"{key}={v}", **{key: v}) for v in values]


TODAY = Config(name="rrf, ties by row")

SINGLES = [
    Experiment("rrf, ties by row", [TODAY], "today's fusion; keyword ties cut by row (the proposed fix)"),
    Experiment("rrf, ties newest first", [replace(TODAY, tie_newest=True)], "ties cut newest row first"),
    Experiment("stem english", [replace(TODAY, stem="english")], "Snowball English (porter2) on the index terms"),
    Experiment("stem porter", [replace(TODAY, stem="porter")], "original Porter"),
    Experiment(
        "BM25 k1/b LOO",
        [replace(TODAY, name=f"k1={k1},b={b}", k1=k1, b=b) for k1 in (0.6, 0.9, 1.2, 1.6) for b in (0.3, 0.5, 0.75, 0.9)],
    ),
    Experiment("BM25F speaker field LOO", grid(TODAY, "field_speaker", [0.0, 0.5, 1.0, 2.0])),
    Experiment("BM25F prev-turn field LOO", grid(TODAY, "field_prev", [0.0, 0.1, 0.2, 0.3, 0.5])),
    Experiment("speaker boost LOO", grid(TODAY, "speaker", [0.0, 0.1, 0.25, 0.5, 1.0])),
    Experiment(
        "speaker boost on sides LOO",
        grid(replace(TODAY, boost_sides=True), "speaker", [0.0, 0.05, 0.1, 0.2, 0.4]),
    ),
    Experiment("when prior LOO", grid(TODAY, "when", [0.0, 0.1, 0.25, 0.5, 1.0])),
    Experiment("time window LOO", grid(TODAY, "window", [0.0, 0.1, 0.25, 0.5, 1.0])),
    Experiment("prev turn, vector LOO", grid(TODAY, "prev_vec", [0.0, 0.1, 0.2, 0.3, 0.5])),
    Experiment("prev turn, keyword LOO", grid(TODAY, "prev_kw", [0.0, 0.1, 0.2, 0.3, 0.5])),
    Experiment("next turn, vector LOO", grid(TODAY, "next_vec", [0.0, 0.1, 0.2, 0.3])),
    Experiment("second key: joint prev+turn", [replace(TODAY, second_key="joint")]),
    Experiment("second key: dated", [replace(TODAY, second_key="dated")], "embedding of `[date] Speaker: text`"),
    Experiment("rrf depth LOO", grid(TODAY, "depth", [10, 20, 30, 50, 100])),
    Experiment(
        "convex LOO",
        [
            replace(TODAY, name=f"convex w={w},{norm}", fusion="convex", weight=w, norm=norm, depth=d, recency=0.0)
            for w in (0.3, 0.4, 0.5, 0.6, 0.7)
            for norm in ("minmax", "max")
            for d in (20, 50)
        ],
    ),
    Experiment("PRF LOO", [replace(TODAY, name=f"prf={p},m={m}", prf=p, prf_m=m) for p in (0.0, 0.2, 0.4) for m in (2, 3, 5)]),
]

EXPERIMENTS = SINGLES
QUICK = SINGLES[:2] + [SINGLES[7]]
