"""Connections: one psycopg pool per database URL, acting as the role memserver_app, and the tenant per transaction.

Every unit of work is `with db.transaction(tenant) as conn:`. It runs in pipeline mode: BEGIN, the
`set_config('memserver.tenant', ..., true)` that row-level security reads, the caller's statements and COMMIT go
out together and come back together, so a recall is one network round trip. A write is acknowledged (the block
returns) only after its COMMIT has been answered.

Faults. A server that restarts closes its connections; a closed connection has something to read on its socket
while it sits idle in the pool (EOF, or the server's goodbye), so `_check` throws it out before anyone uses it, at
the cost of one poll(), not a round trip. The pool opens new connections in the background as the server comes
back. While the database is unreachable every call fails within CALL_TIMEOUT_S with DatabaseUnavailableError, a
StoreError whose message names the server (never the password) and says whether anything may have been written.
A read that failed on a broken connection is retried once on a fresh one; a write is never retried, because a
connection lost during COMMIT leaves the outcome unknown, and the message says so. A transaction the server rolled
back (a deadlock, a serialization failure, a lock wait past lock_timeout) changed nothing and is run again, up to
RETRIES times.

Timeouts: TCP keepalives and tcp_user_timeout notice a dead peer; statement_timeout and lock_timeout bound what
the server does for one call; and a client-side watchdog (watchdog.py) cuts a call the server never answers
(a frozen server on a host that still acknowledges packets) after CALL_DEADLINE_S.
"""

from __future__ import annotations

import contextlib
import logging
import select
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import psycopg
from psycopg import conninfo as pg_conninfo
from psycopg.types import TypeInfo
from psycopg_pool import ConnectionPool, PoolTimeout

from memserver.errors import ConfigError, StoreError
from memserver.postgres.schema import APP_ROLE, SCHEMA
from memserver.postgres.watchdog import Watchdog

log = logging.getLogger(__name__)
# The operator's: names the database and its login role, so client_log (which forwards memserver.postgres.pool to
# MCP clients) must not forward it. Stderr only.
security_log = logging.getLogger("memserver.postgres.security")

CONNECT_TIMEOUT_S = 5
CALL_TIMEOUT_S = 5.0  # longest wait for a connection (while the database is down, how long a call takes to fail)
POOL_MAX = 8
RECONNECT_S = 5.0
STATEMENT_TIMEOUT = "30s"  # the server cancels a statement running longer
LOCK_TIMEOUT = "5s"  # ... or waiting longer for a lock (then the transaction is rolled back and retried)
CALL_DEADLINE_S = 40.0  # the client gives up on a call the server does not answer (watchdog.py)
RETRIES = 3  # runs again of a transaction the server rolled back (deadlock, serialization, lock timeout)
# TCP: notice a dead server or a partition in ~25 s rather than the kernel's two hours (ignored on Unix sockets).
KEEPALIVES: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 5,
    "keepalives_count": 3,
    "tcp_user_timeout": 10_000,
}
BAD_URL = "the database URL is not a valid PostgreSQL URL (postgresql://user@host:port/db)"

T = TypeVar("T")


class DatabaseUnavailableError(StoreError):
    """PostgreSQL could not be reached, or the connection broke during the call."""


def check_url(url: str) -> dict[str, Any]:
    """The parameters of a URL or conninfo string; ConfigError (never showing the URL: it may hold a password)."""
    try:
        return pg_conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        raise ConfigError(BAD_URL) from None


def describe(url: str) -> str:
    """`host:port/dbname` of a URL or conninfo string, never its password."""
    try:
        params = pg_conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "an unparsable database URL"
    host = str(params.get("host") or params.get("hostaddr") or "localhost")
    return f"{host}:{params.get('port') or 5432}/{params.get('dbname') or params.get('user') or 'postgres'}"


def _reset(conn: psycopg.Connection[Any]) -> None:
    """The pool's reset of a returned connection: back to the role and the settings it was opened with.

    The connection options' `role=memserver_app` and the timeouts are the session's reset values, so whatever a
    statement changed with SET (a SET ROLE back to the login role, a statement_timeout of 0) ends with its borrower
    and never reaches the next one (runs in the pool's worker, not in the caller's time).
    """
    conn.execute("RESET ROLE; RESET ALL")


RLS_SQL = (
    "SELECT r.rolsuper, r.rolbypassrls, "
    "coalesce((SELECT pg_has_role(session_user, c.relowner, 'MEMBER') FROM pg_class c "
    "WHERE c.oid = to_regclass('memserver.memories')), false) "
    "FROM pg_roles r WHERE r.rolname = session_user"
)


def rls_warning(owner: psycopg.Connection[Any], where: str) -> str | None:
    """Why row-level security is no second wall for the role memserver logs in as (None: it is one).

    The pool acts as memserver_app, to which the policies apply; but a login role that is a superuser, has
    BYPASSRLS or may act as the tables' owner can SET ROLE back to itself inside any statement and read every
    tenant. Then only memserver's own tenant conditions separate the tenants: fine for one user, not for many.
    """
    row = owner.execute(RLS_SQL).fetchone()
    flags = (bool(v) for v in row) if row else ()
    texts = ("is a superuser", "has BYPASSRLS", "owns memserver's tables (or is a member of their owner)")
    reasons = [text for flag, text in zip(flags, texts, strict=False) if flag]
    if not reasons:
        return None
    return (
        f"memserver logs in to PostgreSQL at {where} as {owner.info.user!r}, which {' and '.join(reasons)}: "
        "row-level security is then no second wall between tenants (a statement could SET ROLE back to it). "
        f"For many users, log in as a role that is only a member of {APP_ROLE}: docs/scale-out.md, "
        '"Tenants and row-level security" (said once per database)'
    )


def first_time(owner: psycopg.Connection[Any], key: str, value: str) -> bool:
    """Note `key` = `value` in the database's meta table; True unless it was noted already with that value.

    It remembers that a warning was given, so it is given once per database (and again when its reason changes),
    not by every CLI command: kept in the database rather than in a data directory, because the database is what
    the warning is about, and every machine and user of it then agrees. A role that may not write there (BYPASSRLS
    without the tables) is warned every time, as before."""
    try:
        row = owner.execute(
            f"INSERT INTO {SCHEMA}.meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = "
            f"EXCLUDED.value WHERE {SCHEMA}.meta.value IS DISTINCT FROM EXCLUDED.value RETURNING key",
            [key, value],
        ).fetchone()
    except psycopg.Error:
        return True
    return row is not None


def _check(conn: psycopg.Connection[Any]) -> None:
    """The pool's check before lending a connection: no round trip, just "has the server hung up on it?"."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the connection is closed")
    poller = select.poll()  # (not select.select: it fails for descriptors >= 1024)
    poller.register(conn.fileno(), select.POLLIN)
    if poller.poll(0):  # an idle connection has nothing to read unless the server closed it (we never LISTEN)
        conn.close()  # closed, the pool discards it (returned open, it would be lent again)
        raise psycopg.OperationalError("the server closed the connection")


class Database:
    """A pool of connections to one database, each acting as memserver_app with search_path set."""

    def __init__(
        self,
        url: str,
        *,
        max_size: int = POOL_MAX,
        application_name: str = "memserver",
        call_deadline: float = CALL_DEADLINE_S,
    ) -> None:
        check_url(url)
        self.url = url
        self.where = describe(url)
        self.watchdog = Watchdog(call_deadline)
        self._vector_info: TypeInfo | None = None
        self._info_lock = threading.Lock()
        self._options = ""
        self._pool: ConnectionPool[psycopg.Connection[Any]] | None = None
        self._max_size = max_size
        self._application_name = application_name
        self.model: tuple[str, int] = ("", 0)  # (name, dim) the database was opened for (set by open_database)
        self.model_id = 0

    # -- opening --------------------------------------------------------------------------------------------------

    def connect_owner(self) -> psycopg.Connection[Any]:
        """A plain autocommit connection as the URL's own role (migrations, VACUUM); raises DatabaseUnavailableError."""
        try:
            return psycopg.connect(
                self.url,
                autocommit=True,
                connect_timeout=CONNECT_TIMEOUT_S,
                application_name=self._application_name,
                **KEEPALIVES,
            )
        except psycopg.ProgrammingError:
            raise ConfigError(BAD_URL) from None
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailableError(
                f"cannot connect to PostgreSQL at {self.where}: {_first_line(exc)}"
            ) from None

    def open(self, owner: psycopg.Connection[Any]) -> None:
        """Start the pool (after migrations ran on `owner`): resolve the vector type and the search_path once."""
        row = owner.execute(
            "SELECT quote_ident(n.nspname) FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'vector'"
        ).fetchone()
        vector_schema = str(row[0]) if row else "public"
        if not owner.execute("SELECT pg_has_role(%s, 'MEMBER')", [APP_ROLE]).fetchone()[0]:  # type: ignore[index]
            raise StoreError(
                f"the role {owner.info.user!r} is not a member of {APP_ROLE}, so row-level security could not "
                f"apply to it: run GRANT {APP_ROLE} TO {owner.info.user}; as the tables' owner or a superuser"
            )
        self._options = (
            f"-c search_path={SCHEMA},{vector_schema} -c TimeZone=UTC -c role={APP_ROLE} "
            f"-c statement_timeout={STATEMENT_TIMEOUT} -c lock_timeout={LOCK_TIMEOUT}"
        )
        warning = rls_warning(owner, self.where)
        if warning and first_time(owner, f"warned.rls.{owner.info.user}", warning.split(", which ", 1)[-1]):
            security_log.warning("%s", warning)
        self._vector_info = TypeInfo.fetch(owner, "vector")
        if self._vector_info is None:
            raise StoreError(f"the database at {self.where} has no vector type (pgvector is not installed)")
        pool: ConnectionPool[psycopg.Connection[Any]] = ConnectionPool(
            self.url,
            kwargs={
                "autocommit": True,
                "connect_timeout": CONNECT_TIMEOUT_S,
                "application_name": self._application_name,
                "options": self._options,
                **KEEPALIVES,
            },
            min_size=1,
            max_size=self._max_size,
            open=False,
            configure=self._configure,
            check=_check,
            reset=_reset,
            timeout=CALL_TIMEOUT_S,
            max_idle=300,
            # Each reconnection attempt backs off exponentially (1, 2, 4 s ...) and gives up after this long; the next
            # call then starts a fresh one at once. Kept short so that a database that is back is found quickly.
            reconnect_timeout=RECONNECT_S,
            name=f"memserver {self.where}",
        )
        try:
            pool.open(wait=True, timeout=CONNECT_TIMEOUT_S * 2)
        except PoolTimeout:
            pool.close()
            raise DatabaseUnavailableError(f"cannot connect to PostgreSQL at {self.where}") from None
        self._pool = pool

    def _configure(self, conn: psycopg.Connection[Any]) -> None:
        from pgvector.psycopg.vector import register_vector_info

        register_vector_info(conn, self._vector_info)  # the type is known: no per-connection lookups

    # -- units of work ------------------------------------------------------------------------------------------

    def run(
        self,
        tenant: str,
        statements: Sequence[tuple[str, Sequence[Any] | Mapping[str, Any]]],
        *,
        write: bool = False,
        settings: Mapping[str, str] | None = None,
    ) -> list[psycopg.Cursor[Any]]:
        """Run `statements` as one transaction for `tenant`, in one round trip; their cursors, results fetched.

        In pipeline mode on an autocommit connection, everything up to the Sync is one implicit transaction:
        the set_config(..., true) calls (the tenant for row-level security, and `settings` such as
        hnsw.ef_search) hold until it ends, a failing statement rolls back the ones before it, and the answer to
        the Sync means COMMIT is done.
        """

        def body(conn: psycopg.Connection[Any]) -> list[psycopg.Cursor[Any]]:
            with conn.pipeline():
                _configure_transaction(conn, tenant, settings)
                return [conn.execute(query, params) for query, params in statements]

        return self._attempts(body, write, pipelined=True)

    def transact(
        self,
        tenant: str,
        work: Callable[[psycopg.Connection[Any]], T],
        *,
        write: bool = True,
        settings: Mapping[str, str] | None = None,
    ) -> T:
        """Run `work(conn)` in one transaction for `tenant` (any number of round trips); its result after COMMIT.

        An exception from `work` rolls the transaction back and propagates. `work` may run more than once (a
        transaction the server rolled back is run again), so it must not change anything outside the database
        before it returns.
        """

        def body(conn: psycopg.Connection[Any]) -> T:
            with conn.transaction():
                _configure_transaction(conn, tenant, settings)
                return work(conn)

        return self._attempts(body, write, pipelined=False)

    def _attempts(self, body: Callable[[psycopg.Connection[Any]], T], write: bool, pipelined: bool) -> T:
        """`body` on a pooled connection: again (up to RETRIES) after a rollback by the server, and a read once
        more after a broken connection; DatabaseUnavailableError when that does not help."""
        broken = 0
        for attempt in range(RETRIES + 1):
            try:
                return self._once(body, write)
            except _RolledBack as exc:
                if attempt == RETRIES:
                    raise DatabaseUnavailableError(str(exc)) from None
                log.info("PostgreSQL rolled a transaction back (%s); running it again", exc)
            except _BrokenConnection as exc:
                broken += 1
                if write or broken > 1:
                    raise DatabaseUnavailableError(str(exc)) from None
                log.info("retrying a read on a fresh connection to %s", self.where)
        raise AssertionError("unreachable")  # pragma: no cover

    def _once(self, body: Callable[[psycopg.Connection[Any]], T], write: bool) -> T:
        pool = self._pool
        if pool is None:
            raise StoreError("the PostgreSQL backend is closed")
        outcome = "the write may or may not have been applied" if write else "nothing was changed"
        try:
            with pool.connection() as conn, self.watchdog.guard(conn) as call:
                try:
                    return body(conn)
                except psycopg.OperationalError as exc:
                    if call["expired"]:
                        raise _BrokenConnection(
                            f"PostgreSQL at {self.where} did not answer within {self.watchdog.timeout:.0f} s; {outcome}"
                        ) from None
                    if _rolled_back(exc):
                        raise _RolledBack(
                            f"PostgreSQL at {self.where} is busy ({_first_line(exc)}); nothing was changed. Try again"
                        ) from None
                    if isinstance(exc, psycopg.errors.QueryCanceled):
                        raise DatabaseUnavailableError(
                            f"PostgreSQL at {self.where} cancelled the call ({_first_line(exc)}); nothing was changed"
                        ) from None
                    if not conn.broken:
                        raise StoreError(
                            f"PostgreSQL at {self.where} refused the call ({_first_line(exc)}); nothing was changed"
                        ) from None
                    raise
        except PoolTimeout:
            raise self._no_connection(pool, "nothing was changed") from None
        except psycopg.OperationalError as exc:
            with contextlib.suppress(Exception):
                pool.check()  # drop the other connections the same outage broke
            raise _BrokenConnection(
                f"the connection to PostgreSQL at {self.where} failed during the call ({_first_line(exc)}); {outcome}"
            ) from None

    def _no_connection(self, pool: ConnectionPool[psycopg.Connection[Any]], outcome: str) -> DatabaseUnavailableError:
        """Why no connection came within the pool's timeout: every one is lent out (this process is busy: a burst
        of calls, or long ones), or the pool could not open one (the database is unreachable)."""
        stats = pool.get_stats()
        size, free = stats.get("pool_size", 0), stats.get("pool_available", 0)
        wait = f"no connection within {pool.timeout:g} s"
        if size >= pool.max_size and free == 0:
            return DatabaseUnavailableError(
                f"all {pool.max_size} connections of this process to PostgreSQL at {self.where} are busy ({wait}, "
                f"{stats.get('requests_waiting', 0)} call(s) waiting); {outcome}. Try again shortly"
            )
        return DatabaseUnavailableError(
            f"PostgreSQL at {self.where} is unreachable ({wait}); {outcome}. Try again when the database is back"
        )

    def stream(self, tenant: str, query: str, params: Sequence[Any], batch: int) -> Iterator[tuple[Any, ...]]:
        """The rows of `query` from one REPEATABLE READ snapshot, `batch` at a time (a server-side cursor)."""
        pool = self._pool
        if pool is None:
            raise StoreError("the PostgreSQL backend is closed")
        try:
            with pool.connection() as conn, conn.transaction():
                conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                conn.execute("SELECT set_config('memserver.tenant', %s, true)", [tenant])
                with conn.cursor(name="memserver_export", binary=True) as cursor:
                    cursor.itersize = batch
                    cursor.execute(query, params)
                    yield from cursor
        except PoolTimeout:
            raise self._no_connection(pool, "nothing was exported") from None
        except psycopg.OperationalError as exc:
            raise DatabaseUnavailableError(
                f"the connection to PostgreSQL at {self.where} failed during the export ({_first_line(exc)})"
            ) from None

    # -- administration (as the URL's own role) ------------------------------------------------------------------

    TABLES = ("memories", "postings", "memory_tags", "tenant_stats")

    SIZE_SQL = (
        "SELECT sum(pg_total_relation_size(to_regclass('memserver.' || t))) "
        "FROM unnest('{memories,postings,memory_tags,tenant_stats}'::text[]) t"
    )
    HNSW_SQL = "SELECT reloptions FROM pg_class WHERE oid = to_regclass('memserver.memories_hnsw')"

    def index_parameters(self, tenant: str) -> dict[str, Any]:
        """The HNSW index's parameters (the same for every tenant: nothing about the others)."""
        from memserver.postgres import search

        hnsw_row = self.run(tenant, [(self.HNSW_SQL, [])])[0].fetchone()
        options = dict(option.split("=", 1) for option in (hnsw_row[0] if hnsw_row and hnsw_row[0] else []))
        return {
            "kind": "hnsw",
            "m": int(options.get("m", 16)),
            "ef_construction": int(options.get("ef_construction", 64)),
            "ef_search": search.EF_SEARCH,
            "iterative_scan": "strict_order",
        }

    def deployment_figures(self) -> dict[str, Any]:
        """The whole database's figures, every tenant (`memserver db stats`, never an MCP user): from the catalog,
        so any login role may read them; the tenants (those that stored something) need a role RLS does not limit."""
        with self.connect_owner() as conn:
            rows_sql = "SELECT reltuples FROM pg_class WHERE oid = to_regclass('memserver.memories')"
            rows, size = conn.execute(rows_sql).fetchone(), conn.execute(self.SIZE_SQL).fetchone()
            tenants = conn.execute(
                "SELECT CASE WHEN r.rolsuper OR r.rolbypassrls OR pg_has_role(session_user, c.relowner, 'USAGE') "
                "THEN (SELECT count(DISTINCT tenant) FROM memserver.tenant_stats) END FROM pg_roles r, pg_class c "
                "WHERE r.rolname = session_user AND c.oid = to_regclass('memserver.memories')"
            ).fetchone()
        return {
            "database": self.where,
            "scope": "the whole database: every tenant",
            "tenants": None if not tenants or tenants[0] is None else int(tenants[0]),
            "table_rows_estimate": max(int(rows[0] or 0), 0) if rows else 0,
            "bytes_on_disk": int(size[0] or 0) if size else 0,
        }

    def analyze(self) -> bool:
        """ANALYZE memserver's tables, if the URL's role owns them (False: it does not; autovacuum will, later).

        After a bulk load the planner has no statistics for the new rows until autovacuum's next round (up to a
        minute or more): it then estimates one row where there are thousands and joins a keyword search's scored
        rows to its candidates in a nested loop, n x n (seconds at 3,000 memories, seen in the import kill test).
        Best effort: what was written stays written; a failure is logged, not raised."""
        try:
            with self.connect_owner() as conn:
                if not _owns_tables(conn):
                    log.info("this role does not own memserver's tables: autovacuum will ANALYZE them")
                    return False
                conn.execute("ANALYZE " + ", ".join(f"memserver.{t}" for t in self.TABLES))
        except (psycopg.Error, DatabaseUnavailableError) as exc:
            log.warning(
                "could not ANALYZE memserver's tables at %s (%s); autovacuum will", self.where, _first_line(exc)
            )
            return False
        return True

    def vacuum(self) -> dict[str, Any]:
        """VACUUM (ANALYZE) memserver's tables; needs their owner (or a superuser)."""
        with self.connect_owner() as conn:
            if not _owns_tables(conn):
                raise StoreError(
                    f"compact runs VACUUM, which needs the owner of memserver's tables: connect as it "
                    f"(the role {conn.info.user!r} is not)"
                )
            dead = conn.execute(
                "SELECT coalesce(n_dead_tup, 0) FROM pg_stat_user_tables WHERE relid = 'memserver.memories'::regclass"
            ).fetchone()
            before = conn.execute(self.SIZE_SQL).fetchone()
            conn.execute("VACUUM (ANALYZE) " + ", ".join(f"memserver.{t}" for t in self.TABLES))
            after = conn.execute(self.SIZE_SQL).fetchone()
        return {
            "removed": int(dead[0]) if dead else 0,
            "bytes_before": int(before[0] or 0) if before else 0,
            "bytes_after": int(after[0] or 0) if after else 0,
        }

    def close(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.close()


class _BrokenConnection(DatabaseUnavailableError):
    """A connection broke during a call (as opposed to: no connection could be had)."""


class _RolledBack(DatabaseUnavailableError):
    """The server rolled the transaction back (deadlock, serialization failure, lock timeout): nothing changed."""


def _owns_tables(conn: psycopg.Connection[Any]) -> bool:
    """Whether the connection's role may act as the owner of memserver's tables (VACUUM, ANALYZE)."""
    row = conn.execute(
        "SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_class c WHERE c.oid = 'memserver.memories'::regclass"
    ).fetchone()
    return bool(row and row[0])


def _rolled_back(exc: psycopg.Error) -> bool:
    """Whether the server rolled the transaction back on its own: class 40 (serialization failure, deadlock
    detected: psycopg's DeadlockDetected is no TransactionRollback subclass) or 55P03 (lock_timeout)."""
    state = exc.sqlstate or ""
    return state.startswith("40") or state == "55P03"


def _configure_transaction(conn: psycopg.Connection[Any], tenant: str, settings: Mapping[str, str] | None) -> None:
    """The transaction-local settings: the tenant row-level security reads, and the caller's (hnsw.*)."""
    config = {"memserver.tenant": tenant, **(settings or {})}
    setup = "SELECT " + ", ".join("set_config(%s, %s, true)" for _ in config)
    conn.execute(setup, [item for pair in config.items() for item in pair])


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__
