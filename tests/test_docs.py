"""The README cannot drift from the code: every command, tool, resource and setting is documented."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memserver.cli.command import build_parser
from memserver.features import prompts, resources, tools

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
_PLATFORM_VARIABLES = {"LOCALAPPDATA", "XDG_CACHE_HOME", "XDG_DATA_HOME"}


def _commands() -> list[str]:
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    return sorted(subparsers.choices)


@pytest.mark.parametrize("command", _commands())
def test_every_cli_command_is_in_the_readme_and_has_help(command: str) -> None:
    """Each sub-command appears in the README and has a description for --help."""
    assert re.search(rf"memserver[^\n]*\b{command}\b", README), f"`memserver {command}` is not in README.md"
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    assert subparsers.choices[command].description, f"`memserver {command} --help` has no description"


@pytest.mark.parametrize("tool", [t.name for t in tools.TOOLS])
def test_every_tool_is_in_the_readme(tool: str) -> None:
    """Each tool of the contract has a row in the README's tool table."""
    assert f"| `{tool}` |" in README


@pytest.mark.parametrize("uri", [r.uri for r in resources.RESOURCES] + [t.uri_template for t in resources.TEMPLATES])
def test_every_resource_is_in_the_readme(uri: str) -> None:
    """Each resource and template appears in the README."""
    assert f"`{uri}`" in README


def test_every_environment_variable_read_by_memserver_is_in_the_readme() -> None:
    """A setting the code reads but the README never mentions is a setting nobody can find."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "memserver").glob("*.py"))
    names = set(re.findall(r"environ(?:\.get)?\(\s*\"([A-Z][A-Z0-9_]+)\"", source)) - _PLATFORM_VARIABLES
    assert names, "no environment variables found: the pattern above is out of date"
    missing = sorted(name for name in names if f"`{name}`" not in README)
    assert not missing, f"undocumented environment variables: {missing}"


@pytest.mark.parametrize("prompt", [p.name for p in prompts.PROMPTS])
def test_every_prompt_is_in_the_readme(prompt: str) -> None:
    """Each prompt has a row in the README's prompt table."""
    assert f"| `{prompt}` |" in README


@pytest.fixture(scope="module")
def tour() -> dict[str, str]:
    """The Protocol tour's JSON, generated from a real session (real store and model) by docs/protocol_tour.py."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("protocol_tour", ROOT / "docs" / "protocol_tour.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    blocks: dict[str, str] = module.blocks()
    return blocks


def test_the_protocol_tour_shows_what_the_server_sends(tour: dict[str, str]) -> None:
    """Every JSON block of the README's Protocol tour is what a session produces today, and none is missing or
    left over (`uv run python docs/protocol_tour.py --write` rewrites them)."""
    marked = re.findall(r"^<!-- tour: (.+?) -->\n```jsonc\n(.*?)^```$", README, re.DOTALL | re.MULTILINE)
    names = [name for name, _ in marked]  # in the README's order (server.py's), not the session's
    assert sorted(names) == sorted(tour), "the tour's blocks and the README's markers differ"
    stale = [name for name, text in marked if text.rstrip("\n") != tour[name]]
    assert not stale, (
        f"README.md's Protocol tour is out of date in {stale}: run uv run python docs/protocol_tour.py --write"
    )


def test_every_serve_flag_is_in_the_readme() -> None:
    """Each option of `memserver serve` (the HTTP limits included) is documented."""
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    flags = [flag for action in subparsers.choices["serve"]._actions for flag in action.option_strings]
    missing = sorted(flag for flag in flags if flag.startswith("--") and flag not in ("--help",) and flag not in README)
    assert not missing, f"undocumented serve flags: {missing}"
