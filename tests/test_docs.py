"""The docs cannot drift from the code: every command, tool, resource, setting and module is documented.

The README is for people; the rest lives in docs/. A check that asks "is it documented" reads both."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memserver.cli.command import build_parser
from memserver.features import prompts, resources, tools

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")
PAGES = sorted((ROOT / "docs").glob("*.md"))
DOCS = "\n".join([README, *(page.read_text(encoding="utf-8") for page in PAGES)])
ARCHITECTURE = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
PROTOCOL = (ROOT / "docs" / "protocol.md").read_text(encoding="utf-8")
_PLATFORM_VARIABLES = {"LOCALAPPDATA", "XDG_CACHE_HOME", "XDG_DATA_HOME"}


def _commands() -> list[str]:
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    return sorted(subparsers.choices)


@pytest.mark.parametrize("command", _commands())
def test_every_cli_command_is_documented_and_has_help(command: str) -> None:
    """Each sub-command appears in the README or docs/ and has a description for --help."""
    assert re.search(rf"memserver[^\n]*\b{command}\b", DOCS), f"`memserver {command}` is in neither README.md nor docs/"
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    assert subparsers.choices[command].description, f"`memserver {command} --help` has no description"


@pytest.mark.parametrize("command", _commands())
def test_every_cli_command_is_in_the_readme(command: str) -> None:
    """The README's CLI in brief names every sub-command."""
    assert re.search(rf"memserver[^\n]*\b{command}\b", README), f"`memserver {command}` is not in README.md"


@pytest.mark.parametrize("tool", [t.name for t in tools.TOOLS])
def test_every_tool_is_in_the_readme_and_the_tools_page(tool: str) -> None:
    """Each tool of the contract has a row in the README's tools in brief and in docs/tools.md's table."""
    assert f"| `{tool}` |" in README
    assert f"| `{tool}` |" in (ROOT / "docs" / "tools.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("uri", [r.uri for r in resources.RESOURCES] + [t.uri_template for t in resources.TEMPLATES])
def test_every_resource_is_documented(uri: str) -> None:
    """Each resource and template appears in the docs."""
    assert f"`{uri}`" in DOCS


def test_every_environment_variable_read_by_memserver_is_documented() -> None:
    """A setting the code reads but the docs never mention is a setting nobody can find."""
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "memserver").rglob("*.py"))
    names = set(re.findall(r"environ(?:\.get)?\(\s*\"([A-Z][A-Z0-9_]+)\"", source)) - _PLATFORM_VARIABLES
    assert names, "no environment variables found: the pattern above is out of date"
    missing = sorted(name for name in names if f"`{name}`" not in DOCS)
    assert not missing, f"undocumented environment variables: {missing}"


@pytest.mark.parametrize("prompt", [p.name for p in prompts.PROMPTS])
def test_every_prompt_is_documented(prompt: str) -> None:
    """Each prompt has a row in a prompt table."""
    assert f"| `{prompt}` |" in DOCS


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
    """Every JSON block of docs/protocol.md is what a session produces today, and none is missing or left over
    (`uv run python docs/protocol_tour.py --write` rewrites them)."""
    marked = re.findall(r"^<!-- tour: (.+?) -->\n```jsonc\n(.*?)^```$", PROTOCOL, re.DOTALL | re.MULTILINE)
    names = [name for name, _ in marked]  # in the page's order (server.py's), not the session's
    assert sorted(names) == sorted(tour), "the tour's blocks and docs/protocol.md's markers differ"
    stale = [name for name, text in marked if text.rstrip("\n") != tour[name]]
    assert not stale, (
        f"docs/protocol.md's Protocol tour is out of date in {stale}: run uv run python docs/protocol_tour.py --write"
    )


def test_every_serve_flag_is_documented() -> None:
    """Each option of `memserver serve` (the HTTP limits included) is documented."""
    subparsers = next(a for a in build_parser()._actions if a.dest == "command")
    flags = [flag for action in subparsers.choices["serve"]._actions for flag in action.option_strings]
    missing = sorted(flag for flag in flags if flag.startswith("--") and flag not in ("--help",) and flag not in DOCS)
    assert not missing, f"undocumented serve flags: {missing}"


def _modules() -> list[str]:
    """Every module of the package as it stands today (`__init__.py` files aside), relative to memserver/."""
    package = ROOT / "memserver"
    return sorted(path.relative_to(package).as_posix() for path in package.rglob("*.py") if path.name != "__init__.py")


def _tree(text: str) -> set[str]:
    """The modules docs/architecture.md's tree names ("  name.py  job" at the top, "    name.py  job" under a
    "  folder/" line), relative to memserver/."""
    block = re.search(r"^```\nmemserver/\n(.*?)^```$", text, re.DOTALL | re.MULTILINE)
    assert block, "docs/architecture.md has no tree (a code block starting with memserver/)"
    named: set[str] = set()
    folder = ""
    for line in block.group(1).splitlines():
        if entry := re.match(r"^  (\S+)", line):
            folder = entry.group(1) if entry.group(1).endswith("/") else ""
            named.add(entry.group(1))
        elif (entry := re.match(r"^    (\S+\.py)(\s|$)", line)) and folder:
            named.add(folder + entry.group(1))
    return named


@pytest.mark.parametrize("module", _modules())
def test_every_module_is_in_the_architecture_map(module: str) -> None:
    """docs/architecture.md's tree gives each module that exists its one-line job (a name listed for a module not yet
    written is no failure; a module left out of the map is)."""
    assert module in _tree(ARCHITECTURE), f"memserver/{module} is not in docs/architecture.md's tree"


def test_the_architecture_map_check_can_fail() -> None:
    """The check above would notice a module missing from the map."""
    assert _modules(), "no modules found"
    mapped = _tree(ARCHITECTURE)
    assert {"server.py", "local/store.py", "transports/bearer.py"} <= mapped
    assert "local/no_such_module.py" not in mapped and "no_such_module.py" not in mapped


def _links() -> list[tuple[Path, str]]:
    found = []
    for page in [ROOT / "README.md", *PAGES, ROOT / "examples" / "README.md"]:
        text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
        found += [(page, target) for target in re.findall(r"\]\(([^)\s]+)\)", text)]
    return found


def _anchors(page: Path) -> set[str]:
    """GitHub's heading anchors of a markdown page."""
    text = re.sub(r"^```.*?^```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL | re.MULTILINE)
    headings = re.findall(r"^#+ (.+)$", text, re.MULTILINE)
    return {re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-") for heading in headings}


def test_every_relative_link_in_the_docs_resolves() -> None:
    """A link to a file names one in the repository, and a link to a heading names one that exists."""
    broken = []
    for page, target in _links():
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        resolved = (page.parent / path).resolve() if path else page
        if not resolved.exists() or not resolved.is_relative_to(ROOT):
            broken.append(f"{page.relative_to(ROOT)}: {target}")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, f"broken links: {broken}"


def test_no_doc_names_a_path_outside_the_repository() -> None:
    """The docs are read from a checkout: /tmp, /work and ../shared mean nothing there."""
    offending = [
        page.name
        for page in [ROOT / "README.md", *PAGES]
        if re.search(r"/work/|\.\./shared|\(/tmp", page.read_text(encoding="utf-8"))
    ]
    assert not offending, f"paths outside the repository in {offending}"
