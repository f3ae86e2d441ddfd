"""Bearer tokens for HTTP: where they come from (MEMSERVER_TOKENS, MEMSERVER_TOKEN_FILE), the rules they must
follow, and the SDK TokenVerifier that checks them. Each token names a user; each user has their own store.

A token file that other accounts may read is refused, as ssh refuses a private key with such permissions: anyone
who can read the file can act as every user in it, and a warning is easy to miss in a server's log.
"""

from __future__ import annotations

import hmac
import os
import re
import stat
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from memserver.errors import ConfigError

if TYPE_CHECKING:
    from mcp.server.auth.provider import AccessToken

MIN_TOKEN_CHARS = 16
_USER_RE = re.compile(r"^[A-Za-z0-9_-]{1,32}$")
_TOKEN_HINT = "make one with Python's secrets.token_urlsafe(32)"


def load_tokens(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Bearer tokens -> user names, from MEMSERVER_TOKENS ("alice:TOKEN,bob:TOKEN") and MEMSERVER_TOKEN_FILE
    (one `user token` per line; blank lines and `#` comments ignored). Empty when neither is set.

    Raises:
        ConfigError: a malformed entry, a bad user name, a short token, one token given to two users, or a token
            file that is not private to its owner.
    """
    env = os.environ if environ is None else environ
    entries: list[tuple[str, str, str]] = []  # (user, token, where)
    for i, item in enumerate(env.get("MEMSERVER_TOKENS", "").split(",")):
        if not item.strip():
            continue
        user, sep, token = item.strip().partition(":")
        if not sep:
            raise ConfigError(f"MEMSERVER_TOKENS entry {i + 1} is not 'user:token'")
        entries.append((user.strip(), token.strip(), f"MEMSERVER_TOKENS entry {i + 1}"))
    token_file = env.get("MEMSERVER_TOKEN_FILE", "").strip()
    if token_file:
        entries.extend(_read_token_file(Path(token_file).expanduser()))

    tokens: dict[str, str] = {}
    folded: dict[str, str] = {}  # user names by lower case: "Alice" and "alice" share a folder on macOS/Windows
    for user, token, where in entries:
        if not _USER_RE.match(user):
            raise ConfigError(f"{where}: user name {user!r} must be 1-32 letters, digits, '_' or '-'")
        if folded.setdefault(user.lower(), user) != user:
            raise ConfigError(
                f"{where}: user names {folded[user.lower()]!r} and {user!r} differ only in case; on a "
                "case-insensitive file system they would share one folder of memories"
            )
        if len(token) < MIN_TOKEN_CHARS:
            raise ConfigError(
                f"{where}: the token of {user!r} is shorter than {MIN_TOKEN_CHARS} characters; {_TOKEN_HINT}"
            )
        if tokens.get(token, user) != user:
            raise ConfigError(f"{where}: the same token is given to {tokens[token]!r} and {user!r}")
        tokens[token] = user
    return tokens


def _read_token_file(path: Path) -> list[tuple[str, str, str]]:
    try:
        with path.open(encoding="utf-8") as file:
            check_private(path, os.fstat(file.fileno()))
            lines = file.read().splitlines()
    except OSError as exc:
        raise ConfigError(f"cannot read MEMSERVER_TOKEN_FILE {path}: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"MEMSERVER_TOKEN_FILE {path} is not UTF-8 text") from None
    entries = []
    for n, line in enumerate(lines, 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise ConfigError(f"{path} line {n}: expected 'user token'")
        entries.append((parts[0], parts[1], f"{path} line {n}"))
    return entries


def check_private(
    path: Path, status: os.stat_result, setting: str = "MEMSERVER_TOKEN_FILE", what: str = "the tokens"
) -> None:
    """Refuse a secret's file (`setting` names where it was given) that group or others may read or write, or that
    belongs to another account (ssh's rules for a private key). POSIX only: Windows has no such permission bits.

    Raises:
        ConfigError: saying what is wrong and the command that fixes it.
    """
    if sys.platform == "win32":
        return
    mode = stat.S_IMODE(status.st_mode)
    if mode & 0o077:
        raise ConfigError(
            f"{setting} {path} has permissions {mode:04o}: other accounts on this machine can read or "
            f"change {what} in it. Run `chmod 600 {path}` (for a container secret, mount it with mode 0400)"
        )
    if status.st_uid not in (os.geteuid(), 0):
        raise ConfigError(
            f"{setting} {path} belongs to another account (uid {status.st_uid}), which can change "
            f"{what} in it; use a file of your own"
        )


class StaticTokenVerifier:
    """The SDK's TokenVerifier over a fixed token -> user table; the user becomes the AccessToken's client_id."""

    def __init__(self, tokens: Mapping[str, str]) -> None:
        self._tokens = dict(tokens)

    async def verify_token(self, token: str) -> AccessToken | None:
        from mcp.server.auth.provider import AccessToken

        user = None
        for known, name in self._tokens.items():  # compare every entry in constant time: no timing oracle
            if hmac.compare_digest(known.encode(), token.encode()):
                user = name
        return AccessToken(token=token, client_id=user, scopes=[]) if user else None
