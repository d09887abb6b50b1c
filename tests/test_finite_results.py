"""Numbers that overflow are errors, not NaN: a public function that computes NaN or inf from finite
inputs raises NonFiniteResultError naming itself and the first bad state, on the native road (the
default: one state through the C fast path, a batch through the batch runtime), on the compiled
model's methods and on the NumPy road; a batch whose results cannot fit in memory is refused before
anything is allocated; zero states are an empty answer."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn._checks import BatchMemoryError, NonFiniteResultError

ROADS = ["native", "numpy"]


@pytest.fixture(params=ROADS)
def road(request):
    with sd.use_backend(request.param, deterministic=True):
        yield request.param


def calls(model, q, v):
    """The functions of the issue, each at ``(q, v)`` with zero accelerations / joint forces."""
    z = np.zeros(np.shape(v))
    return {"rnea": lambda: sd.rnea(model, q, v, z), "aba": lambda: sd.aba(model, q, v, z),
            "fd_crb": lambda: sd.fd_crb(model, q, v, z), "nonlinear_effects": lambda: sd.nonlinear_effects(model, q, v)}


@pytest.mark.parametrize("name", ["rnea", "aba", "fd_crb", "nonlinear_effects"])
def test_a_velocity_of_1e200_is_an_error_naming_the_function(road, name):
    """|v|^2 = 1e400 overflows in the Coriolis and centrifugal terms: finite inputs, no finite answer."""
    model = sd.builtin("chain7")
    q = np.zeros(model.nq)
    for v in (np.full(model.nv, 1e200), [1e200] * model.nv):            # an array and a plain list
        with pytest.raises(NonFiniteResultError, match=rf"^{name}: the result is not finite for finite inputs"):
            calls(model, q, v)[name]()
    # a batch: the first bad state is named
    V = np.ones((4, model.nv))
    V[2] = 1e200
    with pytest.raises(NonFiniteResultError, match=r"at batch index \(2,\) \(the first\)"):
        calls(model, np.zeros((4, model.nq)), V)[name]()
    # ordinary values still answer: tau = H a + C at a = 0 is C, the same on both roads
    v = np.linspace(-1, 1, model.nv)
    assert np.isfinite(calls(model, q, v)[name]()).all()


def test_compiled_methods_refuse_an_overflow_too():
    model = sd.builtin("chain7")
    k = sd.compile(model)
    q, a = np.zeros(model.nq), np.zeros(model.nv)
    with pytest.raises(NonFiniteResultError, match="^rnea: "):
        k.rnea(q, np.full(model.nv, 1e200), a)
    tau = k.rnea(q, np.ones(model.nv), a)
    assert np.allclose(tau, sd.nonlinear_effects(model, q, np.ones(model.nv)), rtol=1e-12, atol=1e-12)


def test_zero_states_are_an_empty_answer_on_both_roads(road):
    """A floating base has a quaternion, whose unit-norm check once took the maximum of nothing."""
    model = sd.random_tree(4, floating_base=True, seed=3)
    q, v = np.zeros((0, model.nq)), np.zeros((0, model.nv))
    assert sd.rnea(model, q, v, v).shape == (0, model.nv)
    assert sd.aba(model, q, v, v).shape == (0, model.nv)
    assert sd.crba(model, q).shape == (0, model.nv, model.nv)


def test_a_broadcast_batch_too_large_for_memory_is_refused_naming_its_size():
    """A broadcast view costs nothing, but 1e12 states of results cannot exist on any machine: refused
    before the outputs are allocated (the limit is the machine's memory, far below 56 TB)."""
    model = sd.builtin("chain7")
    k = sd.compile(model)
    q = np.broadcast_to(np.zeros(model.nq), (10 ** 12, model.nq))
    with pytest.raises(BatchMemoryError, match=r"rnea: a batch of 1000000000000 states needs 52154\.1 GiB"):
        k.rnea(q, q, q)
    with sd.use_backend("numpy"), pytest.raises(BatchMemoryError, match=r"^rnea: a batch of 1000000000000 "):
        sd.rnea(model, q, q, q)
