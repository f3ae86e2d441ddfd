"""The store, loaded in the background: `Stores` builds each user's backend in a thread on first need, so the
server answers `initialize` and `tools/list` while the model and the index load.

This module imports nothing heavy (no MCP SDK, numpy, onnxruntime or hnswlib). Starting the loading before the
SDK is imported was measured and rejected: the loader's imports and the store open contend with the SDK import for
the GIL and the two cores, delaying `initialize` by 0.2-1.2 s (benchmarks/README.md, finding 5).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from memserver.errors import MemserverError, NotAuthenticatedError

if TYPE_CHECKING:
    from memserver.backend import MemoryBackend

logger = logging.getLogger(__name__)
# MEMSERVER_TIMING=1 (benchmarks/recall_mcp.py): each tool result carries `_meta["memserver/timing"]` with the
# milliseconds spent embedding, in the tool's work (store call) and in the whole handler. Off by default.
TIMING = os.environ.get("MEMSERVER_TIMING", "") == "1"
_embedding = threading.local()  # per worker thread: `seconds` spent embedding inside `embedding_seconds()`

StoreFactory = Callable[[str | None], "MemoryBackend"]
"""Builds the store of one user (None: the single user of stdio or of HTTP without tokens). Called in a thread."""


@contextlib.contextmanager
def embedding_seconds() -> Iterator[Callable[[], float]]:
    """With MEMSERVER_TIMING=1, count the seconds this thread spends embedding inside the block; the yielded
    function returns the count so far (always 0 without TIMING, whose embedder is not timed)."""
    _embedding.seconds = 0.0
    yield lambda: float(_embedding.seconds)


class Stores:
    """The stores this server serves, one per user, each built once in a background thread on first need.

    `start()` begins building the default store (or, with per-user stores, warms the shared model) without
    waiting; `get(user)` awaits the user's store without blocking the event loop.
    """

    def __init__(self, factory: StoreFactory, *, per_user: bool = False) -> None:
        self.factory = factory
        self.per_user = per_user
        self._futures: dict[str | None, Future[MemoryBackend]] = {}
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start loading in the background; returns at once. Calling it again does not start a second load."""
        if self.per_user:
            warm = getattr(self.factory, "warm", None)
            if warm is not None:
                threading.Thread(target=_log_failure(warm), name="memserver-warm", daemon=True).start()
        else:
            self._future(None)

    async def get(self, user: str | None) -> MemoryBackend:
        """The store of `user`, waiting (in a worker thread) until it is built. Re-raises a failed build.

        Raises:
            NotAuthenticatedError: a per-user server and no user (it fails closed: never a shared store).
        """
        if self.per_user and user is None:
            raise NotAuthenticatedError("Authentication required")
        future = self._future(user if self.per_user else None)
        if not future.done():
            await anyio.to_thread.run_sync(future.exception, abandon_on_cancel=True)
        return future.result()

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

    def embedder(self) -> Any:
        with self._lock:
            if self._embedder is None:
                from memserver.embedder import Embedder

                self._embedder = _TimedEmbedder(Embedder()) if TIMING else Embedder()
            return self._embedder

    def warm(self) -> None:
        self.embedder().load()

    def __call__(self, user: str | None) -> MemoryBackend:
        from memserver.engines import open_backend

        embedder = self.embedder()
        # The first recall should not pay for the model either: it loads in a second thread while the store opens
        # (onnxruntime's session set-up and the index load overlap: 100k memories, ~0.1 s sooner ready).
        model: Future[None] = Future()
        threading.Thread(target=_settle, args=(model, embedder.load), name="memserver-model", daemon=True).start()
        store = open_backend(self.data_dir, self.collection, embedder=embedder, database=self.database, user=user)
        try:
            model.result()  # re-raises a model that could not be loaded
        except BaseException:
            store.close()
            raise
        return store


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
