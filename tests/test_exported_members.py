"""What memserver offers from outside, pinned: the names `from memserver import ...` gives, and the command's entry
point. Internal modules move; these do not."""

from __future__ import annotations

import importlib
import inspect
from pathlib import Path

import pytest
import tomllib

import memserver

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
EXPORTED = [
    "Embedder",
    "Hit",
    "Memory",
    "MemoryBackend",
    "MemoryFilter",
    "MemoryStore",
    "MemserverError",
    "Page",
    "Selection",
    "__version__",
    "open_backend",
]


def test_the_package_exports_exactly_its_public_names() -> None:
    assert sorted(memserver.__all__) == EXPORTED


def test_every_exported_name_resolves_to_what_it_says() -> None:
    for name in EXPORTED:
        value = getattr(memserver, name)
        if name == "__version__":
            assert isinstance(value, str) and value
        elif name == "open_backend":
            assert callable(value)
        elif name == "MemserverError":
            assert issubclass(value, Exception)
        else:
            assert inspect.isclass(value), name


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        memserver.NoSuchThing  # noqa: B018
    except AttributeError as error:
        assert "NoSuchThing" in str(error)
    else:
        raise AssertionError("memserver.NoSuchThing resolved")


def test_the_memserver_command_is_memserver_cli_main(capsys: pytest.CaptureFixture[str]) -> None:
    scripts = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["project"]["scripts"]
    assert scripts == {"memserver": "memserver.cli:main"}
    module, _, attribute = scripts["memserver"].partition(":")
    main = getattr(importlib.import_module(module), attribute)
    with pytest.raises(SystemExit) as stop:
        main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"memserver {memserver.__version__}"
