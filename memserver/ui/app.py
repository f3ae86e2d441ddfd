"""The memory browser as an ASGI app: its routes, and the store calls of the search, memory and events pages. The
other pages are their own modules' (each a function of the Browser and the request): Browse in ui/browse.py, Stats in
ui/stats.py, the memory page's Edit, Tags and Forget in ui/changes.py, bulk forget in ui/bulk.py, Pin / Archive /
Done, transfer and consolidate in marks.py, transfer.py and consolidate.py.

`Browser(stores, check_token=...)` serves /ui/... (mounted at /ui by transports/http.py, or served alone by
`memserver ui`). Every store call goes through the storage contract in a worker thread; pages are built by
views.py. Who the visitor is, is sessions.py's: with `check_token` (serve --http with bearer tokens) every page but
the sign-in and the static files needs a signed-in session, and a session sees its user's store only (the loader's
`Stores`, as /mcp does).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import anyio

from memserver.contract import inputs, versions
from memserver.errors import InvalidInputError, MemserverError
from memserver.ui import browse, bulk, changes, consolidate, forms, marks, security, sessions, stats, transfer, views
from memserver.ui.census import Censuses
from memserver.ui.markup import Child, breakable, el, text
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
            Route("/browse", page(functools.partial(browse.page, self))),
            Route("/memory/{memory_id}", page(self.memory_page)),
            Route("/memory/{memory_id}/edit", page(functools.partial(changes.edit, self)), methods=["POST"]),
            Route("/memory/{memory_id}/tags", page(functools.partial(changes.retag, self)), methods=["POST"]),
            Route("/memory/{memory_id}/forget", page(functools.partial(changes.forget, self)), methods=["GET", "POST"]),
            Route("/memory/{memory_id}/mark", page(functools.partial(marks.mark, self)), methods=["POST"]),
            Route("/bulk", page(functools.partial(bulk.page, self)), methods=["GET", "POST"]),
            Route("/transfer", page(functools.partial(transfer.page, self))),
            Route("/export.jsonl", page(functools.partial(transfer.export, self))),
            Route("/import", page(functools.partial(transfer.import_, self)), methods=["POST"]),
            Route("/stats", page(functools.partial(stats.page, self))),
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

    def render(
        self, visit: Visit, title: str, body: Child, *, current: str, name: str, status: int = 200, live: bool = False
    ) -> Response:
        """A whole HTML page (views.page) for this visit, not cached; `live`: it reloads when the store changes."""
        return self._html(visit, title, body, current=current, name=name, status=status, live=live)

    def query(self, request: Request) -> dict[str, str]:
        """The query string's fields, with `memserver ui --namespace` as the namespace when none is given."""
        q = dict(request.query_params)
        if self.home_namespace and "namespace" not in q:
            q["namespace"] = self.home_namespace
        return q

    # --- Search ------------------------------------------------------------------------------------------------

    async def search_page(self, request: Request, visit: Visit) -> Response:
        q = self.query(request)
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
