"""Resource subscriptions: who is subscribed to which memory:// resource, and the watch that tells them it changed.

Two protocol eras, one watch:
  - through 2025-11-25: `resources/subscribe` and `resources/unsubscribe` name one URI for the session; an update
    goes as `notifications/resources/updated` on the session's own stream (stdio: the pipe; HTTP: its GET stream).
  - 2026-07-28 (SEP-2575): `subscriptions/listen` replaces both: one request whose response stream carries the
    updates of the URIs it names, until the client closes it. The SDK's `ListenHandler` serves that stream from a
    `SubscriptionBus`; there is one bus per user, so a change in one user's store never reaches another's stream.

The watch, while anything is subscribed: a thread (`_Poller`) asks each watched store for its `revision()` every
POLL_SECONDS (the local store: one stat of its journal, so it sees the writes of other processes on the same data
directory too) and wakes the event loop only when one moved; the loop then reads the subscribed resources of that
store again, in one worker thread, and announces those whose JSON changed (SHA-256 of the text). A write made
through this server makes the thread look at once (`changed()`). With nothing subscribed the thread waits on an
event and costs nothing; while it polls, the event loop sleeps (polling from the loop through a worker thread cost
more CPU: benchmarks/README.md, "Subscriptions", has both).

Bounds: at most MAX_PER_SESSION URIs per session (one more is an error saying so) and per listen stream (the
acknowledgement names the ones honoured); at most MAX_SESSIONS sessions (a session is forgotten when its
connection closes; the bound only matters if that never comes); at most MAX_LISTEN_STREAMS streams per user.

The set of fixed resources (resources.RESOURCES) never changes while a server runs, so this server never sends
`notifications/resources/list_changed` and says `listChanged: false` in both eras.

Knows the storage contract and resources.py, nothing of the transports.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.lowlevel
import mcp_types as types
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated

from memserver.features import resources

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext
    from mcp.server.session import ServerSession

    from memserver.contract.backend import MemoryBackend
    from memserver.loader import Stores

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.25
MAX_PER_SESSION = 100
MAX_SESSIONS = 1000
MAX_LISTEN_STREAMS = 32
GONE = b"gone"  # the digest of a memory that does not exist (any more)
UNKNOWN = b""  # the digest of a resource not read yet: its next read counts as a change


class TooManySubscriptionsError(Exception):
    """A session asked for more than MAX_PER_SESSION subscriptions."""


class _Party(Protocol):
    """Someone to tell when a watched resource changes."""

    async def notify(self, uri: str) -> None: ...


@dataclass(eq=False)
class _Session:
    """A handshake-era session: its updates go on its own stream (the connection's, not a request's)."""

    session: ServerSession
    user: str | None
    uris: set[str] = field(default_factory=set)

    async def notify(self, uri: str) -> None:
        await self.session.send_resource_updated(uri)


@dataclass(eq=False)
class _Listeners:
    """A user's 2026-07-28 listen streams: their SDK handler and the bus it reads; an update is published once,
    and the handler hands it to each stream that named the URI."""

    bus: InMemorySubscriptionBus
    handler: ListenHandler

    async def notify(self, uri: str) -> None:
        await self.bus.publish(ResourceUpdated(uri=uri))


@dataclass(eq=False)
class _Watched:
    """One resource of one user's store, its digest when last read, and who wants to hear of it (with how many
    subscriptions each: a user's listen streams share one bus)."""

    user: str | None
    uri: str
    target: resources.Target
    digest: bytes
    parties: Counter[_Party] = field(default_factory=Counter)


class Subscriptions:
    """The subscriptions of one server lifespan (per process over HTTP, per connection over stdio), and its watch.

    Run `watch()` in a task for the lifespan; call everything else from the event loop.
    """

    def __init__(self, stores: Stores, poll_seconds: float = POLL_SECONDS) -> None:
        self.stores = stores
        self.poll_seconds = poll_seconds
        self._sessions: dict[str | None, _Session] = {}  # by connection key (HTTP session id; None on stdio)
        self._listeners: dict[str | None, _Listeners] = {}  # by user
        self._watched: dict[tuple[str | None, str], _Watched] = {}  # by (user, uri)
        self._moved: set[str | None] = set()  # users whose store's revision moved since the watch last looked
        self._wake = anyio.Event()  # set when `_moved` gains a user
        self._failing: set[str | None] = set()  # users whose last check failed (logged once per streak)
        self._poller = _Poller(poll_seconds, self._report_from_thread)
        self._loop: anyio.lowlevel.EventLoopToken | None = None  # set by watch(), for the poller's reports

    # --- the handshake era: resources/subscribe and resources/unsubscribe --------------------------------------

    async def subscribe(self, session: ServerSession, key: str | None, user: str | None, uri: str) -> bool:
        """Watch `uri` for the session `key` (idempotent); True if this is the session's first subscription, so the
        caller should call `end_session(key)` when the connection closes.

        Raises:
            resources.UnknownResourceError: not one of our URIs, or a memory that does not exist.
            TooManySubscriptionsError: the session has MAX_PER_SESSION already.
        """
        target = resources.parse(uri)
        subscriber = self._sessions.get(key)
        first = subscriber is None
        if subscriber is None:
            subscriber = self._sessions[key] = _Session(session, user)
            while len(self._sessions) > MAX_SESSIONS:
                self.end_session(next(iter(self._sessions)))
        if uri in subscriber.uris:
            return first
        if len(subscriber.uris) >= MAX_PER_SESSION:
            raise TooManySubscriptionsError(
                f"This session has {MAX_PER_SESSION} subscriptions, the most it may have; unsubscribe from some first"
            )
        subscriber.uris.add(uri)  # before the first read: a second subscribe meanwhile finds it
        try:
            await self._attach(user, [(uri, target)], subscriber, must_exist=True)
        except BaseException:
            subscriber.uris.discard(uri)
            raise
        if self._sessions.get(key) is not subscriber:  # its connection closed while the resource was read
            self._release(user, uri, subscriber)
        return first

    def unsubscribe(self, key: str | None, uri: str) -> None:
        """Stop watching `uri` for the session `key`; a URI it is not subscribed to is no error (idempotent)."""
        subscriber = self._sessions.get(key)
        if subscriber is not None and uri in subscriber.uris:
            subscriber.uris.discard(uri)
            self._release(subscriber.user, uri, subscriber)

    def end_session(self, key: str | None) -> None:
        """The connection `key` closed: forget its subscriptions."""
        subscriber = self._sessions.pop(key, None)
        if subscriber is not None:
            for uri in subscriber.uris:
                self._release(subscriber.user, uri, subscriber)
            if subscriber.uris:
                logger.info("a session ended; its %d subscription(s) are dropped", len(subscriber.uris))

    # --- 2026-07-28: subscriptions/listen ---------------------------------------------------------------------

    async def listen(
        self, ctx: ServerRequestContext[Any], params: types.SubscriptionsListenRequestParams, user: str | None
    ) -> types.SubscriptionsListenResult:
        """Serve one listen stream until the client closes it (or the server stops).

        Honoured: of the first MAX_PER_SESSION distinct URIs that are ours, those that exist; the acknowledgement
        (which the SDK sends first) names exactly those. The list-changed kinds are never honoured: our lists
        never change.
        """
        wanted: list[tuple[str, resources.Target]] = []
        for uri in dict.fromkeys(params.notifications.resource_subscriptions or ()):
            try:
                wanted.append((uri, resources.parse(uri)))
            except resources.UnknownResourceError:
                continue
            if len(wanted) == MAX_PER_SESSION:
                break
        listeners = self._listeners.get(user)
        if listeners is None:
            bus = InMemorySubscriptionBus()
            listeners = self._listeners[user] = _Listeners(
                bus, ListenHandler(bus, max_subscriptions=MAX_LISTEN_STREAMS)
            )
        honoured = await self._attach(user, wanted, listeners, must_exist=False)
        asked = params.model_copy(update={"notifications": types.SubscriptionFilter(resource_subscriptions=honoured)})
        try:
            return await listeners.handler(ctx, asked)
        finally:
            for uri in honoured:
                self._release(user, uri, listeners)

    # --- the watch -------------------------------------------------------------------------------------------------

    def changed(self) -> None:
        """This server just wrote: look now rather than at the next poll."""
        self._poller.poke()

    async def watch(self) -> None:
        """Whenever a watched store's revision moves, re-read what is watched there and announce what changed."""
        self._loop = anyio.lowlevel.current_token()
        while True:
            await self._wake.wait()
            self._wake = anyio.Event()
            moved, self._moved = self._moved, set()
            for user in moved:
                try:
                    await self._check(user)
                except Exception as exc:  # a store that fails now may answer next time; the watch goes on
                    if user not in self._failing:
                        self._failing.add(user)
                        logger.warning("watching the memory store for subscriptions failed: %s", exc)
                else:
                    self._failing.discard(user)

    def close(self) -> None:
        """Stop the poller; end every listen stream gracefully (each sends its final result); forget everything."""
        self._poller.close()
        for listeners in self._listeners.values():
            listeners.handler.close()
        self._sessions.clear()
        self._watched.clear()

    def _report_from_thread(self, user: str | None) -> None:
        """The poller saw `user`'s revision move (called in its thread)."""
        import anyio.from_thread  # (only once something is subscribed: start-up need not compile it)

        if self._loop is not None:
            with contextlib.suppress(RuntimeError):  # the event loop has stopped: the server is going away
                anyio.from_thread.run_sync(self._moved_now, user, token=self._loop)

    def _moved_now(self, user: str | None) -> None:
        self._moved.add(user)
        self._wake.set()

    async def _check(self, user: str | None) -> None:
        store = await self.stores.get(user)
        watched = [w for w in self._watched.values() if w.user == user]
        if not watched:
            return
        digests = await anyio.to_thread.run_sync(_digests, store, [w.target for w in watched])
        for item, digest in zip(watched, digests, strict=True):
            if digest != item.digest:
                item.digest = digest
                for party in list(item.parties):
                    await _tell(party, item.uri)

    async def _attach(
        self, user: str | None, wanted: list[tuple[str, resources.Target]], party: _Party, *, must_exist: bool
    ) -> list[str]:
        """Tell `party` of changes to each (uri, target) of `wanted` from now on; the URIs it now watches.

        A resource watched for the first time is read first (its digest); a memory that does not exist is left out
        (with `must_exist`: UnknownResourceError, and nothing attached).
        """
        store = await self.stores.get(user)
        new = [(uri, target) for uri, target in wanted if (user, uri) not in self._watched]
        # The revision is read before the digests: a write in between is seen as a move, never missed.
        revision = await anyio.to_thread.run_sync(store.revision) if new else None
        digests = await anyio.to_thread.run_sync(_digests, store, [target for _, target in new]) if new else []
        read = {uri: digest for (uri, _), digest in zip(new, digests, strict=True)}
        if must_exist and GONE in read.values():  # read it again for the reason, and attach nothing
            await anyio.to_thread.run_sync(resources.read, store, next(t for u, t in new if read[u] == GONE))
        attached = []
        for uri, target in wanted:  # (no await from here on: the registry cannot change under this loop)
            item = self._watched.get((user, uri))
            if item is None:
                digest = read.get(uri, UNKNOWN)  # UNKNOWN: watched when this began, released meanwhile
                if digest == GONE:
                    continue
                item = self._watched[(user, uri)] = _Watched(user, uri, target, digest)
            item.parties[party] += 1
            attached.append(uri)
        # The store polled already, its revision moved past the one these digests were read at (or the other way
        # round): check now, or a change in between could go unannounced to them. ("": nothing new was read, but
        # the store stopped being polled meanwhile.)
        register = revision is not None or not self._poller.polls(user)
        if attached and register and self._poller.watch(user, store, revision or "") != revision:
            self._moved_now(user)
        return attached

    def _watched_for(self, user: str | None) -> bool:
        return any(w.user == user for w in self._watched.values())

    def _release(self, user: str | None, uri: str, party: _Party) -> None:
        item = self._watched.get((user, uri))
        if item is None:
            return
        item.parties[party] -= 1
        if item.parties[party] <= 0:
            del item.parties[party]
        if not item.parties:
            del self._watched[(user, uri)]
            if not self._watched_for(user):
                self._poller.unwatch(user)


class _Poller:
    """A thread asking each watched store for its revision every `interval` seconds; `report(user)` (called in the
    thread) when one moved. Waits on an event, costing nothing, while no store is watched."""

    def __init__(self, interval: float, report: Callable[[str | None], None]) -> None:
        self.interval = interval
        self._report = report
        self._watched: dict[str | None, list[Any]] = {}  # user -> [store, the revision last seen]
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None
        self._failing: set[str | None] = set()

    def watch(self, user: str | None, store: MemoryBackend, revision: str) -> str:
        """Poll `store` from now on, taking `revision` (read before the digests) as the last one seen, unless it
        is polled already; returns the revision it holds as last seen."""
        with self._lock:
            if user in self._watched or self._closed:
                return str(self._watched[user][1]) if user in self._watched else revision
            self._watched[user] = [store, revision]
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="memserver-watch", daemon=True)
                self._thread.start()
        self._wake.set()  # it may be waiting with nothing to watch
        return revision

    def polls(self, user: str | None) -> bool:
        with self._lock:
            return user in self._watched

    def unwatch(self, user: str | None) -> None:
        with self._lock:
            self._watched.pop(user, None)

    def poke(self) -> None:
        """Look now (a write was just made here)."""
        self._wake.set()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._watched.clear()
        self._wake.set()

    def _run(self) -> None:
        while True:
            with self._lock:
                if self._closed:
                    return
                idle = not self._watched
            self._wake.wait(None if idle else self.interval)
            self._wake.clear()
            with self._lock:
                watched = list(self._watched.items())
            for user, entry in watched:
                self._poll(user, entry)

    def _poll(self, user: str | None, entry: list[Any]) -> None:
        store, seen = entry
        try:
            revision = store.revision()
        except Exception as exc:  # closed while being polled, a database away for a moment: try again next time
            if user not in self._failing:
                self._failing.add(user)
                logger.warning("could not ask the memory store whether it changed: %s", exc)
            return
        self._failing.discard(user)
        if revision != seen:
            with self._lock:
                entry[1] = revision
            self._report(user)


def _digests(store: MemoryBackend, targets: list[resources.Target]) -> list[bytes]:
    """The SHA-256 of each resource's JSON text (GONE for a memory that does not exist); blocking."""
    out = []
    for target in targets:
        try:
            text = resources.read(store, target)
        except resources.UnknownResourceError:
            out.append(GONE)
        else:
            out.append(hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest())
    return out


async def _tell(party: _Party, uri: str) -> None:
    try:
        await party.notify(uri)
    except Exception:  # a client gone mid-send: the others still hear of it
        logger.debug("could not send notifications/resources/updated", exc_info=True)
