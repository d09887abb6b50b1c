"""The native front of the public functions (``front`` of sparsedyn.codegen.fastcall, set by
sparsedyn.kernels.dispatch.set_front): a plain call that the function's body would hand straight to
the model's native callable answers from C with no Python frame; every other call runs the body.

A call from Python code reaches the front on Python 3.10 and from 3.12 on; CPython 3.11 pushes a
Python function's frame itself, so there only calls from C (``functools.partial``, ``map``) reach it.
The tests call through ``functools.partial`` so that the front is exercised on every version, and
check with a profiler whether the function's body ran.  Oracles: Pinocchio for RNEA and CRBA (to
the rounding bound), the NumPy reference for contact dynamics (to the solve bound).
"""

import functools
import sys

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from conftest import rel_err, rounding_bound, solve_bound
from erd import load_pair
from sdcompile_helpers import compile_cache  # noqa: F401  (fixture)
from sparsedyn.interop import pinocchio as ip
from sparsedyn.kernels import dispatch

pytestmark = pytest.mark.usefixtures("compile_cache")

FEET = ("FL_FOOT", "FR_FOOT", "HL_FOOT", "HR_FOOT")


@pytest.fixture(scope="module")
def solo():
    model, pm = load_pair("solo12", True)
    rng = np.random.default_rng(3)
    q = model.random_configuration(rng)
    v, a = rng.normal(size=(2, model.nv))
    with sd.use_backend("native", deterministic=True):
        sd.rnea(model, q, v, a)             # builds the model's native code, loads the extension
        sd.crba(model, q)
        sd.contact_dynamics(model, q, v, a, tuple(sd.Contact(f, "3d") for f in FEET))
    if dispatch._front is None:
        pytest.fail("the fast-call extension did not load: no front to test (Python headers missing?)")
    return model, pm, q, v, a


def from_c(f, *args, **kwargs):
    """``f(*args, **kwargs)`` called from C (functools.partial), and whether ``f``'s body ran."""
    ran = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is f.__code__:
            ran.append(True)
    sys.setprofile(profile)
    try:
        res = functools.partial(f)(*args, **kwargs)
    finally:
        sys.setprofile(None)
    return res, bool(ran)


@pytest.fixture
def native():
    with sd.use_backend("native", deterministic=True):
        yield


def test_the_front_answers_rnea_and_crba_without_the_body(solo, native):
    model, pm, q, v, a = solo
    pd = pm.createData()
    qp, vp, ap = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.v_to_pinocchio(model, a)
    tau, ran = from_c(sd.rnea, model, q, v, a)
    assert not ran
    assert rel_err(tau, ip.tau_from_pinocchio(model, pin.rnea(pm, pd, qp, vp, ap))) <= rounding_bound(model.nv)
    assert np.array_equal(tau, sd.rnea(model, q, v, a))      # the body's road: the same native kernel
    H, ran = from_c(sd.crba, model, q)
    assert not ran
    Hp = pin.crba(pm, pd, qp)
    Hp = np.triu(Hp) + np.triu(Hp, 1).T
    Hp = ip.v_from_pinocchio(model, ip.v_from_pinocchio(model, Hp).T).T      # both axes in our dof order
    assert rel_err(H, Hp) <= rounding_bound(model.nv)


def test_contact_sets_as_tuples_go_native_and_lists_take_the_body(solo, native):
    model, _, q, v, tau = solo
    contacts = [sd.Contact(f, "3d") for f in FEET]
    res, ran = from_c(sd.contact_dynamics, model, q, v, tau, tuple(contacts))
    assert not ran and isinstance(res, sd.ContactDynamics)
    listed, ran = from_c(sd.contact_dynamics, model, q, v, tau, contacts)
    assert ran                                   # the body takes a list as the tuple of its items
    by_name, ran = from_c(sd.contact_dynamics, model, q, v, tau, contacts=tuple(contacts))
    assert not ran                               # a static argument by keyword fits
    for other in (listed, by_name):
        assert isinstance(other, sd.ContactDynamics)
        assert all(np.array_equal(x, y) for x, y in zip(res, other))
    with sd.use_backend("numpy"):
        ref = sd.contact_dynamics(model, q, v, tau, contacts)
    H = sd.crba(model, q)
    assert rel_err(res.a, ref.a) <= solve_bound(H, ref.a, c=16.0)


def test_a_batch_goes_to_the_native_callable_too(solo, native):
    model, pm, q, v, a = solo
    res, ran = from_c(sd.rnea, model, np.stack([q, q]), v, a)    # as the body does: the callable runs batches
    assert not ran and res.shape == (2, model.nv)
    assert rel_err(res[1], sd.rnea(model, q, v, a)) <= rounding_bound(model.nv)


@pytest.mark.parametrize("call", ["f_ext", "model by name", "unknown keyword"])
def test_calls_that_do_not_fit_run_the_body(solo, native, call):
    model, pm, q, v, a = solo
    if call == "f_ext":
        f_ext = np.zeros((model.nbodies, 6))
        res, ran = from_c(sd.rnea, model, q, v, a, f_ext)
        assert ran and rel_err(res, sd.rnea(model, q, v, a)) <= rounding_bound(model.nv)
    elif call == "model by name":
        res, ran = from_c(sd.rnea, model=model, q=q, v=v, a=a)
        assert ran and np.array_equal(res, sd.rnea(model, q, v, a))
    else:
        with pytest.raises(TypeError, match=r"rnea\(\) got an unexpected keyword argument 'b'"):
            from_c(sd.rnea, model, q, v, a, b=1)


def test_bad_input_gets_the_bodys_error(solo, native):
    model, _, q, v, a = solo
    bad = v.copy()
    bad[2] = np.nan
    with pytest.raises(ValueError, match="v.*NaN"):
        from_c(sd.rnea, model, q, bad, a)
    with pytest.raises(TypeError, match="the model comes first"):
        from_c(sd.rnea, q, q, v, a)


def test_the_numpy_backend_runs_the_body(solo):
    model, pm, q, v, a = solo
    with sd.use_backend("numpy"):
        res, ran = from_c(sd.rnea, model, q, v, a)
    assert ran
    pd = pm.createData()
    ref = pin.rnea(pm, pd, ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.v_to_pinocchio(model, a))
    assert rel_err(res, ip.tau_from_pinocchio(model, ref)) <= rounding_bound(model.nv)


def test_taking_the_fronts_away_and_back(solo, native):
    model, _, q, v, a = solo
    install = dispatch._front
    try:
        dispatch.set_front(None)
        assert "__sparsedyn_front__" not in vars(sd.rnea)
        res, ran = from_c(sd.rnea, model, q, v, a)
        assert ran
    finally:
        dispatch.set_front(install)
    again, ran = from_c(sd.rnea, model, q, v, a)
    assert not ran and np.array_equal(res, again)


def test_a_call_from_python_reaches_the_front_except_on_3_11(solo, native):
    model, _, q, v, a = solo
    ran = []

    def profile(frame, event, arg):
        if event == "call" and frame.f_code is sd.rnea.__code__:
            ran.append(True)
    sys.setprofile(profile)
    try:
        tau = sd.rnea(model, q, v, a)
    finally:
        sys.setprofile(None)
    # CPython 3.11 pushes a Python function's frame itself; 3.10 and 3.12 on call its vectorcall
    assert bool(ran) == (sys.version_info[:2] == (3, 11))
    assert np.array_equal(tau, from_c(sd.rnea, model, q, v, a)[0])
