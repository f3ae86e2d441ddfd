"""Fixtures of the browser tests (tests/ui/test_browser_*.py): real `memserver ui` and `memserver serve --http --ui`
processes over seeded stores, and one headless Chromium for the session, driven by Playwright.

Playwright drives the distribution's Chromium (`apt-get install chromium`; .ci/run installs it): its own browser
builds cannot be downloaded here. Every page a test opens is guarded: a JavaScript dialog (`alert`, `confirm`,
`prompt`), a Content-Security-Policy violation or an uncaught page error fails the test that caused it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Dialog, Page, Playwright

    from memserver.contract.backend import Memory, MemoryBackend
    from memserver.embedding.base import TextEmbedder

ROOT = Path(__file__).resolve().parents[2]
MEMSERVER = [sys.executable, "-m", "memserver"]  # what `uv run memserver` runs, without uv in the way
START_TIMEOUT = 180.0  # until a server announces its URL: imports can take a minute on a loaded machine
EXPECT_TIMEOUT_MS = 15_000  # Playwright's auto-waiting bound for one step (a first search loads the model)
# Chromium as root in a closed network: no sandbox (root), and none of its background calls home.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Each token is a user of `memserver serve --http --ui` (MEMSERVER_TOKENS, docs/http.md): one store per user.
TOKENS = {"alice": "alice-token-0123456789abcdef", "bob": "bob-token-0123456789abcdefgh"}


# --- stores --------------------------------------------------------------------------------------------------------


def server_env(**extra: str) -> dict[str, str]:
    """The environment of a spawned memserver: ours, minus any store, token or collection setting of the caller."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMSERVER_TOKEN", "MCP_MEMORY_"))}
    env.update(MEMSERVER_LOG_LEVEL="INFO", **extra)
    return env


def memserver(*args: str, data_dir: Path, stdin: str | None = None, **env: str) -> str:
    """Run one `memserver` CLI command on `data_dir` and return its stdout; a failure shows its stderr."""
    done = subprocess.run(
        [*MEMSERVER, *args, "--data-dir", str(data_dir)],
        cwd=ROOT,
        env=server_env(**env),
        input=stdin,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT,
    )
    if done.returncode != 0:
        raise AssertionError(f"memserver {' '.join(args[:3])} failed ({done.returncode}):\n{done.stderr}")
    return done.stdout


def remember(data_dir: Path, text: str, *args: str) -> str:
    """`memserver remember TEXT ARGS` from another process; the new memory's id."""
    out = memserver("remember", text, *args, "--json", data_dir=data_dir)
    return str(json.loads(out.splitlines()[0])["id"])


def tagged(store: MemoryBackend, tag: str) -> list[Memory]:
    """The current memories of the default namespace tagged `tag`, newest first (at most 100)."""
    return store.list_recent(100, [tag])


# Hostile values, in every field a person sees (namespaces cannot hold any: letters, digits and _.:@- only).
SCRIPT = "<script>alert(1)</script>"
IMG = "<img src=x onerror=alert(1)>"
JS_LINK = "javascript:alert(1)"
RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: flips the text after it unless the page isolates it
LONG = "A" * 20_000  # no space to break at: only overflow-wrap keeps it on the page

# The shared store of the `ui` server: a small life over a few months, and the hostile battery in plain sight, so
# that every page of every test renders it.
SEED: list[dict[str, Any]] = [
    {
        "content": "Ana, my sister, lives in Porto and visits every August.",
        "tags": ["family"],
        "speaker": "Sam",
        "occurred_at": "2026-05-03",
    },
    {
        "content": "The team ships the mobile app on the first Monday of every month.",
        "tags": ["work"],
        "speaker": "Sam",
        "session": "standup-2026-06-01",
        "occurred_at": "2026-06-01",
    },
    {
        "content": "Dr. Costa moved my dentist appointment to the 14th at 9:30.",
        "tags": ["health"],
        "occurred_at": "2026-07-10",
    },
    {
        "content": "I prefer aisle seats on long flights and never check a bag.",
        "tags": ["travel", "preferences"],
        "occurred_at": "2026-08-22",
    },
    {
        "content": "My bike's rear tyre is a 700x28c; the spare tube is in the hall cupboard.",
        "tags": ["home"],
        "occurred_at": "2026-09-15",
    },
    # hostile: content, tags, speaker, session and source
    {"content": f"Hostile content {SCRIPT} and {IMG} end.", "tags": [IMG], "speaker": SCRIPT, "session": IMG},
    {"content": f"Hostile source: follow {JS_LINK}", "source": JS_LINK, "tags": ["<b>bold</b>"]},
    {"content": f"Hostile bidi: {RLO}gnp.exe hidden", "speaker": f"Eve{RLO}evE", "tags": [f"{RLO}gat"]},
    {"content": LONG, "tags": ["long"]},
]


# --- servers -------------------------------------------------------------------------------------------------------


@dataclass
class Server:
    """A running memserver process with its browser app; `url` is the app's root (ending in /ui/)."""

    process: subprocess.Popen[str]
    url: str
    data_dir: Path
    log: list[str] = field(default_factory=list)  # its stderr, line by line

    def page(self, path: str = "") -> str:
        """The absolute URL of a page of the app: `page("browse")`, `page("memory/ID")`."""
        return self.url + path.lstrip("/")

    @property
    def origin(self) -> str:
        return re.match(r"https?://[^/]+", self.url).group(0)  # type: ignore[union-attr]


@contextmanager
def spawned(command: Sequence[str], announcement: str, *, stream: str, env: dict[str, str]) -> Iterator[Server]:
    """Run `command` from ROOT and yield it once `stream` ("stdout" or "stderr") has printed a line matching
    `announcement` (group 1: the URL); stop it with SIGTERM afterwards and check that it exits with status 0."""
    process = subprocess.Popen(
        list(command), cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    log: list[str] = []
    url: list[str] = []
    announced = threading.Event()

    def drain(pipe: Any, watch: bool) -> None:  # keep reading so no pipe fills; note the announcement
        for line in pipe:
            log.append(line)
            match = re.search(announcement, line) if watch and not url else None
            if match:
                url.append(match.group(1))
                announced.set()
        if watch:
            announced.set()  # the process ended without announcing

    for name in ("stdout", "stderr"):
        threading.Thread(target=drain, args=(getattr(process, name), name == stream), daemon=True).start()
    data_dir = Path(command[command.index("--data-dir") + 1])
    try:
        if not announced.wait(START_TIMEOUT) or not url:
            raise RuntimeError(f"{' '.join(command[:5])} did not announce its URL:\n" + "".join(log[-40:]))
        yield Server(process, url[0], data_dir, log)
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            status = process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
            raise AssertionError("the server did not stop within 15 s of SIGTERM") from None
    assert status == 0, f"the server exited with status {status} on SIGTERM:\n" + "".join(log[-20:])


@contextmanager
def ui_server(data_dir: Path, *args: str) -> Iterator[Server]:
    """`memserver ui --no-open --port 0 --data-dir DATA_DIR ARGS`: no sign-in, the person's own store."""
    command = [*MEMSERVER, "ui", "--no-open", "--port", "0", "--data-dir", str(data_dir), *args]
    with spawned(command, r"^memserver ui: (http://\S+/ui/)$", stream="stdout", env=server_env()) as server:
        yield server


@contextmanager
def http_ui_server(data_dir: Path, tokens: dict[str, str], *args: str) -> Iterator[Server]:
    """`memserver serve --http --ui --port 0` with bearer tokens: the app at /ui behind a sign-in."""
    command = [*MEMSERVER, "serve", "--http", "--ui", "--port", "0", "--data-dir", str(data_dir), *args]
    env = server_env(MEMSERVER_TOKENS=",".join(f"{user}:{token}" for user, token in tokens.items()))
    with spawned(command, r"serving MCP at (\S+)", stream="stderr", env=env) as server:
        server.url = server.url.removesuffix("/mcp") + "/ui/"
        yield server


@pytest.fixture(scope="session")
def ui_data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The data directory of the shared `ui` server's store."""
    return tmp_path_factory.mktemp("ui-store")


@pytest.fixture(scope="session")
def store(ui_data_dir: Path, real_embedder: TextEmbedder) -> Iterator[MemoryBackend]:
    """The store of the shared `ui` server, opened by the tests too (the local store is shared between processes;
    each sees the others' writes on its next call): seeded with SEED, read back to check what a page did."""
    from memserver.engines import open_backend

    with open_backend(ui_data_dir, embedder=real_embedder) as backend:
        backend.import_(SEED)
        yield backend


@pytest.fixture(scope="session")
def ui(ui_data_dir: Path, store: MemoryBackend) -> Iterator[Server]:
    """The shared `memserver ui` of the session, over `store`. Tests that change it use memories (tags, texts) of
    their own, so that they do not see each other's changes."""
    with ui_server(ui_data_dir) as server:
        yield server


@pytest.fixture(scope="session")
def http_ui(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """`memserver serve --http --ui` with the users of TOKENS, each with an empty store of their own."""
    with http_ui_server(tmp_path_factory.mktemp("http-ui-store"), TOKENS) as server:
        yield server


# --- the browser ---------------------------------------------------------------------------------------------------


def chromium_path() -> str:
    """The distribution's Chromium; a missing one fails the run with the command that installs it."""
    path = shutil.which("chromium") or "/usr/bin/chromium"
    if not Path(path).exists():
        pytest.fail("Chromium is missing: apt-get install -y chromium (.ci/run does it)")
    return path


# Per module, not per session: sync_playwright runs an event loop on this thread while it is open, and under
# pytest-xdist a worker goes on to other files (anyio tests, asyncio.run) after a browser module.
@pytest.fixture(scope="module")
def playwright() -> Iterator[Playwright]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="module")
def browser(playwright: Playwright) -> Iterator[Browser]:
    """One headless Chromium per test module; each test gets a fresh context (no shared cookies)."""
    from playwright.sync_api import expect

    expect.set_options(timeout=EXPECT_TIMEOUT_MS)
    browser = playwright.chromium.launch(executable_path=chromium_path(), args=CHROMIUM_ARGS)
    yield browser
    browser.close()


# Reported into the page before any of its own scripts: CSP violations the browser would only log, through a
# binding (exposed to the page by Playwright, outside the page's CSP).
_REPORT_VIOLATIONS = """
document.addEventListener('securitypolicyviolation', (e) => {
  window.__cspViolation(`${e.violatedDirective} blocked ${e.blockedURI || 'inline'} (${e.sourceFile}:${e.lineNumber})`);
});
"""


class PageGuard:
    """What must never happen on a page: every dialog, CSP violation and page error seen, in order."""

    def __init__(self) -> None:
        self.problems: list[str] = []
        self.pages: list[Page] = []  # every page it watches

    def dialog(self, dialog: Dialog) -> None:
        self.problems.append(f"a JavaScript {dialog.type} opened: {dialog.message!r}")
        dialog.dismiss()

    def console(self, message: ConsoleMessage) -> None:
        text = message.text
        if re.search(r"content[- ]security[- ]policy", text, re.IGNORECASE):
            self.problems.append(f"CSP violation (console): {text[:300]}")

    def page_error(self, error: Exception) -> None:
        self.problems.append(f"uncaught error on the page: {error}")

    def violation(self, _source: Any, text: str) -> None:
        self.problems.append(f"CSP violation (securitypolicyviolation): {text[:300]}")


GUARD = pytest.StashKey[PageGuard]()


def guarded_context(browser: Browser, guard: PageGuard, **options: Any) -> BrowserContext:
    """A new browser context whose every page reports to `guard`."""
    context = browser.new_context(**options)
    context.set_default_timeout(EXPECT_TIMEOUT_MS)
    context.expose_binding("__cspViolation", guard.violation)
    context.add_init_script(_REPORT_VIOLATIONS)

    def watch(page: Page) -> None:
        guard.pages.append(page)
        page.on("dialog", guard.dialog)
        page.on("console", guard.console)
        page.on("pageerror", guard.page_error)

    context.on("page", watch)
    return context


@pytest.fixture
def open_context(browser: Browser, request: pytest.FixtureRequest) -> Iterator[Callable[..., BrowserContext]]:
    """Open fresh, guarded browser contexts (1280×900 unless `viewport` says otherwise; other options as
    Browser.new_context): their pages fail the test on a dialog, a CSP violation or a page error (checked when the
    test body ends, see pytest_runtest_call). Closed after the test."""
    guard = request.node.stash.setdefault(GUARD, PageGuard())
    opened: list[BrowserContext] = []

    def open_one(**options: Any) -> BrowserContext:
        opened.append(guarded_context(browser, guard, **{"viewport": {"width": 1280, "height": 900}, **options}))
        return opened[-1]

    yield open_one
    for ctx in opened:
        ctx.close()


@pytest.fixture
def context(open_context: Callable[..., BrowserContext]) -> BrowserContext:
    """A fresh, guarded browser context (1280×900)."""
    return open_context()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    """A guarded page in a fresh context."""
    return context.new_page()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """A test whose pages saw a dialog, a CSP violation or a page error fails, whatever its assertions said."""
    result = yield
    guard = item.stash.get(GUARD, None)
    if guard is not None:
        for open_page in guard.pages:
            if not open_page.is_closed():
                open_page.title()  # one round trip: events the browser sent before it are delivered now
        if guard.problems:
            raise AssertionError("the page must not do this:\n  " + "\n  ".join(guard.problems))
    return result


def tab_to(page: Page, is_there: str, *, key: str = "Tab", most: int = 60) -> None:
    """Press `key` until the focused element satisfies `is_there` (a JavaScript predicate of the element), as a
    keyboard user moves through the page; fails after `most` presses."""
    for _ in range(most):
        page.keyboard.press(key)
        if page.evaluate(f"(() => {{ const el = document.activeElement; return !!el && ({is_there})(el); }})()"):
            return
    raise AssertionError(f"{most} presses of {key} never reached an element where {is_there}")
