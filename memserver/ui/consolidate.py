"""The browser's /ui/consolidate page: the proposals of contract/consolidation.py (near-duplicates to merge, stale
statements to archive), each with its memories, its evidence and an Apply button (a POST with the page's CSRF
token); nothing changes without that click. app.py routes it (one line); the store calls run in a worker thread.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from memserver.contract import consolidation
from memserver.errors import InvalidInputError
from memserver.ui import views
from memserver.ui.markup import Child, Markup, el, text

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from memserver.contract.backend import MemoryBackend
    from memserver.ui.app import Browser
    from memserver.ui.sessions import Visit

SHOWN = 50  # proposals on one page


async def page(browser: Browser, request: Request, visit: Visit) -> Response:
    """GET: the proposals; POST (proposal, namespace): apply that one, then back here with what was done."""
    from starlette.responses import RedirectResponse

    store = await browser.store_for(visit)
    if request.method == "POST":
        fields = await browser.checked_form(request, visit)
        namespace = fields.get("namespace") or None
        outcome = await anyio.to_thread.run_sync(_apply, store, fields.get("proposal", ""), namespace)
        return RedirectResponse(views.url("/consolidate", namespace=namespace, done=outcome), status_code=303)
    q = dict(request.query_params)
    namespace = q.get("namespace") or None
    error, status = None, 200
    proposals: list[consolidation.Proposal] = []
    try:
        proposals = await anyio.to_thread.run_sync(lambda: consolidation.propose(store, namespace=namespace))
    except InvalidInputError as exc:
        error, status = str(exc), 400
    items = await anyio.to_thread.run_sync(lambda: [_item(store, p, visit.csrf, namespace) for p in proposals[:SHOWN]])
    body: list[Child] = [
        el("h1", "Consolidate"),
        el(
            "p",
            "Near-duplicates to merge into one memory and stale statements to archive. Nothing changes until you "
            "press Apply; history keeps every earlier version, and an archived memory can be unarchived.",
            class_="muted",
        ),
        el("p", text(q["done"]), class_="notice", id="done", role="status") if q.get("done") else None,
        views.error_box(error),
        el("p", f"Namespace: {namespace}" if namespace else "Every namespace", class_="muted", id="namespace"),
        el("p", f"{len(proposals)} proposal{'s' if len(proposals) != 1 else ''}", class_="muted", id="count"),
        el("ol", items, id="proposals", class_="list") if items else None,
        el("p", "Nothing to consolidate.", class_="muted", id="nothing") if not proposals and not error else None,
    ]
    return browser.render(visit, "Consolidate", body, current="/ui/consolidate", name="consolidate", status=status)


def _apply(store: MemoryBackend, proposal_id: str, namespace: str | None) -> str:
    """Apply the proposal `proposal_id` as it stands now; the sentence the page shows after."""
    found = consolidation.find(consolidation.propose(store, namespace=namespace), proposal_id)
    if found is None:
        return "That proposal is gone (something changed since the page was shown): nothing was applied."
    try:
        written = consolidation.apply(store, found)
    except InvalidInputError as exc:
        return f"Not applied: {exc}"
    if isinstance(found, consolidation.MergeProposal):
        return f"Merged {len(found.ids)} memories into {written[0].id[:8]}."
    return f"Archived the stale statement {found.stale[:8]}."


def _item(store: MemoryBackend, proposal: consolidation.Proposal, csrf: str, namespace: str | None) -> Markup:
    memories = [store.get(i, namespace=proposal.namespace) for i in proposal.ids]
    rows = [
        el("li", el("a", m.id[:8], href=views.memory_url(m)), " ", text(views.cut(m.content, 300)), dir="auto")
        for m in memories
        if m is not None
    ]
    if isinstance(proposal, consolidation.MergeProposal):
        heading = f"Merge {len(proposal.ids)} near-duplicates"
        best = max((e["cosine"] for e in proposal.evidence), default=0.0)
        shared = sorted({w for e in proposal.evidence for w in e["shared_words"]})
        detail: list[Child] = [
            el("p", "Into: ", el("q", text(proposal.content), dir="auto")),
            el("p", f"cosine up to {best:.2f}; shared words: {', '.join(shared)}", class_="muted"),
        ]
        button = "Apply: merge"
    else:
        e = proposal.evidence
        heading = f"Archive a stale statement of {e['speaker']}"
        cue = f"; update words: {', '.join(e['update_words'])}" if e["update_words"] else ""
        detail = [
            el(
                "p",
                f"said {e['older_at'][:10]}, then {e['newer_at'][:10]}: was {', '.join(e['was'])}, now "
                f"{', '.join(e['now'])}{cue}; score {e['score']:.2f}",
                class_="muted",
            )
        ]
        button = "Apply: archive the older"
    form = el(
        "form",
        views.hidden_csrf(csrf),
        el("input", type="hidden", name="proposal", value=proposal.id),
        el("input", type="hidden", name="namespace", value=namespace or ""),
        el("button", button, type="submit"),
        method="post",
        action=views.url("/consolidate"),
    )
    where = f" (namespace {proposal.namespace})" if proposal.namespace != "default" else ""
    return el(
        "li", el("h2", heading + where), el("ol", rows), *detail, form, class_="proposal", data_proposal=proposal.id
    )
