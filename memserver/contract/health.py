"""The shape of `MemoryBackend.health()` (memory://health, `memserver doctor`), the same for every engine: facts,
and checks that each say ok, warning or failure, with advice a person can act on for each that is not ok.

An engine fills the facts it has and runs the checks it can; `report` puts them together. The overall status is
the worst check's. This module is light on purpose (no numpy): the server imports it on its start-up path.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

OK, WARNING, FAILURE = "ok", "warning", "failure"
_RANK = {OK: 0, WARNING: 1, FAILURE: 2}

# Disk free below these is a warning / a failure (a checkpoint or a compaction writes files as large as the store's).
DISK_WARNING_BYTES = 1 << 30
DISK_FAILURE_BYTES = 100 << 20
# Forgotten memories still in the files, as a share of the memories kept, above which compacting is advised.
COMPACT_SHARE = 0.2
# A next open's replay estimated to take longer than this is a warning (a checkpoint would make it instant).
REPLAY_WARNING_SECONDS = 5.0


@dataclass(frozen=True)
class Check:
    """One check: its name, ok / warning / failure, what was found, and (unless ok) what to do about it."""

    name: str
    status: str
    detail: str
    advice: str = ""


def report(engine: str, facts: dict[str, Any], checks: list[Check]) -> dict[str, Any]:
    """The health() answer: {"status", "engine", "version", ...facts, "checks": [...]}."""
    from memserver import __version__

    status = max((c.status for c in checks), key=_RANK.__getitem__, default=OK)
    return {
        "status": status,
        "engine": engine,
        "version": __version__,
        **facts,
        "checks": [{k: v for k, v in asdict(c).items() if v != ""} for c in checks],
    }


def disk_check(free: int, total: int, where: str) -> Check:
    """Free space where the store writes."""
    detail = f"{free / 2**30:.1f} GiB free of {total / 2**30:.1f} GiB at {where}"
    if free < DISK_FAILURE_BYTES:
        return Check("disk", FAILURE, detail, "free disk space now: writes, checkpoints and compaction will fail")
    if free < DISK_WARNING_BYTES:
        return Check("disk", WARNING, detail, "free some disk space: a compaction needs room for a second copy")
    return Check("disk", OK, detail)


def model_check(name: str, result: dict[str, Any] | None) -> Check:
    """The embedding model against its reference vectors (embedding/reference.py); None: not checkable here."""
    if result is None:
        return Check(
            "model", WARNING, f"{name}: no reference vectors to check it against", "run memserver model verify"
        )
    detail = f"{name}: min cosine {result['min_cosine']:.6f} over {result['texts']} reference texts"
    if result["ok"]:
        return Check("model", OK, detail)
    return Check(
        "model",
        FAILURE,
        detail,
        "the model's vectors differ from sentence-transformers': run memserver model fetch, then memserver model "
        "verify (a different model file makes stored vectors and queries disagree)",
    )


def compaction_check(forgotten: int, kept: int) -> Check:
    """Forgotten memories whose rows are still stored (what compact() removes)."""
    detail = f"{forgotten} forgotten memories awaiting compaction, {kept} kept"
    if forgotten and forgotten > COMPACT_SHARE * max(kept, 1):
        return Check("compaction", WARNING, detail, "run memserver compact (other processes may keep working)")
    return Check("compaction", OK, detail)
