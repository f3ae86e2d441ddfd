"""The embedding seam: what a store needs from an embedder (`TextEmbedder`), and a query's vector made with it.

Imports neither numpy (but inside `query_vector`) nor onnxruntime nor tokenizers, so naming the seam costs a store's
callers nothing at start-up; `embedder.py` holds the model that fits it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from memserver.errors import StoreError

if TYPE_CHECKING:
    import numpy as np

__all__ = ["TextEmbedder", "query_vector"]


class TextEmbedder(Protocol):
    """What the store needs from an embedder; tests use a fake with the same shape."""

    dim: int  # 384 for all-MiniLM-L6-v2
    model_name: str  # "sentence-transformers/all-MiniLM-L6-v2"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(n, dim) float32, unit rows, in input order."""
        ...

    def embed_query(self, text: str) -> np.ndarray:
        """(dim,) float32, unit."""
        ...


def query_vector(embedder: TextEmbedder, query: str, dim: int) -> np.ndarray:
    """The (dim,) float32 vector of a search's query text; StoreError if the embedder returns another shape (a
    vector the caller gives instead is checked by contract.inputs.check_vector)."""
    import numpy as np

    q = np.asarray(embedder.embed_query(query), dtype=np.float32).reshape(-1)
    if q.shape != (dim,):
        raise StoreError(f"the embedder returned a query vector of shape {q.shape}, expected ({dim},)")
    return q
