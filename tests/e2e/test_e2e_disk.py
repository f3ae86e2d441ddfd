"""A real full disk and a real read-only data directory, under a real `memserver serve` (stdio) and the CLI.

Both are small tmpfs mounts (the test needs root and mount(2); it is skipped where the kernel refuses). A full
disk: remember is an isError result that says the disk is full, recall keeps answering, and once there is room
again remember works and every acknowledged memory survives a restart. A read-only data directory: the server
still answers initialize, the first tool call says the directory is read-only, the start-up log says it in one
line without a traceback, and `memserver stats` exits 1 with one line.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from anyio.from_thread import BlockingPortal

from tests.e2e.servers import SERVE, server_env, stdio_session

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform != "linux", reason="tmpfs mounts")]


@contextmanager
def _tmpfs(target: Path, *options: str) -> Iterator[Path]:
    """A tmpfs mounted at `target` with `options`, unmounted afterwards; skips the test where mount is refused."""
    target.mkdir(parents=True, exist_ok=True)
    mounted = shutil.which("mount") is not None and os.geteuid() == 0
    if mounted:
        command = ["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(target)]
        mounted = subprocess.run(command, capture_output=True, timeout=30).returncode == 0
    if not mounted:
        pytest.skip("mounting a tmpfs needs root and a kernel that allows it")
    try:
        yield target
    finally:
        subprocess.run(["umount", "-l", str(target)], capture_output=True, timeout=30)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 24 MiB tmpfs: a real file system that fills up."""
    with _tmpfs(tmp_path / "disk", "size=24m", "mode=0700") as disk:
        yield disk


def _fill(disk: Path) -> Path:
    """Write a file until the disk is full; returns it (remove it to make room again)."""
    filler = disk / "filler"
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        for size in (1 << 16, 1 << 12, 1):
            try:
                while True:
                    os.write(fd, bytes(size))
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
    finally:
        os.close(fd)
    return filler


def test_remember_on_a_full_disk_over_stdio(portal: BlockingPortal, small_disk: Path, tmp_path: Path) -> None:
    data = small_disk / "data"
    log = tmp_path / "server.log"
    with stdio_session(portal, data, log) as live:
        kept = [live.call_tool("remember", {"content": f"fact {i} about the quartz project"}) for i in range(5)]
        assert not any(r.is_error for r in kept)
        filler = _fill(small_disk)
        full = live.call_tool("remember", {"content": "the user's flight leaves on Friday " + "x" * 5000})
        assert full.is_error
        text = full.content[0].text
        assert "remember failed" in text and "the disk is full" in text and "Traceback" not in text, text
        found = live.call_tool("recall", {"query": "quartz project", "limit": 10})
        assert not found.is_error and len(found.structured_content["results"]) == 5
        filler.unlink()
        stored = live.call_tool("remember", {"content": "the user's flight leaves on Friday"})
        assert not stored.is_error, stored.content[0].text
    with stdio_session(portal, data, log) as live:
        found = live.call_tool("recall", {"query": "quartz project flight Friday", "limit": 10})
        contents = {r["content"] for r in found.structured_content["results"]}
        assert contents >= {f"fact {i} about the quartz project" for i in range(5)} | {
            "the user's flight leaves on Friday"
        }
    assert "Traceback" not in log.read_text()


@pytest.fixture
def read_only_disk(tmp_path: Path) -> Iterator[Path]:
    with _tmpfs(tmp_path / "ro", "size=1m", "ro") as disk:
        yield disk


def test_a_read_only_data_directory_is_said_in_one_line(
    portal: BlockingPortal, read_only_disk: Path, tmp_path: Path
) -> None:
    data = read_only_disk / f"data-{uuid.uuid4().hex[:6]}"
    log = tmp_path / "server.log"
    with stdio_session(portal, data, log) as live:  # initialize is answered: the store opens in the background
        result = live.call_tool("remember", {"content": "anything"})
        assert result.is_error
        text = result.content[0].text
        assert "read-only" in text and str(data) in text and "MCP_MEMORY_PATH" in text, text
        again = live.call_tool("recall", {"query": "anything"})
        assert again.is_error and "read-only" in again.content[0].text
    logged = log.read_text()
    assert "Traceback" not in logged
    assert [line for line in logged.splitlines() if "read-only" in line], logged
    cli = subprocess.run([*SERVE[:-1], "stats"], env=server_env(data), capture_output=True, text=True, timeout=120)
    assert cli.returncode == 1
    lines = cli.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memserver: error:") and "read-only" in lines[0], cli.stderr
