"""Every public registered function, called the way users call it, on both roads.

Generated from the kernel registry (``sparsedyn.kernels.REGISTRY``): each function is called as
``sd.f(model, ...)`` on the default (native) road and on the NumPy road (the reference), for one
state and a batch of 3, with its optional arrays and without, and the roads agree to the rounding
bound of the kernels (a chain of ``nv + nb`` steps times ``cond(H)``, as in
tests/compile/test_native.py).  Beside the arrays:

* a sequence static argument (a contact set) given as a list runs the compiled kernel of the tuple
  of the same items and gives its results bit for bit;
* a configuration that a function declares it takes unnormalized (``normalize``) gets quaternions
  off the unit sphere, and every other configuration input refuses them on both roads with the same
  error.

The model is the floating tree of every joint type (of those its layer takes) whose kernels
tests/compile builds (one build cache for the test run): the native road costs no extra build.
"""

import functools

import numpy as np
import pytest

import sparsedyn as sd
from conftest import quaternion_blocks, random_trees, rel_err, rounding_bound
from kernel_args import arguments, static_choices
from sparsedyn.codegen.trace import variant
from sparsedyn.kernels import REGISTRY

NAMES = sorted(REGISTRY)


@functools.lru_cache(maxsize=None)
def model_for(name):
    """The floating random tree (index 2) (one model per kernel, cached)."""
    return random_trees()[2]


def _as_tuple(x):
    return x if isinstance(x, tuple) else (x,)


def _bound(model, args):
    q = args.get("q", args.get("q0"))
    if q is not None:
        q = REGISTRY["normalize"].fn(model, q)          # normalize's input is off the unit sphere
    H = REGISTRY["crba"].fn(model, q) if q is not None else next(
        np.asarray(x) for x in args.values() if np.ndim(x) >= 2 and np.shape(x)[-1] == np.shape(x)[-2])
    kappa = float(np.max(np.linalg.cond(H))) if H.shape[-1] else 1.0
    return rounding_bound(model.nv + model.nbodies, kappa)


def _roads(name, model, args, static):
    """``(native, numpy)`` results of the plain call ``sd.name(model, **args, **static)``."""
    public = getattr(sd, name)
    with sd.use_backend("native", deterministic=True):
        native = public(model, **args, **static)
    with sd.use_backend("numpy"):
        reference = public(model, **args, **static)
    return _as_tuple(native), _as_tuple(reference)


def _unnormalized(model, q, rng):
    """``q`` with every quaternion block scaled off the unit sphere (factors in [0.5, 2], not 1)."""
    q = np.array(q, float)
    for sl in quaternion_blocks(model):
        q[..., sl] *= rng.choice([0.5, 0.9, 1.01, 2.0], size=q.shape[:-1] + (1,))
    return q


@pytest.mark.parametrize("name", NAMES)
def test_both_roads_agree(name, rng):
    """The native road equals the NumPy road to rounding, one state and a batch, with and without
    the optional arrays, and the native road ran the compiled kernel of these arguments."""
    k, model = REGISTRY[name], model_for(name)
    compiled = sd.compile(model)            # the compiled model plain calls use
    for static in static_choices(model, name):
        for batch in ((), (3,)):
            for optional in ((False, True) if k.optional else (False,)):
                args = arguments(model, name, rng, batch=batch, optional=optional, static=static)
                for n in k.unnormalized:
                    args[n] = _unnormalized(model, args[n], rng)
                native, reference = _roads(name, model, args, static)
                assert len(native) == len(reference)
                for g, r in zip(native, reference):
                    assert isinstance(g, np.ndarray) and g.dtype == np.float64 and g.shape == r.shape, name
                    assert rel_err(g, r) < _bound(model, args), (name, static, batch, optional)
                given = tuple(n for n in k.optional if optional)
                assert variant(name, static, given).name in compiled.kernels, (name, static, given)


@pytest.mark.parametrize("name", [n for n in NAMES if REGISTRY[n].sequences])
def test_a_list_runs_the_kernel_of_the_tuple(name, rng):
    """A sequence static argument given as a list: the tuple's compiled kernel and its results."""
    k, model = REGISTRY[name], model_for(name)
    compiled = sd.compile(model)
    public = getattr(sd, name)
    for static in static_choices(model, name):
        as_lists = {n: list(x) if n in k.sequences else x for n, x in static.items()}
        assert any(isinstance(x, list) for x in as_lists.values())
        for batch in ((), (3,)):
            args = arguments(model, name, rng, batch=batch, static=static)
            with sd.use_backend("native", deterministic=True):
                by_tuple = _as_tuple(public(model, **args, **static))
                built = set(compiled.kernels)
                by_list = _as_tuple(public(model, **args, **as_lists))
            assert set(compiled.kernels) == built, name                # nothing of its own
            assert all(np.array_equal(a, b) for a, b in zip(by_list, by_tuple)), name
            with sd.use_backend("numpy"):
                reference = _as_tuple(public(model, **args, **as_lists))
            assert all(rel_err(a, b) < _bound(model, args) for a, b in zip(by_list, reference)), name


@pytest.mark.parametrize("name", [n for n in NAMES if any(len(s) == 1 for s in REGISTRY[n].inputs.values())])
def test_one_state_as_plain_lists_runs_the_compiled_kernel(name, rng, monkeypatch):
    """One state whose vectors are given as plain lists of Python floats (and as ``list(x)``'s NumPy floats):
    the results of the same state as arrays, bit for bit, by the same road (where the arrays took the
    compiled kernel's fast path, so do the lists: no general path's call)."""
    from sparsedyn.codegen.compiled_model import CompiledModel
    model = model_for(name)
    compiled, public, real = sd.compile(model), getattr(sd, name), CompiledModel._call
    static = static_choices(model, name)[0]
    args = arguments(model, name, rng, static=static)
    flat = {n: x for n, x in args.items() if np.ndim(x) == 1}
    assert flat, name
    calls = []

    def counted(self, *a, **kw):
        calls.append(a[0])
        return real(self, *a, **kw)
    with sd.use_backend("native", deterministic=True):
        public(model, **args, **static)                          # (its fast path installed)
        monkeypatch.setattr(CompiledModel, "_call", counted)
        want = _as_tuple(public(model, **args, **static))
        by_arrays = len(calls)
        for as_list in (lambda x: np.asarray(x).tolist(), list):
            del calls[:]
            got = _as_tuple(public(model, **{**args, **{n: as_list(x) for n, x in flat.items()}}, **static))
            assert len(calls) == by_arrays, name
            assert all(np.array_equal(a, b) for a, b in zip(got, want)), name
    assert compiled is sd.compile(model)


def test_plain_lists_that_are_not_one_state_of_numbers_keep_their_errors():
    """On the native road, a list of bools, of the wrong length, holding a string or NaN gets the error
    naming the argument (the compiled kernel converts flat lists of floats and ints alone); ints are
    numbers: the call of their floats' values."""
    model = model_for("rnea")
    q, z = model.random_configuration(np.random.default_rng(1)).tolist(), [0.0] * model.nv
    with sd.use_backend("native", deterministic=True):
        with pytest.raises(TypeError, match="^q: expected a numeric array of real numbers"):
            sd.rnea(model, [True] * model.nq, z, z)
        with pytest.raises(ValueError, match=r"^q: expected shape \(\.\.\., %d\)" % model.nq):
            sd.rnea(model, q[:-1], z, z)
        with pytest.raises(TypeError, match="^v: expected a numeric array of real numbers"):
            sd.rnea(model, q, ["1"] + z[1:], z)
        with pytest.raises(ValueError, match="^a: contains NaN or infinite values"):
            sd.rnea(model, q, z, [float("nan")] + z[1:])
        ints = list(range(model.nv))
        assert np.array_equal(sd.rnea(model, q, ints, z), sd.rnea(model, np.array(q), np.arange(model.nv, dtype=float),
                                                                    np.zeros(model.nv)))


@pytest.mark.parametrize("name", NAMES)
def test_state_arrays_by_keyword_take_the_direct_road(name, rng, monkeypatch):
    """One state's arrays given by keyword (``sd.rnea(model, q=q, v=v, a=a)``), or the first by position
    and the rest by keyword: the results of the call by position bit for bit, by the same road (where
    the call by position went straight to the native callable, so does this one: no dispatch)."""
    from sparsedyn.kernels import dispatch
    k, model = REGISTRY[name], model_for(name)
    sd.compile(model)
    public, real = getattr(sd, name), dispatch._dispatch
    static = static_choices(model, name)[0]
    args = arguments(model, name, rng, static=static)
    inputs = [args[n] for n in k.inputs]
    calls = []

    def counted(*a, **kw):
        calls.append(a[0].name)
        return real(*a, **kw)
    with sd.use_backend("native", deterministic=True):
        public(model, *inputs, **static)                         # (its native callable ready)
        monkeypatch.setattr(dispatch, "_dispatch", counted)
        want = _as_tuple(public(model, *inputs, **static))
        by_position = len(calls)
        for first in (0, 1):
            del calls[:]
            given = {n: args[n] for n in list(k.inputs)[first:]}
            got = _as_tuple(public(model, *inputs[:first], **given, **static))
            assert len(calls) == by_position, name
            assert all(np.array_equal(a, b) for a, b in zip(got, want)), name


CONFIGURATION_INPUTS = [n for n in NAMES for a, s in REGISTRY[n].inputs.items()
                        if a.startswith("q") and s == ("nq",) and a not in REGISTRY[n].unnormalized]


@pytest.mark.parametrize("name", sorted(set(CONFIGURATION_INPUTS)))
def test_a_quaternion_off_the_unit_sphere_is_refused_on_both_roads(name, rng):
    """A function that takes unit quaternions refuses others, on both roads, naming the argument."""
    k, model = REGISTRY[name], model_for(name)
    static = static_choices(model, name)[0]
    args = arguments(model, name, rng, static=static)
    target = next(a for a, s in k.inputs.items() if a.startswith("q") and s == ("nq",) and a not in k.unnormalized)
    args[target] = _unnormalized(model, args[target], rng)
    public = getattr(sd, name)
    for backend in ("native", "numpy"):
        with sd.use_backend(backend, deterministic=True), \
                pytest.raises(ValueError, match=f"^{target}: the quaternion of joint .* is not of unit norm"):
            public(model, **args, **static)
