"""Every page of the memory browser in a real browser: the shared header, the security headers, phone width, dark
mode, Browse's facets, timeline and paging, Import / export both ways, and Stats."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from memserver.contract.backend import MemoryBackend
from tests.ui.conftest import Server

PAGES = ["", "browse", "bulk", "transfer", "stats"]
NAV = ["Search", "Browse", "Bulk forget", "Consolidate", "Import / export", "Stats"]
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
OVERFLOW = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


@pytest.mark.parametrize("path", PAGES)
def test_every_page_has_the_header_landmarks_and_security_headers(ui: Server, page: Page, path: str) -> None:
    response = page.goto(ui.page(path))
    assert response is not None and response.status == 200
    headers = response.headers
    assert headers.get("content-security-policy") == CSP
    assert headers.get("x-content-type-options") == "nosniff"
    # same-origin rather than the contract's no-referrer (docs/ui.md: with no-referrer Chromium posts forms
    # with `Origin: null`); either sends nothing to another site.
    assert headers.get("referrer-policy") in ("no-referrer", "same-origin")
    nav = page.get_by_role("navigation").first
    for name in NAV:
        expect(nav.get_by_role("link", name=name, exact=True)).to_be_visible()
    expect(page.locator("main")).to_have_count(1)
    expect(page.locator("h1")).to_have_count(1)
    skip = page.locator("a[href^='#']").first
    target = skip.get_attribute("href")
    assert target and page.locator(target).count() == 1, "the skip link leads to an element of the page"


@pytest.mark.parametrize("path", PAGES)
def test_every_page_fits_a_phone_and_has_a_dark_look(
    ui: Server, open_context: Callable[..., BrowserContext], path: str
) -> None:
    background = "getComputedStyle(document.body).backgroundColor"
    light = open_context(viewport={"width": 375, "height": 812}, color_scheme="light").new_page()
    dark = open_context(viewport={"width": 375, "height": 812}, color_scheme="dark").new_page()
    for each in (light, dark):
        each.goto(ui.page(path))
        assert each.evaluate(OVERFLOW) <= 1, f"{path or 'search'} is wider than a 375 px phone"
    assert light.evaluate(background) != dark.evaluate(background), "prefers-color-scheme: dark changes the page"


def test_browse_lists_newest_first_with_facets_a_timeline_and_pages(
    ui: Server, store: MemoryBackend, page: Page
) -> None:
    page.goto(ui.page("browse"))
    facets = page.locator("#facets")
    family = facets.get_by_role("link", name=re.compile(r"^family\b"))
    expect(family).to_contain_text("1")  # its count
    expect(facets).to_contain_text("standup-2026-06-01")  # a session
    expect(facets).to_contain_text("Sam")  # a speaker

    timeline = page.locator("#timeline").get_by_role("link")
    assert timeline.count() >= 5, "May to September 2026 and now"
    july = page.locator("#timeline").get_by_role("link", name=re.compile(r"2026-07|Jul\w* 2026"))
    july.first.click()
    page.wait_for_load_state()
    expect(page.locator("#memories li.memory").first).to_contain_text("dentist appointment")

    page.goto(ui.page("browse"))
    family.click()
    page.wait_for_load_state()
    expect(page.locator("#memories li.memory")).to_have_count(1)
    expect(page.locator("#memories li.memory")).to_contain_text("Ana, my sister")

    page.goto(ui.page("browse"))
    seen: list[str] = []
    for _ in range(50):  # follow "Next page" to the end: every memory exactly once, newest first
        seen += [li.get_attribute("data-id") or "" for li in page.locator("#memories li.memory").all()]
        more = page.get_by_role("link", name="Next page", exact=True)
        if more.count() == 0:
            break
        more.click()
        page.wait_for_load_state()
    every = []
    cursor = None
    while True:
        batch = store.list_page(100, cursor=cursor)
        every += [m.id for m in batch.memories]
        cursor = batch.next_cursor
        if not cursor:
            break
    assert seen == every


def test_export_downloads_json_lines_and_import_reports_what_it_did(
    ui: Server, store: MemoryBackend, page: Page, tmp_path: Path
) -> None:
    page.goto(ui.page("transfer"))
    with page.expect_download() as download:
        page.get_by_role("link", name="Download JSON lines", exact=True).click()
    records = [json.loads(line) for line in Path(download.value.path()).read_text().splitlines() if line.strip()]
    assert any(r["content"].startswith("Ana, my sister") for r in records)
    assert all("content" in r and "id" in r for r in records)

    upload = tmp_path / "upload.jsonl"
    lines = [
        {"content": "Imported: the library closes at 8 on Thursdays.", "tags": ["import-test"]},
        {"content": "Imported: the recycling goes out on Tuesdays.", "tags": ["import-test"]},
        {"content": "Ana, my sister, lives in Porto and visits every August."},  # a duplicate
        {"content": "", "tags": ["import-test"]},  # refused: empty content
    ]
    upload.write_text("".join(json.dumps(r) + "\n" for r in lines))
    page.get_by_label("JSON lines file", exact=True).set_input_files(upload)
    page.get_by_role("button", name="Import", exact=True).click()
    summary = page.locator("#import-summary")
    expect(summary).to_contain_text(re.compile(r"2\s+stored|stored\D{0,3}2"))
    expect(summary).to_contain_text(re.compile(r"1\s+duplicate|duplicates\D{0,3}1"))
    expect(summary).to_contain_text(re.compile(r"1\s+refused|refused\D{0,3}1"))
    expect(summary).to_contain_text(re.compile(r"line 4\b.*(content|empty)", re.IGNORECASE))  # the reason
    expect(page.locator("progress#import-progress")).to_have_count(1)
    assert len(store.list_recent(10, ["import-test"])) == 2


def test_stats_plot_the_memories_and_tell_the_store(ui: Server, page: Page) -> None:
    page.goto(ui.page("stats"))
    plot = page.locator("svg#timeline-plot")
    expect(plot).to_be_visible()
    assert plot.locator("rect, path, circle, polyline").count() > 0
    main = page.locator("main")
    for text in ("family", "work", "standup-2026-06-01", "default"):
        expect(main).to_contain_text(text)
    facts = page.locator("#store-facts")
    expect(facts).to_contain_text(re.compile(r"local", re.IGNORECASE))  # the engine
    expect(facts).to_contain_text("all-MiniLM-L6-v2")
