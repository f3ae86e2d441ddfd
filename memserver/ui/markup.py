"""A small HTML builder that escapes by default: text is escaped unless it is `Markup` (what this module built).

Why not a template engine: the pages are a handful of fragments, each a Python function; with a builder, every
string that reaches the page passes through `escape` unless code built it with `el`, so a forgotten `|e` cannot
exist. Links are checked here too: `href`, `action` and `src` may only name this browser's own pages (a memory's
`source` that looks like a URL is text, never a link).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from typing import Union

PREFIX = "/ui"  # every page lives under it (both `memserver ui` and `serve --http --ui`)

VOID = frozenset({"br", "hr", "img", "input", "link", "meta", "source"})
URL_ATTRIBUTES = frozenset({"href", "action", "src", "formaction"})


class Markup(str):
    """HTML that this module built (or a constant written by hand): inserted as is."""

    __slots__ = ()


Child = Union[Markup, str, int, float, None, Iterable["Child"]]  # noqa: UP007 (a recursive alias needs Union)
Attr = str | int | float | bool | None


def escape(value: object) -> Markup:
    """`value` as HTML text (quotes too, so it is safe in attributes); Markup passes unchanged."""
    if isinstance(value, Markup):
        return value
    return Markup(html.escape(str(value), quote=True))


def internal(url: str) -> str:
    """`url` if it names a page of this browser (or a fragment of this page); ValueError otherwise: nothing
    rendered here links outside, whatever a memory holds."""
    if url.startswith("#") or url == PREFIX or url.startswith(PREFIX + "/") or url.startswith(PREFIX + "?"):
        return url
    raise ValueError(f"not a link to this browser: {url!r}")


def render(children: Iterable[Child]) -> Markup:
    """Children joined: strings escaped, Markup as is, None skipped, iterables flattened."""
    out: list[str] = []
    for child in children:
        if child is None or child is False:
            continue
        if isinstance(child, str | int | float):
            out.append(escape(child))
        else:
            out.append(render(child))
    return Markup("".join(out))


def el(tag: str, *children: Child, **attrs: Attr) -> Markup:
    """`<tag attrs>children</tag>`. Attribute names: a trailing `_` is dropped (`class_`, `for_`), other `_` become
    `-` (`data_id`, `aria_label`); True writes the bare name, False and None leave it out."""
    parts = [tag]
    for key, value in attrs.items():
        if value is None or value is False:
            continue
        name = key.rstrip("_").replace("_", "-")
        if value is True:
            parts.append(name)
            continue
        text = str(value)
        if name in URL_ATTRIBUTES:
            text = internal(text)
        parts.append(f'{name}="{escape(text)}"')
    opening = "<" + " ".join(parts) + ">"
    if tag in VOID:
        return Markup(opening)
    return Markup(opening + render(children) + f"</{tag}>")


# A run of this many characters without white space gets a <wbr> break opportunity after each such stretch.
BREAK_EVERY = 64
_UNBROKEN = re.compile(rf"\S{{{BREAK_EVERY}}}(?=\S)")


def breakable(value: str) -> Markup:
    """A long field as text with a break opportunity (<wbr>) every BREAK_EVERY characters of an unbroken run:
    Chromium lays out 20,000 characters without a space under `overflow-wrap: anywhere` in seconds (5 s at phone
    width, measured), with <wbr> in 0.15 s. The text is unchanged (copying it copies no <wbr>)."""
    parts: list[str] = []
    start = 0
    for match in _UNBROKEN.finditer(value):
        parts.append(html.escape(value[start : match.end()], quote=True))
        start = match.end()
    parts.append(html.escape(value[start:], quote=True))
    return el("bdi", Markup("<wbr>".join(parts)))


def text(value: str) -> Markup:
    """A memory's field as text whose direction cannot leak: a right-to-left override inside stays inside."""
    return el("bdi", value)
