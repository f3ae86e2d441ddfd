"""A disk that refuses writes (ENOSPC, EIO, a read-only folder), injected through the store's file layer.

Every write the store makes goes through `MemoryStore(..., files=...)`; tests/file_layers.FailingFiles fails the
calls a rule picks (a failing write first writes half its bytes, as a full disk does). Each public write (add,
add_many, delete, import_, checkpoint, compact) then raises StoreWriteError saying what the disk did, loses
nothing that was acknowledged, stores nothing half, and the store keeps working and reopens. Over MCP the same
is a tool result with isError saying the disk is full, and the server keeps serving.
"""

from __future__ import annotations

import errno
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from memserver.errors import MemserverError, StoreWriteError
from memserver.local.store import MemoryStore
from memserver.server import build_server
from tests.support.fakes import FakeEmbedder
from tests.support.file_layers import FailingFiles

FAULTS: dict[str, tuple[Callable[[str, str], bool], int, str]] = {
    "ENOSPC on a write": (lambda op, name: op in ("write", "pwrite"), errno.ENOSPC, "the disk is full"),
    "EIO on a sync": (lambda op, name: op in ("fsync", "fdatasync"), errno.EIO, "the disk reported an I/O error"),
}


def _filled(tmp_path: Path, files: FailingFiles) -> tuple[MemoryStore, dict[str, tuple[Any, ...]], str]:
    """A store of 30 memories (5 deleted, so compaction has work), its live memories, and one to delete."""
    files.armed = False
    store = MemoryStore(tmp_path, "c", embedder=FakeEmbedder(), files=files)
    memories = store.add_many([f"memory {i} about quartz and zebra {i * 7}" for i in range(30)])
    for m in memories[:5]:
        store.delete(m.id)
    live = {d["id"]: (d["content"], d["created_at"]) for d in store.export()}
    return store, live, memories[-1].id


WRITES: dict[str, Callable[[MemoryStore, str], object]] = {
    "add": lambda s, victim: s.add("written while the disk refuses"),
    "add_many": lambda s, victim: s.add_many(["written while the disk refuses", "and a second one"]),
    "delete": lambda s, victim: s.delete(victim),
    "import_": lambda s, victim: s.import_([{"content": "written while the disk refuses"}]),
    "checkpoint": lambda s, victim: s.checkpoint(),
    "compact": lambda s, victim: s.compact(),
}


@pytest.mark.parametrize("fault", list(FAULTS))
@pytest.mark.parametrize("write", list(WRITES))
def test_a_refused_write_is_a_clear_error_and_loses_nothing(tmp_path: Path, write: str, fault: str) -> None:
    rule, error, words = FAULTS[fault]
    files = FailingFiles(rule, error)
    store, live, victim = _filled(tmp_path, files)
    files.armed = True
    with pytest.raises(StoreWriteError) as raised:
        WRITES[write](store, victim)
    assert files.failures >= 1
    message = str(raised.value)
    assert isinstance(raised.value, MemserverError) and raised.value.errno == error
    assert words in message and str(tmp_path / "c") in message and "\n" not in message, message
    files.armed = False
    # nothing acknowledged is lost, nothing half-written appears, and the store keeps working
    after = {d["id"]: (d["content"], d["created_at"]) for d in store.export()}
    assert after == live, f"{write} failed, and the store changed"
    assert store.get(victim) is not None
    fresh = store.add("written once the disk is back")
    store.close()
    with MemoryStore(tmp_path, "c", embedder=FakeEmbedder()) as reopened:
        assert {d["id"] for d in reopened.export()} == {*live, fresh.id}
        some = next(iter(live))
        assert reopened.search(live[some][0], limit=1)[0].memory.id == some


@pytest.mark.parametrize(
    ("error", "words"),
    [(errno.EROFS, "the file system is read-only"), (errno.EACCES, "no permission to write there")],
)
def test_a_store_that_cannot_be_created_says_why_in_one_line(tmp_path: Path, error: int, words: str) -> None:
    """A read-only or foreign data folder: StoreWriteError naming the folder, not a PermissionError traceback."""
    files = FailingFiles(lambda op, name: op in ("mkdir", "create"), error)
    with pytest.raises(StoreWriteError) as raised:
        MemoryStore(tmp_path / "data", "c", embedder=FakeEmbedder(), files=files)
    message = str(raised.value)
    assert words in message and str(tmp_path / "data") in message and "\n" not in message, message
    assert "MCP_MEMORY_PATH" in message


# --- over MCP, in process ------------------------------------------------------------------------------------------


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_remember_on_a_full_disk_is_a_tool_error_and_the_server_keeps_serving(tmp_path: Path) -> None:
    """remember -> isError "... the disk is full ..."; recall still answers; once there is room, remember works."""
    files = FailingFiles(lambda op, name: op in ("write", "pwrite"), errno.ENOSPC)
    store, live, _ = _filled(tmp_path, files)
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        files.armed = True
        with anyio.fail_after(30):
            full = await client.call_tool("remember", {"content": "the user's flight is on Friday"})
        assert full.is_error
        text = full.content[0].text  # type: ignore[union-attr]
        assert "remember failed" in text and "the disk is full" in text and "Traceback" not in text, text
        with anyio.fail_after(30):
            found = await client.call_tool("recall", {"query": "quartz zebra"})
        assert not found.is_error and found.structured_content["results"]  # type: ignore[index]
        files.armed = False
        with anyio.fail_after(30):
            stored = await client.call_tool("remember", {"content": "the user's flight is on Friday"})
        assert not stored.is_error and json.loads(stored.content[0].text)["status"] == "stored"  # type: ignore[union-attr]
    with MemoryStore(tmp_path, "c", embedder=FakeEmbedder()) as reopened:  # (the server closed its store)
        assert {d["id"] for d in reopened.export()} == {*live, stored.structured_content["id"]}  # type: ignore[index]
