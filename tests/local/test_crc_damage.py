"""The CRC checks at store level (issue 27 item 5): one flipped byte inside a full-length journal line or a
full-length vector row, the store opened through its public API, the damage reported or repaired, nothing wrong
returned. (tests/local/test_journal.py checks the line codec itself; these check that the store relies on it.)"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from memserver.errors import CorruptJournalError
from memserver.local.store import Memory, MemoryStore
from tests.support.fakes import FakeEmbedder

DIM = 384
ROW = DIM * 4


def _open(root: Path, embedder: FakeEmbedder | None = None) -> MemoryStore:
    return MemoryStore(root, "test", embedder=embedder or FakeEmbedder())


def _fill_then_late(root: Path) -> list[Memory]:
    """300 memories (checkpointed on close), then 5 more below the checkpoint threshold: their journal lines and
    vector rows are the ones an open checks."""
    with _open(root) as s:
        s.add_many([{"content": f"fact {i} about item{i}", "tags": [f"t{i % 3}"]} for i in range(300)])
    with _open(root) as s:
        return [s.add(f"late note {i} on zebras", tags=["late"]) for i in range(5)]


def _flip_in_line_of(journal: Path, needle: bytes) -> int:
    """Flip one byte of the content inside the (full-length) journal line holding `needle`; its offset."""
    data = bytearray(journal.read_bytes())
    at = data.index(needle)
    data[at] ^= 0x01  # 'l' -> 'm': still valid UTF-8 and JSON, only the CRC can tell
    journal.write_bytes(bytes(data))
    return data.rindex(b"\n", 0, at) + 1


def test_a_flipped_byte_in_a_middle_journal_line_refuses_to_open_naming_the_offset(tmp_path: Path) -> None:
    late = _fill_then_late(tmp_path)
    line_at = _flip_in_line_of(tmp_path / "test" / "journal.jsonl", late[2].content.encode())
    with pytest.raises(CorruptJournalError, match=f"byte {line_at}"):
        _open(tmp_path)


def test_a_flipped_byte_in_the_last_journal_line_is_set_aside_never_returned(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    late = _fill_then_late(tmp_path)
    folder = tmp_path / "test"
    _flip_in_line_of(folder / "journal.jsonl", late[-1].content.encode())
    caplog.set_level(logging.WARNING, logger="memserver")
    with _open(tmp_path) as s:
        assert s.get(late[-1].id) is None  # the damaged record is not invented back, garbled or not
        assert [m.id for m in s.list_recent(limit=4)] == [m.id for m in reversed(late[:-1])]
        hits = s.search("mate note 4 on zebras", limit=20, mode="keyword")
        assert not [h for h in hits if "mate" in h.memory.content]
        assert s.stats()["count"] == 304
    assert any("torn or damaged last line" in r.getMessage() for r in caplog.records), caplog.text
    aside = list(folder.glob("journal.jsonl.torn-*"))
    assert len(aside) == 1 and b"mate note 4" in aside[0].read_bytes()  # set aside, not silently dropped


def test_a_flipped_byte_in_a_vector_row_is_reembedded_and_reported(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    late = _fill_then_late(tmp_path)
    folder = tmp_path / "test"
    vec = next(folder.glob("vectors-*.f32"))
    data = bytearray(vec.read_bytes())
    assert len(data) == 305 * ROW  # every row full length
    data[302 * ROW + 3] ^= 0x40  # the exponent byte of row 302's first component: a far-off vector
    vec.write_bytes(bytes(data))
    counting = FakeEmbedder()
    caplog.set_level(logging.WARNING, logger="memserver")
    with _open(tmp_path, counting) as s:
        assert counting.texts == 1  # row 302 only, from its journal line's content
        want = np.asarray(FakeEmbedder().embed([late[2].content])[0], dtype=np.float32)
        for m in late:
            hit = s.search(m.content, limit=1, tags=["late"])[0]  # exact ranking over the stored rows
            assert hit.memory.id == m.id and hit.score > 0.99
        assert s.search(late[2].content, limit=1)[0].memory.id == late[2].id  # through the vector index
    assert any("damaged or missing" in r.getMessage() and vec.name in r.getMessage() for r in caplog.records)
    fixed = np.frombuffer(vec.read_bytes()[302 * ROW : 303 * ROW], dtype=np.float32)
    assert np.allclose(fixed, want, atol=1e-6)  # written back
