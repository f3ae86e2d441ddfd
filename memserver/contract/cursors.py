"""The cursor codec of both engines: a cursor is a prefix naming its engine and version (`c1.` local, `p1.`
PostgreSQL) + base64url (unpadded) of a small JSON list; what the list holds is the engine's.

A cursor that is not one the engine returned (another prefix, bad base64 or JSON, fields that fail the engine's
check) is an InvalidInputError naming `cursor`, the same message for every way it can be wrong.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any, TypeVar

from memserver.contract import inputs
from memserver.errors import InvalidInputError

__all__ = ["decode", "encode"]

T = TypeVar("T")


def encode(prefix: str, payload: list[Any]) -> str:
    """`prefix` + base64url of `payload` as compact JSON."""
    data = json.dumps(payload, separators=(",", ":")).encode("ascii")
    return prefix + base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def decode(cursor: str, prefix: str, fields: Callable[[Any], T]) -> T:
    """`fields` of the JSON payload of a cursor with `prefix`; `fields` raises ValueError (or TypeError,
    InvalidInputError) for a payload it does not accept, and any failure becomes inputs.bad_cursor."""
    try:
        if not cursor.startswith(prefix):
            raise ValueError("prefix")
        body = cursor[len(prefix) :]
        return fields(json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))))
    except (ValueError, TypeError, binascii.Error, UnicodeDecodeError, InvalidInputError):
        raise inputs.bad_cursor(cursor) from None
