"""Hand-written C for the layers below the compiler (``sparsedyn.kernels.c_library``, answered by
sparsedyn.codegen.native): built with the kernels' compiler into the build cache, loaded once per
process; None without a compiler (the caller keeps its NumPy road)."""

import ctypes
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
