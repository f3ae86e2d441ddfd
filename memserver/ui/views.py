"""The page fragments: one function per piece of a page, each returning Markup built by markup.el (so every
memory field is escaped, and shown inside <bdi> so a right-to-left override cannot spill over what follows)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import urlencode

from memserver.contract import inputs
from memserver.contract.backend import Hit, Memory
from memserver.ui.markup import PREFIX, Child, Markup, el, text

LIST_CHARS = 200  # a memory's content on lists, cut here
NAV = [
    ("Search", "/ui/"),
    ("Browse", "/ui/browse"),
    ("Bulk forget", "/ui/bulk"),
    ("Consolidate", "/ui/consolidate"),
    ("Import / export", "/ui/transfer"),
    ("Stats", "/ui/stats"),
]


def url(path: str, **query: str | int | None) -> str:
    """A link to a page of this browser, with the non-empty query parameters."""
    params = {key: str(value) for key, value in query.items() if value not in (None, "")}
    return PREFIX + path + ("?" + urlencode(params) if params else "")


def memory_url(memory: Memory) -> str:
    ns = memory.namespace if memory.namespace != inputs.DEFAULT_NAMESPACE else None
    return url(f"/memory/{memory.id}", namespace=ns)


def cut(content: str, limit: int = LIST_CHARS) -> str:
    flat = " ".join(content.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def page(
    title: str, body: Child, *, current: str, csrf: str, signed_in: bool, page_name: str, live: bool = False
) -> Markup:
    """A whole page: head (the one stylesheet and script), skip link, header nav, main."""
    nav = el(
        "nav",
        el(
            "ul",
            [
                el("li", el("a", label, href=href, aria_current="page" if href == current else None))
                for label, href in NAV
            ],
        ),
        aria_label="Main",
    )
    sign_out = (
        el(
            "form",
            hidden_csrf(csrf),
            el("button", "Sign out", type="submit", class_="link"),
            method="post",
            action="/ui/signout",
            class_="signout",
        )
        if signed_in
        else None
    )
    return Markup(
        "<!doctype html>"
        + el(
            "html",
            el(
                "head",
                el("meta", charset="utf-8"),
                el("meta", name="viewport", content="width=device-width, initial-scale=1"),
                el("meta", name="color-scheme", content="light dark"),
                el("title", f"{title} · memserver"),
                el("link", rel="stylesheet", href="/ui/static/app.css"),
                el("script", src="/ui/static/app.js", defer=True),
            ),
            el(
                "body",
                el("a", "Skip to content", href="#main", class_="skip"),
                el("header", el("a", "memserver", href="/ui/", class_="brand"), nav, sign_out, class_="top"),
                el("main", body, id="main", tabindex="-1"),
                data_page=page_name,
                data_csrf=csrf,
                data_live="1" if live else None,
            ),
            lang="en",
        )
    )


def hidden_csrf(csrf: str) -> Markup:
    return el("input", type="hidden", name="csrf", value=csrf)


def error_box(message: str | None) -> Markup | None:
    return el("p", message, role="alert", class_="error") if message else None


def field(
    label: str, name: str, value: str = "", *, kind: str = "text", hint: str | None = None, **extra: Any
) -> Markup:
    ident = f"f-{name}"
    return el(
        "div",
        el("label", label, for_=ident),
        el(
            "input",
            type=kind,
            id=ident,
            name=name,
            value=value,
            aria_describedby=f"{ident}-hint" if hint else None,
            **extra,
        ),
        el("small", hint, id=f"{ident}-hint") if hint else None,
        class_="field",
    )


def select(label: str, name: str, options: Sequence[tuple[str, str]], value: str) -> Markup:
    ident = f"f-{name}"
    return el(
        "div",
        el("label", label, for_=ident),
        el("select", [el("option", shown, value=v, selected=v == value) for v, shown in options], id=ident, name=name),
        class_="field",
    )


ROLE_OPTIONS = [("", "any"), *((role, role) for role in inputs.ROLES)]
KIND_OPTIONS = [("", "any"), *((kind, kind) for kind in inputs.KINDS)]


def kind_fields(q: Mapping[str, str]) -> list[Markup]:
    """The kind filter and the include-archived toggle (Search and Browse)."""
    ident = "f-include_archived"
    toggle = el(
        "div",
        el(
            "input",
            type="checkbox",
            id=ident,
            name="include_archived",
            value="1",
            checked=bool(q.get("include_archived")),
        ),
        el("label", "Include archived", for_=ident),
        class_="field check",
    )
    return [select("Kind", "kind", KIND_OPTIONS, q.get("kind", "")), toggle]


def filter_fields(q: Mapping[str, str], *, before: bool = False) -> list[Markup]:
    """The filters Search and Bulk share (namespace, tags, speaker, role, session, since, until)."""
    fields = [
        field("Namespace", "namespace", q.get("namespace", ""), placeholder=inputs.DEFAULT_NAMESPACE),
        field("Tags", "tags", q.get("tags", ""), hint="comma-separated; any of them"),
        field("Speaker", "speaker", q.get("speaker", "")),
        select("Role", "role", ROLE_OPTIONS, q.get("role", "")),
        field("Session", "session", q.get("session", "")),
        field("Since", "since", q.get("since", ""), hint="a date (2026-03-01) or date-time"),
        field("Until", "until", q.get("until", ""), hint="a date includes that whole day"),
    ]
    if before:
        fields.append(field("Before", "before", q.get("before", ""), hint="stored before this time"))
    return fields


def kind_form(q: Mapping[str, str]) -> Markup:
    """Browse's kind filter and include-archived toggle, keeping the page's other filters."""
    kept = [
        el("input", type="hidden", name=k, value=q[k])
        for k in ("namespace", "tags", "session", "speaker", "role", "month")
        if q.get(k)
    ]
    return el(
        "form",
        kept,
        *kind_fields(q),
        el("button", "Show", type="submit"),
        method="get",
        action="/ui/browse",
        class_="kinds",
        aria_label="Kind and archive",
    )


def search_form(q: Mapping[str, str]) -> Markup:
    modes = [(mode, mode) for mode in inputs.SEARCH_MODES]
    return el(
        "form",
        el(
            "div",
            field("Query", "q", q.get("q", ""), kind="search", required=True),
            select("Mode", "mode", modes, q.get("mode", "hybrid")),
            el("button", "Search", type="submit"),
            class_="search-row",
        ),
        el(
            "fieldset",
            el("legend", "Filters"),
            el(
                "div",
                *filter_fields(q),
                *kind_fields(q),
                field("As of", "as_of", q.get("as_of", ""), hint="answer as the memories stood then"),
                field(
                    "Minimum score", "min_score", q.get("min_score", ""), kind="number", step="0.01", min="-1", max="1"
                ),
                class_="grid",
            ),
            class_="filters",
        ),
        role="search",
        method="get",
        action="/ui/",
        class_="search",
    )


def shown_time(stamp: str, *, seconds: bool = False) -> str:
    """A stored time (UTC) as a person reads it: a date alone at midnight (a date-only occurred_at), else the date
    and time, "UTC" named."""
    if stamp[11:26] in ("00:00:00.000000", "00:00:00"):
        return stamp[:10]
    return stamp[: 19 if seconds else 16].replace("T", " ") + " UTC"


def lifecycle_badges(memory: Memory) -> list[Markup]:
    """What it is: its kind (a note shows none), a task's due date and done, pinned, archived."""
    badges = [el("span", memory.kind, class_="kind", data_kind=memory.kind)] if memory.kind != "note" else []
    if memory.due:
        badges.append(el("span", "due ", el("time", memory.due, datetime=memory.due), class_="due"))
    badges += [
        el("span", flag, class_=f"badge {flag}") for flag in ("done", "pinned", "archived") if getattr(memory, flag)
    ]
    return badges


def meta_line(memory: Memory) -> Markup:
    """When, who, where, what kind: the line under a memory on lists."""
    bits: list[Child] = [
        *lifecycle_badges(memory),
        el("time", shown_time(memory.occurred_at), datetime=memory.occurred_at),
    ]
    if memory.speaker:
        bits.append(el("span", text(memory.speaker), class_="speaker"))
    if memory.role:
        bits.append(el("span", memory.role, class_="role"))
    if memory.session:
        bits.append(el("span", "session ", text(memory.session), class_="session"))
    if memory.namespace != inputs.DEFAULT_NAMESPACE:
        bits.append(el("span", text(memory.namespace), class_="namespace"))
    bits.extend(el("span", text(tag), class_="tag") for tag in memory.tags)
    return el("p", bits, class_="meta")


def memory_item(memory: Memory) -> Markup:
    return el(
        "li",
        el("a", text(cut(memory.content)), href=memory_url(memory), class_="content", dir="auto"),
        meta_line(memory),
        class_="memory",
        data_id=memory.id,
    )


def bar(label: str, value: float, low: float = 0.0, high: float = 1.0) -> Markup:
    shown = f"{value:.3f}" if abs(value) < 100 else f"{value:.0f}"
    return el(
        "div",
        el("span", label, class_="bar-label"),
        el(
            "meter", shown, value=f"{max(low, min(high, value)):.4f}", min=f"{low:g}", max=f"{high:g}", aria_label=label
        ),
        el("span", shown, class_="bar-value"),
        class_="bar",
    )


def explanation(info: Mapping[str, Any] | None) -> Markup:
    """A hit's `explain` in words and bars. The shape beyond "rank" is the engine's, so unknown parts are listed."""
    if not info:
        return el("p", "This engine gave no explanation.")
    words: list[Child] = [el("p", f"Ranked {info.get('rank', '?')}.")]
    bars: list[Child] = []
    semantic = info.get("semantic")
    if isinstance(semantic, Mapping):
        words.append(el("p", f"By meaning: rank {semantic.get('rank', '–')}, cosine {semantic.get('cosine', '–')}."))
        if isinstance(semantic.get("cosine"), int | float):
            bars.append(bar("meaning (cosine)", float(semantic["cosine"])))
    elif "semantic" in info:
        words.append(el("p", "Not among the closest by meaning."))
    keyword = info.get("keyword")
    if isinstance(keyword, Mapping):
        terms = ", ".join(str(t) for t in keyword.get("terms", []) or [])
        words.append(
            el(
                "p",
                f"By words: rank {keyword.get('rank', '–')}, BM25 {keyword.get('bm25', '–')}",
                f"; matched: {terms}." if terms else ".",
            )
        )
    elif "keyword" in info:
        words.append(el("p", "No word of the query matched."))
    if isinstance(info.get("fused"), int | float):
        bars.append(bar("fused score", float(info["fused"])))
    for side in ("semantic", "keyword"):
        part = info.get(side)
        if isinstance(part, Mapping) and isinstance(part.get("part"), int | float):
            bars.append(bar(f"{side} share", float(part["part"])))
    boosts = info.get("boosts")
    if isinstance(boosts, Mapping) and boosts:
        for name, value in boosts.items():
            if isinstance(value, int | float):
                bars.append(bar(f"boost: {name}", float(value)))
            else:
                words.append(el("p", f"Boost {name}: {value}"))
    rest = {k: v for k, v in info.items() if k not in ("rank", "semantic", "keyword", "fused", "boosts", "query")}
    for key, value in rest.items():
        words.append(el("p", f"{key}: {value}"))
    query = info.get("query")
    if isinstance(query, Mapping) and query.get("fusion"):
        words.append(el("p", f"How: {query['fusion']}", class_="muted"))
    return el("div", words, el("div", bars, class_="bars") if bars else None, class_="explain-body")


def hit_item(hit: Hit) -> Markup:
    memory = hit.memory
    return el(
        "li",
        el(
            "div",
            el("a", text(cut(memory.content)), href=memory_url(memory), class_="content", dir="auto"),
            el("span", f"{hit.score:.3f}", class_="score", title="cosine similarity to the query"),
            class_="hit-head",
        ),
        meta_line(memory),
        el("details", el("summary", "Why this result"), explanation(hit.explanation), class_="explain"),
        class_="hit",
        data_id=memory.id,
    )


def results(hits: Sequence[Hit] | None) -> Markup:
    """The result list (always present, so the live refresh has a place to fill), or the no-result note."""
    if hits is None:
        return el("ol", id="results", class_="list")
    if not hits:
        return el("div", el("ol", id="results", class_="list"), el("p", "No memory matches.", id="no-results"))
    return el("ol", [hit_item(h) for h in hits], id="results", class_="list")


def fields_list(memory: Memory) -> Markup:
    rows: list[tuple[str, Child]] = [
        ("id", el("code", memory.id)),
        ("occurred at", el("time", shown_time(memory.occurred_at, seconds=True), datetime=memory.occurred_at)),
        ("stored at", el("time", shown_time(memory.created_at, seconds=True), datetime=memory.created_at)),
        ("namespace", text(memory.namespace)),
        ("kind", memory.kind),
        ("due", el("time", memory.due, datetime=memory.due) if memory.due else "none"),
        ("state", ", ".join(f for f in ("done", "pinned", "archived") if getattr(memory, f)) or "open"),
        ("tags", [el("span", text(tag), class_="tag") for tag in memory.tags] or "none"),
        ("source", text(memory.source) if memory.source else "none"),
        ("speaker", text(memory.speaker) if memory.speaker else "none"),
        ("role", memory.role or "none"),
        ("session", text(memory.session) if memory.session else "none"),
        ("replaces", el("code", memory.replaces) if memory.replaces else "nothing"),
        ("replaced by", el("code", memory.replaced_by) if memory.replaced_by else "nothing (current)"),
    ]
    return el("dl", [(el("dt", name), el("dd", value)) for name, value in rows], id="fields")


def history_list(memory: Memory, chain: Mapping[str, list[dict[str, Any]]] | None) -> Markup:
    """Oldest version first; the one shown marked `current` when no newer version exists."""
    ns = memory.namespace if memory.namespace != inputs.DEFAULT_NAMESPACE else None
    versions: list[dict[str, Any]] = [
        *reversed((chain or {}).get("older", [])),
        {"id": memory.id, "self": True, "occurred_at": memory.occurred_at, "created_at": memory.created_at},
        *(chain or {}).get("newer", []),
    ]
    newest_live = next((v["id"] for v in reversed(versions) if not v.get("forgotten")), None)
    items = []
    for v in versions:
        classes = ["version"]
        if v.get("forgotten"):
            classes.append("forgotten")
            body: Child = [el("code", v["id"][:8]), " forgotten"]
        else:
            label = (
                "this version"
                if v.get("self")
                else el("a", el("code", v["id"][:8]), href=url(f"/memory/{v['id']}", namespace=ns))
            )
            body = [label, " stored ", el("time", v["created_at"][:19].replace("T", " "), datetime=v["created_at"])]
        if v["id"] == newest_live and not v.get("forgotten"):
            classes.append("current")
            body = [*(body if isinstance(body, list) else [body]), el("span", "current", class_="badge")]
        items.append(
            el("li", body, class_=" ".join(classes), data_id=v["id"], aria_current="true" if v.get("self") else None)
        )
    note = None if chain else el("p", "Only this version exists.", class_="muted")
    return el(
        "section", el("h2", "History"), el("ol", items, class_="versions"), note, id="history", aria_labelledby=None
    )


def counts_table(caption: str, counts: Mapping[str, int], link: Any = None, limit: int = 50) -> Markup:
    rows = list(counts.items())[:limit]
    return el(
        "table",
        el("caption", caption),
        el("thead", el("tr", el("th", "name", scope="col"), el("th", "memories", scope="col"))),
        el(
            "tbody",
            [
                el("tr", el("td", el("a", text(k), href=link(k)) if link else text(k)), el("td", f"{v:,}"))
                for k, v in rows
            ]
            or el("tr", el("td", "none", colspan="2")),
        ),
        class_="counts",
    )


def facet(title: str, counts: Mapping[str, int], link: Any, limit: int = 15) -> Markup:
    items = [
        el("li", el("a", text(name), " ", el("span", f"{n:,}", class_="count"), href=link(name)))
        for name, n in list(counts.items())[:limit]
    ]
    more = el("li", f"… {len(counts) - limit} more", class_="muted") if len(counts) > limit else None
    return el("section", el("h2", title), el("ul", items or el("li", "none", class_="muted"), more), class_="facet")


def joined(parts: Iterable[Child], sep: str = " · ") -> list[Child]:
    out: list[Child] = []
    for part in parts:
        if out:
            out.append(sep)
        out.append(part)
    return out
