"""Resource subscriptions end to end: real `memserver serve` processes on one data directory, the real store and
model; one process subscribes (stdio or HTTP, both protocol eras, the Python SDK's client and the TypeScript SDK's),
another process writes, and the subscriber is told. Every wait is on a notification, bounded by a timeout.
"""

from __future__ import annotations

import json
import logging
import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.from_thread import BlockingPortal
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning

from tests.e2e import ts_client
from tests.e2e.servers import (
    ROOT,
    SERVE,
    TIMEOUT,
    HttpServer,
    Live,
    http_server,
    http_session,
    server_env,
    stdio_session,
)
from tests.server.test_server_subscriptions import Updates

MODERN = "2026-07-28"
SESSIONS = ["stdio-2025-11-25", "stdio-2026-07-28", "http-2025-11-25", "http-2026-07-28"]
ALICE, BOB = "alice-token-0123456789abcdef", "bob-token-0123456789abcdef"


class GetStreams(logging.Handler):
    """Counts the GET streams the SDK's HTTP client has opened (its debug record "GET SSE connection established"):
    updates of the handshake era travel on that stream, and the SDK drops those sent before it is open
    (docs/upstream.md S4), so a test waits for it before it writes."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.opened = 0
        self.changed = threading.Condition()

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "GET SSE connection established":
            with self.changed:
                self.opened += 1
                self.changed.notify_all()

    def wait_for(self, count: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: self.opened >= count, TIMEOUT), "the client opened no GET stream"


@pytest.fixture(scope="module")
def get_streams() -> Iterator[GetStreams]:
    handler = GetStreams()
    client_logger = logging.getLogger("mcp.client.streamable_http")
    level = client_logger.level
    client_logger.addHandler(handler)
    client_logger.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        client_logger.removeHandler(handler)
        client_logger.setLevel(level)


@contextmanager
def http_subscriber(
    portal: BlockingPortal, url: str, streams: GetStreams, *args: Any, **options: Any
) -> Iterator[Live]:
    """An HTTP session whose GET stream is open (handshake era; 2026-07-28 has none, the listen stream is the
    response to its request)."""
    before = streams.opened
    with http_session(portal, url, *args, **options) as live:
        if live.protocol_version != MODERN:
            streams.wait_for(before + 1)
        yield live


@pytest.fixture(autouse=True)
def no_deprecation_noise() -> Iterator[None]:
    with warnings.catch_warnings():  # the SDK's client warns that resources/subscribe is gone in 2026-07-28
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("subscriptions-data")


@pytest.fixture(scope="module")
def writer(portal: BlockingPortal, data_dir: Path) -> Iterator[Live]:
    """The other window: a second `memserver serve` process (stdio) on the same data directory."""
    with stdio_session(portal, data_dir, data_dir / "writer.log") as live:
        yield live


@pytest.fixture(scope="module")
def http(data_dir: Path) -> Iterator[HttpServer]:
    with http_server(data_dir) as running:
        yield running


class Subscriber:
    """One connected subscriber session and what it heard, in either era."""

    def __init__(self, name: str, live: Live, updates: Updates) -> None:
        self.name, self.live, self.updates = name, live, updates
        self.listening: Any = None
        self.events: list[Any] = []  # what the listen stream (2026-07-28) delivered so far

    @property
    def modern(self) -> bool:
        return bool(self.live.protocol_version == MODERN)

    def subscribe(self, uris: list[str]) -> list[str]:
        """resources/subscribe each URI (handshake era) or open one listen stream for all (2026-07-28); the URIs
        the server took."""
        if not self.modern:
            for uri in uris:
                self.live.subscribe_resource(uri)
            return uris
        listen = self.live.client.listen(resource_subscriptions=uris)
        self.listening = self.live.portal.wrap_async_context_manager(listen)
        subscription = self.listening.__enter__()
        self.stream = subscription
        return list(subscription.honored.resource_subscriptions or [])

    def heard(self, uri: str) -> None:
        """Wait until `uri` is announced (or return at once if it was already)."""
        if self.modern:
            self.live.portal.call(self._next_matching, uri)
        else:
            self.live.portal.call(self.updates.until, uri)

    async def _next_matching(self, uri: str) -> None:
        with anyio.fail_after(TIMEOUT):
            while ResourceUpdated(uri) not in self.events:
                self.events.append(await self.stream.__anext__())

    def close(self) -> None:
        if self.listening is not None:
            self.listening.__exit__(None, None, None)
            self.listening = None


@pytest.fixture(params=SESSIONS)
def subscriber(request: pytest.FixtureRequest, portal: BlockingPortal, data_dir: Path) -> Iterator[Subscriber]:
    transport, era = request.param.split("-", 1)
    mode = "auto" if era == MODERN else "legacy"
    updates = Updates()
    if transport == "stdio":
        log = data_dir / f"{request.param}.log"
        session = stdio_session(portal, data_dir, log, mode=mode, message_handler=updates)
    else:
        url, streams = request.getfixturevalue("http").url, request.getfixturevalue("get_streams")
        session = http_subscriber(portal, url, streams, mode=mode, message_handler=updates)
    with session as live:
        assert live.protocol_version == era
        sub = Subscriber(request.param, live, updates)
        try:
            yield sub
        finally:
            sub.close()


def test_a_write_by_another_process_is_announced_to_the_subscriber(subscriber: Subscriber, writer: Live) -> None:
    """The subscriber's server sees the other process's write through its watch, reads the resources again, and
    announces the ones that changed; reading them then shows the new memory."""
    tag = f"{subscriber.name}-subs"
    uris = ["memory://recent", f"memory://tags/{tag}", "memory://memories/" + "0" * 32]
    taken = subscriber.subscribe(uris[:2] if not subscriber.modern else uris)
    assert taken == uris[:2]  # 2026-07-28: the acknowledgement leaves out the memory that does not exist
    content = f"The other window stored this under {tag}."
    writer.call_tool("remember", {"content": content, "tags": [tag]})
    subscriber.heard(f"memory://tags/{tag}")
    subscriber.heard("memory://recent")
    listed = json.loads(subscriber.live.read_resource(f"memory://tags/{tag}").contents[0].text)
    assert [m["content"] for m in listed["memories"]] == [content]


def test_the_subscribers_own_write_is_announced_too(subscriber: Subscriber) -> None:
    stored = subscriber.live.call_tool("remember", {"content": "A fact written by the subscriber itself."})
    uri = f"memory://memories/{stored.structured_content['id']}"
    assert subscriber.subscribe([uri]) == [uri]
    subscriber.live.call_tool("forget", {"memory_id": stored.structured_content["id"]})
    subscriber.heard(uri)


# --- HTTP: users and sessions ------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def users(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServer]:
    with http_server(tmp_path_factory.mktemp("users"), MEMSERVER_TOKENS=f"alice:{ALICE}, bob:{BOB}") as running:
        yield running


def test_one_users_writes_are_never_announced_to_another(
    portal: BlockingPortal, users: HttpServer, get_streams: GetStreams
) -> None:
    heard: dict[str, Updates] = {"alice": Updates(), "bob": Updates()}
    with (
        http_subscriber(portal, users.url, get_streams, ALICE, message_handler=heard["alice"]) as alice,
        http_subscriber(portal, users.url, get_streams, BOB, message_handler=heard["bob"]) as bob,
    ):
        alice.subscribe_resource("memory://stats")
        bob.subscribe_resource("memory://stats")
        bob.call_tool("remember", {"content": "Bob's fact, in Bob's store."})
        portal.call(heard["bob"].until, "memory://stats")
        alice.call_tool("remember", {"content": "Alice's fact, in Alice's store."})  # the marker
        portal.call(heard["alice"].until, "memory://stats")
    assert heard["alice"].uris == ["memory://stats"]  # her own write only: not Bob's


def test_a_closed_session_leaves_no_subscription_behind(portal: BlockingPortal, http: HttpServer) -> None:
    with http_session(portal, http.url) as live:
        live.subscribe_resource("memory://stats")
        live.subscribe_resource("memory://recent")
    # The client's DELETE ends the session; its connection's exit stack drops what it subscribed.
    assert "its 2 subscription(s) are dropped" in http.wait_for_log("subscription(s) are dropped")


# --- the TypeScript SDK's client ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ts_script() -> Path:
    return ts_client.install()


def check_ts(seen: dict[str, Any]) -> None:
    assert seen["capabilities"]["resources"] == {"subscribe": True, "listChanged": False}
    assert seen["updatedByOther"] == "memory://tags/ts-subscriptions"  # written by the other process
    assert seen["updatedByItself"] == seen["memoryUri"]
    assert seen["afterUnsubscribe"] == ["memory://stats"]  # the marker only: nothing of the unsubscribed tag


def ts_writer(data_dir: Path) -> dict[str, Any]:
    """How the TypeScript script starts the other window: a second `memserver serve` on the same data dir."""
    return {"command": SERVE[0], "args": SERVE[1:], "env": server_env(data_dir), "cwd": str(ROOT)}


def test_typescript_client_over_stdio(ts_script: Path, tmp_path: Path) -> None:
    config = {"scenario": "subscriptions", "transport": "stdio", **ts_writer(tmp_path), "writer": ts_writer(tmp_path)}
    check_ts(ts_client.run(ts_script, config))


def test_typescript_client_over_http(ts_script: Path, http: HttpServer, data_dir: Path) -> None:
    config = {"scenario": "subscriptions", "transport": "http", "url": http.url, "writer": ts_writer(data_dir)}
    check_ts(ts_client.run(ts_script, config))
