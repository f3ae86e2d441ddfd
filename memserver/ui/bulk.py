"""Bulk forget at /ui/bulk: choose by filter, preview the count and the newest, confirm exactly what was counted.

The GET previews (`select(filter, limit=SAMPLE)`: the count, a sample, every id); the confirming POST carries the
criteria and a digest of the previewed ids (features/forgetting.py, as the forget_matching tool's question), and
`delete_many` runs only if the same filter still selects the same ids: if anything changed in between, nothing is
forgotten and the new preview is shown (409). The criteria are forms.bulk_filter's: a namespace alone selects all
of it, nothing at all is refused.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from memserver.errors import InvalidInputError
from memserver.features import forgetting
from memserver.ui import forms, views
from memserver.ui.markup import Child, el

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from memserver.ui.app import Browser
    from memserver.ui.sessions import Visit

SAMPLE = 10  # memories shown in a bulk preview


async def page(browser: Browser, request: Request, visit: Visit) -> Response:
    fields = await browser.checked_form(request, visit) if request.method == "POST" else dict(request.query_params)
    store = await browser.store_for(visit)
    criteria = {k: fields.get(k, "").strip() for k in forms.BULK_FIELDS}
    given = {k: v for k, v in criteria.items() if v}
    out: list[Child] = [
        el("h1", "Forget many at once"),
        el(
            "p",
            "Choose what to forget, preview it, then confirm. Exactly the memories counted "
            "are forgotten: if they change in between, nothing is.",
            class_="muted",
        ),
    ]
    form = el(
        "form",
        el("div", *views.filter_fields(fields, before=True), class_="grid"),
        el("input", type="hidden", name="preview", value="1"),
        el("button", "Preview", type="submit"),
        method="get",
        action="/ui/bulk",
        class_="stack",
    )
    out.append(form)
    status = 200
    if given or fields.get("preview"):
        try:
            chosen = forms.bulk_filter(criteria)
            selection = await anyio.to_thread.run_sync(lambda: store.select(chosen, limit=SAMPLE))
        except InvalidInputError as exc:
            out.append(views.error_box(str(exc)))
            return browser.render(visit, "Bulk forget", out, current="/ui/bulk", name="bulk", status=400)
        if request.method == "POST":
            if forgetting.digest(selection.ids) != fields.get("digest"):
                out.append(
                    el(
                        "p",
                        "These memories changed since the preview: nothing was forgotten. Here is the new preview.",
                        role="alert",
                        class_="error",
                        id="bulk-result",
                    )
                )
                status = 409
            else:
                ids = selection.ids
                forgotten = await anyio.to_thread.run_sync(lambda: store.delete_many(ids, namespace=chosen.namespace))
                out.append(
                    el(
                        "p",
                        f"Forgot {forgetting.memories(forgotten)}.",
                        role="status",
                        class_="notice",
                        id="bulk-result",
                    )
                )
                selection = await anyio.to_thread.run_sync(lambda: store.select(chosen, limit=SAMPLE))
        many = forgetting.memories(selection.count)
        confirm = (
            el(
                "form",
                views.hidden_csrf(visit.csrf),
                [el("input", type="hidden", name=k, value=v) for k, v in given.items()],
                el("input", type="hidden", name="digest", value=forgetting.digest(selection.ids)),
                el("button", f"Forget {many}", type="submit", class_="danger"),
                " ",
                el("span", "They are deleted for good once the store compacts.", class_="muted"),
                method="post",
                action="/ui/bulk",
                class_="confirm",
            )
            if selection.count
            else None
        )
        rest = selection.count - len(selection.sample)
        out.append(
            el(
                "section",
                el("h2", el("span", f"{many} match", id="bulk-count")),
                confirm,
                el("h3", "The newest of them" if rest else "They are"),
                el("ol", [views.memory_item(m) for m in selection.sample], id="bulk-sample", class_="list"),
                el("p", f"… and {rest:,} more", class_="muted") if rest > 0 else None,
                class_="preview",
                aria_live="polite",
            )
        )
    return browser.render(visit, "Bulk forget", out, current="/ui/bulk", name="bulk", status=status)
