"""Shared fixtures of the compile tests (imported by each test module; a second conftest.py
would clash with tests/conftest.py under pytest's rootdir-relative imports)."""

import os

import pytest


@pytest.fixture(scope="session")
def compile_cache(build_cache):
    """The build cache of the test run (tests/conftest.py's ``build_cache``: one private directory
    shared by every test, never the user's own cache)."""
    return build_cache


def subprocess_env(cache_dir):
    """Environment for a child Python process using ``cache_dir`` and this checkout's sources."""
    from pathlib import Path
    env = dict(os.environ)
    env["SPARSEDYN_CACHE_DIR"] = str(cache_dir)
    src = str(Path(__file__).resolve().parents[2] / "src")
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env
