"""A memory's page in a real browser: every field, the history chain, edit (a new version, the old one kept as
history), retag, and forget behind a confirmation that is part of the page (never a JavaScript dialog)."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from memserver.contract.backend import MemoryBackend
from tests.ui.conftest import Server, tagged

ID = r"[0-9a-f]{32}"


def test_an_edit_makes_a_new_version_and_the_page_shows_both(ui: Server, store: MemoryBackend, page: Page) -> None:
    old = store.add("The garage door code is 4711.", ["edit-test"], speaker="Sam").id
    page.goto(ui.page(f"memory/{old}"))
    expect(page.locator("h1")).to_contain_text("The garage door code is 4711")
    expect(page.locator("#fields")).to_contain_text("Sam")
    expect(page.locator("#fields")).to_contain_text("edit-test")

    page.get_by_label("Content", exact=True).fill("The garage door code is 8080 since the new lock.")
    page.get_by_role("button", name="Save as new version", exact=True).click()
    page.wait_for_url(re.compile(f"/ui/memory/(?!{old}){ID}$"))
    new = page.url.rsplit("/", 1)[-1]
    expect(page.locator("h1")).to_contain_text("code is 8080")

    for shown in (new, old):  # both versions' pages show the same chain, the new one current
        page.goto(ui.page(f"memory/{shown}"))
        versions = page.locator("#history li.version")
        expect(versions).to_have_count(2)
        expect(page.locator("#history li.version.current")).to_have_attribute("data-id", new)
        expect(page.locator(f'#history li.version[data-id="{old}"]')).not_to_have_class(re.compile(r"\bcurrent\b"))

    assert [m.id for m in tagged(store, "edit-test")] == [new], "the edit is the current version"
    kept = store.get(old)
    assert kept is not None and kept.replaced_by == new, "the old version is kept as history"


def test_the_history_marks_a_forgotten_version(ui: Server, store: MemoryBackend, page: Page) -> None:
    first = store.add("Parking is on level 2.", ["history-test"]).id
    second = store.add("Parking is on level 3.", ["history-test"], replaces=first).id
    third = store.add("Parking is on level 4 now.", ["history-test"], replaces=second).id
    store.delete(first)

    page.goto(ui.page(f"memory/{third}"))
    expect(page.locator("#history li.version")).to_have_count(3)
    expect(page.locator("#history li.version.current")).to_have_attribute("data-id", third)
    expect(page.locator(f'#history li.version[data-id="{first}"]')).to_have_class(re.compile(r"\bforgotten\b"))
    expect(page.locator(f'#history li.version[data-id="{second}"]')).not_to_have_class(re.compile(r"\bforgotten\b"))


def test_retag_changes_the_tags(ui: Server, store: MemoryBackend, page: Page) -> None:
    memory = store.add("The plumber's number is on the fridge.", ["retag-test"]).id
    page.goto(ui.page(f"memory/{memory}"))
    page.locator("form", has=page.get_by_role("button", name="Save tags")).get_by_label("Tags").fill(
        "retag-test, house"
    )
    with page.expect_navigation():
        page.get_by_role("button", name="Save tags", exact=True).click()
    assert "house" in " ".join(page.locator("#fields").all_inner_texts())  # no wait: the page is there
    (stored,) = tagged(store, "retag-test")
    assert set(stored.tags) == {"retag-test", "house"}


def test_forget_asks_on_the_page_then_forgets(ui: Server, store: MemoryBackend, page: Page) -> None:
    memory = store.add("The old wifi password was hunter2.", ["forget-test"]).id
    page.goto(ui.page(f"memory/{memory}"))
    page.get_by_role("button", name="Forget", exact=True).click()
    confirm = page.get_by_role("button", name="Forget this memory", exact=True)
    expect(confirm).to_be_visible()
    assert tagged(store, "forget-test"), "nothing is forgotten before the confirmation"
    with page.expect_navigation():
        confirm.click()
    assert tagged(store, "forget-test") == []
    response = page.goto(ui.page(f"memory/{memory}"))
    assert response is not None and response.status == 404
