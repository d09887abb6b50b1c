"""Builds that compile a kernel's first translation units while Python writes the next
(sparsedyn.codegen.build.build_library with an iterator of units, sparsedyn.codegen.cemit.emit_units).

Nothing here is timed: the order of events is observed through a wrapped compiler and a generator
of units that waits for it (with a generous limit, so that a build that compiles nothing before all
units are written fails instead of hanging)."""

import ctypes
import threading

import numpy as np
import pytest

import sparsedyn as sd
from conftest import random_trees
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.codegen import build, cemit, runtime
from sparsedyn.codegen.trace import trace

pytestmark = pytest.mark.usefixtures("compile_cache")

WAIT = 120.0        # seconds a unit generator waits for a compiler event before it gives up


class _Watched(build.Compiler):
    """The system compiler, with an event set when it has compiled a translation unit."""

    def __init__(self, comp):
        super().__init__(comp.argv, comp.ident, comp.flags, comp.openmp, comp.libs)
        self.compiled = threading.Event()

    def run(self, args, cwd):
        try:
            return super().run(args, cwd)
        finally:
            if "-c" in args:
                self.compiled.set()


def _compiler():
    comp = build.find_compiler()
    assert comp is not None, "these tests need a C compiler (the system's or the pip compiler)"
    return _Watched(comp)


def _key(tag):
    import hashlib
    return hashlib.sha256(f"overlap {tag} {np.random.default_rng().integers(1 << 62)}".encode()).hexdigest()[:40]


def test_units_compile_while_later_ones_are_written(tmp_path):
    comp, key = _compiler(), _key("stream")
    seen = []

    def units():
        yield cemit.emit_unit(["SD_EXPORT double sd_triple(double x) { return 3.0 * x; }"])
        seen.append(comp.compiled.wait(WAIT))      # the first unit compiles before the second exists
        yield cemit.emit_unit(["SD_EXPORT double sd_half(double x) { return 0.5 * x; }"])
        yield cemit.emit_unit([], key=key)

    lib, built = build.build_library(key, units(), comp, directory=tmp_path)
    assert built and seen == [True]
    for name, x, want in (("sd_triple", 1.25, 3.75), ("sd_half", 3.0, 1.5)):
        f = getattr(lib, name)
        f.restype, f.argtypes = ctypes.c_double, [ctypes.c_double]
        assert f(x) == want


def test_a_unit_that_fails_to_compile_stops_the_writing(tmp_path):
    comp, key = _compiler(), _key("fail")
    written = []

    def units():
        for k in range(5):
            written.append(k)
            yield cemit.emit_unit([f"SD_EXPORT double sd_u{k}(double x) {{ return x + {k}.0; }}"
                                   + (" this is no C;" if k == 0 else "")])
            if k == 0:
                assert comp.compiled.wait(WAIT)        # unit 0 has failed before unit 1 is handed over

    with pytest.raises(build.BuildError, match="failed"):
        build.build_library(key, units(), comp, directory=tmp_path)
    assert written == [0, 1]                            # units 2, 3, 4 were never written
    assert not list(tmp_path.glob("sd_*.so"))


def test_a_kernel_written_unit_by_unit_equals_the_interpreted_program(tmp_path, rng):
    """aba_derivatives of a floating tree (dense block products, many segments and units): built from
    the iterator of its units, one state equals the interpreted program bit for bit."""
    model = random_trees()[2]
    prog = trace(model, "aba_derivatives")
    comp, key = _compiler(), _key("kernel")
    assert len(cemit.emit_program(prog, "aba_derivatives", chunk=40, unit_size=400)) >= 4
    units = cemit.emit_units(prog, "aba_derivatives", chunk=40, unit_size=400)
    assert not isinstance(units, list)
    lib, built = build.build_library(key, _with_key(units, key), comp, directory=tmp_path)
    assert built
    xs = [model.random_configuration(rng)] + [rng.normal(size=s) for s in prog.input_shapes[1:]]
    ys = [np.zeros(s) for s in prog.output_shapes]
    f = lib.sd_aba_derivatives
    f.restype = None
    f(*[ctypes.c_void_p(np.ascontiguousarray(a, dtype=float).ctypes.data) for a in xs + ys])
    for got, want in zip(ys, prog.evaluate(xs)):
        np.testing.assert_array_equal(got, want)


def _with_key(units, key):
    for u in units:
        yield cemit.emit_unit([u])
    yield cemit.emit_unit([], key=key)


def test_a_library_in_the_cache_is_not_written_again(tmp_path, monkeypatch):
    """Without the model's manifest (deleted) the kernels are traced again, but their library is in
    the cache: no C is written and the compiler does not run."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    monkeypatch.setenv("SPARSEDYN_CACHE_DIR", str(cache))
    m = sd.serial_chain(5, name="overlap-cached")
    k = sd.compile(m, kernels=("rnea",))
    assert k.compiled and k.built == {"rnea-single": True}
    (manifest,) = cache.glob("m_*.json")
    manifest.unlink()
    calls = {"units": 0, "cc": 0}
    emit_units, run = runtime.emit_units, build.Compiler.run

    def counted_units(*args, **kwargs):
        calls["units"] += 1
        return emit_units(*args, **kwargs)

    def counted_run(self, *args, **kwargs):
        calls["cc"] += 1
        return run(self, *args, **kwargs)

    monkeypatch.setattr(runtime, "emit_units", counted_units)
    monkeypatch.setattr(build.Compiler, "run", counted_run)
    k2 = sd.compile(m, kernels=("rnea",))
    q = np.linspace(-0.5, 0.5, 5)
    np.testing.assert_array_equal(k2.rnea(q, q, q), k.rnea(q, q, q))
    assert k2.built == {"rnea-single": False} and calls == {"units": 0, "cc": 0}
