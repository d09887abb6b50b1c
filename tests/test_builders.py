"""Built-in models: serial chains, seeded random trees, the humanoid, the registry."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn import spatial
from sparsedyn.model.builders import (BUILTIN_MODELS, HUMANOID_STANDING_HEIGHT, builtin, humanoid,
                                humanoid_standing_configuration, random_tree, serial_chain)


def _parent_name(model, name):
    p = model.parent[model.body(name)]
    return None if p < 0 else model.body_names[p]


def _check_physical(model):
    """Spatial inertias positive definite; CoM inertias' principal moments obey the triangle inequality."""
    for i in range(model.nbodies):
        I = model.inertia[i]
        assert np.allclose(I, I.T, atol=1e-14)
        assert np.linalg.eigvalsh(I).min() > 0, model.body_names[i]
        m, c, Ic = spatial.inertia_components(I)
        J = np.linalg.eigvalsh(Ic)
        assert m > 0 and J.min() > 0
        assert J[2] <= J[0] + J[1] + 1e-12 * J[2], (model.body_names[i], J)


# --- serial chain -------------------------------------------------------------

def test_serial_chain_structure():
    m = serial_chain(5, length=0.4, mass=2.0)
    assert m.nbodies == m.nq == m.nv == 5
    assert list(m.parent) == [-1, 0, 1, 2, 3]
    assert m.body_names == tuple(f"link{i}" for i in range(1, 6))
    assert m.joint_names == tuple(f"joint{i}" for i in range(1, 6))
    assert all(j.type == "revolute" and j.axis == (0.0, 0.0, 1.0) for j in m.joints)
    assert np.allclose(m.Xtree[0].r, 0) and np.allclose(m.Xtree[0].E, np.eye(3))
    for X in m.Xtree[1:]:
        assert np.allclose(X.r, [0.4, 0, 0]) and np.allclose(X.E, np.eye(3))
    mass, com, Ic = spatial.inertia_components(m.inertia)
    assert np.allclose(mass, 2.0) and np.allclose(com, [0.2, 0, 0])
    # Slender cylinder along x (radius length / 20): m r^2 / 2 about its axis, m (3 r^2 + L^2) / 12 across.
    assert np.allclose(Ic[:, 0, 0], 2.0 * 0.02 ** 2 / 2)
    assert np.allclose(Ic[:, 1, 1], 2.0 * (3 * 0.02 ** 2 + 0.4 ** 2) / 12)
    assert np.allclose(Ic[:, 2, 2], Ic[:, 1, 1])
    _check_physical(m)


def test_serial_chain_joint_choices():
    m = serial_chain(3, joint="prismatic", axis=(1, 1, 0))
    assert all(j.type == "prismatic" for j in m.joints)
    assert np.allclose(m.joints[0].axis, np.array([1, 1, 0]) / np.sqrt(2))
    m = serial_chain(2, joint=sd.make_joint("spherical"))
    assert (m.nq, m.nv) == (8, 6)
    with pytest.raises(ValueError, match="n:"):
        serial_chain(0)


# --- random trees -------------------------------------------------------------

def _same_model(a, b):
    return (a.body_names == b.body_names and np.array_equal(a.parent, b.parent) and a.joints == b.joints
            and np.array_equal(a.inertia, b.inertia)
            and all(np.array_equal(x.E, y.E) and np.array_equal(x.r, y.r) for x, y in zip(a.Xtree, b.Xtree))
            and a.frame_names == b.frame_names)


def test_random_tree_is_deterministic_by_seed():
    kw = dict(branching=1.7, joint_types="all", floating_base=True, nframes=3)
    assert _same_model(random_tree(12, seed=4, **kw), random_tree(12, seed=4, **kw))
    assert not _same_model(random_tree(12, seed=4, **kw), random_tree(12, seed=5, **kw))


@pytest.mark.parametrize("seed", range(5))
def test_random_tree_every_joint_type_appears(seed):
    m = random_tree(len(sd.JOINT_TYPES), joint_types="all", seed=seed)
    assert {j.type for j in m.joints} == set(sd.JOINT_TYPES)
    m = random_tree(3, joint_types=("helical", "prismatic"), seed=seed)
    assert {j.type for j in m.joints} == {"helical", "prismatic"}


def test_random_tree_axes_and_pitch_are_random():
    m = random_tree(40, joint_types=("revolute", "helical"), seed=1)
    axes = np.array([j.axis for j in m.joints])
    aligned = np.isclose(np.abs(axes).max(1), 1.0)
    assert aligned.any() and (~aligned).any()
    pitches = [j.pitch for j in m.joints if j.type == "helical"]
    assert len(set(pitches)) == len(pitches) and all(p != 0 for p in pitches)


@pytest.mark.parametrize("branching", [1.0, 1.5, 2.0, 3.0, 5.0])
def test_random_tree_depth_first(branching):
    m = random_tree(23, branching=branching, joint_types="all", seed=2)
    for i in range(m.nbodies):
        assert m.parent[i] < i
        subtree = [j for j in range(m.nbodies) if i in m.ancestors(j)]
        assert subtree == list(range(i, m.subtree_end[i]))


def test_random_tree_branching_sets_the_structure():
    chain = random_tree(9, branching=1.0)
    assert list(chain.parent) == list(range(-1, 8))
    binary = random_tree(15, branching=2.0)
    for k in range(2, 16):   # heap numbering of the generated bodies: parent(k) = k // 2
        assert _parent_name(binary, f"body{k}") == f"body{k // 2}"
    assert _parent_name(binary, "body1") is None
    assert np.bincount(binary.parent[1:]).max() == 2
    assert binary.depth.max() == 3
    ternary = random_tree(13, branching=3.0)
    assert np.bincount(ternary.parent[1:]).max() == 3 and ternary.depth.max() == 2


def test_random_tree_taper_and_skew():
    base = random_tree(8, branching=2.0, seed=3)
    tapered = random_tree(8, branching=2.0, seed=3, taper=0.7, skew=0.4)
    for k in range(1, 9):
        i, j = base.body(f"body{k}"), tapered.body(f"body{k}")
        assert np.isclose(tapered.mass[j], 0.7 ** (3 * (k - 1)) * base.mass[i])
        _, c0, I0 = spatial.inertia_components(base.inertia[i])
        _, c1, I1 = spatial.inertia_components(tapered.inertia[j])
        assert np.allclose(c1, 0.7 ** (k - 1) * c0)
        assert np.allclose(I1, 0.7 ** (5 * (k - 1)) * I0)
        if k > 1:   # joint at the end of the parent's (tapered) link, turned by skew about its x
            pk = k // 2
            assert np.allclose(tapered.Xtree[j].r, [0.7 ** (pk - 1), 0, 0])
            assert np.allclose(tapered.Xtree[j].E, spatial.rotx(0.4))
            assert np.allclose(base.Xtree[i].E, np.eye(3))


def test_auto_tree_is_featherstones():
    """autoTree(4, 1, 1.5, 0.9) by hand: a chain about local z, link k of length 0.9^(k-1), mass
    0.9^(3(k-1)), CoM at its middle, a slender rod's inertia; joint frames at the parent's link end,
    turned by 1.5 rad about x."""
    m = sd.auto_tree(4, 1, 1.5, 0.9)
    assert m.parent.tolist() == [-1, 0, 1, 2] and m.joint_names == ("joint1", "joint2", "joint3", "joint4")
    for k in range(1, 5):
        i = k - 1
        L, mass = 0.9 ** (k - 1), 0.9 ** (3 * (k - 1))
        assert m.joints[i].type == "revolute" and m.joints[i].axis == (0.0, 0.0, 1.0)
        mm, c, Ic = spatial.inertia_components(m.inertia[i])
        assert np.isclose(mm, mass) and np.allclose(c, [L / 2, 0, 0])
        assert np.allclose(Ic, mass * L * L * np.diag([0.0025, 1.015 / 12, 1.015 / 12]))
        if k > 1:
            assert np.allclose(m.Xtree[i].r, [0.9 ** (k - 2), 0, 0])
            assert np.allclose(m.Xtree[i].E, spatial.rotx(1.5))
    assert np.allclose(m.Xtree[0].E, np.eye(3)) and np.allclose(m.Xtree[0].r, 0)
    b = sd.auto_tree(7, 2.0, floating_base=True)
    assert b.parent.tolist() == [-1, 0, 1, 1, 0, 4, 4] and b.joints[0].type == "free"   # depth-first binary tree
    with pytest.raises(ValueError, match="nbodies"):
        sd.auto_tree(0)


def test_random_tree_floating_base_and_frames():
    m = random_tree(6, floating_base=True, nframes=4, seed=7)
    assert m.joints[0].type == "free"
    assert all(j.type == "revolute" for j in m.joints[1:])
    assert (m.nq, m.nv) == (7 + 5, 6 + 5)
    assert set(m.frame_names) >= {"frame1", "frame2", "frame3", "frame4"}
    f = m.frames[m.frame("frame1")]
    assert np.allclose(f.X.E @ f.X.E.T, np.eye(3)) and not np.allclose(f.X.E, np.eye(3))


@pytest.mark.parametrize("seed", range(3))
def test_random_tree_inertias_are_physical(seed):
    _check_physical(random_tree(30, branching=1.5, taper=0.9, joint_types="all", seed=seed))


def test_random_tree_rejects_bad_arguments():
    with pytest.raises(ValueError, match="nbodies"):
        random_tree(0)
    with pytest.raises(ValueError, match="branching"):
        random_tree(3, branching=0.5)
    with pytest.raises(ValueError, match="unknown joint type 'hinge'"):
        random_tree(3, joint_types=("hinge",))


# --- humanoid -----------------------------------------------------------------

@pytest.fixture(scope="module")
def robot():
    return humanoid()


def test_humanoid_structure(robot):
    assert robot.name == "humanoid"
    assert (robot.nq, robot.nv) == (36, 6 + 12 + 1 + 14 + 2)
    assert robot.joint_names[0] == "root_joint" and robot.joints[0].type == "free"
    assert all(j.type == "revolute" for j in robot.joints[1:])
    for s in "lr":
        for j in ("hip_yaw", "hip_roll", "hip_pitch", "knee", "ankle_pitch", "ankle_roll", "shoulder_pitch",
                  "shoulder_roll", "shoulder_yaw", "elbow", "wrist_yaw", "wrist_pitch", "wrist_roll"):
            robot.joint(f"{s}_{j}")
    for j in ("torso_yaw", "neck_yaw", "neck_pitch"):
        robot.joint(j)
    axis = {"yaw": (0, 0, 1), "roll": (1, 0, 0), "pitch": (0, 1, 0)}
    for name, j in zip(robot.joint_names[1:], robot.joints[1:]):
        kind = "pitch" if name.endswith(("knee", "elbow")) else name.rsplit("_", 1)[-1]
        assert j.axis == axis[kind], name
    _check_physical(robot)


def test_humanoid_mass_and_limits(robot):
    assert 70.0 <= robot.total_mass <= 75.0
    assert robot.mass[robot.body("torso")] > robot.mass[robot.body("l_thigh")] > robot.mass[robot.body("l_shank")]
    lo, hi = robot.lower[7:], robot.upper[7:]
    assert np.all(np.isfinite(lo)) and np.all(np.isfinite(hi)) and np.all(lo < hi)
    assert np.all(hi - lo <= 2 * np.pi)
    eff = robot.effort_limit[6:]
    assert np.all(np.isfinite(eff)) and np.all(eff > 0)
    assert eff[robot.v_start[robot.joint("l_knee")]] > eff[robot.v_start[robot.joint("l_wrist_roll")]]


def test_humanoid_left_right_symmetry(robot):
    q = humanoid_standing_configuration()
    for i, name in enumerate(robot.body_names):
        if name.startswith("l_"):
            r = robot.body("r_" + name[2:])
            assert np.isclose(robot.mass[i], robot.mass[r])
            assert np.allclose(robot.Xtree[r].r, robot.Xtree[i].r * [1, -1, 1])
            assert np.allclose(robot.inertia[r], robot.inertia[i])   # symmetric about their own xz planes
    for name in robot.joint_names:
        if name.startswith("l_"):
            ql, qr = robot.q_slice(robot.joint(name)), robot.q_slice(robot.joint("r_" + name[2:]))
            mirrored = name.endswith(("roll", "yaw"))   # mirroring y flips rotations about x and z
            if mirrored:
                assert np.allclose(robot.lower[ql], -robot.upper[qr])
            else:
                assert np.allclose(robot.lower[ql], robot.lower[qr])
    for f in ("sole", "hand"):
        Rl, pl = sd.frame_placement(robot, q, "l_" + f)
        Rr, pr = sd.frame_placement(robot, q, "r_" + f)
        assert np.allclose(pr, pl * [1, -1, 1]) and pl[1] > 0 and np.allclose(Rl, Rr)


def test_humanoid_stands_on_its_soles(robot):
    q = humanoid_standing_configuration()
    assert q.shape == (robot.nq,) and np.allclose(q, robot.neutral() + np.eye(robot.nq)[2] * HUMANOID_STANDING_HEIGHT)
    for s in ("l_sole", "r_sole"):
        R, p = sd.frame_placement(robot, q, s)
        assert abs(p[2]) < 1e-12 and np.allclose(R, np.eye(3))
    Rb, pb = sd.forward_kinematics(robot, q)
    assert np.all(pb[:, 2] > 0.05)
    hands = [sd.frame_placement(robot, q, h)[1] for h in ("l_hand", "r_hand")]
    R_cam, p_cam = sd.frame_placement(robot, q, "head_camera")
    assert 1.5 < p_cam[2] < 1.75 and all(0.6 < h[2] < 1.0 for h in hands)
    assert np.allclose(R_cam[:, 2], [1, 0, 0]) and np.allclose(R_cam[:, 1], [0, 0, -1])
    # Whole-body centre of mass: on the sagittal plane, over the feet, at about 55% of the height.
    _, c, _ = spatial.inertia_components(robot.inertia)
    com = np.einsum("i,ij->j", robot.mass, pb + np.einsum("ijk,ik->ij", Rb, c)) / robot.total_mass
    assert abs(com[1]) < 1e-12 and -0.06 < com[0] < 0.2 and 0.85 < com[2] < 1.1


# --- registry -----------------------------------------------------------------

def test_builtin_models():
    assert set(BUILTIN_MODELS) >= {"humanoid", "chain7"}
    assert builtin("humanoid").nv == 35
    chain = builtin("chain7")
    assert chain.nbodies == 7 and list(chain.parent) == list(range(-1, 6))
    for name in BUILTIN_MODELS:
        assert builtin(name).nbodies > 0
    with pytest.raises(KeyError, match="available: .*chain7.*humanoid"):
        builtin("nao")
