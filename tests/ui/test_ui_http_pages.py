"""The memory browser's pages that change memories, through HTTP (Starlette's TestClient): an edit makes a new
version and keeps the old one, a bulk forget deletes exactly what it previewed, an import reports what it refused."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from memserver.contract.backend import MemoryBackend, MemoryFilter
from memserver.features.forgetting import digest
from memserver.loader import Stores
from memserver.local.store import MemoryStore
from memserver.transports.http import browser_app
from memserver.ui.app import Browser
from tests.support.fakes import FakeEmbedder

BASE = "http://127.0.0.1:8000"
ORIGIN = {"origin": BASE}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryBackend]:
    with MemoryStore(tmp_path, "ui", embedder=FakeEmbedder()) as s:
        yield s


@pytest.fixture
def client(store: MemoryBackend) -> TestClient:
    return TestClient(browser_app(Browser(Stores(lambda user: store)).asgi()), base_url=BASE, follow_redirects=False)


def csrf_of(client: TestClient) -> str:
    found = re.search(r'data-csrf="([0-9a-f]+)"', client.get("/ui/").text)
    assert found
    return found.group(1)


def test_an_edit_makes_a_new_version_and_the_history_shows_both(client: TestClient, store: MemoryBackend) -> None:
    old = store.add("the meeting is on Monday", tags=["work"], speaker="Ann")
    form = {"csrf": csrf_of(client), "content": "the meeting is on Tuesday"}
    answer = client.post(f"/ui/memory/{old.id}/edit", data=form, headers=ORIGIN)
    assert answer.status_code == 303
    new_id = answer.headers["location"].split("/ui/memory/")[1].split("?")[0]
    new = store.get(new_id)
    assert new is not None and new.replaces == old.id and new.tags == ("work",) and new.speaker == "Ann"
    page = client.get(answer.headers["location"]).text
    versions = re.findall(r'<li class="(version[^"]*)" data-id="([0-9a-f]+)"', page)
    assert [(c, i) for c, i in versions] == [("version", old.id), ("version current", new_id)]
    old_page = client.get(f"/ui/memory/{old.id}").text
    assert "older version" in old_page


def test_a_bulk_forget_deletes_exactly_what_it_previewed(client: TestClient, store: MemoryBackend) -> None:
    for i in range(3):
        store.add(f"project x note {i}", tags=["project-x"])
    keep = store.add("unrelated", tags=["other"])
    preview = client.get("/ui/bulk?tags=project-x&preview=1").text
    assert re.search(r'id="bulk-count">3 memories match<', preview)
    shown = re.search(r'name="digest" value="([0-9a-f]+)"', preview)
    assert shown
    late = store.add("project x note added after the preview", tags=["project-x"])
    csrf = csrf_of(client)
    changed = client.post(
        "/ui/bulk", data={"csrf": csrf, "tags": "project-x", "digest": shown.group(1)}, headers=ORIGIN
    )
    assert changed.status_code == 409 and "nothing was forgotten" in changed.text
    assert store.get(late.id) is not None
    ids = store.select(MemoryFilter(tags=["project-x"])).ids
    done = client.post("/ui/bulk", data={"csrf": csrf, "tags": "project-x", "digest": digest(ids)}, headers=ORIGIN)
    assert done.status_code == 200 and re.search(r'id="bulk-result">Forgot 4 memories\.<', done.text)
    assert store.get(late.id) is None and store.get(keep.id) is not None


def test_an_import_reports_stored_duplicates_and_refusals(client: TestClient, store: MemoryBackend) -> None:
    store.add("already here")
    records = [
        {"content": "fresh one"},
        {"content": "already here"},
        None,
        {"content": ""},
        {"content": "t", "tags": "x"},
    ]
    lines = "\n".join("not json" if r is None else json.dumps(r) for r in records)
    answer = client.post(
        "/ui/import", files={"file": ("m.jsonl", lines.encode())}, data={"csrf": csrf_of(client)}, headers=ORIGIN
    )
    assert answer.status_code == 200
    summary = answer.text.split('id="import-summary"')[1]
    assert re.search(r'class="stored">1<', summary) and re.search(r'class="duplicates">1<', summary)
    assert re.search(r'class="refused">3<', summary)
    assert "line 3: not a JSON object" in summary
    assert re.search(r"line 4: content [^<]*empty", summary) and re.search(r"line 5: tags", summary)
    assert [m.content for m in store.list_recent(10)] == ["fresh one", "already here"]
