"""The terms a text is indexed under (terms.py): tokens, folding, stemming, ids, date terms."""

from __future__ import annotations

from memserver.retrieval.terms import date_terms, date_text, named_tags, query_terms, tag_key, tokenize


class TestTokenize:
    def test_ids_are_indexed_whole_and_in_parts(self) -> None:
        """An id like INV-2024-0173 yields its parts and a glued form, so an exact id outranks a partial one."""
        assert tokenize("INV-2024-0173") == ["inv", "2024", "0173", "inv20240173"]

    def test_emails_ticket_numbers_and_code_identifiers(self) -> None:
        """Emails, '#4521' and snake_case identifiers are searchable whole and by part."""
        terms = tokenize("mail anna.k@example.com about ticket #4521 and enable_new_checkout")
        for term in ("annakexamplecom", "anna", "exampl", "4521", "enablenewcheckout", "checkout"):
            assert term in terms

    def test_case_accents_plurals_and_stopwords_fold(self) -> None:
        """'Zoë's CAFÉ invoices' and 'zoe cafe invoice' index the same terms."""
        assert tokenize("Zoë's CAFÉ invoices") == tokenize("zoe cafe invoice") == ["zoe", "cafe", "invoic"]

    def test_word_forms_share_a_stem_but_ids_and_numbers_stay_whole(self) -> None:
        """Snowball English: 'proposed', 'proposal' and 'proposing' meet; 'INV-2024-0173' and '10:30' do not
        change."""
        assert tokenize("proposed proposal proposing") == ["propos"] * 3
        assert tokenize("running runs") == ["run", "run"]
        assert "inv20240173" in tokenize("INV-2024-0173") and "1030" in tokenize("at 10:30")

    def test_trailing_colon_and_dashes_are_not_ids(self) -> None:
        """'Note:' and a spaced dash are punctuation, not connectors."""
        assert tokenize("Note: done - ok") == ["note", "done", "ok"]

    def test_unicode_punctuation_splits(self) -> None:
        """Curly quotes and dashes separate words like ASCII punctuation does."""
        assert tokenize("“Perfect Days”—Wenders") == ["perfect", "day", "wender"]


class TestCJK:
    def test_a_run_is_indexed_as_pairs_and_characters(self) -> None:
        """Japanese: every character pair of a run and every character; other words of the token stay whole."""
        assert tokenize("東京のホテル") == ["東", "京", "の", "ホ", "テ", "ル", "東京", "京の", "のホ", "ホテ", "テル"]
        assert tokenize("iPhone15を買った") == ["iphone15", "を", "買", "っ", "た", "を買", "買っ", "った"]

    def test_a_query_uses_pairs_or_its_one_character(self) -> None:
        assert tokenize("東京", query=True) == ["東京"]
        assert tokenize("北京的酒店", query=True) == ["北京", "京的", "的酒", "酒店"]
        assert tokenize("茶", query=True) == ["茶"]

    def test_cjk_punctuation_splits_runs_and_width_folds_but_voicing_stays(self) -> None:
        """「」、。 and the ideographic space end a run; half-width katakana = full-width; ビ is not ヒ."""
        assert tokenize("「東京」、大阪。", query=True) == ["東京", "大阪"]
        assert tokenize("ﾎﾃﾙ", query=True) == tokenize("ホテル", query=True) == ["ホテ", "テル"]
        assert tokenize("ビール", query=True) != tokenize("ヒール", query=True)


class TestWordFamilies:
    def test_a_y_noun_and_its_ic_adjective_meet_at_query_time(self) -> None:
        """Snowball: allergy -> allergi, allergic -> allerg; each query also asks for the other form."""
        assert tokenize("allergy allergic") == ["allergi", "allerg"]
        assert query_terms("allergy") == ["allergi", "allerg"]
        assert query_terms("allergic") == ["allerg", "allergi"]

    def test_short_stems_have_no_variant(self) -> None:
        """eight / eighty, brand / brandy, party / part: too short to bridge without false friends."""
        for word in ("eighty", "brandy", "party", "eight"):
            assert query_terms(word) == tokenize(word)


class TestTags:
    def test_a_tag_key_ignores_case_spaces_and_punctuation(self) -> None:
        assert tag_key("Project Falcon") == tag_key("project-falcon") == tag_key("project_falcon") == "projectfalcon"
        assert tag_key("Café") == tag_key("cafe")

    def test_only_a_query_equal_to_a_tag_names_it(self) -> None:
        tags = ["project-falcon", "work", "falcon"]
        assert named_tags("Project Falcon", tags) == ["project-falcon"]
        assert named_tags("falcon project", tags) == []
        assert named_tags("  ", tags) == []


class TestDates:
    def test_date_text_is_glued_terms(self) -> None:
        """A memory's date becomes three rare terms: day, month and month-day."""
        assert date_text("2025-03-07T10:11:12.5+00:00") == "20250307 202503 march7"

    def test_query_dates_become_the_same_terms(self) -> None:
        """Dates a query names, in several spellings, yield the glued terms date_text indexes (ISO dates are
        glued by the tokenizer itself)."""
        assert set(date_terms("on 7 March 2025")) == {b"20250307", b"202503", b"march7"}
        assert set(date_terms("March 7th")) == {b"march7"}
        assert set(date_terms("7.3.2025")) == {b"20250307", b"202503", b"march7"}
        assert set(date_terms("in March 2025")) == {b"202503"}
        assert date_terms("the 45th of nothing") == []
        assert "20250307" in tokenize("notes from 2025-03-07")
