"""The browser's /ui/transfer page: export every memory (or one namespace's) as JSON lines, and import a JSON-lines
file, each line checked as the engine will check it, with a summary of what was stored, skipped as a duplicate, or
refused and why. app.py routes it (three lines); the store calls run in a worker thread.
"""

from __future__ import annotations

import json
from datetime import date
from typing import TYPE_CHECKING, Any

import anyio

from memserver.contract import requests
from memserver.errors import InvalidInputError, MemserverError
from memserver.ui import security, views
from memserver.ui.markup import Child, Markup, el, text
from memserver.ui.sessions import Refused

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from memserver.contract.backend import MemoryBackend
    from memserver.ui.app import Browser
    from memserver.ui.sessions import Visit

MAX_REASONS = 50


def import_lines(store: MemoryBackend, data: bytes) -> tuple[Markup, int]:
    """Import a JSON-lines upload: each line checked (requests.imported_memory, as the engine will), the good ones
    imported; the summary: stored, duplicates, refused with reasons. Blocking."""
    try:
        lines = data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return el("p", "The file is not UTF-8 text: nothing was imported.", role="alert", class_="error"), 400
    dim = int(store.stats().get("dim", 0))
    good: list[dict[str, Any]] = []
    refused: list[str] = []
    ids: set[str] = set()
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            requests.imported_memory(record, len(good), dim)
            if isinstance(record.get("id"), str):
                if record["id"] in ids:
                    raise InvalidInputError(f"id {record['id']} appears twice in this file")
                ids.add(record["id"])
        except InvalidInputError as exc:
            refused.append(f"line {n}: {str(exc).split('.', 1)[-1] if str(exc).startswith('records[') else exc}")
            continue
        except ValueError:  # (after InvalidInputError, which is one too)
            refused.append(f"line {n}: not a JSON object")
            continue
        good.append(record)
    stored = 0
    failure = None
    if good:
        try:
            stored = store.import_(good)
        except MemserverError as exc:
            failure = f"The import stopped: {exc} (memories before it stay stored; importing again skips them)."
    duplicates = len(good) - stored if failure is None else 0
    summary = el(
        "div",
        el("h3", "Import summary"),
        el(
            "dl",
            el("dt", "stored"),
            el("dd", str(stored), class_="stored"),
            el("dt", "duplicates"),
            el("dd", str(duplicates), class_="duplicates"),
            el("dt", "refused"),
            el("dd", str(len(refused)), class_="refused"),
            class_="summary",
        ),
        el("p", failure, role="alert", class_="error") if failure else None,
        el("ul", [el("li", text(r)) for r in refused[:MAX_REASONS]], class_="reasons") if refused else None,
        el("p", f"… and {len(refused) - MAX_REASONS} more refused", class_="muted")
        if len(refused) > MAX_REASONS
        else None,
    )
    return summary, 200 if failure is None else 400


async def page(
    browser: Browser, request: Request, visit: Visit, *, summary: Child = None, status: int = 200
) -> Response:
    """GET /ui/transfer: the export links and the import form (with the last import's summary, after a POST)."""
    store = await browser.store_for(visit)
    spaces = await anyio.to_thread.run_sync(store.namespaces)
    body = [
        el("h1", "Import and export"),
        el(
            "section",
            el("h2", "Export"),
            el(
                "p",
                "A backup of every memory, with its history, one JSON object a line (what ",
                el("code", "memserver import"),
                " reads).",
            ),
            el(
                "p",
                el("a", "Download JSON lines", href="/ui/export.jsonl", class_="button", download="memories.jsonl"),
            ),
            el(
                "p",
                "One namespace: ",
                views.joined(el("a", text(n), href=views.url("/export.jsonl", namespace=n)) for n in spaces),
            )
            if len(spaces) > 1
            else None,
        ),
        el(
            "section",
            el("h2", "Import"),
            el(
                "form",
                views.hidden_csrf(visit.csrf),
                el("label", "JSON lines file", for_="f-file"),
                el(
                    "input",
                    type="file",
                    id="f-file",
                    name="file",
                    accept=".jsonl,.json,.ndjson,application/x-ndjson",
                    required=True,
                ),
                el(
                    "small",
                    f"At most {security.IMPORT_MAX_BYTES // (1024 * 1024)} MiB here; bigger files: "
                    "memserver import FILE.",
                ),
                el("button", "Import", type="submit"),
                el("progress", id="import-progress", max="100", value="0", aria_label="Upload progress"),
                method="post",
                action="/ui/import",
                enctype="multipart/form-data",
                class_="stack",
                id="import-form",
            ),
            el("div", summary, id="import-summary", aria_live="polite"),
        ),
    ]
    return browser.render(visit, "Import / export", body, current="/ui/transfer", name="transfer", status=status)


async def export(browser: Browser, request: Request, visit: Visit) -> Response:
    """GET /ui/export.jsonl: every memory (of `namespace`, when given) as JSON lines, streamed."""
    from starlette.concurrency import iterate_in_threadpool
    from starlette.responses import StreamingResponse

    store = await browser.store_for(visit)
    namespace = request.query_params.get("namespace") or None

    def lines() -> Any:
        for record in store.export(namespace=namespace):
            yield json.dumps(record, ensure_ascii=False) + "\n"

    name = f"memories-{namespace or 'all'}-{date.today().isoformat()}.jsonl".replace(":", "_")
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return StreamingResponse(
        iterate_in_threadpool(lines()),
        media_type="application/x-ndjson",
        headers={"content-disposition": f'attachment; filename="{safe}"'},
    )


async def import_(browser: Browser, request: Request, visit: Visit) -> Response:
    """POST /ui/import: a JSON-lines file (a form's, or the body app.js sends with its upload progress)."""
    if not security.same_origin(request):
        raise Refused(403, "Refused: this request did not come from a page of this server (Origin/Referer).")
    kind = request.headers.get("content-type", "")
    if kind.startswith("multipart/form-data"):
        form = await request.form()
        token = form.get("csrf")
        upload = form.get("file")
        data = await upload.read() if upload is not None and not isinstance(upload, str) else b""
    else:  # app.js sends the file itself, with the token in a header (upload progress)
        token = request.headers.get("x-csrf-token")
        data = await request.body()
    browser.signins.check_csrf(visit, token)
    store = await browser.store_for(visit)
    summary, status = await anyio.to_thread.run_sync(import_lines, store, data)
    return await page(browser, request, visit, summary=summary, status=status)
