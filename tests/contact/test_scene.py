"""Scenes (sparsedyn.contact.scene) and steps in them (sparsedyn.contact.scene_step): the checked
pairs on a hand-built chain, an MJCF file's floor and frictions against MuJoCo's compiled model, bad
input, and the physics of boxes dropped on a plane and on a box.

Physics, by hand: a box of mass m at rest on its face carries its weight, so the normal impulses of
a step sum to m g dt; the step neither adds energy (kinetic + potential never grows, to the
complementarity residual the solver leaves, tol times its impulse and velocity scales) nor leaves a
penetration beyond the solver's tolerance.
"""

import warnings
from pathlib import Path

import dm_control
import mujoco
import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.model.spatial import Transform

G, DT, TOL = 9.81, 1e-3, 1e-8
MASS, SIDE = 2.0, 0.2
HUMANOID = Path(dm_control.__file__).parent / "suite" / "humanoid.xml"


def I3():
    return Transform(np.eye(3), np.zeros(3))


def chain_model():
    """Three bodies in a chain (0 -> 1 -> 2) and a fourth on body 0, a sphere on each, two on body 1."""
    b = sd.ModelBuilder("chain")
    b.add_body("b0", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3))
    b.add_body("b1", "b0", sd.make_joint("revolute", axis=[0, 0, 1]), mass=1.0, rot_inertia=np.eye(3),
               Xtree=(np.eye(3), [0, 0, 0.5]))
    b.add_body("b2", "b1", sd.make_joint("revolute", axis=[0, 0, 1]), mass=1.0, rot_inertia=np.eye(3),
               Xtree=(np.eye(3), [0, 0, 0.5]))
    b.add_body("b3", "b0", sd.make_joint("revolute", axis=[1, 0, 0]), mass=1.0, rot_inertia=np.eye(3),
               Xtree=(np.eye(3), [0.5, 0, 0]))
    model = b.build()
    geoms = [sd.Geometry(n, body, I3(), "sphere", (0.1,), "collision", link=f"b{body}")
             for n, body in (("s0", 0), ("s1", 1), ("s1b", 1), ("s2", 2), ("s3", 3))]
    return model.with_geometry(*geoms)


def box_model(geometry=True):
    I = MASS * SIDE ** 2 / 6 * np.eye(3)
    b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=MASS, rot_inertia=I)
    model = b.add_frame("box", "box").build()
    if geometry:
        model = model.with_geometry(sd.Geometry("box", 0, I3(), "box", (SIDE,) * 3, "collision"))
    return model


def test_pairs_leave_out_one_body_and_adjacent_bodies_and_srdf_pairs():
    model = chain_model()
    floor = sd.Shape("plane", name="floor")
    scene = sd.Scene(model, world=[floor])
    robot = ["s0", "s1", "s1b", "s2", "s3"]
    # by hand: b0-b1, b1-b2, b0-b3 are parent and child; s1, s1b share b1
    self_pairs = {("s0", "s2"), ("s1", "s3"), ("s1b", "s3"), ("s2", "s3")}
    assert set(scene.pairs) == {(r, "floor") for r in robot} | self_pairs
    assert set(sd.Scene(model, world=[floor], self_collision=False).pairs) == {(r, "floor") for r in robot}
    pruned = sd.Scene(model, world=[floor], srdf=[("b2", "b3"), ("b0", "b2")])
    assert set(pruned.pairs) == set(scene.pairs) - {("s2", "s3"), ("s0", "s2")}
    # a scene is immutable: with_pairs makes another
    more = pruned.with_pairs(add=[("s0", "s1")], remove=[("b1", "floor")])
    assert set(more.pairs) == (set(pruned.pairs) | {("s0", "s1")}) - {("s1", "floor"), ("s1b", "floor")}
    assert set(pruned.pairs) == set(scene.pairs) - {("s2", "s3"), ("s0", "s2")}
    with pytest.raises(AttributeError, match="immutable"):
        scene.margin = 0.1



SRDF = """<robot name="chain">
  <disable_collisions link1="b2" link2="b3" reason="Never"/>
  <disable_collisions link1="b0" link2="b2" reason="Never"/>
</robot>
"""


def test_srdf_is_a_files_path_or_what_load_srdf_read(tmp_path):
    model = chain_model()
    path = tmp_path / "chain.srdf"
    path.write_text(SRDF)
    whole = set(sd.Scene(model).pairs)
    read = sd.Scene(model, srdf=sd.load_srdf(model, path))
    # by hand: the file disables b2-b3 and b0-b2, the shapes s2-s3 and s0-s2
    assert set(read.pairs) == whole - {("s2", "s3"), ("s0", "s2")}
    for given in (path, str(path)):
        assert sd.Scene(model, srdf=given).pairs == read.pairs
    with pytest.raises((OSError, ValueError), match="no_such.srdf"):
        sd.Scene(model, srdf=tmp_path / "no_such.srdf")

def test_world_shapes_of_one_name_are_renamed_and_pair_friction_follows_mujocos_rule():
    model = chain_model().with_geometry()
    boxes = [sd.Shape("box", (1, 1, 1), friction=0.3), sd.Shape("box", (1, 1, 1))]
    scene = sd.Scene(model, world=boxes, friction=0.9, self_collision=False)
    assert [s.name for s in scene.shapes[-2:]] == ["box", "box_2"]
    mu = dict(zip(scene.pairs, scene.pair_friction))
    assert mu[("s0", "box")] == 0.3 and mu[("s0", "box_2")] == 0.9          # given / the scene's


def test_every_scene_of_a_model_holds_its_robot_shapes_made_once():
    """The robot's shapes are the model's (immutable, made once): two scenes of one model hold the same
    objects, a world shape named as one of them is renamed in its scene and the robot's keeps its name in
    both; another model's are its own."""
    model = chain_model()
    first = sd.Scene(model, world=[sd.Shape("plane", name="floor")])
    again = sd.Scene(model, world=[sd.Shape("box", (1, 1, 1), name="s0")], self_collision=False)
    robot = len(model.geometry("collision"))
    assert all(a is b for a, b in zip(first.shapes[:robot], again.shapes[:robot]))
    assert [s.name for s in again.shapes] == ["s0", "s1", "s1b", "s2", "s3", "s0_2"]
    assert [s.name for s in first.shapes[:robot]] == ["s0", "s1", "s1b", "s2", "s3"]
    assert sd.Scene(chain_model()).shapes[0] is not first.shapes[0]


def test_mjcf_scene_takes_the_floor_and_frictions_of_mujocos_model():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_mjcf(HUMANOID, geometry=True)
    m = mujoco.MjModel.from_xml_path(str(HUMANOID))
    scene = sd.Scene(model)
    colliding = [g for g in range(m.ngeom) if m.geom_contype[g] or m.geom_conaffinity[g]]
    names = [mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, g) for g in colliding]
    assert sorted(s.name for s in scene.shapes) == sorted(names)
    for g, name in zip(colliding, names):
        s = scene.shape(name)
        assert s.friction == m.geom_friction[g][0]
        assert (s.body < 0) == (m.geom_bodyid[g] == 0)
    floor = [s for s in scene.shapes if s.body < 0]
    assert [s.kind for s in floor] == ["plane"]
    assert all((s.name, floor[0].name) in scene.pairs for s in scene.shapes if s.body >= 0)


PRIORITY = """<mujoco><worldbody>
<geom name="floor" type="plane" size="5 5 .1" friction="0.3" priority="1"/>
<body name="a" pos="0 0 0.09"><freejoint/><geom name="box" type="box" size=".1 .1 .1" friction="0.9"/></body>
<body name="b" pos="1 0 0.09"><freejoint/><geom name="ball" type="sphere" size=".1" friction="0.7" priority="1"/></body>
<body name="c" pos="2 0 0.14"><freejoint/><geom name="pill" type="capsule" size=".05 .1" friction="0.2" priority="2"/>
</body></worldbody></mujoco>"""


def _mujoco_and_scene(tmp_path, xml):
    """MuJoCo's model and data after ``mj_forward`` of the MJCF text ``xml``, and our scene of it."""
    path = tmp_path / "scene.xml"
    path.write_text(xml)
    m = mujoco.MjModel.from_xml_path(str(path))
    d = mujoco.MjData(m)
    mujoco.mj_forward(m, d)
    return m, d, sd.Scene(sd.load_mjcf(str(path), geometry=True))


def _check_against_mujocos_contacts(m, d, scene):
    """For each contact of MuJoCo's ``d``: the scene checks its pair, with friction 0 where MuJoCo's
    contact is frictionless (``dim`` 1) and MuJoCo's friction otherwise; ``{pair: dim}``."""
    mu, dims = dict(zip(scene.pairs, scene.pair_friction)), {}
    for c in d.contact[:d.ncon]:
        a, b = (mujoco.mj_id2name(m, mujoco.mjtObj.mjOBJ_GEOM, int(g)) for g in (c.geom1, c.geom2))
        pair = (a, b) if (a, b) in mu else (b, a)
        assert mu[pair] == (0.0 if c.dim == 1 else c.friction[0]), (pair, c.dim)
        dims[pair] = int(c.dim)
    return dims


def test_pair_friction_follows_mujocos_priority_rule(tmp_path):
    """Three bodies 1 cm into a floor of friction 0.3 and priority 1: a box (0.9, priority 0: the
    floor's 0.3), a ball (0.7, priority 1: the larger, 0.7), a capsule (0.2, priority 2: its own) --
    each MuJoCo contact's friction is the scene's pair friction."""
    m, d, scene = _mujoco_and_scene(tmp_path, PRIORITY)
    assert [scene.shape(n).priority for n in ("floor", "box", "ball", "pill")] == [1, 0, 1, 2]
    assert _check_against_mujocos_contacts(m, d, scene) == {("box", "floor"): 3, ("ball", "floor"): 3,
                                                            ("pill", "floor"): 3}
    mu = dict(zip(scene.pairs, scene.pair_friction))
    assert (mu[("box", "floor")], mu[("ball", "floor")], mu[("pill", "floor")]) == (0.3, 0.7, 0.2)
    with pytest.raises(ValueError, match="Shape 'step': priority must be an integer"):
        sd.Shape("box", (1, 1, 1), name="step", priority=0.5)


CONDIM = """<mujoco><worldbody>
<geom name="floor" type="plane" size="5 5 .1" friction="0.3" priority="1"/>
<geom name="slab" type="box" pos="10 0 0.5" size="2 2 .5" friction="0.4" condim="1" priority="1"/>
<body pos="0 0 0.09"><freejoint/><geom name="a" type="sphere" size=".1" friction="0.9" condim="1"/></body>
<body pos="1 0 0.09"><freejoint/><geom name="b" type="sphere" size=".1" friction="0.9" condim="1" priority="2"/></body>
<body pos="2 0 0.09"><freejoint/><geom name="c" type="sphere" size=".1" friction="0.9" condim="1" priority="1"/></body>
<body pos="9 0 1.09"><freejoint/><geom name="d" type="sphere" size=".1" friction="0.9" condim="1" priority="1"/></body>
<body pos="10 0 1.09"><freejoint/><geom name="e" type="sphere" size=".1" friction="0.9" priority="1"/></body>
<body pos="11 0 1.09"><freejoint/><geom name="f" type="sphere" size=".1" friction="0.9"/></body>
<body pos="9 1 1.09"><freejoint/><geom name="g" type="sphere" size=".1" friction="0.9" condim="6" priority="1"/></body>
<body pos="0 3 3"><freejoint/><geom name="h" type="sphere" size=".1" contype="0" conaffinity="0"/></body>
<body pos="0 3 3.19"><freejoint/><geom name="i" type="sphere" size=".1" contype="0" conaffinity="0"/></body>
<body pos="1 3 3"><freejoint/><geom name="j" type="sphere" size=".1" condim="1" contype="0" conaffinity="0"/></body>
<body pos="1 3 3.19"><freejoint/><geom name="k" type="sphere" size=".1" condim="1" contype="0" conaffinity="0"/></body>
</worldbody><contact><pair geom1="h" geom2="i" condim="1" friction="0.5 0.5"/>
<pair geom1="j" geom2="k" condim="3" friction="0.6 0.6"/></contact></mujoco>"""


def test_condim_1_makes_a_pair_frictionless_as_mujocos_mixing_does(tmp_path):
    """Spheres 1 cm into a floor (condim 3, priority 1) and a slab (condim 1, priority 1), of condim
    1, 3 and 6 and priorities 0 to 2, and two explicit pairs whose own condim (1, 3) overrides their
    geoms': MuJoCo's contact ``dim`` is the higher priority's condim, else the larger, else the pair's
    (by hand below); the scene's pair friction is 0 exactly where ``dim`` is 1, MuJoCo's friction
    elsewhere (condim 6 keeps its sliding friction)."""
    m, d, scene = _mujoco_and_scene(tmp_path, CONDIM)
    assert [scene.shape(n).condim for n in "abcdefghijk"] == [1, 1, 1, 1, 3, 3, 6, 3, 3, 1, 1]
    dims = _check_against_mujocos_contacts(m, d, scene)
    assert dims == {("a", "floor"): 3, ("b", "floor"): 1, ("c", "floor"): 3, ("d", "slab"): 1,
                    ("e", "slab"): 3, ("f", "slab"): 1, ("g", "slab"): 6, ("h", "i"): 1, ("j", "k"): 3}
    mu = dict(zip(scene.pairs, scene.pair_friction))
    assert (mu[("a", "floor")], mu[("j", "k")], mu[("g", "slab")]) == (0.3, 0.6, 0.9)
    with pytest.raises(ValueError, match="Shape 'step': condim must be 1, 3, 4 or 6"):
        sd.Shape("box", (1, 1, 1), name="step", condim=2)
    g = scene.model.geometry("collision")[0]._replace(name="bad", condim=2)
    with pytest.raises(sd.ModelError, match="geometry 'bad': condim must be 1, 3, 4 or 6"):
        scene.model.with_geometry(g)


def test_humanoid_parts_are_frictionless_on_each_other_and_not_on_the_floor():
    """dm_control's humanoid gives its parts condim 1 (frictionless on each other) and its floor
    condim 3: in random poses low enough to touch the floor (joints within their ranges), every
    MuJoCo contact's pair has friction 0 in the scene exactly where its ``dim`` is 1; both kinds occur."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scene = sd.Scene(sd.load_mjcf(HUMANOID, geometry=True))
    m = mujoco.MjModel.from_xml_path(str(HUMANOID))
    d = mujoco.MjData(m)
    rng = np.random.default_rng(3)
    dims = {}
    for _ in range(40):
        mujoco.mj_resetData(m, d)
        d.qpos[2], d.qpos[3:7] = rng.uniform(0.1, 0.6), rng.normal(size=4)
        for j in range(1, m.njnt):
            d.qpos[m.jnt_qposadr[j]] = rng.uniform(*m.jnt_range[j])
        mujoco.mj_forward(m, d)
        dims.update(_check_against_mujocos_contacts(m, d, scene))
    self_pairs = [p for p in dims if "floor" not in p]
    assert self_pairs and all(dims[p] == 1 for p in self_pairs)
    assert any("floor" in p for p in dims) and all(dims[p] == 3 for p in dims if "floor" in p)


@pytest.mark.parametrize("make, message", [
    (lambda: sd.Shape("box", (0.1, 0, 0.1), name="lid"), "Shape 'lid'.*positive"),
    (lambda: sd.Shape("sphere", (-1,)), "Shape 'sphere'.*positive"),
    (lambda: sd.Shape("capsule", (0.1,)), "capsule takes 2"),
    (lambda: sd.Shape("box", (1, 1, 1), placement=(np.eye(3), [0, np.nan, 0]), name="crate"),
     "Shape 'crate': placement: rotation and position must be finite"),
    (lambda: sd.Shape("box", (1, 1, 1), placement=np.full((4, 4), np.nan)), "Shape 'box': placement"),
    (lambda: sd.Shape("box", (1, 1, 1), placement=(2 * np.eye(3), [0, 0, 0])), "not a proper rotation"),
    (lambda: sd.Shape("mesh", mesh="/no/such/file.stl", name="rock"), "Shape 'rock': cannot read the mesh file"),
    (lambda: sd.Shape("cone", (1, 1)), "kind must be one of"),
    (lambda: sd.Shape("sphere", (1,), friction=-0.1), "friction"),
    (lambda: sd.Scene(chain_model(), srdf=[("b0", "elbow")]), "'elbow', which is no link"),
    (lambda: sd.Scene(chain_model(), srdf=[("b0",)]), r"srdf: a disabled pair must be \(link1, link2\), got \('b0',\)"),
    (lambda: sd.Scene(chain_model(), srdf=[7]), r"srdf: a disabled pair must be \(link1, link2\), got 7"),
    (lambda: sd.Scene(chain_model()).with_pairs(add=[("s0", "nose")]), "'nose' names no shape"),
    (lambda: sd.Scene(box_model(geometry=False)), "no collision shapes; load it with geometry=True"),
    (lambda: sd.Scene(chain_model(), world=[np.eye(3)]), "world\\[0\\] must be a Shape"),
    (lambda: sd.Scene(chain_model(), self_collision="no"), "self_collision must be True or False, got 'no'"),
    (lambda: sd.Shape("mesh", mesh=(np.eye(4)[:, :3], [[0, 1, 4]]), name="tri"),
     r"Shape 'tri': mesh faces must be integer vertex indices in \[0, 4\).*int64 values in \[0, 4\]"),
    (lambda: sd.Shape("mesh", mesh=(np.eye(4)[:, :3], [[0.0, 1.0, 2.0]])), r"float64 values in \[0.0, 2.0\]"),
])
def test_bad_input_is_named(make, message):
    with pytest.raises((ValueError, TypeError), match=message):
        make()


def test_unreadable_mesh_file_names_the_shape(tmp_path):
    bad = tmp_path / "rock.stl"
    bad.write_bytes(b"this is no mesh")
    scene = sd.Scene(box_model(), world=[sd.Shape("mesh", mesh=str(bad), name="rock")])
    with pytest.raises(ValueError, match="shape 'rock': coal cannot read the mesh file") as e:
        sd.collide(scene, [0, 0, 1, 0, 0, 0, 1])
    assert "\n" not in str(e.value) and ".cpp" not in str(e.value)       # (coal's reason, not its sources)


# --- steps ----------------------------------------------------------------------------------------

def floor_scene(*more):
    return sd.Scene(box_model(), world=[sd.Shape("plane", name="floor"), *more], friction=0.5)


def test_scene_step_is_the_step_with_the_corner_contacts():
    """A box resting flat: the scene's four hits are its bottom corners, so the step equals the
    point-contact step on those corners (tested against the hand derivation in test_friction), to the
    solver's tolerance: each solve stops within ``tol`` of Coulomb's law relative to the problem's
    velocity scale (the free contact velocities, of the size of ``v``: the box stops within the step,
    so ``v+`` itself is no scale), and 100 tol leaves room for the conditioning of the four corners."""
    scene = floor_scene()
    q = [0.1, -0.2, SIDE / 2, 0, 0, 0, 1]                               # a plain list
    v = np.array([0.3, -0.1, 0.2, 0.05, 0.02, -0.4])
    hits = sd.collide(scene, q)
    assert len(hits.distances) == 4 and np.allclose(hits.distances, 0, atol=1e-15)
    corners = [sd.Contact("box", "3d", friction=0.5, point=(x, y, -SIDE / 2), name=f"c{i}")
               for i, (x, y) in enumerate([(-.1, -.1), (-.1, .1), (.1, -.1), (.1, .1)])]
    with sd.use_backend("numpy"):
        ref = sd.contact_step(box_model(), q, v, np.zeros(6), corners, DT)
    s = sd.contact_step(scene.model, q, v, np.zeros(6), scene, DT)
    scale = np.abs(v).max()
    assert np.abs(ref.v).max() < 1e-6 * scale                          # it stops (the hand derivation's rest)
    assert np.allclose(s.v, ref.v, rtol=0, atol=100 * 1e-8 * scale) and \
        np.allclose(s.q, ref.q, rtol=0, atol=100 * 1e-8 * DT * scale)


# ADMM may stop a few iterations short of tol at an impact (the warning gives its residuals, about 1e-9
# m/s); what the drop must reach is asserted below
@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
@pytest.mark.parametrize("table", [False, True])
def test_dropped_box_comes_to_rest_carrying_its_weight(table):
    more = [sd.Shape("box", (1.0, 1.0, 0.2), placement=(np.eye(3), [0, 0, 0.1]), name="table")] if table else []
    scene = floor_scene(*more)
    top = 0.2 if table else 0.0
    axis = np.array([1.0, 1.0, 0]) / np.sqrt(2)
    q0 = np.r_[0, 0, top + 0.3, np.sin(0.15) * axis, np.cos(0.15)]          # tilted by 0.3 rad
    steps = 600
    r = sd.rollout(scene.model, q0, np.zeros(6), np.zeros(6), scene, DT, steps)
    E = np.array([sd.mechanical_energy(scene.model, q, v) for q, v in zip(r.q, r.v)])
    vmax = np.sqrt(2 * G * 0.3)                                           # the speed at impact
    assert np.diff(E).max() <= TOL * (MASS * vmax) * vmax                 # never adds energy
    assert np.abs(r.v[-1]).max() <= 1e-6                                   # at rest (g dt = 1e-2 m/s a step)
    assert abs(r.q[-1][2] - top - SIDE / 2) <= 1e-6                        # on its face
    normal = sum(imp[:, 2].sum() for imp in r.impulses[-1:])
    assert abs(normal - MASS * G * DT) <= 1e-6 * MASS * G * DT           # carries its weight
    hits = sd.collide(scene, r.q[-1])
    on = [d for p, d in zip(hits.pairs, hits.distances) if p[1] == ("table" if table else "floor")]
    assert len(on) >= 4 and min(on) >= -TOL * SIDE                          # no penetration


def test_scene_step_refuses_a_batch_of_two_axes_and_another_model():
    scene = floor_scene()
    with pytest.raises(ValueError, match=r"one state.*or a\s+batch \(B, nq\)"):
        sd.contact_step(scene.model, np.zeros((2, 2, 7)) + [0, 0, 1, 0, 0, 0, 1], np.zeros(6), np.zeros(6), scene, DT)
    with pytest.raises(ValueError, match="scene was built on model"):
        sd.contact_step(box_model(), [0, 0, 1, 0, 0, 0, 1], np.zeros(6), np.zeros(6), scene, DT)


@pytest.mark.parametrize("above", [False, True])
def test_box_on_a_slope_sticks_below_the_friction_angle_and_slides_above_at_the_coulomb_rate(above):
    """The slope is a tilted plane shape; the contacts are the corners collide finds.  By hand: below
    atan(mu) the box stays; above it gains g (sin theta - mu cos theta) dt a step downhill."""
    mu = 0.5
    theta = np.arctan(mu) + (0.1 if above else -0.05)
    Ry = np.array([[np.cos(theta), 0, np.sin(theta)], [0, 1, 0], [-np.sin(theta), 0, np.cos(theta)]])
    slope = sd.Shape("plane", placement=(Ry, [0, 0, 0]), friction=mu, name="slope")
    scene = sd.Scene(box_model(), world=[slope], friction=0.9)               # the slope's mu counts
    n = Ry[:, 2]
    q = np.concatenate([SIDE / 2 * n, [0.0, np.sin(theta / 2), 0.0, np.cos(theta / 2)]])
    v = np.zeros(6)
    rate = G * (np.sin(theta) - mu * np.cos(theta)) * DT if above else 0.0
    for k in range(1, 11):
        s = sd.contact_step(scene.model, q, v, np.zeros(6), scene, DT)
        q, v = s.q, s.v
        assert len(s.modes) == 4                                             # the four bottom corners
        downhill_speed = v[3]              # body x = the tangent (cos theta, 0, -sin theta), downhill
        assert abs(downhill_speed - k * rate) <= 4 * TOL * max(G * DT, k * rate) * k
        assert np.abs(v[[0, 1, 2, 4, 5]]).max() <= 4 * TOL * k * G * DT / (SIDE / 2)
        assert list(s.modes) == (["slide"] if above else ["stick"]) * 4


BOX_XML = """<mujoco><option timestep="0.001"/>
<worldbody><geom name="floor" type="plane" size="0 0 1" friction="0.7"/>
<body name="box" pos="0 0 0.25" euler="20 10 0"><freejoint/><geom name="box" type="box" size="0.1 0.15 0.05" mass="2"/>
</body></worldbody></mujoco>"""


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_dropped_box_rests_as_in_mujoco(tmp_path):
    """The same MJCF file in MuJoCo and in our scene: the box lands on its large face in both.
    MuJoCo's contact is soft (its default solref lets a resting box sink a fraction of a millimetre)
    and its impact differs, so what is compared is what physics fixes: the face it rests on (flat,
    at rest) and its height, within a millimetre; not where it slid to."""
    path = tmp_path / "box.xml"
    path.write_text(BOX_XML)
    m = mujoco.MjModel.from_xml_string(BOX_XML)
    d = mujoco.MjData(m)
    steps = 600
    for _ in range(steps):
        mujoco.mj_step(m, d)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_mjcf(path, geometry=True)
    scene = sd.Scene(model)
    assert dict(zip(scene.pairs, scene.pair_friction)) == {("box", "floor"): 1.0}    # MuJoCo's max of 0.7 and 1
    r = sd.rollout(model, model.joint_dynamics.reference, np.zeros(6), np.zeros(6), scene, 1e-3, steps)
    R_mj = np.empty(9)
    mujoco.mju_quat2Mat(R_mj, d.qpos[3:7])
    x, y, z, w = r.q[-1][3:]
    tilt_ours = np.hypot(x, y) * 2                                       # the angle of body z from world z
    tilt_mj = np.arccos(min(1.0, R_mj[8]))
    assert tilt_ours <= 1e-6 and tilt_mj <= 1e-3
    assert abs(r.q[-1][2] - 0.05) <= 1e-6 and abs(d.qpos[2] - r.q[-1][2]) <= 1e-3
    assert np.abs(r.v[-1]).max() <= 1e-6 and np.abs(d.qvel).max() <= 1e-3
