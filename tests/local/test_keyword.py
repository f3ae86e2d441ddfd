"""The keyword index: BM25 (bm25.py) against a textbook oracle, the store's checkpoint of it (keyword.py), and
reciprocal-rank fusion."""

from __future__ import annotations

import json
import logging
import math
import random
import shutil
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from memserver.local.keyword import KEYWORD_META, KeywordDerivedIndex
from memserver.local.replay import AddRecord
from memserver.retrieval.bm25 import K1, B, KeywordIndex
from memserver.retrieval.hybrid_rrf import reciprocal_rank_fusion
from memserver.retrieval.terms import date_text, tokenize

FIXTURE = Path(__file__).parent.parent / "data" / "checkpoints-bc911d9"


def reference_bm25(docs: dict[int, str], query: str, k1: float = K1, b: float = B) -> dict[int, float]:
    """Textbook BM25 over the same tokens, written for clarity, to check the vectorised one against."""
    tokens = {key: tokenize(text) for key, text in docs.items()}
    n = len(docs)
    avg = sum(map(len, tokens.values())) / n
    scores: dict[int, float] = {}
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


def random_docs(rng: random.Random, n: int, first: int = 0) -> dict[int, str]:
    return {first + i: " ".join(rng.choices(WORDS, k=rng.randint(1, 12))) for i in range(n)}


def _rows(*keys: int) -> np.ndarray:
    return np.asarray(keys, np.int64)


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
        index.add(0, "Invoice INV-2024-0137 for the brand guidelines")
        index.add(1, "Invoice INV-2024-0173 for the logo")
        index.add(2, "Paid 2024 taxes")
        assert index.search("INV-2024-0173", k=3)[0][0] == 1

    def test_no_known_words_returns_nothing(self) -> None:
        """A query of stopwords or unseen words, an empty index and k=0 all give []."""
        index = KeywordIndex()
        assert index.search("anything") == []
        index.add(0, "coffee with Marta")
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
        assert not index.remove(0) and not index.remove(10_000)
        assert len(index) == len(docs) and 0 not in index and 1 in index
        got = dict(index.search("invoice marta", k=200))
        assert got == pytest.approx(reference_bm25(docs, "invoice marta"), rel=1e-5)

    def test_adding_a_key_again_replaces_its_text(self) -> None:
        """add() on an existing key replaces the old text rather than indexing both."""
        index = KeywordIndex()
        index.add(7, "lives in Berlin")
        index.add(7, "moved to Lisbon")
        assert index.search("berlin") == []
        assert [k for k, _ in index.search("lisbon")] == [7]
        assert len(index) == 1

    def test_keys_must_be_non_negative(self) -> None:
        """Keys are the store's rows; a negative key is refused and changes nothing."""
        index = KeywordIndex()
        with pytest.raises(ValueError, match="non-negative"):
            index.add(-1, "coffee")
        assert len(index) == 0 and index.search("coffee") == []

    def test_incremental_updates_equal_a_bulk_build(self) -> None:
        """Single adds and removes (through delta, merges and slot renumbering) rank exactly like a rebuild."""
        rng = random.Random(3)
        incremental = KeywordIndex()
        live: dict[int, str] = {}
        for step in range(3000):
            key = rng.randrange(1500)
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
    """The store passes its filter as a numpy array of rows."""

    def setup_method(self) -> None:
        self.index = KeywordIndex()
        # 50 strong matches, then one weak match that a top-10 without a filter would never reach
        self.index.add_many((i, "invoice invoice invoice paid") for i in range(50))
        self.index.add(50, "invoice for the long report about many unrelated other things entirely")

    def test_filter_applies_before_top_k(self) -> None:
        """A candidate outside the unfiltered top-k is still found: filters restrict, then rank."""
        assert [k for k, _ in self.index.search("invoice", k=10, candidates=_rows(50))] == [50]

    def test_unknown_and_out_of_range_candidates_are_ignored(self) -> None:
        """Rows the index does not hold, past its largest key or negative, match nothing and break nothing."""
        got = self.index.search("invoice", k=10, candidates=_rows(3, 50, 7, 999, 10**9, -4))
        assert sorted(k for k, _ in got) == [3, 7, 50]
        assert got[-1][0] == 50

    def test_filtered_scores_are_the_unfiltered_ones(self) -> None:
        """A filter removes documents from the ranking; it does not change the scores of the others."""
        everything = dict(self.index.search("invoice paid", k=100))
        wanted = _rows(*range(0, 51, 5))
        assert dict(self.index.search("invoice paid", k=100, candidates=wanted)) == {
            k: everything[k] for k in wanted.tolist()
        }

    def test_empty_candidates_return_nothing(self) -> None:
        """An empty filter matches nothing."""
        assert self.index.search("invoice", candidates=np.array([], np.int64)) == []

    def test_after_removals_and_renumbering(self) -> None:
        """The filter follows removals and the slot renumbering of a merge."""
        for i in range(0, 40):
            self.index.remove(i)
        self.index.add_many((100 + i, "invoice again") for i in range(300))  # bulk: merges and renumbers
        got = self.index.search("invoice", k=5, candidates=_rows(1, 45, 50, 120))
        assert sorted(k for k, _ in got) == [45, 50, 120]


class TestDates:
    @pytest.mark.parametrize(
        "query",
        ["what did I note on 7 March 2025", "March 7th", "notes from 2025-03-07", "in March 2025", "7.3.2025"],
    )
    def test_queries_naming_the_date_find_the_memory(self, query: str) -> None:
        """Day, month and ISO forms in a query match the date words of the memory created then."""
        index = KeywordIndex()
        index.add(0, "weekly review notes " + date_text("2025-03-07T09:00:00+00:00"))
        index.add(1, "weekly review notes " + date_text("2025-04-04T09:00:00+00:00"))
        assert index.search(query + " weekly review", k=2)[0][0] == 0


def _records(texts: dict[int, str]) -> list[AddRecord]:
    return [AddRecord(f"{r:032x}", t, "2025-03-14T10:00:00+00:00", (), "", r) for r, t in texts.items()]


class TestCheckpoint:
    """KeywordDerivedIndex: the store's keyword index, keyed by row and checkpointed (keyword.json + .npz)."""

    def test_save_load_round_trip(self, tmp_path: Path) -> None:
        """A saved index loads with its stamp and ranks exactly as before, removals included."""
        docs = random_docs(random.Random(4), 300)
        index = KeywordDerivedIndex()
        index.add(_records(docs), np.zeros((len(docs), 1), np.float32))
        index.remove(_records({k: docs[k] for k in range(0, 300, 4)}))
        index.save(tmp_path, {"generation": "g", "offset": 7, "count": 225})
        loaded = KeywordDerivedIndex()
        stamp = loaded.load(tmp_path, "g")
        assert stamp is not None and stamp["offset"] == 7 and len(loaded.index) == 225
        for query in ("invoice paid", "marta 14 march 2025", "coffee"):
            assert loaded.search(query, 500) == index.search(query, 500)

    def test_a_checkpoint_of_other_terms_is_rebuilt_not_loaded(
        self, tmp_path: Path, caplog: pytest.LogCaptureFixture
    ) -> None:
        """keyword.json + keyword-*.npz as written at commit bc911d9 (tests/data/checkpoints-bc911d9) hold terms
        made before Snowball stemming: trusting them would miss every stemmed query term, so load says None (the
        store rebuilds the index from the journal, once) and says why."""
        folder = shutil.copytree(FIXTURE, tmp_path / "c")
        index = KeywordDerivedIndex()
        with caplog.at_level(logging.INFO):
            assert index.load(folder, "fixture-generation") is None
        assert "analyzer" in caplog.text and len(index.index) == 0

    @pytest.mark.parametrize("damage", ["flip", "missing", "meta", "generation", "count"])
    def test_a_damaged_or_foreign_checkpoint_is_not_loaded(
        self, tmp_path: Path, damage: str, caplog: pytest.LogCaptureFixture
    ) -> None:
        """A flipped byte, a missing file, a bad meta or a wrong count: None, and an empty index to rebuild."""
        folder = tmp_path / "c"
        folder.mkdir()
        docs = random_docs(random.Random(5), 200)
        written = KeywordDerivedIndex()
        written.add(_records(docs), np.zeros((len(docs), 1), np.float32))
        written.save(folder, {"generation": "fixture-generation", "offset": 4321, "count": len(docs)})
        assert KeywordDerivedIndex().load(folder, "fixture-generation") is not None  # undamaged, it loads
        meta_path = folder / KEYWORD_META
        meta = json.loads(meta_path.read_text())
        data = folder / meta["file"]
        if damage == "flip":
            raw = bytearray(data.read_bytes())
            raw[len(raw) // 2] ^= 0xFF
            data.write_bytes(bytes(raw))
        elif damage == "missing":
            data.unlink()
        elif damage == "meta":
            meta_path.write_text("{not json")
        elif damage == "count":
            meta_path.write_text(json.dumps({**meta, "count": meta["count"] + 1}))
        index = KeywordDerivedIndex()
        generation = "another-generation" if damage == "generation" else "fixture-generation"
        with caplog.at_level(logging.WARNING):
            assert index.load(folder, generation) is None
        assert len(index.index) == 0 and index.search("invoice", 10) == []
        assert ("keyword checkpoint" in caplog.text) == (damage != "generation")  # a foreign one is quietly rebuilt


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
