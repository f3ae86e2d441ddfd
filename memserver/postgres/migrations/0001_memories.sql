-- memserver schema 1: memories, their keyword postings and tags, per-tenant statistics, row-level security.
-- Applied by memserver/postgres/schema.py under an advisory lock, in one transaction, with search_path set to the
-- schema `memserver` (and pgvector's). {{DIM}} is the embedding dimension the database is created for; `meta`
-- records it and the model.

CREATE TABLE meta (
    key   text PRIMARY KEY,
    value text NOT NULL
);

-- One row per memory. Fixed-width columns first (no alignment padding), then the variable ones.
CREATE TABLE memories (
    id           uuid        NOT NULL,
    seq          bigint      GENERATED ALWAYS AS IDENTITY,  -- insertion order: breaks ties like the local store's rows
    created_at   timestamptz NOT NULL,
    doc_len      integer     NOT NULL,                      -- BM25 length: terms indexed, repeats included
    model_id     smallint    NOT NULL,                      -- meta 'model.<id>' names the model of the embedding
    tenant       text        NOT NULL,                      -- whose memory: "collection" or "user/collection"
    namespace    text        NOT NULL DEFAULT '',           -- a partition inside the tenant (issue 12); '' for now
    content_hash bytea       NOT NULL,                      -- BLAKE2b-128 of the whitespace-normalised content
    content      text        NOT NULL,
    tags         text[]      NOT NULL DEFAULT '{}',
    source       text        NOT NULL DEFAULT '',
    terms        text[]      NOT NULL,                      -- distinct keyword terms (memserver's tokenizer) ...
    tfs          smallint[]  NOT NULL,                      -- ... and how often each occurs
    embedding    vector({{DIM}}) NOT NULL,
    -- Conversation fields (issue 12): NULL until that lands, so adding their use needs no table rewrite.
    occurred_at  timestamptz,
    speaker      text,
    role         text,
    session      text,
    replaces     uuid,
    replaced_by  uuid,
    PRIMARY KEY (tenant, id),
    CHECK (cardinality(terms) = cardinality(tfs))
);
-- The embedding stays in the row (pgvector's default, EXTERNAL, moves it out to TOAST whenever the row passes ~2 kB,
-- which most rows with content and terms do: then every distance of an exact scan costs a TOAST fetch). Long
-- content and term lists are compressed or moved out instead.
ALTER TABLE memories ALTER COLUMN embedding SET STORAGE PLAIN;
-- Exact dedup from any number of processes: INSERT ... ON CONFLICT DO NOTHING on this index.
CREATE UNIQUE INDEX memories_dedup ON memories (tenant, namespace, content_hash);
CREATE UNIQUE INDEX memories_seq ON memories (tenant, seq);
-- list_recent, time bounds, export order.
CREATE INDEX memories_time ON memories (tenant, created_at, seq);
CREATE INDEX memories_source ON memories (tenant, source);
CREATE INDEX memories_hnsw ON memories USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 200);

-- Tags, one row per (memory, tag). Not a GIN index on memories.tags: under row-level security PostgreSQL uses an
-- index only for leakproof operators, and the array operators (&&, @>) are not, so a tag filter through GIN turned
-- into a sequential scan of the table. `tag = ANY(...)` is.
CREATE TABLE memory_tags (
    tenant text   NOT NULL,
    tag    text   NOT NULL,
    seq    bigint NOT NULL,
    PRIMARY KEY (tenant, tag, seq)
);

-- The keyword index: one posting per (memory, term). The primary key covers tf and doc_len, so BM25 reads only
-- index pages: the query's terms' ranges.
CREATE TABLE postings (
    tenant  text     NOT NULL,
    term    text     NOT NULL,
    seq     bigint   NOT NULL,
    tf      smallint NOT NULL,
    doc_len integer  NOT NULL,
    PRIMARY KEY (tenant, term, seq) INCLUDE (tf, doc_len)
);

-- BM25's corpus statistics per tenant (documents, total length), as 16 counters per tenant: each session adds to
-- the slot of its backend pid, so concurrent writers rarely wait on one another's row lock. Readers sum them.
CREATE TABLE tenant_stats (
    tenant text     NOT NULL,
    slot   smallint NOT NULL,
    docs   bigint   NOT NULL,
    length bigint   NOT NULL,
    PRIMARY KEY (tenant, slot)
);

-- postings, memory_tags and tenant_stats are derived from memories by these statement-level triggers, so no
-- writer (memserver, an import, a hand-written DELETE) can leave them disagreeing with it.
CREATE FUNCTION memories_added() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO memserver.postings (tenant, term, seq, tf, doc_len)
        SELECT n.tenant, t.term, n.seq, t.tf, n.doc_len FROM added n, unnest(n.terms, n.tfs) AS t(term, tf);
    INSERT INTO memserver.memory_tags (tenant, tag, seq)
        SELECT n.tenant, t.tag, n.seq FROM added n, unnest(n.tags) AS t(tag);
    INSERT INTO memserver.tenant_stats AS s (tenant, slot, docs, length)
        SELECT tenant, pg_backend_pid() % 16, count(*), sum(doc_len) FROM added GROUP BY tenant
        ON CONFLICT (tenant, slot) DO UPDATE SET docs = s.docs + excluded.docs, length = s.length + excluded.length;
    RETURN NULL;
END $$;

CREATE FUNCTION memories_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM memserver.postings p USING (SELECT o.tenant, unnest(o.terms) AS term, o.seq FROM removed o) r
        WHERE p.tenant = r.tenant AND p.term = r.term AND p.seq = r.seq;
    DELETE FROM memserver.memory_tags g USING (SELECT o.tenant, unnest(o.tags) AS tag, o.seq FROM removed o) r
        WHERE g.tenant = r.tenant AND g.tag = r.tag AND g.seq = r.seq;
    INSERT INTO memserver.tenant_stats AS s (tenant, slot, docs, length)
        SELECT tenant, pg_backend_pid() % 16, -count(*), -sum(doc_len) FROM removed GROUP BY tenant
        ON CONFLICT (tenant, slot) DO UPDATE SET docs = s.docs + excluded.docs, length = s.length + excluded.length;
    RETURN NULL;
END $$;

-- What the derived tables hold is never changed in place: a memory is added once and deleted once.
CREATE FUNCTION memories_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a memory''s content, tags and keys cannot be changed in place; delete it and add it again';
END $$;

CREATE TRIGGER memories_added AFTER INSERT ON memories
    REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION memories_added();
CREATE TRIGGER memories_removed AFTER DELETE ON memories
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION memories_removed();
CREATE TRIGGER memories_immutable BEFORE UPDATE OF tenant, id, seq, content, tags, terms, tfs, doc_len, created_at
    ON memories FOR EACH ROW EXECUTE FUNCTION memories_refuse_change();

-- Row-level security, the second wall: memserver acts as the role memserver_app, which owns nothing and sees only
-- the rows of the tenant named for the transaction (set_config('memserver.tenant', ..., true)). Every statement
-- memserver sends names its tenant as well; with the setting absent, no row is visible.
ALTER TABLE memories ENABLE ROW LEVEL SECURITY;
ALTER TABLE memory_tags ENABLE ROW LEVEL SECURITY;
ALTER TABLE postings ENABLE ROW LEVEL SECURITY;
ALTER TABLE tenant_stats ENABLE ROW LEVEL SECURITY;
CREATE POLICY tenant_rows ON memories
    USING (tenant = current_setting('memserver.tenant', true))
    WITH CHECK (tenant = current_setting('memserver.tenant', true));
CREATE POLICY tenant_rows ON memory_tags
    USING (tenant = current_setting('memserver.tenant', true))
    WITH CHECK (tenant = current_setting('memserver.tenant', true));
CREATE POLICY tenant_rows ON postings
    USING (tenant = current_setting('memserver.tenant', true))
    WITH CHECK (tenant = current_setting('memserver.tenant', true));
CREATE POLICY tenant_rows ON tenant_stats
    USING (tenant = current_setting('memserver.tenant', true))
    WITH CHECK (tenant = current_setting('memserver.tenant', true));

GRANT USAGE ON SCHEMA memserver TO memserver_app;
GRANT SELECT ON meta TO memserver_app;
GRANT SELECT, INSERT, DELETE ON memories TO memserver_app;
GRANT UPDATE (replaced_by) ON memories TO memserver_app;
GRANT SELECT, INSERT, DELETE ON memory_tags TO memserver_app;
GRANT SELECT, INSERT, DELETE ON postings TO memserver_app;
GRANT SELECT, INSERT, UPDATE ON tenant_stats TO memserver_app;
