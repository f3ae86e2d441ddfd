"""Hostile journals (issue 27 item 4): a line with a good CRC but an impossible field (a namespace with spaces, a
memory that replaces itself, a cycle of `replaces`, a row that is not a number, ...) refuses the store with one line
naming the file, the byte offset and the field, and changes nothing on disk; a legal history opens quietly."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from memserver.cli.command import main
from memserver.errors import CorruptJournalError
from tests.support.fakes import FakeEmbedder
from tests.support.hostile import (
    Edit,
    append,
    cycle,
    field,
    journal,
    open_store,
    rewrite,
    self_replace,
    store_three,
)

CASES: dict[str, tuple[Edit, str]] = {
    "a namespace with spaces": (field(1, "namespace", "team notes"), "namespace"),
    "a kind no memserver writes": (field(0, "kind", "gossip"), "kind"),
    "a row that is not a number": (field(2, "row", "7"), "row"),
    "a negative row": (field(2, "row", -1), "row"),
    "tags that are not a list": (field(0, "tags", "ops"), "tags"),
    "an empty id": (field(1, "id", ""), "id"),
    "an id that is a number": (field(0, "id", 12), "id"),
    "a replaced id with a line break": (field(2, "replaces", "a\nb"), "replaces"),
    "content that is not text": (field(0, "content", {"text": "x"}), "content"),
    "a role no memserver writes": (field(1, "role", "boss"), "role"),
    "a flag that is not true or false": (field(2, "pinned", "yes"), "pinned"),
    "a vector CRC that is not hex": (field(0, "vcrc", "zz"), "vcrc"),
    "a memory that replaces itself": (self_replace, "replaces itself"),
    "a cycle of replaces": (cycle, "cycle of `replaces`"),
    "a forget of a number": (append({"op": "del", "id": 5, "at": "2026-01-01T00:00:00.000000+00:00"}), "id"),
    "a vector fix of no row": (append({"op": "vfix", "row": None, "vcrc": "00000000"}), "row"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_an_impossible_field_refuses_the_store_in_one_line_and_changes_nothing(tmp_path: Path, case: str) -> None:
    edit, named = CASES[case]
    store_three(tmp_path)
    data, offset = rewrite(tmp_path, edit)
    with pytest.raises(CorruptJournalError) as refused:
        open_store(tmp_path)
    message = str(refused.value)
    assert "\n" not in message
    assert str(journal(tmp_path)) in message
    assert named in message
    if case != "a cycle of replaces":  # the cycle shows at its second line, not at the first one changed
        assert f"at byte {offset} " in message
    assert "Restore a backup" in message
    assert journal(tmp_path).read_bytes() == data  # nothing repaired behind the user's back, nothing cut off


def test_the_cli_says_it_in_one_line_and_exits_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MCP_MEMORY_PATH", str(tmp_path))
    monkeypatch.setattr("memserver.embedding.embedder.Embedder", FakeEmbedder)
    for text in ("the ferry leaves at nine", "the harbour master is Ines"):
        assert main(["remember", "--collection", "test", text]) == 0
    rewrite(tmp_path, field(1, "namespace", "team notes"))
    capsys.readouterr()
    for command in (["list"], ["recall", "ferry"], ["stats"]):
        command = [*command, "--collection", "test"]
        assert main(command) == 1, command
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1, err
        assert "journal.jsonl" in err and "namespace" in err and "Traceback" not in err


def test_a_legal_history_opens_quietly(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A newer version whose older one was forgotten and compacted away keeps its link: no warning on any open."""
    with open_store(tmp_path) as s:
        old = s.add("the ferry leaves at nine")
        new = s.add("the ferry leaves at ten", replaces=old.id)
        assert s.delete(old.id)  # the older version, forgotten on its own
        s.compact()
    caplog.set_level(logging.DEBUG, logger="memserver")
    for _ in range(2):
        with open_store(tmp_path) as s:
            got = s.get(new.id)
            assert got is not None and got.content == "the ferry leaves at ten"
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING], caplog.text
