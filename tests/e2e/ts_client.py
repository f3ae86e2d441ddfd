"""The TypeScript SDK's MCP client (tests/e2e/ts/client.mjs), a second client next to the Python SDK's.

On first use its pinned dependencies (tests/e2e/ts/package.json and package-lock.json) are installed with `npm ci`
into a cache directory keyed by the lockfile's hash (MEMSERVER_TEST_CACHE, default ~/.cache/memserver-tests), so a
fresh machine needs only Node.js >= 18 with npm and the npm registry; later runs reuse the install.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent / "ts"
FILES = ("package.json", "package-lock.json", "client.mjs")
MIN_NODE = 18
INSTALL_TIMEOUT = 600


def cache_dir() -> Path:
    lock = (HERE / "package-lock.json").read_bytes()
    base = Path(os.environ.get("MEMSERVER_TEST_CACHE") or Path.home() / ".cache" / "memserver-tests")
    return base / f"ts-client-{hashlib.sha256(lock).hexdigest()[:12]}"


def install() -> Path:
    """The client script, ready to run with `node` (installing its dependencies first if needed)."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(
            f"these tests drive memserver through the TypeScript MCP SDK and need Node.js >= {MIN_NODE} with npm on "
            "PATH (Debian/Ubuntu: apt-get install nodejs npm; .ci/run installs them)",
            pytrace=False,
        )
    version = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    major = re.match(r"v(\d+)", version)
    if major is None or int(major.group(1)) < MIN_NODE:
        pytest.fail(f"the TypeScript MCP SDK needs Node.js >= {MIN_NODE}; this machine has {version!r}", pytrace=False)
    target = cache_dir()
    target.mkdir(parents=True, exist_ok=True)
    with (target / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another test run may be installing into the same directory
        if not (target / "node_modules" / ".package-lock.json").exists():
            for name in FILES:
                shutil.copy(HERE / name, target / name)
            done = subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--ignore-scripts"],
                cwd=target,
                capture_output=True,
                text=True,
                timeout=INSTALL_TIMEOUT,
            )
            if done.returncode != 0:
                shutil.rmtree(target / "node_modules", ignore_errors=True)
                pytest.fail(
                    f"npm ci of the TypeScript MCP SDK failed in {target}:\n{done.stderr[-3000:]}", pytrace=False
                )
        # The checkout's version, named by its content: checkouts that share this cache never run each other's.
        script = (HERE / "client.mjs").read_bytes()
        mine = target / f"client-{hashlib.sha256(script).hexdigest()[:12]}.mjs"
        if not mine.exists():
            partial = mine.with_suffix(f".{os.getpid()}.tmp")
            partial.write_bytes(script)
            partial.replace(mine)
    return mine


def run(script: Path, config: dict[str, Any], timeout: float = 180) -> dict[str, Any]:
    """Run one scenario of client.mjs and return what it saw."""
    done = subprocess.run(
        ["node", str(script), json.dumps(config)], capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        raise AssertionError(f"the TypeScript client failed ({done.returncode}):\n{done.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
