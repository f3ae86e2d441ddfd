"""Errors in the words of the command line: the store's checks name its fields (`occurred_at`, `min_score`), a
person typed flags (`--occurred-at`, `--min-score`); they say "as returned by add", a person ran `memserver
remember`; and an unknown flag gets the command's usage and the nearest flag it has."""

from __future__ import annotations

import argparse
import difflib
import re

# The contract's argument names and the flags a person gives them with.
FLAGS = {
    "occurred_at": "--occurred-at",
    "as_of": "--as-of",
    "min_score": "--min-score",
    "replaces": "--replaces",
    "since": "--since",
    "until": "--until",
    "tags": "--tag",
    "source": "--source",
    "speaker": "--speaker",
    "role": "--role",
    "session": "--session",
    "namespace": "--namespace",
    "limit": "--limit",
    "cursor": "--cursor",
    "before": "--before",
    "mode": "--mode",
    "content": "TEXT",
    "query": "QUERY",
}
_SPELLED = re.compile(r"\b(occurred_at|as_of|min_score)\b")  # unmistakable anywhere in a message
_LEADING = re.compile(r"^(\w+)\b")  # the argument a message starts with ("since must be ...")
_THAN = re.compile(r"\bthan until\b")


def in_flags(message: str) -> str:
    """A message of the store's input checks, with the command line's names for what it names."""
    text = _LEADING.sub(lambda m: FLAGS.get(m.group(1), m.group(1)), message)
    text = _SPELLED.sub(lambda m: FLAGS[m.group(1)], text)
    text = _THAN.sub("than --until", text)
    text = text.replace("returned by list_page", "printed by `memserver list`")
    return text.replace("(as returned by add)", "(an id as printed by `memserver remember`)")


def unknown_arguments(parser: argparse.ArgumentParser, extra: list[str]) -> str:
    """The error for arguments `parser` does not know, with the nearest flag it has for each unknown one."""
    # (argparse lists its actions only in this attribute)
    known = [flag for action in parser._actions for flag in action.option_strings]
    hints = []
    for arg in extra:
        if arg.startswith("-"):
            close = difflib.get_close_matches(arg.split("=", 1)[0], known, n=1, cutoff=0.6)
            if close:
                hints.append(f"did you mean {close[0]}?")
    return f"unrecognized arguments: {' '.join(extra)}" + (f" ({' '.join(hints)})" if hints else "")
