"""The XLA FFI handler's build: plain C by the kernels' C compiler, clear reasons when it cannot be built (its calls are
tested through the JAX bridge, tests/interop/test_interop_jax.py)."""

import shutil

from sparsedyn.codegen import build, xla_ffi


def test_the_handler_is_plain_c_built_by_the_c_compiler(tmp_path, monkeypatch):
    """The handler needs XLA's C API alone (no C++ compiler, no C++ runtime): the C compiler that
    builds the kernels builds it, the pip compiler too, into the build cache."""
    import jax
    assert "#include <" in xla_ffi.SOURCE and "c_api.h" in xla_ffi.SOURCE and "ffi.h\"" not in xla_ffi.SOURCE
    assert "std::" not in xla_ffi.SOURCE and "namespace" not in xla_ffi.SOURCE
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(xla_ffi, "_loaded", {})     # (a handler another test loaded in this process)
    for compiler in (build.find_compiler(), build._probed_compiler(build.pip_compiler())):
        lib, why = xla_ffi.load_handler(compiler, jax.ffi.include_dir())
        assert why is None and lib.sd_xla_call is not None
    assert len(list(tmp_path.glob("sd_xla_ffi_*.so"))) == 2


def test_reasons_when_the_handler_cannot_be_built(monkeypatch, tmp_path):
    lib, why = xla_ffi.load_handler(build.find_compiler(), tmp_path)
    assert lib is None and "XLA FFI headers are missing" in why and "c_api.h" in why
    import jax
    lib, why = xla_ffi.load_handler(None, jax.ffi.include_dir())
    assert lib is None and why.startswith("no C compiler")
    broken = build.Compiler([shutil.which("false")], "false", (), False)
    lib, why = xla_ffi.load_handler(broken, jax.ffi.include_dir())
    assert lib is None and why.startswith("the FFI handler did not build") and "false" in why


def test_one_call_per_arity_up_to_the_limit():
    src = xla_ffi.SOURCE
    for kind in ("single", "loop", "batch"):
        body = src[src.index(f"call_{kind}("):]
        body = body[:body.index("\n}")]
        assert [f"case {n}:" in body for n in range(1, xla_ffi.MAX_BUFFERS + 1)] == [True] * xla_ffi.MAX_BUFFERS
