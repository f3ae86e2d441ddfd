"""`memserver serve` answers `initialize` and `tools/list` without importing what only a recall or another command
needs: the model runtime, the index, the PostgreSQL engine, the importers, the browser, the other CLI commands,
the features of the other requests (issue 26, item 4). Seen from outside: the server runs under `python -X
importtime`, whose report on stderr names every module the process imported; stdin ends after the two requests,
so the store never starts loading."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REQUESTS = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    },
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}},
]
# Packages, and memserver's modules, that `initialize` and `tools/list` do not need (the SDK imports starlette;
# jsonschema, for the tools' arguments, is imported by the warm-up that the handshake's end starts).
NOT_NEEDED = ("numpy", "hnswlib", "onnxruntime", "tokenizers", "psycopg", "httpx", "jwt", "jsonschema")
NOT_NEEDED_OURS = ("memserver.local", "memserver.postgres", "memserver.importers", "memserver.ui")
OTHER_COMMANDS = ("memserver.cli.admin", "memserver.cli.editing", "memserver.cli.memories", "memserver.cli.care")
# The features only other requests use (server.py imports them in the handlers), and the contract they bring.
FEATURES_LATER = ("chat", "consolidating", "forgetting", "prompts", "completions", "tool_work")
CONTRACT_LATER = ("backend", "consolidation", "overview")
LATER_FEATURES = (
    *(f"memserver.features.{name}" for name in FEATURES_LATER),
    *(f"memserver.contract.{name}" for name in CONTRACT_LATER),
)


def test_serve_answers_initialize_and_tools_list_without_the_heavy_modules(tmp_path: Path) -> None:
    env = {**os.environ, "MEMSERVER_LOG_LEVEL": "WARNING"}
    stdin = "".join(json.dumps(request) + "\n" for request in REQUESTS)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "memserver", "serve", "--data-dir", str(tmp_path)],
        input=stdin,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
        timeout=120,
    )
    answers = {answer["id"]: answer for answer in map(json.loads, done.stdout.splitlines())}
    assert answers[1]["result"]["serverInfo"]["name"] == "memserver"
    assert "recall" in {tool["name"] for tool in answers[2]["result"]["tools"]}
    imported = {line.rsplit("|", 1)[1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert "memserver.server" in imported  # the report is there, and names our modules
    top = {name.split(".")[0] for name in imported}
    assert sorted(top & set(NOT_NEEDED)) == []
    ours = {name for name in imported if name.startswith(NOT_NEEDED_OURS + OTHER_COMMANDS + LATER_FEATURES)}
    assert sorted(ours) == []
