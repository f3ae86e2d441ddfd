"""Write tests/data/store-format4/: a small store as memserver wrote it at commit bc911d9 (tests/test_store_compat.py).

What it holds (collection "fixture", fake embedder of tests/fakes.py): 40 memories imported with fixed ids, times,
tags and sources (accents, emoji, CJK, right-to-left text), 6 of them deleted, then a checkpoint (metadata snapshot
format 4, index.json + its hnswlib graph, keyword.json + its postings), then a journal tail past the checkpoint:
10 more memories and 3 deletes. Beside it, export.jsonl: `export(include_vectors=True)` of that store as
`memserver export --vectors` writes it (one `json.dumps(record, ensure_ascii=False)` line each), and made_by.json.

The point is to pin the on-disk formats of that commit, so run it with that commit's memserver, never a later
one: from the root of a checkout whose memserver/ and tests/fakes.py are those of bc911d9 (it checks, with git):

    git worktree add /tmp/memserver-bc911d9 bc911d9 && cd /tmp/memserver-bc911d9
    uv run python /path/to/checkout/tests/data/make_store_fixture.py /path/to/checkout/tests/data/store-format4

It refuses to overwrite an existing fixture. The store's files differ on every run (a random generation, random
checkpoint file names, the time of each delete); export.jsonl does not.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import memserver.collection
import memserver.store
from memserver.store import MemoryStore

import memserver

COLLECTION = "fixture"
COMMIT = "bc911d9"

TEXTS = [
    "The staging database password rotates every Monday",
    "Zoë's café in São Paulo opens at 7:30 — try the pão de queijo",
    "Deploy of v2.3.1 went fine 🚀🎉 (no rollback needed)",
    "会議は木曜日の午後3時に移動しました",
    "שלום! הפגישה נדחתה ליום רביעי",
    "الاجتماع يوم الخميس في الساعة العاشرة",
    "Invoice INV-2024-0173 from Hetzner was paid on 3 March",
    "Marta's birthday is 17 April; she loves dark chocolate",
    "Standup moved to 10:30 because of the new team in Lisbon",
    "The user prefers green tea in the morning, never coffee after 2 pm",
    "Naïve Ångström façade — Crème brûlée at Königsberger Straße 12",
    "Кофе без сахара, пожалуйста",
    "반갑습니다 — the Seoul office phone is +82 2 555 0134",
    "北京的办公室周五关闭",
    "Mixed: English, עברית, العربية and 日本語 in one line",
    "Line one\nline two\n\tindented line three",
    "Email anna@example.com about the Q3 roadmap",
    "Wi-Fi password for the cabin: lantern-harbour-42",
    "Flight TP 541 BER→LIS on 12 June 2025 at 06:40, booking QX7L2M",
    "Emoji only memory: 🧠💾🔍",
    "The boiler is serviced every October by Jens",
    "Car insurance renews on 1 September; policy 88-4417-Z",
    "Use ruff for linting and uv for environments",
    "Grandma's recipe: 3 eggs, 200 g flour, a pinch of salt",
    "The cat's vet appointment is on Tuesday at 9",
    "Prefers window seats on long flights",
    "Bank holiday: office closed on 25 December",
    "Dentist: Dr. Øyvind Hansen, Storgata 5, Oslo",
    "Project Kestrel ships in Q4; owner is Priya",
    "Allergic to peanuts — always ask about sauces",
    "The spare key is under the blue flower pot",
    "Book club reads «Cien años de soledad» next",
    "Run 5 km on Sundays at the river path",
    "Router admin page lives at 192.168.1.1",
    "Favourite pizza: quattro formaggi, extra basil",
    "Tax return due 31 July; accountant is Mr. Lee",
    "Parking fine reference 2025/BE/884213: €35, pay by 2 April",
    "Sister lives in Montréal and works at the Université",
    "Podcast idea: interviews with lighthouse keepers",
    "Backup drive is the grey WD in the left drawer",
]
TAIL_TEXTS = [
    "Added after the checkpoint: the new printer is on floor 3",
    "Nach dem Checkpoint: Übermorgen kommt der Techniker",
    "チェックポイントの後に追加されたメモ",
    "بعد نقطة التفتيش: تغيير كلمة المرور",
    "After checkpoint 🐢 slow and steady",
    "The garden hose leaks at the tap",
    "Renew the passport before March",
    "Meeting notes: ship the beta, hire a designer",
    "Stored in the tail with the same time as another",
    "Last memory of the fixture",
]
TAGS = [["ops"], ["food", "café"], ["deploy"], ["日本"], ["עברית"], [], ["finance", "invoice"], ["people"], ["work"]]
SOURCES = ["", "chat", "email", "notes/ノート", "https://example.com/α"]


def _record(i: int, text: str, tail: bool) -> dict[str, Any]:
    n = i + (100 if tail else 0)
    day = 1 + (n * 7) % 28
    micro = n * 1237 % 1_000_000
    created = f"2025-{1 + n % 12:02d}-{day:02d}T{n % 24:02d}:{(n * 13) % 60:02d}:{n % 60:02d}.{micro:06d}Z"
    if n in (8, 9):  # two memories with the same created_at: ties in time order
        created = "2025-09-09T09:09:09.090909Z"
    if tail and i == 8:  # a tail memory with the same time as a checkpointed one
        created = "2025-09-09T09:09:09.090909Z"
    return {
        "id": f"{n:04d}" + "f0c5" * 7,
        "content": text,
        "created_at": created,
        "tags": TAGS[n % len(TAGS)] + (["tail"] if tail else []),
        "source": SOURCES[n % len(SOURCES)],
    }


def main(out: Path) -> None:
    if out.exists():
        raise SystemExit(f"{out} exists; remove it first")
    if memserver.store.SNAPSHOT_FORMAT != 4:
        raise SystemExit(f"this memserver writes snapshot format {memserver.store.SNAPSHOT_FORMAT}, not 4")
    root = Path(memserver.__file__).resolve().parent.parent
    if Path.cwd().resolve() != root:
        raise SystemExit(f"run this from the root of the checkout memserver is imported from ({root})")
    changed = subprocess.run(["git", "-C", str(root), "diff", "--quiet", COMMIT, "--", "memserver", "tests/fakes.py"])
    if changed.returncode != 0:
        raise SystemExit(f"memserver/ or tests/fakes.py in {root} differ from commit {COMMIT}")
    sys.path.insert(0, str(root))  # tests.fakes of that checkout (the script itself may live elsewhere)
    from tests.fakes import FakeEmbedder

    work = out.with_name(out.name + ".tmp")
    shutil.rmtree(work, ignore_errors=True)

    # Part 1: 40 memories and 6 deletes, checkpointed after the import and again on close (a threshold of 5
    # records instead of 200), so the checkpoint covers the deletes too.
    memserver.collection.CHECKPOINT_RECORDS = 5
    with MemoryStore(work, COLLECTION, embedder=FakeEmbedder()) as store:
        assert store.import_([_record(i, t, tail=False) for i, t in enumerate(TEXTS)]) == len(TEXTS)
        for i in (2, 11, 19, 23, 30, 37):
            assert store.delete(_record(i, TEXTS[i], tail=False)["id"])
    folder = work / COLLECTION
    snapshots = list(folder.glob("meta-*.snap"))
    assert len(snapshots) == 1 and (folder / "index.json").exists() and (folder / "keyword.json").exists()
    for name in ("index.json", "keyword.json"):
        assert json.loads((folder / name).read_text())["count"] == len(TEXTS) - 6, name
    checkpointed = snapshots[0].read_bytes()

    # Part 2: a journal tail past the checkpoint (too short to be checkpointed on open or close).
    memserver.collection.CHECKPOINT_RECORDS = 10_000
    with MemoryStore(work, COLLECTION, embedder=FakeEmbedder()) as store:
        assert store.import_([_record(i, t, tail=True) for i, t in enumerate(TAIL_TEXTS)]) == len(TAIL_TEXTS)
        for i, tail in ((4, True), (7, False), (27, False)):
            assert store.delete(_record(i, (TAIL_TEXTS if tail else TEXTS)[i], tail=tail)["id"])
        exported = [json.dumps(r, ensure_ascii=False) + "\n" for r in store.export(include_vectors=True)]
    assert snapshots[0].read_bytes() == checkpointed, "the tail was checkpointed"
    (folder / "lock").unlink()

    (work / "export.jsonl").write_text("".join(exported), encoding="utf-8")
    made_by = {
        "commit": COMMIT,
        "python": list(sys.version_info[:3]),
        "snapshot_format": memserver.store.SNAPSHOT_FORMAT,
        "embedder": FakeEmbedder.model_name,
        "collection": COLLECTION,
        "memories": len(exported),
        "script": "tests/data/make_store_fixture.py",
    }
    (work / "made_by.json").write_text(json.dumps(made_by, indent=2) + "\n", encoding="utf-8")
    work.rename(out)
    print(f"wrote {out}: {len(exported)} live memories")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: make_store_fixture.py OUT_DIR")
    main(Path(sys.argv[1]).resolve())
