"""The tracer and the IR: constant folding, CSE, DCE, and exactness of traced programs.

No C compiler is needed here: programs are interpreted with :meth:`Program.evaluate`.
"""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err, random_state
from sparsedyn.symbolic.ir import ADD, MUL, NEG, SUB, Graph
from sparsedyn.codegen.trace import DEFAULT_KERNELS, KERNELS, trace


def syms(n):
    g = Graph()
    return g, [g.input(0, k) for k in range(n)]


def test_structural_zeros_and_ones_fold():
    g, (x, y) = syms(2)
    assert x * 0 == 0 and 0 * x == 0 and x * 0.0 == 0
    for e in (x + 0, 0 + x, x - 0, x * 1, 1.0 * x, x / 1, +x):
        assert e.i == x.i
    assert 0 / x == 0
    assert (x - x) == 0
    assert (-(-x)).i == x.i
    assert (x * -1).i == (-x).i
    n0 = len(g.nodes)
    assert (x * y).i == (y * x).i and (x + y).i == (y + x).i      # commutative hash-consing
    assert len(g.nodes) == n0 + 2


def test_negations_are_absorbed():
    g, (x, y) = syms(2)
    s = x + (-y)
    assert g.nodes[s.i][0] == SUB
    m = (-x) * (-y)
    assert g.nodes[m.i][0] == MUL
    n = (-x) * y
    assert g.nodes[n.i][0] == NEG and g.nodes[g.nodes[n.i][1]][0] == MUL
    d = -(x - y)
    assert g.nodes[d.i] == (SUB, y.i, x.i)
    a = -x + -y
    assert g.nodes[a.i][0] == NEG and g.nodes[g.nodes[a.i][1]][0] == ADD


def test_numpy_object_arrays_and_numpy_scalars():
    g, xs = syms(3)
    v = np.array(xs, dtype=object)
    M = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 0.0], [0.0, 0.0, -1.0]])
    w = M @ v
    assert w[0].i == xs[0].i
    assert g.nodes[w[2].i][0] == NEG
    assert np.float64(0.0) * xs[0] == 0
    s = np.float64(2.0) * xs[1]
    assert g.nodes[s.i][0] == MUL


def test_dead_code_is_removed():
    g, (x, y) = syms(2)
    _ = x * y * x                          # dead
    out = x + y
    p = g.program([np.array([out])], [(2,)])
    assert [op for op, _, _ in p.nodes if op > 1] == [ADD]
    assert p.flops()["add"] == 1 and p.flops()["mul"] == 0


def test_values_are_never_branched_on():
    _, (x,) = syms(1)
    with pytest.raises(TypeError):
        bool(x)


def _reference(model, name, q, v, a, f_ext=None, g=None):
    if name.startswith("rnea"):
        return [sd.rnea(model, q, v, a, f_ext, g)]
    if name.startswith("nonlinear_effects"):
        return [sd.nonlinear_effects(model, q, v, f_ext, g)]
    if name.startswith("aba"):
        return [sd.aba(model, q, v, a, f_ext, g)]
    if name == "crba":
        return [sd.crba(model, q)]
    if name == "minv":
        return [sd.minv(model, q)]
    return list(sd.forward_kinematics(model, q))


@pytest.mark.parametrize("name", ["rnea", "rnea_ext", "nonlinear_effects", "nonlinear_effects_ext", "aba", "aba_ext",
                                  "crba", "minv", "forward_kinematics"])
def test_traced_program_equals_numpy(tree, name, rng):
    """The interpreted IR of every kernel reproduces the NumPy kernel (random trees, all joint types)."""
    p = trace(tree, name)
    q, v, a = random_state(tree, rng)
    f_ext, g = rng.normal(size=(tree.nbodies, 6)), np.array([0.3, -1.0, -9.0])
    args = {"q": q, "v": v, "a": a, "tau": a, "f_ext": f_ext, "gravity": g}
    outs = p.evaluate([args[n] for n in KERNELS[name].inputs])
    ext = name.endswith("_ext")
    ref = _reference(tree, name, q, v, a, f_ext if ext else None, g if ext else None)
    for o, r in zip(outs, ref):
        assert rel_err(o, r) < 1e-12


def test_flop_counts_by_kind(tree):
    for name in DEFAULT_KERNELS:
        f = trace(tree, name).flops()
        assert f["total"] == f["mul"] + f["add"] + f["div"] + f["sqrt"] + f["sin"] + f["cos"]
        assert f["sin"] == f["cos"]                       # every rotation angle needs both
    assert trace(tree, "rnea").flops()["div"] == 0       # RNEA never divides
    assert trace(tree, "aba").flops()["div"] > 0


def test_counting_rule_and_phases():
    """The one counting rule (Program.flops): operations on state-dependent values count; +-1, 0,
    signs, constant-only operations and dead code are free; a repeated value counts once; phases
    tag nodes where they are first created."""
    g, (x, y) = syms(2)
    with g.phase("p"):
        a = x * y                 # mul
        b = a + 1.5               # add
        c = 1.0 * b - 0           # free
        d = -1 * c / -1           # free (signs)
        e = 0 * x                 # structural zero: the int 0, free
        f = 2.0 * 3.0 * y         # the constant product is folded: one mul
        h = (f / x) - (0 - y)     # div, add (the negation is absorbed: f / x + y)
        x * x * x                 # dead code: never reaches an output
    with g.phase("q"):
        k = (y * x) + a           # y * x is x * y (created in phase p): one add here
    assert e == 0 and type(e) is int
    prog = g.program([np.array([d, h, k], dtype=object)], [(2,)])
    fp, fq = prog.flops("p"), prog.flops("q")
    assert (fp["mul"], fp["add"], fp["div"], fp["neg"]) == (2, 2, 1, 0)
    assert (fq["mul"], fq["add"], fq["div"]) == (0, 1, 0)
    assert prog.flops()["total"] == fp["total"] + fq["total"] == 6
    assert list(prog.phase_flops()) == ["p", "q"]
    assert prog.evaluate([[2.0, 3.0]])[0].tolist() == [7.5, 6.0 * 3.0 / 2.0 + 3.0, 12.0]
