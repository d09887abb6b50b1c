"""Pinocchio interop: layout conversions, and Pinocchio as an oracle for our kernels.

Pinocchio (``pin`` on PyPI) is a test dependency: these tests fail, not skip, without it.
"""

import dataclasses
import subprocess
import sys

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn import spatial
from sparsedyn.model.builders import humanoid, random_tree, serial_chain
from sparsedyn.interop import pinocchio as sp

TOL = 1e-9
REFERENCES = {"local": pin.ReferenceFrame.LOCAL, "world": pin.ReferenceFrame.WORLD,
              "local_world_aligned": pin.ReferenceFrame.LOCAL_WORLD_ALIGNED}


def rel(x, y):
    """Relative error ``max|x - y| / max(1, max|y|)``."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    assert x.shape == y.shape, (x.shape, y.shape)
    return np.abs(x - y).max(initial=0.0) / max(1.0, np.abs(y).max(initial=0.0))


def _models():
    out = {}
    for seed in range(3):
        for fb in (False, True):
            out[f"all-s{seed}-{'float' if fb else 'fixed'}"] = random_tree(
                12, branching=1.0 + seed * 0.8, skew=0.3 * seed, taper=0.95, joint_types="all", seed=seed,
                floating_base=fb, nframes=4)
    out["humanoid"] = humanoid()
    out["chain"] = serial_chain(4, joint="helical", axis=(1, 2, 3))
    g = random_tree(6, joint_types="all", seed=11, floating_base=True)
    out["gravity"] = dataclasses.replace(g, gravity=np.array([0.3, -1.2, -9.5]))
    return out


MODELS = _models()


@pytest.fixture(scope="module", params=sorted(MODELS))
def pair(request):
    m = MODELS[request.param]
    return m, sp.to_pinocchio(m)


def _state(m, seed):
    rng = np.random.default_rng(seed)
    return (m.random_configuration(rng), rng.normal(size=m.nv), rng.normal(size=m.nv),
            rng.normal(size=(m.nbodies, 6)))


def _pin_frame_id(m, pm, name):
    k = m.frame(name)
    ftype = pin.FrameType.BODY if m.body_names[m.frames[k].body] == name else pin.FrameType.OP_FRAME
    fid = pm.getFrameId(name, ftype)
    assert fid < len(pm.frames), name
    return fid


# --- layouts ----------------------------------------------------------------------

def test_layout_round_trips(pair):
    m, pm = pair
    rng = np.random.default_rng(0)
    q = np.stack([[m.random_configuration(rng) for _ in range(3)] for _ in range(2)])   # (2, 3, nq)
    v = rng.normal(size=(2, 3, m.nv))
    qp = sp.q_to_pinocchio(m, q)
    assert qp.shape == (2, 3, pm.nq) and sp.pinocchio_nq(m) == pm.nq
    assert rel(sp.q_from_pinocchio(m, qp), q) < 1e-14
    assert rel(sp.q_to_pinocchio(m, sp.q_from_pinocchio(m, qp)), qp) < 1e-14
    for to, back in ((sp.v_to_pinocchio, sp.v_from_pinocchio), (sp.tau_to_pinocchio, sp.tau_from_pinocchio)):
        assert to(m, v).shape == v.shape
        assert np.array_equal(back(m, to(m, v)), v) and np.array_equal(to(m, back(m, v)), v)
    J = rng.normal(size=(2, 6, m.nv))
    assert np.array_equal(sp.jacobian_from_pinocchio(m, sp.jacobian_to_pinocchio(m, J)), J)
    f = rng.normal(size=(3, m.nbodies, 6))
    assert np.array_equal(sp.force_from_pinocchio(sp.force_to_pinocchio(f)), f)
    assert np.array_equal(sp.force_to_pinocchio(f)[..., :3], f[..., 3:])
    assert np.array_equal(sp.motion_to_pinocchio(J, axis=-2)[..., :3, :], J[..., 3:, :])
    assert np.array_equal(sp.motion_from_pinocchio(sp.motion_to_pinocchio(J, axis=-2), axis=-2), J)


def test_neutral_integrate_difference_match_pinocchio(pair):
    m, pm = pair
    assert np.array_equal(pin.neutral(pm), sp.q_to_pinocchio(m, m.neutral()))
    rng = np.random.default_rng(1)
    for seed in range(3):
        q0, v, _, _ = _state(m, seed)
        q0p = sp.q_to_pinocchio(m, q0)
        # Same configuration, judged by Pinocchio (a quaternion may come back with the other sign).
        q1p = pin.integrate(pm, q0p, sp.v_to_pinocchio(m, v))
        assert rel(pin.difference(pm, q1p, sp.q_to_pinocchio(m, sd.integrate(m, q0, v))), np.zeros(m.nv)) < TOL
        # Steps of less than half a turn per joint, where both differences are the shortest path, and
        # not tiny: Pinocchio's SE(2) log loses about eps / theta^2 relative accuracy for small theta.
        dv = rng.choice([-1.0, 1.0], m.nv) * rng.uniform(0.05, 0.5, m.nv)
        q1 = sd.integrate(m, q0, dv)
        d_pin = sp.v_from_pinocchio(m, pin.difference(pm, q0p, sp.q_to_pinocchio(m, q1)))
        assert rel(d_pin, sd.difference(m, q0, q1)) < TOL and rel(d_pin, dv) < TOL


def test_continuous_difference_is_not_wrapped():
    """Our continuous joint lives on the real line (nq = 1); Pinocchio's on the circle ([cos, sin])."""
    m = serial_chain(1, joint="continuous")
    pm = sp.to_pinocchio(m)
    q0, q1 = np.array([-2.0]), np.array([2.5])
    assert np.allclose(sd.difference(m, q0, q1), [4.5])
    d_pin = pin.difference(pm, sp.q_to_pinocchio(m, q0), sp.q_to_pinocchio(m, q1))
    assert np.allclose(d_pin, [4.5 - 2 * np.pi])
    assert np.allclose(sp.q_from_pinocchio(m, sp.q_to_pinocchio(m, np.array([4.0]))), [4.0 - 2 * np.pi])


OPTIONS = {"universal": {"axes": ((0.0, 0.6, 0.8), (1.0, 0.2, 0.0))},
           "composite": {"joints": (sd.make_joint("prismatic", (0.0, 0.6, 0.8)), sd.make_joint("spherical"),
                                    sd.make_joint("universal"), sd.make_joint("spherical_yxz"))}}


@pytest.mark.parametrize("jtype", sorted(sd.JOINT_TYPES))
def test_single_joint_conventions(jtype):
    """One joint behind a turned, offset placement: placement and body twist agree with Pinocchio
    (Euler orders other than ZYX and composite joints as Pinocchio composites)."""
    joint = sd.make_joint(jtype, axis=(0.3, -0.5, 0.8), pitch=0.37, **OPTIONS.get(jtype, {}))
    Xtree = spatial.from_pose(spatial.quat_to_rot(np.array([0.1, 0.2, -0.3, 0.9]) / np.sqrt(0.95)), [0.1, -0.2, 0.3])
    m = sd.ModelBuilder("one").add_body("b", None, joint, Xtree, mass=1.0, rot_inertia=np.eye(3)).build()
    pm = sp.to_pinocchio(m)
    d = pm.createData()
    for seed in range(3):
        q, v, _, _ = _state(m, seed)
        pin.forwardKinematics(pm, d, sp.q_to_pinocchio(m, q), sp.v_to_pinocchio(m, v))
        R, p = sd.forward_kinematics(m, q)
        assert rel(d.oMi[1].rotation, R[0]) < TOL and rel(d.oMi[1].translation, p[0]) < TOL
        assert rel(sp.motion_from_pinocchio(d.v[1].vector), sd.body_velocities(m, q, v)[0]) < TOL


# --- to_pinocchio as an oracle for our kernels --------------------------------------

def test_to_pinocchio_model_data(pair):
    m, pm = pair
    assert (pm.njoints, pm.nv) == (m.nbodies + 1, m.nv)
    assert list(pm.names[1:]) == list(m.joint_names)
    assert [p - 1 for p in pm.parents[1:]] == list(m.parent)
    assert np.allclose(pm.gravity.linear, m.gravity) and np.allclose(pm.gravity.angular, 0)
    for i in range(m.nbodies):   # Pinocchio's 6x6 inertia is ours with [v; omega] ordering
        assert rel(pm.inertias[i + 1].matrix(), np.roll(m.inertia[i], (3, 3), (0, 1))) < 1e-13
    lim = np.isfinite(m.effort_limit)
    assert np.array_equal(sp.tau_from_pinocchio(m, pm.effortLimit)[lim], m.effort_limit[lim])
    assert np.all(sp.tau_from_pinocchio(m, pm.effortLimit)[~lim] == np.finfo(float).max)


def test_forward_kinematics_and_frames(pair):
    m, pm = pair
    d = pm.createData()
    for seed in range(3):
        q, _, _, _ = _state(m, seed)
        pin.framesForwardKinematics(pm, d, sp.q_to_pinocchio(m, q))
        R, p = sd.forward_kinematics(m, q)
        for i in range(m.nbodies):
            assert rel(d.oMi[i + 1].rotation, R[i]) < TOL and rel(d.oMi[i + 1].translation, p[i]) < TOL
        Rf, pf = sd.frame_placements(m, q)
        for k, f in enumerate(m.frames):
            M = d.oMf[_pin_frame_id(m, pm, f.name)]
            assert rel(M.rotation, Rf[k]) < TOL and rel(M.translation, pf[k]) < TOL


@pytest.mark.parametrize("reference", sorted(REFERENCES))
def test_frame_jacobians(pair, reference):
    m, pm = pair
    d = pm.createData()
    q, _, _, _ = _state(m, 5)
    pin.computeJointJacobians(pm, d, sp.q_to_pinocchio(m, q))
    pin.updateFramePlacements(pm, d)
    for f in m.frames:
        Jp = pin.getFrameJacobian(pm, d, _pin_frame_id(m, pm, f.name), REFERENCES[reference])
        assert rel(sd.frame_jacobian(m, q, f.name, reference), sp.jacobian_from_pinocchio(m, Jp)) < TOL, f.name


def test_body_velocities(pair):
    m, pm = pair
    d = pm.createData()
    for seed in range(3):
        q, v, _, _ = _state(m, seed)
        pin.forwardKinematics(pm, d, sp.q_to_pinocchio(m, q), sp.v_to_pinocchio(m, v))
        vp = np.array([d.v[i + 1].vector for i in range(m.nbodies)])
        assert rel(sd.body_velocities(m, q, v), sp.motion_from_pinocchio(vp)) < TOL


@pytest.mark.parametrize("reference", sorted(REFERENCES))
def test_frame_velocities(pair, reference):
    m, pm = pair
    d = pm.createData()
    q, v, _, _ = _state(m, 6)
    pin.forwardKinematics(pm, d, sp.q_to_pinocchio(m, q), sp.v_to_pinocchio(m, v))
    pin.updateFramePlacements(pm, d)
    for f in m.frames:
        vf = pin.getFrameVelocity(pm, d, _pin_frame_id(m, pm, f.name), REFERENCES[reference]).vector
        assert rel(sd.frame_velocity(m, q, v, f.name, reference), sp.motion_from_pinocchio(vf)) < TOL, f.name


def test_rnea(pair):
    m, pm = pair
    d = pm.createData()
    for seed in range(3):
        q, v, a, f = _state(m, seed)
        qp, vp, ap = sp.q_to_pinocchio(m, q), sp.v_to_pinocchio(m, v), sp.v_to_pinocchio(m, a)
        tau = pin.rnea(pm, d, qp, vp, ap)
        assert rel(sd.rnea(m, q, v, a), sp.tau_from_pinocchio(m, tau)) < TOL
        tau = pin.rnea(pm, d, qp, vp, ap, sp.fext_to_pinocchio(m, f))
        assert rel(sd.rnea(m, q, v, a, f_ext=f), sp.tau_from_pinocchio(m, tau)) < TOL
    # Batched inputs give the per-state results.
    qs = np.stack([m.random_configuration(s) for s in range(4)])
    vs = np.random.default_rng(9).normal(size=(4, m.nv))
    tau = sd.rnea(m, qs, vs, vs)
    for k in range(4):
        ref = pin.rnea(pm, d, sp.q_to_pinocchio(m, qs[k]), sp.v_to_pinocchio(m, vs[k]), sp.v_to_pinocchio(m, vs[k]))
        assert rel(tau[k], sp.tau_from_pinocchio(m, ref)) < TOL


# --- from_pinocchio -------------------------------------------------------------------

def test_from_pinocchio_reproduces_the_model(pair):
    m, pm = pair
    back = sp.from_pinocchio(pm)
    assert back.name == m.name and back.body_names == m.body_names and back.joint_names == m.joint_names
    assert np.array_equal(back.parent, m.parent)
    for a, b in zip(back.joints, m.joints):
        assert a.type == b.type and np.allclose(a.axis, b.axis, atol=1e-14) and np.isclose(a.pitch, b.pitch)
    for a, b in zip(back.Xtree, m.Xtree):
        assert np.allclose(a.E, b.E, atol=1e-14) and np.allclose(a.r, b.r, atol=1e-14)
    assert rel(back.inertia, m.inertia) < 1e-13
    assert back.frame_names == m.frame_names
    for a, b in zip(back.frames, m.frames):
        assert a.body == b.body and np.allclose(a.X.E, b.X.E, atol=1e-14) and np.allclose(a.X.r, b.X.r, atol=1e-14)
    assert np.array_equal(back.gravity, m.gravity)
    for name in ("lower", "upper", "velocity_limit", "effort_limit"):
        assert np.array_equal(getattr(back, name), getattr(m, name)), name


def test_from_pinocchio_of_a_pinocchio_model():
    pm = pin.buildSampleModelHumanoidRandom()
    m = sp.from_pinocchio(pm, name="sample")
    assert (m.nq, m.nv, m.name) == (pm.nq, pm.nv, "sample")
    assert m.joints[0].type == "free" and m.body_names[0] == "root_body"
    d = pm.createData()
    q, v, a, f = _state(m, 0)
    qp, vp, ap = sp.q_to_pinocchio(m, q), sp.v_to_pinocchio(m, v), sp.v_to_pinocchio(m, a)
    tau = pin.rnea(pm, d, qp, vp, ap, sp.fext_to_pinocchio(m, f))
    assert rel(sd.rnea(m, q, v, a, f_ext=f), sp.tau_from_pinocchio(m, tau)) < TOL
    pin.framesForwardKinematics(pm, d, qp)
    for fr in pm.frames:
        if fr.name in m.frame_names:
            R, p = sd.frame_placement(m, q, fr.name)
            M = d.oMf[pm.getFrameId(fr.name, fr.type)]
            assert rel(R, M.rotation) < TOL and rel(p, M.translation) < TOL


def test_from_pinocchio_rejects_unsupported_joints():
    pm = pin.Model()
    pm.addJoint(0, pin.JointModelRX(), pin.SE3.Identity(), "r")
    composite = pin.JointModelComposite(pin.JointModelRX())
    composite.addJoint(pin.JointModelPlanar(), pin.SE3(np.eye(3), np.array([0.0, 0.0, 1.0])))
    pm.addJoint(1, composite, pin.SE3.Identity(), "planar_composite")
    with pytest.raises(sd.ModelError, match="composite joint with a .*JointModelPlanar.* part has no sparsedyn"):
        sp.from_pinocchio(pm)


def test_composite_with_placements_against_pinocchio():
    """Parts placed apart (Pinocchio's JointModelComposite joint placements): RNEA, CRBA, ABA and a frame
    Jacobian equal Pinocchio's on a random tree carrying two such joints, and the joint comes back."""
    from conftest import random_trees, rounding_bound, solve_bound
    from custom_joints import with_joints
    parts = [sd.make_joint("prismatic", (0, 0.6, 0.8)), sd.make_joint("spherical"), sd.make_joint("prismatic", (1, 0, 0))]
    placements = [spatial.xlt([0.0, 0.1, 0.0]),
                  spatial.from_pose(spatial.rotx(0.5) @ spatial.rotz(-0.3), np.array([0.0, -0.1, 0.3])),
                  spatial.xlt([0.2, 0.0, -0.1])]
    m = with_joints(random_trees()[2], sd.make_joint("composite", joints=parts, placements=placements))
    pm = sp.to_pinocchio(m)
    pd = pm.createData()
    assert pm.joints[m.nbodies].shortname() == "JointModelComposite"
    rng = np.random.default_rng(3)
    fid = pm.getFrameId(m.body_names[-1], pin.FrameType.BODY)
    for _ in range(3):
        q, v, a = m.random_configuration(rng), *rng.normal(size=(2, m.nv))
        qp, vp, ap = sp.q_to_pinocchio(m, q), sp.v_to_pinocchio(m, v), sp.v_to_pinocchio(m, a)
        n = m.nv + m.nbodies
        tau = sd.rnea(m, q, v, a)
        assert rel(tau, sp.tau_from_pinocchio(m, np.array(pin.rnea(pm, pd, qp, vp, ap)))) <= rounding_bound(n)
        H = sd.crba(m, q)
        Hp = np.array(pin.crba(pm, pd, qp))
        Hp = np.triu(Hp) + np.triu(Hp, 1).T
        assert rel(H, sp.tau_from_pinocchio(m, sp.v_from_pinocchio(m, Hp).T).T) <= rounding_bound(n)
        ap2 = sp.v_from_pinocchio(m, np.array(pin.aba(pm, pd, qp, vp, sp.tau_to_pinocchio(m, tau))))
        assert rel(ap2, a) <= solve_bound(H, a, c=2.0 * n)
        J = sd.frame_jacobian(m, q, m.body_names[-1], "local")
        Jp = np.array(pin.computeFrameJacobian(pm, pd, qp, fid, pin.ReferenceFrame.LOCAL))
        assert rel(J, sp.jacobian_from_pinocchio(m, Jp)) <= rounding_bound(n)
    back = sp.from_pinocchio(pm)
    assert back.joints == m.joints


def test_new_joint_types_round_trip_through_pinocchio():
    """SphericalZYX, Translation, Universal and composite joints come back as the joints written."""
    joints = [sd.make_joint("spherical_zyx"), sd.make_joint("translation"),
              sd.make_joint("universal", axes=((0.0, 0.6, 0.8), (1.0, 0.0, 0.0))), sd.make_joint("spherical_xyz"),
              sd.make_joint("composite", joints=[sd.make_joint("prismatic", (1, 0, 0)), sd.make_joint("spherical")])]
    b = sd.ModelBuilder("new")
    for k, j in enumerate(joints):
        b.add_body(f"b{k}", None if k == 0 else f"b{k - 1}", j, mass=1.0, rot_inertia=np.eye(3))
    m = b.build()
    back = sp.from_pinocchio(sp.to_pinocchio(m))
    assert back.joints == m.joints


# --- errors and optional dependency ---------------------------------------------------

def test_shape_errors_name_the_argument():
    m = MODELS["humanoid"]
    with pytest.raises(ValueError, match=r"^q: expected shape \(\.\.\., 36\)"):
        sp.q_to_pinocchio(m, np.zeros(35))
    with pytest.raises(ValueError, match=r"^q_pin: expected shape \(\.\.\., 36\)"):
        sp.q_from_pinocchio(m, np.zeros(37))
    with pytest.raises(ValueError, match="^v_pin:"):
        sp.v_from_pinocchio(m, np.zeros((2, 34)))
    with pytest.raises(ValueError, match="^tau:"):
        sp.tau_to_pinocchio(m, 1.0)
    with pytest.raises(ValueError, match="^f:"):
        sp.force_to_pinocchio(np.zeros((30, 5)))
    with pytest.raises(ValueError, match=r"^J: expected shape \(\.\.\., 6, 35\)"):
        sp.jacobian_to_pinocchio(m, np.zeros((35, 6)))
    with pytest.raises(ValueError, match="^f_ext:"):
        sp.fext_to_pinocchio(m, np.zeros((2, 30, 6)))


def test_array_conversions_work_without_pinocchio():
    code = ("import sys; sys.modules['pinocchio'] = None\n"
            "import numpy as np\n"
            "from sparsedyn.model.builders import random_tree\n"
            "from sparsedyn.interop import pinocchio as sp\n"
            "m = random_tree(8, joint_types='all', seed=0)\n"
            "q = m.random_configuration(0)\n"
            "assert np.allclose(sp.q_from_pinocchio(m, sp.q_to_pinocchio(m, q)), q)\n"
            "try:\n"
            "    sp.to_pinocchio(m)\n"
            "except ImportError:\n"
            "    print('ok')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_a_frame_fixed_to_the_world_is_a_frame_of_the_universe():
    """``Frame.body == -1`` (e.g. an MJCF site on the world) becomes a frame on Pinocchio's universe joint:
    same placement, zero Jacobian."""
    b = sd.ModelBuilder("w")
    b.add_body("l1", None, sd.make_joint("revolute", (0, 0, 1)), None, np.diag([0.1, 0.2, 0.3, 1, 1, 1]))
    X = spatial.from_pose(spatial.rotz(0.4) @ spatial.rotx(-0.3), np.array([0.3, -0.1, 0.7]))
    m = b.add_frame("fixed", None, X).build()
    assert m.frames[m.frame("fixed")].body == -1
    pm = sp.to_pinocchio(m)
    d = pm.createData()
    q = np.array([0.8])
    pin.framesForwardKinematics(pm, d, sp.q_to_pinocchio(m, q))
    fid = pm.getFrameId("fixed", pin.FrameType.OP_FRAME)
    assert pm.frames[fid].parentJoint == 0
    R, p = sd.frame_placement(m, q, "fixed")
    assert rel(d.oMf[fid].rotation, R) < TOL and rel(d.oMf[fid].translation, p) < TOL
    J = pin.computeFrameJacobian(pm, d, sp.q_to_pinocchio(m, q), fid, pin.ReferenceFrame.LOCAL)
    assert np.array_equal(np.reshape(J, (6, 1)), np.zeros((6, 1)))
    assert np.array_equal(sd.frame_jacobian(m, q, "fixed"), np.zeros((6, 1)))
    with pytest.raises(sd.ModelError, match="frame 'bad': body index -2 out of range -1..0"):
        dataclasses.replace(m, frames=m.frames + (sd.model.Frame("bad", -2, X),))
