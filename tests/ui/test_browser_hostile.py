"""The hostile battery in a real browser: memories whose content, tags, speaker, session and source are markup,
script, `javascript:` links, right-to-left overrides or 20,000 characters render as text on every page, and no
script runs (the page guard of conftest.py fails a test on any dialog, CSP violation or page error).

Namespaces cannot carry markup (letters, digits and _.:@- only); a hostile namespace typed into a form is
reflected back instead, which is tested here too."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import BrowserContext, Page, expect

from memserver.contract.backend import MemoryBackend
from tests.ui.conftest import IMG, JS_LINK, LONG, RLO, SCRIPT, Server

# Whatever the page holds that could run or leave: scripts that are not the app's, event-handler attributes, and
# links, sources or form targets outside the app's own pages (data: images and icons aside).
ACTIVE = """() => {
  const found = [];
  const own = (url) => url.origin === location.origin && url.pathname.startsWith('/ui/');
  for (const s of document.scripts) {
    if (!s.src || !new URL(s.src).pathname.startsWith('/ui/static/')) {
      found.push('script ' + (s.src || s.text.slice(0, 60)));
    }
  }
  for (const el of document.querySelectorAll('*')) {
    for (const a of el.attributes) {
      if (a.name.startsWith('on')) found.push(`${el.tagName} ${a.name}="${a.value.slice(0, 60)}"`);
    }
    for (const name of ['href', 'src', 'action', 'formaction', 'srcset', 'poster', 'data']) {
      const value = el.getAttribute(name);
      if (value === null) continue;
      let url = null;
      try { url = new URL(value, location.href); } catch { /* no URL at all: reported below */ }
      if (url && url.protocol === 'data:' && ['IMG', 'LINK'].includes(el.tagName)) continue;
      if (!url || !own(url)) found.push(`${el.tagName} ${name}="${value.slice(0, 80)}"`);
    }
  }
  const foreign = 'img:not([src^="data:"]), iframe, object, embed, base, meta[http-equiv]';
  for (const el of document.querySelectorAll(foreign)) found.push('element ' + el.outerHTML.slice(0, 80));
  return found;
}"""

# Every text holding a right-to-left override must sit in an element that isolates it (<bdi>, dir=auto: computed
# unicode-bidi isolate or plaintext) and holds little else, so that the override cannot flip the page around it.
# (Block elements isolate by the browser's own stylesheet, hence the second condition.) A form control's own text is
# its own paragraph already.
UNISOLATED = """() => {
  const found = [];
  const isolates = (el) => /isolate|plaintext/.test(getComputedStyle(el).unicodeBidi);
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (!node.data.includes('\u202e') || node.parentElement.closest('textarea, option, input')) continue;
    let el = node.parentElement;
    while (el && el !== document.body && !isolates(el)) el = el.parentElement;
    const text = node.data.slice(0, 40);
    if (!el || el === document.body) found.push('not isolated: ' + text);
    else if (el.textContent.length > node.data.length + 80) found.push(`isolated too widely (${el.tagName}): ${text}`);
  }
  return found;
}"""

OVERFLOW = "document.documentElement.scrollWidth - document.documentElement.clientWidth"


def check_inert(page: Page) -> None:
    """Nothing on the page can run or navigate away, overrides are isolated, nothing overflows sideways."""
    assert page.evaluate(ACTIVE) == [], page.url
    assert page.evaluate(UNISOLATED) == [], page.url
    assert page.evaluate(OVERFLOW) <= 1, f"{page.url} is wider than the window"


@pytest.fixture(scope="module")
def hostile(store: MemoryBackend) -> dict[str, str]:
    """The ids of the hostile memories of SEED, by what they carry."""
    ids = {}
    for memory in store.list_recent(100):
        for name, start in (("script", "Hostile content"), ("link", "Hostile source"), ("bidi", "Hostile bidi")):
            if memory.content.startswith(start):
                ids[name] = memory.id
        if memory.content == LONG:
            ids["long"] = memory.id
    assert len(ids) == 4, ids
    return ids


def test_the_memory_pages_show_hostile_fields_as_text(ui: Server, hostile: dict[str, str], page: Page) -> None:
    page.goto(ui.page(f"memory/{hostile['script']}"))
    expect(page.locator("h1")).to_contain_text(f"Hostile content {SCRIPT} and {IMG}")
    fields = page.locator("#fields")
    expect(fields).to_contain_text(SCRIPT)  # the speaker
    expect(fields).to_contain_text(IMG)  # the tag and the session
    check_inert(page)

    page.goto(ui.page(f"memory/{hostile['link']}"))
    expect(page.locator("#fields")).to_contain_text(JS_LINK)
    expect(page.locator("#fields")).to_contain_text("<b>bold</b>")
    expect(page.locator("b", has_text="bold")).to_have_count(0)
    check_inert(page)

    page.goto(ui.page(f"memory/{hostile['bidi']}"))
    expect(page.locator("#fields")).to_contain_text(f"Eve{RLO}evE")
    check_inert(page)


def test_a_20000_character_memory_is_whole_on_its_page_and_cut_in_lists(
    ui: Server, hostile: dict[str, str], page: Page
) -> None:
    page.goto(ui.page(f"memory/{hostile['long']}"))
    expect(page.locator("main")).to_contain_text(LONG)
    check_inert(page)

    page.goto(ui.page("browse"))
    item = page.locator(f'#memories li.memory[data-id="{hostile["long"]}"]')
    expect(item).to_be_visible()
    assert len(item.inner_text()) < 1_000, "a list shows the start of a long memory, not all of it"
    check_inert(page)

    page.goto(ui.page())
    page.get_by_label("Query", exact=True).fill("A" * 500)
    page.get_by_label("Mode", exact=True).select_option("semantic")
    page.get_by_role("button", name="Search", exact=True).click()
    hit = page.locator(f'#results li.hit[data-id="{hostile["long"]}"]')
    expect(hit).to_be_visible()
    assert len(hit.get_by_role("link").first.inner_text()) <= 250
    check_inert(page)


@pytest.mark.parametrize(
    "path",
    ["browse", "stats", "transfer", "bulk", "?q=Hostile content", f"?q={SCRIPT}"],
)
def test_the_lists_show_hostile_fields_as_text(ui: Server, hostile: dict[str, str], page: Page, path: str) -> None:
    page.goto(ui.page(path))
    check_inert(page)
    if path == "browse":
        expect(page.locator("#memories")).to_contain_text(SCRIPT)
        facets = page.locator("#facets")
        expect(facets).to_contain_text(IMG)  # a tag and a session
        expect(facets).to_contain_text(SCRIPT)  # a speaker
        facets.get_by_role("link", name=re.compile(re.escape(IMG))).first.click()
        page.wait_for_load_state()
        expect(page.locator(f'#memories li.memory[data-id="{hostile["script"]}"]')).to_be_visible()
        check_inert(page)
    if path.startswith("?q="):
        expect(page.locator("#results")).to_contain_text(SCRIPT)
    if path == "stats":
        expect(page.locator("main")).to_contain_text(IMG)  # the by-tag and by-session tables


def test_hostile_values_typed_into_the_forms_come_back_as_text(ui: Server, page: Page) -> None:
    page.goto(ui.page())
    form = page.get_by_role("search")
    form.get_by_label("Query", exact=True).fill(SCRIPT)
    form.get_by_label("Speaker", exact=True).fill(IMG)
    form.get_by_label("Session", exact=True).fill(f'"><script>alert(2)</script>{RLO}')
    form.get_by_label("Namespace", exact=True).fill('"><img src=x onerror=alert(3)>')
    form.get_by_role("button", name="Search", exact=True).click()
    page.wait_for_url(re.compile(r"[?&]q="))
    expect(form.get_by_label("Query", exact=True)).to_have_value(SCRIPT)
    check_inert(page)

    page.goto(ui.page("bulk"))
    page.get_by_label("Tags", exact=True).fill(IMG)
    page.get_by_role("button", name="Preview", exact=True).click()
    expect(page.locator("#bulk-count")).to_contain_text(re.compile(r"\b1 memor"))
    expect(page.locator("#bulk-sample")).to_contain_text(SCRIPT)
    check_inert(page)


def test_hostile_memories_are_inert_at_phone_width_and_in_dark_mode(
    ui: Server, hostile: dict[str, str], open_context: Callable[..., BrowserContext]
) -> None:
    page = open_context(viewport={"width": 390, "height": 844}, color_scheme="dark").new_page()
    for path in (f"memory/{hostile['long']}", f"memory/{hostile['script']}", "browse", "?q=Hostile content"):
        page.goto(ui.page(path))
        check_inert(page)
