"""No C compiler: the NumPy kernels answer, with one clear warning per process."""

import warnings

import numpy as np
import pytest

import sparsedyn as sd
from conftest import random_trees, random_state
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.codegen import CompilerNotFoundWarning, compile_report, runtime

pytestmark = pytest.mark.usefixtures("compile_cache")


def bit_identical(x, y):
    """Same shape, dtype and bytes: the fallback runs the very NumPy kernel, so not one bit may differ."""
    x, y = np.asarray(x), np.asarray(y)
    return x.shape == y.shape and x.dtype == y.dtype == np.float64 and x.tobytes() == y.tobytes()


def test_missing_compiler_falls_back_to_numpy(tmp_path, monkeypatch, rng):
    monkeypatch.setenv("SPARSEDYN_CC", str(tmp_path / "no-such-cc"))
    monkeypatch.setattr(runtime, "_warned_no_compiler", set())      # the once-per-process warning, afresh
    model = random_trees()[2]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        k = sd.compile(model)
        k2 = sd.compile(random_trees()[0])
    ours = [w for w in caught if issubclass(w.category, CompilerNotFoundWarning)]
    assert len(ours) == 1, [str(w.message) for w in caught]
    assert "no working C compiler" in str(ours[0].message) and "NumPy" in str(ours[0].message)
    assert not k.compiled and not k2.compiled
    q, v, a = random_state(model, rng, batch=(3,))
    assert bit_identical(k.rnea(q, v, a), sd.rnea(model, q, v, a))
    assert bit_identical(k.aba(q[0], v[0], a[0]), sd.aba(model, q[0], v[0], a[0]))
    assert bit_identical(k.minv(q), sd.minv(model, q))
    R, p = k.forward_kinematics(q)
    R0, p0 = sd.forward_kinematics(model, q)
    assert bit_identical(R, R0) and bit_identical(p, p0)
    f = k.flops("rnea")                              # still counted from the IR
    assert f["mul"] > 0


def test_broken_compiler_falls_back(tmp_path, monkeypatch):
    fake = tmp_path / "fakecc"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("SPARSEDYN_CC", str(fake))
    with pytest.warns(CompilerNotFoundWarning, match="cannot build"):
        k = sd.compile(sd.serial_chain(3))
    assert not k.compiled
    q = np.array([0.3, -0.2, 1.1])
    assert bit_identical(k.rnea(q, np.ones(3), -np.ones(3)), sd.rnea(sd.serial_chain(3), q, np.ones(3), -np.ones(3)))


def test_compile_report():
    text = compile_report(sd.serial_chain(5), kernels=("rnea", "crba"))
    assert "rnea" in text and "crba" in text and "mul" in text and "library" in text
    lines = [ln for ln in text.splitlines() if ln.startswith("rnea")]
    assert int(lines[0].split()[1]) == 25 * 5 - 30     # see test_compile_flops
