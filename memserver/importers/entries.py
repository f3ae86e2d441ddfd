"""What a reader yields: a record to store, a message skipped on purpose, or a malformed part; and the helpers the
readers share (times, JSON paths, the error naming a file and a position)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from memserver.errors import InvalidInputError


class ImportFormatError(InvalidInputError):
    """A file that is not the format it was said to be: the message names the file and the position (a line and
    column, or a JSON path such as `[3].chat_messages[2].sender`)."""


@dataclass(frozen=True)
class Record:
    """One memory to store: its content and the conversation fields, and a `source` that points back to it
    (`claude:CONV_ID#MSG_ID`). `position` says where in the file it came from, for error messages."""

    position: str
    content: str
    source: str
    fields: dict[str, Any] = field(default_factory=dict)  # tags, occurred_at, speaker, role, session


@dataclass(frozen=True)
class Skip:
    """A part of the file left out on purpose (a system message, a hidden node, an empty message), and why."""

    position: str
    reason: str


@dataclass(frozen=True)
class Broken:
    """A part of the file that is not the format: the import stops on it unless told to keep going."""

    position: str
    problem: str


Entry = Record | Skip | Broken
Reader = Callable[[Path], Iterator[Entry]]


def load_json(path: Path) -> Any:
    """The JSON document in `path`, or ImportFormatError naming the file and the line and column that broke."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ImportFormatError(f"{path}: byte {exc.start}: not UTF-8 text") from None
    except OSError as exc:
        raise ImportFormatError(f"cannot read {path}: {exc.strerror or exc}") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ImportFormatError(f"{path}: line {exc.lineno} column {exc.colno}: not JSON ({exc.msg})") from None


class Malformed(Exception):
    """Raised inside a reader for the part it is reading; the reader turns it into a Broken entry."""

    def __init__(self, position: str, problem: str) -> None:
        super().__init__(f"{position}: {problem}")
        self.position = position
        self.problem = problem


def expect(value: Any, kind: type | tuple[type, ...], position: str, what: str) -> Any:
    """`value` if it is of `kind`, else Malformed naming the position and what was expected there."""
    if isinstance(value, bool) or not isinstance(value, kind):
        got = "null" if value is None else type(value).__name__
        raise Malformed(position, f"expected {what}, got {got}")
    return value


def from_epoch(value: Any, position: str) -> str | None:
    """A Unix time in seconds (ChatGPT's create_time) as ISO 8601 timezone.utc; None stays None."""
    if value is None:
        return None
    seconds = expect(value, (int, float), position, "a Unix time in seconds")
    try:
        return datetime.fromtimestamp(float(seconds), timezone.utc).isoformat()
    except (OverflowError, OSError, ValueError):
        raise Malformed(position, f"{seconds} is not a Unix time") from None


def iso_time(value: Any, position: str) -> str | None:
    """An ISO 8601 time string (Claude's created_at), checked to parse; None or "" is None."""
    if value is None or value == "":
        return None
    text = str(expect(value, str, position, "an ISO 8601 time"))
    try:
        datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise Malformed(position, f"{text!r} is not an ISO 8601 time") from None
    return text
