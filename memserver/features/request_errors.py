"""How a request that is not a tool call fails: the error planes 2 and 3 of server.py as JSON-RPC errors.

A handler of server.py wraps its work in `resource_errors(uri, what)` (a request about one resource: read,
subscribe) or `protocol_errors(what)` (listen, prompts, completion), and what goes wrong becomes the answer the spec
asks for: a resource that does not exist, or bad input, is -32602 (with the URI in `data`); a request this
connection cannot make (no user, too many subscriptions) -32600; a store that is refused or locked, the model
missing, -32603 with the message that says what to do; anything else -32603 with no internals, its traceback on
stderr. `shown` cuts client input short before an answer repeats it. Logs as memserver.server, whose errors these
are (a client that set a logging level hears them under that name: client_log.py).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import mcp_types as types
from mcp.shared.exceptions import MCPError

from memserver.errors import InvalidInputError, MemserverError, NotAuthenticatedError
from memserver.features import resources
from memserver.features.subscriptions import TooManySubscriptionsError

logger = logging.getLogger("memserver.server")


@contextmanager
def resource_errors(uri: str, what: str) -> Iterator[None]:
    """Failures of a request about one resource, as JSON-RPC errors without internals."""
    logged = "/".join(uri.partition("?")[0].split("/")[:3])  # not the tag, id or namespace: user data
    try:
        yield
    except (resources.UnknownResourceError, InvalidInputError) as exc:
        # Spec (resources, error handling): a resource that does not exist is -32602, with the URI in data
        # (unless it is longer than any of ours: no answer repeats large input).
        data = {"uri": uri} if len(uri) <= resources.MAX_URI_CHARS else None
        raise MCPError(code=types.INVALID_PARAMS, message=str(exc), data=data) from None
    except TooManySubscriptionsError as exc:
        raise MCPError(code=types.INVALID_REQUEST, message=str(exc)) from None
    except NotAuthenticatedError as exc:
        raise MCPError(code=types.INVALID_REQUEST, message=str(exc)) from None
    except MCPError:
        raise
    except MemserverError as exc:  # the store is refused, locked, the model missing, ...: the message says what to do
        logger.error("%s %s failed: %s", what.lower(), logged, exc)
        raise MCPError(code=types.INTERNAL_ERROR, message=f"{what} {shown(uri)} failed: {exc}") from None
    except Exception:
        logger.exception("%s %s failed", what.lower(), logged)
        raise MCPError(
            code=types.INTERNAL_ERROR, message=f"{what} {shown(uri)} failed; the server log has the details"
        ) from None


@contextmanager
def protocol_errors(what: str) -> Iterator[None]:
    """Failures answering a request that is not a tool call, as JSON-RPC errors without internals."""
    try:
        yield
    except MCPError:  # the SDK's own (the listen stream limit, ...): already a protocol error
        raise
    except InvalidInputError as exc:
        raise MCPError(code=types.INVALID_PARAMS, message=str(exc)) from None
    except NotAuthenticatedError as exc:  # a per-user server, and the request names no user
        raise MCPError(code=types.INVALID_REQUEST, message=str(exc)) from None
    except MemserverError as exc:  # the model is missing, the store is locked, ...: the message says what to do
        logger.error("%s failed: %s", what, exc)
        raise MCPError(code=types.INTERNAL_ERROR, message=f"{what} failed: {exc}") from None
    except Exception:
        logger.exception("%s failed", what)
        raise MCPError(code=types.INTERNAL_ERROR, message=f"{what} failed; the server log has the details") from None


def shown(text: str, limit: int = 100) -> str:
    """Client input as it may appear in an answer: cut short, so no answer repeats large input."""
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"
