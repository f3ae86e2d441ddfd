"""The memory browser's safety, through HTTP (Starlette's TestClient): headers, CSRF, Host/Origin, escaping of hostile
fields, the sign-in and its cookie, one user's store only, body limits."""

from __future__ import annotations

import re
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from memserver.contract.backend import MemoryBackend
from memserver.loader import Stores
from memserver.local.store import MemoryStore
from memserver.transports.http import browser_app
from memserver.ui.app import Browser
from memserver.ui.security import CSP
from tests.support.fakes import FakeEmbedder

BASE = "http://127.0.0.1:8000"
ORIGIN = {"origin": BASE}
TOKENS = {"alice-token-0123456789": "alice", "bob-token-0123456789ab": "bob"}


def client_for(stores: Stores, *, tokens: dict[str, str] | None = None, max_body: int = 1024 * 1024) -> TestClient:
    async def check(token: str) -> str | None:
        return (tokens or {}).get(token)

    browser = Browser(stores, check_token=check if tokens else None, max_body_bytes=max_body)
    return TestClient(browser_app(browser.asgi()), base_url=BASE, follow_redirects=False)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryBackend]:
    with MemoryStore(tmp_path, "ui", embedder=FakeEmbedder()) as s:
        yield s


@pytest.fixture
def client(store: MemoryBackend) -> TestClient:
    return client_for(Stores(lambda user: store))


def csrf_of(page: str) -> str:
    found = re.search(r'data-csrf="([0-9a-f]+)"', page)
    assert found
    return found.group(1)


def test_every_answer_carries_the_security_headers(client: TestClient) -> None:
    """Pages, static files, refusals and missing pages all carry the CSP, nosniff and no-referrer."""
    answers = [
        client.get("/ui/"),
        client.get("/ui/static/app.js"),
        client.get("/ui/memory/" + "0" * 32),
        client.post("/ui/bulk", data={"tags": "x"}, headers=ORIGIN),
    ]
    assert [a.status_code for a in answers] == [200, 200, 404, 403]
    for answer in answers:
        assert answer.headers["content-security-policy"] == CSP
        assert answer.headers["x-content-type-options"] == "nosniff"
        assert answer.headers["referrer-policy"] == "same-origin"
    assert "'unsafe-inline'" not in CSP and "'unsafe-eval'" not in CSP


def test_a_post_without_the_csrf_token_or_without_an_origin_changes_nothing(
    client: TestClient, store: MemoryBackend
) -> None:
    memory = store.add("a memory to keep", tags=["keep"])
    csrf = csrf_of(client.get("/ui/").text)
    forget = f"/ui/memory/{memory.id}/forget"
    assert client.post(forget, data={}, headers=ORIGIN).status_code == 403  # no token
    assert client.post(forget, data={"csrf": "0" * 64}, headers=ORIGIN).status_code == 403  # a wrong one
    assert client.post(forget, data={"csrf": csrf}).status_code == 403  # neither Origin nor Referer
    assert store.get(memory.id) is not None
    assert client.post(forget, data={"csrf": csrf}, headers=ORIGIN).status_code == 303
    assert store.get(memory.id) is None


def test_a_get_changes_nothing(client: TestClient, store: MemoryBackend) -> None:
    memory = store.add("still here after a GET")
    page = client.get(f"/ui/memory/{memory.id}/forget")
    assert page.status_code == 200 and "Forget this memory" in page.text
    assert client.get("/ui/bulk?tags=x&preview=1").status_code == 200
    assert store.get(memory.id) is not None


def test_a_foreign_host_or_origin_is_refused_first(client: TestClient) -> None:
    assert client.get("/ui/", headers={"host": "evil.example"}).status_code == 421
    assert client.get("/ui/", headers={"origin": "http://evil.example"}).status_code == 403
    assert client.post("/ui/signout", headers={"origin": "http://evil.example"}).status_code == 403


HOSTILE = [
    "<script>alert(1)</script>",
    "<img src=x onerror=alert(2)>",
    'x" onmouseover="alert(3)',
]


def test_hostile_fields_render_as_text_everywhere(client: TestClient, store: MemoryBackend) -> None:
    """Content, tags, speaker, session, source and namespace: escaped on every page, never a link."""
    memory = store.add(
        HOSTILE[0] + " \u202eoverride " + "y" * 19_900,
        tags=[HOSTILE[1], HOSTILE[2]],
        speaker=HOSTILE[1],
        session=HOSTILE[0],
        source="javascript:alert(4)",
    )
    store.add("<b>in another namespace</b>", namespace="evil:ns", speaker="\u202eabc")
    pages = [
        client.get("/ui/?q=alert"),
        client.get("/ui/browse"),
        client.get(f"/ui/memory/{memory.id}"),
        client.get("/ui/bulk?speaker=" + HOSTILE[1]),
        client.get("/ui/stats"),
        client.get("/ui/browse?namespace=evil:ns"),
    ]
    for page in pages:
        assert page.status_code == 200
        text = page.text
        for hostile in HOSTILE:
            assert hostile not in text
        assert "<script>alert" not in text and "onerror=" not in text.replace("onerror=alert", "")
        assert not re.search(r'(href|src|action)="(?!/ui|#)', text), "a link leaving the browser"
        assert "javascript:" not in re.findall(r'href="[^"]*"', text).__str__()
    memory_page = pages[2].text
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in memory_page
    assert "javascript:alert(4)" in memory_page  # shown, as text
    assert re.search(r"<bdi>[^<]*\u202e", memory_page), "a right-to-left override outside <bdi>"
    assert "y" * 19_900 in memory_page  # the whole content on its own page (the edit form's textarea)
    assert "y" * 64 + "<wbr>" + "y" * 64 in memory_page  # shown with break opportunities: laid out in ms, not seconds
    assert "y" * 1000 not in pages[1].text  # cut on lists


def test_signin_refuses_a_wrong_token_and_keeps_the_right_one_out_of_the_cookie(tmp_path: Path) -> None:
    stores = Stores(lambda user: MemoryStore(tmp_path / str(user), "ui", embedder=FakeEmbedder()), per_user=True)
    client = client_for(stores, tokens=TOKENS)
    try:
        assert client.get("/ui/").status_code == 303
        assert client.get("/ui/").headers["location"] == "/ui/signin"
        assert client.get("/ui/events").status_code == 303
        page = client.get("/ui/signin")
        csrf = csrf_of(page.text)
        wrong = client.post("/ui/signin", data={"csrf": csrf, "token": "not-a-token-at-all"}, headers=ORIGIN)
        assert wrong.status_code == 401
        assert 'role="alert"' in wrong.text and "That token is not valid." in wrong.text
        cross = client.post(
            "/ui/signin",
            data={"csrf": csrf, "token": "alice-token-0123456789"},
            headers={"referer": "http://127.0.0.1:9999/x"},
        )
        assert cross.status_code == 403
        right = client.post("/ui/signin", data={"csrf": csrf, "token": "alice-token-0123456789"}, headers=ORIGIN)
        assert right.status_code == 303 and right.headers["location"] == "/ui/"
        cookie = right.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/ui" in cookie
        assert "alice-token" not in cookie
        assert client.get("/ui/").status_code == 200
        assert "Sign out" in client.get("/ui/browse").text
    finally:
        stores.close()


def test_a_user_sees_only_their_own_store(tmp_path: Path) -> None:
    stores = Stores(lambda user: MemoryStore(tmp_path / str(user), "ui", embedder=FakeEmbedder()), per_user=True)
    try:
        alice, bob = client_for(stores, tokens=TOKENS), client_for(stores, tokens=TOKENS)
        for client, token in ((alice, "alice-token-0123456789"), (bob, "bob-token-0123456789ab")):
            csrf = csrf_of(client.get("/ui/signin").text)
            assert client.post("/ui/signin", data={"csrf": csrf, "token": token}, headers=ORIGIN).status_code == 303
        import anyio

        # Stores.get is async; a thread of its own runs it (the browser tests' Playwright keeps a loop in this one)
        with ThreadPoolExecutor(1) as pool:
            alices = pool.submit(anyio.run, stores.get, "alice").result()
        secret = alices.add("alice's secret garden plan", namespace="private")
        assert "secret garden plan" in alice.get("/ui/browse?namespace=private").text
        for path in (
            "/ui/browse?namespace=private",
            "/ui/?q=secret+garden&namespace=private",
            "/ui/stats",
            "/ui/export.jsonl",
        ):
            answer = bob.get(path)
            assert answer.status_code == 200 and "secret garden plan" not in answer.text
        assert bob.get(f"/ui/memory/{secret.id}?namespace=private").status_code == 404
    finally:
        stores.close()


def test_bodies_are_bounded_and_an_import_may_be_larger(client: TestClient, store: MemoryBackend) -> None:
    csrf = csrf_of(client.get("/ui/").text)
    small = client_for(Stores(lambda user: store), max_body=1000)
    csrf_small = csrf_of(small.get("/ui/").text)
    big = "x" * 2000
    assert small.post("/ui/bulk", data={"csrf": csrf_small, "tags": big}, headers=ORIGIN).status_code == 413
    lines = "".join(f'{{"content": "imported memory {i} {big}"}}\n' for i in range(3)).encode()
    answer = small.post(
        "/ui/import",
        content=lines,
        headers={**ORIGIN, "x-csrf-token": csrf_small, "content-type": "application/x-ndjson"},
    )
    assert answer.status_code == 200
    assert re.search(r'class="stored">3<', answer.text)
    assert csrf  # the first client's session is untouched
