"""The memory tools' work (tools.py declares them): each a call on the storage contract and the JSON answer.

`WORK` is blocking: the server runs it in a worker thread, since a write may wait up to the lock timeout for
another process. `NOWAIT` is work that may be answered on the event loop, without the thread hop: it asks the
store whether it can answer at once (backend.SearchesNowait) and says None when it cannot, and the server then
runs the blocking work instead. Only read-only work belongs there; a write can always wait on another process.
This module knows the contract (backend.py), never an engine, and nothing of MCP but the tools' names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memserver.contract import inputs
from memserver.contract.backend import Hit, MemoryBackend, SearchesNowait
from memserver.features import tool_results, tools

Work = Callable[[MemoryBackend, dict[str, Any]], dict[str, Any]]
NowaitWork = Callable[[MemoryBackend, dict[str, Any]], dict[str, Any] | None]


def remember(store: MemoryBackend, args: dict[str, Any]) -> dict[str, Any]:
    memory = store.add(
        args["content"],
        tags=args.get("tags"),
        source=args.get("source"),
        occurred_at=args.get("occurred_at"),
        speaker=args.get("speaker"),
        role=args.get("role"),
        session=args.get("session"),
        namespace=args.get("namespace"),
        replaces=args.get("replaces"),
        kind=args.get("kind"),
        due=args.get("due"),
    )
    payload: dict[str, Any] = {"id": memory.id, "status": "duplicate" if memory.duplicate else "stored"}
    if memory.duplicate and args.get("replaces"):
        payload["note"] = (
            "Nothing was stored, so nothing was replaced: this content is already stored under this id. To retire "
            f"{args['replaces']}, forget it."
        )
    elif memory.replaces:
        payload["replaces"] = memory.replaces
    similar = []
    for memory_id, score in memory.similar:
        other = store.get(memory_id, namespace=args.get("namespace"))
        if other is not None:  # may have been forgotten meanwhile
            similar.append({"id": memory_id, "score": round(float(score), 4), "content": other.content})
    if similar:  # only when there is something to decide: the common answer stays two fields
        payload["similar"] = similar
    return payload


def recall(store: MemoryBackend, args: dict[str, Any]) -> dict[str, Any]:
    return _recall_payload(args, store.search(args["query"], **_search_fields(args)))


def recall_nowait(store: MemoryBackend, args: dict[str, Any]) -> dict[str, Any] | None:
    """recall, if the store can answer it now without waiting (backend.SearchesNowait); else None: run `recall`
    in a worker thread. (Engines without `search_nowait`, PostgreSQL: always None.)"""
    if not isinstance(store, SearchesNowait):
        return None
    hits = store.search_nowait(args["query"], **_search_fields(args))
    return None if hits is None else _recall_payload(args, hits)


def _search_fields(args: dict[str, Any]) -> dict[str, Any]:
    """The recall arguments as `MemoryBackend.search` takes them (the query aside)."""
    return {
        "limit": args["limit"],
        "tags": args.get("tags"),
        "source": args.get("source"),
        "since": args.get("since"),
        "until": args.get("until"),
        "min_score": args.get("min_score"),
        "mode": args["mode"],
        "speaker": args.get("speaker"),
        "role": args.get("role"),
        "session": args.get("session"),
        "namespace": args.get("namespace"),
        "as_of": args.get("as_of"),
        "explain": args["explain"],
        "kinds": [args["kind"]] if args.get("kind") else None,
        "include_archived": args.get("include_archived", False),
    }


def _recall_payload(args: dict[str, Any], hits: list[Hit]) -> dict[str, Any]:
    payload: dict[str, Any] = {"results": []}
    for hit in hits:
        result = {**tool_results.memory_result(hit.memory), "score": round(float(hit.score), 4)}
        result["rank_score"] = round(hit.rank_score, 4)
        if hit.explanation is not None:
            why = dict(hit.explanation)
            payload["query"] = why.pop("query", payload.get("query"))  # the query's side: once, not per result
            result["explain"] = why
        payload["results"].append(result)
    if payload.get("query") is None:
        payload.pop("query", None)
    note = tool_results.recall_note(args, [hit.score for hit in hits])
    if note:
        payload["note"] = note
    return payload


def list_recent(store: MemoryBackend, args: dict[str, Any]) -> dict[str, Any]:
    page = store.list_page(
        limit=args["limit"],
        tags=args.get("tags"),
        namespace=args.get("namespace"),
        session=args.get("session"),
        speaker=args.get("speaker"),
        role=args.get("role"),
        cursor=args.get("cursor"),
        kinds=[args["kind"]] if args.get("kind") else None,
        include_archived=args.get("include_archived", False),
    )
    result: dict[str, Any] = {"memories": [tool_results.memory_result(m) for m in page.memories]}
    if page.next_cursor is not None:
        result["next_cursor"] = page.next_cursor  # when there are more
    return result


def forget(store: MemoryBackend, args: dict[str, Any]) -> dict[str, Any]:
    # A malformed id is an error naming the rule (as remember's replaces is); a well-formed id that names no memory
    # is deleted: false (the contract's answer).
    memory_id = inputs.check_id(args["memory_id"])
    return {"id": memory_id, "deleted": bool(store.delete(memory_id, namespace=args.get("namespace")))}


def mark(store: MemoryBackend, args: dict[str, Any]) -> dict[str, Any]:
    """pin / archive / done (and their undoing) through the contract: a new version unless already so."""
    memory_id = inputs.check_id(args["memory_id"])
    flag, value = tools.MARKS[args["as"]]
    change = {"pinned": store.pin, "archived": store.archive, "done": store.mark_done}[flag]
    memory = change(memory_id, value, namespace=args.get("namespace"))
    if memory is None:
        return {"id": memory_id, "status": "not_found"}
    if memory.id == memory_id:
        return {"id": memory.id, "status": "unchanged"}
    return {"id": memory.id, "status": "changed", "replaces": memory_id}


WORK: dict[str, Work] = {
    tools.REMEMBER.name: remember,
    tools.RECALL.name: recall,
    tools.LIST_RECENT.name: list_recent,
    tools.FORGET.name: forget,
    tools.MARK.name: mark,
}
NOWAIT: dict[str, NowaitWork] = {tools.RECALL.name: recall_nowait}  # read-only work that may answer at once
