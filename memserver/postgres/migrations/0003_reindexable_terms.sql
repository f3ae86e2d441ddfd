-- memserver schema 3: a memory's keyword terms may be rewritten in place, so a database whose terms an older
-- analyzer made (meta 'keyword' names the analyzer; see analyzer.py) is re-indexed row by row, not rebuilt.
--
-- Content, tags and keys stay immutable. terms, tfs and doc_len are derived from the content by memserver's
-- tokenizer (terms.py), so rewriting them changes no memory; memories_changed now moves the postings and BM25's
-- total length along, so the derived tables still agree with `memories` whoever runs the UPDATE. Only the owner
-- can: memserver_app has no UPDATE privilege on those columns.

DROP TRIGGER memories_immutable ON memories;
CREATE TRIGGER memories_immutable BEFORE UPDATE OF tenant, id, seq, content, tags, created_at
    ON memories FOR EACH ROW EXECUTE FUNCTION memories_refuse_change();

CREATE OR REPLACE FUNCTION memories_changed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM memserver.memories_bump(n.tenant, count(*)) FROM after n GROUP BY n.tenant;
    PERFORM memserver.memories_retire(ARRAY(
        SELECT o::memserver.memories FROM before o JOIN after n ON n.tenant = o.tenant AND n.seq = o.seq
        WHERE o.replaced_by IS NULL AND o.forgotten_at IS NULL
          AND (n.replaced_by IS NOT NULL OR n.forgotten_at IS NOT NULL)));
    -- Re-indexed rows that are current before and after: old postings out, new ones in, the length difference.
    DELETE FROM memserver.postings p USING (
        SELECT o.tenant, unnest(o.terms) AS term, o.seq FROM before o JOIN after n ON n.tenant = o.tenant AND n.seq = o.seq
        WHERE o.replaced_by IS NULL AND o.forgotten_at IS NULL AND n.replaced_by IS NULL AND n.forgotten_at IS NULL
          AND (o.terms, o.tfs, o.doc_len) IS DISTINCT FROM (n.terms, n.tfs, n.doc_len)) r
        WHERE p.tenant = r.tenant AND p.term = r.term AND p.seq = r.seq;
    INSERT INTO memserver.postings (tenant, term, seq, tf, doc_len)
        SELECT n.tenant, t.term, n.seq, t.tf, n.doc_len
        FROM before o JOIN after n ON n.tenant = o.tenant AND n.seq = o.seq, unnest(n.terms, n.tfs) AS t(term, tf)
        WHERE o.replaced_by IS NULL AND o.forgotten_at IS NULL AND n.replaced_by IS NULL AND n.forgotten_at IS NULL
          AND (o.terms, o.tfs, o.doc_len) IS DISTINCT FROM (n.terms, n.tfs, n.doc_len);
    INSERT INTO memserver.tenant_stats AS s (tenant, namespace, slot, docs, length)
        SELECT n.tenant, n.namespace, pg_backend_pid() % 16, 0, sum(n.doc_len - o.doc_len)
        FROM before o JOIN after n ON n.tenant = o.tenant AND n.seq = o.seq
        WHERE o.replaced_by IS NULL AND o.forgotten_at IS NULL AND n.replaced_by IS NULL AND n.forgotten_at IS NULL
          AND o.doc_len <> n.doc_len
        GROUP BY n.tenant, n.namespace
        ON CONFLICT (tenant, namespace, slot) DO UPDATE SET length = s.length + excluded.length;
    RETURN NULL;
END $$;
