"""The Stats page at /ui/stats: what the store holds and how it is doing, for a person rather than a model.

One worker-thread call gathers the contract's stats(), health(), namespaces(), tag_counts() and sessions() and the
census (ui/census.py: memories per month, drawn by ui/plot.py); the rest turns them into a definition list, the health
checks with their advice, and count tables that link to Browse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import anyio

from memserver.ui import views
from memserver.ui.markup import Child, Markup, el
from memserver.ui.plot import timeline_plot

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from memserver.ui.app import Browser
    from memserver.ui.sessions import Visit


async def page(browser: Browser, request: Request, visit: Visit) -> Response:
    """The Stats page: memories over time, the store's figures and health, counts by namespace, tag and session."""
    store = await browser.store_for(visit)

    def facts() -> tuple[dict[str, Any], dict[str, Any], dict[str, int], dict[str, int], dict[str, int], Any]:
        return (
            store.stats(),
            store.health(),
            store.namespaces(),
            store.tag_counts(),
            store.sessions(),
            browser.censuses.of(store, None),
        )

    stats, health, spaces, tags, sessions, census = await anyio.to_thread.run_sync(facts)
    body = [
        el("h1", "Stats"),
        el("section", el("h2", "Memories over time"), timeline_plot(census.months), class_="plot"),
        el("section", el("h2", "The store"), store_facts(stats)),
        el("section", el("h2", "Health"), health_checks(health)),
        el(
            "div",
            views.counts_table("By namespace", spaces, lambda n: views.url("/browse", namespace=n)),
            views.counts_table("By tag (namespace default)", tags, lambda t: views.url("/browse", tags=t)),
            views.counts_table("By session (namespace default)", sessions, lambda s: views.url("/browse", session=s)),
            class_="tables",
        ),
    ]
    return browser.render(visit, "Stats", body, current="/ui/stats", name="stats")


FACT_LABELS = {
    "engine": "engine",
    "model": "model",
    "dim": "dimensions",
    "count": "current memories",
    "replaced": "kept as history",
    "namespaces": "namespaces",
    "collection": "collection",
    "bytes_on_disk": "size on disk",
    "journal_bytes": "journal",
    "deleted_pending_compaction": "forgotten, awaiting compaction",
}


def store_facts(stats: Mapping[str, Any]) -> Markup:
    rows: list[Child] = []
    for key, label in FACT_LABELS.items():
        if key in stats:
            value = stats[key]
            shown = (
                _bytes(value)
                if key.endswith("bytes") or key == "bytes_on_disk"
                else (f"{value:,}" if isinstance(value, int) else str(value))
            )
            rows += [el("dt", label), el("dd", shown)]
    if "deleted_pending_compaction" in stats:
        pending = stats["deleted_pending_compaction"]
        rows += [
            el("dt", "compaction"),
            el("dd", "not needed" if not pending else f"would reclaim {pending:,} memories"),
        ]
    for key, value in stats.items():
        if key not in FACT_LABELS and key != "path":
            rows += [
                el("dt", key.replace("_", " ")),
                el("dd", json.dumps(value) if isinstance(value, dict | list) else str(value)),
            ]
    return el("dl", rows, id="store-facts")


def health_checks(health: Mapping[str, Any]) -> Markup:
    """The store's health (the contract's health(), as `memserver doctor` prints it): checkpoint, journal and
    replay, compaction, disk, the model's check; each warning with its advice."""
    items: list[Child] = []
    for check in health.get("checks", []):
        parts: list[Child] = [el("strong", f"{check['status']}: {check['name']}"), " ", check["detail"]]
        if check.get("advice"):
            parts += [el("br"), check["advice"]]
        items.append(el("li", parts, class_=f"check {check['status']}"))
    return el("ul", items, id="health")


def _bytes(n: Any) -> str:
    if not isinstance(n, int | float):
        return str(n)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:,.0f} {unit}" if unit == "bytes" else f"{n:,.1f} {unit}"
        n /= 1024
    return str(n)
