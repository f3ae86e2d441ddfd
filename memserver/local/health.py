"""health() of a local store: the model and its check, the derived indexes against the catalog, the last
checkpoint and what the next open would replay, forgotten memories awaiting compaction, and the disk's free
space. Read under the thread lock only (the store's files are stat()ed, never locked); the model check runs
outside it."""

from __future__ import annotations

import shutil
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

from memserver.contract.health import (
    FAILURE,
    OK,
    REPLAY_WARNING_SECONDS,
    WARNING,
    Check,
    compaction_check,
    disk_check,
    model_check,
    report,
)
from memserver.embedding import reference
from memserver.local.folder import CHECKPOINT_RECORDS
from memserver.local.index import META_NAME as INDEX_META
from memserver.local.snapshot import snapshot_path

if TYPE_CHECKING:
    from memserver.local.folder import Folder


def health(folder: Folder) -> dict[str, Any]:
    """See backend.MemoryBackend.health."""
    try:
        verified: dict[str, Any] | None = reference.check(folder.embedder)
    except (OSError, ValueError, KeyError):
        verified = None
    with folder.thread_lock:
        gen = folder.refresh()
        live = len(gen.catalog)
        indexed = gen.vindex.live_count
        keyword = len(gen.kindex.index)
        uncovered = gen.coverage.uncovered
        per_record = gen.costs.replay_seconds_per_record
        journal_bytes = gen.journal_bytes()
        forgotten = gen.deleted_pending()
        generation = gen.journal.generation
    checkpoint_file = snapshot_path(folder.path, generation)
    if not checkpoint_file.exists():
        checkpoint_file = folder.path / INDEX_META
    last = None
    if checkpoint_file.exists():
        last = datetime.fromtimestamp(checkpoint_file.stat().st_mtime, timezone.utc).isoformat()
    replay_seconds = uncovered * per_record
    usage = shutil.disk_usage(folder.path)
    model = str(folder.embedder.model_name)
    checks = [
        model_check(model, verified),
        _index_check(live, indexed, keyword),
        _replay_check(uncovered, replay_seconds, last, folder.keeps_checkpoints(live)),
        compaction_check(forgotten, live),
        disk_check(usage.free, usage.total, str(folder.path)),
    ]
    facts = {
        "collection": folder.name,
        "path": str(folder.path),
        "model": {"name": model, "dim": folder.dim, "check": verified},
        "index": {"memories": live, "vector_index": indexed, "keyword_index": keyword},
        "checkpoint": {"last": last, "records_since": uncovered},
        "journal": {"bytes": journal_bytes, "replay_seconds_estimate": round(replay_seconds, 3)},
        "pending_compaction": forgotten,
        "disk": {"free_bytes": usage.free, "total_bytes": usage.total},
    }
    return report("local", facts, checks)


def _index_check(live: int, indexed: int, keyword: int) -> Check:
    detail = f"{live} current memories; vector index {indexed}, keyword index {keyword}"
    if indexed != live or keyword != live:
        return Check(
            "index",
            FAILURE,
            detail,
            "the indexes disagree with the journal: stop the servers, delete index.json and keyword.json in the "
            "store's folder (derived files) and open the store again to rebuild them",
        )
    return Check("index", OK, detail)


def _replay_check(uncovered: int, seconds: float, last: str | None, keeps_checkpoints: bool) -> Check:
    detail = f"last checkpoint {last or 'never'}; {uncovered} journal records since (an open replays ~{seconds:.2f} s)"
    if not keeps_checkpoints:
        # A small store keeps no checkpoints at all (folder.keeps_checkpoints): its open rebuilds in milliseconds.
        detail = f"none kept below {CHECKPOINT_RECORDS} memories; an open replays {uncovered} records"
    advice = "run memserver stats: a store closed with many records past its checkpoint takes a new one"
    if seconds > REPLAY_WARNING_SECONDS or (last is None and uncovered and keeps_checkpoints):
        return Check("checkpoint", WARNING, detail, advice)
    return Check("checkpoint", OK, detail)
