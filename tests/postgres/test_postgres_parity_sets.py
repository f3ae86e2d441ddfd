"""Issue 25's parity bar on the benchmark's own sets, at the suite's size: the quality set's first 80 queries and the
first 8 sessions of each conversation set, through benchmarks/engine_parity.py on both engines with the real model.
Every mode (semantic, keyword, hybrid) and conversation variant (hybrid, hybrid+fields), every category: R@5, R@10
and MRR within 0.5 point. (`uv run python -m benchmarks.engine_parity` is the full-size run.)
test_postgres_parity.py checks the same thing closer up: the ranked ids, fused scores and explanations."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from benchmarks import engine_parity

BAR = 0.5  # points


def _apart(local: dict[str, Any], postgres: dict[str, Any]) -> list[str]:
    """Each (mode, category, metric) whose figures differ by more than the bar, or that one engine lacks."""
    apart = []
    for mode, categories in local.items():
        for category, figures in categories.items():
            other = postgres.get(mode, {}).get(category)
            for metric in engine_parity.METRICS:
                if other is None or abs(other[metric] - figures[metric]) > BAR:
                    found = None if other is None else other[metric]
                    apart.append(f"{mode}/{category} {metric}: local {figures[metric]}, PostgreSQL {found}")
    return apart


@pytest.fixture(scope="module")
def database(postgres: Any) -> str:
    return postgres.database("parity_sets")


def test_the_quality_set_scores_the_same_on_both_engines(database: str, real_embedder: Any) -> None:
    result = engine_parity.quality(database, real_embedder, 80)
    engines = result["engines"]
    assert result["queries"] == 80
    assert set(engines["local"]) == {"semantic", "keyword", "hybrid"}
    assert engines["local"]["hybrid"]["all"]["recall@10"] > 0  # not two empty results
    assert _apart(engines["local"], engines["postgresql"]) == []


def test_every_conversation_set_scores_the_same_on_both_engines(
    database: str, real_embedder: Any, tmp_path: Path
) -> None:
    sets = engine_parity.conversations(database, real_embedder, tmp_path, quick=True)
    assert {"harbour", "lantern", "meridian"} <= set(sets)
    for name, engines in sets.items():
        assert set(engines["local"]) == {"hybrid", "hybrid+fields"}, name
        assert engines["local"]["hybrid"]["all"]["recall@10"] > 0, name  # questions were asked
        assert _apart(engines["local"], engines["postgresql"]) == [], name
