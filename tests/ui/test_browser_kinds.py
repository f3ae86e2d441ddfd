"""Kinds, pins, archive and done in a real browser: each memory shows its kind and badges, Search and Browse filter
by kind and hide archived memories unless asked, and the memory page's Pin / Archive / Done buttons store a new
version and go to it (issue 24)."""

from __future__ import annotations

import re

from playwright.sync_api import Page, expect

from memserver.contract.backend import MemoryBackend
from tests.ui.conftest import Server, tagged

ID = r"[0-9a-f]{32}"


def click_to_new_version(page: Page, name: str, old: str, *, within: str = "#marks") -> str:
    """Press the memory page's button `name` (in `within`) and wait for the new version's page; its id."""
    page.locator(within).get_by_role("button", name=name, exact=True).click()
    page.wait_for_url(re.compile(f"/ui/memory/(?!{old}){ID}$"))
    return page.url.rsplit("/", 1)[-1]


def test_pin_archive_and_done_buttons_make_new_versions(ui: Server, store: MemoryBackend, page: Page) -> None:
    first = store.add("Renew the passport before the trip to Lima", ["kinds-ui"], kind="task", due="2027-01-15").id
    page.goto(ui.page(f"memory/{first}"))
    fields = page.locator("#fields")
    expect(fields).to_contain_text("task")
    expect(fields).to_contain_text("2027-01-15")
    marks = page.locator("#marks")
    expect(marks.get_by_role("button")).to_have_text(["Pin", "Archive", "Done"])

    pinned = click_to_new_version(page, "Pin", first)
    expect(marks.get_by_role("button")).to_have_text(["Unpin", "Archive", "Done"])
    expect(fields).to_contain_text("pinned")
    expect(page.locator(f'#history li.version[data-id="{first}"]')).to_be_visible()  # the old one is history
    done = click_to_new_version(page, "Done", pinned)
    expect(fields).to_contain_text("done, pinned")
    archived = click_to_new_version(page, "Archive", done)
    expect(marks.get_by_role("button")).to_have_text(["Unpin", "Unarchive", "Undone"])
    assert tagged(store, "kinds-ui") == [], "archived: out of the listings"
    now = store.get(archived)
    assert now is not None and (now.pinned, now.done, now.archived, now.replaces) == (True, True, True, done)

    page.goto(ui.page(f"memory/{first}"))  # an older version has no buttons: history does not change
    expect(page.locator("#marks")).to_have_count(0)


def test_search_filters_by_kind_and_shows_archived_only_when_asked(
    ui: Server, store: MemoryBackend, page: Page
) -> None:
    store.add("Marta prefers window seats on the night train", kind="preference")
    task = store.add("Book the night train sleeper for Marta", kind="task", due="2027-02-01")
    store.archive(store.add("The night train used to leave at ten", kind="fact").id)
    page.goto(ui.page("?q=night+train+Marta"))
    hits = page.locator("#results li.hit")
    expect(hits.filter(has_text="Book the night train").locator(".kind")).to_have_text("task")
    expect(hits.filter(has_text="Book the night train").locator(".due")).to_have_text("due 2027-02-01")
    expect(page.locator("#results")).not_to_contain_text("used to leave at ten")

    page.get_by_role("search").get_by_label("Kind", exact=True).select_option("task")
    page.get_by_role("button", name="Search", exact=True).click()
    page.wait_for_url(re.compile(r"kind=task"))
    expect(hits.first).to_have_attribute("data-id", task.id)
    expect(page.locator("#results")).not_to_contain_text("window seats")

    page.get_by_role("search").get_by_label("Kind", exact=True).select_option("")
    page.get_by_label("Include archived").check()
    page.get_by_role("button", name="Search", exact=True).click()
    page.wait_for_url(re.compile(r"include_archived=1"))
    archived = hits.filter(has_text="used to leave at ten")
    expect(archived.locator(".badge.archived")).to_have_text("archived")
    expect(page.get_by_label("Include archived")).to_be_checked()


def test_browse_filters_by_kind(ui: Server, store: MemoryBackend, page: Page) -> None:
    person = store.add("Olu is the new neighbour at number 12", ["kinds-browse"], kind="person")
    store.add("The neighbour's cat is called Biscuit", ["kinds-browse"])
    page.goto(ui.page("browse?tags=kinds-browse"))
    expect(page.locator("#memories li.memory")).to_have_count(2)
    page.get_by_role("form", name="Kind and archive").get_by_label("Kind", exact=True).select_option("person")
    page.get_by_role("button", name="Show", exact=True).click()
    page.wait_for_url(re.compile(r"kind=person"))
    expect(page.locator("#memories li.memory")).to_have_count(1)
    expect(page.locator("#memories li.memory")).to_have_attribute("data-id", person.id)
    expect(page.locator("#memories li.memory .kind")).to_have_text("person")


def test_an_edit_keeps_the_kind_and_the_pin(ui: Server, store: MemoryBackend, page: Page) -> None:
    task = store.add("Call the plumber about the tap", ["kinds-edit"], kind="task", due="2027-03-01")
    pinned = store.pin(task.id)
    assert pinned is not None
    page.goto(ui.page(f"memory/{pinned.id}"))
    page.get_by_label("Content", exact=True).fill("Call the plumber about the kitchen tap")
    edited = click_to_new_version(page, "Save as new version", pinned.id, within="#change")
    expect(page.locator("#fields")).to_contain_text("pinned")
    now = store.get(edited)
    assert now is not None and (now.kind, now.due, now.pinned, now.replaces) == ("task", "2027-03-01", True, pinned.id)
