"""Worst-case sparsity patterns from symbols, and the sparse solves at states outside the joint limits.

The pattern of every state-dependent block of ``D`` is derived by tracing the joint transforms on
symbolic scalars (sparsedyn.sparse.assembly); joint limits are data, never structure.  Checked here:

* by hand, on a chain whose entries fold (a revolute joint about z behind a link along x);
* numerically, independently of the trace: on every example-robot-data URDF, fixed and floating
  base, at states inside and outside the joint limits, the values of ``A`` equal a dense assembly of
  Nori's eq. (4) (sparse_oracles.dense_newton_euler), every entry outside the pattern is exactly
  zero, every constant entry equals its constant, every state-dependent entry is nonzero somewhere;
  sparse inverse dynamics equals RNEA and sparse forward dynamics equals ABA;
* on models with zero-range and narrow-range joint limits (centauro's wheels, a random tree).
"""

import warnings
import zlib

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import sparse
from sparsedyn.algorithms.kinematics import joint_transforms
from sparsedyn.sparse.assembly import CONST, ONE, STATE, transform_patterns
from sparsedyn.model.spatial import motion_matrix

from erd import load_model, urdf_files
from sparse_oracles import dense_newton_euler, fd_singular

EPS = np.finfo(float).eps


def states(model, rng, inside=2, outside=3):
    """``inside`` configurations within the joint limits, ``outside`` ignoring them, random v, a."""
    q = np.stack([model.random_configuration(rng, limits=k < inside) for k in range(inside + outside)])
    n = inside + outside
    return q, rng.normal(size=(n, model.nv)), rng.normal(size=(n, model.nv))


def assert_pattern_is_exact(st, q, v):
    """The numeric values at configurations ``q`` (n, nq) confirm the traced pattern of ``st``."""
    P = st.pattern
    nr = P.layout.nrows
    vals = st.values(q)                                            # (n, nnz)
    inside = np.zeros((P.nrows, P.n), bool)
    inside[P.rows, P.cols] = True
    for k in range(len(q)):
        # the oracle forms iX*_j as force_matrix(inverse(Xup_j)): equal to Xup_j^T up to rounding
        D, _ = dense_newton_euler(st.model, q[k], v[k])
        A = P.dense(vals[k])[:nr]
        scale = max(1.0, float(np.max(np.abs(D))))
        assert np.max(np.abs(A - D)) <= 1e-14 * scale                  # same matrix
        assert np.max(np.abs(D[~inside[:nr]]), initial=0.0) <= 1e-14 * scale
    Xup, _ = joint_transforms(st.model, q)
    for i, X in enumerate(Xup):                                        # outside the pattern: exactly 0
        assert not np.any(np.asarray(motion_matrix(X))[..., ~P.masks[i]])
    c = P.cls != STATE
    assert np.all(vals[:, c] == P.const[c])                            # constants are constant
    assert np.all(np.abs(P.const[P.cls == ONE]) == 1.0)
    assert np.all((P.const[P.cls == CONST] != 0) & (np.abs(P.const[P.cls == CONST]) != 1.0))
    s = P.cls == STATE
    assert np.all(np.any(vals[:, s] != 0, axis=0))                     # no state entry is always zero


def check_model(model, rng, inside=2, outside=3):
    """Pattern exactness, sparse ID == RNEA and sparse FD == ABA (or both singular)."""
    q, v, a = states(model, rng, inside, outside)
    sid = sparse.inverse_dynamics_problem(model).analyze()
    assert_pattern_is_exact(sid, q, v)
    tau = sd.rnea(model, q, v, a)
    t = sparse.sparse_inverse_dynamics(model, q, v, a, structure=sid)
    # substitution with the same products as RNEA: rounding only
    assert np.max(np.abs(t - tau)) <= 1e-13 * max(1.0, float(np.max(np.abs(tau))))
    try:
        sfd = sparse.forward_dynamics_problem(model).analyze()
    except sparse.StructurallySingularError:
        assert fd_singular(model)             # massless subtrees: ABA refuses too
        return
    qdd = sparse.sparse_forward_dynamics(model, q, v, tau, structure=sfd)
    aba = sd.aba(model, q, v, tau)
    # both solve H qdd = tau - C; against the exact a, the sparse error is within ABA's own
    # (rounding amplified by cond(H)) times 10, plus a floor of 1e-13 max|a|
    err_aba = np.max(np.abs(aba - a))
    err = np.max(np.abs(qdd - a))
    assert err <= 10 * err_aba + 1e-13 * max(1.0, float(np.max(np.abs(a)))), (err, err_aba)


def test_transform_pattern_by_hand():
    """serial_chain(2): joint 2 about z behind a link of length L along x, so
    ``Xup_2 = rotz(q) xlt(L e_x)`` and motion_matrix = [[E, 0], [-E rx, E]] with
    E = [[c, s, 0], [-s, c, 0], [0, 0, 1]], -E rx = [[0, 0, sL], [0, 0, cL], [0, -L, 0]]:
    10 state entries (c, s four times each in the E blocks, sL, cL), the constants 1, 1 (ONE) and
    -L (CONST), 23 structural zeros.  Body 1 (Xtree = 1): the two E blocks only."""
    model = sd.serial_chain(2, length=0.3)
    masks = transform_patterns(model)
    E = np.array([[1, 1, 0], [1, 1, 0], [0, 0, 1]], bool)
    Z = np.zeros((3, 3), bool)
    ErX = np.array([[0, 0, 1], [0, 0, 1], [0, 1, 0]], bool)
    assert np.array_equal(masks[0], np.block([[E, Z], [Z, E]]))
    assert np.array_equal(masks[1], np.block([[E, Z], [ErX, E]]))
    P = sparse.inverse_dynamics_problem(model).analyze().pattern
    a0 = P.layout.var("a", 0).offset
    r = P.layout.eq("3a", 1).offset
    sel = (P.rows >= r) & (P.rows < r + 6) & (P.cols >= a0) & (P.cols < a0 + 6)   # the iX_lambda block
    got = {(int(P.rows[e]) - r, int(P.cols[e]) - a0): (int(P.cls[e]), P.const[e]) for e in np.nonzero(sel)[0]}
    assert got[2, 2] == (ONE, 1.0) and got[5, 5] == (ONE, 1.0)
    assert got[5, 1] == (CONST, -0.3)
    assert sorted(k for k, (c, _) in got.items() if c == STATE) == \
        sorted([(0, 0), (0, 1), (1, 0), (1, 1), (3, 2), (4, 2), (3, 3), (3, 4), (4, 3), (4, 4)])
    assert len(got) == 13


def test_centauro_wheels_turned():
    """centauro's four wheel joints have the URDF limits lower = upper = 0.  Turning them (a state
    outside the limits) once made the sampled pattern miss the sines: ID off by 1e-2, FD by 600 %."""
    model = load_model("centauro_description/urdf/centauro.urdf", True)
    wheels = [i for i, j in enumerate(model.joints) if j.nq == 1 and model.lower[model.q_slice(i)][0] ==
              model.upper[model.q_slice(i)][0]]
    assert len(wheels) == 4
    rng = np.random.default_rng(5)
    q, v, a = states(model, rng, 0, 3)
    for i in wheels:
        q[:, model.q_slice(i)] = rng.uniform(0.5, 2.5, (3, 1))          # wheels clearly turned
    sid = sparse.inverse_dynamics_problem(model).analyze()
    assert_pattern_is_exact(sid, q, v)
    tau = sd.rnea(model, q, v, a)
    assert np.max(np.abs(sparse.sparse_inverse_dynamics(model, q, v, a, structure=sid) - tau)) <= \
        1e-13 * np.max(np.abs(tau))
    qdd = sparse.sparse_forward_dynamics(model, q, v, tau)
    assert np.max(np.abs(qdd - a)) <= 10 * np.max(np.abs(sd.aba(model, q, v, tau) - a)) + 1e-13 * np.max(np.abs(a))


def limited_tree(lower, upper, **kw):
    """random_tree(8, every joint type) with the given limits on every 1-dof joint."""
    base = sd.random_tree(8, branching=1.5, joint_types="all", seed=11, **kw)
    b = sd.ModelBuilder(base.name + "_limited", gravity=base.gravity)
    for i in range(base.nbodies):
        j = base.joints[i]
        lim = {} if j.nq != 1 else dict(lower=[lower], upper=[upper])
        b.add_body(base.body_names[i], None if base.parent[i] < 0 else base.body_names[base.parent[i]], j,
                   base.Xtree[i], base.inertia[i], joint_name=base.joint_names[i], **lim)
    return base, b.build()


@pytest.mark.parametrize("lower, upper", [(0.0, 0.0), (0.1, 0.1 + 1e-3)], ids=["zero-range", "narrow-range"])
@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "floating"])
def test_limits_are_data_not_structure(lower, upper, floating):
    base, model = limited_tree(lower, upper, floating_base=floating)
    assert np.any(model.lower == lower) and np.any(model.upper == upper)
    assert np.array_equal(transform_patterns(model), transform_patterns(base))
    p0 = sparse.forward_dynamics_problem(base).analyze().pattern
    p1 = sparse.forward_dynamics_problem(model).analyze().pattern
    for k in ("rows", "cols", "cls", "source"):
        assert np.array_equal(getattr(p0, k), getattr(p1, k))
    check_model(model, np.random.default_rng(3), inside=2, outside=3)


_FILES = urdf_files()


def test_the_robot_list_is_long():
    assert len(_FILES) > 50


@pytest.mark.parametrize("floating", [False, True], ids=["fixed", "floating"])
@pytest.mark.parametrize("file", _FILES)
def test_example_robot_data(file, floating):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.io.urdf.UrdfWarning)
        model = load_model(file, floating)
    if model.nbodies == 0:                     # a fixed robot without moving joints: nothing to solve
        assert not floating and model.nv == 0
        return
    check_model(model, np.random.default_rng(zlib.crc32(f"{file}{floating}".encode())), inside=1, outside=2)
