"""The conversation evaluation sets (benchmarks/data/conversations/<set>/*.json): loading, checking, statistics.

The format is described in benchmarks/lab/conversation-sets.md. `problems()` lists what is wrong with one
conversation (an empty list when it is well formed); `statistics()` measures what makes a set realistic and hard
(who speaks the evidence, images, time words, question turns before the answers, words the questions share with
their evidence) so that a set can be compared with the public benchmark these figures come from. Used by
benchmarks/conversations.py (which prints the summary) and tests/benchmarks/test_conversation_data.py.
"""

from __future__ import annotations

import json
import re
import statistics as stats
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "benchmarks" / "data" / "conversations"
TYPES = ("single", "temporal", "multi", "open")
EVIDENCE_COUNT = {"single": (1, 2), "temporal": (1, 3), "multi": (2, 5), "open": (1, 3)}
# Question shapes (issue 28), an optional `shape` on a question beside its type: answers spread over sessions.
SHAPES = ("which_two", "in_common", "change", "everything", "correction")
SHAPE_EVIDENCE_COUNT = {
    "which_two": (2, 3),
    "in_common": (2, 3),
    "change": (2, 5),
    "everything": (2, 8),
    "correction": (2, 3),
}


def evidence_count(question: dict[str, Any]) -> tuple[int, int]:
    """The (fewest, most) evidence turns a question may list: its shape's range when it has one, else its type's."""
    shape = question.get("shape")
    return SHAPE_EVIDENCE_COUNT[shape] if shape in SHAPE_EVIDENCE_COUNT else EVIDENCE_COUNT[question["type"]]


_MONTHS = "january|february|march|april|june|july|august|september|october|november|december"
_DAYS = "monday|tuesday|wednesday|thursday|friday|saturday|sunday"
_UNITS = "day|days|week|weeks|month|months|year|years|fortnight|weekend|spring|summer|autumn|winter|term"
# Time words as the public benchmark's statistic counts them: dates, months, weekdays, relative time.
TIME_WORDS = re.compile(
    rf"\b(?:{_MONTHS}|{_DAYS})s?\b|\b(?-i:May)\b|\b(?:yesterday|today|tonight|tomorrow|weekend|fortnight|ago|"
    rf"christmas|easter|hogmanay|new year|boxing day|halloween|diwali|eid|ramadan)\b|"
    rf"\b(?:last|next|this|coming|following|same) (?:{_UNITS}|night|morning|evening|afternoon|{_DAYS})\b|"
    rf"\b(?:in|for|a|two|three|four|five|six|few|couple of) (?:{_UNITS})\b|"
    r"\b(?:19|20)\d\d\b|\b\d{1,2}(?:st|nd|rd|th)\b|\b\d{1,2}:\d\d\b",
    re.IGNORECASE,
)
_MONTH_OR_YEAR = re.compile(rf"\b(?:{_MONTHS})\b|\b(?-i:May)\b|\b(?:19|20)\d\d\b", re.IGNORECASE)
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
STOPWORDS = frozenset(
    _WORD.findall(
        """a about after all an and any are as at be been before by did do does for from had has have he her him his how
    i in is it its me my of on or our she so that the their them they this to up was we were what when where which
    who whom why will with would you your"""
    )
)


def load(data_dir: Path = DATA_DIR, sets: list[str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """{set name: [conversation, ...]} for every set folder under data_dir (or the named ones), files sorted."""
    if not data_dir.is_dir():
        raise FileNotFoundError(f"{data_dir}: no such folder of conversation sets")
    names = sets or sorted(p.name for p in data_dir.iterdir() if p.is_dir() and any(p.glob("*.json")))
    out: dict[str, list[dict[str, Any]]] = {}
    for name in names:
        folder = data_dir / name
        files = sorted(folder.glob("*.json")) if folder.is_dir() else []
        if not files:
            raise FileNotFoundError(f"{folder}: no conversation files (*.json)")
        out[name] = [_read(f) for f in files]
    return out


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ValueError(f"{path}: not a UTF-8 JSON file ({e})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: a conversation file holds one JSON object, got {type(data).__name__}")
    return data


def turns(conv: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """(session, turn) pairs in conversation order."""
    return [(s, t) for s in conv["sessions"] for t in s["turns"]]


def memory_text(turn: dict[str, Any]) -> str:
    """A turn as one memory, the held-out benchmark's convention: `Speaker: text [image: caption]`."""
    text = f"{turn['speaker']}: {turn['text']}"
    return f"{text} [image: {turn['image']}]" if turn.get("image") else text


def problems(conv: dict[str, Any], set_name: str | None = None) -> list[str]:
    """Everything wrong with one conversation's structure; [] when it follows the format."""
    out: list[str] = []
    cid = conv.get("id", "?")
    for key, kind in (("id", str), ("set", str), ("speakers", list), ("sessions", list), ("questions", list)):
        if not isinstance(conv.get(key), kind):
            out.append(f"{cid}: {key} missing or not a {kind.__name__}")
    if out:
        return out
    if set_name is not None and conv["set"] != set_name:
        out.append(f"{cid}: set is {conv['set']!r}, but the file is in {set_name}/")
    if not re.fullmatch(rf"{re.escape(conv['set'])}-\d+", cid):
        out.append(f"{cid}: id should be <set>-<n>")
    speakers = conv["speakers"]
    if not 2 <= len(speakers) <= 4 or len(set(speakers)) != len(speakers):
        out.append(f"{cid}: needs 2-4 distinct speakers, has {speakers}")
    previous: datetime | None = None
    ids: set[str] = set()
    for n, session in enumerate(conv["sessions"], 1):
        sid = session.get("id")
        if sid != f"S{n}":
            out.append(f"{cid}: session {n} has id {sid!r}, expected 'S{n}'")
        try:
            when = datetime.fromisoformat(session["date"])
        except (KeyError, TypeError, ValueError):
            out.append(f"{cid} {sid}: date {session.get('date')!r} is not ISO 8601")
            continue
        if when.tzinfo is not None:
            out.append(f"{cid} {sid}: date has an offset; the format wants local wall time")
            when = when.replace(tzinfo=None)
        if previous is not None and when <= previous:
            out.append(f"{cid} {sid}: date {session['date']} is not after the previous session's")
        previous = when
        for k, turn in enumerate(session.get("turns", []), 1):
            if turn.get("id") != f"{sid}:{k}":
                out.append(f"{cid} {sid}: turn {k} has id {turn.get('id')!r}, expected '{sid}:{k}'")
            ids.add(turn.get("id", ""))
            if turn.get("speaker") not in speakers:
                out.append(f"{cid} {turn.get('id')}: speaker {turn.get('speaker')!r} is not among {speakers}")
            if not isinstance(turn.get("text"), str) or not turn["text"].strip():
                out.append(f"{cid} {turn.get('id')}: empty text")
            if "image" in turn and (not isinstance(turn["image"], str) or not turn["image"].strip()):
                out.append(f"{cid} {turn.get('id')}: image must be a non-empty caption")
            if set(turn) - {"id", "speaker", "text", "image"}:
                out.append(
                    f"{cid} {turn.get('id')}: unknown keys {sorted(set(turn) - {'id', 'speaker', 'text', 'image'})}"
                )
    seen: set[str] = set()
    for q in conv["questions"]:
        qid = q.get("id")
        if qid in seen:
            out.append(f"{cid} {qid}: question id used twice")
        seen.add(qid)
        if q.get("type") not in TYPES:
            out.append(f"{cid} {qid}: type {q.get('type')!r} is not one of {TYPES}")
        if "shape" in q and q["shape"] not in SHAPES:
            out.append(f"{cid} {qid}: shape {q['shape']!r} is not one of {SHAPES}")
        for key in ("question", "answer"):
            if not isinstance(q.get(key), str) or not q[key].strip():
                out.append(f"{cid} {qid}: {key} missing")
        evidence = q.get("evidence")
        if not isinstance(evidence, list) or not evidence:
            out.append(f"{cid} {qid}: evidence must be a non-empty list of turn ids")
            continue
        if len(set(evidence)) != len(evidence):
            out.append(f"{cid} {qid}: evidence lists a turn twice")
        out.extend(f"{cid} {qid}: evidence {e!r} is not a turn id" for e in evidence if e not in ids)
        out.extend(quote_problems(conv, q))
    return out


def quote_problems(conv: dict[str, Any], question: dict[str, Any]) -> list[str]:
    """A question's optional `quotes` (one per evidence turn: the words of the fact it states) not in their turn.

    The check that evidence is evidence: a turn listed for a fact it does not say is caught here, not by a
    reader. Matched case-insensitively against the memory text (speaker, text and image caption).
    """
    quotes = question.get("quotes")
    if quotes is None:
        return []
    where = f"{conv.get('id', '?')} {question.get('id')}"
    evidence = question.get("evidence") or []
    if not isinstance(quotes, list) or len(quotes) != len(evidence):
        return [f"{where}: quotes must be a list with one quote per evidence turn"]
    text = {t["id"]: memory_text(t).lower() for _, t in turns(conv)}
    return [
        f"{where}: evidence {e} does not say {quote!r}"
        for e, quote in zip(evidence, quotes, strict=True)
        if e in text and (not isinstance(quote, str) or not quote.strip() or quote.lower() not in text[e])
    ]


def duplicate_memories(conv: dict[str, Any]) -> list[str]:
    """Turn ids whose memory text repeats an earlier turn's: the store keeps one memory per text, so they vanish."""
    first: dict[str, str] = {}
    dupes = []
    for _, turn in turns(conv):
        key = " ".join(memory_text(turn).lower().split())
        if key in first:
            dupes.append(turn["id"])
        first.setdefault(key, turn["id"])
    return dupes


def named_speakers(question: str, speakers: list[str]) -> list[str]:
    return [s for s in speakers if re.search(rf"\b{re.escape(s)}\b", question)]


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def _share(hits: int, total: int) -> float:
    return round(hits / total, 3) if total else float("nan")


def _evidence_rows(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per (question, evidence turn): what the statistics look at."""
    where = {t["id"]: (s["turns"], i) for s in conv["sessions"] for i, t in enumerate(s["turns"])}
    rows = []
    for q in conv["questions"]:
        names = named_speakers(q["question"], conv["speakers"])
        for e in q["evidence"]:
            if e not in where:
                continue
            session, i = where[e]
            turn = session[i]
            neighbours = {session[j]["id"] for j in (i - 1, i + 1) if 0 <= j < len(session)}
            rows.append(
                {
                    "type": q["type"],
                    "turn": turn,
                    "named": names[0] if len(names) == 1 else None,
                    "after_question": i > 0 and "?" in session[i - 1]["text"],
                    "next_to_evidence": bool(neighbours & set(q["evidence"])),
                }
            )
    return rows


def _word_overlap(conv: dict[str, Any]) -> list[tuple[str, float]]:
    """(type, share of the question's content words found in its evidence turns) per question."""
    text = {t["id"]: memory_text(t) for _, t in turns(conv)}
    names = {n.lower() for n in conv["speakers"]}
    out = []
    for q in conv["questions"]:
        words = content_words(q["question"]) - names
        if words:
            found = content_words(" ".join(text.get(e, "") for e in q["evidence"]))
            out.append((q["type"], len(words & found) / len(words)))
    return out


def statistics(convs: list[dict[str, Any]]) -> dict[str, Any]:
    """The figures the conversation format asks for (benchmarks/lab/conversation-sets.md), over some conversations."""
    all_turns = [t for c in convs for _, t in turns(c)]
    after_question = [
        i > 0 and "?" in s["turns"][i - 1]["text"] for c in convs for s in c["sessions"] for i in range(len(s["turns"]))
    ]
    questions = [q for c in convs for q in c["questions"]]
    kinds = Counter(q["type"] for q in questions)
    ev = [r for c in convs for r in _evidence_rows(c)]
    named = [r for r in ev if r["named"]]
    temporal = [r for r in ev if r["type"] == "temporal"]
    overlap = [pair for c in convs for pair in _word_overlap(c)]
    gaps = [
        (datetime.fromisoformat(b["date"]) - datetime.fromisoformat(a["date"])).days
        for c in convs
        for a, b in zip(c["sessions"], c["sessions"][1:], strict=False)
    ]
    per_session = [len(s["turns"]) for c in convs for s in c["sessions"]]

    def share(rows: list[Any], test: Any = bool) -> float:
        return round(sum(1 for r in rows if test(r)) / len(rows), 3) if rows else float("nan")

    def says_name(r: dict[str, Any]) -> bool:
        return bool(re.search(rf"\b{re.escape(r['named'])}\b", r["turn"]["text"] + " " + r["turn"].get("image", "")))

    return {
        "conversations": len(convs),
        "sessions": sum(len(c["sessions"]) for c in convs),
        "sessions_per_conversation": [len(c["sessions"]) for c in convs],
        "turns": len(all_turns),
        "turns_per_session_min_median_max": [min(per_session), stats.median(per_session), max(per_session)],
        "days_between_sessions_min_median_max": [min(gaps), stats.median(gaps), max(gaps)] if gaps else [],
        "speakers_per_conversation": [len(c["speakers"]) for c in convs],
        "questions": len(questions),
        "questions_per_conversation": [len(c["questions"]) for c in convs],
        "type_share": {k: share(questions, lambda q, k=k: q["type"] == k) for k in TYPES},
        "evidence_per_question": {
            k: round(stats.fmean(len(q["evidence"]) for q in questions if q["type"] == k), 2) for k in TYPES if kinds[k]
        },
        "evidence_turns": len(ev),
        "evidence_by_named_speaker": share(named, lambda r: r["turn"]["speaker"] == r["named"]),
        "evidence_naming_that_speaker": share(named, says_name),
        "questions_naming_one_speaker": share(
            [len(named_speakers(q["question"], c["speakers"])) == 1 for c in convs for q in c["questions"]]
        ),
        "image_share_evidence": share(ev, lambda r: "image" in r["turn"]),
        "image_share_all": share(all_turns, lambda t: "image" in t),
        "time_words_temporal_evidence": share(temporal, lambda r: TIME_WORDS.search(r["turn"]["text"])),
        "time_words_all": share(all_turns, lambda t: TIME_WORDS.search(t["text"])),
        "evidence_after_question_turn": share(ev, lambda r: r["after_question"]),
        "all_after_question_turn": share(after_question),
        "evidence_next_to_other_evidence": share(ev, lambda r: r["next_to_evidence"]),
        "questions_naming_month_or_year": share(questions, lambda q: _MONTH_OR_YEAR.search(q["question"])),
        "question_words_in_evidence": {
            k: round(stats.fmean(v for t, v in overlap if t == k), 3) for k in TYPES if any(t == k for t, _ in overlap)
        },
        "duplicate_memory_texts": sum(len(duplicate_memories(c)) for c in convs),
    }


# The public multi-session benchmark's figures, printed beside each set's.
REFERENCE = {
    "evidence_by_named_speaker": 0.96,
    "evidence_naming_that_speaker": 0.03,
    "image_share_evidence": 0.38,
    "image_share_all": 0.21,
    "time_words_temporal_evidence": 0.81,
    "time_words_all": 0.16,
    "evidence_after_question_turn": 0.58,
    "evidence_next_to_other_evidence": 0.04,
    "questions_naming_month_or_year": 0.13,
}


def format_statistics(by_set: dict[str, dict[str, Any]]) -> str:
    """One column per set, one row per figure (a dict figure gets one row per key), the reference where known."""
    names = list(by_set)
    rows: list[tuple[str, list[str], str]] = []
    for key, first in next(iter(by_set.values())).items():
        parts = list(first) if isinstance(first, dict) else [None]
        for part in parts:
            cells = [by_set[n][key] if part is None else by_set[n][key].get(part, "") for n in names]
            ref = REFERENCE.get(key)
            rows.append(
                (key if part is None else f"{key}.{part}", [_cell(c) for c in cells], "" if ref is None else str(ref))
            )
    width = max(len(r[0]) for r in rows)
    cols = [max(len(n), *(len(r[1][i]) for r in rows)) for i, n in enumerate(names)]
    head = f"{'':{width}}  " + "  ".join(f"{n:>{w}}" for n, w in zip(names, cols, strict=True)) + "  reference"
    body = [
        f"{label:{width}}  " + "  ".join(f"{c:>{w}}" for c, w in zip(cells, cols, strict=True)) + f"  {ref:>9}"
        for label, cells, ref in rows
    ]
    return "\n".join([head, *body])


def _cell(value: Any) -> str:
    return "/".join(str(v) for v in value) if isinstance(value, list) else str(value)
