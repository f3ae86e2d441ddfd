"""The terms a text is indexed under (terms.py): tokens, folding, stemming, ids, date terms."""

from __future__ import annotations

from memserver.retrieval.terms import date_terms, date_text, tokenize


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
