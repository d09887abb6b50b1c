"""Touching contacts (sparsedyn.contact.correction, TOUCHING_GAP): a contact above its plane by less than
``TOUCHING_GAP`` is touching (no speculative term), one above it closes its gap exactly; the position
correction holds a load-bearing touching contact within half the slop of its plane while it pushes
another point out; the dm_control humanoid on four stairs with its legs folded (self-contacts pushed
apart every step) is solved within ADMM's budget at every step, and talos rocking on its soles (gaps of
micrometres under their corners) within a few polishes a step.

By hand, a box (mass ``m``, no turn) falling at ``V`` onto its four corners with ``g_0 = 9.81``: its
free velocity is ``V' = V + g_0 dt`` down; above the plane by ``gap > TOUCHING_GAP`` with ``V' dt >
gap`` it lands, ``v+ = -gap / dt`` and the normal impulses sum to ``m (V' - gap / dt)``, ``q+`` on the
plane; within ``TOUCHING_GAP`` it stops, ``v+ = 0``, the impulses ``m V'``, and the position
correction moves it down to half the slop above the plane.
"""

import shutil
import tempfile
import warnings
from pathlib import Path

import dm_control
import mujoco
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from test_friction import DT, G, H, MASS, MODEL, Q0, TOL, Z, corners

from sparsedyn.contact.correction import CORRECTION_RTOL
from sparsedyn.contact.friction import ContactStepWarning
from sparsedyn.contact.friction_polish import FIRST
from sparsedyn.contact.friction_problem import ADMM_BUDGET, PENETRATION_SLOP, TOUCHING_GAP
from sparsedyn.interop.mujoco import q_from_mujoco, v_from_mujoco
import test_scene_fused
from test_scene_fused import _lowered, _talos_scene

talos = test_scene_fused.talos                      # (its fixture: talos on a floor, shared)


def fall(gap, speed, backend):
    """The step of the box (no turn) ``gap`` above the ground moving down at ``speed``."""
    q = Q0 + np.array([0, 0, gap, 0, 0, 0, 0])
    v = np.array([0, 0, 0, 0, 0, -speed])
    with sd.use_backend(backend), warnings.catch_warnings():
        warnings.simplefilter("error", ContactStepWarning)
        return q, sd.contact_step(MODEL, q, v, Z, corners(), DT)


@pytest.mark.parametrize("backend", ["numpy", "native"])
@pytest.mark.parametrize("gap", [3 * TOUCHING_GAP, 1e-4])
def test_a_box_above_the_touching_gap_lands_exactly_on_the_plane(backend, gap):
    speed = 2 * gap / DT                                            # it would pass the plane within the step
    q, s = fall(gap, speed, backend)
    vz = speed + G * DT                                             # the free velocity, down
    scale = rounding_bound(8) * vz
    assert abs(s.v[5] + gap / DT) <= TOL * vz + scale and np.abs(s.v[:5]).max() <= TOL * vz + scale
    assert abs(s.impulses[:, 2].sum() - MASS * (vz - gap / DT)) <= TOL * MASS * vz * 4
    assert abs(s.q[2] - H) <= DT * (TOL * vz + scale) + rounding_bound(4) * H      # on the plane


@pytest.mark.parametrize("backend", ["numpy", "native"])
@pytest.mark.parametrize("gap, speed", [(5e-9, 0.0), (0.5 * TOUCHING_GAP, 0.0), (0.5 * TOUCHING_GAP, 0.1)])
def test_a_box_within_the_touching_gap_stops_where_it_is(backend, gap, speed):
    """At rest 5 nm above the plane (what a correction's second-order motion leaves): no speculative
    push, the impulses are the weight's ``m g_0 dt`` and ``v+ = 0``; falling at 0.1 m/s within the
    touching gap it stops (``v+ = 0``, the impulses ``m V'``).  Its four corners carry the weight, so
    the position correction holds them: each is moved down onto the band's top, half the slop above
    the plane (the sweeps stop at CORRECTION_RTOL of the move)."""
    q, s = fall(gap, speed, backend)
    vz = speed + G * DT
    assert np.abs(s.v).max() <= TOL * vz + rounding_bound(8) * vz
    assert abs(s.impulses[:, 2].sum() - MASS * vz) <= TOL * MASS * vz * 4
    assert list(s.modes) == ["stick"] * 4
    assert abs(s.q[2] - (H + PENETRATION_SLOP / 2)) <= CORRECTION_RTOL * gap + DT * TOL * vz + rounding_bound(4) * H


def bar():
    """A bar of mass 1 with a large inertia 0.1 (kg m^2) on two points ``x = -0.1`` and ``x = +0.1``
    (z = -0.1): pushing one point up by ``p`` lifts the other by ``(1/m - 0.01/I) / (1/m + 0.01/I) p =
    0.9 / 1.1 p``."""
    b = sd.ModelBuilder("bar").add_body("bar", None, sd.make_joint("free"), mass=1.0, rot_inertia=0.1 * np.eye(3))
    model = b.add_frame("bar", "bar").build()
    return model, [sd.Contact("bar", "3d", friction=0.5, point=(x, 0.0, -0.1), name=f"p{i}")
                   for i, x in enumerate((0.1, -0.1))]


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_the_correction_holds_a_load_bearing_touching_point_within_half_the_slop(backend):
    """The bar resting on both points, the one at ``x = 0.1`` a micrometre inside the ground, the other
    on it: both carry half the weight, the correction moves the first onto the plane and would lift the
    second by ``0.9 / 1.1`` micrometres; held, it rises by half the slop, no more (the pull that keeps
    it there ends on the band's top: ``A l = [p, PENETRATION_SLOP / 2] / dt`` with ``A`` the normal
    block ``[[1.1, 0.9], [0.9, 1.1]]``)."""
    model, points = bar()
    p, dt = 1e-6, 1e-3
    angle = p / 0.2                                                  # the bar turned about y: x = 0.1 lower
    q = np.array([0, 0, 0.1 - p / 2, 0, np.sin(angle / 2), 0, np.cos(angle / 2)])
    second = angle ** 2 * 0.1                                        # the turn's second-order motion
    P = sd.contact_problem(model, q, np.zeros(6), np.zeros(6), points)
    assert abs(P.gap[0] + p) <= second and abs(P.gap[1]) <= second
    with sd.use_backend(backend), warnings.catch_warnings():
        warnings.simplefilter("error", ContactStepWarning)
        s = sd.contact_step(model, q, np.zeros(6), np.zeros(6), points, dt)
    assert list(s.modes) == ["stick", "stick"]
    after = sd.contact_problem(model, s.q, np.zeros(6), np.zeros(6), points).gap
    assert abs(after[0]) <= CORRECTION_RTOL * p + second
    assert abs(after[1] - PENETRATION_SLOP / 2) <= CORRECTION_RTOL * p + second


def humanoid_on_stairs():
    """dm_control's humanoid dropped in MuJoCo onto four stairs (boxes 0.4 m deep, rising 0.1 m) and
    settled for 1.5 s: it sits with its legs folded under it, its feet pressed against each other and
    its arms, head and hips on the lowest stair and the floor.  ``(model, scene, q, v, dt)``."""
    suite = Path(dm_control.__file__).parent / "suite"
    floor = '<geom name="floor" type="plane" conaffinity="1" size="100 100 .2" material="grid"/>'
    stairs = floor + "".join(f'<geom name="stair{i}" type="box" pos="{0.4 * i - 0.5} 0 {0.05 * (i + 1)}" '
                             f'size="0.2 1 {0.05 * (i + 1)}"/>' for i in range(4))
    with tempfile.TemporaryDirectory() as tmp, warnings.catch_warnings():
        warnings.simplefilter("ignore")                 # the file's sites and sensors the model leaves out
        shutil.copytree(suite / "common", Path(tmp) / "common")
        path = Path(tmp) / "stairs.xml"
        path.write_text((suite / "humanoid.xml").read_text().replace(floor, stairs))
        m = mujoco.MjModel.from_xml_path(str(path))
        d = mujoco.MjData(m)
        for _ in range(1500):
            mujoco.mj_step(m, d)
        model = sd.load_mjcf(str(path), geometry=True)
    return model, sd.Scene(model), q_from_mujoco(model, d.qpos), v_from_mujoco(model, d.qpos, d.qvel), m.opt.timestep


def test_the_humanoid_on_stairs_with_its_legs_folded_is_solved_within_admms_budget():
    """300 steps (1.5 s) from the settled state: every step solved to tol by ADMM (and its polish)
    within its budget, no warning (each self-contact pushed apart by the correction once lifted the
    resting head, hands and hips by nanometres, and their speculative push asked for a motion that only
    slipping at the edge of the friction cones gives: 11 steps stopped at 1000 ADMM iterations and
    10000 sweeps)."""
    model, scene, q, v, dt = humanoid_on_stairs()
    with sd.use_backend("native", deterministic=True), warnings.catch_warnings():
        warnings.simplefilter("error", ContactStepWarning)
        r = sd.rollout(model, q, v, np.zeros(model.nv), scene, dt, 300)
    assert np.max(r.iterations) < ADMM_BUDGET
    assert np.all(np.isfinite(r.q[-1])) and np.all(np.isfinite(r.v[-1]))


def test_talos_rocking_on_its_soles_is_solved_within_a_few_iterations_a_step(talos):
    """talos on its soles, pressed 0.1 mm into the floor and sinking at 5 cm/s, no torque (its joints give
    way): 300 steps of 1 ms.  Its soles rock on their corners, which open gaps of micrometres; within
    ``TOUCHING_GAP`` a corner is touching, not a speculative push ``gap / dt`` that the sole could follow
    only by tilting, which slides its sticking corners along the floor at the edge of their cones (with
    0.1 um for the touching gap: steps of up to 30 iterations here, and 1,524 past ADMM's budget on talos
    settled standing in MuJoCo).  Every step solved to tol (no warning) in its first polishes."""
    scene = _talos_scene(talos)
    q = _lowered(talos, scene, talos.neutral(), -1e-4)
    v = np.r_[0.0, 0.0, -0.05, np.zeros(talos.nv - 3)]
    with sd.use_backend("native", deterministic=True), warnings.catch_warnings():
        warnings.simplefilter("error", ContactStepWarning)
        r = sd.rollout(talos, q, v, np.zeros(talos.nv), scene, 1e-3, 300)
    assert np.max(r.iterations) <= 4 * FIRST, np.max(r.iterations)
