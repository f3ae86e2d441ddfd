"""Times as a person reads them: in the local time zone, its name shown (or in UTC with --utc), minutes in tables.

The store keeps UTC strings (`inputs.stored_time`). An occurred_at given as a date alone is stored as 00:00 UTC of
that day; it is shown as that date, not as a midnight moved into the local zone (a time given as exactly
00:00:00.000000 UTC reads the same way).
"""

from __future__ import annotations

from datetime import datetime, timezone

DATE_ONLY_SUFFIX = "T00:00:00.000000+00:00"


def is_date_only(stored: str) -> bool:
    return stored.endswith(DATE_ONLY_SUFFIX)


def _local(stored: str, utc: bool) -> datetime:
    moment = datetime.fromisoformat(stored)
    return moment.astimezone(timezone.utc) if utc else moment.astimezone()


def zone_name(utc: bool = False) -> str:
    """The zone times are shown in: "UTC", or the local zone's name now (e.g. "CET")."""
    return "UTC" if utc else datetime.now().astimezone().tzname() or "local"


def when(stored: str, *, utc: bool = False) -> str:
    """For a table: "2026-12-01 11:32" in the zone (or "2026-05-03" for a date alone)."""
    if not stored:
        return "-"
    if is_date_only(stored):
        return stored[:10]
    return _local(stored, utc).strftime("%Y-%m-%d %H:%M")


def moment(stored: str, *, utc: bool = False) -> str:
    """In full: "2026-12-01 11:32:17 CET" (or "2026-05-03" for a date alone)."""
    if not stored:
        return "-"
    if is_date_only(stored):
        return stored[:10]
    local = _local(stored, utc)
    return f"{local.strftime('%Y-%m-%d %H:%M:%S')} {local.tzname() or 'local'}"
