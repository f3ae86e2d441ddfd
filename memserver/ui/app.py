"""The memory browser as an ASGI app: its routes, and the store calls of the search, browse, memory, stats and events
pages. The memory page's Edit, Tags and Forget make theirs in ui/changes.py, bulk forget in ui/bulk.py (and Pin /
Archive / Done, transfer and consolidate in marks.py, transfer.py and consolidate.py).

`Browser(stores, check_token=...)` serves /ui/... (mounted at /ui by transports/http.py, or served alone by
`memserver ui`). Every store call goes through the storage contract in a worker thread; pages are built by
views.py. Who the visitor is, is sessions.py's: with `check_token` (serve --http with bearer tokens) every page but
the sign-in and the static files needs a signed-in session, and a session sees its user's store only (the loader's
`Stores`, as /mcp does).
"""

from __future__ import annotations

import functools
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from memserver.contract import inputs, versions
from memserver.contract.backend import MemoryFilter
from memserver.errors import InvalidInputError, MemserverError
from memserver.ui import bulk, changes, consolidate, forms, marks, security, sessions, transfer, views
from memserver.ui.census import Censuses
from memserver.ui.markup import Child, Markup, breakable, el, text
from memserver.ui.plot import timeline_plot
from memserver.ui.sessions import Refused, Visit

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.types import ASGIApp

    from memserver.contract.backend import Memory, MemoryBackend
    from memserver.loader import Stores

logger = logging.getLogger(__name__)
T = TypeVar("T")

STATIC = Path(__file__).parent / "static"
PAGE = 50  # memories per Browse page
POLL_SECONDS = 0.25  # the live watch: how often a page's store is asked for its revision (as subscriptions.py)


class Browser:
    """The browser's routes over `stores`. `stores` may come later (`serve_from`), when the MCP server's lifespan
    has built them."""

    def __init__(
        self,
        stores: Stores | None = None,
        *,
        check_token: sessions.TokenCheck | None = None,
        concurrent: int = 32,
        max_body_bytes: int = 1024 * 1024,
        queue_timeout: float = 10.0,
        poll_seconds: float = POLL_SECONDS,
        home_namespace: str | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.stores = stores
        self.home_namespace = home_namespace  # `memserver ui --namespace`: the pages open on it
        self.signins = sessions.BrowserSessions(check_token, clock)  # who asks: cookies, sign-in, CSRF
        self.censuses = Censuses()
        self.poll_seconds = poll_seconds
        self.limits = {"concurrent": concurrent, "max_body_bytes": max_body_bytes, "queue_timeout": queue_timeout}

    def serve_from(self, lifespan_state: Any) -> None:
        """Take the stores of the MCP server's lifespan (`server.Lifespan.stores`), so both share one per user."""
        self.stores = lifespan_state.stores

    def asgi(self) -> ASGIApp:
        """The app, for mounting at /ui (its routes are relative to the mount)."""
        from starlette.applications import Starlette
        from starlette.routing import Mount, Route
        from starlette.staticfiles import StaticFiles

        page = self.signins.page
        routes = [
            Route("/", page(self.search_page)),
            Route("/browse", page(self.browse_page)),
            Route("/memory/{memory_id}", page(self.memory_page)),
            Route("/memory/{memory_id}/edit", page(functools.partial(changes.edit, self)), methods=["POST"]),
            Route("/memory/{memory_id}/tags", page(functools.partial(changes.retag, self)), methods=["POST"]),
            Route("/memory/{memory_id}/forget", page(functools.partial(changes.forget, self)), methods=["GET", "POST"]),
            Route("/memory/{memory_id}/mark", page(functools.partial(marks.mark, self)), methods=["POST"]),
            Route("/bulk", page(functools.partial(bulk.page, self)), methods=["GET", "POST"]),
            Route("/transfer", page(functools.partial(transfer.page, self))),
            Route("/export.jsonl", page(functools.partial(transfer.export, self))),
            Route("/import", page(functools.partial(transfer.import_, self)), methods=["POST"]),
            Route("/stats", page(self.stats_page)),
            Route("/consolidate", page(functools.partial(consolidate.page, self)), methods=["GET", "POST"]),
            Route("/events", page(self.events)),
            Route("/signin", self.signins.signin, methods=["GET", "POST"]),
            Route("/signout", page(self.signins.signout), methods=["POST"]),
            Mount("/static", app=StaticFiles(directory=STATIC), name="static"),
        ]
        app = Starlette(
            routes=routes,
            exception_handlers={security.TooLargeError: _too_large, Refused: _refused, MemserverError: _store_failed},
        )
        return security.Guard(app, **self.limits)  # type: ignore[arg-type]

    # --- who is asking -----------------------------------------------------------------------------------------

    async def _store(self, visit: Visit) -> MemoryBackend:
        if self.stores is None:
            raise Refused(503, "The memory store is not open yet; try again in a moment.")
        return await self.stores.get(visit.user)

    def _html(
        self, visit: Visit, title: str, body: Child, *, current: str, name: str, status: int = 200, live: bool = False
    ) -> Response:
        from starlette.responses import HTMLResponse

        markup = views.page(
            title, body, current=current, csrf=visit.csrf, signed_in=visit.signed_in, page_name=name, live=live
        )
        return HTMLResponse(markup, status_code=status, headers={"cache-control": "no-store"})

    # Public for the pages of other modules (ui/changes.py, bulk.py, marks.py, ...): the same checks, the same frame.

    async def checked_form(self, request: Request, visit: Visit | None) -> dict[str, str]:
        """A POST's fields once its origin and CSRF token are checked (Refused 403 otherwise)."""
        return await self.signins.form(request, visit)

    async def store_for(self, visit: Visit) -> MemoryBackend:
        """The visitor's store (Refused 503 while it is not open)."""
        return await self._store(visit)

    def render(self, visit: Visit, title: str, body: Child, *, current: str, name: str, status: int = 200) -> Response:
        """A whole HTML page (views.page) for this visit, not cached."""
        return self._html(visit, title, body, current=current, name=name, status=status)

    # --- Search ------------------------------------------------------------------------------------------------

    def _query(self, request: Request) -> dict[str, str]:
        q = dict(request.query_params)
        if self.home_namespace and "namespace" not in q:
            q["namespace"] = self.home_namespace
        return q

    async def search_page(self, request: Request, visit: Visit) -> Response:
        q = self._query(request)
        hits = None
        error = None
        status = 200
        if q.get("q", "").strip():
            store = await self._store(visit)
            try:
                args = forms.search_args(q)
                hits = await _in_thread(lambda: store.search(explain=True, **args))
            except InvalidInputError as exc:
                error, status = str(exc), 400
        body = [
            el("h1", "Search your memories"),
            views.search_form(q),
            views.error_box(error),
            el("p", f"{len(hits)} result{'s' if len(hits) != 1 else ''}", class_="muted", id="result-count")
            if hits
            else None,
            views.results(hits),
        ]
        return self._html(visit, "Search", body, current="/ui/", name="search", status=status, live=hits is not None)

    # --- Browse ------------------------------------------------------------------------------------------------

    async def browse_page(self, request: Request, visit: Visit) -> Response:
        q = self._query(request)
        store = await self._store(visit)
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
                selection = await _in_thread(lambda: store.select(chosen))
                ids = selection.ids[offset : offset + PAGE]
                found = await _in_thread(lambda: [store.get(i, namespace=namespace) for i in ids])
                memories = [m for m in found if m is not None]
                heading = f"{month}: {selection.count:,} memor{'y' if selection.count == 1 else 'ies'}"
                if offset + PAGE < selection.count:
                    next_link = views.url("/browse", **filters, month=month, offset=offset + PAGE)
            else:
                page = await _in_thread(
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
                census = self.censuses.of(store, namespace)
                return (
                    store.namespaces(),
                    store.tag_counts(namespace=namespace),
                    store.sessions(namespace=namespace),
                    census,
                )
            except InvalidInputError:
                return store.namespaces(), {}, {}, None

        spaces, tag_counts, session_counts, census = await _in_thread(facet_facts)
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
        return self._html(visit, "Browse", body, current="/ui/browse", name="browse", status=status, live=first_page)

    # --- Memory ------------------------------------------------------------------------------------------------

    async def memory_of(self, request: Request, visit: Visit) -> tuple[MemoryBackend, Memory | None, str | None]:
        """The visitor's store, the memory the path names (None: no such id, or not in that namespace) and the
        namespace the query string names."""
        store = await self._store(visit)
        namespace = request.query_params.get("namespace") or None
        memory_id = request.path_params["memory_id"]
        if not inputs.is_memory_id(memory_id.strip().lower()):
            return store, None, namespace
        return store, await _in_thread(lambda: store.get(memory_id, namespace=namespace)), namespace

    def missing(self, visit: Visit) -> Response:
        """The 404 page for a memory that is not there."""
        body = [
            el("h1", "No such memory"),
            el("p", "It may have been forgotten, or it lives in another namespace."),
            el("p", el("a", "Browse your memories", href="/ui/browse")),
        ]
        return self._html(visit, "No such memory", body, current="", name="memory", status=404)

    async def memory_page(
        self, request: Request, visit: Visit, *, message: str | None = None, error: str | None = None, status: int = 200
    ) -> Response:
        store, memory, _ = await self.memory_of(request, visit)
        if memory is None:
            return self.missing(visit)
        found = memory

        def facts() -> tuple[Any, list[Any]]:
            chain = versions.history(store, found)
            # The query is cut where the tool's is: the model reads only the first 256 word pieces anyway.
            similar = store.search(
                found.content[: inputs.MAX_QUERY_CHARS], limit=6, mode="semantic", namespace=found.namespace
            )
            return chain, [h for h in similar if h.memory.id != found.id][:5]

        chain, similar = await _in_thread(facts)
        action = functools.partial(views.url, namespace=memory.namespace if memory.namespace != "default" else None)
        csrf = views.hidden_csrf(visit.csrf)
        edit = el(
            "form",
            csrf,
            el("label", "Content", for_="f-content"),
            el("textarea", memory.content, id="f-content", name="content", rows="6", required=True, dir="auto"),
            el("button", "Save as new version", type="submit"),
            el("p", "The old text stays in the history.", class_="muted"),
            method="post",
            action=action(f"/memory/{memory.id}/edit"),
            class_="stack",
        )
        retag = el(
            "form",
            csrf,
            views.field("Tags", "tags", ", ".join(memory.tags), hint="comma-separated"),
            el("button", "Save tags", type="submit"),
            method="post",
            action=action(f"/memory/{memory.id}/tags"),
            class_="stack",
        )
        forget = el(
            "form",
            el("input", type="hidden", name="namespace", value=memory.namespace),
            el("button", "Forget", type="submit", class_="danger"),
            method="get",
            action=f"/ui/memory/{memory.id}/forget",
        )
        similar_list = (
            el("ol", [views.hit_item(h) for h in similar], class_="list compact")
            if similar
            else el("p", "Nothing similar.", class_="muted")
        )
        body = [
            el("p", el("a", "← Browse", href="/ui/browse"), class_="crumbs"),
            el("p", message, role="status", class_="notice") if message else None,
            views.error_box(error),
            el("h1", text(views.cut(memory.content, 120)), dir="auto", class_="memory-title"),
            el("p", "This is an older version: a newer one replaced it.", class_="notice")
            if memory.replaced_by
            else None,
            el("div", breakable(memory.content), class_="memory-content", dir="auto"),
            el(
                "div",
                el("section", el("h2", "Fields"), views.fields_list(memory)),
                el(
                    "div",
                    views.history_list(memory, chain),
                    el("section", el("h2", "Similar memories"), similar_list, id="similar"),
                ),
                class_="two",
            ),
            el(
                "section",
                el("h2", "Change"),
                marks.buttons(memory, visit.csrf),
                el("div", edit, retag, class_="two"),
                el("h2", "Forget"),
                forget,
                id="change",
            ),
        ]
        return self._html(visit, views.cut(memory.content, 60), body, current="", name="memory", status=status)

    # --- Stats -------------------------------------------------------------------------------------------------

    async def stats_page(self, request: Request, visit: Visit) -> Response:
        store = await self._store(visit)

        def facts() -> tuple[dict[str, Any], dict[str, Any], dict[str, int], dict[str, int], dict[str, int], Any]:
            return (
                store.stats(),
                store.health(),
                store.namespaces(),
                store.tag_counts(),
                store.sessions(),
                self.censuses.of(store, None),
            )

        stats, health, spaces, tags, sessions, census = await _in_thread(facts)
        body = [
            el("h1", "Stats"),
            el("section", el("h2", "Memories over time"), timeline_plot(census.months), class_="plot"),
            el("section", el("h2", "The store"), store_facts(stats)),
            el("section", el("h2", "Health"), health_checks(health)),
            el(
                "div",
                views.counts_table("By namespace", spaces, lambda n: views.url("/browse", namespace=n)),
                views.counts_table("By tag (namespace default)", tags, lambda t: views.url("/browse", tags=t)),
                views.counts_table(
                    "By session (namespace default)", sessions, lambda s: views.url("/browse", session=s)
                ),
                class_="tables",
            ),
        ]
        return self._html(visit, "Stats", body, current="/ui/stats", name="stats")

    # --- Live --------------------------------------------------------------------------------------------------

    async def events(self, request: Request, visit: Visit) -> Response:
        """Server-sent events: `changed` (data: the new revision) whenever the store's revision moves, while the
        session lasts."""
        from starlette.responses import StreamingResponse

        store = await self._store(visit)

        async def stream() -> AsyncIterator[str]:
            last = await anyio.to_thread.run_sync(store.revision)
            yield f"retry: 2000\nevent: ready\ndata: {last}\n\n"
            while True:
                await anyio.sleep(self.poll_seconds)
                if not self.signins.live(visit.sid):  # signed out, or its token expired: the stream ends too
                    return
                try:
                    now = await anyio.to_thread.run_sync(store.revision)
                except MemserverError:
                    return
                if now != last:
                    last = now
                    yield f"event: changed\ndata: {now}\n\n"

        return StreamingResponse(
            stream(), media_type="text/event-stream", headers={"cache-control": "no-store", "x-accel-buffering": "no"}
        )


# --- the pieces of each page's work --------------------------------------------------------------------------------

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


async def _in_thread(fn: Callable[[], T]) -> T:
    return await anyio.to_thread.run_sync(fn)


async def _too_large(request: Request, exc: Exception) -> Response:
    from starlette.responses import PlainTextResponse

    return PlainTextResponse(f"Refused: {exc}.", status_code=413)


async def _store_failed(request: Request, exc: Exception) -> Response:
    from starlette.responses import PlainTextResponse

    logger.warning("a browser request failed: %s", exc)
    return PlainTextResponse(f"The memory store could not answer: {exc}", status_code=503)


async def _refused(request: Request, exc: Exception) -> Response:
    from starlette.responses import PlainTextResponse

    status = exc.status if isinstance(exc, Refused) else 400
    return PlainTextResponse(str(exc), status_code=status)
