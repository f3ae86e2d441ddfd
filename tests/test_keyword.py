"""The keyword index (BM25) and reciprocal-rank fusion."""

from __future__ import annotations

import math
import random
from collections import Counter

import numpy as np
import pytest

from memserver.fusion import reciprocal_rank_fusion
from memserver.keyword import KeywordIndex, date_text, tokenize


def reference_bm25(docs: dict[str, str], query: str, k1: float = 1.2, b: float = 0.75) -> dict[str, float]:
    """Textbook BM25 over the same tokens, written for clarity, to check the vectorised one against."""
    tokens = {key: tokenize(text) for key, text in docs.items()}
    n = len(docs)
    avg = sum(map(len, tokens.values())) / n
    scores: dict[str, float] = {}
    for term in dict.fromkeys(tokenize(query)):
        df = sum(term in t for t in tokens.values())
        if not df:
            continue
        idf = math.log(1 + (n - df + 0.5) / (df + 0.5))
        for key, t in tokens.items():
            tf = Counter(t)[term]
            if tf:
                scores[key] = scores.get(key, 0.0) + idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * len(t) / avg))
    return scores


WORDS = ("alpha beta gamma delta invoice ticket berlin lisbon marta tom coffee flight paid due report").split()  # noqa: SIM905


def random_docs(rng: random.Random, n: int, prefix: str = "d") -> dict[str, str]:
    return {f"{prefix}{i}": " ".join(rng.choices(WORDS, k=rng.randint(1, 12))) for i in range(n)}


class TestTokenize:
    def test_ids_are_indexed_whole_and_in_parts(self) -> None:
        """An id like INV-2024-0173 yields its parts and a glued form, so an exact id outranks a partial one."""
        assert tokenize("INV-2024-0173") == ["inv", "2024", "0173", "inv20240173"]

    def test_emails_ticket_numbers_and_code_identifiers(self) -> None:
        """Emails, '#4521' and snake_case identifiers are searchable whole and by part."""
        terms = tokenize("mail anna.k@example.com about ticket #4521 and enable_new_checkout")
        for term in ("annakexamplecom", "anna", "example", "4521", "enablenewcheckout", "checkout"):
            assert term in terms

    def test_case_accents_plurals_and_stopwords_fold(self) -> None:
        """'Zoë's CAFÉ invoices' and 'zoe cafe invoice' index the same terms."""
        assert tokenize("Zoë's CAFÉ invoices") == tokenize("zoe cafe invoice") == ["zoe", "cafe", "invoice"]

    def test_trailing_colon_and_dashes_are_not_ids(self) -> None:
        """'Note:' and a spaced dash are punctuation, not connectors."""
        assert tokenize("Note: done - ok") == ["note", "done", "ok"]

    def test_unicode_punctuation_splits(self) -> None:
        """Curly quotes and dashes separate words like ASCII punctuation does."""
        assert tokenize("“Perfect Days”—Wenders") == ["perfect", "day", "wender"]


class TestSearch:
    def test_matches_reference_bm25(self) -> None:
        """Scores equal a textbook BM25 over the same tokens, and come best first."""
        rng = random.Random(1)
        docs = random_docs(rng, 200)
        index = KeywordIndex()
        index.add_many(docs.items())
        for query in ("invoice paid", "marta lisbon flight", "coffee", "tom report due berlin"):
            expected = reference_bm25(docs, query)
            got = index.search(query, k=len(docs))
            assert dict(got) == pytest.approx(expected, rel=1e-5)
            assert [s for _, s in got] == sorted((s for _, s in got), reverse=True)

    def test_exact_id_ranks_first(self) -> None:
        """A query for an id finds that id before documents sharing only some of its parts."""
        index = KeywordIndex()
        index.add("a", "Invoice INV-2024-0137 for the brand guidelines")
        index.add("b", "Invoice INV-2024-0173 for the logo")
        index.add("c", "Paid 2024 taxes")
        assert index.search("INV-2024-0173", k=3)[0][0] == "b"

    def test_no_known_words_returns_nothing(self) -> None:
        """A query of stopwords or unseen words, an empty index and k=0 all give []."""
        index = KeywordIndex()
        assert index.search("anything") == []
        index.add("a", "coffee with Marta")
        assert index.search("what is the") == []
        assert index.search("zeppelin") == []
        assert index.search("coffee", k=0) == []

    def test_removed_documents_never_come_back_and_stats_follow(self) -> None:
        """After remove, the key is gone from results and idf is computed over live documents only."""
        rng = random.Random(2)
        docs = random_docs(rng, 100)
        index = KeywordIndex()
        index.add_many(docs.items())
        for key in list(docs)[::3]:
            assert index.remove(key)
            del docs[key]
        assert not index.remove("d0")
        assert len(index) == len(docs)
        got = dict(index.search("invoice marta", k=200))
        assert got == pytest.approx(reference_bm25(docs, "invoice marta"), rel=1e-5)

    def test_adding_a_key_again_replaces_its_text(self) -> None:
        """add() on an existing key replaces the old text rather than indexing both."""
        index = KeywordIndex()
        index.add("a", "lives in Berlin")
        index.add("a", "moved to Lisbon")
        assert index.search("berlin") == []
        assert [k for k, _ in index.search("lisbon")] == ["a"]
        assert len(index) == 1

    def test_incremental_updates_equal_a_bulk_build(self) -> None:
        """Single adds and removes (through delta, merges and slot renumbering) rank exactly like a rebuild."""
        rng = random.Random(3)
        incremental = KeywordIndex()
        live: dict[str, str] = {}
        for step in range(3000):
            key = f"k{rng.randrange(1500)}"
            if key in live and rng.random() < 0.4:
                incremental.remove(key)
                del live[key]
            else:
                live[key] = " ".join(rng.choices(WORDS, k=rng.randint(1, 8))) + f" n{step}"
                incremental.add(key, live[key])
        bulk = KeywordIndex()
        bulk.add_many(live.items())
        assert len(incremental) == len(bulk) == len(live)
        for query in ("invoice", "tom berlin coffee", "alpha beta gamma delta", "n2999"):
            a = dict(incremental.search(query, k=50_000))
            b = dict(bulk.search(query, k=50_000))
            assert a == pytest.approx(b, rel=1e-5)


class TestCandidates:
    def setup_method(self) -> None:
        self.index = KeywordIndex()
        # 50 strong matches, then one weak match that a top-10 without a filter would never reach
        self.index.add_many((i, "invoice invoice invoice paid") for i in range(50))
        self.index.add(50, "invoice for the long report about many unrelated other things entirely")

    def test_filter_applies_before_top_k(self) -> None:
        """A candidate outside the unfiltered top-k is still found: filters restrict, then rank."""
        assert [k for k, _ in self.index.search("invoice", k=10, candidates={50})] == [50]

    @pytest.mark.parametrize("kind", [set, list, frozenset, np.array])
    def test_every_collection_kind_filters_the_same(self, kind: type) -> None:
        """Sets, lists and numpy int arrays (int keys) give the same filtered ranking."""
        wanted = [3, 50, 7, 999]
        got = self.index.search("invoice", k=10, candidates=kind(wanted))
        assert sorted(k for k, _ in got) == [3, 7, 50]
        assert got[-1][0] == 50

    def test_large_candidate_set(self) -> None:
        """A candidate set larger than the matches takes the other path and agrees."""
        got = self.index.search("invoice", k=100, candidates=set(range(0, 10_000, 2)))
        assert {k for k, _ in got} == set(range(0, 51, 2))

    def test_empty_candidates_return_nothing(self) -> None:
        """An empty filter matches nothing."""
        assert self.index.search("invoice", candidates=set()) == []
        assert self.index.search("invoice", candidates=np.array([], np.int64)) == []

    def test_int_array_after_removals_and_renumbering(self) -> None:
        """The int-array fast path follows removals and the slot renumbering of a merge."""
        for i in range(0, 40):
            self.index.remove(i)
        self.index.add_many((100 + i, "invoice again") for i in range(300))  # bulk: merges and renumbers
        got = self.index.search("invoice", k=5, candidates=np.array([1, 45, 50, 120]))
        assert sorted(k for k, _ in got) == [45, 50, 120]


class TestDates:
    def test_date_text_is_glued_terms(self) -> None:
        """A memory's date becomes three rare terms: day, month and month-day."""
        assert date_text("2025-03-07T10:11:12.5+00:00") == "20250307 202503 march7"

    @pytest.mark.parametrize(
        "query",
        ["what did I note on 7 March 2025", "March 7th", "notes from 2025-03-07", "in March 2025", "7.3.2025"],
    )
    def test_queries_naming_the_date_find_the_memory(self, query: str) -> None:
        """Day, month and ISO forms in a query match the date words of the memory created then."""
        index = KeywordIndex()
        index.add("march", "weekly review notes " + date_text("2025-03-07T09:00:00+00:00"))
        index.add("april", "weekly review notes " + date_text("2025-04-04T09:00:00+00:00"))
        assert index.search(query + " weekly review", k=2)[0][0] == "march"


class TestFusion:
    def test_items_ranked_well_by_both_lists_win(self) -> None:
        """RRF puts an item that is second in both lists above one that is first in only one."""
        fused = reciprocal_rank_fusion([["a", "b", "c"], ["d", "b", "e"]])
        assert [k for k, _ in fused][:3] == ["b", "a", "d"]
        assert fused[0][1] == pytest.approx(2 / 62)

    def test_ties_follow_first_appearance(self) -> None:
        """Equal fused scores keep the order of the first ranking."""
        assert [k for k, _ in reciprocal_rank_fusion([["x", "y"], ["y", "x"]])] == ["x", "y"]

    def test_weights_and_arguments(self) -> None:
        """Weights scale each list's contribution; bad k or weight counts are refused."""
        fused = reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0, 2.0])
        assert [k for k, _ in fused] == ["b", "a"]
        with pytest.raises(ValueError):
            reciprocal_rank_fusion([["a"]], k=-1)
        with pytest.raises(ValueError):
            reciprocal_rank_fusion([["a"], ["b"]], weights=[1.0])
        assert reciprocal_rank_fusion([]) == []
