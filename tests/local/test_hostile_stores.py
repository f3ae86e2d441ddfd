"""Hostile stores (issue 27 item 4): a data directory someone or something damaged opens with everything it still
holds, repairing what can be repaired and saying so once (a second open is silent), never with a traceback."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path

import pytest

from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder
from tests.support.readback import readback

MAGIC = b"memserver-meta-snapshot\n"


def _open(root: Path, embedder: FakeEmbedder | None = None) -> MemoryStore:
    return MemoryStore(root, "test", embedder=embedder or FakeEmbedder())


def _truncate_vectors(folder: Path) -> None:
    vec = next(folder.glob("vectors-*.f32"))
    vec.write_bytes(vec.read_bytes()[: 1000 * 4])  # not even one whole row left


def _newer_snapshot(folder: Path) -> None:
    snap = next(folder.glob("meta-*.snap"))
    data = snap.read_bytes()
    nl = data.index(b"\n", len(MAGIC))
    head = json.loads(data[len(MAGIC) : nl])
    head["format"] = 99  # written by a later memserver
    snap.write_bytes(data[: len(MAGIC)] + json.dumps(head).encode() + data[nl:])


def _index_disagrees(folder: Path) -> None:
    stamp = json.loads((folder / "index.json").read_text())
    stamp["count"] = 5  # the index checkpoint claims another journal state than the snapshot and the journal
    (folder / "index.json").write_text(json.dumps(stamp))


DAMAGE: dict[str, tuple[Callable[[Path], None], str]] = {
    "truncated vector file": (_truncate_vectors, "vectors-"),
    "snapshot from a newer format": (_newer_snapshot, "meta-"),
    "checkpoint whose files disagree": (_index_disagrees, "index"),
}


@pytest.mark.parametrize("case", list(DAMAGE))
def test_a_damaged_store_opens_with_every_memory_and_says_so_once(
    tmp_path: Path, case: str, caplog: pytest.LogCaptureFixture
) -> None:
    damage, named = DAMAGE[case]
    with _open(tmp_path) as s:  # enough records that close checkpoints (index, keyword index, snapshot)
        s.add_many([{"content": f"fact {i} about item{i}", "tags": [f"t{i % 3}"]} for i in range(300)])
        before = readback(s)
    damage(tmp_path / "test")
    caplog.set_level(logging.INFO, logger="memserver")
    with _open(tmp_path) as s:
        assert readback(s) == before  # nothing lost, nothing invented
    said = [r.getMessage() for r in caplog.records if r.levelno >= logging.INFO and named in r.getMessage()]
    if case != "checkpoint whose files disagree":  # that one is told by the file's kind, not its name
        assert said, caplog.text
    assert not any(r.exc_info for r in caplog.records)  # never a traceback
    caplog.clear()
    with _open(tmp_path) as s:  # repaired: the next open neither repairs nor warns again
        assert readback(s) == before
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
