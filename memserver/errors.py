"""The exceptions memserver raises, and when.

    MemserverError                  base: every error below carries a message a person can act on
    ├── ModelError                  the embedding model cannot be found, loaded or trusted
    │   └── ModelNotFoundError      no source had the model; the message lists every source tried
    ├── InvalidInputError           bad arguments to the store (empty content, bad id, limit out of range, ...)
    ├── StoreError                  the store on disk cannot be used as it is
    │   ├── CorruptJournalError     the journal is damaged before its last line (a torn last line is repaired)
    │   ├── StoreLockedError        another process held the store's lock for too long
    │   ├── StoreWriteError         the disk refused a write (full, I/O error, read-only, no permission)
    │   └── ModelMismatchError      the collection was built with another embedding model or dimension
    ├── ConfigError                 a setting (environment variable, flag, token file) is invalid
    ├── NotAuthenticatedError       a per-user server got a request without an authenticated user
    ├── AuthUnavailableError        the identity provider cannot be asked about a token now (keys, introspection)
    └── CannotAskError              a change that needs the person's yes, and nobody can be asked: nothing changed

The MCP server turns InvalidInputError and CannotAskError into a tool result with isError: true, and
NotAuthenticatedError into a protocol error; HTTP answers AuthUnavailableError with 503; the CLI turns any
MemserverError into one line on stderr and exit status 1. Nothing here knows about MCP. The local store turns an
OSError of the disk into StoreWriteError (durable.disk_error), so a full disk reaches the client as a tool error
that says so, never as "internal error".
"""

from __future__ import annotations


class MemserverError(Exception):
    """Base class of every error memserver raises on purpose."""


class ModelError(MemserverError):
    """The embedding model cannot be found, loaded or trusted."""


class ModelNotFoundError(ModelError):
    """No source had the model; the message names every source tried and what to do."""


class InvalidInputError(MemserverError, ValueError):
    """An argument is wrong; the message names it and the rule it broke."""


class StoreError(MemserverError):
    """The store on disk cannot be used as it is."""


class CorruptJournalError(StoreError):
    """The journal is damaged somewhere before its last line."""


class StoreLockedError(StoreError):
    """Another process held the store's lock for longer than the timeout."""


class StoreWriteError(StoreError):
    """The disk refused a write: full, an I/O error, a read-only file system or folder. What the call was writing
    was not stored (and not acknowledged); what was stored before is untouched. `errno` is the OSError's."""

    def __init__(self, message: str, errno: int | None = None) -> None:
        super().__init__(message)
        self.errno = errno


class ConfigError(MemserverError):
    """A setting (environment variable, flag, token file) is invalid."""


class ModelMismatchError(StoreError):
    """The collection's vectors come from another model (or dimension) than the embedder in use."""


class NotAuthenticatedError(MemserverError):
    """A server that keeps one store per user got a request that names no user: it never falls back to a shared one."""


class AuthUnavailableError(MemserverError):
    """A token cannot be checked now: the identity provider's keys or its introspection endpoint are out of reach.
    Not the token's fault, so HTTP answers 503 (try again), not 401 (sign in again)."""


class CannotAskError(MemserverError):
    """A change needs the person's yes and nobody can be asked (forget_matching: the client has no elicitation, or
    asking failed): nothing was changed. Here, not in features/forgetting.py, so the server need not import that."""
