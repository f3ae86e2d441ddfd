-- memserver schema 5 (issue 25): a turn's previous and next turn in its session, looked up by the hybrid ranking's
-- statement (retrieval/hybrid_convex.fused: the session context both engines rank with).
CREATE INDEX memories_session ON memories (tenant, namespace, session, seq) WHERE session IS NOT NULL;
