"""examples/client.py as a person runs it: over stdio it leaves their store alone and prints no INFO logs; over HTTP
without a token, and with nothing listening, it ends in one line on stderr (issue 23, item 18). The client
configurations are JSON that names memserver."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CLIENT = ROOT / "examples" / "client.py"


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_MEMORY_", "MEMSERVER_"))}
    return env | {"HOME": str(tmp_path), "MCP_MEMORY_PATH": str(tmp_path / "my-real-store")} | extra


def _run(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(CLIENT)], env=env, capture_output=True, text=True, timeout=180)


def test_the_stdio_client_uses_a_temporary_store_and_logs_no_info(tmp_path: Path) -> None:
    done = _run(_env(tmp_path))
    assert done.returncode == 0, done.stderr
    assert "genmaicha" in done.stdout and "tools: remember, recall" in done.stdout
    assert "INFO" not in done.stderr, done.stderr
    assert not (tmp_path / "my-real-store").exists()  # the person's store (MCP_MEMORY_PATH) was never touched


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_over_http_without_a_token_the_client_says_so_in_one_line(tmp_path: Path) -> None:
    port = _free_port()
    server_env = _env(tmp_path, MEMSERVER_TOKENS="alice:" + "a" * 40)
    server = subprocess.Popen(
        [sys.executable, "-m", "memserver", "serve", "--http", "--port", str(port)],
        env=server_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stderr is not None
        for line in server.stderr:  # "memserver: serving MCP at http://..." once it listens (an event, not a sleep)
            if "serving MCP at" in line:
                break
        done = _run(_env(tmp_path, MEMSERVER_URL=f"http://127.0.0.1:{port}/mcp"))
    finally:
        server.terminate()
        server.wait(timeout=30)
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("client.py: error: "), done.stderr
    assert "MEMSERVER_TOKEN" in done.stderr


def test_with_nothing_listening_the_client_says_so_in_one_line(tmp_path: Path) -> None:
    done = _run(_env(tmp_path, MEMSERVER_URL=f"http://127.0.0.1:{_free_port()}/mcp"))
    assert done.returncode == 1
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("client.py: error: "), done.stderr


def test_every_client_configuration_runs_memserver_without_the_dev_group() -> None:
    configs = [*ROOT.glob("examples/**/*.json"), *ROOT.glob("examples/*/.*/*.json")]
    stdio = []
    for path in configs:
        text = json.dumps(json.loads(path.read_text()))  # valid JSON
        if '"command": "uv"' in text:
            stdio.append(path)
            assert '"run", "--no-dev", "--directory"' in text, path
    assert len(stdio) >= 5
