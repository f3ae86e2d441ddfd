"""Bearer-token configuration for HTTP: every bad entry is refused with a message saying which and why."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from memserver.errors import ConfigError
from memserver.transports.bearer import load_tokens

GOOD = "x" * 24


def test_tokens_from_the_environment_and_a_file_name_their_users(tmp_path: Path) -> None:
    """Both sources are read; comments and blank lines in the file are ignored."""
    token_file = tmp_path / "tokens"
    token_file.write_text(f"# users\n\nbob {'b' * 20}\n", encoding="utf-8")
    token_file.chmod(0o600)
    tokens = load_tokens({"MEMSERVER_TOKENS": f"alice:{GOOD}", "MEMSERVER_TOKEN_FILE": str(token_file)})
    assert tokens == {GOOD: "alice", "b" * 20: "bob"}


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (f"alice{GOOD}", "is not 'user:token'"),
        ("alice:short", "shorter than"),
        (f"../etc:{GOOD}", "user name"),
        (f"alice:{GOOD},bob:{GOOD}", "same token"),
        (f"alice:{GOOD},Alice:{'y' * 24}", "differ only in case"),
    ],
)
def test_bad_token_entries_are_refused(value: str, message: str) -> None:
    """Malformed entries, short tokens, unsafe names, shared tokens and case-twin users are configuration errors."""
    with pytest.raises(ConfigError, match=message):
        load_tokens({"MEMSERVER_TOKENS": value})


def test_an_unreadable_token_file_is_a_configuration_error(tmp_path: Path) -> None:
    """A token file that cannot be read names itself."""
    with pytest.raises(ConfigError, match="MEMSERVER_TOKEN_FILE"):
        load_tokens({"MEMSERVER_TOKEN_FILE": str(tmp_path / "missing")})


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
@pytest.mark.parametrize("mode", [0o644, 0o640, 0o604, 0o620, 0o602, 0o660])
def test_a_token_file_other_accounts_can_read_or_change_is_refused(tmp_path: Path, mode: int) -> None:
    """As ssh refuses a private key that group or others may read: the message names the mode and the fix."""
    token_file = tmp_path / "tokens"
    token_file.write_text(f"alice {GOOD}\n", encoding="utf-8")
    token_file.chmod(mode)
    with pytest.raises(ConfigError, match=f"permissions {mode:04o}.*chmod 600") as caught:
        load_tokens({"MEMSERVER_TOKEN_FILE": str(token_file)})
    assert GOOD not in str(caught.value)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX permission bits")
@pytest.mark.parametrize("mode", [0o600, 0o400])
def test_a_private_token_file_is_read(tmp_path: Path, mode: int) -> None:
    """0600 and 0400 are private to the owner."""
    token_file = tmp_path / "tokens"
    token_file.write_text(f"alice {GOOD}\n", encoding="utf-8")
    token_file.chmod(mode)
    assert load_tokens({"MEMSERVER_TOKEN_FILE": str(token_file)}) == {GOOD: "alice"}


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() != 0, reason="needs root to give the file away")
def test_a_token_file_of_another_account_is_refused(tmp_path: Path) -> None:
    """A file another account owns could be rewritten by it, whatever its mode."""
    token_file = tmp_path / "tokens"
    token_file.write_text(f"alice {GOOD}\n", encoding="utf-8")
    token_file.chmod(0o600)
    os.chown(token_file, 12345, 12345)
    with pytest.raises(ConfigError, match="belongs to another account"):
        load_tokens({"MEMSERVER_TOKEN_FILE": str(token_file)})
