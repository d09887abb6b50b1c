"""The pairs a scene of an MJCF model checks (sparsedyn.contact.scene_pairs, with the filter
sparsedyn.io.mjcf_geometry reads) against the pairs MuJoCo's own ``mj_collision`` checks.

The oracle: MuJoCo reports a contact for every geom pair that passes its filters and lies within
the pair's margin; with every margin 50 m (far more than any of these models spans) and its midphase
off (the bounding-volume tree of a body with several geoms is pruned without the margin), each pair
it checks is reported once at least, at any pose.  So the set of geom pairs of ``d.contact`` is the
set of pairs MuJoCo checks: bit masks, weld groups, the parent-child filter (not for bodies welded to
the world), ``<contact><exclude>`` and ``<contact><pair>``.
"""

import warnings
from pathlib import Path

import dm_control
import mujoco
import numpy as np
import pytest

import sparsedyn as sd

SUITE = Path(dm_control.__file__).parent / "suite"

ARM = """<mujoco model="arm">
  <option><flag filterparent="{filterparent}"/></option>
  <worldbody>
    <geom name="floor" type="plane" size="5 5 .1" contype="1" conaffinity="2"/>
    <body name="base" pos="0 0 .5">
      <geom name="base_box" type="box" size=".1 .1 .1"/>
      <body name="link1" pos="0 0 .3">
        <joint name="j1" type="hinge" axis="0 1 0"/>
        <geom name="l1" type="capsule" size=".05 .1"/>
        <body name="bracket" pos="0 0 .2">
          <geom name="br" type="sphere" size=".05"/>
          <body name="link2" pos="0 0 .2">
            <joint name="j2" type="hinge" axis="0 1 0"/>
            <geom name="l2" type="capsule" size=".04 .1"/>
            <geom name="l2_ghost" type="sphere" size=".03" pos="0 0 .1" contype="0" conaffinity="0"/>
            <body name="link3" pos="0 0 .25">
              <joint name="j3" type="hinge" axis="1 0 0"/>
              <geom name="l3" type="box" size=".03 .03 .1"/>
            </body>
          </body>
        </body>
      </body>
    </body>
    <body name="ball" pos="1 0 .3">
      <freejoint/>
      <geom name="ball" type="sphere" size=".1" contype="2" conaffinity="0"/>
    </body>
  </worldbody>
  <contact>
    <exclude body1="bracket" body2="link3"/>
    <pair geom1="l2_ghost" geom2="floor" friction="0.25 0.25 0.005 0.0001 0.0001"/>
  </contact>
</mujoco>"""


def load(source):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")                    # tendons, sensors the model does not hold
        return sd.load_mjcf(source, geometry=True)


def mujoco_pairs(m):
    """The geom-name pairs MuJoCo checks (module docstring), as frozensets."""
    m.geom_margin[:] = 50.0
    m.pair_margin[:] = 50.0
    m.opt.disableflags |= int(mujoco.mjtDisableBit.mjDSBL_MIDPHASE)
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    assert d.ncon > 0 and not any(w.number for w in d.warning)           # no contact dropped for lack of room
    name = lambda g: mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) or f"geom{g}"  # noqa: E731
    return {frozenset((name(c.geom[0]), name(c.geom[1]))) for c in d.contact[:d.ncon]}


@pytest.mark.parametrize("file", ["humanoid.xml", "humanoid_CMU.xml", "walker.xml", "cheetah.xml"])
def test_dm_control_scenes_check_the_pairs_mujoco_checks(file):
    path = SUITE / file
    scene = sd.Scene(load(path))
    expected = mujoco_pairs(mujoco.MjModel.from_xml_path(str(path)))
    assert {frozenset(p) for p in scene.pairs} == expected
    assert len(scene.pairs) == len(expected)                              # each pair once


@pytest.mark.parametrize("file", ["humanoid.xml", "cheetah.xml"])
def test_pairs_that_touch_at_random_low_poses_are_the_pairs_mujoco_finds_touching(file, rng):
    """The filter and the distances together: at random configurations with the base low (limbs
    through each other and through the floor), the geom pairs that overlap by ``sd.collide`` are those
    that overlap by ``mj_collision``.  These files hold planes, spheres and capsules, whose distances
    both compute in closed form, so the two agree to rounding: a band of 1e-9 m about contact keeps a
    pair grazing within rounding from deciding the comparison."""
    from sparsedyn.interop import mujoco as mjx
    path = SUITE / file
    model = load(path)
    scene = sd.Scene(model)
    m = mujoco.MjModel.from_xml_path(str(path))
    assert set(m.geom_type) <= {0, 2, 3} and not m.geom_margin.any()       # planes, spheres, capsules
    d = mujoco.MjData(m)
    name = lambda g: mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g)  # noqa: E731
    touching = 0
    for _ in range(6):
        q = model.random_configuration(rng)
        if model.joints[0].type == "free":
            q[2] = 0.3 * rng.random()
        d.qpos[:] = mjx.q_to_mujoco(model, q)
        mujoco.mj_forward(m, d)
        theirs, ours = {}, {}
        for c in d.contact[:d.ncon]:
            key = frozenset((name(c.geom[0]), name(c.geom[1])))
            theirs[key] = min(theirs.get(key, np.inf), c.dist)
        hits = sd.collide(scene, q)
        for pair, dist in zip(hits.pairs, hits.distances):
            ours[frozenset(pair)] = min(ours.get(frozenset(pair), np.inf), dist)
        for a, b in ((theirs, ours), (ours, theirs)):
            assert {k for k, x in a.items() if x < -1e-9} <= {k for k, x in b.items() if x < 1e-9}
        touching += sum(x < -1e-9 for x in ours.values())
    assert touching >= 10                                  # the poses did put pairs in contact


def test_walkers_masks_leave_out_self_collision():
    # walker.xml: the robot's geoms have contype 1, conaffinity 0 (1 & 0 | 1 & 0 = 0 between two of
    # them), the floor conaffinity 1: only robot-floor pairs
    scene = sd.Scene(load(SUITE / "walker.xml"))
    assert all("floor" in p for p in scene.pairs) and len(scene.pairs) == 7


@pytest.mark.parametrize("filterparent", ["enable", "disable"])
def test_welds_parent_filter_exclusions_and_explicit_pairs_are_mujocos(filterparent):
    xml = ARM.format(filterparent=filterparent)
    scene = sd.Scene(load(xml))
    pairs = {frozenset(p) for p in scene.pairs}
    assert pairs == mujoco_pairs(mujoco.MjModel.from_xml_string(xml))
    # by hand: base is welded to the world, so it meets its child link1 (and the floor does not meet
    # it: two world shapes); bracket is welded to link1 (one body); link2's parent weld group is
    # link1's; bracket-link3 are excluded; l2_ghost's masks are zero, its explicit pair with the floor
    # stays; the ball (contype 2, conaffinity 0) meets the floor (conaffinity 2) and no link (1 & 0 | 2 & 1)
    checked = lambda a, b: frozenset((a, b)) in pairs  # noqa: E731
    assert checked("l1", "base_box") and checked("l1", "l3") and checked("ball", "floor")
    assert not checked("l1", "br") and not checked("br", "l3") and not checked("base_box", "floor")
    assert not checked("ball", "l1") and not checked("l2_ghost", "l1")
    assert checked("l2", "l1") == checked("l2", "br") == (filterparent == "disable")
    mu = dict(zip(scene.pairs, scene.pair_friction))
    assert mu[("l2_ghost", "floor")] == 0.25
    assert mu[("l1", "floor")] == 1.0                                      # the geoms' default sliding friction


def test_appended_model_keeps_its_filter_under_the_prefix():
    arm = load(ARM.format(filterparent="enable"))
    host = sd.ModelBuilder("host").add_body("cart", None, sd.make_joint("prismatic", axis=[1, 0, 0]), mass=1.0,
                                           rot_inertia=np.eye(3)).build()
    both = sd.append_model(host, arm, prefix="a_")
    scene, alone = sd.Scene(both), sd.Scene(arm)
    assert set(scene.pairs) == {("a_" + x, "a_" + y) for x, y in alone.pairs}
    assert dict(zip(scene.pairs, scene.pair_friction))[("a_l2_ghost", "a_floor")] == 0.25


@pytest.mark.parametrize("change, message", [
    (dict(contype=-1, conaffinity=1), "geometry 'g': contype must be a bit mask"),
    (dict(contype=1), "contype and conaffinity are given together"),
    (dict(contype=1, conaffinity=1, pairs=(("nose", 0.5),)), "geometry 'g': its pair names no geometry 'nose'"),
    (dict(contype=1, conaffinity=1, pairs=(("g", -0.5),)), "geometry 'g': pairs takes \\(geometry name, friction"),
    (dict(exclude="nose"), "geometry 'g': exclude must be geometry names"),
])
def test_bad_filter_is_named(change, message):
    model = sd.ModelBuilder("m").add_body("b", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3)).build()
    g = sd.Geometry("g", 0, sd.spatial.Transform(np.eye(3), np.zeros(3)), "sphere", (0.1,), "collision")
    with pytest.raises(sd.ModelError, match=message):
        model.with_geometry(g._replace(**change))


def test_a_fixed_base_robots_shapes_on_its_base_are_its_own():
    """A URDF robot on a fixed base has its root link's shapes on the world body, yet they are the
    robot's: ur5's base is never checked against its shoulder (jointed to the base: a parent and child
    link touch at their joint by construction), is checked against its other links with
    self-collision and against none without, and the floor meets every moving link either way.  baxter
    at its neutral configuration: the pairs :func:`~sparsedyn.overlapping_pairs` lists, among them its
    lower shoulders in its torso (a base shape), are those Pinocchio's ``computeCollisions`` (coal, each
    mesh its convex hull) finds among the scene's pairs, and the scene's warning says so."""
    import pinocchio as pin
    from erd import convex_meshes, robots_dir
    from sparsedyn.interop.pinocchio import q_to_pinocchio
    root = robots_dir()
    floor = sd.Shape("plane", name="floor")
    ur5 = sd.load_urdf(root / "ur_description/urdf/ur5_robot.urdf", geometry=True)
    links = ("shoulder_link_0", "upper_arm_link_0", "forearm_link_0", "wrist_1_link_0", "wrist_2_link_0",
             "wrist_3_link_0", "ee_link_0")
    for self_collision in (True, False):
        pairs = set(sd.Scene(ur5, world=[floor], self_collision=self_collision).pairs)
        assert {p for p in pairs if "base_link_0" in p} == ({(n, "base_link_0") for n in links[1:]}
                                                            if self_collision else set())
        assert {(n, "floor") for n in links} <= pairs
    path = root / "baxter_description/urdf/baxter.urdf"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.io.urdf.UrdfWarning)
        baxter = sd.load_urdf(path, geometry=True, package_dirs=[root])
    with pytest.warns(sd.SelfOverlapWarning, match=r"\(right_lower_shoulder_0, torso_0\) by"):
        scene = sd.Scene(baxter)
    assert ("head_0", "torso_0") not in scene.pairs
    found = sd.overlapping_pairs(scene)
    assert {("right_lower_shoulder_0", "torso_0"), ("left_lower_shoulder_0", "torso_0")} <= set(found)
    pm, gm, _ = pin.buildModelsFromUrdf(str(path), [str(root.parent.parent)])
    convex_meshes(gm).addAllCollisionPairs()
    gd = pin.GeometryData(gm)
    pin.computeCollisions(pm, pm.createData(), gm, gd, q_to_pinocchio(baxter, baxter.neutral()), False)
    names = [g.name for g in gm.geometryObjects]
    touching = {frozenset((names[p.first], names[p.second])) for k, p in enumerate(gm.collisionPairs)
                if gd.collisionResults[k].isCollision()}
    assert {frozenset(p) for p in found} == touching & {frozenset(p) for p in scene.pairs}
