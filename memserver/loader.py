"""The store, loaded in the background: `Stores` builds each user's backend in a thread on first need, so the
server answers `initialize` and `tools/list` while the model and the index load.

This module imports nothing heavy (no MCP SDK, numpy, onnxruntime or hnswlib). Starting the loading before the
SDK is imported was measured and rejected: the loader's imports and the store open contend with the SDK import for
the GIL and the two cores, delaying `initialize` by 0.2-1.2 s (benchmarks/lab/research.md, finding 5).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from concurrent.futures import Future
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import anyio

from memserver.embedding.query_cache import QueryCache, entries_from_env
from memserver.errors import MemserverError, NotAuthenticatedError

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend

logger = logging.getLogger(__name__)
# MEMSERVER_TIMING=1 (benchmarks/recall_mcp.py): each tool result carries `_meta["memserver/timing"]` with the
# milliseconds spent embedding, in the tool's work (store call) and in the whole handler. Off by default.
TIMING = os.environ.get("MEMSERVER_TIMING", "") == "1"
_embedding = threading.local()  # per worker thread: `seconds` spent embedding inside `embedding_seconds()`

StoreFactory = Callable[[str | None], "MemoryBackend"]
"""Builds the store of one user (None: the single user of stdio or of HTTP without tokens). Called in a thread."""

OPENING = "opening the memory store"  # what Stores says of any build; a StagedStoreFactory says more


@runtime_checkable
class StagedStoreFactory(Protocol):
    """A StoreFactory that says what it is waiting on. `Stores` sets `report_stage` before the first build; the
    factory calls it (from any thread) with the user and a phrase such as "loading the embedding model"."""

    report_stage: Callable[[str | None, str], None]

    def __call__(self, user: str | None) -> MemoryBackend: ...


@contextlib.contextmanager
def embedding_seconds() -> Iterator[Callable[[], float]]:
    """With MEMSERVER_TIMING=1, count the seconds this thread spends embedding inside the block; the yielded
    function returns the count so far (always 0 without TIMING, whose embedder is not timed)."""
    _embedding.seconds = 0.0
    yield lambda: float(_embedding.seconds)


class Stores:
    """The stores this server serves, one per user, each built once in a background thread on first need.

    `start()` begins building the default store (or, with per-user stores, warms the shared model), and runs
    `warm_up` (what else a first request would pay for: the server's argument validators) in a thread, without
    waiting; `get(user)` awaits the user's store without blocking the event loop, and passes on what the build is
    doing meanwhile (`stage`) to a `progress` callback: the server turns that into notifications/progress.
    """

    def __init__(
        self, factory: StoreFactory, *, per_user: bool = False, warm_up: Callable[[], None] | None = None
    ) -> None:
        self.factory = factory
        self.per_user = per_user
        self._warm_up = warm_up
        self._futures: dict[str | None, Future[MemoryBackend]] = {}
        self._lock = threading.Lock()
        self._stages: dict[str | None, str] = {}  # what each build in progress is doing
        self._changed = threading.Condition()  # notified when a stage changes or a build ends
        if isinstance(factory, StagedStoreFactory):
            factory.report_stage = self.report_stage

    def start(self) -> None:
        """Start loading in the background; returns at once. Calling it again does not start a second load."""
        with self._lock:
            warm_up, self._warm_up = self._warm_up, None
        if warm_up is not None:
            threading.Thread(target=_log_failure(warm_up), name="memserver-warm-up", daemon=True).start()
        if self.per_user:
            warm = getattr(self.factory, "warm", None)
            if warm is not None:
                threading.Thread(target=_log_failure(warm), name="memserver-warm", daemon=True).start()
        else:
            self._future(None)

    async def get(self, user: str | None, progress: Callable[[str], Awaitable[None]] | None = None) -> MemoryBackend:
        """The store of `user`, waiting (in a worker thread) until it is built. Re-raises a failed build.

        While it waits, `progress(stage)` is awaited each time the build says it is doing something new.

        Raises:
            NotAuthenticatedError: a per-user server and no user (it fails closed: never a shared store).
        """
        if self.per_user and user is None:
            raise NotAuthenticatedError("Authentication required")
        key = user if self.per_user else None
        future = self._future(key)
        told: str | None = None
        while not future.done():
            stage = self.stage(key)
            if progress is not None and stage is not None and stage != told:
                told = stage
                await progress(stage)
            # Cancelling the caller abandons this wait, never the build: the next call finds the store loading on.
            await anyio.to_thread.run_sync(self._wait_for_change, key, future, stage, abandon_on_cancel=True)
        return future.result()

    def stage(self, user: str | None) -> str | None:
        """What the build of `user`'s store is doing now (e.g. "loading the embedding model"); None when idle."""
        with self._changed:
            return self._stages.get(user)

    def report_stage(self, user: str | None, stage: str) -> None:
        """Record what the build of `user`'s store is doing now; callable from any thread."""
        with self._changed:
            if user in self._stages:  # a report that comes after the build ended is stale
                self._stages[user] = stage
                self._changed.notify_all()

    def _wait_for_change(self, key: str | None, future: Future[MemoryBackend], stage: str | None) -> None:
        with self._changed:
            self._changed.wait_for(lambda: future.done() or self._stages.get(key) != stage)

    def close(self) -> None:
        with self._lock:
            futures, self._futures = list(self._futures.values()), {}
        for future in futures:
            if future.done() and future.exception() is None:
                try:
                    future.result().close()
                except Exception:
                    logger.exception("closing a store failed")

    def _future(self, user: str | None) -> Future[MemoryBackend]:
        with self._lock:
            future = self._futures.get(user)
            if future is None or (future.done() and future.exception() is not None):  # a failed build is retried
                future = self._futures[user] = Future()
                with self._changed:
                    self._stages[user] = OPENING
                threading.Thread(
                    target=self._build, args=(user, future), name=f"memserver-store-{user or 'default'}", daemon=True
                ).start()
            return future

    def _build(self, user: str | None, future: Future[MemoryBackend]) -> None:
        try:
            future.set_result(self.factory(user))
            logger.info("store ready%s", f" for user {user}" if user else "")
        except BaseException as exc:
            logger.error("the memory store could not be opened: %s", exc, exc_info=not isinstance(exc, MemserverError))
            future.set_exception(exc)
        finally:
            with self._changed:
                self._stages.pop(user, None)
                self._changed.notify_all()


def _settle(future: Future[None], fn: Callable[[], Any]) -> None:
    try:
        fn()
        future.set_result(None)
    except BaseException as exc:
        future.set_exception(exc)


def _log_failure(fn: Callable[[], Any]) -> Callable[[], None]:
    def run() -> None:
        try:
            fn()
        except Exception:
            logger.exception("loading the model in the background failed; the first call will retry")

    return run


class DefaultStoreFactory:
    """A backend per user (engines.open_backend), all sharing one Embedder (the model is loaded once per process).

    User None gets the store at `data_dir` (MCP_MEMORY_PATH or the platform default) and the configured
    collection. A named user's memories live under `<data_dir>/users/<user>/`, a separate folder tree, so no
    collection name can ever reach another user's memories.
    """

    def __init__(
        self, data_dir: str | Path | None = None, collection: str | None = None, database: str | None = None
    ) -> None:
        self.data_dir = Path(data_dir).absolute() if data_dir is not None else None
        self.collection = collection
        self.database = database  # a postgresql:// URL: the memories live there (engines.open_backend)
        self._embedder: Any = None
        self._lock = threading.Lock()
        # One query cache per user, not one in the shared Embedder: a shared one would let one user tell, by the
        # speed of an answer, whether another recently asked the very same question. Read here, so a bad setting
        # fails at start rather than at the first recall.
        self.query_cache_entries = entries_from_env()
        self.report_stage: Callable[[str | None, str], None] = _ignore_stage  # set by Stores

    def embedder(self) -> Any:
        with self._lock:
            if self._embedder is None:
                from memserver.embedding.embedder import Embedder

                shared = Embedder(query_cache=0)  # each user's backend gets its own cache (__call__)
                self._embedder = _TimedEmbedder(shared) if TIMING else shared
            return self._embedder

    def warm(self) -> None:
        self.embedder().load()

    def __call__(self, user: str | None) -> MemoryBackend:
        from memserver.engines import open_backend

        embedder = _CachedQueries(self.embedder(), QueryCache(self.query_cache_entries))
        stages = _TwoStages(partial(self.report_stage, user))
        # The first recall should not pay for the model either: it loads in a second thread while the store opens
        # (onnxruntime's session set-up and the index load overlap: 100k memories, ~0.1 s sooner ready).
        model: Future[None] = Future()
        model.add_done_callback(lambda f: None if f.exception() else stages.done("model"))
        warm = partial(_load_and_warm, self.embedder())
        threading.Thread(target=_settle, args=(model, warm), name="memserver-model", daemon=True).start()
        store = open_backend(self.data_dir, self.collection, embedder=embedder, database=self.database, user=user)
        stages.done("store")
        try:
            model.result()  # re-raises a model that could not be loaded
        except BaseException:
            store.close()
            raise
        return store


def _load_and_warm(embedder: Any) -> None:
    """Load the model and run it once: onnxruntime's first run sets up its memory and kernels (hundreds of ms),
    which the first recall would otherwise pay (issue 26, item 5). Not through a user's query cache."""
    import numpy  # (the embedder's own dependency)

    embedder.load()
    embedder.embed(["warm-up"])
    numpy.unique(numpy.zeros(1))  # the hybrid fusion's first np.unique imports numpy.ma: ~50 ms


def _ignore_stage(user: str | None, stage: str) -> None:
    pass


class _TwoStages:
    """The stage of a build that loads the model and opens the store at once: says which one is still going."""

    def __init__(self, report: Callable[[str], None]) -> None:
        self._report = report
        self._done: set[str] = set()
        self._lock = threading.Lock()
        report("loading the embedding model and opening the memory store")

    def done(self, part: str) -> None:
        with self._lock:
            self._done.add(part)
            if self._done == {"model"}:
                self._report("opening the memory store (the embedding model is loaded)")
            elif self._done == {"store"}:
                self._report("loading the embedding model (the memory store is open)")


class _CachedQueries:
    """A user's view of the shared Embedder: the same model, with that user's own LRU of recent query vectors."""

    def __init__(self, inner: Any, cache: QueryCache) -> None:
        self._inner = inner
        self.query_cache = cache

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def embed_query(self, text: str) -> Any:
        cached = self.query_cache.get(text)
        if cached is not None:
            return cached
        vector = self._inner.embed_query(text)
        self.query_cache.put(text, vector)
        return vector


class _TimedEmbedder:
    """With MEMSERVER_TIMING=1: the Embedder, adding the time spent in each embed call to the thread's tally."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    def embed(self, texts: Any) -> Any:
        started = time.perf_counter()
        try:
            return self._inner.embed(texts)
        finally:
            _embedding.seconds = getattr(_embedding, "seconds", 0.0) + time.perf_counter() - started

    def embed_query(self, text: str) -> Any:
        started = time.perf_counter()
        try:
            return self._inner.embed_query(text)
        finally:
            _embedding.seconds = getattr(_embedding, "seconds", 0.0) + time.perf_counter() - started
