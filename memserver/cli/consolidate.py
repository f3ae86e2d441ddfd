"""`memserver consolidate`: the proposals of contract/consolidation.py (near-duplicates to merge, stale statements
to archive), each applied only on a yes at the terminal (y/n/q), or all with --yes; --dry-run lists them only.

Heavy modules are imported inside the command, so `memserver --help` stays fast.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memserver.cli.options import open_store
from memserver.errors import MemserverError

if TYPE_CHECKING:
    from memserver.contract.backend import MemoryBackend
    from memserver.contract.consolidation import Proposal

StoreCommand = Callable[[str, Callable[[argparse.Namespace], int], str, str], argparse.ArgumentParser]
NO_TERMINAL = "not applying without a terminal to confirm each one: add --yes to apply them all, or --dry-run"


def add_command(store_command: StoreCommand) -> None:
    """Add `consolidate` to the parser (`store_command` adds the store options)."""
    cmd = store_command(
        "consolidate",
        cmd_consolidate,
        "propose merging near-duplicates and archiving stale statements, and apply each one you confirm",
        "memserver consolidate --namespace work --dry-run",
    )
    cmd.add_argument(
        "--namespace",
        help="only this namespace (default: every namespace, deliberately: the store's owner tends it all; the "
        "consolidate tool scans the default namespace only)",
    )
    cmd.add_argument("--dry-run", action="store_true", help="list the proposals, apply nothing")
    cmd.add_argument("--yes", action="store_true", help="apply every proposal without asking")
    cmd.add_argument("--json", action="store_true", help="print the proposals as JSON (with --yes: what was written)")


def _scan(store: MemoryBackend, namespace: str | None) -> list[Proposal]:
    """Both kinds of proposal in one pass, with a progress bar on stderr when it is a terminal."""
    from memserver.contract import consolidation
    from memserver.importers.run import Progress

    bar = Progress("looking for duplicates and stale statements", 1)

    def advance(done: int, total: int) -> None:
        bar.total = max(total, 1)
        bar.advance(done - bar.done)

    try:
        return consolidation.propose(store, namespace=namespace, progress=advance)
    finally:
        bar.close()


def describe(proposal: Proposal) -> list[str]:
    """A proposal as lines for a person: what it would do, the memories, the evidence."""
    from memserver.contract.consolidation import MergeProposal

    where = f" in {proposal.namespace}" if proposal.namespace != "default" else ""
    if isinstance(proposal, MergeProposal):
        lines = [f"merge {len(proposal.ids)} near-duplicates{where} (proposal {proposal.id}):"]
        lines += [f"  - {memory_id[:8]}" for memory_id in proposal.ids]
        lines.append(f"  into: {proposal.content}")
        best = max((e["cosine"] for e in proposal.evidence), default=0.0)
        shared = sorted({w for e in proposal.evidence for w in e["shared_words"]})
        lines.append(f"  evidence: cosine up to {best:.2f}; shared words: {', '.join(shared)}")
        return lines
    e = proposal.evidence
    cue = f"; update words: {', '.join(e['update_words'])}" if e["update_words"] else ""
    return [
        f"archive a stale statement of {e['speaker']}{where} (proposal {proposal.id}):",
        f"  - {proposal.stale[:8]} ({e['older_at'][:10]}) {proposal.stale_content}",
        f"  newer {proposal.newer[:8]} ({e['newer_at'][:10]}) {proposal.newer_content}",
        f"  evidence: was {', '.join(e['was'])}, now {', '.join(e['now'])}{cue}; score {e['score']:.2f}",
    ]


def _with_contents(store: MemoryBackend, proposal: Proposal) -> list[str]:
    """describe(), the merge members' texts filled in (the contract's proposal holds their ids)."""
    lines = describe(proposal)
    if proposal.action == "merge":
        for n, memory_id in enumerate(proposal.ids, start=1):
            m = store.get(memory_id, namespace=proposal.namespace)
            lines[n] += f" {m.content}" if m is not None else ""
    return lines


def _applied(store: MemoryBackend, proposal: Proposal) -> list[str] | str:
    """--yes --json: the ids written, or why not (an earlier proposal took one of its memories)."""
    from memserver.contract import consolidation

    try:
        return [m.id for m in consolidation.apply(store, proposal)]
    except MemserverError as exc:
        return f"not applied: {exc}"


def _ask() -> str:
    print("apply? [y/n/q] ", end="", file=sys.stderr, flush=True)
    answer = sys.stdin.readline()
    if not answer:
        return "q"  # end of input
    return answer.strip().lower()[:1] or "n"


def cmd_consolidate(args: argparse.Namespace) -> int:
    """memserver consolidate: list, then ask per proposal (or --yes / --dry-run); a summary at the end."""
    from memserver.contract import consolidation

    if args.yes and args.dry_run:
        raise MemserverError("--yes and --dry-run say opposite things: give one")
    if not (args.yes or args.dry_run or args.json) and not sys.stdin.isatty():
        raise MemserverError(NO_TERMINAL)
    with open_store(args) as store:
        proposals = _scan(store, args.namespace)
        if args.json:
            out: dict[str, Any] = {"proposals": [p.to_dict() for p in proposals]}
            if args.yes:
                out["applied"] = {p.id: _applied(store, p) for p in proposals}
            print(json.dumps(out, indent=2, ensure_ascii=False))
            return 0
        if not proposals:
            print("nothing to consolidate")
            return 0
        applied = skipped = 0
        for n, proposal in enumerate(proposals, start=1):
            print(f"[{n}/{len(proposals)}] " + "\n".join(_with_contents(store, proposal)))
            if args.dry_run:
                continue
            answer = "y" if args.yes else _ask()
            if answer == "q":
                break
            if answer != "y":
                skipped += 1
                continue
            try:
                written = consolidation.apply(store, proposal)
            except MemserverError as exc:  # an earlier merge took one of its memories: say so, go on
                print(f"  not applied: {exc}")
                skipped += 1
                continue
            applied += 1
            print(f"  applied: {', '.join(m.id[:8] for m in written)} written")
    if args.dry_run:
        print(f"{len(proposals)} proposals; nothing applied (--dry-run)")
    else:
        print(f"applied {applied} of {len(proposals)} proposals, skipped {skipped}")
    return 0
