"""What the browser's forms and query strings mean as storage-contract arguments.

Pages read fields as strings; these turn them into the arguments of `search`, `select` and `MemoryFilter`, raising
InvalidInputError with a message the page shows (400) for what no store would take. The store checks the rest
(contract/inputs.py), so a form cannot ask for what the MCP tools could not.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memserver.contract import inputs
from memserver.contract.backend import MemoryFilter
from memserver.errors import InvalidInputError

RESULTS = 20  # hits per search

BULK_FIELDS = ("namespace", "tags", "speaker", "role", "session", "since", "until", "before")


def split_tags(value: str) -> list[str] | None:
    tags = [t.strip() for t in value.split(",") if t.strip()]
    return tags or None


def whole_number(value: str | None, name: str) -> int:
    if not value:
        return 0
    if not value.isdigit():
        raise InvalidInputError(f"{name} must be a whole number")
    return int(value)


def month_bounds(month: str) -> tuple[str, str]:
    """The first and last day of "YYYY-MM" (until is inclusive of a whole date)."""
    import calendar

    if len(month) != 7 or month[4] != "-" or not (month[:4].isdigit() and month[5:].isdigit()):
        raise InvalidInputError("month must look like 2026-03")
    year, number = int(month[:4]), int(month[5:])
    if not 1 <= number <= 12 or year < 1:
        raise InvalidInputError("month must look like 2026-03")
    return f"{month}-01", f"{month}-{calendar.monthrange(year, number)[1]:02d}"


def search_args(q: Mapping[str, str]) -> dict[str, Any]:
    """The search() arguments a Search form's query string names (checks: the store's, via inputs.py)."""
    min_score = q.get("min_score", "").strip()
    try:
        score = float(min_score) if min_score else None
    except ValueError:
        raise InvalidInputError("Minimum score must be a number between -1 and 1") from None
    return {
        "query": q.get("q", "").strip()[: inputs.MAX_QUERY_CHARS],
        "limit": RESULTS,
        "mode": q.get("mode") or "hybrid",
        "tags": split_tags(q.get("tags", "")),
        "since": q.get("since", "").strip() or None,
        "until": q.get("until", "").strip() or None,
        "min_score": score,
        "speaker": q.get("speaker", "").strip() or None,
        "role": q.get("role", "").strip() or None,
        "session": q.get("session", "").strip() or None,
        "namespace": q.get("namespace", "").strip() or None,
        "as_of": q.get("as_of", "").strip() or None,
        "kinds": list(inputs.check_kinds(q.get("kind", "").strip() or None)) or None,
        "include_archived": bool(q.get("include_archived")),
    }


def bulk_filter(criteria: Mapping[str, str]) -> MemoryFilter:
    """forget_matching's rule: a namespace alone selects all of it (the person still confirms); nothing at all is
    refused."""
    given = {k for k, v in criteria.items() if v}
    if not given:
        raise InvalidInputError("choose at least one criterion (a namespace alone selects all of it)")
    return MemoryFilter(
        namespace=criteria.get("namespace") or None,
        tags=split_tags(criteria.get("tags", "")),
        speaker=criteria.get("speaker") or None,
        role=criteria.get("role") or None,
        session=criteria.get("session") or None,
        since=criteria.get("since") or None,
        until=criteria.get("until") or None,
        before=criteria.get("before") or None,
        everything=given == {"namespace"},
    )
