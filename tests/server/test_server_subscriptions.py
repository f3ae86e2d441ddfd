"""Resource subscriptions of build_server(), in process, over the SDK's Client, in both protocol eras.

The store is a real MemoryStore with the fake embedder; "another process" is a second MemoryStore open on the same
data directory, which shares nothing with the first but the files. Every wait is on a notification (an event),
bounded by TIMEOUT; a resource that must NOT be announced is checked against a later marker: updates of one
session arrive in the order they were sent, so whatever a change announced arrives before the marker of the next
change does.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import mcp_types as types
import pytest
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPDeprecationWarning, MCPError

from memserver.features import subscriptions
from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.support.fakes import FakeEmbedder

TIMEOUT = 10
STATS, RECENT, TAGS = "memory://stats", "memory://recent", "memory://tags"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def no_deprecation_noise() -> Iterator[None]:
    with warnings.catch_warnings():  # the SDK's client warns that resources/subscribe is gone in 2026-07-28
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        yield


class Updates:
    """notifications/resources/updated as a handshake-era client gets them, in order."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self._arrived = anyio.Event()

    async def __call__(self, message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            self.uris.append(message.params.uri)
            self._arrived.set()

    async def until(self, uri: str, times: int = 1) -> list[str]:
        """Wait until `uri` has been announced `times` times (in all); return every URI announced so far."""
        with anyio.fail_after(TIMEOUT):
            while self.uris.count(uri) < times:
                self._arrived = anyio.Event()
                await self._arrived.wait()
        return list(self.uris)


class Stores:
    """The data directory of one test: the server's store, and a second one standing in for another process."""

    def __init__(self, tmp_path: Path) -> None:
        self.path = tmp_path
        self.opened: list[MemoryStore] = []

    def open(self) -> MemoryStore:
        store = MemoryStore(self.path, "subs", embedder=FakeEmbedder())
        self.opened.append(store)
        return store

    def close(self) -> None:
        for store in self.opened:
            store.close()


@pytest.fixture
def stores(tmp_path: Path) -> Iterator[Stores]:
    opened = Stores(tmp_path)
    yield opened
    opened.close()


@asynccontextmanager
async def connected(stores: Stores, mode: str = "legacy") -> AsyncIterator[tuple[Client, Updates, MemoryStore]]:
    """A client of a server on the shared directory, its updates, and another process's store on the same."""
    updates = Updates()
    store = stores.open()
    async with Client(build_server(lambda user: store), mode=mode, message_handler=updates) as client:
        yield client, updates, stores.open()


async def remember(client: Client, content: str, tags: list[str] | None = None) -> str:
    with anyio.fail_after(TIMEOUT):
        result = await client.call_tool("remember", {"content": content, "tags": tags or []})
    return str(result.structured_content["id"])  # type: ignore[index]


# --- the handshake era -------------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_a_write_announces_exactly_the_subscribed_resources_it_changed(stores: Stores) -> None:
    async with connected(stores) as (client, updates, _):
        kept = await remember(client, "the garden shed needs a new roof", ["garden"])
        for uri in (STATS, RECENT, TAGS, "memory://tags/garden", "memory://tags/kitchen", f"memory://memories/{kept}"):
            await client.subscribe_resource(uri)
        await remember(client, "the kitchen tap drips", ["kitchen"])
        await updates.until(STATS)
        await client.call_tool("forget", {"memory_id": kept})  # the marker: every resource but the kitchen's
        await updates.until(STATS, times=2)
        seen = await updates.until(f"memory://memories/{kept}")
    first = seen[: seen.index(STATS, 1)]
    assert sorted(first) == sorted([STATS, RECENT, TAGS, "memory://tags/kitchen"])  # not the garden, not `kept`
    assert set(seen[len(first) :]) == {STATS, RECENT, TAGS, "memory://tags/garden", f"memory://memories/{kept}"}


@pytest.mark.anyio
async def test_a_write_by_another_process_is_announced(stores: Stores) -> None:
    async with connected(stores) as (client, updates, other):
        await client.subscribe_resource(RECENT)
        await anyio.to_thread.run_sync(other.add, "written by the other window")
        assert await updates.until(RECENT) == [RECENT]
        listed = await client.read_resource(RECENT)
    assert "written by the other window" in listed.contents[0].text  # type: ignore[union-attr]


@pytest.mark.anyio
async def test_a_write_that_changes_nothing_announces_nothing(stores: Stores) -> None:
    """A duplicate stores nothing; a forget of an unknown id deletes nothing: the resources read the same."""
    async with connected(stores) as (client, updates, other):
        await remember(client, "the boiler was serviced in May", ["house"])
        await client.subscribe_resource(RECENT)
        await client.subscribe_resource("memory://tags/house")
        await remember(client, "the boiler was serviced in May", ["house"])  # a duplicate
        await client.call_tool("forget", {"memory_id": "0" * 32})
        await anyio.to_thread.run_sync(other.add, "the marker")  # changes recent, not the house tag
        seen = await updates.until(RECENT)
    assert seen == [RECENT]


@pytest.mark.anyio
async def test_unsubscribe_stops_the_updates_of_that_resource_only(stores: Stores) -> None:
    async with connected(stores) as (client, updates, _):
        await client.subscribe_resource(STATS)
        await client.subscribe_resource(RECENT)
        await client.unsubscribe_resource(RECENT)
        await client.unsubscribe_resource(RECENT)  # again: no error
        await client.unsubscribe_resource("memory://tags/never-subscribed")
        await remember(client, "a fact")
        await updates.until(STATS)  # announced before the next write (two writes close together may be one update)
        await client.subscribe_resource(STATS)  # again: still one subscription, one update per change
        await remember(client, "another fact")
        seen = await updates.until(STATS, times=2)
    assert seen == [STATS, STATS]


@pytest.mark.anyio
async def test_a_forgotten_memory_is_announced_then_reads_as_unknown(stores: Stores) -> None:
    async with connected(stores) as (client, updates, other):
        memory_id = await remember(client, "the spare key is under the blue pot")
        uri = f"memory://memories/{memory_id}"
        await client.subscribe_resource(uri)
        await anyio.to_thread.run_sync(other.delete, memory_id)
        assert await updates.until(uri) == [uri]
        with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as caught:
            await client.read_resource(uri)
    assert caught.value.error.code == types.INVALID_PARAMS


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("uri", "message"),
    [
        ("memory://memories/" + "0" * 32, "No memory with that id"),
        ("memory://memories/not-an-id", "a memory id is 32 hexadecimal characters"),
        ("file:///etc/passwd", "this server serves memory:// URIs only"),
        ("memory://nothing", "Unknown resource: memory://nothing"),
    ],
)
async def test_subscribing_to_what_cannot_be_read_is_invalid_params_with_the_uri(
    stores: Stores, uri: str, message: str
) -> None:
    async with connected(stores) as (client, _, _):
        with anyio.fail_after(TIMEOUT), pytest.raises(MCPError) as caught:
            await client.subscribe_resource(uri)
    assert caught.value.error.code == types.INVALID_PARAMS and message in caught.value.error.message
    assert caught.value.error.data == {"uri": uri}


@pytest.mark.anyio
async def test_a_session_has_at_most_max_per_session_subscriptions(stores: Stores) -> None:
    async with connected(stores) as (client, updates, _):
        with anyio.fail_after(TIMEOUT):
            for n in range(subscriptions.MAX_PER_SESSION):
                await client.subscribe_resource(f"memory://tags/t{n}")
            with pytest.raises(MCPError) as caught:
                await client.subscribe_resource("memory://tags/one-too-many")
            await client.subscribe_resource("memory://tags/t0")  # one it has: fine
            await client.unsubscribe_resource("memory://tags/t1")
            await client.subscribe_resource(STATS)  # room again
            await remember(client, "tagged", ["t2"])
        seen = await updates.until(STATS)
    assert caught.value.error.code == types.INVALID_REQUEST
    assert "100 subscriptions, the most it may have" in caught.value.error.message
    assert sorted(seen) == [STATS, "memory://tags/t2"]


# --- 2026-07-28: subscriptions/listen ----------------------------------------------------------------------------


async def next_event(sub: Any) -> Any:
    with anyio.fail_after(TIMEOUT):
        async for event in sub:
            return event
    raise AssertionError("the listen stream ended")


@pytest.mark.anyio
async def test_listen_acknowledges_what_it_honours_and_streams_its_updates(stores: Stores) -> None:
    async with connected(stores, mode="auto") as (client, _, other):
        kept = await remember(client, "the bike lock code is 4711", ["bike"])
        asked = [
            f"memory://memories/{kept}",
            "memory://tags/bike",
            "memory://memories/" + "0" * 32,  # no such memory
            "memory://nothing",  # not ours
            "file:///etc/passwd",
        ]
        options: dict[str, Any] = {"tools_list_changed": True, "resources_list_changed": True}
        with anyio.fail_after(TIMEOUT):
            listening = client.listen(resource_subscriptions=asked, **options)
            sub = await listening.__aenter__()
        try:
            honoured = sub.honored
            await anyio.to_thread.run_sync(other.delete, kept)  # the memory, and the bike tag's listing
            first = {await next_event(sub), await next_event(sub)}
            await anyio.to_thread.run_sync(other.add, "a new bike bell", ["bike"])  # only the bike tag's
            second = await next_event(sub)
        finally:
            await listening.__aexit__(None, None, None)
    assert honoured.resource_subscriptions == asked[:2]
    assert (honoured.tools_list_changed, honoured.resources_list_changed) == (None, None)  # our lists never change
    assert first == {ResourceUpdated(f"memory://memories/{kept}"), ResourceUpdated("memory://tags/bike")}
    assert second == ResourceUpdated("memory://tags/bike")


@pytest.mark.anyio
async def test_each_listen_stream_hears_only_of_its_own_uris(stores: Stores) -> None:
    async with connected(stores, mode="auto") as (client, _, other):
        with anyio.fail_after(TIMEOUT):
            stats_stream = client.listen(resource_subscriptions=[STATS])
            tag_stream = client.listen(resource_subscriptions=["memory://tags/plants", STATS])
            stats_sub = await stats_stream.__aenter__()
            tag_sub = await tag_stream.__aenter__()
        try:
            await anyio.to_thread.run_sync(other.add, "water the fern on Sundays", ["plants"])
            got = {await next_event(stats_sub), await next_event(tag_sub), await next_event(tag_sub)}
            await anyio.to_thread.run_sync(other.add, "not about plants")
            marker = await next_event(stats_sub)  # the tag stream heard nothing of this one
            after = await next_event(tag_sub)
        finally:
            await tag_stream.__aexit__(None, None, None)
            await stats_stream.__aexit__(None, None, None)
    assert got == {ResourceUpdated(STATS), ResourceUpdated("memory://tags/plants")}
    assert marker == ResourceUpdated(STATS) and after == ResourceUpdated(STATS)


@pytest.mark.anyio
@pytest.mark.parametrize("mode", ["legacy", "auto"], ids=["2025-11-25", "2026-07-28"])
async def test_capabilities_offer_subscribe_and_no_list_changes(stores: Stores, mode: str) -> None:
    async with connected(stores, mode=mode) as (client, _, _):
        if mode == "auto":
            discovered = await client.session.discover()
            caps = discovered.capabilities
        else:
            caps = client.server_capabilities
    assert caps.resources is not None and caps.resources.subscribe is True
    assert [c.list_changed for c in (caps.tools, caps.resources, caps.prompts)] == [False, False, False]
