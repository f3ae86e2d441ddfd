"""Retrieval on long multi-session conversations: R@5, R@10 and MRR by question type, per conversation set.

Each conversation of benchmarks/data/conversations/<set>/ (format: benchmarks/lab/conversation-sets.md) goes into
a fresh MemoryStore, one memory per dialog turn written `Speaker: text [image: caption]` (the convention of the
held-out benchmark issue 15 quotes), created_at = the session's date plus a minute per turn, tagged with the
conversation id. Each question is asked as `store.search(question, tags=[conversation id])` and scored by the share
of its evidence turns found in the top 5 / top 10 (R@5, R@10) and the reciprocal rank of the first evidence turn
(MRR, to depth 50). Variants (rows of the tables):

- hybrid, semantic, keyword: the store's three modes (hybrid is what `recall` does by default);
- hybrid+date: the session's date written into the text, `[8 May 2024] Maya: ...` (the issue's baseline);
- hybrid+fields: the plain text plus speaker, session, occurred_at and namespace given as memory fields (issue 12),
  and no created_at (the turns are stored at the time of the run, as an imported chat history would be, so the
  date words and the recency prior come from occurred_at alone); searched in the conversation's namespace. Run when
  the store keeps those fields (probed through `import_` and `get`), else the row says n/a.
- hybrid+fields+<option> (opt-in, OPTION_VARIANTS): hybrid+fields re-ranked by one of issue 28's ideas for
  multi-session questions (benchmarks/lab/multipart.py: a per-session cap, two-stage session recall, "how did X
  change" expansion; benchmarks/lab/entities.py: places reserved per named entity, and first-person turns also
  indexed about their speaker, an index-time option; benchmarks/lab/windows.py: time windows ranked first, a
  timeline expansion, a rule-based fact line per turn, index time); all rejected, benchmarks/README.md,
  "Retrieval III".

Turn vectors are computed once per text with the real Embedder, batched, and cached under the cache directory
(keyed by a hash of the texts and the model file), then imported with `import_`; question vectors are computed
once with `embed_query` and handed to the store through its embedder, so the latency column is the search alone
(embedding excluded, the figure issue 15's +1 ms budget is about); the query embedding is timed on its own.

    uv run python -m benchmarks.conversations                       # every set; writes results/conversations.json
    uv run python -m benchmarks.conversations --sets harbour lantern --data-dir DIR [--data-dir DIR2]
    uv run python -m benchmarks.conversations --stats               # the sets' statistics only, no model
    uv run python -m benchmarks.conversations --quick               # smoke test: part of one conversation
"""

from __future__ import annotations

import argparse
import hashlib
import inspect
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks import _common, convdata
from benchmarks.lab import entities, multipart, windows
from memserver.contract.backend import Hit
from memserver.errors import InvalidInputError
from memserver.local.store import MemoryStore

ROOT = Path(__file__).resolve().parent.parent

RESULTS = ROOT / "benchmarks" / "results" / "conversations.json"
VARIANTS = ("hybrid", "semantic", "keyword", "hybrid+date", "hybrid+fields")
RERANK_DEPTH = 100  # the ranking an option re-ranks: a recall of 10, then a recall of 100 after it
MENTION_SHARE = 0.5  # change expansion: a keyword match of X this close to the best one counts as a mention


class OptionContext:
    """What an option may ask beyond the ranking: mentions of a subject (a search of it in the same conversation),
    and the cosine of the question to each session's mean turn vector."""

    def __init__(
        self, store: MemoryStore, filters: dict[str, Any], name_of: dict[str, str], centroids: Any, rows: list[Any]
    ) -> None:
        self.store, self.filters, self.name_of = store, filters, name_of
        self.sessions, self.centroids = centroids
        self.q = np.zeros(0, np.float32)
        self.text_of = {r["turn"]: r["plain"] for r in rows}
        self.speakers = sorted({r["speaker"] for r in rows})
        self.aliases = entities.alias_table(self.text_of.values(), self.speakers)

    def mentions(self, subject: str, how: str) -> list[multipart.Turn]:
        hits = self.store.search(subject, limit=DEPTH, **dict(self.filters, mode=how))
        best = hits[0].rank_score if hits else 0.0
        return [as_turn(h, self.name_of) for h in hits if h.rank_score >= MENTION_SHARE * best]

    def entity_turns(self, query: str, entity: str, ranking: list[multipart.Turn]) -> list[multipart.Turn]:
        """The turns of `ranking` that mention `entity`; when none does, a search of the question by that speaker
        (a speaker) or a keyword search of the entity (anything else), kept where it mentions the entity."""
        said = [t for t in ranking if entities.mentioning(self.text_of[t.key], entity, self.aliases)]
        if said:
            return said
        if entity in self.speakers:
            hits = self.store.search(query, limit=TIMED_LIMIT, speaker=entity, **self.filters)
        else:
            hits = self.store.search(entity, limit=TIMED_LIMIT, **dict(self.filters, mode="keyword"))
        found = [as_turn(h, self.name_of) for h in hits]
        return [t for t in found if entities.mentioning(self.text_of[t.key], entity, self.aliases)]

    def session_cosines(self) -> dict[str, float]:
        return dict(zip(self.sessions, np.einsum("ij,j->i", self.centroids, self.q).tolist(), strict=True))


def centroids(rows: list[dict[str, Any]], vectors: np.ndarray) -> tuple[list[str], np.ndarray]:
    """(sessions, the unit mean vector of each one's turns)."""
    sessions = list(dict.fromkeys(r["session"] for r in rows))
    at = {s: i for i, s in enumerate(sessions)}
    sums = np.zeros((len(sessions), vectors.shape[1]), np.float64)
    np.add.at(sums, [at[r["session"]] for r in rows], vectors)
    return sessions, (sums / np.linalg.norm(sums, axis=1, keepdims=True)).astype(np.float32)


def _two_stage(best_of: int, sessions: int, weight: float) -> Any:
    return lambda q, ranking, ctx: multipart.two_stage(ranking, sessions, weight, best_of)


def _centroid(sessions: int, weight: float) -> Any:
    return lambda q, ranking, ctx: multipart.boost_sessions(ranking, ctx.session_cosines(), sessions, weight)


def _cap(cap: int) -> Any:
    return lambda q, ranking, ctx: (
        multipart.cap_per_session(ranking, cap, TIMED_LIMIT) if multipart.is_multi_part(q) else ranking
    )


def _change(at: int, mode: str) -> Any:
    """Mentions of X from a keyword search of X without its owner, or a hybrid one of X with its owner (the answer
    to "how is the commute?" is the next turn, which hybrid finds by its previous turn's words and its speaker)."""

    def expand(q: str, ranking: list[multipart.Turn], ctx: OptionContext) -> list[multipart.Turn]:
        subject = multipart.change_subject(q, owner=mode == "hybrid")
        if subject is None:
            return ranking
        return multipart.add_extremes(ranking, ctx.mentions(subject, mode), at, TIMED_LIMIT)

    return expand


def _entity(slots: int) -> Any:
    """Entity-centred recall: for a question naming two or more entities of the turns' alias table, `slots` places
    of the top 10 reserved for each one's best turns."""

    def reserve(q: str, ranking: list[multipart.Turn], ctx: OptionContext) -> list[multipart.Turn]:
        named = entities.query_entities(q, ctx.aliases)
        if len(named) < 2:
            return ranking
        candidates = {e: ctx.entity_turns(q, e, ranking) for e in named}
        return entities.reserve_per_entity(ranking, candidates, slots, TIMED_LIMIT)

    return reserve


# Issue 28's ranking ideas (benchmarks/lab/multipart.py), each an opt-in row `hybrid+fields+<name>`: the
# hybrid+fields ranking re-ranked. (question, ranking, OptionContext) -> ranking.
OPTIONS: dict[str, Any] = {
    "cap2": _cap(2),
    "cap3": _cap(3),
    **{f"two-stage-b{b}-s{s}-w{w}": _two_stage(b, s, w) for b in (1, 3) for s in (3, 5) for w in (0.1, 0.2)},
    **{f"centroid-s{s}-w{w}": _centroid(s, w) for s in (3, 5) for w in (0.1, 0.2)},
    **{f"change-{m[:2]}-at{at}": _change(at, m) for m in ("keyword", "hybrid") for at in (3, 8)},
    **{f"entity-s{s}": _entity(s) for s in (1, 2, 3)},
}
ENTITY_OPTIONS = tuple(name for name in OPTIONS if name.startswith("entity"))


def _windows(span: int, count: int, weight: float) -> Any:
    return lambda q, ranking, ctx: windows.windows_first(ranking, span, count, weight)


def _spread(at: int, most: int) -> Any:
    """Timeline expansion: the mentions of X from a hybrid search of X with its owner (the question itself when it
    asks "between the first and the last" of something the change pattern does not name)."""

    def expand(q: str, ranking: list[multipart.Turn], ctx: OptionContext) -> list[multipart.Turn]:
        if not windows.is_timeline_question(q):
            return ranking
        subject = multipart.change_subject(q, owner=True) or q
        return windows.spread(ranking, ctx.mentions(subject, "hybrid"), most, at, TIMED_LIMIT)

    return expand


# The third run (benchmarks/lab/windows.py): time windows of 3 / 10 minutes (turns are a minute apart) and of a day
# (a session), and the timeline expansion.
WINDOW_OPTIONS = {
    **{
        f"windows-{span // 60}m-n{n}-w{w}": _windows(span, n, w)
        for span in (180, 600, 86400)
        for n in (3, 5)
        for w in (0.05, 0.1)
    },
    **{f"spread-at{at}-m{m}": _spread(at, m) for at in (3, 8) for m in (3, 4)},
}
# The fourth run: the best windows of the third (3 minutes, 3 windows, weight 0.1) refined around it.
WINDOW_FINE_OPTIONS = {
    f"windows-{span // 60}m-n{n}-w{w}": _windows(span, n, w)
    for span in (120, 180, 300)
    for n in (2, 3)
    for w in (0.1, 0.15)
}
OPTIONS.update(WINDOW_OPTIONS)
OPTIONS.update(WINDOW_FINE_OPTIONS)
# Index-time options (benchmarks/lab/entities.py): the store's memory text and the text its vector is of, by
# turn_rows' key. speaker-keys: first-person turns also written about their speaker, in both; -kw: in the text
# (so the keyword index) only, the vector still the plain turn's; -vec: in the vector only.
INDEX_OPTIONS = {
    "speaker-keys": ("enriched", "enriched"),
    "speaker-keys-kw": ("enriched", "plain"),
    "speaker-keys-vec": ("plain", "enriched"),
    "facts": ("facts", "facts"),  # the rule-based fact line (benchmarks/lab/windows.py) in the text and the vector
    "facts-kw": ("facts", "plain"),
    "facts-vec": ("plain", "facts"),
}
FACT_OPTIONS = ("facts", "facts-kw", "facts-vec")
# The rows of the first run of issue 28's options (multipart.py), and of the second (entities.py).
OPTION_VARIANTS = tuple(
    f"hybrid+fields+{name}"
    for name in OPTIONS
    if name not in ENTITY_OPTIONS and name not in WINDOW_OPTIONS and name not in WINDOW_FINE_OPTIONS
)
ENTITY_VARIANTS = tuple(
    f"hybrid+fields+{name}" for name in (*ENTITY_OPTIONS, *INDEX_OPTIONS) if name not in FACT_OPTIONS
)
WINDOW_VARIANTS = tuple(f"hybrid+fields+{name}" for name in (*WINDOW_OPTIONS, *FACT_OPTIONS))
WINDOW_FINE_VARIANTS = tuple(f"hybrid+fields+{name}" for name in WINDOW_FINE_OPTIONS)
FIELDS = ("speaker", "session", "occurred_at", "namespace")
DEPTH = 50  # ranking depth scored for MRR
TIMED_LIMIT = 10  # the timed search: what a recall of 10 does


class QueryVectors:
    """The store's embedder, with the question vectors computed beforehand (so the model runs once per question).

    Anything else (there should be nothing: turns are imported with their vectors) goes to the real embedder.
    """

    def __init__(self, inner: Any, vectors: dict[str, np.ndarray]) -> None:
        self.inner, self.vectors = inner, vectors
        self.dim: int = inner.dim
        self.model_name: str = inner.model_name

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.inner.embed(texts), np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        vector = self.vectors.get(text)
        return vector if vector is not None else np.asarray(self.inner.embed_query(text), np.float32)


def store_id(key: str) -> str:
    """The store wants 32-hex ids; turns are named `<conversation>/<turn id>`."""
    return hashlib.md5(key.encode()).hexdigest()


def dated(text: str, when: datetime) -> str:
    return f"[{when.day} {when:%B %Y}] {text}"


def turn_rows(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per turn: id, store id, the memory texts of each variant, when it was said, and its fields."""
    rows = []
    before: dict[str, Any] = {}
    for session, turn in convdata.turns(conv):
        previous = before.get(session["id"])
        before[session["id"]] = turn
        asked = previous["text"] if previous is not None and previous["speaker"] != turn["speaker"] else None
        fact = windows.fact_line(turn["text"], turn["speaker"], asked)
        start = datetime.fromisoformat(session["date"])
        when = start + timedelta(minutes=int(turn["id"].split(":")[1]) - 1)
        plain = convdata.memory_text(turn)
        statement = entities.speaker_statement(turn["text"], turn["speaker"])
        rows.append(
            {
                "turn": turn["id"],
                "id": store_id(f"{conv['id']}/{turn['id']}"),
                "plain": plain,
                "dated": dated(plain, start),
                "enriched": f"{plain}\n{statement}" if statement else plain,
                "facts": f"{plain}\n{fact}" if fact else plain,
                "at": when.isoformat(timespec="seconds"),
                "speaker": turn["speaker"],
                "session": f"{conv['id']}/{session['id']}",
            }
        )
    return rows


def cached_vectors(cache: Path, embedder: Any, texts: list[str], *, query: bool) -> tuple[np.ndarray, float | None]:
    """(vectors, seconds spent embedding or None when cached). Queries go one by one through embed_query."""
    files = getattr(embedder, "files", None)  # the Embedder's model files: a new model invalidates the cache
    model = f"{files.model}:{files.model.stat().st_size}" if files is not None else embedder.model_name
    key = hashlib.sha256("\n".join([model, str(query), *texts]).encode()).hexdigest()
    path = cache / f"{'q' if query else 't'}-{key[:20]}.npy"
    if path.exists():
        return np.load(path), None
    started = time.perf_counter()
    if query:
        vectors = np.stack([np.asarray(embedder.embed_query(t), np.float32) for t in texts])
    else:
        vectors = np.asarray(embedder.embed(texts), np.float32)
    seconds = time.perf_counter() - started
    partial = path.with_suffix(".partial.npy")
    np.save(partial, vectors)
    partial.replace(path)  # a run killed mid-write leaves no half file to load next time
    return vectors, seconds


def probe_fields(embedder: Any, store_class: type[MemoryStore] = MemoryStore) -> tuple[str, ...]:
    """The conversation fields the store keeps: an import of a record carrying them, read back through get().

    Today's store ignores unknown record keys, so "accepted" is not enough: a field counts when get() returns it.
    """
    with tempfile.TemporaryDirectory(prefix="memserver-conv-probe-") as tmp:
        store = store_class(tmp, "probe", embedder=embedder)
        try:
            record = {
                "id": store_id("probe"),
                "content": "Probe: is anyone there?",
                "vector": np.zeros(embedder.dim, np.float32) + 1 / np.sqrt(embedder.dim),
                "speaker": "Probe",
                "session": "probe/S1",
                "occurred_at": "2024-03-08T12:00:00",
                "namespace": "probe-1",
            }
            try:
                store.import_([record])
            except (InvalidInputError, TypeError, ValueError):
                return ()
            if accepts(store.get, "namespace"):  # (issue 12: get() sees one namespace, the default unless named)
                memory = store.get(record["id"], namespace=record["namespace"])
            else:
                memory = store.get(record["id"])
            if memory is None:  # e.g. stored in a namespace that get() does not look in without being told
                return ()
            kept = memory.to_dict()
            return tuple(f for f in FIELDS if kept.get(f) not in (None, ""))
        finally:
            store.close()


def accepts(method: Any, name: str) -> bool:
    return name in inspect.signature(method).parameters


METRICS = ("recall@5", "recall@10", "mrr", "ev@10", "all@10")  # averaged per question, in percent


def rank_metrics(ranking: list[str], evidence: set[str]) -> dict[str, float]:
    """R@k and ev@10: the share of evidence turns in the top k; all@10: 1 when every one is in the top 10.

    ev@10 is R@10 under the name issue 28 uses for multi-turn questions; all@10 is the strict figure an answer
    spread over several sessions needs (a question whose evidence is half found scores 0 there).
    """
    first = next((i + 1 for i, key in enumerate(ranking) if key in evidence), None)
    found10 = len(evidence & set(ranking[:10]))
    return {
        "recall@5": len(evidence & set(ranking[:5])) / len(evidence),
        "recall@10": found10 / len(evidence),
        "mrr": 1.0 / first if first else 0.0,
        "ev@10": found10 / len(evidence),
        "all@10": float(found10 == len(evidence)),
        "first_rank": first or 0,
    }


def records(
    conv: dict[str, Any], rows: list[dict[str, Any]], vectors: np.ndarray, text_key: str, given: Sequence[str]
) -> list[dict[str, Any]]:
    """The import records of a conversation's turns: text `text_key` of each row, its vector, and the fields
    `given` (with occurred_at given, no created_at: every time signal must come from occurred_at)."""
    out = []
    for r, v in zip(rows, vectors, strict=True):
        record = {"id": r["id"], "content": r[text_key], "created_at": r["at"], "tags": [conv["id"]], "vector": v}
        values = {"speaker": r["speaker"], "session": r["session"], "occurred_at": r["at"], "namespace": conv["id"]}
        record.update({f: values[f] for f in given})
        if "occurred_at" in given:  # stored now, said then
            del record["created_at"]
        out.append(record)
    return out


def run_variant(
    variant: str,
    conv: dict[str, Any],
    rows: list[dict[str, Any]],
    vectors: dict[str, np.ndarray],
    questions: list[dict[str, Any]],
    embedder: QueryVectors,
    fields: tuple[str, ...],
    store_class: type[MemoryStore] = MemoryStore,
    keep_ranking: bool = False,
) -> tuple[list[dict[str, Any]], list[float], int]:
    """Score every question of one conversation in one variant: (per-question metrics, search ms, memories).

    keep_ranking adds each question's ranked turn ids (to depth 50): benchmarks/lab/ reranks them offline.
    """
    name = option_name(variant)
    text_key, vector_key = INDEX_OPTIONS.get(name, ("dated", "dated") if variant == "hybrid+date" else ("plain",) * 2)
    mode = variant.split("+")[0]
    option = OPTIONS.get(name)
    given = fields if variant.startswith("hybrid+fields") else ()
    name_of = {r["id"]: r["turn"] for r in rows}
    with tempfile.TemporaryDirectory(prefix="memserver-conv-") as tmp:
        store = store_class(tmp, "conversations", embedder=embedder)
        try:
            imported = store.import_(records(conv, rows, vectors[vector_key], text_key, given))
            filters: dict[str, Any] = {"tags": [conv["id"]], "mode": mode}
            if "namespace" in given and accepts(store.search, "namespace"):
                filters["namespace"] = conv["id"]
            # search() embeds the question through the store's embedder, which hands back the vector computed
            # beforehand; a search() that takes query_vector= (coming) gets it directly.
            by_vector = accepts(store.search, "query_vector")
            context = OptionContext(store, filters, name_of, centroids(rows, vectors[vector_key]), rows)
            out, times = [], []
            for q in questions:
                ask = dict(filters, query_vector=embedder.vectors[q["question"]]) if by_vector else filters
                t0 = time.perf_counter()
                top_hits = store.search(q["question"], limit=TIMED_LIMIT, **ask)
                times.append((time.perf_counter() - t0) * 1000)
                top = [name_of[h.memory.id] for h in top_hits]
                deep_hits = store.search(q["question"], limit=DEPTH if option is None else RERANK_DEPTH, **ask)
                deep = [name_of[h.memory.id] for h in deep_hits[:DEPTH]]
                # Ranks 1-10 are what a recall of 10 returns; deeper ones (MRR only) come from a recall of 50.
                ranking = top + [key for key in deep if key not in top]
                if option is not None:
                    context.q = embedder.vectors[q["question"]]
                    turns = [as_turn(h, name_of) for h in top_hits]
                    turns += [as_turn(h, name_of) for h in deep_hits if name_of[h.memory.id] not in top]
                    ranking = [t.key for t in option(q["question"], turns, context)][:DEPTH]
                metrics = rank_metrics(ranking, set(q["evidence"]))
                out.append(
                    {
                        "question": q["id"],
                        "type": q["type"],
                        "shape": q.get("shape"),
                        **metrics,
                        "limit_dependent": deep[:10] != top,
                    }
                )
                if keep_ranking:
                    out[-1]["ranking"] = ranking
            return out, times, imported
        finally:
            store.close()


def option_name(variant: str) -> str:
    """The option of a `hybrid+fields+<option>` row, else ""."""
    return variant.removeprefix("hybrid+fields+") if variant.startswith("hybrid+fields+") else ""


def as_turn(hit: Hit, name_of: dict[str, str]) -> multipart.Turn:
    m = hit.memory
    return multipart.Turn(name_of[m.id], hit.rank_score, m.session, m.occurred_at)


def summarise(rows: list[dict[str, Any]]) -> dict[str, Any]:
    def mean(part: list[dict[str, Any]]) -> dict[str, float]:
        return {k: round(100 * statistics.fmean(r[k] for r in part), 1) for k in METRICS}

    return {
        "n": len(rows),
        "overall": mean(rows),
        "by_type": {t: {"n": len(p), **mean(p)} for t in convdata.TYPES if (p := [r for r in rows if r["type"] == t])},
        "by_shape": {
            s: {"n": len(p), **mean(p)} for s in convdata.SHAPES if (p := [r for r in rows if r.get("shape") == s])
        },
    }


def of(rows: list[dict[str, Any]], conversation: str) -> list[dict[str, Any]]:
    return [r for r in rows if r["question"].startswith(conversation + "/")]


def evaluate_set(
    name: str,
    convs: list[dict[str, Any]],
    embedder: Any,
    cache: Path,
    variants: list[str],
    fields: tuple[str, ...],
    store_class: type[MemoryStore] = MemoryStore,
    keep_ranking: bool = False,
) -> dict[str, Any]:
    per_variant: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
    search_ms: dict[str, list[float]] = {v: [] for v in variants}
    imported: dict[str, int] = dict.fromkeys(variants, 0)
    embed_s: list[float] = []
    query_ms: list[float] = []
    for conv in convs:
        rows = turn_rows(conv)
        vectors: dict[str, np.ndarray] = {}
        wanted = {"plain", *("dated" for v in variants if v == "hybrid+date")}
        wanted |= {INDEX_OPTIONS[n][1] for v in variants if (n := option_name(v)) in INDEX_OPTIONS}
        for key in ("plain", "dated", "enriched", "facts"):
            if key not in wanted:
                continue
            vectors[key], seconds = cached_vectors(cache, embedder, [r[key] for r in rows], query=False)
            if seconds is not None:
                embed_s.append(seconds)
                _common.log(f"  {conv['id']}: embedded {len(rows)} {key} turns in {seconds:.1f} s")
        texts = [q["question"] for q in conv["questions"]]
        qvecs, seconds = cached_vectors(cache, embedder, texts, query=True)
        if seconds is not None:
            query_ms.append(1000 * seconds / len(texts))
        store_embedder = QueryVectors(embedder, dict(zip(texts, qvecs, strict=True)))
        for variant in variants:
            if variant.startswith("hybrid+fields") and not fields:
                continue
            scored, times, n = run_variant(
                variant, conv, rows, vectors, conv["questions"], store_embedder, fields, store_class, keep_ranking
            )
            for r in scored:
                r["question"] = f"{conv['id']}/{r['question']}"
            per_variant[variant] += scored
            search_ms[variant] += times
            imported[variant] += n
        _common.log(f"  {conv['id']}: {len(rows)} turns, {len(conv['questions'])} questions done")
    turns_total = sum(len(turn_rows(c)) for c in convs)
    result: dict[str, Any] = {"conversations": len(convs), "turns": turns_total, "variants": {}}
    for variant in variants:
        if not per_variant[variant]:
            result["variants"][variant] = {"available": False, "why": "the store does not keep speaker/session/..."}
            continue
        result["variants"][variant] = {
            "available": True,
            **summarise(per_variant[variant]),
            "by_conversation": {c["id"]: summarise(of(per_variant[variant], c["id"]))["overall"] for c in convs},
            "search_ms": _common.summary(search_ms[variant]),
            "memories_imported": imported[variant],
            # keyword ties (equal BM25 scores) are cut differently at different depths, so a recall of 10 and the
            # first 10 of a recall of 50 can differ: how many questions that happened to
            "top10_differs_at_limit_50": sum(r["limit_dependent"] for r in per_variant[variant]),
            "per_question": {r["question"]: [r["first_rank"], round(r["recall@10"], 3)] for r in per_variant[variant]},
        }
    if embed_s:
        result["embed_turns_s"] = round(sum(embed_s), 2)
    if query_ms:
        result["embed_query_ms_mean"] = round(statistics.fmean(query_ms), 2)
    return result


def time_embed_query(embedder: Any, texts: list[str], n: int = 40) -> dict[str, float]:
    """embed_query alone, one question at a time (what a recall pays on top of the search)."""
    ms = []
    for text in texts[:n]:
        t0 = time.perf_counter()
        embedder.embed_query(text)
        ms.append((time.perf_counter() - t0) * 1000)
    return _common.summary(ms)


def breakdown(variant: dict[str, Any]) -> list[list[Any]]:
    """One row per question type, then per shape (shaped questions count in their type too), then all questions."""
    by = {**variant["by_type"], **{f"shape {k}": v for k, v in variant.get("by_shape", {}).items()}}
    named = [*convdata.TYPES, *(f"shape {s}" for s in convdata.SHAPES)]
    parts = [(k, by[k]) for k in named if k in by] + [("all", {"n": variant["n"], **variant["overall"]})]
    return [[kind, v["n"], *(v[m] for m in METRICS)] for kind, v in parts]


def print_tables(result: dict[str, Any]) -> None:
    for name, data in result["sets"].items():
        print(f"\n{name}: {data['conversations']} conversations, {data['turns']} turns, {data['questions']} questions")
        kinds = (*convdata.TYPES, *convdata.SHAPES)
        headers = ["variant", "R@5", "R@10", "MRR", *(f"{t} R@10" for t in kinds), "search p50 ms"]
        rows = []
        for variant, v in data["variants"].items():
            if not v["available"]:
                rows.append([variant, "n/a", "n/a", "n/a", *(["n/a"] * len(kinds)), "n/a"])
                continue
            o, by = v["overall"], {**v["by_type"], **v.get("by_shape", {})}
            rows.append(
                [
                    variant,
                    o["recall@5"],
                    o["recall@10"],
                    o["mrr"],
                    *(f"{by[t]['recall@10']} ({by[t]['n']})" if t in by else "-" for t in kinds),
                    v["search_ms"]["p50"],
                ]
            )
        print(_common.table(headers, rows))
        for variant, v in data["variants"].items():
            if v["available"]:
                print(f"\n{name}, {variant}: every figure per question type and per shape")
                print(_common.table(["kind", "n", "R@5", "R@10", "MRR", "ev@10", "all@10"], breakdown(v)))
    t = result["timing"]
    print(
        f"\nquery embedding alone p50 {t['embed_query_ms']['p50']} ms; search p50 excludes it. "
        f"Fields kept by the store: {', '.join(result['fields_supported']) or 'none (hybrid+fields n/a)'}; "
        f"total {t['total_s']} s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__
    )
    parser.add_argument("--sets", nargs="+", default=None, help="set names (folders); default: every set found")
    parser.add_argument(
        "--data-dir",
        type=Path,
        action="append",
        default=None,
        help=f"a folder of sets; repeat to combine (default {convdata.DATA_DIR.relative_to(ROOT)})",
    )
    parser.add_argument(
        "--variants",
        nargs="+",
        choices=VARIANTS + OPTION_VARIANTS + ENTITY_VARIANTS + WINDOW_VARIANTS + WINDOW_FINE_VARIANTS,
        default=list(VARIANTS),
        help="rows to run (hybrid+fields+<option>: issue 28's re-rankings, opt-in)",
    )
    parser.add_argument("--stats", action="store_true", help="print the sets' statistics and stop (no model)")
    parser.add_argument("--quick", action="store_true", help="smoke test: first 8 sessions of one conversation")
    parser.add_argument("--cache", default=None, help="embedding cache (default: $MEMSERVER_BENCH_CACHE/conversations)")
    parser.add_argument("--out", type=Path, default=RESULTS, help=f"result file (default {RESULTS.relative_to(ROOT)})")
    args = parser.parse_args(argv)

    started = time.perf_counter()
    sets = find_sets(args.data_dir or [convdata.DATA_DIR], args.sets)
    bad = [p for name, convs in sets.items() for c in convs for p in convdata.problems(c, name)]
    if bad:
        print("the data has problems:\n  " + "\n  ".join(bad[:30]), file=sys.stderr)
        return 2
    if args.quick:
        first = next(iter(sets))
        sets = {first: [shorten(sets[first][0], 8)]}
    stats = {name: convdata.statistics(convs) for name, convs in sets.items()}
    print(convdata.format_statistics(stats))
    if args.stats:
        return 0

    cache = _common.cache_dir(args.cache) / "conversations" if args.cache is None else Path(args.cache)
    cache.mkdir(parents=True, exist_ok=True)
    from memserver.embedding.embedder import Embedder

    embedder = Embedder().load()
    fields = probe_fields(embedder)
    result: dict[str, Any] = {
        "command": "uv run python -m benchmarks.conversations " + " ".join(sys.argv[1:] if argv is None else argv),
        "embedder": embedder.model_name,
        "fields_supported": list(fields),
        "depth": DEPTH,
        "sets": {},
    }
    for name, convs in sets.items():
        _common.log(f"{name}: {len(convs)} conversations")
        data = evaluate_set(name, convs, embedder, cache, args.variants, fields)
        result["sets"][name] = {"questions": stats[name]["questions"], **data, "statistics": stats[name]}
    all_questions = [q["question"] for convs in sets.values() for c in convs for q in c["questions"]]
    result["timing"] = {
        "embed_query_ms": time_embed_query(embedder, all_questions),
        "total_s": round(time.perf_counter() - started, 1),
    }
    result["machine"] = _common.machine()
    print_tables(result)
    if not args.quick or args.out != RESULTS:
        _common.write_json(args.out, result)
    return 0


def find_sets(dirs: list[Path], names: list[str] | None) -> dict[str, list[dict[str, Any]]]:
    """The named sets (or all) across the data folders; a set name found in two folders is an error."""
    found: dict[str, list[dict[str, Any]]] = {}
    for folder in dirs:
        try:
            available = convdata.load(folder)
        except (FileNotFoundError, ValueError) as e:
            raise SystemExit(str(e)) from None
        for name, convs in available.items():
            if names and name not in names:
                continue
            if name in found:
                raise SystemExit(f"set {name!r} is in more than one --data-dir")
            found[name] = convs
    missing = [n for n in names or [] if n not in found]
    if missing:
        raise SystemExit(f"no set named {', '.join(missing)} under {', '.join(map(str, dirs))}")
    return {n: found[n] for n in (names or sorted(found))}


def shorten(conv: dict[str, Any], sessions: int) -> dict[str, Any]:
    """The first sessions of a conversation and the questions whose evidence lies within them."""
    kept = conv["sessions"][:sessions]
    ids = {t["id"] for s in kept for t in s["turns"]}
    return {**conv, "sessions": kept, "questions": [q for q in conv["questions"] if set(q["evidence"]) <= ids]}


if __name__ == "__main__":
    sys.exit(main())
