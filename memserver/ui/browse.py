"""The Browse page at /ui/browse: every memory newest first, a page at a time, or one month of the timeline.

A page without a month is `list_page` (its cursor in the Next link); a month is `select` over its bounds and a slice
of the ids it returns (the offset in the link). Beside the list: the facets (namespaces, tags, sessions, speakers with
their counts) and the timeline by month (ui/census.py: kept per store and namespace, renewed in the background). A
bad filter shows its message with a 400 and an empty list.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from memserver.contract import inputs
from memserver.contract.backend import MemoryFilter
from memserver.errors import InvalidInputError
from memserver.ui import forms, views
from memserver.ui.markup import el, text

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from memserver.contract.backend import Memory
    from memserver.ui.app import Browser
    from memserver.ui.sessions import Visit

PAGE = 50  # memories per Browse page


async def page(browser: Browser, request: Request, visit: Visit) -> Response:
    """The Browse page: one page of memories, newest first (or one month of the timeline), beside the facets."""
    q = browser.query(request)
    store = await browser.store_for(visit)
    namespace = q.get("namespace") or None
    error = None
    status = 200
    memories: list[Memory] = []
    next_link = None
    heading = "Every memory, newest first"
    filters = {k: q[k] for k in ("namespace", "tags", "session", "speaker", "role", "kind") if q.get(k)}
    filters |= {"include_archived": "1"} if q.get("include_archived") else {}
    try:
        tags = forms.split_tags(q.get("tags", ""))
        kinds = list(inputs.check_kinds(q.get("kind") or None)) or None
        archived = bool(q.get("include_archived"))
        if q.get("month"):
            month, offset = q["month"], forms.whole_number(q.get("offset"), "offset")
            since, until = forms.month_bounds(month)
            chosen = MemoryFilter(
                namespace=namespace,
                tags=tags,
                session=q.get("session") or None,
                speaker=q.get("speaker") or None,
                role=q.get("role") or None,
                since=since,
                until=until,
                kinds=kinds,
                include_archived=archived,
            )
            selection = await anyio.to_thread.run_sync(lambda: store.select(chosen))
            ids = selection.ids[offset : offset + PAGE]
            found = await anyio.to_thread.run_sync(lambda: [store.get(i, namespace=namespace) for i in ids])
            memories = [m for m in found if m is not None]
            heading = f"{month}: {selection.count:,} memor{'y' if selection.count == 1 else 'ies'}"
            if offset + PAGE < selection.count:
                next_link = views.url("/browse", **filters, month=month, offset=offset + PAGE)
        else:
            page = await anyio.to_thread.run_sync(
                lambda: store.list_page(
                    PAGE,
                    tags,
                    namespace=namespace,
                    session=q.get("session") or None,
                    speaker=q.get("speaker") or None,
                    role=q.get("role") or None,
                    cursor=q.get("cursor") or None,
                    kinds=kinds,
                    include_archived=archived,
                )
            )
            memories = page.memories
            if page.next_cursor:
                next_link = views.url("/browse", **filters, cursor=page.next_cursor)
    except InvalidInputError as exc:
        error, status = str(exc), 400
    except ValueError as exc:
        error, status = str(exc), 400

    def facet_facts() -> tuple[dict[str, int], dict[str, int], dict[str, int], Any]:
        try:
            census = browser.censuses.of(store, namespace)
            return (
                store.namespaces(),
                store.tag_counts(namespace=namespace),
                store.sessions(namespace=namespace),
                census,
            )
        except InvalidInputError:
            return store.namespaces(), {}, {}, None

    spaces, tag_counts, session_counts, census = await anyio.to_thread.run_sync(facet_facts)
    ns = {"namespace": namespace} if namespace else {}
    facets = el(
        "aside",
        el("h2", "Filter", class_="visually-hidden"),
        views.facet("Namespaces", spaces, lambda n: views.url("/browse", namespace=n)),
        views.facet("Tags", tag_counts, lambda t: views.url("/browse", **ns, tags=t)),
        views.facet("Sessions", session_counts, lambda s: views.url("/browse", **ns, session=s)),
        views.facet("Speakers", census.speakers if census else {}, lambda s: views.url("/browse", **ns, speaker=s)),
        id="facets",
    )
    months = list(reversed(census.months.items())) if census else []
    timeline = el(
        "nav",
        el("h2", "Timeline"),
        el(
            "ul",
            [
                el(
                    "li",
                    el(
                        "a",
                        month,
                        " ",
                        el("span", f"{n:,}", class_="count"),
                        href=views.url("/browse", **ns, month=month),
                        aria_current="true" if q.get("month") == month else None,
                    ),
                )
                for month, n in months
            ]
            or el("li", "no memories yet", class_="muted"),
        ),
        id="timeline",
        aria_label="Timeline by month",
    )
    active = [el("span", f"{k}: ", text(v), class_="chip") for k, v in filters.items()]
    listing = el(
        "section",
        el("h1", heading),
        views.kind_form(q),
        el("p", "Filtered by ", views.joined(active), " · ", el("a", "clear", href="/ui/browse"), class_="muted")
        if active
        else None,
        views.error_box(error),
        el("ol", [views.memory_item(m) for m in memories], id="memories", class_="list"),
        el("p", "No memories here yet.", class_="muted", id="no-memories") if not memories and not error else None,
        el("p", el("a", "Next page", href=next_link, rel="next", class_="button"), class_="pager")
        if next_link
        else None,
        class_="listing",
    )
    body = el("div", listing, el("div", facets, timeline, class_="side"), class_="browse")
    first_page = not q.get("cursor") and not q.get("month")
    return browser.render(visit, "Browse", body, current="/ui/browse", name="browse", status=status, live=first_page)
