"""What the `consolidate` tool asks the user, and what it answers: each proposal of contract/consolidation.py (merge
near-duplicates, archive a stale statement) is applied only on the person's yes (MCP elicitation), one question per
proposal; a client that cannot ask gets the proposals only, and is told where to apply them (`memserver consolidate`
in a terminal, /ui/consolidate in the browser): nothing is applied in MCP without an elicited yes.

    1. scan (both kinds of proposal, in a worker thread), at most MAX_ASKED of them asked about in one call
    2. a client that offers sampling is asked for the text of each merge that will be asked about (never otherwise:
       a text the user did not see is never applied) (sampling/createMessage); the longest member's
       text stands when it refuses, fails or answers nothing usable
    3. one elicitation per proposal (what it does, the memories, the evidence, one boolean to tick)
    4. a yes applies it (consolidation.apply: new versions only, history keeps every earlier state)

server.py does the asking; this module builds the questions and the payloads, and reads the answers.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import anyio
import mcp_types as types

from memserver.contract import consolidation
from memserver.contract.backend import MemoryBackend
from memserver.contract.inputs import DEFAULT_NAMESPACE, MAX_CONTENT_CHARS
from memserver.errors import InvalidInputError
from memserver.features import forgetting

logger = logging.getLogger(__name__)

MAX_ASKED = 10  # proposals asked about (or applied) in one call; the rest are counted in "more"
MAX_SHOWN = 20  # proposals listed in a result
MERGE_SECONDS = 30.0  # how long a sampling request for a merged text may take
CONFIRM_FIELD = "apply"
MERGE_SYSTEM = (
    "You merge near-duplicate memories into one. Answer with a single statement that stands alone and keeps every "
    "fact the memories state, and nothing else."
)
NOTES = {
    "applied": "Applied {applied} of the {confirmed} proposals the user confirmed (history keeps every earlier "
    "version).",
    "declined": "The user said no to each: nothing was changed ({count} proposals).",
    "proposed": "Nothing was applied (this client cannot ask the user): show these {count} proposals; to apply "
    "them, run `memserver consolidate` in a terminal or open /ui/consolidate in the browser.",
    "nothing_to_do": "No near-duplicates or stale statements found.",
}


def scan(store: MemoryBackend, namespace: str | None) -> list[consolidation.Proposal]:
    """The proposals of one namespace: None is the default one (the contract's meaning), never every namespace."""
    return consolidation.propose(store, namespace=namespace or DEFAULT_NAMESPACE)


def memories(store: MemoryBackend, proposal: consolidation.Proposal) -> list[dict[str, str]]:
    """The proposal's memories as {id, content}, oldest first (a stale proposal: the stale one, then the newer)."""
    out = []
    for memory_id in proposal.ids:
        m = store.get(memory_id, namespace=proposal.namespace)
        out.append({"id": memory_id, "content": m.content if m is not None else ""})
    return out


def shown(
    store: MemoryBackend, proposal: consolidation.Proposal, outcome: str, content: str | None = None
) -> dict[str, Any]:
    """A proposal as the result lists it."""
    item: dict[str, Any] = {
        "id": proposal.id,
        "action": proposal.action,
        "namespace": proposal.namespace,
        "memories": memories(store, proposal),
    }
    if isinstance(proposal, consolidation.MergeProposal):
        item["content"] = content or proposal.content
    item["evidence"] = proposal.evidence
    item["outcome"] = outcome
    return item


def merge_request(store: MemoryBackend, proposal: consolidation.MergeProposal) -> tuple[str, str]:
    """(system prompt, user text) of the sampling request for a merged text."""
    lines = ["Merge these memories into one:"] + [f"- {m['content']}" for m in memories(store, proposal)]
    return MERGE_SYSTEM, "\n".join(lines)


def merged_text(text: str) -> str | None:
    """The sampled text, or None when it is not usable (empty, too long): the longest member's text stands."""
    return text if text and len(text) <= MAX_CONTENT_CHARS else None


def question(
    store: MemoryBackend, proposal: consolidation.Proposal, content: str | None
) -> types.ElicitRequestFormParams:
    """The elicitation form of one proposal: what it does, the memories, the evidence, one boolean to tick."""
    items = memories(store, proposal)
    if isinstance(proposal, consolidation.MergeProposal):
        lines = [f"Merge {len(items)} near-duplicate memories into one?"]
        lines += [f"- {m['content']}" for m in items]
        lines += ["", f"Into: {content or proposal.content}", "The others are archived; history keeps them all."]
        title = "Merge them"
    else:
        e = proposal.evidence
        lines = [
            f"Archive a stale statement of {e['speaker']}?",
            f"- ({e['older_at'][:10]}) {items[0]['content']}",
            f"Said later ({e['newer_at'][:10]}): {items[1]['content']}",
            "",
            "It stays in history and can be unarchived.",
        ]
        title = "Archive it"
    tip = "Tick to apply; leave unticked, decline or cancel to leave the memories as they are."
    schema = forgetting.tick_box(CONFIRM_FIELD, title, tip)
    return types.ElicitRequestFormParams(message="\n".join(lines), requested_schema=schema)


def confirmed(answer: types.ElicitResult) -> bool:
    return forgetting.confirmed(answer, CONFIRM_FIELD)


def outcome(status: str, items: list[dict[str, Any]], applied: int, found: int) -> dict[str, Any]:
    """The tool's structured result (tools.CONSOLIDATE's output schema)."""
    confirmed_count = sum(1 for i in items if i["outcome"] == "applied" or i["outcome"].startswith("failed"))
    result: dict[str, Any] = {
        "status": status,
        "proposals": items[:MAX_SHOWN],
        "applied": applied,
        "note": NOTES[status].format(applied=applied, count=len(items), confirmed=confirmed_count),
    }
    if found > len(result["proposals"]):
        result["more"] = found - len(result["proposals"])
    return result


# (proposal id, its question) -> the person's answer; None: no answer (in time)
Ask = Callable[[str, types.ElicitRequestFormParams], Awaitable[types.ElicitResult | None]]
Sample = Callable[[str, str], Awaitable[str | None]]  # (system, text) -> the merged text, or None


async def run(
    store: MemoryBackend, args: dict[str, Any], ask: Ask | None, sample: Sample | None, only: Sequence[str] = ()
) -> dict[str, Any]:
    """The whole call: scan, pick, (sample,) ask, apply. `ask` is None when the client cannot ask the user: then
    the proposals come back unapplied (nothing is applied without a yes). `only`: the proposal ids answered in a
    second 2026-07-28 round (the others are not asked again). Store work runs in worker threads."""
    found = await anyio.to_thread.run_sync(scan, store, args.get("namespace"))
    if not found and not only:
        return outcome("nothing_to_do", [], 0, 0)
    if ask is None:
        items = [await anyio.to_thread.run_sync(shown, store, p, "proposed") for p in found[:MAX_SHOWN]]
        return outcome("proposed", items, 0, len(found))
    chosen = [p for p in found if p.id in only] if only else found[:MAX_ASKED]
    picked = {p.id for p in chosen}
    items, applied, said_no, asked = [], 0, False, set()
    for proposal in chosen:
        content = None
        if sample is not None and isinstance(proposal, consolidation.MergeProposal):  # it is asked about next
            content = await sample(*await anyio.to_thread.run_sync(merge_request, store, proposal))
        form = await anyio.to_thread.run_sync(question, store, proposal, content)
        try:
            answer = await ask(proposal.id, form)
        except Exception as exc:  # whatever the client's answer raised: no answer, and the partial outcome stands
            logger.warning("asking the user about a consolidation failed: %s", type(exc).__name__)
            answer = None
        state = "applied"
        if answer is None or not confirmed(answer):
            state = "unanswered" if answer is None else forgetting.refusal(answer)
        if state == "applied":
            try:
                await anyio.to_thread.run_sync(consolidation.apply, store, proposal, content)
                applied += 1
            except InvalidInputError as exc:  # a member changed since the scan (an earlier proposal took it)
                state = f"failed: {exc}"
        said_no = said_no or state in ("declined", "cancelled")
        items.append(await anyio.to_thread.run_sync(shown, store, proposal, state, content))
        asked.add(proposal.id)
        if state == "unanswered":
            break  # the person has gone: ask nothing more
    gone = sorted(set(only) - picked)  # answered, but no longer proposed: a member changed between scan and yes
    items += [{"id": pid, "outcome": "failed: its memories changed since the question: propose again"} for pid in gone]
    rest = [p for p in found if p.id not in asked and (p.id in picked or not only)][: max(0, MAX_SHOWN - len(items))]
    items += [await anyio.to_thread.run_sync(shown, store, p, "not_asked") for p in rest]
    status = "applied" if applied else "declined" if said_no else "proposed"
    return outcome(status, items, applied, len(found) if not only else len(items))


# --- 2026-07-28: no server requests; the questions go out in an input_required result and the answers come back


def questions(store: MemoryBackend, args: dict[str, Any]) -> tuple[dict[str, types.ElicitRequestFormParams], str]:
    """The first round: one question per proposal asked about (as `run` picks them), keyed by proposal id, and the
    requestState (the ids asked about and when; untrusted, it only says whether an answer is fresh)."""
    chosen = scan(store, args.get("namespace"))[:MAX_ASKED]
    forms = {p.id: question(store, p, None) for p in chosen}
    return forms, json.dumps({"v": 1, "asked": time.time(), "ids": sorted(forms)})


def answered(request_state: str | None, responses: Mapping[str, Any] | None) -> dict[str, types.ElicitResult] | None:
    """The second round's answers, by proposal id, when the state is ours and fresh (asked at most
    forgetting.CONFIRM_SECONDS ago) and each answer is to a question it names; None: ask (again)."""
    try:
        value = json.loads(request_state or "")
    except ValueError:
        return None
    if not isinstance(value, dict) or value.get("v") != 1 or not isinstance(value.get("ids"), list):
        return None
    asked = value.get("asked")
    if not isinstance(asked, float) or not 0 <= time.time() - asked <= forgetting.CONFIRM_SECONDS:
        return None
    answers = {k: v for k, v in (responses or {}).items() if k in value["ids"] and isinstance(v, types.ElicitResult)}
    return answers or None
