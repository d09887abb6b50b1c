"""Shared fixtures of the compile tests (imported by each test module; a second conftest.py
would clash with tests/conftest.py under pytest's rootdir-relative imports)."""

import os

import pytest


@pytest.fixture(scope="session")
def compile_cache(tmp_path_factory):
    """One private build cache for the whole test session (never the user's own cache)."""
    d = tmp_path_factory.mktemp("sparsedyn-cache")
    os.chmod(d, 0o700)
    old = os.environ.get("SPARSEDYN_CACHE_DIR")
    os.environ["SPARSEDYN_CACHE_DIR"] = str(d)
    yield d
    if old is None:
        os.environ.pop("SPARSEDYN_CACHE_DIR", None)
    else:
        os.environ["SPARSEDYN_CACHE_DIR"] = old


def subprocess_env(cache_dir):
    """Environment for a child Python process using ``cache_dir`` and this checkout's sources."""
    from pathlib import Path
    env = dict(os.environ)
    env["SPARSEDYN_CACHE_DIR"] = str(cache_dir)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
