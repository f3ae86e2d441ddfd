"""Sentence embeddings for memserver: all-MiniLM-L6-v2 on onnxruntime, matching sentence-transformers.

The pipeline, as sentence-transformers runs it with normalize_embeddings=True:

    tokenizer.json (BertNormalizer, WordPiece, [CLS] ... [SEP]), truncated at 256 word pieces
    -> model.onnx (input_ids, attention_mask, token_type_ids = 0) -> last_hidden_state [batch, seq, 384]
    -> mean over the real tokens (attention mask) -> L2 normalisation

`import memserver.embedding.embedder` is cheap: onnxruntime and tokenizers are imported on first use, and an `Embedder`
resolves and loads the model on its first embed (or on `load()`). Knows nothing about MCP or the store.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from memserver.embedding.query_cache import QueryCache, entries_from_env
from memserver.embedding.sources import DIM, MAX_SEQ_LENGTH, MODEL_ID, ModelFiles, resolve_model
from memserver.errors import ModelError

if TYPE_CHECKING:
    import onnxruntime
    import tokenizers


def default_threads() -> int:
    """onnxruntime intra-op threads: the CPUs this process may use, at most 4 (more does not help a 6-layer model)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    return max(1, min(4, cpus))


class Embedder:
    """all-MiniLM-L6-v2 sentence embeddings, identical to sentence-transformers to cosine >= 0.99999.

    Example:
        >>> embedder = Embedder()                   # cheap: nothing is loaded yet
        >>> embedder.embed(["tea", "coffee"]).shape  # first call finds and loads the model
        (2, 384)

    Args:
        model_dir: a folder with model.onnx + tokenizer.json; None resolves the model (see memserver.embedding.sources).
        threads: onnxruntime intra-op threads; None picks `default_threads()`.
        batch_size: texts per onnxruntime run; texts are sorted by length first, so each batch pads little.
        query_cache: entries of the LRU of recent `embed_query` vectors (0 disables it); None reads
            MEMSERVER_QUERY_CACHE (default 1024). A hit skips tokenisation and the model
            (memserver.embedding.query_cache).

    One Embedder may be called from several threads at once: the tokenizer is configured once at load and never
    changed afterwards, onnxruntime's `InferenceSession.run` is thread-safe, and the query cache has its own lock.
    `model_runs` counts onnxruntime runs (a cache hit adds none).
    """

    model_name = MODEL_ID
    dim = DIM
    max_seq_length = MAX_SEQ_LENGTH

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        threads: int | None = None,
        batch_size: int = 32,
        query_cache: int | None = None,
    ) -> None:
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1, got {threads}")
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        self.query_cache = QueryCache(entries_from_env() if query_cache is None else query_cache)
        self.model_runs = 0
        self._runs_lock = threading.Lock()
        self._model_dir = model_dir
        self.threads = threads or default_threads()
        self.batch_size = batch_size
        self.files: ModelFiles | None = None  # set by load()
        self._session: onnxruntime.InferenceSession | None = None
        self._tokenizer: tokenizers.Tokenizer | None = None
        self._feeds_token_types = True
        self.graph: dict[str, str] = {}  # the model file's memserver metadata (graph name and version), set by load()
        self._load_lock = threading.Lock()

    def __repr__(self) -> str:
        where = self.files.model if self.files else "not loaded"
        return f"Embedder({self.model_name!r}, {where}, threads={self.threads})"

    def load(self) -> Embedder:
        """Resolve and load the model now rather than on the first embed. Returns self."""
        if self._session is None:
            with self._load_lock:
                if self._session is None:
                    files = resolve_model(self._model_dir)
                    tokenizer = load_tokenizer(files.tokenizer)
                    session = load_session(files.model, self.threads)
                    self._feeds_token_types = "token_type_ids" in {i.name for i in session.get_inputs()}
                    self.graph = graph_metadata(session)
                    self.files, self._tokenizer = files, tokenizer
                    self._session = session  # last: its presence means "loaded"
        return self

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts: (len(texts), 384) float32 with unit rows, in input order."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of strings; use embed_query() for one string")
        if len(texts) == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        self.load()
        assert self._tokenizer is not None
        encodings = self._tokenizer.encode_batch(list(texts))
        ids = [e.ids for e in encodings]
        # Sort by length so each batch pads to a similar length (30-45% faster ingest); undo the order at the end.
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.empty((len(ids), self.dim), dtype=np.float32)
        for start in range(0, len(order), self.batch_size):
            chunk = order[start : start + self.batch_size]
            out[chunk] = self._run([ids[i] for i in chunk])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one text: (384,) float32, unit length. The single-query hot path (no sorting, no padding).

        Answered from the query cache when the same text was embedded recently (a copy, equal to the first answer).
        """
        cached = self.query_cache.get(text)
        if cached is not None:
            return cached
        self.load()
        assert self._tokenizer is not None
        vector: np.ndarray = self._run([self._tokenizer.encode(text).ids])[0]
        self.query_cache.put(text, vector)
        return vector

    def tokenize(self, text: str) -> list[str]:
        """The word pieces the model sees for `text`, [CLS] and [SEP] included, after truncation."""
        self.load()
        assert self._tokenizer is not None
        return list(self._tokenizer.encode(text).tokens)

    def _run(self, batch: list[list[int]]) -> np.ndarray:
        """Pad a batch to its longest row, run the model, mean-pool over the real tokens, L2-normalise."""
        longest = max(len(row) for row in batch)
        input_ids = np.zeros((len(batch), longest), dtype=np.int64)  # 0 is [PAD]
        attention_mask = np.zeros((len(batch), longest), dtype=np.int64)
        for r, row in enumerate(batch):
            input_ids[r, : len(row)] = row
            attention_mask[r, : len(row)] = 1
        feed = {"input_ids": input_ids, "attention_mask": attention_mask}
        if self._feeds_token_types:
            feed["token_type_ids"] = np.zeros_like(input_ids)  # one sentence: all segment 0
        assert self._session is not None
        hidden = self._session.run(None, feed)[0]
        with self._runs_lock:
            self.model_runs += 1
        if hidden.ndim != 3 or hidden.shape[-1] != self.dim:
            raise ModelError(f"{self.files and self.files.model} gave output shape {hidden.shape}, not [b, s, 384]")
        return mean_pool_normalize(hidden, attention_mask)


def mean_pool_normalize(hidden: np.ndarray, attention_mask: np.ndarray) -> np.ndarray:
    """Mean of the token vectors where attention_mask is 1, then L2-normalised (float32)."""
    mask = attention_mask.astype(np.float32)
    summed = np.einsum("bsd,bs->bd", hidden, mask)
    pooled = summed / np.maximum(mask.sum(axis=1, keepdims=True), 1e-9)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    unit: np.ndarray = (pooled / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return unit


def load_tokenizer(path: Path) -> tokenizers.Tokenizer:
    """Load tokenizer.json and configure it once: truncate at 256, no padding (the embedder pads per batch).

    The shipped tokenizer.json truncates at 128 and pads every input to 128; left as it is, embeddings drift far
    from sentence-transformers (min cosine 0.65 on long texts).
    """
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
    except Exception as exc:
        raise ModelError(f"cannot load the tokenizer {path}: {exc}") from exc
    tokenizer.no_padding()
    tokenizer.enable_truncation(max_length=MAX_SEQ_LENGTH)  # on the right; keeps [CLS] and [SEP]
    return tokenizer


def load_session(path: Path, threads: int, *, spinning: bool = False) -> onnxruntime.InferenceSession:
    """Create the onnxruntime session on the CPU provider and check the model's interface.

    All of onnxruntime's graph optimisations except SkipLayerNormFusion: its SkipLayerNormalization kernel measured
    3-4x slower here than the Add + LayerNormalization it replaces (benchmarks/README.md, Embedder). Intra-op threads
    do not spin by default: spinning threads kept a core busy after each run, taking it from the event loop and the
    client (benchmarks/ort_threads.py, 2 threads on a loaded 2-core machine: query p50 40.0 -> 8.1 ms, CPU 8.6 ->
    5.0 ms a query).

    Raises ModelError naming the file when it cannot be loaded or is not a 384-wide BERT encoder.
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only: onnxruntime's warnings are noise for users
    options.add_session_config_entry("session.intra_op.allow_spinning", "1" if spinning else "0")
    try:
        session = ort.InferenceSession(
            str(path),
            sess_options=options,
            providers=["CPUExecutionProvider"],
            disabled_optimizers=["SkipLayerNormFusion"],
        )
    except Exception as exc:
        raise ModelError(
            f"cannot load the ONNX model {path}: {str(exc).strip()[:300]}; delete it and run `memserver model fetch`"
            " (or fix MEMSERVER_MODEL_DIR)"
        ) from exc
    _check_interface(session, path)
    return session


def graph_metadata(session: Any) -> dict[str, str]:
    """The graph's name and version as memserver.embedding.onnx_export stamps them; {} for a graph it did not write
    (the Hub's
    onnx/model.onnx, or one converted before the stamp existed: graph version 1)."""
    from memserver.embedding.onnx_export import GRAPH_KEY, VERSION_KEY

    metadata = session.get_modelmeta().custom_metadata_map
    return {key: metadata[key] for key in (GRAPH_KEY, VERSION_KEY) if key in metadata}


def _check_interface(session: Any, path: Path) -> None:
    inputs = {i.name: i for i in session.get_inputs()}
    for name in ("input_ids", "attention_mask"):
        if name not in inputs:
            raise ModelError(f"{path} has no input {name!r} (inputs: {sorted(inputs)}); it is not a BERT encoder")
    unknown = set(inputs) - {"input_ids", "attention_mask", "token_type_ids"}
    if unknown:
        raise ModelError(f"{path} has unexpected inputs {sorted(unknown)}")
    for i in inputs.values():
        if i.type != "tensor(int64)":
            raise ModelError(f"{path}: input {i.name} is {i.type}, expected tensor(int64)")
    output = session.get_outputs()[0]
    if len(output.shape) != 3 or output.shape[-1] != DIM or output.type != "tensor(float)":
        raise ModelError(
            f"{path}: first output {output.name} is {output.type} {output.shape}, expected float [batch, seq, {DIM}]"
            " (memserver only runs all-MiniLM-L6-v2)"
        )
