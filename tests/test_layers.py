"""The layering of docs/architecture.md, checked on the source: the MCP side knows the storage contract only."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "memserver"
# The modules that face clients (protocol, loading, CLI) and what they may import from memserver: the contract
# (backend, inputs, errors), engines.open_backend, and each other, never a storage engine or its parts.
FRONT = (
    "server",
    "chat",
    "versions",
    "cli_memories",
    "loader",
    "resources",
    "tools",
    "prompts",
    "completions",
    "client_log",
    "subscriptions",
    "forgetting",
    "tool_work",
    "cli",
    "wire",
    "stdio",
    "http",
    "http_guard",
    "http_sse",
    "http_limits",
    "tokens",
    "demo",
)
MAY_IMPORT = {
    "memserver",
    "__version__",
    "backend",
    "inputs",
    "errors",
    "engines",
    "config",
    "embedder",
    "model",
    "onnx_export",
    "query_cache",
    *FRONT,
}


def _memserver_imports(path: Path) -> set[str]:
    """The memserver modules `path` imports anywhere (top level, inside functions, under TYPE_CHECKING)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "memserver":
                found.add(parts[1] if len(parts) > 1 else "memserver")
    return found


@pytest.mark.parametrize("module", FRONT)
def test_the_client_side_imports_only_the_contract(module: str) -> None:
    """server, loader, resources, tools, cli, ... reach storage through backend.py and engines.py only."""
    imported = _memserver_imports(PACKAGE / f"{module}.py")
    assert imported <= MAY_IMPORT, f"{module}.py imports {sorted(imported - MAY_IMPORT)}"


def test_engines_is_the_only_module_that_names_the_local_store() -> None:
    """Outside the store's own parts, only engines.py imports memserver.store (and __init__.py, which names
    MemoryStore among the package's public names, lazily)."""
    parts = {"store", "compaction"}
    naming = sorted(
        p.stem for p in PACKAGE.glob("*.py") if p.stem not in parts and "store" in _memserver_imports(p) - {p.stem}
    )
    assert naming == ["__init__", "engines"]
