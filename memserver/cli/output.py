"""What every memory command prints through: JSON Lines, and a plural that reads right."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any, TextIO


def lines(records: Iterable[dict[str, Any]], out: TextIO | None = None) -> None:
    """JSON Lines: one object per line."""
    stream = out or sys.stdout
    for record in records:
        stream.write(json.dumps(record, ensure_ascii=False) + "\n")


def memories(n: int) -> str:
    return "memory" if n == 1 else "memories"
