"""Load over HTTP at a small size (benchmarks/http_load.py runs it at full size): 32 sessions of two users calling
tools at once on one server process."""

from __future__ import annotations

from pathlib import Path

from benchmarks.http_load import run_load


def test_32_sessions_of_two_users_lose_nothing_and_see_nothing_of_each_other(tmp_path: Path) -> None:
    """32 sessions x 20 calls (remember, recall, list_recent, resources/read): no error, every acknowledged memory
    is there for its owner and not for the other user, and no answer shows the other user's memories."""
    result = run_load(sessions=32, calls=20, users=2, data_dir=tmp_path)
    assert result["server_alive"]
    assert result["calls"] == 640
    assert (result["errors"], result["lost"], result["cross_user_reads"]) == (0, 0, 0), result["error_kinds"]
    assert result["memories"] >= 150  # about 30% of the calls store one: enough for the checks to mean something
