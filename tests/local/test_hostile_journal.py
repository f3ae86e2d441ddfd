"""Hostile journals (issue 27 item 4): a line with a good CRC but an impossible field (a namespace with spaces, a
memory that replaces itself, a cycle of `replaces`, a row that is not a number, ...) refuses the store with one line
naming the file, the byte offset and the field, and changes nothing on disk; a legal history opens quietly."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memserver.cli.command import main
from memserver.errors import CorruptJournalError
from memserver.local.journal import decode_line, encode_line
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder

Edit = Callable[[list[dict[str, Any]]], None]


def _open(root: Path) -> MemoryStore:
    return MemoryStore(root, "test", embedder=FakeEmbedder())


def _journal(root: Path) -> Path:
    return root / "test" / "journal.jsonl"


def _store_three(root: Path) -> list[str]:
    """Three memories, few enough that closing writes no checkpoint: every open replays the journal."""
    with _open(root) as s:
        return [m.id for m in s.add_many([f"fact number {i} about the harbour" for i in range(3)])]


def _rewrite(root: Path, edit: Edit) -> tuple[bytes, int]:
    """Let `edit` change the journal's records (the header stays first), re-checksum every line; returns the new
    bytes and the byte offset where the first changed line starts."""
    path = _journal(root)
    lines = path.read_bytes().splitlines(keepends=True)
    records = [decode_line(line.rstrip(b"\n")) for line in lines]
    assert all(r is not None for r in records)
    edited: list[dict[str, Any]] = [json.loads(json.dumps(r)) for r in records if r is not None]
    for r in edited:
        r.pop("crc", None)
    header, body = edited[0], edited[1:]
    edit(body)
    edited = [header, *body]
    out = [encode_line(r) for r in edited]
    data = b"".join(out)
    first = next((i for i, (a, b) in enumerate(zip(lines, out, strict=False)) if a != b), len(lines))
    path.write_bytes(data)
    return data, sum(len(line) for line in out[:first])


def _field(index: int, name: str, value: Any) -> Edit:
    def edit(records: list[dict[str, Any]]) -> None:
        records[index][name] = value

    return edit


def _append(record: dict[str, Any]) -> Edit:
    def edit(records: list[dict[str, Any]]) -> None:
        records.append(record)

    return edit


def _self_replace(records: list[dict[str, Any]]) -> None:
    records[1]["replaces"] = records[1]["id"]


def _cycle(records: list[dict[str, Any]]) -> None:
    """The first memory says it replaces the second, and the second that it replaces the first."""
    records[0]["replaces"] = records[1]["id"]
    records[1]["replaces"] = records[0]["id"]


CASES: dict[str, tuple[Edit, str]] = {
    "a namespace with spaces": (_field(1, "namespace", "team notes"), "namespace"),
    "a kind no memserver writes": (_field(0, "kind", "gossip"), "kind"),
    "a row that is not a number": (_field(2, "row", "7"), "row"),
    "a negative row": (_field(2, "row", -1), "row"),
    "tags that are not a list": (_field(0, "tags", "ops"), "tags"),
    "an empty id": (_field(1, "id", ""), "id"),
    "an id that is a number": (_field(0, "id", 12), "id"),
    "a replaced id with a line break": (_field(2, "replaces", "a\nb"), "replaces"),
    "content that is not text": (_field(0, "content", {"text": "x"}), "content"),
    "a role no memserver writes": (_field(1, "role", "boss"), "role"),
    "a flag that is not true or false": (_field(2, "pinned", "yes"), "pinned"),
    "a vector CRC that is not hex": (_field(0, "vcrc", "zz"), "vcrc"),
    "a memory that replaces itself": (_self_replace, "replaces itself"),
    "a cycle of replaces": (_cycle, "cycle of `replaces`"),
    "a forget of a number": (_append({"op": "del", "id": 5, "at": "2026-01-01T00:00:00.000000+00:00"}), "id"),
    "a vector fix of no row": (_append({"op": "vfix", "row": None, "vcrc": "00000000"}), "row"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_impossible_field_refuses_the_store_in_one_line_and_changes_nothing(tmp_path: Path, case: str) -> None:
    edit, named = CASES[case]
    _store_three(tmp_path)
    data, offset = _rewrite(tmp_path, edit)
    with pytest.raises(CorruptJournalError) as refused:
        _open(tmp_path)
    message = str(refused.value)
    assert "\n" not in message
    assert str(_journal(tmp_path)) in message
    assert named in message
    if case != "a cycle of replaces":  # the cycle shows at its second line, not at the first one changed
        assert f"at byte {offset} " in message
    assert "Restore a backup" in message
    assert _journal(tmp_path).read_bytes() == data  # nothing repaired behind the user's back, nothing cut off


def test_the_cli_says_it_in_one_line_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_MEMORY_PATH", str(tmp_path))
    monkeypatch.setattr("memserver.embedding.embedder.Embedder", FakeEmbedder)
    for text in ("the ferry leaves at nine", "the harbour master is Ines"):
        assert main(["remember", "--collection", "test", text]) == 0
    _rewrite(tmp_path, _field(1, "namespace", "team notes"))
    capsys.readouterr()
    for command in (["list"], ["recall", "ferry"], ["stats"]):
        command = [*command, "--collection", "test"]
        assert main(command) == 1, command
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert "journal.jsonl" in err and "namespace" in err and "Traceback" not in err


def test_a_legal_history_opens_quietly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A newer version whose older one was forgotten and compacted away keeps its link: no warning on any open."""
    with _open(tmp_path) as s:
        old = s.add("the ferry leaves at nine")
        new = s.add("the ferry leaves at ten", replaces=old.id)
        assert s.delete(old.id)  # the older version, forgotten on its own
        s.compact()
    caplog.set_level(logging.DEBUG, logger="memserver")
    for _ in range(2):
        with _open(tmp_path) as s:
            got = s.get(new.id)
            assert got is not None and got.content == "the ferry leaves at ten"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
