"""Where the memories live: the data directory and the collection name, from the environment.

Paths are always absolute. MCP clients start servers with surprising working directories (often $HOME, sometimes
`/`), and a relative default once wiped users' memories on upgrade (official memory server #220), so a relative
MCP_MEMORY_PATH is resolved once, here, and the per-user default never depends on the working directory.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

from memserver.errors import ConfigError

APP_NAME = "memserver"
DEFAULT_COLLECTION = "personal_memory"

# A collection is a folder name: letters, digits, '_', '-', '.'; not starting with '.'; at most 64 characters.
_COLLECTION_RE = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,63}$")


def default_data_dir() -> Path:
    """The per-user data directory of the platform (not created here)."""
    if sys.platform == "win32":
        base = os.environ.get("LOCALAPPDATA") or str(Path.home() / "AppData" / "Local")
        return Path(base) / APP_NAME
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Application Support" / APP_NAME
    xdg = os.environ.get("XDG_DATA_HOME", "")
    # The XDG spec says a relative XDG_DATA_HOME is invalid and must be ignored.
    base = Path(xdg) if xdg and os.path.isabs(xdg) else Path.home() / ".local" / "share"
    return base / APP_NAME


def data_dir() -> Path:
    """MCP_MEMORY_PATH (with `~` expanded, made absolute), else the per-user data directory."""
    value = os.environ.get("MCP_MEMORY_PATH", "").strip()
    if value:
        return Path(os.path.abspath(os.path.expanduser(value)))
    return default_data_dir().absolute()


def validate_collection(name: str) -> str:
    """Return `name` if it is a safe folder name, else raise ConfigError saying what is allowed."""
    if not isinstance(name, str) or not _COLLECTION_RE.match(name) or name in (".", ".."):
        raise ConfigError(
            f"invalid collection name {name!r}: use 1-64 letters, digits, '_', '-' or '.', not starting with '.'"
        )
    return name


def collection_name() -> str:
    """MCP_MEMORY_COLLECTION, else "personal_memory"."""
    value = os.environ.get("MCP_MEMORY_COLLECTION", "").strip()
    return validate_collection(value or DEFAULT_COLLECTION)


def database_url() -> str | None:
    """MEMSERVER_DATABASE_URL (a postgresql:// URL: memories in PostgreSQL), else None (the local store)."""
    return os.environ.get("MEMSERVER_DATABASE_URL", "").strip() or None
