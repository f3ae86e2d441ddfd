"""Bearer-token configuration for HTTP: every bad entry is refused with a message saying which and why."""

from __future__ import annotations

from pathlib import Path

import pytest

from memserver.errors import ConfigError
from memserver.transports import load_tokens

GOOD = "x" * 24


def test_tokens_from_the_environment_and_a_file_name_their_users(tmp_path: Path) -> None:
    """Both sources are read; comments and blank lines in the file are ignored."""
    token_file = tmp_path / "tokens"
    token_file.write_text(f"# users\n\nbob {'b' * 20}\n", encoding="utf-8")
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
