"""The layers of docs/architecture.md, checked on the source: imports only point down the tree.

A layer is a top-level name under memserver/: a subpackage (cli, transports, features, contract, local, postgres,
retrieval, embedding) or a module (server, loader, engines, errors, config, durable). Every import of memserver
anywhere in a layer's files (top level, inside functions, under TYPE_CHECKING) counts.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "memserver"

# layer -> the other layers it may import. Read top to bottom, it is the architecture: the client side (cli,
# server, features, transports) knows the storage contract and engines.open_backend, never an engine.
MAY_IMPORT: dict[str, set[str]] = {
    "__main__": {"cli"},
    "cli": {
        "server",
        "transports",
        "features",
        "ui",
        "loader",
        "engines",
        "importers",
        "contract",
        "embedding",
        "errors",
        "config",
    },
    "importers": {"contract", "errors"},
    "ui": {"features", "loader", "contract", "errors"},
    "server": {"features", "loader", "contract", "errors"},
    "transports": {"errors"},
    "features": {"loader", "contract", "errors"},
    "loader": {"engines", "embedding", "contract", "errors"},
    "engines": {"local", "postgres", "embedding", "contract", "config", "errors"},
    "local": {"contract", "retrieval", "embedding", "durable", "config", "errors"},
    "postgres": {"contract", "retrieval", "embedding", "errors"},
    "contract": {"errors"},
    "embedding": {"durable", "errors"},
    "retrieval": set(),
    "durable": {"errors"},
    "config": {"errors"},
    "errors": set(),
}
# The package's public names (memserver/__init__.py) are imported lazily from where they live.
PUBLIC = {"__init__": {"contract", "embedding", "engines", "errors", "local"}}


def _layer(path: Path) -> str:
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return parts[0]


def _imports(path: Path) -> set[str]:
    """The top-level names `path` imports, of memserver ("memserver.local.store" -> "local") and outside it."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = (
                [f"{node.module}.{alias.name}" for alias in node.names] if node.module == "memserver" else [node.module]
            )
        else:
            continue
        for name in names:
            parts = name.split(".")
            found.add(f"memserver.{parts[1]}" if parts[0] == "memserver" and len(parts) > 1 else parts[0])
    return found


def _sources() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


def test_every_layer_is_known() -> None:
    """A new top-level module or package must take its place in MAY_IMPORT (and in docs/architecture.md)."""
    layers = {_layer(path) for path in _sources()}
    assert layers - {"__init__"} == set(MAY_IMPORT)


@pytest.mark.parametrize("path", _sources(), ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_imports_only_point_down(path: Path) -> None:
    layer = _layer(path)
    allowed = PUBLIC.get(layer, MAY_IMPORT.get(layer, set())) | {layer, "__version__"}
    used = {name.removeprefix("memserver.") for name in _imports(path) if name.startswith("memserver.")}
    assert used <= allowed, f"{path.relative_to(PACKAGE)} ({layer}) imports {sorted(used - allowed)}"


def test_only_engines_names_an_engine() -> None:
    """Outside the engines themselves, only engines.py (and __init__.py, lazily, for MemoryStore) names local/ or
    postgres/."""
    naming = sorted(
        path.relative_to(PACKAGE).as_posix()
        for path in _sources()
        if _layer(path) not in {"local", "postgres"} and _imports(path) & {"memserver.local", "memserver.postgres"}
    )
    assert naming == ["__init__.py", "engines.py"]


@pytest.mark.parametrize("layer", ["local", "postgres", "retrieval", "contract", "embedding"])
def test_the_lower_layers_never_import_the_protocol(layer: str) -> None:
    """The engines, the retrieval pieces, the contract and the embedder know nothing of MCP."""
    for path in sorted((PACKAGE / layer).rglob("*.py")):
        assert not _imports(path) & {"mcp", "starlette", "uvicorn"}, path.relative_to(PACKAGE)


def test_transports_know_no_store_and_no_server() -> None:
    for path in sorted((PACKAGE / "transports").rglob("*.py")):
        used = {name for name in _imports(path) if name.startswith("memserver.")}
        assert used <= {"memserver.errors", "memserver.transports"}, (
            f"{path.relative_to(PACKAGE)} imports {sorted(used)}"
        )


def test_package_inits_are_empty_or_lazy() -> None:
    """A subpackage's __init__.py imports nothing of memserver at import time (but cli's, which is the entry point
    memserver.cli:main), so importing one layer never drags in another."""
    for init in sorted(PACKAGE.glob("*/__init__.py")):
        layer = init.parent.name
        tree = ast.parse(init.read_text(encoding="utf-8"))
        top_level = [node for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]
        modules = {node.module for node in top_level if isinstance(node, ast.ImportFrom)} - {"__future__"}
        modules |= {alias.name for node in top_level if isinstance(node, ast.Import) for alias in node.names}
        expected = {"memserver.cli.command"} if layer == "cli" else set()
        assert modules <= expected | {"typing"}, f"{layer}/__init__.py imports {sorted(modules)}"


def test_the_contract_imports_no_numpy() -> None:
    """Importing every contract module pulls in no numpy (the server's start-up imports the contract). The second
    run is the check's control: a module of local/, which needs numpy at import, makes the same probe see it."""
    modules = sorted(
        f"memserver.contract.{p.stem}" for p in (PACKAGE / "contract").glob("*.py") if p.stem != "__init__"
    )
    probe = "; print('numpy' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", f"import sys; import {', '.join(modules)}" + probe],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert out.stdout.strip() == "False"
    control = f"import sys; import {', '.join(modules)}, memserver.local.catalog" + probe
    out = subprocess.run([sys.executable, "-c", control], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.strip() == "True"
