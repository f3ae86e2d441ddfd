"""Crash states: replay a PowerLossFiles log up to a crash point, and draw what the disk may hold afterwards.

The model is in this package's docstring. A state is drawn with its own seeded generator, so a failing one is
re-drawn from (seed, index) alone; `CrashState.notes` says what was drawn for each file and folder.
"""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Union

from tests.powerloss.recorder import Event, PowerLossFiles

PAGE = 4096
Tree = dict[str, Union[bytes, "Tree"]]
_Op = tuple[str, int, bytes]  # ("write", offset, data) or ("truncate", length, b"")


@dataclass
class _File:
    synced: bytes
    image: bytearray
    pending: list[_Op] = field(default_factory=list)


@dataclass
class _Dir:
    durable: dict[str, int]
    current: dict[str, int]
    pending: list[Event] = field(default_factory=list)


@dataclass
class CrashState:
    index: int
    point: int  # events[:point] happened, events[point] did not
    tree: Tree
    notes: list[str]


def _apply(image: bytearray, op: _Op) -> None:
    kind, at, data = op
    if kind == "truncate":
        if at < len(image):
            del image[at:]
        else:
            image.extend(bytes(at - len(image)))
    else:
        if at > len(image):
            image.extend(bytes(at - len(image)))
        image[at : at + len(data)] = data


class Replay:
    """The model of the disk after events[:position]: per file its synced bytes and the operations since."""

    def __init__(self, rec: PowerLossFiles) -> None:
        self.events = rec.events
        self.kinds = dict(rec.kinds)
        self.root = rec.root_ino
        self.files = {i: _File(b, bytearray(b)) for i, b in rec.base_images.items()}
        self.dirs = {i: _Dir(dict(e), dict(e)) for i, e in rec.base_entries.items()}
        self.position = 0

    def advance(self, point: int) -> None:
        for ev in self.events[self.position : point]:
            self._step(ev)
        self.position = max(self.position, point)

    def _step(self, ev: Event) -> None:
        if ev.op == "create":
            ino, kind = ev.arg  # type: ignore[misc]
            d = self.dirs[ev.ino]
            d.current[ev.name] = ino
            d.pending.append(ev)
            if kind == "dir":
                self.dirs[ino] = _Dir({}, {})
            else:
                self.files[ino] = _File(b"", bytearray())
        elif ev.op in ("write", "truncate", "external"):
            f = self.files[ev.ino]
            if ev.op == "write":
                offset, data = ev.arg  # type: ignore[misc]
                ops: list[_Op] = [("write", offset, data)]
            elif ev.op == "truncate":
                ops = [("truncate", int(ev.arg), b"")]  # type: ignore[call-overload]
            else:
                data = bytes(ev.arg)  # type: ignore[call-overload]
                ops = [("truncate", len(data), b""), ("write", 0, data)]
            for op in ops:
                f.pending.append(op)
                _apply(f.image, op)
        elif ev.op == "sync":
            f = self.files[ev.ino]
            f.synced = bytes(f.image)
            f.pending = []
        elif ev.op in ("rename", "unlink"):
            d = self.dirs[ev.ino]
            _rename_or_unlink(d.current, ev)
            d.pending.append(ev)
        elif ev.op == "sync_dir":
            d = self.dirs[ev.ino]
            d.durable = dict(d.current)
            d.pending = []
        else:
            raise ValueError(f"unknown event {ev.op}")

    # --- drawing a crash state ----------------------------------------------------------------------------------

    def draw(self, rng: random.Random, notes: list[str]) -> Tree:
        everywhere = rng.random()
        policy = "lost" if everywhere < 0.1 else "kept" if everywhere < 0.2 else "mixed"
        notes.append(f"policy {policy}")
        return self._draw_dir(self.root, rng, policy, notes, "")

    def _draw_dir(self, ino: int, rng: random.Random, policy: str, notes: list[str], at: str) -> Tree:
        d = self.dirs[ino]
        n = len(d.pending)
        keep = 0 if policy == "lost" else n if policy == "kept" else rng.choice([0, n, rng.randint(0, n)])
        entries = dict(d.durable)
        for ev in d.pending[:keep]:
            if ev.op == "create":
                entries[ev.name] = ev.arg[0]  # type: ignore[index]
            else:
                _rename_or_unlink(entries, ev)
        if n:
            notes.append(f"{at or '/'}: {keep} of {n} pending entry changes")
        out: Tree = {}
        for name, child in sorted(entries.items()):
            where = f"{at}/{name}"
            if self.kinds[child] == "dir":
                out[name] = self._draw_dir(child, rng, policy, notes, where)
            else:
                out[name] = self._draw_file(child, rng, policy, notes, where)
        return out

    def _draw_file(self, ino: int, rng: random.Random, policy: str, notes: list[str], at: str) -> bytes:
        f = self.files[ino]
        if not f.pending:
            return f.synced
        how = policy if policy != "mixed" else rng.choice(["lost", "kept", "prefix", "pages"])
        if how == "lost":
            data = f.synced
        elif how == "kept":
            data = bytes(f.image)
        elif how == "prefix":
            data, how = self._prefix(f, rng)
        else:
            data, how = self._pages(f, rng)
        notes.append(f"{at}: {how} ({len(f.synced)} synced, {len(f.image)} now, {len(data)} after the crash)")
        return data

    @staticmethod
    def _prefix(f: _File, rng: random.Random) -> tuple[bytes, str]:
        """The pending operations in order up to one, which is torn at a random byte (a truncate: done or not)."""
        j = rng.randrange(len(f.pending))
        image = bytearray(f.synced)
        for op in f.pending[:j]:
            _apply(image, op)
        kind, at, data = f.pending[j]
        cut = rng.randint(0, len(data)) if kind == "write" else int(rng.random() < 0.5)
        if kind == "write":
            _apply(image, ("write", at, data[:cut]))
        elif cut:
            _apply(image, f.pending[j])
        return bytes(image), f"prefix: {j} operations, then {cut} bytes of a {kind}"

    @staticmethod
    def _pages(f: _File, rng: random.Random) -> tuple[bytes, str]:
        """Each 4 KiB page that differs holds its old or its new bytes; the size is any the file had, or between."""
        sizes = [len(f.synced)]
        image = bytearray(f.synced)
        for op in f.pending:
            _apply(image, op)
            sizes.append(len(image))
        size = rng.choice([*sizes, rng.randint(min(sizes), max(sizes))])
        old, new = f.synced, bytes(f.image)
        out = bytearray(size)
        taken = 0
        for start in range(0, size, PAGE):
            a, b = old[start : start + PAGE], new[start : start + PAGE]
            src = b if a != b and rng.random() < 0.5 else a
            if src is b and a != b:
                taken += 1
            piece = src[: size - start]
            out[start : start + len(piece)] = piece  # bytes past its end stay zero
        return bytes(out), f"pages: {taken} new page(s), size {size}"


def _rename_or_unlink(entries: dict[str, int], ev: Event) -> None:
    if ev.op == "rename":
        if ev.name in entries:
            entries[str(ev.arg)] = entries.pop(ev.name)
    else:
        entries.pop(ev.name, None)


def crash_states(rec: PowerLossFiles, count: int, seed: int, points: list[int] | None = None) -> Iterator[CrashState]:
    """`count` crash states at crash points drawn uniformly over the log (or at `points`), in log order."""
    rng = random.Random(seed)
    chosen = sorted(points if points is not None else (rng.randint(0, len(rec.events)) for _ in range(count)))
    replay = Replay(rec)
    for index, point in enumerate(chosen):
        replay.advance(point)
        notes: list[str] = []
        tree = replay.draw(random.Random(f"{seed}-{index}"), notes)
        yield CrashState(index, point, tree, notes)


def materialise(tree: Tree, into: Path) -> None:
    """Write `tree` as real folders and files under `into` (created)."""
    into.mkdir(parents=True)
    for name, node in tree.items():
        if isinstance(node, dict):
            materialise(node, into / name)
        else:
            (into / name).write_bytes(node)


def check_states(
    rec: PowerLossFiles,
    count: int,
    seed: int,
    scratch: Path,
    check: Callable[[Path, int], None],
    points: list[int] | None = None,
) -> int:
    """Materialise each crash state under `scratch` and run `check(folder, point)`; AssertionError names the state.

    Returns the number of states checked.
    """
    n = 0
    for state in crash_states(rec, count, seed, points):
        folder = scratch / f"state-{state.index}"
        materialise(state.tree, folder)
        try:
            check(folder, state.point)
        except Exception as exc:
            happened = rec.events[max(0, state.point - 3) : state.point]
            raise AssertionError(
                f"crash state {state.index} (seed {seed}), after event {state.point} of {len(rec.events)}: {exc!r}\n"
                f"last events: {[(e.op, e.ino, e.name) for e in happened]}\n" + "\n".join(state.notes)
            ) from exc
        shutil.rmtree(folder)
        n += 1
    return n
