"""The memory browser's page-load and search times, measured in a real browser, at 10k and 100k memories.

    uv run python -m benchmarks.ui_timing            # 10k and 100k; 50 loads of each page, 50 searches
    uv run python -m benchmarks.ui_timing --quick    # smoke run: a 1,000-memory store, 5 of each

`memserver ui` serves a cached synthetic store (benchmarks/_common.py: real sentences mixed two by two, imported
with precomputed vectors, so 100k take a minute or two to build, not an hour of embedding); headless Chromium (the
distribution's, driven by Playwright, as in tests/ui/) loads Search (empty), Browse and Stats, and runs searches
(a real query each, from benchmarks/data/quality.json, hybrid mode, submitted as the form does: GET /ui/?q=...). A
few loads and searches first warm the server (the model loads on the first search). Each time is the browser's
own Navigation Timing of that page: `loadEventEnd` from the navigation's start (request, the server's work,
transfer, parsing, styles and scripts; the page's live updates start after it), and `responseStart` (the first
byte: mostly the server). Prints a table and writes benchmarks/results/ui_timing.json.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

from benchmarks import _common as C

PAGES = {"Search (empty)": "", "Browse": "browse", "Stats": "stats"}
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
WARM_UP = 3
# The browser's own timing of the page just loaded, in ms from the navigation's start.
TIMING = """() => {
  const t = performance.getEntriesByType('navigation')[0];
  return {load: t.loadEventEnd - t.startTime, first_byte: t.responseStart - t.startTime, bytes: t.transferSize};
}"""


@contextmanager
def ui_server(data_dir: Path) -> Iterator[str]:
    """`memserver ui` over the benchmark collection of `data_dir`; yields its URL."""
    command = [sys.executable, "-m", "memserver", "ui", "--no-open", "--port", "0", "--data-dir", str(data_dir)]
    env = {**os.environ, "MCP_MEMORY_COLLECTION": C.COLLECTION, "MEMSERVER_LOG_LEVEL": "WARNING"}
    process = subprocess.Popen(command, cwd=C.ROOT, env=env, stdout=subprocess.PIPE, text=True)
    url: list[str] = []
    announced = threading.Event()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            match = re.match(r"memserver ui: (\S+)", line)
            if match and not url:
                url.append(match.group(1))
                announced.set()
        announced.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        if not announced.wait(300) or not url:
            raise SystemExit("memserver ui did not start")
        yield url[0]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(30)


def timed(page: Any, url: str) -> dict[str, float]:
    """Load `url` in `page` and return the browser's timing of it; a page that is not 200 stops the run."""
    response = page.goto(url, wait_until="load")
    if response is None or response.status != 200:
        raise SystemExit(f"{url} answered {response.status if response else 'nothing'}")
    return dict(page.evaluate(TIMING))


def measure(url: str, loads: int, searches: int, queries: list[str]) -> dict[str, Any]:
    """Every page `loads` times and `searches` searches, in one fresh browser context."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as driver:
        chromium = shutil.which("chromium") or "/usr/bin/chromium"
        browser = driver.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        page = browser.new_context(viewport={"width": 1280, "height": 900}).new_page()
        search_url = [url + "?q=" + quote(q) for q in queries]
        for i in range(WARM_UP):
            for path in PAGES.values():
                timed(page, url + path)
            timed(page, search_url[-1 - i])
        result: dict[str, Any] = {}
        for name, path in PAGES.items():
            runs = [timed(page, url + path) for _ in range(loads)]
            result[name] = runs
        result["search"] = [timed(page, search_url[i % len(search_url)]) for i in range(searches)]
        hits = page.locator("#results li.hit").count()
        browser.close()
    result["hits_on_last_search"] = hits
    return result


def summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    load = [r["load"] for r in runs]
    first = [r["first_byte"] for r in runs]
    return {
        "n": len(runs),
        "load_p50_ms": round(C.pct(load, 50), 1),
        "load_p90_ms": round(C.pct(load, 90), 1),
        "first_byte_p50_ms": round(C.pct(first, 50), 1),
        "first_byte_p90_ms": round(C.pct(first, 90), 1),
        "kb_p50": round(C.pct([r["bytes"] for r in runs], 50) / 1024, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000", help="store sizes (default 10000,100000)")
    parser.add_argument("--loads", type=int, default=50, help="loads of each page (default 50)")
    parser.add_argument("--searches", type=int, default=50, help="searches (default 50)")
    parser.add_argument("--cache", help="where built stores are kept (default /tmp/memserver-bench)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 1,000 memories, 5 of each")
    parser.add_argument("--out", default=str(C.RESULTS / "ui_timing.json"))
    args = parser.parse_args(argv)
    sizes = [1000] if args.quick else [int(s) for s in args.sizes.split(",")]
    if args.quick:
        args.loads = args.searches = 5
    cache = C.cache_dir(args.cache)
    _, queries = C.corpus()
    rows: list[list[Any]] = []
    results: dict[str, Any] = {}
    for n in sizes:
        root = C.ensure_store(cache, n, quick=args.quick)
        C.log(f"{C.size_label(n)}: {args.loads} loads of each page, {args.searches} searches")
        with ui_server(root) as url:
            raw = measure(url, args.loads, args.searches, queries)
        sizes_result = {name: summary(raw[name]) for name in [*PAGES, "search"]}
        results[str(n)] = {
            **sizes_result,
            "hits_on_last_search": raw["hits_on_last_search"],
            "build": C.build_info(root),
        }
        for name, s in sizes_result.items():
            rows.append([C.size_label(n), name, s["n"], s["load_p50_ms"], s["load_p90_ms"], s["first_byte_p50_ms"],
                         s["first_byte_p90_ms"], s["kb_p50"]])  # fmt: skip
    print(
        "\nin the browser (Navigation Timing): load = loadEventEnd, first byte = responseStart, from navigation start"
    )
    print(C.table(["memories", "page", "n", "load p50 ms", "load p90 ms", "1st byte p50", "1st byte p90", "KB"], rows))
    C.write_json(args.out, {"machine": C.machine(), "chromium": chromium_version(), "sizes": results})
    return 0


def chromium_version() -> str:
    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    done = subprocess.run([chromium, "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip()


if __name__ == "__main__":
    sys.exit(main())
