"""/ui/consolidate in a real browser: the proposals with their memories and evidence, nothing applied by looking, an
Apply click archives the stale statement or merges the near-duplicates (history kept), and a proposal that is gone
by the time of the click applies nothing. Its own namespace: the shared store's other memories stay out."""

from __future__ import annotations

from playwright.sync_api import Page, expect

from memserver.contract.backend import MemoryBackend
from tests.ui.conftest import Server

NS = "ui-consolidate"
TOMATOES = "The garden tomatoes need water every morning before the heat."
TOMATOES_AGAIN = "The garden tomatoes need water every single morning before the heat arrives."


def current(store: MemoryBackend) -> list[str]:
    return sorted(
        r["content"] for r in store.export(namespace=NS) if not r.get("replaced_by") and not r.get("archived")
    )


def test_apply_archives_the_stale_statement_then_merges_the_duplicates(
    ui: Server, store: MemoryBackend, page: Page
) -> None:
    store.add(TOMATOES, namespace=NS)
    store.add(TOMATOES_AGAIN, namespace=NS)
    store.add("I live in Oslo.", namespace=NS, speaker="Ana", occurred_at="2025-02-01")
    store.add("I live in Lisbon now.", namespace=NS, speaker="Ana", occurred_at="2025-07-01")
    page.goto(ui.page(f"consolidate?namespace={NS}"))
    expect(page.locator("#count")).to_have_text("2 proposals")
    expect(page.locator("#namespace")).to_have_text(f"Namespace: {NS}")
    proposals = page.locator("#proposals > li")
    expect(proposals.nth(0)).to_contain_text("Merge 2 near-duplicates")
    expect(proposals.nth(0)).to_contain_text("shared words:")
    expect(proposals.nth(1)).to_contain_text("Archive a stale statement of Ana")
    expect(proposals.nth(1)).to_contain_text("was oslo, now lisbon")
    assert len(current(store)) == 4, "looking applies nothing"

    page.get_by_role("button", name="Apply: archive the older").click()
    expect(page.locator("#done")).to_contain_text("Archived the stale statement")
    expect(page.locator("#count")).to_have_text("1 proposal")
    assert "I live in Oslo." not in current(store)

    page.get_by_role("button", name="Apply: merge").click()
    expect(page.locator("#done")).to_contain_text("Merged 2 memories")
    expect(page.locator("#nothing")).to_be_visible()
    assert current(store) == ["I live in Lisbon now.", TOMATOES_AGAIN]
    # history keeps every earlier version: the 4, Oslo's archived one, the shorter tomatoes' archived one (the
    # longer text was already the newest member's, so that member is the merged memory: nothing new to store)
    assert sum(1 for _ in store.export(namespace=NS)) == 6


def test_a_proposal_gone_by_the_click_applies_nothing(ui: Server, store: MemoryBackend, page: Page) -> None:
    first = store.add("The spare key hangs behind the blue door in the hall.", namespace=NS + "-gone")
    store.add("The spare key hangs behind the blue door in the hallway.", namespace=NS + "-gone")
    page.goto(ui.page(f"consolidate?namespace={NS}-gone"))
    expect(page.locator("#count")).to_have_text("1 proposal")
    store.archive(first.id, namespace=NS + "-gone")  # meanwhile, elsewhere
    page.get_by_role("button", name="Apply: merge").click()
    expect(page.locator("#done")).to_contain_text("nothing was applied")


def test_a_post_without_the_csrf_token_is_refused(ui: Server, store: MemoryBackend, page: Page) -> None:
    ns = NS + "-csrf"
    store.add("I live in Oslo.", namespace=ns, speaker="Ana", occurred_at="2025-02-01")
    store.add("I live in Lisbon now.", namespace=ns, speaker="Ana", occurred_at="2025-07-01")
    page.goto(ui.page(f"consolidate?namespace={ns}"))
    proposal = page.locator("input[name=proposal]").first.get_attribute("value") or ""
    origin = ui.page("").rsplit("/ui/", 1)[0]
    reply = page.request.post(
        ui.page("consolidate"), form={"proposal": proposal, "namespace": ns}, headers={"origin": origin}
    )
    assert reply.status == 403 and "CSRF" in reply.text()
    assert "I live in Oslo." in sorted(
        r["content"] for r in store.export(namespace=ns) if not r.get("archived") and not r.get("replaced_by")
    )
