"""The Search page in a real browser: recall by meaning and by words, filters, scores, the explanation on demand,
and the whole page driven from the keyboard alone."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from tests.ui.conftest import Server, tab_to


def search(page: Page, ui: Server, query: str, *, mode: str | None = None, tags: str | None = None) -> None:
    """Fill the search form as a person does and submit it."""
    page.goto(ui.page())
    page.get_by_label("Query", exact=True).fill(query)
    if mode is not None:
        page.get_by_label("Mode", exact=True).select_option(mode)
    if tags is not None:
        page.get_by_role("search").get_by_label("Tags", exact=True).fill(tags)
    page.get_by_role("button", name="Search", exact=True).click()
    page.wait_for_url(re.compile(r"[?&]q="))


def test_search_finds_a_memory_by_meaning_and_explains_it(ui: Server, page: Page) -> None:
    search(page, ui, "where does my sister live?")
    best = page.locator("#results li.hit").first
    expect(best).to_contain_text("Ana, my sister, lives in Porto")
    memory_id = best.get_attribute("data-id")
    assert memory_id and re.fullmatch(r"[0-9a-f]{32}", memory_id)
    expect(best.get_by_role("link").first).to_have_attribute("href", re.compile(f"/ui/memory/{memory_id}$"))
    expect(best.locator(".score")).to_have_text(re.compile(r"\d\.\d"))

    explain = best.locator("details.explain")
    expect(explain).not_to_have_attribute("open", re.compile(".*"))
    summary = explain.locator("summary")
    expect(summary).to_have_text("Why this result")
    summary.click()
    expect(explain).to_have_attribute("open", re.compile(".*"))
    words = explain.inner_text().replace("Why this result", "")
    assert re.search(r"semantic|meaning|keyword|words", words, re.IGNORECASE), words
    bars = explain.locator("meter, progress, [class*=bar]")
    expect(bars.first).to_be_visible()


def test_keyword_mode_and_a_tag_filter_narrow_the_results(ui: Server, page: Page) -> None:
    search(page, ui, "tyre", mode="keyword")
    expect(page.locator("#results li.hit")).to_have_count(1)
    expect(page.locator("#results li.hit")).to_contain_text("700x28c")

    search(page, ui, "when is my appointment", tags="health")
    expect(page.locator("#results li.hit").first).to_contain_text("dentist appointment")
    expect(page.locator("#results")).not_to_contain_text("aisle seats")  # tagged travel, not health

    search(page, ui, "zebra xylophone quasar", mode="keyword")
    expect(page.locator("#no-results")).to_be_visible()
    expect(page.locator("#results li.hit")).to_have_count(0)


FOCUS_RING = "getComputedStyle(el).outlineStyle !== 'none' || getComputedStyle(el).boxShadow !== 'none'"


def test_search_works_with_the_keyboard_alone(ui: Server, page: Page) -> None:
    page.goto(ui.page())
    # The skip link is the page's first stop: reached backwards from the query input (which may have autofocus).
    tab_to(page, "(el) => el.name === 'q'")
    tab_to(page, "(el) => el.matches('a[href^=\"#\"]')", key="Shift+Tab")
    page.keyboard.press("Enter")  # skip to the content, then on to the query
    tab_to(page, "(el) => el.name === 'q'")
    assert page.evaluate(f"(el => {FOCUS_RING})(document.activeElement)"), "the focused query input shows no focus"
    page.keyboard.type("sister in Porto")
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"[?&]q=sister"))
    best = page.locator("#results li.hit").first
    expect(best).to_contain_text("Ana, my sister")

    in_first_hit = "el.closest('li.hit') === document.querySelector('li.hit')"
    tab_to(page, f"(el) => el.tagName === 'SUMMARY' && {in_first_hit}")
    page.keyboard.press("Enter")
    expect(best.locator("details.explain")).to_have_attribute("open", re.compile(".*"))

    tab_to(page, f"(el) => el.tagName === 'A' && {in_first_hit}", key="Shift+Tab")
    assert page.evaluate(f"(el => {FOCUS_RING})(document.activeElement)"), "the focused result link shows no focus"
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/ui/memory/[0-9a-f]{32}$"))
    expect(page.locator("h1")).to_contain_text("Ana, my sister")
