"""durable.py's syncs reach the kernel: the real fsync/fdatasync system calls, on the right descriptors, in order,
before the acknowledgement (issue 27, item 5). The recording file layers of the other durability tests log a sync
whenever the method is called, so they cannot see a sync that never reaches the kernel; strace can."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")

# atomic_write (file, then folder), fdatasync_fd on a second file, fsync_dir, then the acknowledgement on stdout
SCRIPT = """
import os, sys
from pathlib import Path
from memserver import durable
folder = Path(sys.argv[1])
durable.atomic_write(folder / "a.bin", b"x")
fd = os.open(folder / "b.bin", os.O_WRONLY | os.O_CREAT, 0o600)
os.write(fd, b"y")
durable.fdatasync_fd(fd)
os.close(fd)
durable.fsync_dir(folder)
os.write(1, b"ACK\\n")
"""
STRACE = ("strace", "-f", "-y", "-qq", "-e", "trace=fsync,fdatasync,write")
CALL = re.compile(r'^(?:\d+\s+)?(fsync|fdatasync|write)\((\d+)<([^>]*)>(?:, "ACK)?')


def test_syncs_reach_the_kernel_for_the_right_files_before_the_acknowledgement(tmp_path: Path) -> None:
    folder, trace = tmp_path / "store", tmp_path / "trace.txt"
    folder.mkdir()
    run = subprocess.run(
        [*STRACE, "-o", str(trace), sys.executable, "-c", SCRIPT, str(folder)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
    )
    if run.returncode != 0 and "ptrace" in run.stderr:
        pytest.skip(f"strace cannot trace here: {run.stderr.strip()[:200]}")
    assert run.returncode == 0 and run.stdout == "ACK\n", run.stderr[-2000:]
    calls = []
    for line in trace.read_text().splitlines():
        found = CALL.match(line)
        if found and (found.group(1) != "write" or found.group(2) == "1"):
            calls.append((found.group(1), Path(found.group(3)).name if found.group(1) != "write" else "stdout"))
    synced = calls
    assert len(synced) == 5, calls
    (f1, tmp), (f2, dir1), (f3, data), (f4, dir2), (ack, out) = synced
    assert f1 == "fsync" and tmp.startswith("a.bin.tmp-"), calls  # the new content, before its rename
    assert (f2, dir1) == ("fsync", "store"), calls  # the rename made durable
    assert (f3, data) == ("fdatasync", "b.bin"), calls
    assert (f4, dir2) == ("fsync", "store"), calls
    assert (ack, out) == ("write", "stdout"), calls  # only then the acknowledgement
