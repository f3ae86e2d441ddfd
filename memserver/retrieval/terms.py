"""The terms a text is indexed and queried under: tokens, folded and stemmed, plus glued date terms.

Tokens: lower-cased, accents folded ("Zoë" = "zoe", "São" = "sao"), split at punctuation, English stopwords and
possessive "'s" dropped, plurals folded by a light S-stemmer ("invoices" = "invoice"), then every alphabetic term
stemmed by Snowball English (Porter2, through PyStemmer: "proposed" = "propose" = "proposal" = "propos"). Terms with
digits (ids, dates, versions) are never stemmed. A query term also matches its `variants`: the stem with or without
the "i" Snowball leaves of a final "y", so a "-y" noun meets its "-ic" adjective ("allergy" -> allergi finds
"allergic" -> allerg, and back) while the index keeps Snowball's stems ("industry" and "industrial" still meet as
industri). A token with inner connectors (`INV-2024-0173`, `anna@example.com`, `10:30`, `snake_case`) is also
indexed glued (`inv20240173`), so an exact id scores far above documents that share only its parts. Dates: see
`date_text`.

Chinese, Japanese and Korean are written without spaces between words: a run of their characters is indexed as its
overlapping character pairs and its single characters (`東京のホテル` -> 東京 京の のホ ホテ テル and 東 京 ...), and
queried by its pairs alone (a one-character run by that character), so "東京" finds `東京のホテル` and a
two-character word does not match every text that holds one of its characters. Unicode-normalised (NFKC: half-width
katakana = full-width), never accent-folded (that would strip the kana's voicing marks).

Tags are indexed like content (`tag_text`: "project-falcon" is found by "project falcon"); `tag_key` is the form a
query is compared with to find the memories a tag names ("Project Falcon" = "project-falcon" = "projectfalcon").

`raw_tokens` returns the raw tokens (bytes) and `normalise` maps one to its term: the index (bm25.py) normalises
each distinct raw token once, not each occurrence, which is what keeps the bulk build fast. `tokenize` does both,
for tests and for debugging a ranking.

Pure functions of the text; knows nothing about indexes, stores or MCP.
"""

from __future__ import annotations

import functools
import re
import string
import unicodedata
from collections.abc import Iterable
from datetime import datetime

import Stemmer

__all__ = [
    "ANALYZER",
    "date_terms",
    "date_text",
    "named_tags",
    "normalise",
    "query_terms",
    "query_words",
    "raw_tokens",
    "tag_key",
    "tag_text",
    "tokenize",
    "variants",
]

# Names what `normalise` does; an index built under another analyzer is rebuilt, not trusted (keyword.py).
# Changing what a memory is indexed under (here, or which fields: the tags since "+tags") changes this name.
ANALYZER = "s-stem+snowball-english+cjk-bigrams+tags"

# ASCII punctuation becomes a space; on UTF-8 bytes this leaves multi-byte letters alone (all bytes >= 0x80).
_ASCII_PUNCT = string.punctuation.encode("ascii")
_BYTES_TABLE = bytes.maketrans(_ASCII_PUNCT, b" " * len(_ASCII_PUNCT))
# re: 10x str.translate. The CJK marks and the ideographic space end a run of CJK characters (see _cjk_tokens).
_UNICODE_PUNCT = re.compile(
    "[‘’‚‛“”„‟«»‹›–—―‐‑…·•°§¶†‡€£¥₹¢©®™×÷¿¡、。，：；！？（）「」『』【】〈〉《》〔〕〜・\u3000]"
)
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


# The scripts written without spaces: hiragana and katakana (with the prolonged sound mark), CJK ideographs (and
# extension A, compatibility ideographs), Hangul syllables, half-width katakana.
_CJK_CHARS = "\u3040-\u30fa\u30fc-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af\uff66-\uff9f"
_CJK_RUN = re.compile(f"[{_CJK_CHARS}]+")
_NOT_CJK_RUN = re.compile(f"[^{_CJK_CHARS}]+")


def _cjk_tokens(word: str, query: bool) -> list[bytes]:
    """The tokens of a word holding CJK characters: its other parts whole, each CJK run as character pairs, plus
    the single characters when indexing (a query uses its pairs, or its one character)."""
    out = [part.encode("utf-8") for part in _NOT_CJK_RUN.findall(word)]
    for match in _CJK_RUN.finditer(unicodedata.normalize("NFKC", word)):
        run = match.group()
        if len(run) == 1 or not query:
            out.extend(char.encode("utf-8") for char in run)
        out.extend(run[i : i + 2].encode("utf-8") for i in range(len(run) - 1))
    return out


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
# Snowball turns a final "y" into "i" (allergy -> allergi) but strips "-ic" whole (allergic -> allerg): a query
# term's variants bridge the two, for stems of at least this many letters without the "i"; shorter ones joined
# unrelated words on the conversation sets (eight / eighty, brand / brandy, stick / sticky). Dropping the "i" in
# the index instead broke pairs Snowball joins (industry / industrial, luxury / luxurious). Before / after per
# category: benchmarks/README.md, "Retrieval quality".
VARIANT_MIN = 6


def normalise(raw: bytes) -> str | None:
    """The indexed form of one raw token, or None for a stopword."""
    text = raw.decode("utf-8", "replace")
    if _CJK_RUN.match(text):
        return text  # a CJK pair or character (raw_tokens): no case, plural or stem to fold
    word = _fold(text)
    if not word or word in _STOPWORDS:
        return None
    word = _stem(word)
    if not word.isalpha():
        return word
    return str(_SNOWBALL.stemWord(word))


def variants(term: str) -> tuple[str, ...]:
    """The other terms a query term matches: its stem with or without a final "i" (see VARIANT_MIN)."""
    if not term.isalpha() or not term.isascii():
        return ()
    if term.endswith("i"):
        return (term[:-1],) if len(term) > VARIANT_MIN else ()
    return (term + "i",) if len(term) >= VARIANT_MIN else ()


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


def raw_tokens(text: str, *, query: bool = False) -> list[bytes]:
    """Split text into raw lower-case tokens, plus glued forms of id-like words; `query`: CJK runs as a query
    splits them (pairs only, see the module's docstring).

    Bytes, not str, and only C string methods on the common path: creating the token objects is most of the
    cost of a rebuild, so nothing per token happens in Python here.
    """
    lower = text.lower()
    cjk = False
    if not lower.isascii():
        lower = _UNICODE_PUNCT.sub(" ", lower)
        cjk = _CJK_RUN.search(lower) is not None
    data = lower.encode("utf-8", "replace")
    tokens = data.translate(_BYTES_TABLE).split()
    if cjk:
        split: list[bytes] = []
        for token in tokens:
            word = token.decode("utf-8", "replace")
            split.extend(_cjk_tokens(word, query) if _CJK_RUN.search(word) else (token,))
        tokens = split
    if data.translate(None, _NOT_HINT_BYTES):
        for word in _hinted_words(lower):
            tokens.extend(_CONNECTOR_RUN.sub("", m).encode("utf-8") for m in _COMPOUND.findall(word))
    return tokens


def tokenize(text: str, *, query: bool = False) -> list[str]:
    """The terms `text` is indexed (or, with `query`, queried) under, in order; for tests and debugging a ranking.
    (A query also matches the `variants` of its terms: see `query_terms`.)"""
    return [t for t in map(normalise, raw_tokens(text, query=query)) if t is not None]


def query_words(query: str) -> list[str]:
    """The distinct terms of a query itself, the glued dates it names included (what an explanation shows)."""
    return list(dict.fromkeys(tokenize(query, query=True) + [t.decode("ascii") for t in date_terms(query)]))


def query_terms(query: str) -> list[str]:
    """The distinct terms a query is scored on: its `query_words` and their `variants`."""
    return list(dict.fromkeys(form for term in query_words(query) for form in (term, *variants(term))))


def tag_text(tags: tuple[str, ...] | list[str]) -> str:
    """What a memory's tags add to its indexed text: each tag, split like content ("project-falcon" is indexed as
    project, falcon and the glued projectfalcon)."""
    return " ".join(tags)


@functools.lru_cache(maxsize=1 << 14)  # named_tags compares the query with every tag name of the store
def tag_key(text: str) -> str:
    """The form a query and a tag name are compared in: folded, with every space and punctuation mark removed,
    so "Project Falcon", "project-falcon" and "project_falcon" are the same tag."""
    return "".join(ch for ch in _fold(unicodedata.normalize("NFKC", text)) if ch.isalnum())


def named_tags(query: str, tags: Iterable[str]) -> list[str]:
    """The tags among `tags` that `query`, as a whole, names (same `tag_key`): their memories rank first."""
    key = tag_key(query)
    return [tag for tag in tags if key and tag_key(tag) == key] if key else []


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
