"""health() of a PostgreSQL tenant: the database reachable (one timed round trip), the schema's migration level
against this version's, the model and its check, the tenant's memories and tombstones awaiting compaction; and
the backup recipe (pg_dump), since backups of a database are the database's own tools' job."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from memserver.contract.health import FAILURE, OK, WARNING, Check, compaction_check, model_check, report
from memserver.embedding import reference
from memserver.errors import MemserverError
from memserver.postgres.schema import latest_version

if TYPE_CHECKING:
    from memserver.postgres.backend import PostgresBackend

BACKUP_RECIPE = """\
PostgreSQL keeps these memories; back the database up with its own tools (consistent while memserver writes):
  pg_dump --format=custom --file=memserver-$(date -u +%Y%m%dT%H%M%SZ).dump "$DATABASE_URL"
restore into an empty database (then run memserver db migrate --database URL if this version is newer):
  pg_restore --no-owner --dbname="$DATABASE_URL" memserver-YYYYmmddTHHMMSSZ.dump
(`memserver export -o memories.jsonl --vectors` also writes every memory, for another engine or machine.)"""


def health(backend: PostgresBackend) -> dict[str, Any]:
    """See backend.MemoryBackend.health."""
    try:
        verified: dict[str, Any] | None = reference.check(backend.embedder)
    except (OSError, ValueError, KeyError):
        verified = None
    model = str(backend.embedder.model_name)
    checks = [model_check(model, verified)]
    facts: dict[str, Any] = {
        "collection": backend.tenant.rpartition("/")[2],
        "tenant": backend.tenant,
        "database": backend.db.where,
        "model": {"name": model, "dim": backend.dim, "check": verified},
    }
    counts = (
        "SELECT count(*) FILTER (WHERE forgotten_at IS NULL AND replaced_by IS NULL), "
        "count(*) FILTER (WHERE forgotten_at IS NOT NULL) FROM memserver.memories WHERE tenant = %s"
    )
    version_sql = "SELECT value FROM memserver.meta WHERE key = 'schema_version'"
    started = time.perf_counter()
    try:
        counted, version = backend.db.run(backend.tenant, [(counts, [backend.tenant]), (version_sql, [])])
        live, forgotten = counted.fetchone() or (0, 0)
        row = version.fetchone()
    except MemserverError as exc:
        checks.append(Check("database", FAILURE, str(exc), "start the database server, or check --database URL"))
        return report("postgresql", facts, checks)
    took = time.perf_counter() - started
    schema, latest = int(row[0]) if row else 0, latest_version()
    facts |= {
        "reachable": True,
        "round_trip_ms": round(took * 1000, 2),
        "schema": {"version": schema, "latest": latest},
        "index": {"memories": int(live)},
        "pending_compaction": int(forgotten),
    }
    checks.append(Check("database", OK, f"reachable at {backend.db.where} ({took * 1000:.1f} ms)"))
    if schema < latest:
        advice = "run memserver db migrate --database URL as the tables' owner"
        checks.append(Check("schema", WARNING, f"schema version {schema}, this version's is {latest}", advice))
    elif schema > latest:
        detail = f"schema version {schema} is newer than this version's {latest}"
        checks.append(Check("schema", WARNING, detail, "upgrade memserver on this machine"))
    else:
        checks.append(Check("schema", OK, f"schema version {schema} (current)"))
    checks.append(compaction_check(int(forgotten), int(live)))
    return report("postgresql", facts, checks)
