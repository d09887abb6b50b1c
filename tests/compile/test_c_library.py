"""Hand-written C for the layers below the compiler (``sparsedyn.kernels.c_library``, answered by
sparsedyn.codegen.native): built with the kernels' compiler into the build cache, loaded once per
process; None without a compiler (the caller keeps its NumPy road)."""

import ctypes
import os
import warnings

import numpy as np
import pytest

from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.codegen import CompilerNotFoundWarning, native, runtime
from sparsedyn.kernels import c_library

pytestmark = pytest.mark.usefixtures("compile_cache")

#: A dot product and a square root from the prelude's declarations.
SOURCE = """
SD_EXPORT double sd_test_norm(long long n, const double *x)
{
  double s = 0.0;
  for (long long i = 0; i < n; i++) s += x[i] * x[i];
  return sqrt(s);
}
"""


def test_a_source_is_built_once_and_runs():
    lib = c_library(SOURCE)
    assert lib is not None and c_library(SOURCE) is lib              # loaded once per process
    f = lib.sd_test_norm
    f.restype, f.argtypes = ctypes.c_double, [ctypes.c_longlong, ctypes.POINTER(ctypes.c_double)]
    x = np.array([3.0, 4.0, 12.0])
    assert f(3, ctypes.c_double.from_buffer(x)) == 13.0              # sqrt(9 + 16 + 144), exact
    assert f(0, ctypes.c_double.from_buffer(x)) == 0.0


def test_without_a_compiler_it_is_none(tmp_path, monkeypatch):
    monkeypatch.setenv("SPARSEDYN_CC", str(tmp_path / "no-such-cc"))
    source = SOURCE + "/* another source: not the one loaded above */\n"
    monkeypatch.setattr(native, "_c_libraries", {})
    monkeypatch.setattr(runtime, "_warned_no_compiler", set())      # the once-per-process warning, afresh
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert c_library(source) is None
    assert any(issubclass(w.category, CompilerNotFoundWarning) for w in caught)


#: A copy of its input, called as the compiled kernels' fast path calls a kernel (inputs, then outputs).
COPY = """
SD_EXPORT void sd_test_copy(const double *x, double *y)
{
  for (int i = 0; i < 13; i++) y[i] = x[i];
}
"""


def test_the_fast_path_declines_exactly_the_non_finite_inputs():
    """The compiled kernels' fast path (the C extension's ``Kernel``) runs the kernel on finite inputs and
    hands every other to its fallback: a NaN, +inf or -inf at any position of the 13 (the vectorised
    test's whole vectors and its tail), never the finite extremes (the largest double, the smallest
    subnormal, a negative zero), whose exponent field is one short of all ones or zero."""
    import sparsedyn as sd
    from sparsedyn.kernels import native_function
    puck = sd.ModelBuilder("puck").add_body("puck", None, sd.make_joint("free"), mass=1.0,
                                            rot_inertia=np.eye(3)).build()
    with sd.use_backend("native", deterministic=True):               # (the compiler's extension loaded)
        sd.rnea(puck, puck.neutral(), np.zeros(6), np.zeros(6))
    fast, lib = native_function("Kernel"), c_library(COPY)
    if fast is None or lib is None:
        # CI installs a compiler (the pip compiler comes with the package): none there is a failure
        (pytest.fail if os.environ.get("CI") else pytest.skip)("no C extension of the compiler here")
    declined = []
    entry = ctypes.cast(lib.sd_test_copy, ctypes.c_void_p).value
    k = fast(entry, ((13,),), ((13,),), lambda x: declined.append(x.copy()) or np.full(13, -1.0))
    finite = np.array([np.finfo(float).max, -np.finfo(float).max, 5e-324, -0.0, 1.0] + [2.0] * 8)
    assert np.array_equal(k(finite), finite) and not declined
    for bad in (np.nan, np.inf, -np.inf):
        for at in range(13):
            x = finite.copy()
            x[at] = bad
            assert np.array_equal(k(x), np.full(13, -1.0)), (bad, at)
    assert len(declined) == 39
