"""Live pages in a real browser: a memory written by another process (an MCP client through `memserver serve`,
or the CLI) appears on an open Browse or Search page without a reload (the page's event stream, /ui/events)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from playwright.sync_api import Page, expect

from tests.e2e.servers import stdio_session
from tests.ui.conftest import Server, remember

LIVE_TIMEOUT_MS = 20_000  # the write's own process start and model load come before the page's ~0.5 s


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    """A background event loop for the MCP client session."""
    with start_blocking_portal() as portal:
        yield portal


def mark(page: Page) -> None:
    """Leave a mark in the page's window: a reload (or any navigation) would wipe it."""
    page.evaluate("window.__notReloaded = true")


def not_reloaded(page: Page) -> bool:
    return bool(page.evaluate("window.__notReloaded === true"))


def test_a_write_from_an_mcp_client_appears_on_browse_without_a_reload(
    ui: Server, ui_data_dir: Path, portal: BlockingPortal, page: Page, tmp_path: Path
) -> None:
    page.goto(ui.page("browse"))
    expect(page.locator("#memories li.memory").first).to_be_visible()
    mark(page)
    text = "The MCP client says: the sourdough starter is fed every Sunday."
    with stdio_session(portal, ui_data_dir, tmp_path / "serve.log") as client:
        result = client.call_tool("remember", {"content": text, "tags": ["live-test"]})
        assert not result.is_error, result
    expect(page.locator("#memories li.memory", has_text="sourdough starter")).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    assert not_reloaded(page), "the list was refreshed in place, not by reloading the page"


def test_a_write_from_the_cli_appears_in_an_open_search_without_a_reload(
    ui: Server, ui_data_dir: Path, page: Page
) -> None:
    page.goto(ui.page())
    page.get_by_label("Query", exact=True).fill("quokka")
    page.get_by_label("Mode", exact=True).select_option("keyword")
    page.get_by_role("button", name="Search", exact=True).click()
    page.wait_for_url(re.compile(r"[?&]q=quokka"))
    expect(page.locator("#no-results")).to_be_visible()
    mark(page)
    remember(ui_data_dir, "A quokka stole my sandwich on Rottnest Island.", "--tag", "live-test")
    expect(page.locator("#results li.hit", has_text="quokka stole my sandwich")).to_be_visible(timeout=LIVE_TIMEOUT_MS)
    assert not_reloaded(page), "the search was re-run in place, not by reloading the page"
