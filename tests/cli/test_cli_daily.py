"""The commands a person uses every day, through the CLI runner (`main`) on a temporary data directory with the
real store and model: short ids, tables that fit the terminal, scores that say what orders them, recall's note,
list's pages, filters and orders, tags, namespaces, edit, retag, stats, times in the local zone, errors in the
words of the command line, and --user (each HTTP token user's own store)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memserver.cli.command import main
from memserver.cli.tables import cells

ANA = "a1b2c3d4" + "0" * 23 + "1"
ANA_TOO = "a1b2c3d4" + "0" * 23 + "2"
LONG = "東京のホテルは新宿にあり、駅から歩いて五分です 😀 " * 4


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("MCP_MEMORY_PATH", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("TZ", "Asia/Tokyo")  # UTC+9, no daylight saving: the times below are fixed
    time.tzset()
    yield tmp_path / "data"
    monkeypatch.delenv("TZ")
    time.tzset()


def run(capsys: pytest.CaptureFixture[str], *argv: str, status: int = 0) -> tuple[str, str]:
    assert main(list(argv)) == status
    captured = capsys.readouterr()
    return captured.out, captured.err


def jsonl(text: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in text.splitlines()]


WEEK = [
    {"id": ANA, "content": "Ana, my sister, lives in Porto and visits every August.", "tags": ["family"],
     "speaker": "Sam", "session": "s1", "occurred_at": "2026-05-03", "created_at": "2026-11-20T08:00:00Z"},
    {"id": ANA_TOO, "content": "Ana's birthday is on 25 November.", "tags": ["family", "dates"],
     "occurred_at": "2026-11-25T18:30:00Z", "created_at": "2026-11-21T08:00:00Z", "source": "mail"},
    {"content": LONG, "tags": ["travel"], "occurred_at": "2026-11-26T01:00:00Z",
     "created_at": "2026-11-22T08:00:00Z", "session": "s2"},
    {"content": "The team ships the mobile app on the first Monday of every month.", "tags": ["work"],
     "occurred_at": "2026-11-27T09:00:00Z", "created_at": "2026-11-23T08:00:00Z", "source": "mail"},
    {"content": "Standup moved to 10:00.", "tags": ["work"], "namespace": "office",
     "occurred_at": "2026-11-28T09:00:00Z", "created_at": "2026-11-24T08:00:00Z"},
]  # fmt: skip


@pytest.fixture(scope="module")
def week_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A week of facts, imported once (embedding them is the slow part): tags, sessions, speakers, sources, a
    date-only and a timed occurred_at, two ids that share their first 8 characters."""
    folder = tmp_path_factory.mktemp("week")
    source = folder / "week.jsonl"
    source.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in WEEK), encoding="utf-8")
    with pytest.MonkeyPatch.context() as env:
        env.setenv("MCP_MEMORY_PATH", str(folder / "data"))
        assert main(["import", str(source)]) == 0
    return folder / "data"


@pytest.fixture
def week(data_dir: Path, week_template: Path) -> None:
    """The week's memories, in this test's own copy of the store."""
    shutil.copytree(week_template, data_dir)


def rows(out: str) -> list[str]:
    return out.splitlines()[1:]


# --- 5: short ids --------------------------------------------------------------------------------------------------


def test_tables_show_short_ids_and_a_unique_prefix_names_a_memory(
    week: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = run(capsys, "list")
    assert [row.split()[0] for row in rows(out)][-2:] == [ANA_TOO[:8], ANA[:8]]
    assert all(len(row.split()[0]) == 8 for row in rows(out))
    out, _ = run(capsys, "show", ANA.upper(), "--json")  # the full id still works
    assert jsonl(out)[0]["id"] == ANA
    other = jsonl(run(capsys, "list", "--json", "--tag", "work")[0])[0]["id"]
    out, _ = run(capsys, "show", other[:4], "--json")
    assert jsonl(out)[0]["id"] == other
    _, err = run(capsys, "show", "a1b2", status=1)  # ambiguous: the candidates, in one line
    assert err.count("\n") == 1 and "several ids" in err and ANA[:12] in err and ANA_TOO[:12] in err
    _, err = run(capsys, "show", "a1b", status=1)
    assert "an id as printed by `memserver remember`" in err and "4 characters or more" in err
    out, err = run(capsys, "forget", other[:6], "ffff", status=1)
    assert out.strip() == f"forgot {other}" and err.strip() == "memserver: no memory ffff in namespace default"


# --- 6: tables fit the terminal ------------------------------------------------------------------------------------


def test_tables_fit_80_columns_in_display_cells_and_pipes_keep_everything(
    week: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for argv in (["list"], ["recall", "hotel in Tokyo"], ["forget", "--tag", "travel"]):
        monkeypatch.setattr("sys.stdin", open("/dev/null"))  # noqa: SIM115 (forget: no terminal, so it refuses)
        out, _ = run(capsys, *argv, status=1 if argv[0] == "forget" else 0)
        table = [line for line in out.splitlines() if line.startswith(("ID", ANA[:4])) or "#" in line]
        assert table and all(cells(line) <= 80 for line in table), table
        content_at = table[0].index("TAGS")
        cut = [line[content_at:] for line in table[1:] if line.endswith("…")]
        assert all(cells(content) >= 39 for content in cut), cut  # 40, or 39 when a wide character did not fit
    out, _ = run(capsys, "list", "--tag", "travel")
    (row,) = rows(out)
    assert row.endswith("…") and "東京" in row and cells(row) <= 80 and cells(row) >= 79  # a wide cell may not fit
    monkeypatch.delenv("COLUMNS")  # writing to a pipe (capsys is no terminal): full content, one line a memory
    out, _ = run(capsys, "list", "--tag", "travel")
    (row,) = rows(out)
    assert row.endswith(" ".join(LONG.split())) and "…" not in row


# --- 7 and 8: scores a person can read; recall's note, --min-score, --mode, --explain -------------------------------


def test_recall_shows_the_score_it_is_ordered_by_and_explains_it(
    week: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = run(capsys, "recall", "where does Ana live?")
    header, *lines = out.splitlines()
    assert header.split()[:2] == ["ID", "FUSED"] and lines[0].startswith(ANA[:8])
    shown = [float(line.split()[1]) for line in lines]
    assert shown == sorted(shown, reverse=True)
    out, _ = run(capsys, "recall", "where does Ana live?", "--json")
    found = jsonl(out)
    assert [r["rank"] for r in found] == list(range(1, len(found) + 1))
    assert [r["rank_score"] for r in found] == sorted((r["rank_score"] for r in found), reverse=True)
    assert {"score", "rank_score"} <= set(found[0])
    out, _ = run(capsys, "recall", "Ana", "--mode", "keyword")
    assert out.splitlines()[0].split()[1] == "BM25"
    out, _ = run(capsys, "recall", "where does Ana live?", "--explain", "--limit", "2")
    first, header, row, why, *_ = out.splitlines()
    assert first.startswith("query: mode hybrid") and header.startswith("ID") and row.startswith(ANA[:8])
    assert why.startswith("      ordered by ") and "cosine" in why and "semantic: rank 1" in why
    out, _ = run(capsys, "recall", "Ana", "--explain", "--json", "--limit", "1")
    assert jsonl(out)[0]["explain"]["rank"] == 1


def test_recall_says_what_the_tool_says_when_nothing_matches_well(
    week: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out, err = run(capsys, "recall", "quantum chromodynamics lattice", "--limit", "2")
    assert len(rows(out)) == 2 and err.startswith("memserver: No strong match: the best score is ")
    out, _ = run(capsys, "recall", "quantum chromodynamics lattice", "--limit", "2", "--json")
    *hits, note = jsonl(out)
    assert len(hits) == 2 and note["note"].startswith("No strong match")
    out, err = run(capsys, "recall", "Ana", "--min-score", "0.99")
    assert out == "" and err.strip() == "memserver: Nothing found: no memory passed min_score 0.99."
    out, _ = run(capsys, "recall", "zzzyx", "--mode", "keyword", "--json")
    assert jsonl(out) == [{"note": "Nothing found: no memory shares a word with the query. Try mode 'hybrid' to "
                                   "search by meaning."}]  # fmt: skip
    out, err = run(capsys, "recall", "Ana", "--tag", "work", "--min-score", "0.9")
    assert "no memory passed the filters (tags, source, since, until) and min_score 0.9" in err


# --- 9: list's pages, filters and orders; forget --before/--source; tags; namespaces; edit; retag; stats -----------


def test_list_pages_with_cursor_and_page_and_filters(week: None, capsys: pytest.CaptureFixture[str]) -> None:
    everything = [r["id"] for r in jsonl(run(capsys, "list", "--all", "--json")[0])]
    assert len(everything) == 4
    out, err = run(capsys, "list", "--limit", "3", "--json")
    cursor = err.split("--cursor ")[1].split()[0]
    assert [r["id"] for r in jsonl(out)] == everything[:3] and "--page 2" in err
    out, err = run(capsys, "list", "--limit", "3", "--json", "--cursor", cursor)
    assert [r["id"] for r in jsonl(out)] == everything[3:] and "next page" not in err
    assert [r["id"] for r in jsonl(run(capsys, "list", "--limit", "3", "--json", "--page", "2")[0])] == everything[3:]
    assert jsonl(run(capsys, "list", "--limit", "3", "--json", "--page", "3")[0]) == []
    for flags, n in ((["--source", "mail"], 2), (["--since", "2026-11-26"], 2), (["--until", "2026-11-25"], 2),
                     (["--speaker", "Sam"], 1), (["--session", "s2"], 1), (["--namespace", "office"], 1)):  # fmt: skip
        assert len(jsonl(run(capsys, "list", "--json", *flags)[0])) == n, flags
    _, err = run(capsys, "list", "--cursor", "nonsense", status=1)
    assert "--cursor must be a next_cursor printed by `memserver list`" in err
    _, err = run(capsys, "list", "--page", "2", "--all", status=1)
    assert "give one of --cursor, --page and --all" in err


def test_list_by_stored_finds_a_backdated_memory_just_added(week: None, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "remember", "Grandpa was born in 1931.", "--occurred-at", "1931-04-02", "--json")
    new = jsonl(out)[0]["id"]
    assert jsonl(run(capsys, "list", "--json", "--limit", "1")[0])[0]["id"] != new
    out, _ = run(capsys, "list", "--by", "stored", "--limit", "1")
    assert rows(out)[0].startswith(new[:8]) and "1931-04-02" in rows(out)[0]


def test_forget_by_source_and_by_storage_time(week: None, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "forget", "--source", "mail", "--yes", "--json")
    assert jsonl(out) == [{"matched": 2, "forgotten": 2}]
    out, _ = run(capsys, "forget", "--before", "2026-11-21", "--yes")
    assert out.splitlines()[0] == "1 memory stored before 2026-11-21 in namespace default:"
    assert out.splitlines()[-1] == "forgot 1 memory"
    assert len(jsonl(run(capsys, "list", "--json")[0])) == 1


def test_tags_and_namespaces_with_counts(week: None, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "tags")
    assert [line.split() for line in out.splitlines()] == [
        ["COUNT", "TAG"], ["2", "family"], ["1", "dates"], ["1", "travel"], ["1", "work"]
    ]  # fmt: skip
    assert jsonl(run(capsys, "tags", "--namespace", "office", "--json")[0]) == [{"tag": "work", "count": 1}]
    out, _ = run(capsys, "namespaces", "--json")
    assert jsonl(out) == [{"namespace": "default", "count": 4}, {"namespace": "office", "count": 1}]


def test_edit_stores_a_new_version_keeping_the_fields(
    week: None, capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out, _ = run(capsys, "edit", ANA, "--content", "Ana, my sister, moved to Lisbon.", "--json")
    new = jsonl(out)[0]
    assert new["replaces"] == ANA
    (stored,) = jsonl(run(capsys, "show", new["id"], "--json")[0])
    assert (stored["speaker"], stored["session"], stored["tags"]) == ("Sam", "s1", ["family"])
    assert stored["occurred_at"].startswith("2026-05-03") and stored["history"]["older"][0]["id"] == ANA
    editor = tmp_path / "editor.py"  # $EDITOR: appends to the file it is given
    editor.write_text("import sys\nopen(sys.argv[1], 'a').write(' In Alfama.')\n", encoding="utf-8")
    monkeypatch.setenv("EDITOR", f"python3 {editor}")
    out, _ = run(capsys, "edit", new["id"][:6], "--speaker", "Ana", "--json")
    (again,) = jsonl(run(capsys, "show", jsonl(out)[0]["id"], "--json")[0])
    assert again["content"] == "Ana, my sister, moved to Lisbon.\n In Alfama."  # (the editor kept the newline)
    assert again["speaker"] == "Ana" and again["session"] == "s1" and again["replaces"] == new["id"]
    _, err = run(capsys, "edit", ANA, "--content", "x", status=1)
    assert f"was replaced by {new['id'][:8]}; edit that one" in err
    monkeypatch.setenv("EDITOR", "false")
    _, err = run(capsys, "edit", again["id"][:6], status=1)
    assert "the editor exited with status 1; nothing stored" in err


def test_retag_adds_and_removes_tags_as_a_new_version(week: None, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "retag", ANA_TOO, "+birthdays", "-dates")
    assert out.startswith("stored ") and out.strip().endswith("(tags: family, birthdays)")
    new = out.split()[1].rstrip(",")
    (memory,) = jsonl(run(capsys, "show", new, "--json")[0])
    assert memory["tags"] == ["family", "birthdays"] and memory["replaces"] == ANA_TOO and memory["source"] == "mail"
    out, _ = run(capsys, "retag", new[:6], "+family")
    assert out.startswith("no change")
    _, err = run(capsys, "retag", new[:6], "-nothing", status=1)
    assert "has no tag nothing to remove" in err


def test_stats_is_a_table_and_json_with_json(week: None, capsys: pytest.CaptureFixture[str]) -> None:
    out, _ = run(capsys, "stats")
    figures = dict(line.split(None, 1) for line in out.splitlines())
    assert figures["count"] == "5" and figures["engine"] == "local" and "index.M" in figures
    assert json.loads(run(capsys, "stats", "--json")[0])["count"] == 5


# --- 10: times ------------------------------------------------------------------------------------------------------


def test_times_are_local_with_the_zone_named_and_a_date_stays_a_date(
    week: None, capsys: pytest.CaptureFixture[str]
) -> None:
    out, _ = run(capsys, "list", "--tag", "dates")
    header, row = out.splitlines()
    assert "WHEN (JST)" in header and "2026-11-26 03:30" in row  # 18:30 UTC is 03:30 the next day in Tokyo
    out, _ = run(capsys, "list", "--tag", "dates", "--utc")
    assert "WHEN (UTC)" in out and "2026-11-25 18:30" in out
    out, _ = run(capsys, "show", ANA)
    fields = dict(line.split(None, 1) for line in out.splitlines()[:8] if line)
    assert fields["occurred_at"] == "2026-05-03" and fields["created_at"] == "2026-11-20 17:00:00 JST"
    out, _ = run(capsys, "show", ANA, "--utc")
    assert "2026-11-20 08:00:00 UTC" in out


def test_as_of_help_says_storage_time_and_json_help_says_json_lines(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["recall", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "storage time" in text and "as of what happened, use --until WHEN" in text
    assert "JSON Lines (one JSON object per line)" in text


# --- 11: errors in the person's words ------------------------------------------------------------------------------


def test_errors_name_flags_and_an_unknown_flag_shows_the_usage(
    data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, err = run(capsys, "remember", "x y z", "--occurred-at", "someday", status=1)
    assert err.startswith("memserver: error: --occurred-at must be") and "occurred_at" not in err
    _, err = run(capsys, "recall", "x", "--since", "2026-02-01", "--until", "2026-01-01", status=1)
    assert "--since (2026-02-01) must not be later than --until (2026-01-01)" in err
    _, err = run(capsys, "remember", "x y z", "--replaces", "not-an-id", status=1)
    assert "an id as printed by `memserver remember`" in err
    with pytest.raises(SystemExit) as exc:
        main(["list", "--limt", "3"])
    err = capsys.readouterr().err
    assert exc.value.code == 2 and err.startswith("usage: memserver list ") and "did you mean --limit?" in err


# --- 19: each HTTP token user's own store --------------------------------------------------------------------------


def test_export_and_import_move_memories_to_a_users_store(
    week: None, data_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert jsonl(run(capsys, "list", "--user", "alice", "--json")[0]) == []
    backup = tmp_path / "personal.jsonl"
    run(capsys, "export", "-o", str(backup))
    _, err = run(capsys, "import", "--user", "alice", str(backup))
    assert "imported 5 new memories" in err
    assert (data_dir / "users" / "alice" / "personal_memory").is_dir()
    listed = jsonl(run(capsys, "list", "--user", "alice", "--all", "--json")[0])
    assert {r["id"] for r in listed} >= {ANA, ANA_TOO}
    assert len(jsonl(run(capsys, "list", "--all", "--json")[0])) == 4  # the personal store keeps its own
    _, err = run(capsys, "export", "--user", "alice", "-o", str(tmp_path / "alice.jsonl"))
    assert "exported 5 memories" in err
    with pytest.raises(SystemExit):
        main(["list", "--user", "../bob"])
    assert "a user name is 1-32 letters, digits, '_' or '-'" in capsys.readouterr().err
