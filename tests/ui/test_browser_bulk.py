"""Bulk forget in a real browser: choose by filter, see the count and a sample, confirm; exactly what was counted is
forgotten, and nothing at all if the set changed in the meantime (forget_matching's semantics)."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from memserver.contract.backend import MemoryBackend
from tests.ui.conftest import Server, tagged


def preview(page: Page, ui: Server, tag: str) -> None:
    page.goto(ui.page("bulk"))
    page.get_by_label("Tags", exact=True).fill(tag)
    page.get_by_role("button", name="Preview", exact=True).click()


def test_bulk_forget_previews_the_count_and_forgets_exactly_that_many(
    ui: Server, store: MemoryBackend, page: Page
) -> None:
    store.add_many([{"content": f"Receipt {i} for the kitchen renovation.", "tags": ["bulk-test"]} for i in range(7)])
    store.add("The kitchen renovation is done.", ["bulk-keep"])
    before = store.stats()["count"]

    preview(page, ui, "bulk-test")
    expect(page.locator("#bulk-count")).to_contain_text(re.compile(r"\b7 memories"))
    sample = page.locator("#bulk-sample li")
    expect(sample.first).to_contain_text("kitchen renovation")
    assert 1 <= sample.count() <= 7
    expect(page.locator("#bulk-sample")).not_to_contain_text("is done")  # bulk-keep is not in the set
    assert len(tagged(store, "bulk-test")) == 7, "a preview forgets nothing"

    page.get_by_role("button", name="Forget 7 memories", exact=True).click()
    expect(page.locator("#bulk-result")).to_contain_text("Forgot 7 memories")
    assert tagged(store, "bulk-test") == []
    assert len(tagged(store, "bulk-keep")) == 1
    assert store.stats()["count"] == before - 7


def test_bulk_forget_forgets_nothing_when_the_set_changed_after_the_preview(
    ui: Server, store: MemoryBackend, page: Page
) -> None:
    store.add_many([{"content": f"Draft {i} of the newsletter.", "tags": ["bulk-race"]} for i in range(3)])
    preview(page, ui, "bulk-race")
    expect(page.locator("#bulk-count")).to_contain_text(re.compile(r"\b3 memories"))
    store.add("Draft 3 of the newsletter, written meanwhile.", ["bulk-race"])

    page.get_by_role("button", name="Forget 3 memories", exact=True).click()
    expect(page.locator("main")).to_contain_text(re.compile(r"changed|nothing", re.IGNORECASE))
    expect(page.locator("main")).not_to_contain_text("Forgot 3 memories")
    assert len(tagged(store, "bulk-race")) == 4, "nothing is forgotten when the set changed"

    preview(page, ui, "bulk-race")
    expect(page.locator("#bulk-count")).to_contain_text(re.compile(r"\b4 memories"))
