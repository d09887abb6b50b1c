"""The joints' springs and dampers (sparsedyn.algorithms.passive) against MuJoCo's ``qfrc_spring +
qfrc_damper`` on the same MJCF files (a free body with a ball, a slide and a hinge below it, each with a
spring and a damper; the dm_control humanoid), their derivatives against central differences on the
tangent space, and the roads, batches and plain lists against one another."""

from pathlib import Path

import dm_control
import mujoco
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err, rounding_bound
from sparsedyn.interop.mujoco import q_from_mujoco, tau_from_mujoco, v_from_mujoco

#: Every kind of joint MuJoCo springs: a free joint (its spring on the origin in the world and on the
#: rotation), a ball, a slide and a hinge (``springref`` in degrees, the file's angle unit).
SPRUNG = """<mujoco><worldbody><body name="base" pos="0.1 -0.2 1" quat="0.9 0.1 0.3 0.2">
<joint name="root" type="free" damping="0.7" stiffness="5"/><geom type="box" size="0.1 0.2 0.05" mass="3"/>
<body name="a" pos="0.1 0 0"><joint name="ball" type="ball" damping="0.4" stiffness="3"/>
<geom type="capsule" fromto="0 0 0 0.3 0 0" size="0.03" mass="1"/>
<body name="b" pos="0.3 0 0"><joint name="s1" type="slide" axis="1 0 0" damping="0.5" stiffness="20" springref="0.05"/>
<geom type="box" size="0.05 0.05 0.05" mass="0.5"/>
<body name="c" pos="0.1 0 0"><joint name="h2" type="hinge" axis="0 0 1" damping="0.1" stiffness="2" springref="10"/>
<geom type="capsule" fromto="0 0 0 0 0.2 0" size="0.02" mass="0.3"/></body></body></body></body></worldbody></mujoco>"""

HUMANOID = Path(dm_control.__file__).parent / "suite" / "humanoid.xml"


def _sprung(tmp_path):
    path = tmp_path / "sprung.xml"
    path.write_text(SPRUNG)
    return mujoco.MjModel.from_xml_path(str(path)), sd.load_mjcf(str(path))


def _humanoid():
    with pytest.warns(sd.MjcfWarning):
        return mujoco.MjModel.from_xml_path(str(HUMANOID)), sd.load_mjcf(str(HUMANOID))


def _random_mujoco_state(m, rng):
    """A random ``(qpos, qvel)`` of MuJoCo's model ``m``: its joints moved from ``qpos0`` (quaternions
    drawn uniformly), velocities of order one."""
    qpos = m.qpos0.copy()
    for j in range(m.njnt):
        a, kind = m.jnt_qposadr[j], m.jnt_type[j]
        if kind == mujoco.mjtJoint.mjJNT_FREE:
            qpos[a:a + 3] += rng.uniform(-0.3, 0.3, 3)
            quat = rng.standard_normal(4)
            qpos[a + 3:a + 7] = quat / np.linalg.norm(quat)
        elif kind == mujoco.mjtJoint.mjJNT_BALL:
            quat = rng.standard_normal(4)
            qpos[a:a + 4] = quat / np.linalg.norm(quat)
        else:
            qpos[a] += rng.uniform(-1.0, 1.0)
    return qpos, rng.standard_normal(m.nv)


@pytest.mark.parametrize("case", ["sprung", "humanoid"])
def test_equal_to_mujocos_spring_and_damper_forces(case, tmp_path):
    """At random states, ``passive_forces`` is MuJoCo's ``qfrc_spring + qfrc_damper`` (mapped to the
    model's velocity layout), to rounding: the same few products per dof."""
    m, model = _sprung(tmp_path) if case == "sprung" else _humanoid()
    d = mujoco.MjData(m)
    assert np.any(model.joint_dynamics.stiffness) and np.any(model.joint_dynamics.damping)
    rng = np.random.default_rng(7)
    for _ in range(5):
        d.qpos[:], d.qvel[:] = _random_mujoco_state(m, rng)
        mujoco.mj_forward(m, d)
        ref = tau_from_mujoco(model, d.qpos, d.qfrc_spring + d.qfrc_damper)
        q, v = q_from_mujoco(model, d.qpos), v_from_mujoco(model, d.qpos, d.qvel)
        assert np.abs(ref).max() > 1.0                        # (springs stretched: not a comparison of zeros)
        assert rel_err(sd.passive_forces(model, q, v), ref) <= rounding_bound(16)


def test_a_model_with_no_joint_dynamics_has_none(rng):
    """A built model with no springs or dampers: zero forces and zero derivatives."""
    model = sd.ModelBuilder("arm").add_body("l1", None, sd.make_joint("revolute", axis=(0, 0, 1)), mass=1.0,
                                            rot_inertia=np.eye(3)).build()
    assert np.array_equal(sd.passive_forces(model, [0.3], [2.0]), [0.0])
    assert all(np.array_equal(x, [[0.0]]) for x in sd.passive_forces_derivatives(model, [0.3], [2.0]))


def _differences(model, q, v, h):
    """Central differences of ``passive_forces`` on the tangent space of ``q`` and along ``v``."""
    nv = model.nv
    Dq, Dv = np.zeros((nv, nv)), np.zeros((nv, nv))
    for k in range(nv):
        e = np.zeros(nv)
        e[k] = h
        Dq[:, k] = (sd.passive_forces(model, sd.integrate(model, q, e), v) -
                    sd.passive_forces(model, sd.integrate(model, q, -e), v)) / (2 * h)
        Dv[:, k] = (sd.passive_forces(model, q, v + e) - sd.passive_forces(model, q, v - e)) / (2 * h)
    return Dq, Dv


@pytest.mark.parametrize("case", ["sprung", "humanoid"])
def test_derivatives_equal_central_differences(case, tmp_path):
    """``passive_forces_derivatives`` against central differences at steps h and h / 2: the error is
    within twice their difference (the truncation, O(h^2)) plus the rounding ``eps |tau| / h``."""
    _, model = _sprung(tmp_path) if case == "sprung" else _humanoid()
    rng = np.random.default_rng(3)
    h = 1e-4
    for _ in range(3):
        q, v = model.random_configuration(rng), rng.standard_normal(model.nv)
        Dq, Dv = sd.passive_forces_derivatives(model, q, v)
        D1, D2 = _differences(model, q, v, h), _differences(model, q, v, h / 2)
        noise = 8 * np.finfo(float).eps * max(1.0, float(np.abs(sd.passive_forces(model, q, v)).max())) / (h / 2)
        for got, a, b in zip((Dq, Dv), D1, D2):
            assert np.abs(got - b).max() <= 2 * np.abs(a - b).max() + noise
        assert np.abs(Dq).max() > 1.0                        # (not a comparison of zeros)


def test_native_road_batches_and_plain_lists(tmp_path):
    """The native road equals the NumPy road to rounding; a batch equals its states one by one; plain
    lists give the arrays' results."""
    _, model = _sprung(tmp_path)
    rng = np.random.default_rng(1)
    Q = np.array([model.random_configuration(rng) for _ in range(4)])
    V = rng.standard_normal((4, model.nv))
    with sd.use_backend("numpy"):
        ref = sd.passive_forces(model, Q, V)
        dref = sd.passive_forces_derivatives(model, Q, V)
    with sd.use_backend("native", deterministic=True):
        assert rel_err(sd.passive_forces(model, Q, V), ref) <= rounding_bound(16)
        for a, b in zip(sd.passive_forces_derivatives(model, Q, V), dref):
            assert rel_err(a, b) <= rounding_bound(16)
    for b in range(4):
        assert np.array_equal(sd.passive_forces(model, Q[b], V[b]), ref[b])
        assert np.array_equal(sd.passive_forces(model, Q[b].tolist(), tuple(V[b])), ref[b])
        assert all(np.array_equal(x, y[b]) for x, y in zip(sd.passive_forces_derivatives(model, Q[b].tolist(),
                                                                                       V[b].tolist()), dref))


def test_bad_shapes_are_errors_naming_the_argument(tmp_path):
    _, model = _sprung(tmp_path)
    with pytest.raises(ValueError, match="v"):
        sd.passive_forces(model, model.neutral(), np.zeros(model.nv + 1))
    with pytest.raises(ValueError, match="q"):
        sd.passive_forces(model, np.zeros(3), np.zeros(model.nv))
