-- memserver schema 4 (issue 24): what a memory is (kind), a task's due date and state, pinned and archived.
--
-- Rows stored before read as unpinned, unarchived notes (the defaults). pin / archive / done store a new version
-- (`replaces`), so these columns, like content, never change in place: no UPDATE grant, RLS unchanged.

ALTER TABLE memories
    ADD COLUMN kind     text    NOT NULL DEFAULT 'note'
        CHECK (kind IN ('fact', 'preference', 'decision', 'task', 'event', 'instruction', 'person', 'note', 'summary')),
    ADD COLUMN due      date,
    ADD COLUMN done     boolean NOT NULL DEFAULT false,
    ADD COLUMN pinned   boolean NOT NULL DEFAULT false,
    ADD COLUMN archived boolean NOT NULL DEFAULT false;

-- memory://kinds counts and the kind filter read the current memories of a namespace by kind.
CREATE INDEX memories_kind ON memories (tenant, namespace, kind) WHERE replaced_by IS NULL AND forgotten_at IS NULL;
