"""Exact operation counts of the numeric phase (sparsedyn.sparse.flops), from the one IR.

The counting rule itself (sparsedyn.symbolic.ir.Program.flops) is tested in tests/symbolic/test_ir.py.
"""

from pathlib import Path

import sparsedyn as sd
from sparsedyn import sparse
from sparsedyn.sparse import flops
from sparsedyn.sparse.flops import total


def test_inverse_dynamics_count_of_a_two_link_chain_by_hand():
    """serial_chain(2, mass=3): joints about z, link length L = 0.3 along x, mass m = 3, centre of mass
    (h, 0, 0) with h = L/2, gravity g along -z; no external forces (fx = 0 are structural zeros).
    Body inertia (columns used below): I[:,2] = (0,0,Izz+m h^2, 0,m h,0), I[:,3] = m e_3,
    I[:,4] = (0,0,m h, 0,m,0), I[1,5] = I[5,1] = -m h, I[5,5] = m.  Counting rule of
    sparsedyn.sparse.flops: +-1, 0 and constant-only operations free; only what d depends on counts.

    transforms (2 mul, 0 add).  E_J of a joint about a frame axis is built from exact entries (spatial.
    axis_rotation): E[0,0] = E[1,1] = c, the off-diagonal ones +-s, E[2,2] = 1, the rest 0: no
    arithmetic (sin and cos are counted apart).  Xtree_1 = 1, so body 1's transform is used only in b,
    where it meets
    a_0 = (0,0,0, 0,0,g) on E[2,2] = 1 alone: dead.  Body 2: Xtree = xlt(L e_x), so
    -E rx has the entries -(s (-L)), -(c (-L)) (1 mul each) and -L (a constant).

    b (14 mul, 2 add).
      nu_1 = v_1 x* I v_1, v_1 = (0,0,qd1, 0,0,0): I v_1 needs only (I v_1)[4] = m h qd1 (1 mul; the
        moment (I v_1)[2] is parallel to omega and drops out); nu_1[3] = -qd1 (m h qd1) (1 mul).   2/0
      c_1 = X_1 a_0 = (0,0,0, 0,0,g): constant.                                                      0/0
      v_2 = X_2 v_1 + vJ_2: r x w = (0, -L qd1, 0) (1 mul), E (.) = (s L qd1, c L qd1, 0) (2 mul),
        omega_2 = qd1 + qd2 (1 add).                                                                 3/1
      c_2 = v_2 x vJ_2 = (0,0,0, vy qd2, -vx qd2, 0).                                                2/0
      I v_2: (I v_2)[3] = m vx (1 mul), (I v_2)[4] = m h w2 + m vy (2 mul, 1 add); (I v_2)[2] is again
        parallel to omega: dead.                                                                      3/1
      nu_2 = (0, 0, vx f4 - vy f3, -w2 f4, w2 f3, 0) with f = I v_2: 4 mul; its subtraction is
        counted in the solve phase, where z = -b first needs it (the IR keeps one sign of a
        difference, vy f3 - vx f4, and forms it where it is first used).                            4/0

    solve (17 mul, 18 add: 17 + the subtraction of nu_2[2]): substitution, row by row, z = -b_r - sum A_re x_e, x = z / (-1) (free);
    the terms of a row are taken in entry order (own -1 pivot, I_i, -1 of fx_i, the children's
    transform entries), and a constant only folds into a neighbouring constant.
      measurement rows: qdd_i = y, fx_i = 0                                                          0/0
      a_1 = (0,0,qdd1, 0,0,g)                                                                        0/0
      a_2 = X_2 a_1 + S qdd2 + c_2: [2] = qdd1 + qdd2 (1 add); [3] = (s L) qdd1 + c_2[3] (1 mul, 1 add);
        [4] = (c L) qdd1 + c_2[4] (1 mul, 1 add); [5] = g; [0], [1] = 0.                              2/3
      f_2 = I a_2 + nu_2: [2] = nu + (Izz + m h^2) a2 + m h a4 (2 mul, 2 add); [3] = nu + m a3
        (1 mul, 1 add); [4] = nu + m h a2 + m a4 (2 mul, 2 add); [1] = -m h g, [5] = m g constants.    5/5
      tau_2 = f_2[2]                                                                                 0/0
      f_1 = I a_1 + nu_1 + X_2^T f_2, X_2^T[k, j] = X_2[j, k]:
        [0] = -s f2[1]                                          (1 mul)                              1/0
        [1] = (-m h g) + c f2[1] + (-L) f2[5]: const, traced, const (1 mul, 2 add)                   1/2
        [2] = (Izz+m h^2) qdd1 + f2[2] + (s L) f2[3] + (c L) f2[4]  (3 mul, 3 add)                  3/3
        [3] = nu_1[3] + c f2[3] - s f2[4]                        (2 mul, 2 add)                      2/2
        [4] = m h qdd1 + s f2[3] + c f2[4]                       (3 mul, 2 add)                      3/2
        [5] = m g + f2[5]: constant                                                                  0/0
      tau_1 = f_1[2]                                                                                 0/0

    Total: 33 multiplications, 20 additions, 0 divisions (every pivot is +-1), sin and cos once.

    With m = 2, m h = 0.3 = L: the moment arm products m h qd1 (nu_1) and L qd1 (v_2) are the same
    value, computed once (common subexpression): 32 multiplications.
    """
    model = sd.serial_chain(2, mass=3.0)
    st = sparse.inverse_dynamics_problem(model).analyze()
    counts = flops.count_solve(st)
    strip = lambda c: {k: c[k] for k in ("mul", "add", "div", "sin", "cos")}  # noqa: E731
    assert list(counts) == ["transforms", "b", "solve"]           # triangular: no factor phase
    assert strip(counts["transforms"]) == {"mul": 2, "add": 0, "div": 0, "sin": 1, "cos": 1}
    assert strip(counts["b"]) == {"mul": 14, "add": 2, "div": 0, "sin": 0, "cos": 0}
    assert strip(counts["solve"]) == {"mul": 17, "add": 18, "div": 0, "sin": 0, "cos": 0}
    assert strip(total(counts)) == {"mul": 33, "add": 20, "div": 0, "sin": 1, "cos": 1}
    assert total(counts)["total"] == 33 + 20 + 2
    cse = total(flops.count_solve(sparse.inverse_dynamics_problem(sd.serial_chain(2, mass=2.0)).analyze()))
    assert (cse["mul"], cse["add"]) == (32, 20)


def test_chain_flop_counts_for_1_to_100_links():
    """The function behind the issue's table: ID by substitution, FD by sparse LU per ordering, on
    serial chains; counts grow linearly (equal increments per link once past the base)."""
    rows = flops.flop_table(ns=(1, 2, 3, 4, 100), orderings=("articulated", "colamd"))
    assert [r["n"] for r in rows] == [1, 2, 3, 4, 100]
    for r in rows:
        assert "factor" not in r["id"] and total(r["id"])["div"] == 0 and r["id_fill"] == 0
        for o in ("articulated", "colamd"):
            t = total(r["fd"][o])
            assert t["div"] >= r["n"] and r["fill"][o] >= 0
            assert t["mul"] <= r["fd_all"][o]["mul"]
    inc = [total(rows[k + 1]["id"])["mul"] - total(rows[k]["id"])["mul"] for k in (1, 2)]
    assert inc[0] == inc[1]                                        # O(n): constant cost per link
    per_link = (total(rows[-1]["id"])["mul"] - total(rows[3]["id"])["mul"]) / 96
    assert per_link == inc[0]
    text = flops.format_flop_table(rows)
    assert "93n-108/81n-100" in text and "224n-259/205n-248" in text and "articulated" in text


def test_traced_classical_kernels_and_sparse_solves_agree_in_value():
    """count_solve asserts that the traced program computes the float solve; the RNEA and ABA traces
    cover the same outputs."""
    model = flops.generic_chain(3)
    for problem in (sparse.inverse_dynamics_problem(model), sparse.forward_dynamics_problem(model)):
        counts = flops.count_solve(problem.analyze())
        assert set(counts) <= set(flops.PHASES)
    assert flops.count_rnea(model)["mul"] > 0 and flops.count_rnea(model)["div"] == 0
    # ABA divides by D_i once per joint, except at the leaf, whose D = S^T I S is a model constant
    assert flops.count_aba(model)["div"] == 2


def test_one_tracer():
    """The sparse layer counts with the IR of sparsedyn.symbolic: no traced scalar of its own."""
    src = Path(flops.__file__).read_text()
    assert "class " not in src and "from ..symbolic.ir import" in src
    assert not hasattr(flops, "Traced")
