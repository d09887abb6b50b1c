"""The XLA FFI handler's build: found compilers, clear reasons when it cannot be built (its calls are
tested through the JAX bridge, tests/interop/test_interop_jax.py)."""

import shutil

from sparsedyn.codegen import build, xla_ffi


def test_cxx_command_follows_the_environment_and_the_c_compiler(monkeypatch):
    monkeypatch.setenv("SPARSEDYN_CXX", "g++ -fno-exceptions")
    assert xla_ffi.cxx_command(None) == ["g++", "-fno-exceptions"]
    monkeypatch.delenv("SPARSEDYN_CXX")
    monkeypatch.delenv("CXX", raising=False)
    cxx = xla_ffi.cxx_command(build.find_compiler())
    assert cxx is not None and shutil.which(cxx[0]) is not None


def test_reasons_when_the_handler_cannot_be_built(monkeypatch, tmp_path):
    lib, why = xla_ffi.load_handler(build.find_compiler(), tmp_path)
    assert lib is None and "XLA FFI headers are missing" in why and "ffi.h" in why
    import jax
    monkeypatch.setenv("SPARSEDYN_CXX", shutil.which("false"))
    lib, why = xla_ffi.load_handler(build.find_compiler(), jax.ffi.include_dir())
    assert lib is None and why.startswith("the FFI handler did not build") and "false" in why


def test_one_call_per_arity_up_to_the_limit():
    src = xla_ffi.SOURCE
    for kind in ("single", "loop", "batch"):
        body = src[src.index(f"call_{kind}("):]
        body = body[:body.index("\n}")]
        assert [f"case {n}:" in body for n in range(1, xla_ffi.MAX_BUFFERS + 1)] == [True] * xla_ffi.MAX_BUFFERS
