"""The importers (memserver/importers/) through import_file on a local store with the fake embedder: what each
format becomes (content, speaker, role, session, occurred_at, source, tags), what is skipped and why, that a
re-import stores nothing, and that a malformed file names its position and imports nothing unless keep_going."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memserver.contract.backend import Memory
from memserver.importers.entries import ImportFormatError
from memserver.importers.run import Progress, import_file, split_text
from memserver.local.store import MemoryStore
from tests.support.fakes import FakeEmbedder

IMPORTS = Path(__file__).resolve().parents[1] / "data" / "imports"


@pytest.fixture
def store(tmp_path: Path) -> Iterator[MemoryStore]:
    with MemoryStore(tmp_path / "data", "imports", embedder=FakeEmbedder()) as s:
        yield s


def memories(store: MemoryStore) -> list[Memory]:
    """Every current memory, oldest occurred_at first."""
    return list(reversed(store.list_page(1000).memories))


def test_chatgpt_follows_the_current_branch_and_skips_system_tool_and_hidden_nodes(store: MemoryStore) -> None:
    summary = import_file(store, "chatgpt", IMPORTS / "chatgpt_conversations.json", user="Sam")
    assert (summary.stored, summary.duplicates) == (3, 0)
    assert dict(summary.skipped) == {"hidden from the conversation": 1, "tool message": 1}
    got = [(m.content, m.speaker, m.role) for m in memories(store)]
    assert got == [  # the regenerated-away answer (a sibling branch) is not there
        ("We fly to Porto on 3 May.", "Sam", "user"),
        ("Porto on 3 May: I will remind you to book the hotel.", "ChatGPT", "assistant"),
        ("The hotel is Casa da Ribeira.", "Sam", "user"),
    ]
    first = memories(store)[0]
    assert first.session == "c0ffee00-0000-4000-8000-000000000001"
    assert first.source == "chatgpt:c0ffee00-0000-4000-8000-000000000001#n-2"
    assert first.occurred_at == "2024-04-03T08:00:00.500000+00:00" and first.tags == ("chatgpt",)


def test_the_mcp_memory_graph_becomes_observations_and_relations(store: MemoryStore) -> None:
    summary = import_file(store, "mcp-memory", IMPORTS / "mcp_memory.jsonl")
    assert (summary.stored, sum(summary.skipped.values())) == (4, 0)
    by_source = {m.source: m for m in memories(store)}
    assert by_source["mcp-memory:John_Smith#0"].content == "John_Smith: Speaks fluent Spanish"
    assert by_source["mcp-memory:John_Smith#0"].tags == ("mcp-memory", "person")
    assert by_source["mcp-memory:Anthropic"].content == "Anthropic (organization)"
    relation = by_source["mcp-memory:John_Smith|works_at|Anthropic"]
    assert relation.content == "John_Smith works at Anthropic" and relation.tags == ("mcp-memory", "relation")


def test_markdown_notes_become_sections_with_their_path_and_front_matter_tags(store: MemoryStore) -> None:
    summary = import_file(store, "markdown", IMPORTS / "notes")
    assert summary.stored == 4 and dict(summary.skipped) == {"a heading without text": 2}
    by_source = {m.source: m for m in memories(store)}
    assert set(by_source) == {"boiler.md", "boiler.md#warranty", "boiler.md#service", "projects/garden.md#plans"}
    warranty = by_source["boiler.md#warranty"]
    assert warranty.content == "## Warranty\n\nThe warranty ends in 2027; keep the service receipts."
    assert warranty.tags == ("markdown", "home", "maintenance") and warranty.occurred_at.startswith("2025-02-10")
    assert "# not a heading" in by_source["boiler.md#service"].content  # a fenced block's "#" is text
    assert by_source["projects/garden.md#plans"].tags == ("markdown",)


def test_reimporting_every_format_stores_nothing_new(store: MemoryStore) -> None:
    paths = {
        "claude": "claude_conversations.json",
        "chatgpt": "chatgpt_conversations.json",
        "mcp-memory": "mcp_memory.jsonl",
        "markdown": "notes",
    }
    first = {fmt: import_file(store, fmt, IMPORTS / name).stored for fmt, name in paths.items()}
    count = store.stats()["count"]
    again = {fmt: import_file(store, fmt, IMPORTS / name) for fmt, name in paths.items()}
    assert all(s.stored == 0 and s.duplicates == first[fmt] for fmt, s in again.items())
    assert store.stats()["count"] == count == sum(first.values())
    # into another namespace it is stored again, there, with ids of its own
    assert import_file(store, "claude", IMPORTS / paths["claude"], namespace="work").stored == first["claude"]


@pytest.mark.parametrize(
    ("fmt", "name", "where"),
    [
        ("claude", "claude_bad_sender.json", '[0].chat_messages[0].sender: expected "human" or "assistant"'),
        ("claude", "claude_not_json.json", "line 3 column 1: not JSON"),
        ("mcp-memory", "mcp_bad_line.jsonl", "line 2 column 78: not JSON"),
    ],
)
def test_a_malformed_file_names_the_file_and_position_and_imports_nothing(
    store: MemoryStore, fmt: str, name: str, where: str
) -> None:
    path = IMPORTS / "broken" / name
    with pytest.raises(ImportFormatError) as caught:
        import_file(store, fmt, path)
    assert str(caught.value).startswith(f"{path}: {where}")
    assert store.stats()["count"] == 0


def test_keep_going_skips_the_malformed_parts_and_counts_them(store: MemoryStore) -> None:
    summary = import_file(store, "mcp-memory", IMPORTS / "broken" / "mcp_bad_line.jsonl", keep_going=True)
    assert summary.stored == 2
    ((reason, count),) = summary.skipped.items()
    assert count == 1 and reason.startswith("malformed (line 2 column 78")


def test_a_broken_conversation_is_skipped_whole_with_keep_going(store: MemoryStore, tmp_path: Path) -> None:
    good = json.loads((IMPORTS / "claude_conversations.json").read_text())
    bad = {"uuid": "c-bad", "chat_messages": [{"uuid": "m1", "sender": "human", "text": "fine"}, {"uuid": 7}]}
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([bad, *good]))
    with pytest.raises(ImportFormatError, match=r"\[0\]\.chat_messages\[1\]\.uuid: expected the message's uuid"):
        import_file(store, "claude", path)
    summary = import_file(store, "claude", path, keep_going=True)
    assert summary.stored == 4 and store.search("fine", mode="keyword") == []


def test_a_message_longer_than_a_memory_is_split_with_sources_of_its_own(store: MemoryStore, tmp_path: Path) -> None:
    paragraph = "word " * 1999  # just under 10,000 characters
    long = "\n\n".join([paragraph] * 3)
    path = tmp_path / "conversations.json"
    conversation = {"uuid": "c1", "chat_messages": [{"uuid": "m1", "sender": "assistant", "text": long}]}
    path.write_text(json.dumps([conversation]))
    assert import_file(store, "claude", path).stored == 2
    assert sorted(m.source for m in memories(store)) == ["claude:c1#m1", "claude:c1#m1~2"]
    assert [len(p) <= 20_000 for p in split_text(long, 20_000)] == [True, True]


def test_the_progress_bar_is_drawn_only_on_a_terminal() -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    pipe, tty = io.StringIO(), Terminal()
    for stream in (pipe, tty):
        bar = Progress("importing x", 3, stream)
        for _ in range(3):
            bar.advance()
        bar.close()
    assert pipe.getvalue() == ""
    assert "importing x [" in tty.getvalue() and "3/3" in tty.getvalue()


def test_an_unknown_format_or_a_missing_path_is_one_clear_error(store: MemoryStore, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown import format 'evernote'"):
        import_file(store, "evernote", tmp_path)
    with pytest.raises(ValueError, match="no such file or folder"):
        import_file(store, "claude", tmp_path / "missing.json")
