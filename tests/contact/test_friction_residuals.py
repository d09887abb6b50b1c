"""The stopping test's scales (sparsedyn.contact.friction_residuals): the velocity scale is that of the
closing contacts, which the impulses must stop, not an open speculative contact's gap / dt."""

import importlib.util
import tempfile
import warnings
from pathlib import Path

import mujoco
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from test_friction import DT, G, H, MASS, MODEL, MU, Q0, TOL, Z, corners

from sparsedyn.contact.friction import ContactStepWarning
from sparsedyn.contact.friction_residuals import velocity_scale
from sparsedyn.interop.mujoco import q_from_mujoco, v_from_mujoco


def test_the_velocity_scale_is_the_largest_free_velocity_of_a_closing_contact():
    """Rows ``[t_x, t_y, n]``: a closing contact counts with its tangential and normal velocities, a
    speculative contact whose gap outruns its approach (``g_n > 0``) and a contact moving apart do not,
    nor does a contact left out (a zero row); nothing closing: 0."""
    g = np.array([[0.003, -0.004, -0.0098],           # resting: g dt into the floor
                  [0.02, 0.0, -0.001],                # closing slowly, sliding at 2 cm/s
                  [0.5, 0.3, 3.9],                    # speculative: 3.9 mm gap over 1 ms
                  [0.7, 0.0, 0.2],                    # moving apart
                  [0.0, 0.0, 0.0]])                   # left out
    assert velocity_scale(g) == 0.02
    assert velocity_scale(g[[0, 2, 3, 4]]) == 0.0098
    assert velocity_scale(g[2:]) == 0.0


def _box_and_wall():
    """The box resting on its four bottom corners, and its corner (h, h, h) 4 mm from a wall x = h +
    4 mm (within the margin 5 mm: a speculative contact, ``g_n = 4 mm / dt = 4 m/s``): the kernel's
    data rows ``[mu, point, plane]``."""
    rows = [[MU, *c.point, 0.0, 0.0, 1.0, 0.0] for c in corners()]
    return rows + [[MU, H, H, H, -1.0, 0.0, 0.0, -(H + 4e-3)]]


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


def _bench_scene():
    spec = importlib.util.spec_from_file_location(
        "bench_scene", Path(__file__).parents[2] / "benchmarks" / "bench_scene.py")
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
    bench = _bench_scene()
    m = mujoco.MjModel.from_xml_string(bench.talos_xml(box=True))
    d = mujoco.MjData(m)
    for _ in range(1500):
        mujoco.mj_step(m, d)
    with tempfile.NamedTemporaryFile("w", suffix=".xml", delete=False) as f:
        f.write(bench.talos_xml(box=True))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_mjcf(f.name, geometry=True)
    q, v = q_from_mujoco(model, d.qpos), v_from_mujoco(model, d.qpos, d.qvel)
    with sd.use_backend("native", deterministic=True), warnings.catch_warnings():
        warnings.simplefilter("error", ContactStepWarning)
        s = sd.contact_step(model, q, v, np.zeros(model.nv), sd.Scene(model), m.opt.timestep)
    assert np.all(np.isfinite(s.v)) and np.all(s.impulses[:, 2] >= 0)
