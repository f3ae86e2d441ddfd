"""A recall answered on the event loop (no worker-thread hop) when the store can answer at once, and from a
worker thread when it would wait: the same answer either way, and a wait never holds up the connection."""

from __future__ import annotations

import os
import select
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from memserver.local.journal import FileLock
from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.e2e.raw import encode, raw_stdio
from tests.support.fakes import FakeEmbedder

TIMEOUT = 60

FACTS = [
    "The staging database password rotates every Monday",
    "Standup moved to 10:30 because of the new team in Lisbon",
    "The user prefers green tea in the morning",
    "Marta's birthday is 17 April; she loves dark chocolate",
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class ThreadNoting(FakeEmbedder):
    """The fake embedder, noting the thread of every query embedding (the thread that ran the search)."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def embed_query(self, text: str) -> Any:
        self.threads.append(threading.current_thread().name)
        return super().embed_query(text)


@pytest.mark.anyio
async def test_a_recall_answers_the_same_on_the_event_loop_and_from_a_worker_thread(tmp_path: Path) -> None:
    """On a fresh store the recall runs on the event loop; after another store's write (catching up takes the
    file lock) it runs in a worker thread, and once caught up on the loop again: the same answer on both paths,
    explanations included (the write, in another namespace, changes the keyword statistics, not the ranking)."""
    embedder = ThreadNoting()
    with (
        MemoryStore(tmp_path, "c", embedder=embedder) as store,
        MemoryStore(tmp_path, "c", embedder=FakeEmbedder()) as other,
    ):
        store.add_many(FACTS)
        args = {"query": "when does the database password change?", "limit": 3, "explain": True}
        answers = []
        async with Client(build_server(lambda user: store), mode="legacy") as client:
            for write in (False, True, False):
                if write:
                    other.add("A note in another namespace", namespace="elsewhere")  # the journal grew
                with anyio.fail_after(TIMEOUT):
                    answers.append(await client.call_tool("recall", args))
    loop = threading.current_thread().name
    assert [name == loop for name in embedder.threads] == [True, False, True], embedder.threads
    first, threaded, at_once = answers
    assert not threaded.is_error and threaded.structured_content["results"]  # type: ignore[index]
    assert at_once.structured_content == threaded.structured_content
    assert at_once.content == threaded.content
    ranked = [[hit["id"] for hit in a.structured_content["results"]] for a in (first, threaded)]  # type: ignore[index]
    assert ranked[0] == ranked[1]


# The real local engine over memserver's own stdio transport, with the fake embedder, which writes a byte into the
# FIFO $EMBEDDING_FIFO each time a query is embedded: the test's signal that a recall has reached the store.
SIGNALLING_SERVER = """
import os
from memserver.transports import stdio
wire = stdio.claim_stdio()
from memserver.server import build_server
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder

class Signalling(FakeEmbedder):
    def embed_query(self, text):
        with open(os.environ["EMBEDDING_FIFO"], "wb") as fifo:
            fifo.write(b".")
        return super().embed_query(text)

def factory(user):
    return MemoryStore(os.environ["MCP_MEMORY_PATH"], "c", embedder=Signalling())

stdio.serve_stdio(build_server(factory), wire)
"""


def _recall(request_id: str, query: str) -> bytes:
    params = {"name": "recall", "arguments": {"query": query, "limit": 5}}
    return encode({"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params})


def _embedded(signals: int) -> None:
    """Wait (bounded) for the server's next query embedding."""
    readable, _, _ = select.select([signals], [], [], TIMEOUT)
    assert readable, "the server embedded no query"
    assert os.read(signals, 1) == b"."


def test_a_recall_waiting_for_another_processs_lock_does_not_hold_up_a_ping(tmp_path: Path) -> None:
    """While another process holds the store's write lock after writing, a recall on the same stdio connection
    waits for it (to see that write) in a worker thread: a ping sent meanwhile is answered first, and the recall
    answers, with the new memory, once the lock is released."""
    data = tmp_path / "data"
    fifo = tmp_path / "embedding"
    os.mkfifo(fifo)
    signals = os.open(fifo, os.O_RDWR | os.O_NONBLOCK)  # read end, also held open for writing: never EOF
    with MemoryStore(data, "c", embedder=FakeEmbedder()) as writer:
        writer.add_many(FACTS)
    command = [sys.executable, "-c", SIGNALLING_SERVER]
    with raw_stdio(data, tmp_path / "server.log", command=command, EMBEDDING_FIFO=str(fifo)) as server:
        server.initialize()
        first = server.call(
            {
                "jsonrpc": "2.0",
                "id": "r1",
                "method": "tools/call",
                "params": {"name": "recall", "arguments": {"query": "password"}},
            }
        )
        assert first["result"]["structuredContent"]["results"], first
        _embedded(signals)
        with MemoryStore(data, "c", embedder=FakeEmbedder()) as writer:  # another process's write...
            new = writer.add("The deploy key rotates on Fridays")
        lock = FileLock(data / "c" / "lock")
        try:
            with lock.hold(exclusive=True):  # ... and its lock, held: the server cannot catch up yet
                server.send(_recall("r2", "when does the deploy key rotate?"))
                _embedded(signals)  # r2 has its query vector; next it takes the lock to catch up, and waits
                server.send(encode({"jsonrpc": "2.0", "id": "p", "method": "ping"}))
                answer = server.next_answer()
                assert answer == {"jsonrpc": "2.0", "id": "p", "result": {}}, answer
            answer = server.next_answer()
        finally:
            lock.close()
            os.close(signals)
        assert answer["id"] == "r2", answer
        assert new.id in [hit["id"] for hit in answer["result"]["structuredContent"]["results"]]
