"""Hostile stores (issue 27 item 4): a data directory someone or something damaged opens with everything it still
holds, repairing what can be repaired and saying so once (a second open is silent), never with a traceback."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from tests.support.hostile import DAMAGE, checkpointed, open_store
from tests.support.readback import readback


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_store_opens_with_every_memory_and_says_so_once(
    tmp_path: Path, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    damage, named = DAMAGE[case]
    checkpointed(tmp_path)
    with open_store(tmp_path) as s:
        before = readback(s)
    damage(tmp_path / "test")
    caplog.set_level(logging.INFO, logger="memserver")
    with open_store(tmp_path) as s:
        assert readback(s) == before  # nothing lost, nothing invented
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO and named in r.getMessage()]
    if case != "checkpoint whose files disagree":  # that one is told by the file's kind, not its name
        assert said, caplog.text
    assert not any(r.exc_info for r in caplog.records)  # never a traceback
    caplog.clear()
    with open_store(tmp_path) as s:  # repaired: the next open neither repairs nor warns again
        assert readback(s) == before
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
