"""A folder of Markdown notes (or one `.md` file): one memory per section (the text under a heading, with the
heading; the text before the first heading is a section too), the file's path inside the folder as source
(`notes/boiler.md#warranty`, the heading's anchor after the `#`), and the tags of its front matter (a leading
`---` block: `tags: [a, b]`, `tags: a, b`, or a `tags:` list of `- a` lines; `date:` becomes occurred_at).
Headings inside fenced code blocks are text."""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import date, datetime
from pathlib import Path
from typing import Any

from memserver.importers.entries import Broken, Entry, Malformed, Record, Skip

SUFFIXES = (".md", ".markdown")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
FENCE = re.compile(r"^\s*(```|~~~)")
TAG = "markdown"


def read(path: Path, user: str = "user") -> Iterator[Entry]:
    """Every section of every Markdown file under `path` (sorted by path), or of `path` itself (`user` unused)."""
    if path.is_file():
        root, files = path.parent, [path]
    else:
        root, files = path, sorted(p for p in path.rglob("*") if p.suffix.lower() in SUFFIXES and p.is_file())
    for file in files:
        rel = file.relative_to(root).as_posix()
        try:
            yield from _file(file, rel)
        except Malformed as exc:
            yield Broken(exc.position, exc.problem)


def _file(file: Path, rel: str) -> list[Entry]:
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise Malformed(f"{rel}: byte {exc.start}", "not UTF-8 text") from None
    except OSError as exc:
        raise Malformed(rel, f"cannot read it ({exc.strerror or exc})") from None
    meta, body_start = _front_matter(lines, rel)
    fields: dict[str, Any] = {"tags": [TAG, *meta.get("tags", [])]}
    if meta.get("date"):
        fields["occurred_at"] = meta["date"]
    out: list[Entry] = []
    slugs: dict[str, int] = {}
    for start, heading, text in _sections(lines, body_start):
        at = f"{rel}: line {start + 1}"
        body = text.split("\n", 1)[1] if heading and "\n" in text else ("" if heading else text)
        if not body.strip():
            if heading:
                out.append(Skip(at, "a heading without text"))
            continue
        anchor = _slug(heading) if heading else ""
        if anchor:
            slugs[anchor] = slugs.get(anchor, 0) + 1
            if slugs[anchor] > 1:
                anchor = f"{anchor}-{slugs[anchor] - 1}"  # GitHub's anchors for repeated headings
        out.append(Record(at, text.strip(), f"{rel}#{anchor}" if anchor else rel, dict(fields)))
    return out


def _front_matter(lines: list[str], rel: str) -> tuple[dict[str, Any], int]:
    """The front matter's tags and date, and the line the body starts at (0 without front matter)."""
    if not lines or lines[0].strip() != "---":
        return {}, 0
    for end in range(1, len(lines)):
        if lines[end].strip() in ("---", "..."):
            break
    else:
        raise Malformed(f"{rel}: line 1", "the front matter opened with --- is never closed")
    meta: dict[str, Any] = {}
    key = ""
    for number in range(1, end):
        line = lines[number]
        if match := re.match(r"^([A-Za-z_][\w-]*):\s*(.*)$", line):
            key, value = match.group(1).lower(), match.group(2).strip()
            if key == "tags" and value:
                meta["tags"] = _tag_list(value)
            elif key == "tags":
                meta["tags"] = []
            elif key == "date" and value:
                meta["date"] = _date(value.strip("'\""), f"{rel}: line {number + 1}")
        elif key == "tags" and (item := re.match(r"^\s*-\s*(.+)$", line)):
            meta["tags"].append(item.group(1).strip().strip("'\""))
    return meta, end + 1


def _tag_list(value: str) -> list[str]:
    inner = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    return [tag.strip().strip("'\"") for tag in inner.split(",") if tag.strip().strip("'\"")]


def _date(value: str, at: str) -> str:
    try:
        if len(value) == 10:
            return date.fromisoformat(value).isoformat()
        return datetime.fromisoformat(value.replace("Z", "+00:00")).isoformat()
    except ValueError:
        raise Malformed(at, f"date {value!r} is not an ISO 8601 date") from None


def _sections(lines: list[str], start: int) -> Iterator[tuple[int, str, str]]:
    """(first line, heading text or "", the section's text including its heading line) for each section."""
    fenced = False
    begin, heading = start, ""
    body: list[str] = []
    for number in range(start, len(lines)):
        line = lines[number]
        if FENCE.match(line):
            fenced = not fenced
        match = None if fenced else HEADING.match(line)
        if match:
            yield begin, heading, "\n".join(body)
            begin, heading, body = number, match.group(2), []
        body.append(line)
    yield begin, heading, "\n".join(body)


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).strip().replace(" ", "-")
