"""The memory page's Pin / Unpin, Archive / Unarchive and (for a task) Done / Undone buttons, and the POST they send.

Each button is a submit of one small form (`change` = pin, unpin, archive, unarchive, done or undone) to
/ui/memory/{id}/mark, checked for origin and CSRF token like every other form of the browser. The change is the
contract call the CLI makes (`pin`, `archive`, `mark_done`): a new version of the memory (contract/lifecycle.py),
so the answer redirects to the new version's page; a memory that is so already redirects to itself. A version that
a newer one replaced shows no buttons (the contract refuses to change history).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from memserver.contract import inputs
from memserver.errors import InvalidInputError
from memserver.ui import views
from memserver.ui.markup import Markup, el

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from memserver.contract.backend import Memory
    from memserver.ui.app import Browser
    from memserver.ui.sessions import Visit

CHANGES = {  # the button's value: (flag, value, its label)
    "pin": ("pinned", True, "Pin"),
    "unpin": ("pinned", False, "Unpin"),
    "archive": ("archived", True, "Archive"),
    "unarchive": ("archived", False, "Unarchive"),
    "done": ("done", True, "Done"),
    "undone": ("done", False, "Undone"),
}


def buttons(memory: Memory, csrf: str) -> Markup | None:
    """The form with this memory's buttons (None for a version that is history)."""
    if memory.replaced_by:
        return None
    names = ["unpin" if memory.pinned else "pin", "unarchive" if memory.archived else "archive"]
    if memory.kind == "task":
        names.append("undone" if memory.done else "done")
    ns = memory.namespace if memory.namespace != inputs.DEFAULT_NAMESPACE else None
    return el(
        "form",
        views.hidden_csrf(csrf),
        [el("button", CHANGES[name][2], type="submit", name="change", value=name) for name in names],
        el("p", "Each change is stored as a new version; the old one stays in the history.", class_="muted"),
        method="post",
        action=views.url(f"/memory/{memory.id}/mark", namespace=ns),
        class_="marks",
        id="marks",
    )


async def mark(browser: Browser, request: Request, visit: Visit) -> Response:
    """POST /ui/memory/{id}/mark: the change, then a redirect to the memory's new version."""
    from starlette.responses import RedirectResponse

    fields = await browser.checked_form(request, visit)
    store, memory, _ = await browser.memory_of(request, visit)
    if memory is None:
        return browser.missing(visit)
    change = CHANGES.get(fields.get("change", ""))
    if change is None:
        error = f"change must be one of {', '.join(CHANGES)}"
        return await browser.memory_page(request, visit, error=error, status=400)
    flag, value, _ = change
    call = {"pinned": store.pin, "archived": store.archive, "done": store.mark_done}[flag]
    found = memory
    try:
        new = await anyio.to_thread.run_sync(lambda: call(found.id, value, namespace=found.namespace))
    except InvalidInputError as exc:
        return await browser.memory_page(request, visit, error=str(exc), status=400)
    if new is None:  # forgotten meanwhile
        return browser.missing(visit)
    return RedirectResponse(views.memory_url(new), status_code=303)
