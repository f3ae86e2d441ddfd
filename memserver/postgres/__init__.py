"""memserver on PostgreSQL + pgvector (the optional extra `memserver[postgres]`): see docs/scale-out.md.

backend.py     PostgresBackend: the MemoryBackend contract, one tenant of one database
search.py      the search plans (exact / HNSW / probe) as SQL, filters before ranking
terms.py       the keyword side: memserver's tokenizer in Python, BM25 in SQL
pool.py        the connection pool, the tenant per transaction, faults
schema.py      versioned migrations (migrations/*.sql) under an advisory lock; `meta`
"""

from memserver.postgres.backend import PostgresBackend

__all__ = ["PostgresBackend"]
