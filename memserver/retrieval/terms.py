"""The terms a text is indexed and queried under: tokens, folded and stemmed, plus glued date terms.

Tokens: lower-cased, accents folded ("Zoë" = "zoe", "São" = "sao"), split at punctuation, English stopwords and
possessive "'s" dropped, plurals folded by a light S-stemmer ("invoices" = "invoice"), then every alphabetic term
stemmed by Snowball English (Porter2, through PyStemmer: "proposed" = "propose" = "proposal" = "propos"). Terms
with digits (ids, dates, versions) are never stemmed. A token with inner
connectors (`INV-2024-0173`, `anna@example.com`, `10:30`, `snake_case`) is also indexed glued (`inv20240173`),
so an exact id scores far above documents that share only its parts. Dates: see `date_text`.

`raw_tokens` returns the raw tokens (bytes) and `normalise` maps one to its term: the index (bm25.py) normalises
each distinct raw token once, not each occurrence, which is what keeps the bulk build fast. `tokenize` does both,
for tests and for debugging a ranking.

Pure functions of the text; knows nothing about indexes, stores or MCP.
"""

from __future__ import annotations

import re
import string
import unicodedata
from datetime import datetime

import Stemmer

__all__ = ["ANALYZER", "date_terms", "date_text", "normalise", "raw_tokens", "tokenize"]

# Names what `normalise` does; an index built under another analyzer is rebuilt, not trusted (keyword.py).
ANALYZER = "s-stem+snowball-english"

# ASCII punctuation becomes a space; on UTF-8 bytes this leaves multi-byte letters alone (all bytes >= 0x80).
_ASCII_PUNCT = string.punctuation.encode("ascii")
_BYTES_TABLE = bytes.maketrans(_ASCII_PUNCT, b" " * len(_ASCII_PUNCT))
_UNICODE_PUNCT = re.compile("[‘’‚‛“”„‟«»‹›–—―‐‑…·•°§¶†‡€£¥₹¢©®™×÷¿¡、。，：；！？（）「」]")  # re: 10x str.translate
# An id-like word: alphanumeric runs joined by connectors, e.g. INV-2024-0173, anna@example.com, 10:30, a_b.
# '.' alone is not a hint (it ends every sentence): "v2.3.1" is indexed by its parts only.
_COMPOUND_HINTS = "-@/#_+&:"
_NOT_HINT_BYTES = bytes(sorted(set(range(256)) - set(_COMPOUND_HINTS.encode("ascii"))))
_COMPOUND = re.compile(r"[^\W_]+(?:[-_.@/:+#&][^\W_]+)+")
_CONNECTOR_RUN = re.compile(r"[-_.@/:+#&]")

# Small on purpose: BM25's idf already discounts common words; these only cost time and add noise.
_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below between
    both but by can could d did do does doing down during each few for from further had has have having he her
    here hers herself him himself his how i if in into is it its itself just ll m me more most my myself no nor
    not now of off on once only or other our ours ourselves out over own re s same she should so some such t than
    that the their theirs them themselves then there these they this those through to too under until up ve very
    was we were what when where which while who whom why will with would you your yours yourself yourselves""".split()  # noqa: SIM905
)


def _fold(word: str) -> str:
    """Lower-case and strip accents, so that "Café", "CAFE" and "cafe" index the same."""
    word = word.casefold()
    if not word.isascii():
        word = "".join(c for c in unicodedata.normalize("NFKD", word) if not unicodedata.combining(c))
    return word


def _stem(word: str) -> str:
    """Harman's S-stemmer: folds English plurals and nothing else (a full stemmer conflates names and ids)."""
    if len(word) <= 3 or not word.isalpha():
        return word
    if word.endswith("ies") and not word.endswith(("eies", "aies")):
        return word[:-3] + "y"
    if word.endswith("es") and not word.endswith(("aes", "ees", "oes")):
        return word[:-1]
    if word.endswith("s") and not word.endswith(("us", "ss")):
        return word[:-1]
    return word


# Snowball English: +2.8 / +4.4 R@10 on the conversation sets alone, +0.6 on the quality set (benchmarks/README.md,
# "Retrieval II"). The index normalises each distinct raw token once, so the stemmer runs once per new word.
_SNOWBALL = Stemmer.Stemmer("english")


def normalise(raw: bytes) -> str | None:
    """The indexed form of one raw token, or None for a stopword."""
    word = _fold(raw.decode("utf-8", "replace"))
    if not word or word in _STOPWORDS:
        return None
    word = _stem(word)
    return str(_SNOWBALL.stemWord(word)) if word.isalpha() else word


def _hinted_words(lower: str) -> list[str]:
    """The space-separated words that contain a connector, found with str.find (a regex scan is 5x slower)."""
    spans: dict[tuple[int, int], None] = {}
    last = len(lower) - 1
    for hint in _COMPOUND_HINTS:
        at = lower.find(hint)
        while at != -1:
            if 0 < at < last and lower[at + 1].isalnum() and lower[at - 1].isalnum():  # not "Note:" or " - "
                end = lower.find(" ", at)
                end = len(lower) if end == -1 else end
                spans[(lower.rfind(" ", 0, at) + 1, end)] = None
                at = lower.find(hint, end)
            else:
                at = lower.find(hint, at + 1)
    return [lower[start:end] for start, end in spans]


def raw_tokens(text: str) -> list[bytes]:
    """Split text into raw lower-case tokens, plus glued forms of id-like words.

    Bytes, not str, and only C string methods on the common path: creating the token objects is most of the
    cost of a rebuild, so nothing per token happens in Python here.
    """
    lower = text.lower()
    if not lower.isascii():
        lower = _UNICODE_PUNCT.sub(" ", lower)
    data = lower.encode("utf-8", "replace")
    tokens = data.translate(_BYTES_TABLE).split()
    if data.translate(None, _NOT_HINT_BYTES):
        for word in _hinted_words(lower):
            tokens.extend(_CONNECTOR_RUN.sub("", m).encode("utf-8") for m in _COMPOUND.findall(word))
    return tokens


def tokenize(text: str) -> list[str]:
    """The terms `text` is indexed (or queried) under, in order; for tests and for debugging a ranking."""
    return [t for t in map(normalise, raw_tokens(text)) if t is not None]


_MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH_NUMBER = {name: i for i, name in enumerate(_MONTHS, 1)} | {name[:3]: i for i, name in enumerate(_MONTHS, 1)}
_MONTH = (
    r"(jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:tember)?|oct(?:ober)?"
    r"|nov(?:ember)?|dec(?:ember)?)\b"
)
_DAY = r"(\d{1,2})(?:st|nd|rd|th)?"
_DATE_PATTERNS = (  # (regex, group of day, month, year) over a lower-cased query
    (re.compile(_DAY + r"\s+(?:of\s+)?" + _MONTH + r"(?:,?\s+(\d{4}))?"), (1, 2, 3)),
    (re.compile(_MONTH + r"\s+" + _DAY + r"\b(?:,?\s+(\d{4}))?"), (2, 1, 3)),
    (re.compile(_MONTH + r",?\s+(\d{4})"), (0, 1, 2)),
    (re.compile(r"\b(\d{1,2})\.(\d{1,2})\.(\d{4})\b"), (1, 2, 3)),
)


def date_text(created_at: str) -> str:
    """Date words to append to a memory's indexed text: "2025-03-14T..." -> "20250314 202503 march14".

    Glued, so they are rare terms: a query naming that day ("14 March 2025", "March 14", "2025-03-14") or month
    ("March 2025", "2025-03") matches them through `date_terms`, and a year or month name alone, which would
    match a third of the store, adds nothing.
    """
    day = datetime.fromisoformat(created_at).date()
    return f"{day:%Y%m%d} {day:%Y%m} {_MONTHS[day.month - 1]}{day.day}"


def date_terms(query: str) -> list[bytes]:
    """The glued date terms (see `date_text`) for the dates a query names; queries are short, so a regex is fine."""
    lower = query.lower()
    out: list[bytes] = []
    for pattern, (day_group, month_group, year_group) in _DATE_PATTERNS:
        for match in pattern.finditer(lower):
            month_text = match.group(month_group)
            month = int(month_text) if month_text.isdigit() else _MONTH_NUMBER[month_text[:3]]
            day = int(match.group(day_group)) if day_group else 0
            year = match.group(year_group)
            if not 1 <= month <= 12 or day > 31:
                continue
            if day and year:
                out.append(f"{year}{month:02d}{day:02d}".encode())
            if year:
                out.append(f"{year}{month:02d}".encode())
            if day:
                out.append(f"{_MONTHS[month - 1]}{day}".encode())
    return out
