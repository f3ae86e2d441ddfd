"""Screenshots of the memory browser (docs/ui/*.png), taken from a fixture store in a real browser.

    uv run python docs/ui_screenshots.py             # writes docs/ui/*.png
    uv run python docs/ui_screenshots.py --out DIR   # elsewhere

The fixture is a few months of one person's memories (family, work, health, travel, home; conversations with
speakers, roles and sessions; an edited memory with its history), stored with the real model in a temporary data
directory. `memserver ui` serves it and headless Chromium (the distribution's, driven by Playwright, as in
tests/ui/) takes each page at 1280×900 (a pinned task's page scrolled to its Pin / Archive / Done buttons), the
Search page at phone width (390×844) and Browse in dark mode.
"""

from __future__ import annotations

import argparse
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip
DESKTOP = {"width": 1280, "height": 900}
PHONE = {"width": 390, "height": 844}


def memory(day: str, content: str, *tags: str, **fields: Any) -> dict[str, Any]:
    """One import record that happened (and was stored) on `day`."""
    return {"content": content, "tags": list(tags), "occurred_at": day, "created_at": f"{day}T09:00:00Z", **fields}


def chat(day: str, session: str, *turns: tuple[str, str, str]) -> list[dict[str, Any]]:
    """The memories of one conversation: (speaker, role, what was said) each."""
    return [
        memory(day, text, "chat", speaker=speaker, role=role, session=session, source="chat")
        for speaker, role, text in turns
    ]


FIXTURE: list[dict[str, Any]] = [
    memory("2026-06-02", "Ana, my sister, lives in Porto and visits every August.", "family", speaker="Sam"),
    memory("2026-06-05", "Mum's birthday is on the 12th of September; she likes orchids.", "family", "dates"),
    memory("2026-06-11", "The team ships the mobile app on the first Monday of every month.", "work"),
    memory("2026-06-18", "Jonas leads the payments project; weekly sync on Thursdays at 10:00.", "work", "people"),
    memory(
        "2026-06-24",
        "I prefer aisle seats on long flights and never check a bag.",
        "travel",
        "preferences",
        kind="preference",
    ),
    memory("2026-07-01", "Dr. Costa moved my dentist appointment to the 14th at 9:30.", "health", speaker="Dr. Costa"),
    memory(
        "2026-07-03", "Allergic to penicillin: tell every new doctor.", "health", "important", kind="fact", pinned=True
    ),
    memory("2026-07-09", "The bike's rear tyre is a 700x28c; the spare tube is in the hall cupboard.", "home"),
    memory("2026-07-15", "Book club is reading 'The Remains of the Day' for August.", "reading"),
    memory("2026-07-22", "Flight to Lisbon on 9 August, TP 1347, seat 21C.", "travel"),
    *chat(
        "2026-07-28",
        "chat-2026-07-28",
        ("Sam", "user", "Remind me that the landlord comes to fix the boiler on Friday morning."),
        ("Assistant", "assistant", "Noted: the landlord fixes the boiler on Friday morning; be home by 8."),
    ),
    memory("2026-08-04", "The sourdough starter lives in the fridge; feed it every Sunday.", "cooking", "home"),
    memory("2026-08-10", "Ana's new flat in Porto is near the Bolhão market.", "family", speaker="Ana"),
    memory("2026-08-19", "Renewed the car insurance with Fidelis until August 2027.", "finance", "car"),
    memory("2026-08-27", "Quarterly review: the payments launch slipped to October.", "work"),
    memory("2026-09-02", "Running plan: 5 km on Tuesdays and Thursdays, a long run on Saturdays.", "health", "sport"),
    memory("2026-09-08", "Bought orchids for Mum's birthday at the florist on Rua Augusta.", "family", "dates"),
    *chat(
        "2026-09-14",
        "chat-2026-09-14",
        ("Sam", "user", "I'd like to learn Portuguese before next summer."),
        ("Assistant", "assistant", "Suggested a 20-minute daily Portuguese lesson and a tutor on Saturdays."),
        ("Sam", "user", "Book the tutor for Saturday mornings then."),
    ),
    memory("2026-09-21", "The Wi-Fi router's admin page is at 192.168.1.1; the password is on its back.", "home"),
    memory("2026-09-29", "Jonas prefers written updates over meetings.", "work", "people"),
    memory("2026-10-06", "The payments project launched on 5 October.", "work"),
    memory("2026-10-12", "Next dentist check-up in April 2027.", "health", kind="event"),
    memory("2026-10-18", "Favourite restaurant in Porto: Casa Guedes, the roast pork sandwich.", "travel", "food"),
    memory("2026-10-25", "Christmas at Ana's this year; bring the board games.", "family", "plans"),
    memory("2026-11-01", "Started 'Klara and the Sun' for the book club.", "reading", archived=True),
    memory(
        "2026-11-07", "Book the boiler service for November.", "home", "dates", kind="task", due="2026-11-30", done=True
    ),
    *chat(
        "2026-11-15",
        "chat-2026-11-15",
        ("Sam", "user", "What should I get Ana for Christmas?"),
        ("Assistant", "assistant", "Ana likes hiking and coffee; suggested a thermos and a trail guide of Gerês."),
    ),
    memory("2026-11-20", "Tutor sessions moved to Sunday afternoons.", "learning"),
    memory(
        "2026-11-24",
        "Put the winter tyres on the car in the first week of December.",
        "car",
        "dates",
        kind="task",
        due="2026-12-07",
        pinned=True,
    ),
]
EDITED = ("Running plan: 5 km on Tuesdays and Thursdays, a long run on Saturdays.",
          "Running plan: 8 km on Tuesdays and Thursdays, a 15 km long run on Saturdays, since November.")  # fmt: skip


def build(data_dir: Path) -> str:
    """Fill the fixture store; the id of the edited memory (a memory with history)."""
    from memserver.engines import open_backend

    with open_backend(data_dir) as store:
        store.import_(FIXTURE)
        (old,) = [m for m in store.list_recent(100, ["sport"]) if m.content == EDITED[0]]
        return store.add(EDITED[1], ["health", "sport"], occurred_at="2026-11-28", replaces=old.id).id


@contextmanager
def served(data_dir: Path) -> Iterator[str]:
    """`memserver ui` over `data_dir`; yields its URL."""
    command = [sys.executable, "-m", "memserver", "ui", "--no-open", "--port", "0", "--data-dir", str(data_dir)]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
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
        if not announced.wait(180) or not url:
            raise SystemExit("memserver ui did not start")
        yield url[0]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(15)


def shoot(url: str, edited: str, out: Path) -> list[Path]:
    """Take every screenshot; the files written."""
    from playwright.sync_api import sync_playwright

    written: list[Path] = []
    with sync_playwright() as driver:
        chromium = shutil.which("chromium") or "/usr/bin/chromium"
        browser = driver.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)

        def page(viewport: dict[str, int] = DESKTOP, scheme: str = "light") -> Any:
            return browser.new_context(viewport=viewport, color_scheme=scheme).new_page()  # type: ignore[arg-type]

        def save(p: Any, name: str) -> None:
            p.screenshot(path=out / name)
            written.append(out / name)

        desk = page()
        desk.goto(url + "?q=" + "where does my sister live")
        desk.locator("#results li.hit details.explain summary").first.click()
        save(desk, "search.png")
        desk.goto(url + "browse")
        save(desk, "browse.png")
        desk.goto(url + f"memory/{edited}")
        save(desk, "memory.png")
        desk.goto(url + "browse?kind=task")  # a pinned task: its badges, and the Pin / Archive / Done buttons
        desk.get_by_role("link", name="Put the winter tyres on the car in the first week of December.").click()
        desk.locator("#marks").scroll_into_view_if_needed()
        save(desk, "memory-task.png")
        desk.goto(url + "bulk")
        desk.get_by_label("Tags", exact=True).fill("work")
        desk.get_by_role("button", name="Preview", exact=True).click()
        desk.locator("#bulk-count").wait_for()
        save(desk, "bulk.png")
        desk.goto(url + "transfer")
        save(desk, "transfer.png")
        desk.goto(url + "stats")
        save(desk, "stats.png")

        phone = page(PHONE)
        phone.goto(url + "?q=" + "dentist")
        save(phone, "search-phone.png")
        dark = page(scheme="dark")
        dark.goto(url + "browse")
        save(dark, "browse-dark.png")
        browser.close()
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "ui", help="where the PNGs go (docs/ui)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="memserver-screens-") as tmp:
        edited = build(Path(tmp))
        with served(Path(tmp)) as url:
            for path in shoot(url, edited, args.out):
                print(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)


if __name__ == "__main__":
    main()
