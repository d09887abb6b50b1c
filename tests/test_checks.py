"""Argument conversion and checks shared by every public numerical function (sparsedyn._checks):
float64 everywhere, object arrays of numbers checked, foreign array types converted or refused."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import _checks


@pytest.fixture(scope="module")
def floating():
    return sd.random_tree(5, joint_types="all", seed=1, floating_base=True)


def state(model, seed=0):
    rng = np.random.default_rng(seed)
    return model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


def test_float32_and_integer_input_compute_in_float64(floating):
    q, v, a = state(floating)
    q32, v32 = q.astype(np.float32), v.astype(np.float32)
    ref = sd.rnea(floating, q32.astype(np.float64), v32.astype(np.float64), a)
    out = sd.rnea(floating, q32, v32, a)
    assert out.dtype == np.float64 and np.array_equal(out, ref)        # the float32 values, in float64
    assert np.array_equal(sd.aba(floating, q32, v32, a), sd.aba(floating, q32.astype(float), v32.astype(float), a))
    assert _checks.numeric("x", np.arange(3, dtype=np.int32), "(3,)").dtype == np.float64


def test_object_arrays_of_numbers_are_checked(floating):
    q, v, a = state(floating)
    bad = q.astype(object)
    bad[0] = float("nan")
    with pytest.raises(ValueError, match="q: contains NaN"):
        sd.rnea(floating, bad, v, a)
    with pytest.raises(ValueError, match=r"q: the quaternion of joint .* not of unit norm.*normalize\(model, q\)$"):
        sd.rnea(floating, (2 * q).astype(object), v, a)
    # a function's own prefix is not part of the argument the hint names
    with pytest.raises(ValueError, match=r"^rollout: q0: the quaternion .*sparsedyn\.normalize\(model, q0\)$"):
        _checks.configuration(floating, 2 * q, "rollout: q0")
    v_bad = v.astype(object)
    v_bad[1] = np.inf
    with pytest.raises(ValueError, match="v: contains NaN or infinite"):
        sd.aba(floating, q, v_bad, a)
    out = sd.rnea(floating, q.astype(object), v.astype(object), a.astype(object))
    assert out.dtype == object                                          # the tracer's backend stays object


@pytest.mark.filterwarnings("ignore:the matrix subclass:PendingDeprecationWarning")
def test_matrix_complex_and_strings(floating):
    q, v, a = state(floating)
    assert np.array_equal(sd.rnea(floating, np.matrix(q), v, a), sd.rnea(floating, q[None], v, a))
    with pytest.raises(TypeError, match="q: expected a numeric array of real numbers.*complex"):
        sd.rnea(floating, q.astype(complex), v, a)
    with pytest.raises(TypeError, match="a: expected a numeric array of real numbers.*complex"):
        sd.rnea(floating, q, v, a.astype(object) * 1j)
    with pytest.raises(TypeError, match="v: expected a numeric array of real numbers.*bool"):
        sd.rnea(floating, q, np.ones(floating.nv, bool), a)
    with pytest.raises(TypeError, match="tau: expected a numeric array"):
        sd.aba(floating, q, v, ["x"] * floating.nv)


def test_gravity_and_external_forces_are_checked_alike(floating):
    q, v, a = state(floating)
    with pytest.raises(ValueError, match="gravity: contains NaN"):
        sd.rnea(floating, q, v, a, gravity=[0, 0, np.nan])
    with pytest.raises(ValueError, match="gravity: contains NaN"):
        sd.aba(floating, q, v, a, gravity=[0, np.inf, 0])
    with pytest.raises(TypeError, match="gravity: expected a numeric array of real numbers"):
        sd.rnea(floating, q, v, a, gravity=np.array([0, 0, -9.81j]))
    f = np.zeros((floating.nbodies, 6), np.float32)
    assert np.array_equal(sd.rnea(floating, q, v, a, f), sd.rnea(floating, q, v, a))


def _kernel_cases():
    from sparsedyn.kernels import REGISTRY
    return [(name, arg) for name, k in REGISTRY.items() for arg in list(k.inputs) + list(k.optional)]


@pytest.mark.parametrize("name,arg", _kernel_cases(), ids=lambda x: str(x))
def test_a_ragged_list_is_refused_naming_the_argument_in_every_kernel(name, arg):
    """Generated from the kernel declarations: every array argument of every registered kernel, given
    a ragged nested list (as in issue 24, ``q = [[0.0], [0.0, 1.0], 0.0]``), raises the library's
    ValueError naming that argument, never NumPy's own message."""
    import kernel_args
    from sparsedyn.kernels import REGISTRY
    model = sd.random_tree(3, branching=1.5, joint_types="all", seed=4, floating_base=True)
    k = REGISTRY[name]
    static = kernel_args.static_choices(model, name)[0]
    args = kernel_args.arguments(model, name, np.random.default_rng(0), optional=True, static=static)
    args[arg] = [[0.0], [0.0, 1.0], 0.0]
    with pytest.raises(ValueError, match=rf"^{arg}: expected a numeric array of shape .*ragged nested sequence"):
        k.fn(model, **args, **static)


# Public functions of a model and a state that are not registered kernels (those are tested in
# tests/test_kernels.py): each one's call with the model second, as in ``sd.rnea(q, model, v, a)``.
_MODEL_SECOND = {
    "sparse_inverse_dynamics": lambda w, m, q, v: sd.sparse_inverse_dynamics(w, m, v, v),
    "sparse_forward_dynamics": lambda w, m, q, v: sd.sparse_forward_dynamics(w, m, v, v),
    "sparse_hybrid_dynamics": lambda w, m, q, v: sd.sparse_hybrid_dynamics(w, m, v, v, v, [0]),
    "identify": lambda w, m, q, v: sd.identify(w, m, v[None], v[None], v[None]),
    "force_torque_regressor": lambda w, m, q, v: sd.force_torque_regressor(w, m, v, v, "ft"),
    "base_parameters": lambda w, m, q, v: sd.base_parameters(w, m),
    "imu_base_state": lambda w, m, q, v: sd.imu_base_state(w, m, "imu", v, v, [1, 0, 0, 0], v[:3], v[:3], v[:3]),
    "contact_step": lambda w, m, q, v: sd.contact_step(w, m, v, v, [], 1e-3),
    "contact_step_derivatives": lambda w, m, q, v: sd.contact_step_derivatives(w, m, v, v, [], 1e-3),
    "rollout": lambda w, m, q, v: sd.rollout(w, m, v, v, [], 1e-3, 1),
    "reduce_model": lambda w, m, q, v: sd.reduce_model(w, m),
    "append_model": lambda w, m, q, v: sd.append_model(w, m),
    "compile": lambda w, m, q, v: sd.compile(w, m),
    "mjcf_measurements": lambda w, m, q, v: sd.mjcf_measurements(w, m, v),
}


@pytest.mark.parametrize("name", sorted(_MODEL_SECOND))
def test_a_model_that_is_not_first_is_a_type_error_beyond_the_kernels(name, floating):
    q, v, _ = state(floating)
    with pytest.raises(TypeError, match=rf"^{name}: the model comes first, {name}\(model, .*got ndarray as the "
                                        rf"first argument"):
        _MODEL_SECOND[name](q, floating, q, v)
    for wrong in (None, "model", [1.0, 2.0], 1.0):
        with pytest.raises(TypeError, match=rf"^{name}: the model comes first.*got {type(wrong).__name__} as"):
            _MODEL_SECOND[name](wrong, floating, q, v)


@pytest.mark.parametrize("name", ["to_urdf", "subtree_masses"])
def test_a_one_argument_model_function_given_no_model_is_a_type_error(name, floating):
    q, _, _ = state(floating)
    for wrong in (q, None, "model"):
        with pytest.raises(TypeError, match=rf"^{name}: the model comes first, {name}\(model\); got "
                                            rf"{type(wrong).__name__} as the first argument"):
            getattr(sd, name)(wrong)


def test_one_state_checks_agree_with_the_batch_checks(floating):
    """A single float64 state takes a shorter road (Python's floats): the same states pass and fail as
    in a batch of one, the sum of huge finite coordinates (which overflows) included."""
    q = np.array(floating.neutral(), float)
    huge = q.copy()
    huge[:3] = [1e308, 1e308, -1e308]                 # finite; their sum overflows
    off = q.copy()
    off[3:7] = [0.0, 0.0, 0.0, 1.0 + 2e-5]            # |q|^2 - 1 = 4e-5 > QUAT_TOL
    near = q.copy()
    near[3:7] = [0.0, 0.0, 0.0, 1.0 + 2e-6]           # 4e-6 <= QUAT_TOL
    for x, ok in ((q, True), (huge, True), (near, True), (off, False)):
        for state in (x, x[None], x.tolist(), tuple(x.tolist())):
            if ok:
                got = _checks.configuration(floating, state)
                assert got is state if isinstance(state, np.ndarray) else np.array_equal(got, x)
            else:
                with pytest.raises(ValueError, match="not of unit norm"):
                    _checks.configuration(floating, state)
    for bad in (np.nan, np.inf, -np.inf):
        for k in (0, 4, floating.nq - 1):
            x = q.copy()
            x[k] = bad
            with pytest.raises(ValueError, match="NaN or infinite"):
                _checks.configuration(floating, x)
            with pytest.raises(ValueError, match="NaN or infinite"):
                _checks.velocity(floating, np.where(np.arange(floating.nv) == min(k, floating.nv - 1), bad, 0.0))
    inf_pair = np.zeros(floating.nv)
    inf_pair[:2] = [np.inf, -np.inf]                  # their sum is NaN, not infinite: refused all the same
    with pytest.raises(ValueError, match="NaN or infinite"):
        _checks.velocity(floating, inf_pair)


def test_flat_floats_makes_arrays_of_flat_lists_of_numbers_only():
    """Flat lists and tuples of Python and NumPy reals become float64 arrays of their values; a nested list,
    a list holding a string or a bool, an array and None are handed back as they are (the roads' checks
    name what is wrong with them)."""
    x = np.array([0.5, -2.0, 3.0])
    got = _checks.flat_floats(x.tolist(), tuple(x), [1, 2, np.float32(0.5), np.int64(4)])
    for g, want in zip(got, (x, x, [1.0, 2.0, 0.5, 4.0])):
        assert type(g) is np.ndarray and g.dtype == np.float64 and g.tolist() == list(want)
    others = ([[0.5, 1.0]], [0.5, "1.0"], [True, 0.5], x, None)
    assert all(g is o for g, o in zip(_checks.flat_floats(*others), others))
