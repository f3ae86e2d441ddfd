"""The conversation fields end to end, over stdio and over HTTP: a real `memserver serve` process (real store and
model) and the MCP SDK's client. A dated multi-speaker conversation is imported through remember with its real
dates; then recall by speaker, session and time window, as_of across a replace, list_recent paged through everything,
namespaces kept apart, ?namespace= on resources, a memory's history, and errors naming the field."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import mcp_types as types
import pytest
from anyio.from_thread import BlockingPortal
from jsonschema import Draft202012Validator
from mcp.shared.exceptions import MCPError

from tests.e2e.servers import Live, http_server, http_session, stdio_session

TURNS = [  # (occurred_at, speaker, role, session, content)
    ("2023-05-02T18:05:00Z", "Priya", "user", "book-club-05", "Let's read 'Piranesi' next month."),
    ("2023-05-02T18:06:00Z", "Tom", "participant", "book-club-05", "I'd rather read a mystery, 'The Maltese Falcon'?"),
    ("2023-05-02T18:09:00Z", "Priya", "user", "book-club-05", "Fine, the mystery first and Piranesi in July."),
    ("2023-06-14T09:30:00Z", "Priya", "user", "garden-06", "The tomatoes need staking before the storm on Friday."),
    ("2023-06-14T09:32:00Z", "Assistant", "assistant", "garden-06", "Use soft ties so the stems are not cut."),
]  # fmt: skip


@pytest.fixture(scope="module", params=["stdio", "http"])
def live(
    request: pytest.FixtureRequest, portal: BlockingPortal, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Live]:
    data = tmp_path_factory.mktemp(f"conversation-{request.param}")
    if request.param == "stdio":
        with stdio_session(portal, data, data / "server.log") as session:
            yield session
    else:
        with http_server(data) as running, http_session(portal, running.url) as session:
            yield session


def call(live: Live, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = live.call_tool(name, arguments)
    assert not result.is_error, result.content
    schema = next(tool.output_schema for tool in live.list_tools().tools if tool.name == name)
    Draft202012Validator(schema).validate(result.structured_content)
    return result.structured_content


def read(live: Live, uri: str) -> dict[str, Any]:
    contents = live.read_resource(uri).contents[0]
    assert isinstance(contents, types.TextResourceContents)
    return json.loads(contents.text)


@pytest.fixture(scope="module")
def turns(live: Live) -> list[str]:
    ids = []
    for occurred_at, speaker, role, session, content in TURNS:
        arguments = {
            "content": content,
            "occurred_at": occurred_at,
            "speaker": speaker,
            "role": role,
            "session": session,
        }
        ids.append(call(live, "remember", {**arguments, "namespace": "club"})["id"])
    return ids


def test_who_said_what_and_when(live: Live, turns: list[str]) -> None:
    """recall by speaker, by session and by the time it was said; the dates are those given, not the storage time."""
    by_tom = call(live, "recall", {"query": "which book?", "speaker": "Tom", "namespace": "club"})["results"]
    assert [hit["id"] for hit in by_tom] == [turns[1]] and by_tom[0]["role"] == "participant"
    in_may = call(
        live, "recall", {"query": "what did we discuss?", "until": "2023-05-31", "namespace": "club", "limit": 10}
    )
    assert {hit["id"] for hit in in_may["results"]} == set(turns[:3])
    assert all(hit["occurred_at"].startswith("2023-05-02") for hit in in_may["results"])
    garden = call(live, "recall", {"query": "storm", "session": "garden-06", "namespace": "club"})["results"]
    assert garden[0]["id"] == turns[3] and {hit["session"] for hit in garden} == {"garden-06"}
    keyword = call(live, "recall", {"query": "May 2023", "mode": "keyword", "namespace": "club", "limit": 10})
    assert set(turns[:3]) <= {hit["id"] for hit in keyword["results"]}  # the date words come from occurred_at


def test_list_recent_pages_through_a_namespace_newest_first(live: Live, turns: list[str]) -> None:
    seen, cursor = [], None
    while True:
        page = call(live, "list_recent", {"limit": 2, "namespace": "club", **({"cursor": cursor} if cursor else {})})
        seen += [m["id"] for m in page["memories"]]
        cursor = page.get("next_cursor")
        if cursor is None:
            break
    assert seen == turns[::-1]
    assert call(live, "list_recent", {"session": "book-club-05", "speaker": "Priya", "namespace": "club"})["memories"]


def test_namespaces_never_meet(live: Live, turns: list[str]) -> None:
    in_default = call(live, "recall", {"query": "Piranesi", "limit": 50})["results"]
    assert not {hit["id"] for hit in in_default} & set(turns)
    assert call(live, "forget", {"memory_id": turns[0]}) == {"id": turns[0], "deleted": False}  # not in default
    assert read(live, "memory://recent?namespace=club")["memories"][0]["id"] == turns[-1]
    assert {"namespace": "club", "count": len(TURNS), "uri": "memory://recent?namespace=club"} in read(
        live, "memory://namespaces"
    )["namespaces"]


def test_replaces_keeps_history_and_as_of_answers_as_it_stood(live: Live) -> None:
    old = call(live, "remember", {"content": "The club meets on Tuesdays at Priya's.", "namespace": "club-admin"})
    before = call(live, "recall", {"query": "when does the club meet?", "namespace": "club-admin"})["results"][0]
    new = call(live, "remember", {"content": "The club now meets on Thursdays at the library.", "replaces": old["id"],
                                  "namespace": "club-admin"})  # fmt: skip
    assert new["replaces"] == old["id"]
    now = call(live, "recall", {"query": "when does the club meet?", "namespace": "club-admin"})["results"]
    assert [hit["id"] for hit in now] == [new["id"]]
    then = call(live, "recall", {"query": "when does the club meet?", "namespace": "club-admin",
                                 "as_of": before["created_at"]})["results"]  # fmt: skip
    assert [hit["id"] for hit in then] == [old["id"]]
    history = read(live, f"memory://memories/{old['id']}?namespace=club-admin")
    assert history["replaced_by"] == new["id"] and [v["id"] for v in history["history"]["newer"]] == [new["id"]]
    with pytest.raises(MCPError):
        read(live, f"memory://memories/{old['id']}")  # another namespace


@pytest.mark.parametrize(
    ("name", "arguments", "field"),
    [
        ("remember", {"content": "x", "role": "chairman"}, "role"),
        ("remember", {"content": "x", "occurred_at": "last Tuesday"}, "occurred_at"),
        ("remember", {"content": "x", "replaces": "f" * 32}, "replaces"),
        ("recall", {"query": "x", "namespace": "two words"}, "namespace"),
        ("list_recent", {"cursor": "forged"}, "cursor"),
    ],
)
def test_bad_values_are_tool_errors_naming_the_field(
    live: Live, name: str, arguments: dict[str, Any], field: str
) -> None:
    result = live.call_tool(name, arguments)
    assert result.is_error and isinstance(result.content[0], types.TextContent)
    assert result.content[0].text.startswith(field), result.content[0].text


def test_stats_count_a_namespace(live: Live, turns: list[str]) -> None:
    assert read(live, "memory://stats?namespace=club")["namespace"] == {"name": "club", "count": len(TURNS)}
