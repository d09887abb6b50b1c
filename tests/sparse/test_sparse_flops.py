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

    transforms (0 mul, 0 add).  E_J of a joint about a frame axis is built from exact entries (spatial.
    axis_rotation): E[0,0] = E[1,1] = c, E[0,1] = s, E[1,0] = -s, E[2,2] = 1, the rest 0: no
    arithmetic.  Xtree_1 = 1 and Xtree_2 = xlt(L e_x), so Xup_2 = (E_J, r = L e_x).  The substitution
    applies the transform blocks X_2 (rows c(3a_2)) and X_2^T (rows c(3f_1)) as transforms,
    E (v - r x w) and (E^T n + r x E^T f, E^T f), so the entries -E rx(r) of the 6x6 matrix are dead.

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

    solve (17 mul, 17 add: 16 + the subtraction of nu_2[2]): substitution, row by row, z = -b_r - sum A_re x_e, x = z / (-1) (free).
      measurement rows: qdd_i = y, fx_i = 0                                                          0/0
      a_1 = (0,0,qdd1, 0,0,g)                                                                        0/0
      a_2 = X_2 a_1 + S qdd2 + c_2: r x w = (0, -L qdd1, 0) (1 mul), E (v - r x w) =
        (s L qdd1, c L qdd1, g) (2 mul), E w = (0,0,qdd1); [2] = qdd1 + qdd2 (1 add),
        [3], [4] + c_2 (2 add).                                                                      3/3
      f_2 = I a_2 + nu_2: [2] = nu + (Izz + m h^2) a2 + m h a4 (2 mul, 2 add); [3] = nu + m a3
        (1 mul, 1 add); [4] = nu + m h a2 + m a4 (2 mul, 2 add); [0] = 0, [1] = -m h g,
        [5] = m g constants.                                                                         5/5
      tau_2 = f_2[2]                                                                                 0/0
      X_2^T f_2: l = E^T f_2[3:] = (c f3 - s f4, s f3 + c f4, m g) (4 mul, 2 add);
        E^T f_2[:3] = (-s f2[1], c f2[1], f2[2]) (2 mul); r x l = (0, -L m g (constant), L l1)
        (1 mul); its moment (-s f2[1], c f2[1] - L m g, f2[2] + L l1) (2 add).                      7/4
      f_1 = I a_1 + nu_1 + X_2^T f_2, I a_1 = (0, -m h g, (Izz+m h^2) qdd1, 0, m h qdd1, m g)
        (2 mul); [1], [2], [3] (+ nu_1[3]), [4] (4 add); [0], [5] nothing to add.                    2/4
      tau_1 = f_1[2]                                                                                 0/0

    Total: 31 multiplications, 19 additions, 0 divisions (every pivot is +-1).
    """
    model = sd.serial_chain(2, mass=3.0)
    st = sparse.inverse_dynamics_problem(model).analyze()
    counts = flops.count_solve(st)
    strip = lambda c: {k: c[k] for k in ("mul", "add", "div")}  # noqa: E731
    assert "factor" not in counts                                  # triangular: substitution only
    assert strip(counts["transforms"]) == {"mul": 0, "add": 0, "div": 0}
    assert strip(counts["b"]) == {"mul": 14, "add": 2, "div": 0}
    assert strip(counts["solve"]) == {"mul": 17, "add": 17, "div": 0}
    assert strip(total(counts)) == {"mul": 31, "add": 19, "div": 0}


def test_chain_flop_counts_for_1_to_100_links():
    """The function behind the issue's table: ID by substitution, FD by sparse LU per ordering, on
    serial chains; counts grow linearly (equal increments per link once past the base)."""
    rows = flops.flop_table(ns=(1, 2, 3, 4, 100), orderings=("articulated", "colamd"))
    assert [r["n"] for r in rows] == [1, 2, 3, 4, 100]
    for r in rows:
        assert "factor" not in r["id"] and total(r["id"])["div"] == 0 and r["id_fill"] == 0
        for o in ("articulated", "colamd"):
            t = total(r["fd"][o])
            # one division per joint's D_i, except the leaf's of the articulated order: its
            # D = S^T I S is a model constant, inverted offline
            assert t["div"] >= r["n"] - (o == "articulated") and r["fill"][o] >= 0
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
