"""What the keyword side matches, on both engines (issue 23): tags as terms, a query naming a tag, word families
("allergy" / "allergic") and CJK text, which has no spaces between words.

Keyword mode shows the terms alone; hybrid must agree where the issue asks it to (a query naming a tag). The fake
embedder is a bag of words, so CJK text (one "word" per run) is invisible to it: only the keyword side finds it.
"""

from __future__ import annotations

import mcp_types as types
import pytest

from tests.contract.harness import BackendUnderTest, ids

FALCON = [
    "Kick-off with the vendor went well; the data export is the first milestone",
    "Budget approved: 48k for the migration",
    "Biggest risk: the billing system has no test environment",
]


def _seed_tags(store: object) -> tuple[list[str], list[str], str]:
    """Three memories tagged project-falcon (none says so in its words), four tagged work, and one memory whose
    words say "project falcon" but carries no such tag."""
    falcon = [store.add(text, tags=["project-falcon"]).id for text in FALCON]  # type: ignore[attr-defined]
    work = [
        store.add("Stand-up moves to 09:30 from Monday", tags=["work"]).id,  # type: ignore[attr-defined]
        store.add("IT swaps my laptop on Thursday", tags=["work"]).id,  # type: ignore[attr-defined]
        store.add("Expense report for the Lisbon trip is due", tags=["work"]).id,  # type: ignore[attr-defined]
        store.add("Desk booking opens on Fridays", tags=["work", "office"]).id,  # type: ignore[attr-defined]
    ]
    # Many words the queries use, and no tag: BM25 alone ranks it high (short, every query word, repeated).
    words = store.add("work work work: the falcon project, project falcon notes").id  # type: ignore[attr-defined]
    return falcon, work, words


def test_a_tag_is_a_keyword_term_split_like_content(backend: BackendUnderTest) -> None:
    """`project-falcon` is found by "project falcon" and by "falcon" alone (13)."""
    store = backend.store
    falcon, _, _ = _seed_tags(store)
    found = ids(store.search("falcon", limit=10, mode="keyword"))
    assert set(falcon) <= set(found)
    assert set(falcon) <= set(ids(store.search("project falcon", limit=10, mode="keyword")))


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
@pytest.mark.parametrize("query", ["project falcon", "Project-Falcon", "project_falcon"])
def test_a_query_naming_a_tag_finds_its_memories_first(backend: BackendUnderTest, mode: str, query: str) -> None:
    """A query equal to a tag name, however spelt, ranks that tag's memories above a memory that only has the words
    (13)."""
    store = backend.store
    falcon, _, words = _seed_tags(store)
    found = ids(store.search(query, limit=5, mode=mode))
    assert set(found[:3]) == set(falcon)
    assert words in found[3:]


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_the_completion_topic_work_finds_the_four_memories_tagged_work(backend: BackendUnderTest, mode: str) -> None:
    """The issue's case: the topic `work` found none of the four memories tagged work (13)."""
    store = backend.store
    _, work, _ = _seed_tags(store)
    assert set(ids(store.search("work", limit=4, mode=mode))) == set(work)
    assert set(ids(store.search("Work", limit=4, mode=mode, tags=["office"]))) == {work[3]}


def test_a_tag_named_by_a_longer_query_is_only_a_term(backend: BackendUnderTest) -> None:
    """A query that holds a tag's words but is not its name gets no tag-first order: plain BM25."""
    store = backend.store
    falcon, _, words = _seed_tags(store)
    assert ids(store.search("falcon project notes", limit=1, mode="keyword")) == [words]
    assert set(falcon) <= set(ids(store.search("falcon project notes", limit=10, mode="keyword")))


def test_allergy_and_allergic_meet(backend: BackendUnderTest) -> None:
    """Snowball stems "allergy" allergi and "allergic" allerg; a query for either finds both now. Pairs Snowball
    already joined still meet ("industry" / "industrial"), and a short "-y" word keeps to itself ("party" does
    not find "part") (14)."""
    store = backend.store
    lena = store.add("Lena is allergic to kiwi").id
    tom = store.add("Tom has a penicillin allergy").id
    plant = store.add("The industrial estate by the river").id
    part = store.add("Ordered the spare part for the dishwasher").id
    store.add("Lena likes kiwi ice cream")
    for query in ("allergy", "allergic", "allergies"):
        assert set(ids(store.search(query, limit=5, mode="keyword"))) == {lena, tom}, query
    assert ids(store.search("industry", limit=5, mode="keyword")) == [plant]
    assert ids(store.search("party", limit=5, mode="keyword")) == []
    assert ids(store.search("part", limit=5, mode="keyword")) == [part]


def test_cjk_text_is_found_by_its_words(backend: BackendUnderTest) -> None:
    """The issue's case: "東京" finds `東京のホテル…`; Chinese likewise; one character finds its memories; a word
    sharing one character with a memory does not match it (15)."""
    store = backend.store
    hotel = store.add("東京のホテルは新宿に予約した。チェックインは15時。").id
    kyoto = store.add("京都では清水寺を見に行く予定。").id
    tea = store.add("妈妈喜欢喝龙井茶，生日礼物可以买杭州的龙井。").id
    assert ids(store.search("東京", limit=5, mode="keyword")) == [hotel]
    assert ids(store.search("ホテルの予約", limit=5, mode="keyword"))[0] == hotel
    assert ids(store.search("清水寺", limit=5, mode="keyword")) == [kyoto]
    assert ids(store.search("龙井茶", limit=5, mode="keyword")) == [tea]
    assert ids(store.search("茶", limit=5, mode="keyword")) == [tea]
    assert set(ids(store.search("京", limit=5, mode="keyword"))) == {hotel, kyoto}
    assert ids(store.search("東京", limit=5, mode="hybrid"))[0] == hotel


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_every_completion_offered_topic_finds_memories(backend: BackendUnderTest) -> None:
    """Through a real MCP client: each topic `completion/complete` offers for recall-context finds a memory by its
    words (keyword mode), and the topic `work` recalls the four memories tagged work (13)."""
    from mcp import Client

    from memserver.server import build_server

    store = backend.store
    _, work, _ = _seed_tags(store)
    store.add("During the storm the power went down; we moved the freezer under the stairs")
    ref = types.PromptReference(type="ref/prompt", name="recall-context")
    async with Client(build_server(lambda user: store), mode="legacy") as client:
        offered: list[str] = []
        for prefix in ("w", "d", "u", "f", "p", "s"):
            offered += (await client.complete(ref, {"name": "topic", "value": prefix})).completion.values
        text = (await client.get_prompt("recall-context", {"topic": "work"})).messages[0].content.text  # type: ignore[union-attr]
        assert {"work", "project-falcon", "storm", "freezer"} <= set(offered)
        for topic in offered:  # (the server closes the store when the session ends)
            assert store.search(topic, limit=1, mode="keyword"), f"the offered topic {topic!r} finds nothing"
        contents = [store.get(mid).content for mid in work]
    listed = [line for line in text.splitlines() if line.startswith(("1.", "2.", "3.", "4."))]
    assert len(listed) == 4 and all(c in text for c in contents), text
