"""One tenant's write path on PostgreSQL, as PostgresBackend calls it: embed only what is new, then one transaction.

Embedding is the slow part of a write (milliseconds per memory), so it happens before the transaction and only for what
needs it: `precheck` reads, in one plain statement, what the rules need (writes.View), so a known duplicate is never
embedded, and for add / add_many runs the rules once, so a bad `replaces` is refused before any model run. The
transaction (writes.write) then takes the content locks and runs the same rules again on what is committed by then.
Forgetting is one UPDATE. The statements are writes.py's; PostgresBackend checks the inputs and owns the model.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from memserver.contract import inputs
from memserver.contract.backend import Memory
from memserver.contract.write_rules import Pending
from memserver.postgres import writes
from memserver.postgres.pool import Database

FORGET_SQL = (
    "UPDATE memserver.memories m SET forgotten_at = %s::timestamptz FROM (SELECT seq FROM memserver.memories "
    "WHERE tenant = %s AND namespace = %s AND id = ANY(%s) AND forgotten_at IS NULL ORDER BY id FOR UPDATE) s "
    "WHERE m.tenant = %s AND m.seq = s.seq RETURNING m.id"
)


class Writer:
    """Writes a tenant's memories. `db` gives the backend's pool (StoreError once closed); `embed` turns texts
    into a float32 array of shape (len(texts), dim) (the backend's, which checks the shape)."""

    def __init__(
        self,
        db: Callable[[], Database],
        tenant: str,
        model_id: int,
        embed: Callable[[Sequence[str]], np.ndarray],
    ) -> None:
        self.db, self.tenant, self.model_id = db, tenant, model_id
        self.embed = embed

    def write(self, items: list[Pending]) -> list[Memory]:
        """add / add_many: a bad `replaces` refused before embedding, then one transaction; a memory per item."""
        self.precheck(items, check=True)
        return self._transact(items)[0]

    def import_batch(self, batch: list[Pending], held: list[Pending]) -> int:
        """One batch of an import (contract/importing.import_records): the memories added; the items that
        replace one not stored yet are appended to `held` for a later pass."""
        if not batch:
            return 0
        self.precheck(batch)
        written, waiting, _ = self._transact(batch, importing=True)
        held += waiting
        return sum(1 for m in written if not m.duplicate)

    def precheck(self, items: list[Pending], check: bool = False) -> None:
        """Embed the items that are not known duplicates and have no vector; with `check`, refuse a bad
        `replaces` first (the write transaction checks again, on what is committed by then)."""
        view = writes.view_of(self.db().run(self.tenant, writes.view_statements(self.tenant, items, lock=False)))
        if check:
            writes.plan(view, items, defer=False)
        known = view.dups.keys()  # (and an imported id that is stored: skipped, as the local store does)
        todo = [
            it
            for it in items
            if it.vector is None and writes.content_of(it) not in known and it.m.id not in view.stored
        ]
        if todo:
            for it, v in zip(todo, self.embed([it.m.content for it in todo]), strict=True):
                it.vector = v

    def forget(self, ids: Iterable[str], namespace: str) -> int:
        """delete_many: one UPDATE setting forgotten_at (the tombstone), the rows locked in id order; how many
        current memories of `namespace` it forgot."""
        wanted = sorted(uuid.UUID(i) for i in ids)
        if not wanted:
            self.db()  # (closed: StoreError)
            return 0
        params = [inputs.now(), self.tenant, namespace, wanted, self.tenant]
        return len(self.db().run(self.tenant, [(FORGET_SQL, params)], write=True)[0].fetchall())

    def _transact(self, items: list[Pending], importing: bool = False) -> tuple[list[Memory], list[Pending], int]:
        def work(conn: Any) -> tuple[list[Memory], list[Pending], int]:
            return writes.write(conn, self.tenant, self.model_id, items, self.embed, importing=importing)

        return self.db().transact(self.tenant, work)
