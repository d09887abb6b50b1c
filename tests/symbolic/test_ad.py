"""Forward and reverse mode on the IR: hand derivations, forward = reverse, batched evaluation."""

import math

import numpy as np
import pytest

import sparsedyn as sd
from conftest import random_state, rel_err
from sparsedyn.symbolic.ad import choose_mode, inline, jacobian_program
from sparsedyn.symbolic.ir import Graph
from sparsedyn.symbolic.trace import trace_function, trace_kernel


def f_hand(x, y):
    """f(x, y) = [sin(x0) y0 + x1 / y1, sqrt(x0^2 + y1), cos(x1) - y0 * y0]."""
    return np.array([np.sin(x[0]) * y[0] + x[1] / y[1], np.sqrt(x[0] * x[0] + y[1]), np.cos(x[1]) - y[0] * y[0]])


def jac_hand(x, y):
    """Derived by hand: (df/dx (3, 2), df/dy (3, 2))."""
    r = math.sqrt(x[0] ** 2 + y[1])
    dx = np.array([[math.cos(x[0]) * y[0], 1 / y[1]], [x[0] / r, 0.0], [0.0, -math.sin(x[1])]])
    dy = np.array([[math.sin(x[0]), -x[1] / y[1] ** 2], [0.0, 0.5 / r], [-2 * y[0], 0.0]])
    return dx, dy


def hand_program():
    import sparsedyn.backend as bk

    def fn(x, y):
        return np.array([bk.sin(x[:1])[0] * y[0] + x[1] / y[1], bk.sqrt(np.array([x[0] * x[0] + y[1]]))[0],
                         bk.cos(x[1:2])[0] - y[0] * y[0]], dtype=object)

    return trace_function(fn, [("x", (2,)), ("y", (2,))], [("f", (3,))])


@pytest.mark.parametrize("mode", ["forward", "reverse"])
def test_hand_derivation(mode):
    P = hand_program()
    J = jacobian_program(P, [0, 1], mode=mode, primal=True)
    assert J.ad_mode == mode and J.output_shapes == [(3,), (3, 2), (3, 2)]
    x, y = np.array([0.3, -1.2]), np.array([0.7, 2.5])
    f, dx, dy = J.evaluate([x, y])
    hx, hy = jac_hand(x, y)
    assert rel_err(f, f_hand(x, y)) < 1e-15
    assert rel_err(dx, hx) < 1e-15 and rel_err(dy, hy) < 1e-15
    # Structural zeros of the Jacobian are exact constants of the program, not computed values.
    consts = [(k, r) for k, row in enumerate(J.outputs) for r, (t, _) in enumerate(row) if t == "const"]
    assert (1, 3) in consts and (1, 4) in consts and (2, 2) in consts and (2, 5) in consts


def test_flops_of_a_hand_countable_derivative():
    g = Graph()
    x, y = g.input(0, 0), g.input(0, 1)
    P = g.program([np.array([x * y, x.sin()], dtype=object)], [(2,)])
    for mode in ("forward", "reverse"):
        J = jacobian_program(P, [0], mode=mode)
        # d(xy) = [y, x] (no operation), d sin x = [cos x, 0] (one cos).
        assert J.flops()["total"] == 1 and J.flops()["cos"] == 1
        assert J.evaluate([np.array([2.0, 3.0])])[0].tolist() == [[3.0, 2.0], [math.cos(2.0), 0.0]]


def test_substitution_and_inline():
    P = hand_program()
    J = jacobian_program(P, [0], at={1: [0.7, 2.5]})
    assert J.input_shapes == [(2,)]                       # the substituted input is gone
    x = np.array([0.3, -1.2])
    assert rel_err(J.evaluate([x])[0], jac_hand(x, np.array([0.7, 2.5]))[0]) < 1e-15
    g = Graph()
    xs = g.inputs(0, (2,))
    out = inline(P, [xs, np.array([0.7, 2.5])])[0]
    Q = g.program([out], [(2,)])
    assert rel_err(Q.evaluate([x])[0], f_hand(x, np.array([0.7, 2.5]))) < 1e-15


def test_mode_choice_follows_the_jacobian_shape():
    P = hand_program()                      # 3 outputs
    assert choose_mode(P, [0]) == "forward"        # 2 columns
    assert choose_mode(P, [0, 1]) == "reverse"     # 4 columns
    with pytest.raises(ValueError, match="wrt"):
        jacobian_program(P, [2])
    with pytest.raises(ValueError, match="mode"):
        jacobian_program(P, [0], mode="sideways")


SMALL = {"chain": dict(nbodies=6, joint_types="all", seed=11),
         "floating": dict(nbodies=5, branching=2.0, joint_types="all", seed=12, floating_base=True)}


@pytest.mark.parametrize("name", ["rnea", "aba", "crba", "frame_jacobian"])
@pytest.mark.parametrize("which", sorted(SMALL))
def test_forward_equals_reverse(which, name):
    tree = sd.random_tree(**SMALL[which])
    k = getattr(sd, name).__kernel__
    static = {"frame": tree.body_names[-1], "reference": "world"} if name == "frame_jacobian" else {}
    P = trace_kernel(k, tree, static)
    wrt = list(range(len(P.input_shapes)))
    Jf = jacobian_program(P, wrt, mode="forward")
    Jr = jacobian_program(P, wrt, mode="reverse")
    rng = np.random.default_rng(5)
    q, v, a = random_state(tree, rng)
    args = [q, v, a][:len(P.input_shapes)]
    for F, R in zip(Jf.evaluate(args), Jr.evaluate(args)):
        # Same partials, chain-rule sums in another order: agreement to rounding.
        assert rel_err(F, R) < 1e-11


def test_batched_evaluate_equals_one_state_at_a_time(rng):
    model = sd.random_tree(6, branching=1.5, joint_types="all", seed=7, floating_base=True)
    P = trace_kernel(sd.rnea.__kernel__, model, optional=("f_ext",))
    J = jacobian_program(P, [0, 1])
    q, v, a = random_state(model, rng, (4, 3))
    f = rng.normal(size=(3, model.nbodies, 6))                 # broadcast batch axes
    batched = J.evaluate([q, v, a, f])
    assert batched[0].shape == (4, 3, model.nv, model.nq)
    for i in range(4):
        for j in range(3):
            one = J.evaluate([q[i, j], v[i, j], a[i, j], f[j]])
            for b, o in zip(batched, one):
                np.testing.assert_array_equal(b[i, j], o)
    tau = P.evaluate([q, v, a, f])[0]
    np.testing.assert_allclose(tau, sd.rnea(model, q, v, a, f), rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="input 1"):
        J.evaluate([q, v[..., :2], a, f])


def test_atan2_and_copysign_everywhere():
    """The nonlinear operations the configuration kernels use (atan2, copysign) are replayed,
    differentiated and bridged like the others: the derivative against the hand-derived one,
    CasADi and JAX against NumPy."""
    from sparsedyn.interop import casadi as sdc, jax as sdj
    from sparsedyn.symbolic.ad import jacobian_program
    from sparsedyn.symbolic.trace import trace_function

    def f(x):
        return np.array([x[0].atan2(x[1]), x[2].copysign(x[1]) * x[0]], dtype=object)

    prog = trace_function(f, [("x", (3,))], [("y", (2,))])
    x = np.array([0.3, -0.7, 1.5])
    (y,) = prog.evaluate([x])
    assert np.allclose(y, [np.arctan2(0.3, -0.7), np.copysign(1.5, -0.7) * 0.3], rtol=1e-15, atol=0)
    for mode in ("forward", "reverse"):
        (J,) = jacobian_program(prog, [0], mode=mode).evaluate([x])
        r2 = 0.3 ** 2 + 0.7 ** 2
        # d atan2(a, b) = (b, -a) / (a^2 + b^2); d (copysign(c, b) a) = (copysign(c, b), 0, sign(c b) a)
        want = np.array([[-0.7 / r2, -0.3 / r2, 0.0], [-1.5, 0.0, -0.3]])
        assert np.allclose(J.reshape(2, 3), want, rtol=1e-14, atol=1e-15), mode
    F = sdc.program_function(prog)
    assert np.allclose(np.array(F(x)).ravel(), y, rtol=1e-15, atol=0)
    assert np.allclose(np.asarray(sdj.program_function(prog, style="scalar")(x)[0]), y, rtol=1e-6)
