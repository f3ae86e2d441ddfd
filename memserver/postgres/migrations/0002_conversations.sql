-- memserver schema 2: the conversation fields (issue 12): occurred_at, speaker, role, session, namespace, and
-- history (replaces / replaced_by, and the tombstones of forgotten memories for `as_of`).
--
-- In place and without rewriting the table: schema 1 already has the columns occurred_at, speaker, role, session,
-- namespace, replaces and replaced_by (NULL / ''), so a row written before this migration reads as
-- occurred_at = created_at (coalesce), no labels, and the default namespace, which is stored as '' (every
-- statement maps "default" to ''). Only two columns are added (no default: no rewrite) and indexes rebuilt.
--
-- A memory is current when replaced_by IS NULL AND forgotten_at IS NULL. History (replaced) and tombstones
-- (forgotten, kept until compact() purges them) stay in the table; the derived tables (postings, memory_tags,
-- tenant_stats) hold the current memories only, like the local store's indexes, so BM25's statistics are those
-- of the current memories.

ALTER TABLE memories ADD COLUMN replaced_at timestamptz, ADD COLUMN forgotten_at timestamptz;

-- Dedup is per namespace and among current memories only (an older version may say what a new memory says).
DROP INDEX memories_dedup;
CREATE UNIQUE INDEX memories_dedup ON memories (tenant, namespace, content_hash)
    WHERE replaced_by IS NULL AND forgotten_at IS NULL;
-- The listings, time bounds and list_page's cursor: current memories by occurred_at, per namespace.
DROP INDEX memories_time;
CREATE INDEX memories_recent ON memories (tenant, namespace, (coalesce(occurred_at, created_at)), seq)
    WHERE replaced_by IS NULL AND forgotten_at IS NULL;
-- History and tombstones (as_of, select with include_replaced, stats' "replaced"): few rows.
CREATE INDEX memories_held ON memories (tenant, seq) WHERE replaced_by IS NOT NULL OR forgotten_at IS NOT NULL;

-- Per-namespace counts beside BM25's per-tenant statistics (namespaces(), plan estimates): the slots gain the
-- namespace. BM25 still reads the tenant's sum (the local store's keyword index spans its namespaces too).
ALTER TABLE tenant_stats ADD COLUMN namespace text NOT NULL DEFAULT '';
-- revision(): every statement that adds, changes or deletes memories adds the number of rows to `changes` (only
-- ever grows: a forget, a replace and a compaction each move it, which max(seq) and the count alone did not).
ALTER TABLE tenant_stats ADD COLUMN changes bigint NOT NULL DEFAULT 0;
ALTER TABLE tenant_stats DROP CONSTRAINT tenant_stats_pkey;
ALTER TABLE tenant_stats ADD PRIMARY KEY (tenant, namespace, slot);

CREATE FUNCTION memories_bump(tenant_name text, n bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memserver.tenant_stats AS s (tenant, namespace, slot, docs, length, changes)
        VALUES (tenant_name, '', pg_backend_pid() % 16, 0, 0, n)
        ON CONFLICT (tenant, namespace, slot) DO UPDATE SET changes = s.changes + excluded.changes;
END $$;

CREATE OR REPLACE FUNCTION memories_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memserver.memories_bump(n.tenant, count(*)) FROM added n GROUP BY n.tenant;
    INSERT INTO memserver.postings (tenant, term, seq, tf, doc_len)
        SELECT n.tenant, t.term, n.seq, t.tf, n.doc_len FROM added n, unnest(n.terms, n.tfs) AS t(term, tf)
        WHERE n.replaced_by IS NULL AND n.forgotten_at IS NULL;
    INSERT INTO memserver.memory_tags (tenant, tag, seq)
        SELECT n.tenant, t.tag, n.seq FROM added n, unnest(n.tags) AS t(tag)
        WHERE n.replaced_by IS NULL AND n.forgotten_at IS NULL;
    INSERT INTO memserver.tenant_stats AS s (tenant, namespace, slot, docs, length)
        SELECT tenant, namespace, pg_backend_pid() % 16, count(*), sum(doc_len) FROM added
        WHERE replaced_by IS NULL AND forgotten_at IS NULL GROUP BY tenant, namespace
        ON CONFLICT (tenant, namespace, slot)
        DO UPDATE SET docs = s.docs + excluded.docs, length = s.length + excluded.length;
    RETURN NULL;
END $$;

-- Rows that stop being current (replaced, or forgotten) leave the derived tables; so do current rows deleted.
CREATE FUNCTION memories_retire(tenant_rows memserver.memories[]) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memserver.postings p USING (SELECT o.tenant, unnest(o.terms) AS term, o.seq FROM unnest(tenant_rows) o) r
        WHERE p.tenant = r.tenant AND p.term = r.term AND p.seq = r.seq;
    DELETE FROM memserver.memory_tags g USING (SELECT o.tenant, unnest(o.tags) AS tag, o.seq FROM unnest(tenant_rows) o) r
        WHERE g.tenant = r.tenant AND g.tag = r.tag AND g.seq = r.seq;
    INSERT INTO memserver.tenant_stats AS s (tenant, namespace, slot, docs, length)
        SELECT o.tenant, o.namespace, pg_backend_pid() % 16, -count(*), -sum(o.doc_len) FROM unnest(tenant_rows) o
        GROUP BY o.tenant, o.namespace
        ON CONFLICT (tenant, namespace, slot)
        DO UPDATE SET docs = s.docs + excluded.docs, length = s.length + excluded.length;
END $$;

CREATE OR REPLACE FUNCTION memories_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memserver.memories_bump(o.tenant, count(*)) FROM removed o GROUP BY o.tenant;
    PERFORM memserver.memories_retire(ARRAY(
        SELECT o::memserver.memories FROM removed o WHERE o.replaced_by IS NULL AND o.forgotten_at IS NULL));
    RETURN NULL;
END $$;

CREATE FUNCTION memories_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memserver.memories_bump(n.tenant, count(*)) FROM after n GROUP BY n.tenant;
    PERFORM memserver.memories_retire(ARRAY(
        SELECT o::memserver.memories FROM before o JOIN after n ON n.tenant = o.tenant AND n.seq = o.seq
        WHERE o.replaced_by IS NULL AND o.forgotten_at IS NULL
          AND (n.replaced_by IS NOT NULL OR n.forgotten_at IS NOT NULL)));
    RETURN NULL;
END $$;

-- History stays history, and a tombstone stays one: nothing brings a memory back but adding it again.
CREATE FUNCTION memories_refuse_revival() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a replaced or forgotten memory cannot become current again; add it again';
END $$;

CREATE TRIGGER memories_changed AFTER UPDATE ON memories
    REFERENCING OLD TABLE AS before NEW TABLE AS after FOR EACH STATEMENT EXECUTE FUNCTION memories_changed();
CREATE TRIGGER memories_no_revival BEFORE UPDATE OF replaced_by, forgotten_at ON memories FOR EACH ROW
    WHEN ((OLD.replaced_by IS NOT NULL AND NEW.replaced_by IS NULL)
          OR (OLD.forgotten_at IS NOT NULL AND NEW.forgotten_at IS NULL))
    EXECUTE FUNCTION memories_refuse_revival();

GRANT UPDATE (replaced_by, replaced_at, forgotten_at) ON memories TO memserver_app;
