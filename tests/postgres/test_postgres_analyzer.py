"""A PostgreSQL database whose keyword terms an older analyzer made (before Snowball stemming) is re-indexed: on
open and by `memserver db migrate`, resumably, until its terms, postings and BM25 statistics are a fresh
database's (memserver/postgres/analyzer.py, migrations/0003)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg
import pytest

from memserver.embedding import sources
from memserver.errors import StoreError
from memserver.postgres import analyzer, rows
from memserver.postgres import schema as pg_schema
from memserver.postgres.backend import PostgresBackend, open_database
from memserver.postgres.terms import ANALYZER
from memserver.retrieval.terms import date_text, raw_tokens
from tests.conftest import PostgresForTests
from tests.support.fakes import FakeEmbedder

ROOT = Path(__file__).resolve().parents[2]
OLD_ANALYZER = "1"  # what memserver before Snowball stemming wrote in meta 'keyword'
MEMORIES = [  # (tenant, content, occurred_at)
    ("t", "Anna proposed moving the launch to March", "2024-03-14T10:00:00+00:00"),
    ("t", "The invoices for INV-2024-0173 were paid by Ravi", "2024-03-15T09:30:00+00:00"),
    ("t", "Ravi is running the database migrations tonight", "2024-04-01T20:00:00+00:00"),
    ("u", "Zoë cancelled the meetings about the proposal", "2024-05-02T08:00:00+00:00"),
    ("t", "The boiler was serviced; it needs servicing yearly", "2024-06-10T12:00:00+00:00"),
    ("u", "Anna's proposals were accepted", "2024-07-01T16:45:00+00:00"),
]


def _unstemmed(content: str, occurred_at: str) -> tuple[list[str], list[int], int]:
    """(terms, tfs, doc_len) as an analyzer without stemming (nor stopwords) made them: the raw tokens."""
    counts = Counter(raw.decode("utf-8") for raw in raw_tokens(f"{content} {date_text(occurred_at)}"))
    return list(counts), list(counts.values()), sum(counts.values())


def _insert_unstemmed(
    conn: psycopg.Connection[Any],
    tenant: str,
    content: str,
    occurred_at: str,
    model_name: str = FakeEmbedder.model_name,
) -> None:
    """A row as a schema-2 memserver before stemming wrote it (the triggers fill postings and statistics)."""
    model_id = pg_schema.check_model(conn, model_name, FakeEmbedder.dim)
    terms, tfs, doc_len = _unstemmed(content, occurred_at)
    vector = "[" + ",".join(map(str, FakeEmbedder().embed([content])[0])) + "]"
    conn.execute(
        "INSERT INTO memserver.memories (id, created_at, occurred_at, doc_len, model_id, tenant, content_hash, "
        "content, source, terms, tfs, embedding) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, '', %s, %s, %s::vector)",
        [uuid.uuid4(), occurred_at, occurred_at, doc_len, model_id, tenant, rows.content_hash(content), content,
         terms, tfs, vector],
    )  # fmt: skip


def _write_fresh(url: str) -> None:
    for tenant, content, occurred_at in MEMORIES:
        with PostgresBackend(url, tenant=tenant, embedder=FakeEmbedder()) as b:
            b.add(content, occurred_at=occurred_at)


def _keyword_index(url: str) -> dict[str, Any]:
    """Everything BM25 reads, and the rows' terms: equal on two databases holding the same memories."""
    queries = {
        "rows": "SELECT tenant, seq, terms, tfs, doc_len FROM memserver.memories ORDER BY 1, 2",
        "postings": "SELECT tenant, term, seq, tf, doc_len FROM memserver.postings ORDER BY 1, 2, 3",
        "stats": "SELECT tenant, sum(docs), sum(length) FROM memserver.tenant_stats GROUP BY 1 ORDER BY 1",
    }
    with psycopg.connect(url, autocommit=True) as conn:
        return {name: conn.execute(query).fetchall() for name, query in queries.items()}


def _ranking(url: str, tenant: str, query: str) -> list[tuple[str, float]]:
    with PostgresBackend(url, tenant=tenant, embedder=FakeEmbedder()) as b:
        return [(h.memory.content, round(h.score, 9)) for h in b.search(query, limit=10, mode="keyword")]


def _made_with(url: str) -> str | None:
    with psycopg.connect(url, autocommit=True) as conn:
        return analyzer.made_with(conn)


def test_a_database_indexed_before_stemming_is_reindexed_on_open(postgres: PostgresForTests) -> None:
    """Before the re-index, "proposal" missed "Anna proposed ..." (stored term "proposed", query term "propos");
    after it, the database's rows, postings and BM25 statistics are those of a database written by this code."""
    old, fresh = postgres.database("unstemmed"), postgres.database("stemmed")
    _write_fresh(fresh)
    with psycopg.connect(old, autocommit=True) as conn:
        pg_schema.migrate(conn, FakeEmbedder.dim, upto=2)
        for tenant, content, occurred_at in MEMORIES:
            _insert_unstemmed(conn, tenant, content, occurred_at)
        conn.execute("UPDATE memserver.meta SET value = %s WHERE key = 'keyword'", [OLD_ANALYZER])
    assert _keyword_index(old) != _keyword_index(fresh)

    assert [content for content, _ in _ranking(old, "t", "proposals")] == [MEMORIES[0][1]]  # opens: re-indexes
    assert _made_with(old) == ANALYZER
    assert _keyword_index(old) == _keyword_index(fresh)
    for tenant, query in [("t", "services"), ("t", "paying invoice"), ("t", "migrating"), ("u", "proposed")]:
        assert _ranking(old, tenant, query) == _ranking(fresh, tenant, query) != []

    # The rows' terms are their postings': replacing a re-indexed memory takes all of its postings out.
    with PostgresBackend(old, tenant="t", embedder=FakeEmbedder()) as b:
        (hit,) = b.search("boiler", limit=1, mode="keyword")
        b.add("The boiler was replaced", replaces=hit.memory.id)
        assert [h.memory.content for h in b.search("serviced", limit=5, mode="keyword")] == []
    with psycopg.connect(old, autocommit=True) as conn:
        replaced = conn.execute(
            "SELECT count(*) FROM memserver.postings p JOIN memserver.memories m USING (tenant, seq) "
            "WHERE m.replaced_by IS NOT NULL"
        ).fetchone()
        assert replaced == (0,)


def test_an_interrupted_reindex_resumes_and_refuses_to_serve_meanwhile(
    postgres: PostgresForTests, caplog: pytest.LogCaptureFixture
) -> None:
    """A re-index stopped half-way leaves some rows re-indexed and the old stamp: a database opened without
    migrating is refused, and the next run rewrites only the rows still left, then stamps the database."""
    url = postgres.database("halfway")
    _write_fresh(url)
    current = _keyword_index(url)
    left = [(tenant, content, occurred_at) for i, (tenant, content, occurred_at) in enumerate(MEMORIES) if i % 2]
    rewrite = "UPDATE memserver.memories SET terms = %s, tfs = %s, doc_len = %s WHERE tenant = %s AND content = %s"
    with psycopg.connect(url, autocommit=True) as conn, conn.transaction():
        for tenant, content, occurred_at in left:  # what the first run had not reached (schema 3 allows the owner)
            conn.execute(rewrite, [*_unstemmed(content, occurred_at), tenant, content])
        conn.execute("UPDATE memserver.meta SET value = %s WHERE key = 'keyword'", [OLD_ANALYZER])
    assert _keyword_index(url) != current

    with pytest.raises(StoreError, match="memserver db migrate"):
        open_database(url, FakeEmbedder.model_name, FakeEmbedder.dim, migrate=False)
    with psycopg.connect(url, autocommit=True) as conn:  # row-level security would hide every row from it
        conn.execute("SET ROLE memserver_app")
        with pytest.raises(StoreError, match="as the tables' owner"):
            analyzer.reindex(conn, pg_schema.MIGRATION_LOCK)
    assert _made_with(url) == OLD_ANALYZER
    with psycopg.connect(url, autocommit=True) as conn, caplog.at_level(logging.INFO, "memserver.postgres.analyzer"):
        assert analyzer.reindex(conn, pg_schema.MIGRATION_LOCK, batch=2) == len(left)
        assert analyzer.reindex(conn, pg_schema.MIGRATION_LOCK, batch=2) == 0  # stamped: nothing to do
    assert _keyword_index(url) == current
    assert _made_with(url) == ANALYZER
    messages = [r.getMessage() for r in caplog.records if r.name == "memserver.postgres.analyzer"]
    assert messages[0].startswith(f"re-indexing the keyword terms of {len(MEMORIES)} memories")
    assert messages[-1].startswith(f"re-indexed the keyword terms of {len(MEMORIES)} memories ({len(left)} rewritten)")


def test_db_migrate_reindexes_a_stale_database_and_says_so_on_stderr(postgres: PostgresForTests) -> None:
    """`memserver db migrate` runs the re-index too (for deployments whose server role may not migrate)."""
    url = postgres.database("clireindex")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("MEMSERVER_DATABASE_URL", None)
    command = [sys.executable, "-m", "memserver", "db", "migrate", "--database", url]
    first = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert first.returncode == 0, first.stderr
    with psycopg.connect(url, autocommit=True) as conn:
        for tenant, content, occurred_at in MEMORIES[:2]:
            _insert_unstemmed(conn, tenant, content, occurred_at, model_name=sources.MODEL_ID)
        conn.execute("UPDATE memserver.meta SET value = %s WHERE key = 'keyword'", [OLD_ANALYZER])
    second = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, cwd=ROOT)
    assert second.returncode == 0 and "(already current)" in second.stdout, second.stderr
    assert "re-indexed the keyword terms of 2 memories (2 rewritten)" in second.stderr
    assert _made_with(url) == ANALYZER


def test_a_database_indexed_without_tags_and_cjk_pairs_is_reindexed(postgres: PostgresForTests) -> None:
    """The analyzer before issue 23 indexed neither the tags nor CJK character pairs (a CJK run was one token):
    such a database is re-indexed on open, after which a tag and a CJK word are found by keyword search."""
    url = postgres.database("before-tags")
    with PostgresBackend(url, tenant="t", embedder=FakeEmbedder()) as b:
        falcon = b.add("Budget approved for the migration", tags=["project-falcon"]).id
        hotel = b.add("東京のホテルは新宿に予約した").id
    with psycopg.connect(url, autocommit=True) as conn:  # the rows as that analyzer left them (as the owner)
        for content, occurred in conn.execute("SELECT content, occurred_at FROM memserver.memories").fetchall():
            stamp = occurred.isoformat()
            counts = Counter(f"{content} {date_text(stamp)}".lower().replace("。", " ").split())
            conn.execute(
                "UPDATE memserver.memories SET terms = %s, tfs = %s, doc_len = %s WHERE content = %s",
                [list(counts), list(counts.values()), sum(counts.values()), content],
            )
        conn.execute("UPDATE memserver.meta SET value = 's-stem+snowball-english' WHERE key = 'keyword'")
    assert _made_with(url) != ANALYZER

    with PostgresBackend(url, tenant="t", embedder=FakeEmbedder()) as b:  # opens: re-indexes
        assert [h.memory.id for h in b.search("project falcon", limit=5, mode="keyword")] == [falcon]
        assert [h.memory.id for h in b.search("東京", limit=5, mode="keyword")] == [hotel]
    assert _made_with(url) == ANALYZER
