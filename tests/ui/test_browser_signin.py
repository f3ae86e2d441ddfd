"""`memserver serve --http --ui` in a real browser: the pages sit behind a sign-in with the server's bearer tokens,
the session is an HttpOnly, SameSite=Strict cookie (never in a URL or a log), a cross-site or token-less POST is
refused, and a user sees only their own memories. The same CSRF rules hold for `memserver ui`."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from playwright.sync_api import BrowserContext, Page, expect

from memserver.contract.backend import MemoryBackend
from tests.e2e.servers import http_session
from tests.ui.conftest import TOKENS, Server

FOREIGN = "http://evil.example"


@pytest.fixture(scope="module")
def portal() -> Iterator[BlockingPortal]:
    """A background event loop for the MCP client sessions."""
    with start_blocking_portal() as portal:
        yield portal


def sign_in(page: Page, server: Server, token: str) -> int:
    """Sign in through the page as a person does; the status of the answer to the form."""
    page.goto(server.page())
    expect(page).to_have_url(re.compile(r"/ui/signin"))
    page.get_by_label("Token", exact=True).fill(token)
    with page.expect_response(lambda r: r.request.method == "POST") as answer:
        page.get_by_role("button", name="Sign in", exact=True).click()
    page.wait_for_load_state()
    return answer.value.status


def form_of(page: Page, button: str) -> tuple[str, dict[str, str]]:
    """The absolute action and the fields (hidden csrf included) of the form holding `button`."""
    form = page.locator("form", has=page.get_by_role("button", name=button, exact=True)).first
    action = form.evaluate("f => new URL(f.getAttribute('action') || location.href, location.href).href")
    fields = form.evaluate("f => Object.fromEntries(new FormData(f))")
    return action, fields


def post(context: BrowserContext, url: str, fields: dict[str, str], **headers: str) -> int:
    """POST a form from outside the page (the context's cookies go along), as another site's page could."""
    response = context.request.post(url, form=fields, headers=headers, max_redirects=0)
    return response.status


def test_signin_refuses_a_wrong_token(http_ui: Server, page: Page) -> None:
    page.goto(http_ui.page("browse"))
    expect(page).to_have_url(re.compile(r"/ui/signin"))  # every page waits behind the sign-in
    status = sign_in(page, http_ui, "not-a-token-of-anyone-0123456789")
    assert status == 401
    expect(page.get_by_role("alert")).to_have_text("That token is not valid.")
    page.goto(http_ui.page("browse"))
    expect(page).to_have_url(re.compile(r"/ui/signin"))


def test_signin_keeps_the_session_in_a_strict_httponly_cookie(http_ui: Server, page: Page) -> None:
    token = TOKENS["alice"]
    sign_in(page, http_ui, token)
    expect(page).to_have_url(http_ui.page())
    cookies = page.context.cookies()
    assert cookies and all(c["httpOnly"] and c["sameSite"] == "Strict" and c["path"] == "/ui" for c in cookies)
    assert all(token not in c["value"] for c in cookies), "the cookie stands for the token, it is not the token"
    assert token not in page.url
    assert not any(token in line for line in http_ui.log), "the token is never logged"
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()

    page.get_by_role("button", name="Sign out", exact=True).click()
    expect(page).to_have_url(re.compile(r"/ui/signin"))
    page.goto(http_ui.page("browse"))
    expect(page).to_have_url(re.compile(r"/ui/signin"))


def test_signin_refuses_a_cross_site_post(http_ui: Server, page: Page) -> None:
    page.goto(http_ui.page("signin"))
    action, fields = form_of(page, "Sign in")
    fields["token"] = TOKENS["alice"]  # a right token, posted by another site's page: login CSRF
    assert post(page.context, action, fields, Origin=FOREIGN) == 403
    assert post(page.context, action, {k: v for k, v in fields.items() if k != "csrf"}, Origin=http_ui.origin) == 403
    page.goto(http_ui.page("browse"))
    expect(page).to_have_url(re.compile(r"/ui/signin"))  # no session came of it


def test_a_user_sees_only_their_own_memories(
    http_ui: Server, portal: BlockingPortal, open_context: Callable[..., BrowserContext]
) -> None:
    with http_session(portal, http_ui.origin + "/mcp", TOKENS["alice"]) as alice_client:
        result = alice_client.call_tool("remember", {"content": "Alice's locker combination is 12-34-56."})
        assert not result.is_error, result
    alice, bob = open_context().new_page(), open_context().new_page()  # two browsers' cookie jars
    sign_in(alice, http_ui, TOKENS["alice"])
    alice.goto(http_ui.page("browse"))
    item = alice.locator("#memories li.memory", has_text="locker combination")
    expect(item).to_be_visible()
    memory_id = item.get_attribute("data-id")

    sign_in(bob, http_ui, TOKENS["bob"])
    bob.goto(http_ui.page("browse"))
    expect(bob.locator("main")).not_to_contain_text("locker combination")
    bob.goto(http_ui.page("?q=locker combination"))
    expect(bob.locator("#results li.hit", has_text="locker")).to_have_count(0)
    response = bob.goto(http_ui.page(f"memory/{memory_id}"))
    assert response is not None and response.status == 404
    bob.goto(http_ui.page("stats"))
    expect(bob.locator("main")).not_to_contain_text("locker")


def csrf_refusals(context: BrowserContext, page: Page, server: Server) -> list[tuple[str, int]]:
    """The statuses of a memory's edit POSTed from outside the page: with a foreign Origin, without the CSRF token,
    and without Origin or Referer; then the same POST done right (the control)."""
    action, fields = form_of(page, "Save as new version")
    (content_field,) = [k for k, v in fields.items() if k != "csrf" and isinstance(v, str) and "CSRF target" in v]
    fields[content_field] = "CSRF target, edited from another site."
    without_token = {k: v for k, v in fields.items() if k != "csrf"}
    return [
        ("foreign Origin", post(context, action, fields, Origin=FOREIGN)),
        ("no CSRF token", post(context, action, without_token, Origin=server.origin)),
        ("no Origin, no Referer", post(context, action, fields)),
        ("foreign Referer", post(context, action, fields, Referer=FOREIGN + "/page")),
        ("same origin with the token", post(context, action, fields, Origin=server.origin)),
    ]


def test_a_cross_site_post_changes_nothing(ui: Server, store: MemoryBackend, context: BrowserContext) -> None:
    memory = store.add("CSRF target, as written.", ["csrf-test"])
    page = context.new_page()
    page.goto(ui.page(f"memory/{memory.id}"))
    statuses = csrf_refusals(context, page, ui)
    assert [s for _, s in statuses[:4]] == [403] * 4, statuses
    assert statuses[4][1] in (200, 303), statuses
    current = store.list_recent(10, ["csrf-test"])
    assert [m.content for m in current] == ["CSRF target, edited from another site."], "only the control edited"


def test_a_cross_site_post_changes_nothing_when_signed_in(http_ui: Server, portal: BlockingPortal, page: Page) -> None:
    with http_session(portal, http_ui.origin + "/mcp", TOKENS["bob"]) as bob_client:
        result: Any = bob_client.call_tool("remember", {"content": "CSRF target of bob."})
        assert not result.is_error, result
    sign_in(page, http_ui, TOKENS["bob"])
    page.goto(http_ui.page("browse"))
    page.locator("#memories li.memory", has_text="CSRF target of bob").get_by_role("link").first.click()
    page.wait_for_url(re.compile(r"/ui/memory/"))
    statuses = csrf_refusals(page.context, page, http_ui)
    assert [s for _, s in statuses[:4]] == [403] * 4, statuses
    assert statuses[4][1] in (200, 303), statuses


def test_signin_starts_a_new_session_and_ends_the_one_before(http_ui: Server, page: Page) -> None:
    """A session id set before the sign-in (as another site could plant one) does not ride along into it."""
    import urllib.request

    from memserver.ui.security import COOKIE

    def cookie_set(sid: str) -> str:  # what the sign-in page answers to a request carrying session `sid`
        request = urllib.request.Request(http_ui.page("signin"), headers={"cookie": f"{COOKIE}={sid}"})
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.headers.get("set-cookie") or ""

    page.goto(http_ui.page())
    expect(page).to_have_url(re.compile(r"/ui/signin"))
    (before,) = [c["value"] for c in page.context.cookies() if c["name"] == COOKIE]
    sign_in(page, http_ui, TOKENS["alice"])
    expect(page).to_have_url(http_ui.page())
    (after,) = [c["value"] for c in page.context.cookies() if c["name"] == COOKIE]
    assert after != before
    assert cookie_set(after) == ""  # the signed-in session lives
    assert COOKIE in cookie_set(before)  # the one before is over: its bearer is greeted as a new visitor
