"""The friction cones and Coulomb's law's residuals (sparsedyn.contact.friction_residuals): the
projection onto a cone is the nearest point of it; the cone and its dual decompose every vector
(Moreau: ``x = P_K(x) - P_K*(-x)`` with orthogonal parts, ``K*`` the dual cone ``mu |t| <= n``); the
residuals vanish on the two modes of Coulomb's law derived by hand (stick: impulse inside the cone,
no contact velocity; slide: impulse on the cone's edge against the sliding velocity) and measure the
distance from them otherwise.  The stopping test's velocity scale is that of the closing contacts,
which the impulses must stop, not an open speculative contact's gap / dt."""

import importlib.util
import tempfile
import warnings
from pathlib import Path

import mujoco
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from test_friction import DT, G, H, MASS, MODEL, MU as BOX_MU, Q0, TOL, Z, corners

from sparsedyn.contact.friction import ContactStepWarning
from sparsedyn.contact.friction_residuals import (VELOCITY_FLOOR, _project_dual, _residuals, project_cone,
                                                  velocity_scale)
from sparsedyn.interop.mujoco import q_from_mujoco, v_from_mujoco

MU = np.array([0.2, 1.0, 3.0, 0.0])                                # 0: the normal half-line


def test_cone_projection_is_the_nearest_point():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(200, 4, 3))
    p = project_cone(x, MU)
    assert np.all(np.linalg.norm(p[..., :2], axis=-1) <= MU * p[..., 2] + 1e-12)
    # nearest: no sampled point of the cone is closer
    for _ in range(50):
        y = project_cone(rng.normal(size=(200, 4, 3)), MU)
        assert np.all(np.linalg.norm(x - p, axis=-1) <= np.linalg.norm(x - y, axis=-1) + 1e-12)


def test_the_cone_and_its_dual_decompose_every_vector():
    """Moreau's decomposition of ``x``: ``P_K(x) - P_K*(-x) = x``, the two
    parts orthogonal, each in its cone (to the rounding of a few operations on unit numbers)."""
    rng = np.random.default_rng(5)
    x = rng.normal(size=(300, 4, 3))
    x[:50, :, :2] *= 1e-3                                           # near the axis, inside either cone
    p, d = project_cone(x, MU), _project_dual(-x, MU)
    eps = 64 * np.finfo(float).eps * (1 + np.abs(x).max())
    assert np.abs(p - d - x).max() <= eps
    assert np.abs(np.sum(p * d, -1)).max() <= eps * np.abs(x).max()
    assert np.all(np.linalg.norm(p[..., :2], axis=-1) <= MU * p[..., 2] + eps)
    assert np.all(MU * np.linalg.norm(d[..., :2], axis=-1) <= d[..., 2] + eps)


def test_the_residuals_vanish_on_coulombs_law_and_measure_a_violation():
    """Three contacts by hand, mu = 0.5: sticking (impulse inside the cone, no velocity), sliding at
    2 m/s along x (impulse mu n against it, no normal velocity), open (no impulse, separating at 1 m/s).
    Then an impulse outside the cone (primal), a penetrating velocity (dual) and a sticking impulse
    with a sliding velocity (complementarity), each by its hand value."""
    mu = np.full(3, 0.5)
    z = np.array([[0.1, -0.05, 1.0], [-0.5 * 2.0, 0.0, 2.0], [0.0, 0.0, 0.0]])
    u = np.array([[0.0, 0.0, 0.0], [2.0, 0.0, 0.0], [0.3, 0.0, 1.0]])
    assert _residuals(z, z, u, mu) == (0.0, 0.0, 0.0)
    x = z.copy()
    x[0, 0] += 0.25                                                 # the ADMM copy apart from z
    assert abs(_residuals(z, x, u, mu)[0] - 0.25) <= 4 * np.finfo(float).eps
    v = u.copy()
    v[1, 2] = -0.4                                                  # sliding into the ground: w = (2, 0, 0.6)
    # the distance of w from the dual cone mu |t| <= n: onto the ray (1, 0, mu) by (2 + mu 0.6) / (1 + mu^2)
    s = (2.0 + 0.5 * 0.6) / 1.25
    want = np.hypot(2.0 - s, 0.6 - 0.5 * s)
    assert abs(_residuals(z, z, v, mu)[1] - want) <= 4 * np.finfo(float).eps
    v = u.copy()
    v[0] = [1.0, 0.0, 0.0]                                          # the sticking contact slides: z . w
    assert abs(_residuals(z, z, v, mu)[2] - abs(0.1 * 1.0 + 1.0 * 0.5 * 1.0)) <= 4 * np.finfo(float).eps


def test_the_velocity_scale_is_the_largest_free_velocity_of_a_closing_contact():
    """Rows ``[t_x, t_y, n]``: a closing contact counts with its tangential and normal velocities, a
    speculative contact whose gap outruns its approach (``g_n > 0``) and a contact moving apart do not,
    nor does a contact left out (a zero row); nothing closing: the largest free velocity of all; nothing
    at all: 0; never below VELOCITY_FLOOR of the largest free joint velocity."""
    g = np.array([[0.003, -0.004, -0.0098],           # resting: g dt into the floor
                  [0.02, 0.0, -0.001],                # closing slowly, sliding at 2 cm/s
                  [0.5, 0.3, 3.9],                    # speculative: 3.9 mm gap over 1 ms
                  [0.7, 0.0, 0.2],                    # moving apart
                  [0.0, 0.0, 0.0]])                   # left out
    still = np.zeros(6)
    assert velocity_scale(g, still) == 0.02
    assert velocity_scale(g[[0, 2, 3, 4]], still) == 0.0098
    assert velocity_scale(g[2:], still) == 3.9
    assert velocity_scale(g[4:], still) == 0.0
    # at least VELOCITY_FLOOR of the largest free joint velocity: a pair of shapes moving together
    # closes at the rounding of their equal velocities, no velocity an impulse cancels
    crumbs = np.array([[1e-19, -2e-19, -3e-18]])
    v_free = np.array([0.0, 0.0, 0.0, 0.2, 0.1, -0.51])
    assert velocity_scale(crumbs, v_free) == VELOCITY_FLOOR * 0.51
    assert velocity_scale(g, v_free) == 0.02


def _box_and_wall():
    """The box resting on its four bottom corners, and its corner (h, h, h) 4 mm from a wall x = h +
    4 mm (within the margin 5 mm: a speculative contact, ``g_n = 4 mm / dt = 4 m/s``): the kernel's
    data rows ``[mu, point, plane]``."""
    rows = [[BOX_MU, *c.point, 0.0, 0.0, 1.0, 0.0] for c in corners()]
    return rows + [[BOX_MU, H, H, H, -1.0, 0.0, 0.0, -(H + 4e-3)]]


@pytest.mark.parametrize("road", ["numpy", "native"])
def test_an_open_speculative_contact_leaves_the_velocity_scale_to_the_resting_ones(road):
    """The box resting on the floor beside a wall 4 mm away: its free velocity is ``g dt`` down, so the
    report's velocity scale is ``g dt`` (9.8 mm/s; before, the wall contact's 4 m/s loosened the test
    400-fold), the wall's impulse is zero, the floor carries the weight over the step, and the
    residuals are within ``tol`` of the scales ``m g dt`` and ``g dt``."""
    settings = np.array([DT, TOL, 1000.0, 10000.0, 0.005])
    with sd.use_backend(road, deterministic=True), warnings.catch_warnings():
        warnings.simplefilter("error", ContactStepWarning)
        out = sd.contact_step_kernel(MODEL, Q0, Z, Z, settings, np.zeros((5, 3)), _box_and_wall(), ("box",) * 5)
    primal, dual, comp, _, conv, ls, vs, _ = out.report
    assert conv == 1.0
    assert abs(vs - G * DT) <= rounding_bound(6) * G * DT
    assert np.array_equal(out.impulses[4], np.zeros(3))
    P = MASS * G * DT
    assert abs(out.impulses[:4, 2].sum() - P) <= TOL * P
    assert primal <= TOL * P and dual <= TOL * G * DT and comp <= TOL * P * G * DT


def _scene_cases():
    spec = importlib.util.spec_from_file_location(
        "scene_cases", Path(__file__).parents[2] / "benchmarks" / "scene_cases.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_talos_fallen_onto_a_box_is_solved_cold():
    """Talos (example-robot-data, its collision meshes as convex hulls) fallen onto a box in MuJoCo (1.5
    s), stepped there from zero impulses (no warm start) on the default road: 32 contact slots, six of
    them speculative contacts whose gaps over the step make 2-4 m/s.  The solve reaches ``tol`` (no
    :class:`ContactStepWarning`; the scales of its test are those of
    :func:`test_an_open_speculative_contact_leaves_the_velocity_scale_to_the_resting_ones`): before,
    ADMM's penalty was balanced against those velocities, and neither ADMM's 1000 iterations nor
    Gauss-Seidel's 10000 sweeps reached even the test those velocities loosened."""
    cases = _scene_cases()
    m = mujoco.MjModel.from_xml_string(cases.talos_xml(box=True))
    d = mujoco.MjData(m)
    for _ in range(1500):
        mujoco.mj_step(m, d)
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
        f.write(cases.talos_xml(box=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_mjcf(f.name, geometry=True)
    q, v = q_from_mujoco(model, d.qpos), v_from_mujoco(model, d.qpos, d.qvel)
    with sd.use_backend("native", deterministic=True), warnings.catch_warnings():
        warnings.simplefilter("error", ContactStepWarning)
        s = sd.contact_step(model, q, v, np.zeros(model.nv), sd.Scene(model), m.opt.timestep)
    assert np.all(np.isfinite(s.v)) and np.all(s.impulses[:, 2] >= 0)
