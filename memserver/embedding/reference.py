"""The embedding model checked against sentence-transformers' own vectors of 40 reference texts (shipped in
embedding/data/): what `memserver model verify`, memory://health and `memserver doctor` report. Checked once
per embedder (the answer is cached on it): 40 texts cost the model a fraction of a second."""

from __future__ import annotations

import contextlib
import json
import weakref
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from memserver.embedding.base import TextEmbedder

REFERENCE_DATA = "minilm-reference.json"
FIDELITY_THRESHOLD = 0.99999

_checked: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()


def reference_items(path: Path | None = None) -> list[dict[str, Any]]:
    """The reference texts and their vectors (the packaged copy unless `path`); OSError/ValueError/KeyError."""
    source = path if path is not None else resources.files("memserver.embedding") / "data" / REFERENCE_DATA
    items: list[dict[str, Any]] = json.loads(source.read_text(encoding="utf-8"))["items"]
    return items


def check(embedder: TextEmbedder, items: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """{"ok", "min_cosine", "mean_cosine", "worst", "texts", "threshold"} of `embedder` against the reference
    vectors; cached per embedder when the packaged references are used."""
    cached = items is None
    if cached:
        try:
            return _checked[embedder]
        except (KeyError, TypeError):
            pass
    items = items if items is not None else reference_items()
    expected = np.array([item["embedding"] for item in items], dtype=np.float64)
    if expected.shape[1] != embedder.dim:
        result = {"ok": False, "min_cosine": 0.0, "mean_cosine": 0.0, "worst": 0, "texts": len(items)}
    else:
        expected /= np.linalg.norm(expected, axis=1, keepdims=True)
        got = np.asarray(embedder.embed([item["text"] for item in items]), dtype=np.float64)
        cosines = (got * expected).sum(axis=1)
        result = {
            "ok": bool(cosines.min() >= FIDELITY_THRESHOLD),
            "min_cosine": float(cosines.min()),
            "mean_cosine": float(cosines.mean()),
            "worst": int(np.argmin(cosines)),
            "texts": len(items),
        }
    result["threshold"] = FIDELITY_THRESHOLD
    if cached:
        with contextlib.suppress(TypeError):  # an embedder that takes no weak reference is checked each time
            _checked[embedder] = result
    return result
