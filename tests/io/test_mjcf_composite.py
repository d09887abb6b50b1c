"""MJCF bodies with several joints: one body moved by one composite joint, against MuJoCo (mass
matrix ``mj_fullM``, bias forces ``qfrc_bias``, forward dynamics ``qacc``), and the cases that stay
chains of massless bodies.  MuJoCo and dm-control are test dependencies: these oracle tests fail,
never skip, without them."""

import warnings
from pathlib import Path

import dm_control
import mujoco
import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err, rounding_bound, solve_bound
from sparsedyn.codegen.trace import variant
from sparsedyn.interop import mujoco as mjx

HUMANOID = Path(dm_control.__file__).parent / "suite" / "humanoid.xml"
_D = mujoco.mjtDisableBit
#: Everything but the rigid-body dynamics is switched off in MuJoCo (gravity kept).
RIGID_ONLY = int(_D.mjDSBL_CONTACT | _D.mjDSBL_CONSTRAINT | _D.mjDSBL_EQUALITY | _D.mjDSBL_LIMIT
                 | _D.mjDSBL_FRICTIONLOSS | _D.mjDSBL_SPRING | _D.mjDSBL_DAMPER | _D.mjDSBL_ACTUATION)

MULTI = """
<mujoco model="multi">
  <option gravity="0.3 -0.2 -9.81"/>
  <default><joint armature="0.02" damping="0.3"/></default>
  <worldbody>
    <body name="base" pos="0 0 1" euler="10 0 20">
      <freejoint name="root"/>
      <geom type="box" size="0.2 0.1 0.05" mass="5"/>
      <body name="hip" pos="0.1 0.1 -0.05" euler="0 15 0">
        <joint name="hip_z" type="hinge" axis="0 0 1" pos="0.01 -0.02 0.03" range="-40 40" ref="20"/>
        <joint name="hip_x" type="hinge" axis="1 0.2 0" pos="0.01 -0.02 0.03" armature="0.05"/>
        <joint name="hip_y" type="hinge" axis="0 1 0" pos="0.01 -0.02 0.03" range="-90 30" stiffness="2"/>
        <geom type="capsule" fromto="0 0 0 0 0 -0.4" size="0.05" mass="2"/>
        <body name="shin" pos="0 0 -0.4">
          <joint name="knee" type="hinge" axis="0 1 0"/>
          <joint name="knee_slide" type="slide" axis="0 0.3 1" pos="0.3 0 0" range="-0.05 0.05"/>
          <geom type="capsule" fromto="0 0 0 0.1 0 -0.4" size="0.04" mass="1.2"/>
          <body name="foot" pos="0 0 -0.4">
            <joint name="toe" type="hinge" axis="1 0 0" pos="0 0.01 0.02"/>
            <joint name="ankle" type="ball" pos="0 0.01 0.02"/>
            <geom type="box" size="0.1 0.05 0.02" pos="0.05 0 0" mass="0.5"/>
            <site name="sole" pos="0.05 0 -0.02"/>
          </body>
        </body>
      </body>
      <body name="slider" pos="-0.2 0 0">
        <joint name="sx" type="slide" axis="1 0 0"/>
        <joint name="sy" type="slide" axis="0 1 0" pos="0.1 0 0"/>
        <joint name="sz" type="slide" axis="0 0 1"/>
        <geom type="sphere" size="0.05" mass="0.7"/>
      </body>
    </body>
  </worldbody>
  <sensor><force name="f_sole" site="sole"/><torque name="t_sole" site="sole"/></sensor>
</mujoco>
"""


def _load(source, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.MjcfWarning)
        return sd.load_mjcf(source, **kw)


def _mj(source):
    mm = mujoco.MjModel.from_xml_path(str(source)) if isinstance(source, Path) else \
        mujoco.MjModel.from_xml_string(source)
    mm.opt.disableflags |= RIGID_ONLY
    return mm


def assert_dynamics_match_mujoco(model, mm, seeds=range(3), frames=True):
    """Mass matrix, bias forces and forward dynamics against MuJoCo at random states, to the
    bounds of two float64 evaluations that differ only in rounding (conftest); ``frames``: and
    each MuJoCo body's pose against the Model's frame of its name."""
    md = mujoco.MjData(mm)
    for seed in seeds:
        rng = np.random.default_rng(seed)
        q = model.random_configuration(rng)
        v, tau = rng.normal(size=(2, model.nv))
        md.qpos[:], md.qvel[:] = mjx.q_to_mujoco(model, q), mjx.v_to_mujoco(model, q, v)
        md.qfrc_applied[:] = mjx.tau_to_mujoco(model, q, tau)
        mujoco.mj_forward(mm, md)
        M = np.zeros((mm.nv, mm.nv))
        mujoco.mj_fullM(mm, md, M)
        T = mjx.velocity_map(model, q)
        H = sd.crba(model, q)
        n = model.nv + model.nbodies
        assert rel_err(H, T.T @ M @ T) <= rounding_bound(n), seed
        # MuJoCo's bias is the inverse dynamics at qacc = 0, which is our a = a_from_mujoco(0)
        a0 = mjx.a_from_mujoco(model, md.qpos, md.qvel, np.zeros(model.nv))
        bias = mjx.tau_from_mujoco(model, md.qpos, md.qfrc_bias)
        assert rel_err(sd.rnea(model, q, v, a0), bias) <= rounding_bound(n, 1.0 + np.abs(H).max()), seed
        qacc = mjx.a_to_mujoco(model, q, v, sd.aba(model, q, v, tau))
        assert rel_err(qacc, md.qacc) <= solve_bound(M, md.qacc, c=2.0 * n), seed
        for b in range(1, mm.nbody if frames else 1):       # every MuJoCo body where MuJoCo puts it
            R, p = sd.frame_placement(model, q, mm.body(b).name)
            assert rel_err(p, md.xpos[b]) <= rounding_bound(n) and rel_err(R, md.xmat[b].reshape(3, 3)) \
                <= rounding_bound(n), (seed, mm.body(b).name)


def test_several_joints_in_a_body_are_one_composite_joint():
    model = _load(MULTI)
    assert model.body_names == ("base", "hip", "shin", "foot", "slider")        # no massless bodies
    assert model.joint_names == ("root", "hip_z+hip_x+hip_y", "knee+knee_slide", "toe+ankle", "sx+sy+sz")
    assert [j.type for j in model.joints] == ["free"] + ["composite"] * 4
    assert [[p.type for p in j.joints] for j in model.joints[1:]] == [
        ["revolute"] * 3, ["revolute", "prismatic"], ["revolute", "spherical"], ["prismatic"] * 3]
    hip = model.joints[1]
    assert np.allclose(hip.joints[1].axis, np.array([1, 0.2, 0]) / np.linalg.norm([1, 0.2, 0]), rtol=0, atol=1e-15)
    assert (model.nq, model.nv) == (7 + 3 + 2 + 5 + 3, 6 + 3 + 2 + 4 + 3)
    mm = _mj(MULTI)
    # q is qpos (reference folded in), limits and per-dof data at MuJoCo's coordinates
    assert np.allclose(mjx.q_to_mujoco(model, model.joint_dynamics.reference), mm.qpos0, rtol=0, atol=1e-15)
    assert np.isclose(model.lower[7], np.deg2rad(-40)) and np.isclose(model.upper[9], np.deg2rad(30))
    assert model.lower[8] == -np.inf and np.isclose(model.upper[11], 0.05)
    assert np.array_equal(model.armature, mjx.tau_from_mujoco(model, mm.qpos0, mm.dof_armature))
    assert model.armature[7] == 0.05 and model.joint_dynamics.damping[8] == 0.3
    assert model.joint_dynamics.stiffness.tolist() == [0.0] * 8 + [2.0] + [0.0] * 9
    assert abs(model.total_mass - mm.body_mass.sum()) <= 1e-14 * mm.body_mass.sum()
    assert_dynamics_match_mujoco(model, mm)
    # exported back to MJCF: the same joints in the same bodies
    back = mjx.load_mujoco(model)
    assert [back.joint(j).name for j in range(back.njnt)] == [mm.joint(j).name for j in range(mm.njnt)]
    assert back.body_jntnum.tolist() == mm.body_jntnum.tolist()
    back.opt.disableflags |= RIGID_ONLY
    assert_dynamics_match_mujoco(model, back, seeds=[0], frames=False)   # its bodies sit at our body frames


def test_force_sensor_on_a_composite_body_measures_its_joint():
    model = _load(MULTI)
    assert model.sensor("f_sole").joint == "toe+ankle" and model.sensor("t_sole").joint == "toe+ankle"
    mm = _mj(MULTI)
    md = mujoco.MjData(mm)
    rng = np.random.default_rng(5)
    q = model.random_configuration(rng)
    v = rng.normal(size=model.nv)
    md.qpos[:], md.qvel[:] = mjx.q_to_mujoco(model, q), mjx.v_to_mujoco(model, q, v)
    mujoco.mj_forward(mm, md)
    a = mjx.a_from_mujoco(model, md.qpos, md.qvel, md.qacc)
    y, _ = sd.EstimationProblem(model).measurements(q, v, a)
    y_mj = sd.mjcf_measurements(model, mm, md.sensordata)
    assert rel_err(y[model.nv:], y_mj) <= rounding_bound(model.nv + model.nbodies, 1.0 + np.abs(y_mj).max())


def test_dm_control_humanoid_hips_shoulders_and_abdomen():
    model = _load(HUMANOID)
    chain = _load(HUMANOID, composite_joints=False)
    mm = _mj(HUMANOID)
    # abdomen (2 hinges), hips (3 each), shoulders (2 each) about one anchor, and the ankles, whose two
    # hinges sit at different anchors (placements between the parts): 9 massless bodies fewer
    assert chain.nbodies - model.nbodies == 1 + 2 * 2 + 2 * 1 + 2 * 1
    assert not [n for n in model.body_names if "/" in n] and np.all(model.mass > 0)     # no massless bodies
    assert int(sum(mm.body_jntnum[b] > 1 for b in range(mm.nbody))) == 7
    assert "abdomen_z+abdomen_y" in model.joint_names and "right_hip_x+right_hip_z+right_hip_y" in model.joint_names
    ankle = model.joints[model.joint("right_ankle_y+right_ankle_x")]
    assert ankle.part_placements[0] is None and ankle.part_placements[1] is not None
    assert "abdomen_y" in chain.joint_names
    assert_dynamics_match_mujoco(model, mm)
    # the chain and the composite are the same mechanism
    q = model.random_configuration(np.random.default_rng(9))
    assert rel_err(sd.crba(model, q), sd.crba(chain, q)) <= rounding_bound(chain.nv + chain.nbodies)


def _one_body(xml, eq=""):
    return (f'<mujoco><compiler angle="radian"/><worldbody><body name="w" pos="0 0 1">{xml}'
            f'<geom size="0.1" pos="0.1 0.2 0" mass="1"/></body></worldbody>{eq}</mujoco>')


def test_chain_kept_where_a_joint_equality_names_a_part():
    src = _one_body('<joint name="a" type="hinge" axis="1 0 0"/><joint name="b" type="hinge" axis="0 1 0"/>',
                    '<equality><joint joint1="a" joint2="b"/></equality>')
    model = _load(src)
    assert model.body_names == ("w/a", "w") and model.joint_names == ("a", "b")
    assert_dynamics_match_mujoco(model, _mj(src), seeds=[0])


@pytest.mark.parametrize("what, xml", [
    ("anchors differ", '<joint name="a" type="hinge" axis="1 0 0"/><joint name="b" type="hinge" axis="0 1 0" '
                       'pos="0 0 0.1"/>'),
    ("a later reference", '<joint name="a" type="hinge" axis="1 0 0"/><joint name="b" type="hinge" '
                          'axis="0 1 0" ref="0.3"/>'),
    ("anchors, references and a ball", '<joint name="a" type="slide" axis="0 1 1" pos="0.2 0 0" ref="0.1"/>'
     '<joint name="b" type="hinge" axis="1 0.3 0" pos="0 0.1 0.2" ref="-0.4"/><joint name="d" type="ball" '
     'pos="0.05 -0.1 0"/>'
     '<joint name="e" type="slide" axis="1 0 0" pos="0.3 0.3 0" ref="-0.2"/>'),
])
def test_parts_at_their_own_anchors_are_one_composite_joint(what, xml):
    """MuJoCo's B0 T(p1) J1 T(-p1) T(p2) J2 ...: one composite joint whose parts sit at T(pk - p(k-1))
    (their placements; a part's ref folded in), the MuJoCo body frame at the last anchor."""
    src = _one_body(xml)
    model = _load(src)
    names = [n for n in "abcde" if f'name="{n}"' in xml]
    assert model.body_names == ("w",) and model.joint_names == ("+".join(names),)
    assert model.joints[0].type == "composite" and any(P is not None for P in model.joints[0].part_placements)
    assert_dynamics_match_mujoco(model, _mj(src))
    # the same mechanism as the chain of massless bodies
    chain = _load(src, composite_joints=False)
    q = model.random_configuration(np.random.default_rng(4))
    assert rel_err(sd.crba(model, q), sd.crba(chain, q)) <= rounding_bound(chain.nv + chain.nbodies)
    # exported back: anchors where the placements are translations; a rotated placement (a later ref) is refused
    if "ref" not in xml:
        back = mjx.load_mujoco(model)
        assert back.body_jntnum.tolist() == [0, len(names)]
        back.opt.disableflags |= RIGID_ONLY
        assert_dynamics_match_mujoco(model, back, seeds=[0], frames=False)
    else:
        with pytest.raises(ValueError, match=r"joint '[a-e+]+' of model .*placed with a rotation"):
            mjx.to_mjcf(model)


def test_composite_joints_false_keeps_the_chain():
    model = _load(MULTI, composite_joints=False)
    assert model.body_names[:4] == ("base", "hip/hip_z", "hip/hip_x", "hip")
    assert "hip_x" in model.joint_names and "composite" not in {j.type for j in model.joints}
    assert_dynamics_match_mujoco(model, _mj(MULTI), seeds=[0])


PLACED = _one_body('<joint name="a" type="slide" axis="0 1 1" pos="0.2 0 0" ref="0.1"/><joint name="b" '
                   'type="hinge" axis="1 0.3 0" pos="0 0.1 0.2" ref="-0.4"/><joint name="d" type="ball" '
                   'pos="0.05 -0.1 0"/>')


@pytest.mark.parametrize("source", [MULTI, PLACED], ids=["multi", "parts-placed-apart"])
def test_native_road_equals_numpy_on_composite_joints(source):
    model = _load(source)
    rng = np.random.default_rng(3)
    q, v, tau = model.random_configuration(rng), *rng.normal(size=(2, model.nv))
    ref = (sd.rnea(model, q, v, tau), sd.crba(model, q), sd.aba(model, q, v, tau))
    with sd.use_backend("native", deterministic=True):
        out = (sd.rnea(model, list(q), list(v), list(tau)), sd.crba(model, q), sd.aba(model, q, v, tau))
        kernels = sd.compile(model).kernels
    assert {variant(f).name for f in ("rnea", "crba", "aba")} <= set(kernels)      # they ran native
    H = ref[1]
    n = model.nv + model.nbodies
    assert rel_err(out[0], ref[0]) <= rounding_bound(n, 1.0 + np.abs(H).max())
    assert rel_err(out[1], ref[1]) <= rounding_bound(n)
    assert rel_err(out[2], ref[2]) <= solve_bound(H, ref[2], c=2.0 * n)


LOOPED = """<mujoco><worldbody><body name="a" pos="0 0 1"><joint name="j1" type="hinge" axis="1 0 0"/>
  <joint name="j2" type="hinge" axis="0 1 0"/><geom size="0.1" pos="0.3 0 0" mass="1"/></body></worldbody>
  <equality><connect body1="a" anchor="0.3 0 0"/></equality></mujoco>"""


def test_constraints_default_to_chains_and_the_composite_gives_the_same_answer():
    model, cs = _load(LOOPED, constraints=True)
    assert model.joint_names == ("j1", "j2") and model.body_names == ("a/j1", "a")
    # the mass sits on the connect point, which lies on j1's axis: at rest it stays, the constraint
    # carrying its weight
    fd = sd.constrained_forward_dynamics(cs, model.neutral(), [0.0, 0.0], [0.0, 0.0])
    assert np.abs(fd.a).max() <= rounding_bound(4, 9.81)
    assert abs(np.linalg.norm(fd.lam) - 9.81) <= rounding_bound(4, 9.81)
    chain = fd
    model, cs = _load(LOOPED, constraints=True, composite_joints=True)
    assert model.joint_names == ("j1+j2",)
    # the constraint layer takes the composite joint too (its S varies with q): the same answer
    fd = sd.constrained_forward_dynamics(cs, model.neutral(), [0.0, 0.0], [0.0, 0.0])
    assert np.abs(fd.a).max() <= rounding_bound(4, 9.81)
    assert abs(np.linalg.norm(fd.lam) - np.linalg.norm(chain.lam)) <= rounding_bound(4, 9.81)
