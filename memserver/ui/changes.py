"""The memory page's changes: Edit and Tags (each a new version of the memory), and Forget (asked, then done).

Edit and Tags POST to /ui/memory/{id}/edit and /tags and store `contract.lifecycle.new_version` of the memory (its
history keeps the old one) through `add_many`, so the store's rules apply as to any write: the answer redirects to
the new version's page, or shows the memory page again with the store's message (400), or with "nothing changed"
(409) when a current memory already has that content. Forget GETs a confirmation page and POSTs the delete. Each
POST is checked for origin and CSRF token like every form of the browser (`Browser.checked_form`). A missing memory
(no such id, or not in the namespace asked) answers 404: Forget looks it up before checking the form, Edit and Tags
after (so there a refused form answers 403 first).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from memserver.contract import lifecycle
from memserver.errors import InvalidInputError
from memserver.ui import forms, views
from memserver.ui.markup import el, text

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from memserver.ui.app import Browser
    from memserver.ui.sessions import Visit


async def new_version(
    browser: Browser, request: Request, visit: Visit, *, content: str | None, tags: str | None
) -> Response:
    from starlette.responses import RedirectResponse

    store, memory, _ = await browser.memory_of(request, visit)
    if memory is None:
        return browser.missing(visit)
    old = memory
    try:
        new_tags = forms.split_tags(tags) if tags is not None else list(old.tags)
        text_now = content if content is not None else old.content
        item = lifecycle.new_version(old, content=text_now, tags=new_tags)  # a pinned task stays one
        new = await anyio.to_thread.run_sync(lambda: store.add_many([item])[0])
    except InvalidInputError as exc:
        return await browser.memory_page(request, visit, error=str(exc), status=400)
    if new.duplicate:
        note = "Nothing changed: a current memory already has this content" + (
            " (this one: the store keeps one memory per content, so tags change with the text)."
            if new.id == old.id
            else "."
        )
        return await browser.memory_page(request, visit, error=note, status=409)
    return RedirectResponse(views.memory_url(new), status_code=303)


async def edit(browser: Browser, request: Request, visit: Visit) -> Response:
    fields = await browser.checked_form(request, visit)
    return await new_version(browser, request, visit, content=fields.get("content", ""), tags=None)


async def retag(browser: Browser, request: Request, visit: Visit) -> Response:
    fields = await browser.checked_form(request, visit)
    return await new_version(browser, request, visit, content=None, tags=fields.get("tags", ""))


async def forget(browser: Browser, request: Request, visit: Visit) -> Response:
    from starlette.responses import RedirectResponse

    store, memory, namespace = await browser.memory_of(request, visit)
    if memory is None:
        return browser.missing(visit)
    if request.method == "POST":
        await browser.checked_form(request, visit)
        found = memory
        await anyio.to_thread.run_sync(lambda: store.delete(found.id, namespace=found.namespace))
        return RedirectResponse(views.url("/browse", forgot=memory.id[:8]), status_code=303)
    body = [
        el("h1", "Forget this memory?"),
        el("blockquote", text(views.cut(memory.content, 600)), dir="auto"),
        el("p", "It is deleted for good once the store compacts; its other versions stay."),
        el(
            "form",
            views.hidden_csrf(visit.csrf),
            el("button", "Forget this memory", type="submit", class_="danger"),
            " ",
            el("a", "Keep it", href=views.memory_url(memory)),
            method="post",
            action=views.url(f"/memory/{memory.id}/forget", namespace=namespace),
        ),
    ]
    return browser.render(visit, "Forget?", body, current="", name="forget")
