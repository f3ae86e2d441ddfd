"""memserver on PostgreSQL + pgvector (the optional extra `memserver[postgres]`): see docs/scale-out.md.

    backend.py     PostgresBackend: the MemoryBackend contract, one tenant of one database
    rows.py        a memory as a row: the columns read, text escaping, the default namespace, "current"
    writer.py      Writer: the write path as the backend calls it (embed only what is new, one transaction)
    writes.py      the write path: content locks, duplicates per namespace, replace links, INSERT + UPDATE
    searcher.py    Searcher: which ranking a checked request runs; ranking.py and hybrid.py the rankings
    search.py      the search plans (exact / HNSW / probe) as SQL, filters (and as_of) before ranking
    listing.py     pages newest first by occurred_at with cursors, bulk selections, counts per tag/session
    terms.py       the keyword side: memserver's tokenizer in Python, BM25 in SQL
    pool.py        the connection pool, the tenant per transaction, retries, timeouts, faults
    watchdog.py    the client-side deadline of a call the server never answers
    schema.py      versioned migrations (migrations/*.sql) under an advisory lock; `meta`
    tenants.py     open_tenant, migrate, database_stats: what engines.py calls (one pool per database)
    analyzer.py    re-indexing the keyword terms of a database another analyzer (an older memserver) made

`open_tenant` is what engines.open_backend calls: every tenant a process opens on one database shares one pool.
"""
