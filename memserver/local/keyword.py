"""The store's keyword index: a BM25 `KeywordIndex` (bm25.py) keyed by vector row, checkpointed like the vectors.

Derived data, like the vector index: the store feeds it from the journal replay (`add` / `remove` per record), so
every process that replays the same journal holds the same index, and nothing the journal kept can be missing from
it. A memory is indexed under its content, its tags, the date terms of its occurred_at (terms.py) and its speaker. A
checkpoint names the analyzer that made its terms (terms.ANALYZER): one made by another is rebuilt, once.

A full rebuild costs ~1.0-1.5 s of CPU per 100k memories of ~17 words (`benchmarks/keyword_speed.py`; creating the
token objects is most of it), over the store's open budget, so the index is checkpointed with the vector index:
`keyword.json` names a `keyword-<nonce>.npz` of the postings arrays (`KeywordIndex.state`), written the way every
checkpoint is (durable.CheckpointFiles: new file, synced, folder synced, then the meta replaced atomically) and
checked (generation, size, CRC-32, array shapes, live count) before it is trusted; it loads in well under 0.1 s
per 100k. The journal tail past the checkpoint is replayed as usual.
"""

from __future__ import annotations

import io
import logging
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memserver.durable import OS, CheckpointError, CheckpointFiles, FileLayer
from memserver.local.replay import AddRecord
from memserver.retrieval.bm25 import KeywordIndex
from memserver.retrieval.terms import ANALYZER, date_text, tag_text

__all__ = ["KEYWORD_META", "KeywordDerivedIndex", "indexed_text"]

log = logging.getLogger(__name__)

KEYWORD_META = "keyword.json"


def indexed_text(record: AddRecord) -> str:
    """What the store indexes for a memory: its content, its tags (the person's own labels: "project-falcon" is
    found by "project falcon"), the date words of its occurred_at (when it happened; created_at for a memory
    stored before that field, where the two are equal) and its speaker's name (a chat turn stored without a
    "Maya: " prefix is still found by "Maya")."""
    text = f"{record.content} {date_text(record.occurred_at or record.created_at)}"
    if record.tags:
        text = f"{text} {tag_text(record.tags)}"
    return f"{text} {record.speaker}" if record.speaker else text


class KeywordDerivedIndex:
    """The store's keyword index: a `KeywordIndex` keyed by vector row, fed like every replay.DerivedIndex.

    `load` returns None for a missing, foreign or damaged checkpoint, and the store then rebuilds it from the
    journal. Checkpoint files are written through `files` (a durable.FileLayer; the real file system by default).
    """

    name = "keyword"

    def __init__(self, files: FileLayer = OS) -> None:
        self.index = KeywordIndex()
        self.files = files

    def reset(self) -> None:
        self.index.clear()

    def add(self, records: Sequence[AddRecord], vectors: npt.NDArray[np.float32]) -> None:
        self.index.add_many((r.row, indexed_text(r)) for r in records)

    def remove(self, records: Sequence[AddRecord]) -> None:
        for r in records:
            self.index.remove(r.row)

    def search(self, query: str, k: int, candidates: npt.NDArray[np.int64] | None = None) -> list[tuple[int, float]]:
        return self.index.search(query, k, candidates)

    def search_arrays(
        self, query: str, k: int, candidates: npt.NDArray[np.int64] | None = None
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        return self.index.search_arrays(query, k, candidates)

    def checkpoint_files(self, folder: Path) -> CheckpointFiles:
        return CheckpointFiles(folder, KEYWORD_META, "keyword", "npz", self.files)

    def save(self, folder: Path, stamp: dict[str, Any]) -> None:
        """Write `keyword-<nonce>.npz` (synced), then name it in keyword.json (atomic); old files go after."""
        data, live = self.serialised()
        checkpoint = self.checkpoint_files(folder)
        name = checkpoint.new_name()
        checkpoint.write(name, data)
        checkpoint.commit(self.meta_of(name, data, stamp, live))

    def serialised(self) -> tuple[memoryview, int]:
        """The checkpoint's bytes (a copy: they can be written while the index changes) and its live count."""
        buffer = io.BytesIO()
        np.savez(buffer, **self.index.state())  # type: ignore[arg-type]
        return buffer.getbuffer(), len(self.index)

    @staticmethod
    def meta_of(name: str, data: memoryview, stamp: dict[str, Any], live: int) -> dict[str, Any]:
        """The keyword.json that names data file `name` holding `data`, a checkpoint covering `stamp`."""
        return {**stamp, "file": name, "size": len(data), "crc32": zlib.crc32(data), "live": live, "analyzer": ANALYZER}

    def load(self, folder: Path, generation: str) -> dict[str, Any] | None:
        """Load the checkpoint if it is for `generation` and passes every check; else None (the store rebuilds)."""
        checkpoint = self.checkpoint_files(folder)
        try:
            meta = checkpoint.read_meta()
        except CheckpointError as exc:
            log.warning("keyword checkpoint %s; rebuilding it", exc)
            return None
        if meta is None or meta.get("generation") != generation:
            return None  # none, or another journal generation (compacted since): rebuilt, quietly
        if meta.get("analyzer") != ANALYZER:
            log.info("keyword checkpoint made by analyzer %s; rebuilding it", meta.get("analyzer", "1"))
            return None
        try:
            data = checkpoint.read_data(meta)
            with np.load(io.BytesIO(data), allow_pickle=False) as npz:
                arrays = {key: npz[key] for key in npz.files}
            self.index.load_state(arrays)
            if len(self.index) != meta["live"] or len(self.index) != meta["count"]:
                raise ValueError("live count disagrees with the checkpoint")
        except (KeyError, TypeError, ValueError, OSError, EOFError, zipfile.BadZipFile) as exc:
            log.warning("keyword checkpoint in %s not used: %s; rebuilding it from the journal", folder, exc)
            self.index.clear()
            return None
        return meta
