"""The in-chat memory browser's page (features/app_page.html) in headless Chromium, inside a tiny MCP Apps host.

The host is a page that puts the app in a sandboxed iframe (scripts only, an opaque origin, as hosts do) and answers
its postMessage JSON-RPC (SEP-1865): `ui/initialize` with host capabilities and a theme, then
`ui/notifications/tool-input`; the app's `tools/call` and `resources/read` it passes on, through a Playwright
binding, to a real MCP client session with memserver (`build_server`, a local store with the fake embedder). So
what the page shows is what the server answers. A JavaScript dialog, a Content-Security-Policy violation or an
uncaught error in either frame fails the test.

Playwright drives the distribution's Chromium (`apt-get install chromium`): its own browser builds cannot be
downloaded here.
"""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from playwright.async_api import Browser, ConsoleMessage, Dialog, FrameLocator, Page, async_playwright, expect

from memserver.contract.backend import MemoryBackend
from memserver.features import apps
from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.support.fakes import FakeEmbedder

TIMEOUT = 30
EXPECT_MS = 10_000
CHROMIUM_ARGS = [  # as root in a closed network: no sandbox, none of Chromium's calls home
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script> \u202eevil\u202c <a href="javascript:alert(3)">x</a>'

# The host: one iframe, and the host side of the app's JSON-RPC. `window.setup` receives the app's HTML, the theme
# and the tool input; `window.mcp` (a Playwright binding) forwards a request to memserver.
HOST_PAGE = """<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>host</title></head>
<body style="margin:0">
<iframe id="app" title="memory browser" sandbox="allow-scripts" style="width:640px;height:480px;border:0"></iframe>
<script>
window.seen = [];
window.sizes = [];
const frame = document.getElementById("app");
let toolInput = {};
let theme = "light";
function reply(id, body) { frame.contentWindow.postMessage({jsonrpc: "2.0", id, ...body}, "*"); }
window.addEventListener("message", async (event) => {
  if (event.source !== frame.contentWindow) return;
  const m = event.data;
  window.seen.push(m.method || "response");
  if (m.method === "ui/initialize") {
    reply(m.id, {result: {protocolVersion: "2026-01-26", hostInfo: {name: "test host", version: "1"},
      hostCapabilities: {serverTools: {}, serverResources: {}},
      hostContext: {theme, displayMode: "inline", containerDimensions: {width: 640, maxHeight: 2000}}}});
  } else if (m.method === "ui/notifications/initialized") {
    frame.contentWindow.postMessage({jsonrpc: "2.0", method: "ui/notifications/tool-input",
      params: {arguments: toolInput}}, "*");
  } else if (m.method === "ui/notifications/size-changed") {
    window.sizes.push(m.params);
    frame.style.height = m.params.height + "px";
  } else if (m.method === "tools/call" || m.method === "resources/read") {
    try { reply(m.id, {result: await window.mcp(m.method, m.params)}); }
    catch (error) { reply(m.id, {error: {code: -32602, message: String(error.message || error)}}); }
  } else if (m.id !== undefined && m.method) {
    reply(m.id, {error: {code: -32601, message: "Method not found"}});
  }
});
window.setup = (html, chosenTheme, input) => { theme = chosenTheme; toolInput = input; frame.srcdoc = html; };
</script>
</body></html>"""


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryBackend]:
    with MemoryStore(tmp_path, "app-page", embedder=FakeEmbedder()) as opened:
        yield opened


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.fail("Chromium is missing: apt-get install -y chromium (.ci/run does it)")
    async with async_playwright() as playwright:
        launched = await playwright.chromium.launch(executable_path=path, args=CHROMIUM_ARGS)
        yield launched
        await launched.close()


@dataclass
class Host:
    """The host page with the app loaded, and what went wrong in it (dialogs, CSP violations, errors)."""

    page: Page
    app: FrameLocator
    problems: list[str] = field(default_factory=list)
    forwarded: list[str] = field(default_factory=list)

    async def sizes(self) -> list[dict[str, Any]]:
        return list(await self.page.evaluate("window.sizes"))


async def open_host(browser: Browser, client: Client, *, theme: str = "light", tool_input: Any = None) -> Host:
    page = await browser.new_page()
    host = Host(page, page.frame_locator("#app"))

    def on_console(message: ConsoleMessage) -> None:
        if message.type == "error":
            host.problems.append(f"console error: {message.text[:300]}")

    async def on_dialog(dialog: Dialog) -> None:
        host.problems.append(f"dialog: {dialog.message}")
        await dialog.dismiss()

    page.on("console", on_console)
    page.on("pageerror", lambda error: host.problems.append(f"page error: {error}"))
    page.on("dialog", on_dialog)

    async def forward(method: str, params: dict[str, Any]) -> dict[str, Any]:
        """The host's proxy to memserver: the app's request, through a real MCP client session."""
        host.forwarded.append(f"{method} {params.get('name') or params.get('uri')}")
        with anyio.fail_after(TIMEOUT):
            if method == "tools/call":
                result: Any = await client.call_tool(params["name"], params.get("arguments") or {})
            else:
                result = await client.read_resource(params["uri"])
        return dict(result.model_dump(by_alias=True, exclude_none=True, mode="json"))

    await page.expose_function("mcp", forward)
    await page.set_content(HOST_PAGE)
    with anyio.fail_after(TIMEOUT):
        html = (await client.read_resource(apps.URI)).contents[0].text  # type: ignore[union-attr]
    await page.evaluate("([html, theme, input]) => window.setup(html, theme, input)", [html, theme, tool_input or {}])
    return host


@pytest.fixture
async def client(store: MemoryBackend) -> AsyncIterator[Client]:
    async with Client(build_server(lambda user: store), mode="auto") as connected:
        yield connected


# --- the tests ---------------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_the_page_lists_the_newest_memories_and_hostile_ones_stay_text(
    browser: Browser, client: Client, store: MemoryBackend
) -> None:
    """After the handshake the page lists the newest memories from the server; markup in a memory is shown as
    text (no element made of it, no script run, no dialog, no CSP violation); the page reports its size."""
    store.add("the user paddles a sea kayak", tags=["sport"], occurred_at="2026-01-02T10:00:00Z")
    store.add(HOSTILE, tags=["<b>bold</b>"], speaker="<i>mallory</i>", occurred_at="2026-01-03T10:00:00Z")
    store.add("word " * 4000, occurred_at="2026-01-01T10:00:00Z")  # 20,000 characters
    host = await open_host(browser, client)
    cards = host.app.locator("#cards > li")
    await expect(cards).to_have_count(3, timeout=EXPECT_MS)
    await expect(cards.first.locator(".content")).to_have_text(HOSTILE)
    await expect(cards.first.get_by_role("button", name="Forget “<img src=x")).to_have_count(1)  # named as text
    assert len(await cards.nth(2).locator(".content").text_content() or "") == 601  # cut in the list, with "…"
    await expect(cards.first.locator(".meta")).to_contain_text("tags: <b>bold</b>")
    await expect(cards.first.locator(".meta")).to_contain_text("speaker: <i>mallory</i>")
    await expect(cards.nth(1).locator(".content")).to_have_text("the user paddles a sea kayak")
    assert await host.app.locator("img, script:not(:first-of-type), a, b, i").count() == 0
    await expect(host.app.locator("#status")).to_have_text("3 memories shown.")
    seen = await host.page.evaluate("window.seen")
    assert seen[:3] == ["ui/initialize", "ui/notifications/initialized", "ui/notifications/size-changed"]
    assert any(size["height"] > 100 for size in await host.sizes())
    assert host.forwarded == ["tools/call list_recent"]
    assert host.problems == []


@pytest.mark.anyio
async def test_search_works_keyboard_only_and_opens_on_the_tools_query(
    browser: Browser, client: Client, store: MemoryBackend
) -> None:
    """The tool's query (ui/notifications/tool-input) opens the page on that search; then, keys only: type a
    query, Enter searches, Tab reaches the result's buttons, Enter opens the memory, Escape goes back."""
    store.add("the user paddles a sea kayak on weekends", tags=["sport"])
    store.add("the user bakes sourdough bread", tags=["food"])
    host = await open_host(browser, client, tool_input={"query": "kayak"})
    title = host.app.locator("#list-title")
    await expect(title).to_have_text("Best matches for “kayak”", timeout=EXPECT_MS)
    await expect(host.app.locator("#cards > li").first).to_contain_text("sea kayak")

    query = host.app.locator("#query")
    await query.focus()
    await query.fill("")
    await host.page.keyboard.type("sourdough bread")
    await host.page.keyboard.press("Enter")
    await expect(title).to_have_text("Best matches for “sourdough bread”", timeout=EXPECT_MS)
    first = host.app.locator("#cards > li").first
    await expect(first.locator(".content")).to_have_text("the user bakes sourdough bread")
    for _ in range(12):  # from the query box: mode, namespace, Search, Newest, then the first result's Open
        await host.page.keyboard.press("Tab")
        if await first.locator("button", has_text="Open").evaluate("b => b === document.activeElement"):
            break
    else:
        pytest.fail("Tab never reached the first result's Open button")
    await host.page.keyboard.press("Enter")
    detail = host.app.locator("#detail")
    await expect(detail).to_be_visible(timeout=EXPECT_MS)
    await expect(host.app.locator("#detail-title")).to_be_focused()
    await expect(detail.locator("dl.fields")).to_contain_text("food")
    await host.page.keyboard.press("Escape")
    await expect(host.app.locator("#list")).to_be_visible()
    assert host.problems == []


@pytest.mark.anyio
async def test_a_memory_shows_its_history_and_each_version_opens(
    browser: Browser, client: Client, store: MemoryBackend
) -> None:
    """Opening a memory reads memory://memories/{id} through the host: all fields, and the replace chain, newest
    first, a forgotten version marked; an older version opens from there, marked as older."""
    first = store.add("the user lives in Lisbon")
    second = store.add("the user lives in Porto", replaces=first.id)
    third = store.add("the user lives in Braga", replaces=second.id)
    store.delete(first.id)
    host = await open_host(browser, client)
    newest = host.app.locator("#cards > li").first
    await expect(newest.locator(".content")).to_have_text("the user lives in Braga", timeout=EXPECT_MS)
    await newest.locator("button", has_text="Open").click()
    history = host.app.locator("#history > li")
    await expect(history).to_have_count(3, timeout=EXPECT_MS)
    await expect(history.nth(0)).to_contain_text(f"{third.id} (this version")
    await expect(history.nth(1)).to_contain_text(second.id)
    await expect(history.nth(2)).to_have_text(f"{first.id} (forgotten)")
    await expect(host.app.locator("#detail dl.fields")).to_contain_text(second.id)  # "replaces"
    await history.nth(1).locator("button").click()
    await expect(host.app.locator("#detail-title")).to_have_text("Memory (an older version)", timeout=EXPECT_MS)
    await expect(host.app.locator("#detail-card .content")).to_have_text("the user lives in Porto")
    assert await host.app.locator("#detail-card button", has_text="Forget").count() == 0  # history is not forgotten
    assert f"resources/read memory://memories/{third.id}" in host.forwarded
    assert host.problems == []


@pytest.mark.anyio
async def test_forget_asks_first_and_keeping_forgets_nothing(
    browser: Browser, client: Client, store: MemoryBackend
) -> None:
    """Forget… only asks; Escape (or Keep it) keeps the memory; Forget it deletes exactly that one, on the
    server, and the list drops it."""
    keep = store.add("the user likes green tea")
    doomed = store.add("the user's old phone number is 555-0100")
    host = await open_host(browser, client)
    card = host.app.locator("#cards > li").first
    await expect(card.locator(".content")).to_have_text("the user's old phone number is 555-0100", timeout=EXPECT_MS)
    await card.locator("button", has_text="Forget…").click()
    ask = card.locator(".ask")
    await expect(ask).to_contain_text("cannot be undone")
    await expect(ask.locator("button", has_text="Keep it")).to_be_focused()
    await host.page.keyboard.press("Escape")
    await expect(ask).to_have_count(0)
    assert store.get(doomed.id) is not None and not any(line.startswith("tools/call forget") for line in host.forwarded)

    await card.locator("button", has_text="Forget…").click()
    await ask.locator("button", has_text="Forget it").click()
    await expect(host.app.locator("#status")).to_have_text("Forgotten.", timeout=EXPECT_MS)
    await expect(host.app.locator("#cards > li")).to_have_count(1)
    assert store.get(doomed.id) is None and store.get(keep.id) is not None
    assert host.forwarded.count("tools/call forget") == 1
    assert host.problems == []


@pytest.mark.anyio
async def test_the_page_follows_the_hosts_theme(browser: Browser, client: Client) -> None:
    """hostContext.theme dark: the page turns dark whatever the browser prefers (Chromium here prefers light). And
    the size it reports is its content's, smaller than the 480 px frame it started in (so a host can shrink it)."""
    host = await open_host(browser, client, theme="dark")
    await expect(host.app.locator("#status")).to_have_text("No memories here yet.", timeout=EXPECT_MS)
    html = host.app.locator("html")
    await expect(html).to_have_attribute("data-theme", "dark")
    background = await host.app.locator("body").evaluate("b => getComputedStyle(b).backgroundColor")
    red, green, blue = (int(part) for part in background.removeprefix("rgb(").rstrip(")").split(",")[:3])
    assert red + green + blue < 150, background
    height = (await host.sizes())[-1]["height"]
    assert 100 < height < 480, height
    assert host.problems == []
