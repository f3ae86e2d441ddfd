"""The database schema: versioned SQL migrations (migrations/NNNN_name.sql, shipped in the wheel), applied in order
under an advisory lock, and the `meta` table that says which schema version, model, dimension and keyword analyzer
(analyzer.py) a database holds.

Idempotent and safe to race: every memserver process runs `ensure_schema` on start; the first takes the lock and
migrates, the others wait for it, then find nothing to do. A database that is already current costs one query and
no lock. Each migration runs in its own transaction together with the version bump, so a crash mid-way leaves the
database at the previous version, and the next start applies it again.

Objects live in the schema `memserver`. The role `memserver_app` (NOLOGIN, owns nothing) is what the server acts
as (see pool.py): row-level security applies to it, never to the tables' owner.
"""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from importlib import resources
from typing import Any

import psycopg
from psycopg import sql

from memserver.errors import ModelMismatchError, StoreError
from memserver.postgres import analyzer
from memserver.postgres.terms import ANALYZER

SCHEMA = "memserver"
APP_ROLE = "memserver_app"
# pg_advisory_lock key: the first 8 bytes of sha256("memserver.migrate"), as a signed bigint.
MIGRATION_LOCK = 0x1D5E_8B0C_3F4A_6E21

_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    text: str


def migrations() -> list[Migration]:
    """The packaged migrations, in version order."""
    found = []
    for entry in resources.files("memserver.postgres").joinpath("migrations").iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise StoreError(f"memserver's migrations are not numbered 1..n: {[m.name for m in found]}")
    return found


def latest_version() -> int:
    return len(migrations())


def current_version(conn: psycopg.Connection[Any]) -> int:
    """The schema version the database is at (0: memserver was never installed there)."""
    row = conn.execute("SELECT to_regclass('memserver.meta') IS NOT NULL").fetchone()
    if not row or not row[0]:
        return 0
    row = conn.execute("SELECT value FROM memserver.meta WHERE key = 'schema_version'").fetchone()
    return int(row[0]) if row else 0


def ensure_schema(conn: psycopg.Connection[Any], model: str, dim: int) -> int:
    """Migrate the database to the latest schema if needed, check it is for `model` and `dim`, then re-index its
    keyword terms if another analyzer made them (analyzer.py).

    `conn` must be in autocommit mode and connected as a role that may create objects there (the first time:
    also the `vector` extension and the memserver_app role). Returns the number of migrations applied.
    Raises ModelMismatchError when the database was built with another model or dimension.
    """
    applied = 0
    if current_version(conn) < latest_version():
        applied = migrate(conn, dim)
    check_model(conn, model, dim)
    if not analyzer.is_current(conn):
        analyzer.reindex(conn, MIGRATION_LOCK)
    return applied


def migrate(conn: psycopg.Connection[Any], dim: int, *, upto: int | None = None) -> int:
    """Apply the missing migrations (up to version `upto`, default all) under the advisory lock; returns how many
    ran (0 if another process won)."""
    applied = 0
    conn.execute("SELECT pg_advisory_lock(%s)", [MIGRATION_LOCK])
    try:
        _prepare(conn)
        have = current_version(conn)
        for migration in migrations():
            if migration.version <= have or (upto is not None and migration.version > upto):
                continue
            with conn.transaction():
                conn.execute(f"SET LOCAL search_path = {SCHEMA}, {_vector_schema(conn)}")
                conn.execute(migration.text.replace("{{DIM}}", str(int(dim))).encode())
                conn.execute(
                    "INSERT INTO memserver.meta (key, value) VALUES ('schema_version', %s) "
                    "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                    [str(migration.version)],
                )
                if migration.version == 1:
                    conn.execute(
                        "INSERT INTO memserver.meta (key, value) VALUES ('dim', %s), ('keyword', %s)",
                        [str(int(dim)), ANALYZER],  # no terms yet: they are this analyzer's
                    )
            applied += 1
    finally:
        conn.execute("SELECT pg_advisory_unlock(%s)", [MIGRATION_LOCK])
    return applied


def _prepare(conn: psycopg.Connection[Any]) -> None:
    """The extension, the app role and the schema: what the migrations assume exists."""
    try:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except psycopg.errors.InsufficientPrivilege:
        raise StoreError(
            "the pgvector extension is not installed in this database and this role may not install it: "
            "run CREATE EXTENSION vector; as a superuser (pgvector >= 0.8 is needed), then start again"
        ) from None
    except psycopg.errors.FeatureNotSupported as exc:  # the server has no pgvector files at all
        raise StoreError(f"this PostgreSQL server has no pgvector extension (>= 0.8 needed): {exc}") from None
    except psycopg.errors.UndefinedFile as exc:
        raise StoreError(f"this PostgreSQL server has no pgvector extension (>= 0.8 needed): {exc}") from None
    row = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()
    version = tuple(int(part) for part in re.findall(r"\d+", row[0] if row else "0")[:2])
    if version < (0, 8):
        raise StoreError(
            f"pgvector {row[0] if row else '?'} is installed; memserver needs >= 0.8 (iterative index scans): "
            "ALTER EXTENSION vector UPDATE;"
        )
    exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", [APP_ROLE]).fetchone()
    if not exists:
        try:
            with conn.transaction():
                conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(APP_ROLE)))
        except psycopg.errors.DuplicateObject:
            pass  # another database's migration created it meanwhile
        except psycopg.errors.UniqueViolation:
            pass
        except psycopg.errors.InsufficientPrivilege:
            raise StoreError(
                f"the role {APP_ROLE} does not exist and this role may not create it: run "
                f"CREATE ROLE {APP_ROLE} NOLOGIN; GRANT {APP_ROLE} TO <the role memserver connects as>; "
                "as a superuser, then start again"
            ) from None
    if not conn.execute("SELECT pg_has_role(%s, 'MEMBER')", [APP_ROLE]).fetchone()[0]:  # type: ignore[index]
        with contextlib.suppress(psycopg.errors.InsufficientPrivilege):  # pool.py refuses to serve without it
            conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(APP_ROLE)))
    conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(SCHEMA)))


def _vector_schema(conn: psycopg.Connection[Any]) -> str:
    row = conn.execute(
        "SELECT quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
        "WHERE e.extname = 'vector'"
    ).fetchone()
    return str(row[0]) if row else "public"


def check_model(conn: psycopg.Connection[Any], model: str, dim: int) -> int:
    """The model's id in this database (registered on first use); ModelMismatchError for another model/dim."""
    rows = dict(conn.execute("SELECT key, value FROM memserver.meta").fetchall())
    if int(rows.get("dim", dim)) != dim:
        raise ModelMismatchError(
            f"this database holds {rows['dim']}-dimensional vectors and the embedder makes {dim}: "
            "use a database created for this model"
        )
    models = {key[len("model.") :]: value for key, value in rows.items() if key.startswith("model.")}
    if not models:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", [MIGRATION_LOCK])
            conn.execute(
                "INSERT INTO memserver.meta (key, value) VALUES ('model.1', %s), ('model', '1') "
                "ON CONFLICT (key) DO NOTHING",
                [model],
            )
        return check_model(conn, model, dim)
    active = rows.get("model", "1")
    if models.get(active) != model:
        raise ModelMismatchError(
            f"this database was built with the embedding model {models.get(active)!r}, not {model!r}; its vectors "
            "cannot be compared with this model's. Use another database, or export with this database's model "
            "and import without --vectors to re-embed"
        )
    return int(active)
