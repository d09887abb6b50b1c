"""The offline phase: named variables and row blocks, the worst-case pattern (checked against an
independent dense assembly), matching, block triangular form (inverse dynamics triangular with zero
fill-in for every model), structural singularity flagged before numeric work, static orders."""


import numpy as np
import pytest
import scipy.sparse as sps
from scipy.sparse.linalg import splu

import sparsedyn as sd
from sparsedyn import sparse
from sparsedyn.sparse import OverdeterminedError, Problem, StructurallySingularError
from sparsedyn.sparse.assembly import CONST, ONE, STATE
from sparsedyn.sparse.matching import block_triangular, hopcroft_karp, preferred_matching, undetermined
from sparsedyn.sparse.ordering import superlu_order
from conftest import rel_err
from sparse_oracles import all_models, dense_newton_euler, fd_singular, random_states, robot

MODELS = all_models() + [("humanoid", sd.humanoid()), ("chain100", sd.serial_chain(100))]


# --- names --------------------------------------------------------------------------------------

def test_variables_and_row_blocks_are_named():
    model = sd.humanoid()
    L = sparse.Layout(model)
    NB, nv = model.nbodies, model.nv
    assert L.n == 18 * NB + 2 * nv and L.nrows == 12 * NB + nv
    f = L.var("f", "l_ankle_link")
    assert f.label == "f[l_ankle_link]" and f.size == 6 and f.body == model.body("l_ankle_link")
    assert f.describe() == "f of body l_ankle_link (joint wrench (force transmitted from the parent))"
    assert L.var("qdd", "l_ankle_pitch") == L.var("qdd", model.joint("l_ankle_pitch"))   # joint or body name
    assert L.var("tau", "root_joint").size == 6                                          # floating base: S = 1_6
    assert L.eq("3f", "l_ankle_link").describe() == "row block c(3f) of l_ankle_link"
    assert L.eq("3tau", "l_knee").label == "c(3tau)[l_knee]"
    assert L.column_owner(L.var("a", 3).offset + 2) == L.var("a", 3)
    assert L.var("a", 3).component(2) == "a[l_thigh].wz"
    tau = L.unpack(np.arange(L.n, dtype=float))["tau"]
    assert tau.shape == (nv,) and tau[0] == L.var("tau", 0).offset        # kind-major: tau in dof order
    with pytest.raises(KeyError, match="no body or joint called 'nose'"):
        L.var("a", "nose")
    with pytest.raises(ValueError, match="unknown variable kind 'v'"):
        L.var("v", 0)
    with pytest.raises(ValueError, match="unknown variable kind"):
        Problem(model).known("qd")


def test_problems_are_measurement_sets():
    model = sd.serial_chain(3)
    ID = sparse.inverse_dynamics_problem(model)
    assert [m.name for m in ID.measurements][:2] == ["known qdd[joint1]", "known qdd[joint2]"]
    assert ID.ny == 3 + 18
    p = Problem(model).known("fx", "link2", components=[3, 5])
    assert p.measurements[0].size == 2 and p.measurements[0].name == "known fx[link2].3,5"
    fx = np.arange(18.0).reshape(3, 6)
    np.testing.assert_array_equal(p.values(fx=fx), [9.0, 11.0])
    with pytest.raises(ValueError, match="used twice"):
        ID.known("qdd", [0])
    with pytest.raises(ValueError, match=r"the matrix of a\[link1\] has shape"):
        sparse.Measurement("bad", ((sparse.Layout(model).var("a", 0), np.eye(2)),), 1)


# --- the worst-case pattern and the kernels against an independent dense assembly --------------------

@pytest.mark.parametrize("mid,model", MODELS[:8] + MODELS[-2:-1], ids=[m for m, _ in MODELS[:8] + MODELS[-2:-1]])
def test_pattern_values_and_rhs_equal_a_dense_assembly(mid, model, rng):
    """At random states every nonzero of the dense eq. (4) lies in the worst-case pattern, the refilled
    values equal it, constants are classified right, and b equals the dense b."""
    st = sparse.forward_dynamics_problem(model).analyze(ordering="colamd") if not fd_singular(model) else \
        sparse.inverse_dynamics_problem(model).analyze()
    p = st.pattern
    ne = st.layout.nrows
    for _ in range(3):
        q, v, tau = (x[0] for x in random_states(model, rng, 1))
        D, b = dense_newton_euler(model, q, v)
        A = p.dense(st.values(q))
        np.testing.assert_allclose(A[:ne], D, rtol=0, atol=1e-13 * max(1.0, np.abs(D).max()))
        y = st.problem.values(tau=tau, qdd=tau)
        np.testing.assert_allclose(st.rhs(q, v, y)[:ne], b, rtol=1e-13, atol=1e-12)
    C = p.class_matrix()
    assert np.all(np.abs(p.const[p.cls == ONE]) == 1.0)
    assert np.all(p.const[p.cls == CONST] != 0) and np.all(np.isnan(p.const[p.cls == STATE]))
    # state-dependent entries are exactly the transform blocks (4a) and (4d), and S_i (4a) and S_i^T
    # (4e) of the joints whose S depends on q
    L = st.layout
    for e in np.nonzero(p.cls == STATE)[0][:400]:
        row, col = p.row_owner(p.rows[e]), L.column_owner(p.cols[e])
        if (row.kind, col.kind) in (("3a", "qdd"), ("3tau", "f")):
            assert col.body == row.body and not model.joints[row.body].constant_subspace
        else:
            assert (row.kind, col.kind) in (("3a", "a"), ("3f", "f"))
            assert col.body != row.body
    assert C.shape == (p.nrows, p.n)


def test_worst_case_pattern_of_a_revolute_z_chain():
    """serial_chain: z axes, links along x.  iX_lambda = rotz(q) xlt(l): E has the 5 entries of a
    z rotation, -E rx the 3 entries s l, c l, -l (Nori section IV-D: sines and cosines)."""
    st = sparse.inverse_dynamics_problem(sd.serial_chain(2)).analyze()
    M = st.pattern.masks[1]
    expected = np.zeros((6, 6), bool)
    for r, c in [(0, 0), (0, 1), (1, 0), (1, 1), (2, 2), (3, 2), (4, 2), (5, 1),
                 (3, 3), (3, 4), (4, 3), (4, 4), (5, 5)]:
        expected[r, c] = True
    np.testing.assert_array_equal(M, expected)


# --- inverse dynamics: triangular, zero fill-in (Property 1, found automatically) ---------------------

@pytest.mark.parametrize("mid,model", MODELS, ids=[m for m, _ in MODELS])
def test_inverse_dynamics_is_lower_triangular_with_zero_fill(mid, model):
    st = sparse.inverse_dynamics_problem(model).analyze()
    assert st.triangular and st.fill == 0 and st.proven
    assert len(st.blocks) == st.n
    p = st.pattern
    rpos = np.empty(st.n, np.int64)
    rpos[st.row_order] = np.arange(st.n)
    cpos = np.empty(st.n, np.int64)
    cpos[st.col_order] = np.arange(st.n)
    R, C = rpos[p.rows], cpos[p.cols]
    assert np.all(C <= R)                                        # permuted matrix lower triangular
    diag = R == C
    assert diag.sum() == st.n and np.all(p.cls[diag] == ONE)     # pivots: the constants +-1
    # the pivots are the paper's: c(3a_i) on a_i, c(3f_i) on f_i, c(3tau_i) on tau_i, measurements on qdd, fx
    pairs = {(p.row_owner(r).kind, st.layout.column_owner(c).kind) for r, c in zip(st.row_order, st.col_order)}
    assert pairs == {("3a", "a"), ("3f", "f"), ("3tau", "tau"), ("y", "qdd"), ("y", "fx")}


def test_forward_dynamics_structure():
    """Known tau, fx are 1x1 blocks; the rest is one articulated block per independent subtree,
    every pivot proven (+-1 constants or S^T IA S > 0)."""
    model = sd.serial_chain(5)
    st = sparse.forward_dynamics_problem(model).analyze()
    big = [b for b in st.blocks if b.size > 1]
    assert len(big) == 1 and big[0].ordering == "articulated" and big[0].size == 13 * 5
    assert st.proven and "articulated" in big[0].proof
    # the articulated order visits the bodies from the leaves: f_5, a_5, qdd_5, f_4, ...
    labels = [st.pattern.col_label(int(c)).split(".")[0] for c in big[0].cols]
    runs = [labels[0]] + [b for a, b in zip(labels, labels[1:]) if a != b]
    assert runs[:6] == ["f[link5]", "a[link5]", "qdd[joint5]", "f[link4]", "a[link4]", "qdd[joint4]"]
    # a fixed-base quadruped: four legs, four independent blocks
    st = sparse.forward_dynamics_problem(robot("solo12", False)).analyze()
    assert sorted(b.size for b in st.blocks if b.size > 1) == [39] * 4


def test_articulated_pivots_are_the_aba_D():
    """The S^T IA S pivots of the articulated order equal ABA's D_i = S_i^T IA_i S_i (1-dof joints)."""
    model = sd.random_tree(7, branching=1.5, joint_types=("revolute", "prismatic", "helical"), seed=5)
    st = sparse.forward_dynamics_problem(model).analyze()
    q = model.random_configuration(3)
    P = st.pivots(q)
    from sparsedyn.algorithms.kinematics import joint_transforms
    Xup, S = joint_transforms(model, q)
    IA = [model.inertia[i].copy() for i in range(model.nbodies)]
    D = {}
    for i in range(model.nbodies - 1, -1, -1):
        U = IA[i] @ S[i]
        D[i] = float((S[i].T @ U)[0, 0])
        p = model.parent[i]
        if p >= 0:
            X = sd.spatial.motion_matrix(Xup[i])
            IA[p] = IA[p] + X.T @ (IA[i] - U @ U.T / D[i]) @ X
    L = st.layout
    for k, (r, c) in enumerate(zip(st.row_order, st.col_order)):
        v = L.column_owner(int(c))
        if v.kind == "qdd":
            assert P[k] == pytest.approx(D[v.body], rel=1e-12)


# --- structural singularity and over-determination ----------------------------------------------------

def test_forward_dynamics_with_one_torque_missing_is_flagged_before_numeric_work(monkeypatch):
    model = sd.humanoid()
    k = model.joint("l_knee")
    problem = Problem(model, name="fd without a knee torque").known("fx").known(
        "tau", [i for i in range(model.nbodies) if i != k])
    import sparsedyn.sparse.solver as solver
    monkeypatch.setattr(solver, "d_values", lambda *a, **kw: pytest.fail("numeric work before the analysis"))
    with pytest.raises(StructurallySingularError) as info:
        problem.analyze()
    msg = str(info.value)
    assert msg.startswith("fd without a knee torque of model 'humanoid' is structurally singular")
    assert "at least 1 more independent measurement" in msg
    assert "cannot be determined at any state: tau[l_knee], qdd[" in msg
    L = problem.layout
    cols = set(info.value.columns)
    assert set(range(L.var("tau", k).offset, L.var("tau", k).offset + 1)) <= cols
    assert not cols & set(range(L.var("fx", 0).offset, L.var("fx", 0).offset + 6))   # fx is known


def test_massless_leaves_are_structurally_singular_forward_dynamics():
    msg = r"romeo.*structurally singular.*cannot be determined at any state: qdd\[LFinger21\]"
    with pytest.raises(StructurallySingularError, match=msg):
        sparse.forward_dynamics_problem(robot("romeo", False)).analyze()


def test_too_many_measurements_is_overdetermined():
    model = sd.serial_chain(3)
    with pytest.raises(OverdeterminedError, match=r"has 63 equations for 60 unknowns: 3 more than needed"):
        sparse.inverse_dynamics_problem(model).known("tau").analyze()


# --- matching and block triangular form --------------------------------------------------------------

def _kuhn(n_rows, n_cols, adj):
    match_c = [-1] * n_cols

    def try_row(r, seen):
        for c in adj[r]:
            if c not in seen:
                seen.add(c)
                if match_c[c] < 0 or try_row(match_c[c], seen):
                    match_c[c] = r
                    return True
        return False
    return sum(try_row(r, set()) for r in range(n_rows))


def test_hopcroft_karp_is_maximum(rng):
    for trial in range(60):
        m, n = rng.integers(1, 25, size=2)
        density = rng.uniform(0.02, 0.3)
        P = rng.random((m, n)) < density
        adj = [list(np.nonzero(P[r])[0]) for r in range(m)]
        mr, mc = hopcroft_karp(m, n, adj)
        assert sum(c >= 0 for c in mr) == _kuhn(m, n, adj)
        for r, c in enumerate(mr):
            assert c < 0 or (P[r, c] and mc[c] == r)


class _CountedRow(list):
    """An adjacency row that counts how often the matching reads an entry."""
    reads = 0

    def __iter__(self):
        for x in list.__iter__(self):
            _CountedRow.reads += 1
            yield x

    def __getitem__(self, k):
        _CountedRow.reads += 1
        return list.__getitem__(self, k)


def test_matching_is_linear_on_long_chain_patterns(monkeypatch):
    """Bidiagonal patterns of 20,000 columns (the shape on which SciPy's maximum_bipartite_matching has
    been seen to hang, SciPy issue 26147): the matching reads each entry a bounded number of times.
    Hopcroft-Karp's bound is O(E sqrt(V)) reads (each phase reads an entry at most twice, at most
    2 sqrt(V) + 1 phases); a quadratic search would read about n^2 / 2 = 2e8 entries."""
    from sparsedyn.sparse import matching
    original = matching.hopcroft_karp

    def counted(n_rows, n_cols, adj, *args):
        return original(n_rows, n_cols, [_CountedRow(a) for a in adj], *args)

    monkeypatch.setattr(matching, "hopcroft_karp", counted)
    n = 20000
    rows = np.concatenate([np.arange(n), np.arange(1, n)])
    cols = np.concatenate([np.arange(n), np.arange(n - 1)])
    rank = np.zeros(len(rows), np.int8)
    _CountedRow.reads = 0
    mr, mc = matching.preferred_matching(n, n, rows[::-1].copy(), cols[::-1].copy(), rank)
    assert all(c >= 0 for c in mc)
    E = len(rows)
    assert _CountedRow.reads <= E * (1 + 2 * (2 * np.sqrt(2 * n) + 1))


def test_preferred_matching_uses_constants_when_it_can():
    # 2x2: row 0 has a state entry at col 0 and a +-1 at col 1; row 1 has both classes too
    rows, cols = np.array([0, 0, 1, 1]), np.array([0, 1, 0, 1])
    rank = np.array([2, 0, 0, 2])
    mr, _ = preferred_matching(2, 2, rows, cols, rank)
    assert mr == [1, 0]


def test_block_triangular_form_of_random_matrices(rng):
    for trial in range(30):
        n = int(rng.integers(2, 40))
        P = (rng.random((n, n)) < rng.uniform(0.03, 0.2)) | np.eye(n, dtype=bool)
        perm = rng.permutation(n)
        P = P[perm]                                              # a perfect matching exists
        rows, cols = np.nonzero(P)
        mr, mc = hopcroft_karp(n, n, [list(np.nonzero(P[r])[0]) for r in range(n)])
        blocks = block_triangular(n, rows, cols, mc)
        order = [c for b in blocks for c in b]
        assert sorted(order) == list(range(n))
        cpos = np.empty(n, np.int64)
        cpos[order] = np.arange(n)
        rpos = np.empty(n, np.int64)
        rpos[[mc[c] for c in order]] = np.arange(n)
        size = np.empty(n, np.int64)
        start = np.empty(n, np.int64)
        s = 0
        for b in blocks:
            size[s:s + len(b)], start[s:s + len(b)] = len(b), s
            s += len(b)
        R, C = rpos[rows], cpos[cols]
        assert np.all(C < start[R] + size[R])                    # block lower triangular


def test_undetermined_set_of_a_rank_deficient_pattern():
    # x0 + x1 = ., x1 + x2 = . : 2 rows, 3 columns; every column is undetermined
    rows, cols = np.array([0, 0, 1, 1]), np.array([0, 1, 1, 2])
    mr, mc = hopcroft_karp(2, 3, [[0, 1], [1, 2]])
    c, r = undetermined(2, 3, rows, cols, mr, mc)
    assert c == [0, 1, 2] and r == [0, 1]


# --- static orders ------------------------------------------------------------------------------

def test_superlu_order_reproduces_superlus_pivots():
    """perm_r / perm_c read as documented: LU without pivoting of A[rows][:, cols] in the returned
    order reproduces SuperLU's U diagonal at the state the order was chosen at."""
    model = sd.random_tree(5, joint_types=("revolute",), seed=2)
    st = sparse.forward_dynamics_problem(model).analyze(ordering="colamd")
    p = st.pattern
    q = model.random_configuration(7)
    vals = np.moveaxis(st.values(q), -1, 0)
    blk = max(st.blocks, key=lambda b: b.size)
    rows, cols = sorted(blk.rows.tolist()), sorted(blk.cols.tolist())
    pivots, lu = superlu_order(p, rows, cols, vals, "COLAMD")
    A = p.dense(vals)
    B = A[np.ix_([r for r, _ in pivots], [c for _, c in pivots])]
    for k in range(len(B) - 1):                                 # dense LU, no pivoting
        B[k + 1:, k] /= B[k, k]
        B[k + 1:, k + 1:] -= np.outer(B[k + 1:, k], B[k, k + 1:])
    np.testing.assert_allclose(np.diag(B), lu.U.diagonal(), rtol=1e-10, atol=1e-12)
    ours = sps.csc_matrix(A[np.ix_(rows, cols)])
    assert rel_err(np.abs(np.diag(B)).prod() ** (1 / len(B)),
                   np.abs(splu(ours, permc_spec="COLAMD").U.diagonal()).prod() ** (1 / len(B))) < 1e-10


def test_orderings_and_their_safety():
    # the tree whose structure the problems below are written for (these types, in this order, draw it)
    types = ("revolute", "continuous", "prismatic", "helical", "cylindrical", "planar", "spherical", "free")
    model = sd.random_tree(8, branching=2.0, joint_types=types, seed=9)
    fdp = sparse.forward_dynamics_problem(model)
    art = fdp.analyze(ordering="articulated")
    col = fdp.analyze(ordering="colamd")
    assert art.proven and not col.proven
    assert len(col.unproven_pivots()) > 0
    for o in ("mmd_ata", "mmd_at_plus_a", "natural", "matching"):
        st = fdp.analyze(ordering=o)
        q, v, tau = model.random_configuration(1), np.ones(model.nv), np.ones(model.nv)
        assert rel_err(st.unpack(st.solve(q, v, fdp.values(tau=tau)))["qdd"], sd.aba(model, q, v, tau)) < 1e-9
    with pytest.raises(ValueError, match="ordering: expected one of"):
        fdp.analyze(ordering="amd")
    sensor = sparse.Measurement("wrench", ((fdp.var("f", 3), np.eye(6)[:1]),), 1)
    odd = Problem(model).known("fx").known("tau", [i for i in range(8) if i != 3]).measure(sensor)
    with pytest.raises(ValueError, match="articulated order does not apply"):
        odd.analyze(ordering="articulated")
    assert not odd.analyze().proven                               # auto: the general order, checked
