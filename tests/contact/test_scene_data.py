"""The step's contact data on the native road (sparsedyn.contact.scene_data, scene_batch) come from
the collision kernel with a broad phase, ``collision_candidates_near``'s rows with the scene's margin as
their cutoff (run by the scene's one collision kernel, the steps' ``collision_candidates_ahead``, at
``v = 0``).

Oracle: the same data laid out from every candidate of every pair, ``collision_candidates`` (itself
checked against coal and the vectorised closed forms in test_collision_kernel), put in the broad
phase's columns: a pair the broad phase leaves out has no candidate within the margin, and those it
computes are the same closed forms, so the contacts, their slots and their rows are the same, the
rows to the rounding of two evaluations (``rounding_bound(64)`` times the size of the values).
"""

import dataclasses

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.codegen import native
from sparsedyn.contact import scene_batch, scene_data
from sparsedyn.contact.collision_kernel import kernel_plan
from sparsedyn.contact.collision import collide_within
from sparsedyn.contact.look_ahead import STEP_CAPACITY, pair_cutoffs
from conftest import dm_control_humanoid
from test_collision_kernel import _bound
from test_collision_near import _as_near


@pytest.fixture
def native_backend():
    with sd.use_backend("native", deterministic=True):
        yield


def _fresh(name):
    """dm_control's humanoid under a name of its own: a model no kernel has run on in this process
    (compiled models are shared by the model's fingerprint, its name part of it)."""
    return dataclasses.replace(dm_control_humanoid(), name=name)


def _ran(model):
    """The collision kernels run natively on ``model`` (their builds' names less the static arguments' tag)."""
    names = [n for n in native.shared(model).kernels if n.startswith("collision_candidates")]
    return {next((k for k in ("collision_candidates_near", "collision_candidates_ahead") if n.startswith(k)),
                 "collision_candidates") for n in names}


def _full(scene, kp, q, cutoff=None):
    """``near_candidates`` from every candidate of every pair (the full kernel), in its 11 columns (every
    candidate is within any ``cutoff``)."""
    c = sd.collision_candidates(scene.model, q, kp.shapes, kp.pairs)
    return _as_near(c.reshape(-1, c.shape[-1])).reshape(c.shape[:-1] + (11,))


def _states(model, n, seed):
    """Random humanoid configurations near the floor: limbs on the floor, through each other, far."""
    rng = np.random.default_rng(seed)
    Q = np.array([model.random_configuration(rng) for _ in range(n)])
    Q[:, 2] = rng.uniform(0.05, 0.4, n)
    return Q


def test_a_states_data_come_from_the_broad_phase_and_are_the_full_kernels(native_backend, monkeypatch):
    """dm_control's humanoid (161 closed-form pairs): the step's data of a state are computed by the
    broad-phase kernel (no call of the full one), with pairs both within the margin and left out,
    and equal the data laid out from the full kernel's candidates in a scene of their own: the same
    scene pairs, slot frames, slots and rows."""
    model = _fresh("humanoid, one state")
    near, full = sd.Scene(model), sd.Scene(model)
    kp = kernel_plan(near)
    got = [scene_data.scene_slot_data(near, q) for q in _states(model, 12, 3)]
    assert _ran(model) == {"collision_candidates_ahead"}  # the full kernel never ran (the steps' broad phase did)
    contacts = sum(len(pair) for pair, _ in got)
    computed = sum(len(np.unique(kp.pair[scene_data.near_candidates(near, kp, q)[:, 1:].any(1)]))
                   for q in _states(model, 12, 3))      # the pairs the broad phase kept
    assert contacts >= 20 and 0 < computed < 12 * len(kp.pairs) // 2   # most pairs left out, some touching
    monkeypatch.setattr(scene_data, "near_candidates", _full)
    for q, (pair, slots) in zip(_states(model, 12, 3), got):
        want_pair, want = scene_data.scene_slot_data(full, q)
        assert np.array_equal(pair, want_pair) and slots.frames == want.frames
        assert np.array_equal(slots.index, want.index)
        assert np.abs(slots.data - want.data).max(initial=0.0) <= _bound(want.data)


def test_a_batchs_data_come_from_the_broad_phase_and_are_the_full_kernels(native_backend, monkeypatch):
    """The same for a batch of humanoid states in one call (as a plain list): each state's contacts,
    slots and rows those laid out from the full kernel's candidates of the batch."""
    model = _fresh("humanoid, a batch")
    near, full = sd.Scene(model), sd.Scene(model)
    Q = _states(model, 24, 4)
    pair, slot, ends, slots = scene_batch.scene_batch_slot_data(near, Q.tolist())
    assert _ran(model) == {"collision_candidates_ahead"}
    assert ends[-1] >= 40 and np.count_nonzero(np.diff(ends)) >= 12
    monkeypatch.setattr(scene_batch, "near_candidates", _full)
    want_pair, want_slot, want_ends, want = scene_batch.scene_batch_slot_data(full, Q)
    assert np.array_equal(pair, want_pair) and np.array_equal(slot, want_slot) and np.array_equal(ends, want_ends)
    assert slots.frames == want.frames and slots.data.shape == want.data.shape
    assert np.abs(slots.data - want.data).max(initial=0.0) <= _bound(want.data)


def test_robot_meshes_on_a_floor_take_this_road_with_the_contact_objects_data(native_backend, monkeypatch):
    """solo12 (17 collision meshes, no closed form in the kernel) on a floor: a state's data come with
    no Contact object (``scene_contacts`` is never called) and equal those laid out from Contact
    objects (``scene_slots(scene_contacts(...))``: :func:`~sparsedyn.collide`'s hits, each mesh-plane
    pair at most four), at the margin and with each pair's look-ahead and rotation over the step; the
    rows to the rounding of two evaluations of the same closed form."""
    import warnings
    from erd import robots_dir
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(robots_dir() / "solo_description" / "robots" / "solo12.urdf", floating_base=True,
                             geometry=True)
    fast = sd.Scene(model, world=[sd.Shape("plane", name="floor")], self_collision=False)
    slow = sd.Scene(model, world=[sd.Shape("plane", name="floor")], self_collision=False)
    rng = np.random.default_rng(11)
    states = []
    for _ in range(30):
        q = model.random_configuration(rng)
        q[2] = rng.uniform(0.0, 0.35)
        states.append((q, 0.3 * rng.standard_normal(model.nv)))
    assert _as_contact_objects_data(fast, slow, states, monkeypatch) >= 20


def test_robot_meshes_against_each_other_take_this_road_with_the_contact_objects_data(native_backend, monkeypatch):
    """solo12 with self-collision on a floor: its meshes' hulls against each other (coal's closest pair
    of each pair, no closed form in the kernel: ``hull_pairs``) beside its meshes on the floor.  A
    state's data come with no Contact object and equal those laid out from Contact objects, at the
    margin and with each pair's look-ahead; some states' contacts are of two robot shapes; a batch's
    data are each state's."""
    import warnings
    from erd import robots_dir
    from sparsedyn.contact.hull_pairs import hull_pairs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(robots_dir() / "solo_description" / "robots" / "solo12.urdf", floating_base=True,
                             geometry=True)
        fast, slow = (sd.Scene(model, world=[sd.Shape("plane", name="floor")], margin=0.01) for _ in range(2))
    mixed = scene_data._mixed_plan(fast)[0]
    robot = [k for k, (_, j) in enumerate(fast.index.tolist()) if fast.shapes[j].body >= 0]    # (b a robot shape)
    assert np.array_equal(mixed.hulls, robot) and np.array_equal(hull_pairs(fast, robot), robot) and len(robot) > 50
    states = _held_states(slow, np.random.default_rng(12), 60, (0.1, 0.45))
    assert len(states) >= 25
    assert _as_contact_objects_data(fast, slow, states, monkeypatch) >= 20
    selves = [np.isin(scene_data.scene_slot_data(fast, q)[0], robot).sum() for q, _ in states]
    assert sum(x > 0 for x in selves) >= 10
    # a batch of them in one call: each state's contacts and data those of its single call
    Q, V = np.array([q for q, _ in states]), np.array([v for _, v in states])
    pair, _, ends, slots = scene_batch.scene_batch_slot_data(fast, Q, ahead=(V, 1e-3))
    for b, (q, v) in enumerate(states):
        one_pair, one = scene_data.scene_slot_data(fast, q, ahead=(v, 1e-3))
        assert np.array_equal(pair[ends[b]:ends[b + 1]], one_pair) and one.frames == slots.frames
        assert np.abs(slots.data[b] - one.data).max(initial=0.0) <= _bound(one.data)


def test_a1s_cylinders_against_its_boxes_and_spheres_take_this_road_with_the_contact_objects_data(native_backend,
                                                                                                   monkeypatch):
    """a1 (boxes, cylinders and spheres; self-collision) on a floor: its cylinders against its boxes and
    cylinders (coal's closest pairs) have no closed form in the kernel (against its spheres they are the
    kernel's), its boxes against each other are the two-box routine's rows (the trunk and a thigh tilted from
    it: a corner over a face that is not the pair's axis); a state's data come with no Contact object and
    equal those laid out from Contact objects."""
    import warnings
    from erd import robots_dir
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(robots_dir() / "a1_description" / "urdf" / "a1.urdf", floating_base=True, geometry=True)
        fast, slow = (sd.Scene(model, world=[sd.Shape("plane", name="floor")]) for _ in range(2))
    mixed = scene_data._mixed_plan(fast)[0]
    assert mixed.bb is not None and len(mixed.bb.pair) >= 10       # its boxes against each other: the two-box rows
    kinds = {tuple(sorted(s.kind for s in (fast.shapes[i], fast.shapes[j])))
             for i, j in fast.index[mixed.hulls].tolist()}
    assert kinds == {("box", "cylinder"), ("cylinder", "cylinder")} and not len(mixed.others)
    inside = {tuple(sorted(s.kind for s in (fast.shapes[i], fast.shapes[j])))
              for i, j in fast.index[np.unique(mixed.kernel.pair)].tolist()}
    assert ("cylinder", "sphere") in inside
    states = _held_states(slow, np.random.default_rng(4), 150, (0.05, 0.4))
    assert len(states) >= 25
    assert _as_contact_objects_data(fast, slow, states, monkeypatch, most=8) >= 20     # (a box's corners: 8)
    selves = [np.isin(scene_data.scene_slot_data(fast, q)[0], mixed.hulls).sum() for q, _ in states]
    assert sum(x > 0 for x in selves) >= 5


def test_a1s_cylinders_on_a_world_box_take_this_road_with_the_contact_objects_data(native_backend, monkeypatch):
    """a1 over a step (a world box) on a floor: its cylinders against the step are coal's closest pairs
    (``hull_pairs``), as on :func:`~sparsedyn.collide`'s road; a state's data come with no Contact object
    and equal those laid out from Contact objects, some states' contacts a cylinder's on the step."""
    import warnings
    from erd import robots_dir
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(robots_dir() / "a1_description" / "urdf" / "a1.urdf", floating_base=True, geometry=True)
    step = sd.Shape("box", (0.8, 1.0, 0.04), placement=(np.eye(3), [0.4, 0.0, 0.02]), name="step")
    fast, slow = (sd.Scene(model, world=[sd.Shape("plane", name="floor"), step], self_collision=False)
                  for _ in range(2))
    mixed = scene_data._mixed_plan(fast)[0]
    cylinders = [k for k in mixed.hulls.tolist() if fast.pair_names[k][1] == "step"]
    assert len(cylinders) == 8 and not len(mixed.others)          # (two cylinders a leg, all of them)
    states = _held_states(slow, np.random.default_rng(6), 150, (0.06, 0.2), xy=((0.0, 0.8), (-0.5, 0.5)))
    assert len(states) >= 25
    assert _as_contact_objects_data(fast, slow, states, monkeypatch, most=8) >= 20
    on_step = [np.isin(scene_data.scene_slot_data(fast, q.tolist())[0], cylinders).sum() for q, _ in states]
    assert sum(x > 0 for x in on_step) >= 5


def test_an_ellipsoid_on_a_floor_and_a_table_takes_this_road_with_the_contact_objects_data(native_backend,
                                                                                          monkeypatch):
    """A free ellipsoid (an egg, dm_control's CMU humanoid's and quadruped's shape) over a floor and beside a
    table: its pair with the floor is the collision kernel's (its support point) and its pair with the table
    coal's (``hull_pairs``); a state's data come with no Contact object and equal those laid out from Contact
    objects, some states on the floor and some on the table."""
    from sparsedyn.model.spatial import Transform
    from test_reduction import random_poses
    b = sd.ModelBuilder("egg").add_body("egg", None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) * 0.01)
    model = b.build().with_geometry(sd.Geometry("egg", 0, Transform(np.eye(3), np.zeros(3)), "ellipsoid",
                                                (0.05, 0.04, 0.03), "collision"))

    def scene():
        return sd.Scene(model, world=[sd.Shape("plane", name="floor"),
                                      sd.Shape("box", (0.2, 0.2, 0.05), placement=(np.eye(3), [0.15, 0.0, 0.025]),
                                               name="table")])
    fast, slow = scene(), scene()
    assert np.array_equal(scene_data._mixed_plan(fast)[0].hulls, [1])
    assert list(kernel_plan(fast).inside) == [True, False]
    rng = np.random.default_rng(13)
    states = [(q, 0.3 * rng.standard_normal(6)) for q in random_poses(rng, 40, 0.15, (0.02, 0.1))]
    assert _as_contact_objects_data(fast, slow, states, monkeypatch) >= 20
    touched = {fast.pair_names[k][1] for q, _ in states for k in scene_data.scene_slot_data(fast, q.tolist())[0]}
    assert touched == {"floor", "table"}                          # (each state as a plain list, too)


def test_a_mesh_beside_a_world_mesh_and_a_ball_takes_this_road_with_the_contact_objects_data(native_backend,
                                                                                               monkeypatch):
    """The mesh prism on a floor beside a world prism (a rock) and a world ball: the prism's pairs with them
    are coal's closest pairs (no closed form in the kernel: ``hull_pairs``).  A state's data come with
    no Contact object and equal those laid out from Contact objects; some states touch the rock and the ball."""
    from test_reduction import prism, prism_scene, random_poses
    model = prism_scene().model

    def scene():
        return sd.Scene(model, world=[sd.Shape("plane", name="floor"),
                                      sd.Shape("mesh", mesh=prism(), placement=(np.eye(3), [0.2, 0.0, 0.03]),
                                               name="rock"),
                                      sd.Shape("sphere", (0.05,), placement=(np.eye(3), [-0.15, 0.0, 0.05]),
                                               name="ball")], friction=0.8)
    fast, slow = scene(), scene()
    assert {fast.pair_names[k][1] for k in scene_data._mixed_plan(fast)[0].hulls} == {"rock", "ball"}
    rng = np.random.default_rng(8)
    states = [(q, 0.3 * rng.standard_normal(6)) for q in random_poses(rng, 40, 0.1, (0.03, 0.12))]
    assert _as_contact_objects_data(fast, slow, states, monkeypatch) >= 15
    touched = {fast.pair_names[k][1] for q, _ in states for k in scene_data.scene_slot_data(fast, q)[0]}
    assert {"rock", "ball", "floor"} <= touched


def _held_states(scene, rng, n, heights, xy=None):
    """Of ``n`` random ``(q, v)`` of the scene's robot (its base at a height in ``heights``, and where given
    within the ranges ``xy`` of x and y; velocities 0.3 m/s or rad/s), those whose hits within a 1 ms
    step's look-ahead a step keeps all of (no more than its capacity: the oracle, collide's hits, keeps
    them all)."""
    model, states = scene.model, []
    for _ in range(n):
        q = model.random_configuration(rng)
        q[2] = rng.uniform(*heights)
        if xy is not None:
            q[:2] = [rng.uniform(*r) for r in xy]
        v = 0.3 * rng.standard_normal(model.nv)
        if len(collide_within(scene, q, pair_cutoffs(scene, q, v, 1e-3)).pair) <= STEP_CAPACITY:
            states.append((q, v))
    return states


def _as_contact_objects_data(fast, slow, states, monkeypatch, most=4):
    """Asserts that ``fast``'s data at each state ``(q, v)`` come with no Contact object and equal
    ``slow``'s laid out from Contact objects (at the margin and with each pair's look-ahead of a 1 ms
    step), at most ``most`` rows a pair (a mesh's patch: four); returns how many had a contact."""
    from sparsedyn.contact import scene_step
    from sparsedyn.contact.look_ahead import pair_cutoffs, pair_spins
    objects = scene_step.scene_contacts
    monkeypatch.setattr(scene_step, "scene_contacts", lambda *a, **k: pytest.fail("a Contact object was made"))
    got = [(scene_data.scene_slot_data(fast, q), scene_data.scene_slot_data(fast, q, ahead=(v, 1e-3)))
           for q, v in states]
    monkeypatch.setattr(scene_step, "scene_contacts", objects)
    touching = 0
    for (q, v), pairs in zip(states, got):
        ahead = (None, None), (pair_cutoffs(slow, q, v, 1e-3), pair_spins(slow, q, v, 1e-3))
        for (cutoff, spin), (pair, slots) in zip(ahead, pairs):
            hits = sd.collide(slow, q) if cutoff is None else None
            want = scene_step.scene_slots(slow, scene_step.scene_contacts(slow, q, hits, cutoff, spin))
            assert np.bincount(pair, minlength=len(fast.index)).max(initial=0) <= most
            assert slots.frames == want.frames and np.array_equal(slots.index, want.index)
            assert np.abs(slots.data - want.data).max(initial=0.0) <= _bound(want.data)
            touching += len(pair) > 0
    return touching


def test_a_mesh_on_a_box_and_a_floor_takes_this_road_with_the_contact_objects_data(native_backend, monkeypatch):
    """A mesh prism (no closed form in the kernel) over a world box and a floor, at random poses about
    the box's top and its edges: a state's data come with no Contact object and equal those laid out
    from Contact objects (:func:`~sparsedyn.collide`'s hits: coal's closest pair of the hull and the
    box, the hull vertices on its face)."""
    from test_reduction import prism_scene, random_poses
    model = prism_scene().model

    def scene():
        return sd.Scene(model, world=[sd.Shape("plane", name="floor"),
                                      sd.Shape("box", (0.4, 0.4, 0.1), placement=(np.eye(3), [0.0, 0.0, 0.05]),
                                               name="top")], friction=0.8)
    fast, slow = scene(), scene()
    rng = np.random.default_rng(5)
    states = [(q, 0.3 * rng.standard_normal(6)) for q in random_poses(rng, 40, 0.3, (0.1, 0.18))]
    assert scene_data._mixed_plan(fast) is not None
    assert _as_contact_objects_data(fast, slow, states, monkeypatch) >= 15


def test_talos_mesh_plane_rows_come_from_the_native_loop_and_are_the_numpy_roads(monkeypatch):
    """talos (its 47 collision meshes on a floor) at random configurations pressed 5 to 40 mm into the
    floor: on the native road ``mesh_plane_rows`` of one state (a plain list) takes its rows from the
    native loop over the hull vertices (no vertex's height in NumPy: ``mesh_plane_patches``
    refused) and gives the NumPy road's rows (``mesh_plane_patches`` over every hull vertex of the near
    pairs): the same rows filled, in the same order, each row to the rounding of two evaluations of the
    same products (the kinematics of 38 joints, then a vertex's product); with each pair's own cutoff,
    and each pair's rotation over a step (some unknown: NaN).  A batch (a list of lists) takes the
    NumPy road on the native backend too: its rows are its states' single rows to rounding.  Each kept
    row's point in its body (columns 7:10) is placed by the body's pose (``forward_kinematics``) at
    its witness ``x + d n / 2`` on the mesh."""
    from conftest import rounding_bound
    from test_mesh_plane import _on_the_floor
    import warnings
    from erd import robots_dir
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(robots_dir() / "talos_data" / "robots" / "talos_reduced.urdf", floating_base=True,
                             geometry=True)
    scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")], self_collision=False)
    with sd.use_backend("native", deterministic=True):
        mesh = scene_data._mixed_plan(scene)[0].mesh
    P = len(mesh["pairs"])
    rng = np.random.default_rng(7)
    Q = [_on_the_floor(model, scene, rng) for _ in range(6)]
    cut = rng.uniform(scene.margin, 0.03, (len(Q), P))
    spin = rng.normal(0.0, 0.02, (len(Q), P, 3))
    spin[:, ::5] = np.nan
    bound = rounding_bound(64)
    filled = 0
    for theta in (None, spin):
        with sd.use_backend("numpy"):
            want = [scene_data.mesh_plane_rows(scene, mesh, q, c, None if theta is None else theta[i])
                    for i, (q, c) in enumerate(zip(Q, cut))]
        with sd.use_backend("native", deterministic=True), monkeypatch.context() as m:
            m.setattr(scene_data, "mesh_plane_patches", lambda *a, **k: pytest.fail("a vertex's height in NumPy"))
            got = [scene_data.mesh_plane_rows(scene, mesh, q.tolist(), c, None if theta is None else theta[i])
                   for i, (q, c) in enumerate(zip(Q, cut))]
        with sd.use_backend("native", deterministic=True):
            batch = scene_data.mesh_plane_rows(scene, mesh, [q.tolist() for q in Q], cut, theta)
        assert batch.shape == (len(Q), 4 * P, 11)
        for i, q in enumerate(Q):
            rows = np.isfinite(want[i][:, 0])
            assert np.array_equal(np.isfinite(got[i][:, 0]), rows)
            assert np.abs(got[i][rows] - want[i][rows]).max() <= bound
            assert np.array_equal(np.isfinite(batch[i][:, 0]), rows)
            assert np.abs(batch[i][rows] - got[i][rows]).max() <= bound
            R, o = sd.forward_kinematics(model, q)
            body = np.repeat(mesh["body"], 4)[rows]
            x = got[i][rows]
            wa = x[:, 1:4] + x[:, :1] * x[:, 4:7] / 2
            assert np.abs(np.einsum("kij,kj->ki", R[body], x[:, 7:10]) + o[body] - wa).max() <= bound
            filled += int(rows.sum())
    assert filled >= 60 and (np.asarray(want)[:, :, 0] < 0).any()      # many patches, some pressed in


def test_without_a_c_compiler_the_numpy_road_gives_the_rows(monkeypatch):
    """Where the native loop cannot be built (no C compiler), ``mesh_plane_rows`` on the native
    backend computes the heights in NumPy (``mesh_plane_patches``): the rows of the native road to
    rounding (the test above) either way."""
    from conftest import rounding_bound
    from sparsedyn.contact import mesh_plane_loop
    from test_reduction import prism_scene, random_poses
    scene = sd.Scene(prism_scene().model, world=[sd.Shape("plane", name="floor")])
    q = next(random_poses(np.random.default_rng(3), 1, 0.3, (0.0, 0.02))).tolist()
    calls, patches = [], scene_data.mesh_plane_patches
    with sd.use_backend("native", deterministic=True):
        mesh = scene_data._mixed_plan(scene)[0].mesh
        cut = np.full(len(mesh["pairs"]), scene.margin)
        want = scene_data.mesh_plane_rows(scene, mesh, q, cut)
        fresh = sd.Scene(scene.model, world=[sd.Shape("plane", name="floor")])
        monkeypatch.setattr(mesh_plane_loop, "_routine", lambda: None)               # no C compiler
        monkeypatch.setattr(scene_data, "mesh_plane_patches", lambda *a, **k: calls.append(1) or patches(*a, **k))
        first = scene_data.mesh_plane_rows(fresh, mesh, q, cut)
        again = scene_data.mesh_plane_rows(fresh, mesh, q, cut)
        assert calls == [1, 1]
    rows = np.isfinite(want[:, 0])
    assert rows.sum() >= 3 and (want[rows, 0] < 0).any()
    for got in (first, again):
        assert np.array_equal(np.isfinite(got[:, 0]), rows)
        assert np.abs(got[rows] - want[rows]).max() <= rounding_bound(64)


def _field_scene(heights, size=(0.6, 0.6, 0.06, 0.1)):
    """Six free bodies, a sphere, a capsule, a box, a cylinder, a mesh prism and an ellipsoid, over a height
    field of ``heights`` (each body's q from ``_field_states``)."""
    from sparsedyn.model.spatial import Transform
    from test_reduction import prism
    shapes = [("sphere", (0.04,)), ("capsule", (0.03, 0.1)), ("box", (0.08, 0.06, 0.05)), ("cylinder", (0.035, 0.07)),
              ("mesh", (1.0, 1.0, 1.0)), ("ellipsoid", (0.05, 0.04, 0.03))]
    b = sd.ModelBuilder("six")
    for name, _ in shapes:
        b.add_body(name, None, sd.make_joint("free"), mass=1.0, rot_inertia=np.eye(3) * 0.01)
    model = b.build().with_geometry(*(sd.Geometry(name, i, Transform(np.eye(3), np.zeros(3)), name, s, "collision",
                                                  **(dict(zip(("vertices", "faces"), prism())) if name == "mesh" else {}))
                                      for i, (name, s) in enumerate(shapes)))
    return sd.Scene(model, world=[sd.Shape("hfield", size, heights=heights, name="ground")], margin=0.01)


def _field_states(rng, n):
    """``n`` states ``(q, v)`` of :func:`_field_scene`'s bodies: each tipped up to 0.6 rad over its own
    part of the field, its centre 0.02-0.09 m above the field's base level (its heights 0-0.06 m)."""
    from test_reduction import random_poses
    at = [(-0.35, -0.35), (0.35, -0.35), (-0.35, 0.35), (0.35, 0.35), (0.0, 0.0), (0.0, -0.35)]
    return [(np.concatenate([x + [*c, 0, 0, 0, 0, 0] for x, c in zip(random_poses(rng, 6, 0.12, (0.02, 0.09)), at)]),
             0.3 * rng.standard_normal(36)) for _ in range(n)]


def test_shapes_on_a_height_field_take_this_road_with_the_contact_objects_data(native_backend, monkeypatch):
    """A sphere, a capsule, a box, a cylinder, a mesh and an ellipsoid over a bumpy height field: their
    pairs with it are rows of their hits (each feature's point on the surface, an ellipsoid's support
    point and a cylinder's rim points on the faces, the grid points pressing into a box, a capsule, a
    cylinder or an ellipsoid, the edges into a capsule's or a cylinder's side or an ellipsoid:
    ``collision_hfield.field_pairs``); a state's data come with no Contact object and equal those laid
    out from Contact objects, each kind touching the field in some states."""
    rng = np.random.default_rng(21)
    heights = rng.uniform(0, 1, (13, 13))
    fast, slow = _field_scene(heights), _field_scene(heights)
    pairs, rows = scene_data._mixed_plan(fast)[0].fields
    from test_reduction import SIDES
    # features (the prism's: its two rings' corners, its caps' centres inside the hull), + 8 for a box's,
    # a capsule's, a cylinder's and an ellipsoid's grid points and edges, + 4 for an ellipsoid's faces and 8
    # for a cylinder's (its four rim points on each cap)
    assert np.array_equal(rows, [1, 2 + 8, 8 + 8, 8 + 8, 2 * SIDES, 4 + 8])
    states = _field_states(rng, 40)
    assert _as_contact_objects_data(fast, slow, states, monkeypatch, most=16) >= 30
    touched = {fast.pair_names[k][0] for q, _ in states for k in scene_data.scene_slot_data(fast, q.tolist())[0]}
    # (each state as a plain list, too)
    assert touched == {"sphere", "capsule", "box", "cylinder", "mesh", "ellipsoid"}


def test_more_grid_points_than_a_pairs_rows_take_the_contact_objects_road(native_backend):
    """A box lying flat on a fine field of bumps (a grid point every 5 mm) is pressed by more grid points
    than its rows hold: the rows road declines the state (the step lays out its contacts from Contact
    objects), where a coarse field's are rows."""
    from sparsedyn.contact.collision_hfield import hfield_rows
    rng = np.random.default_rng(5)
    fine = _field_scene(rng.uniform(0, 1, (241, 241)))
    q = np.concatenate([[0.35 * (-1) ** (i % 2 + 1), 0.35 * (-1) ** (i // 2 + 1), 1.0, 0, 0, 0, 1] for i in range(6)])
    q[14:17] = [-0.35, 0.35, 0.06 + 0.025 - 0.002]               # the box: its bottom 2 mm under the bumps' tops
    R, p = sd.contact.collision.placements(fine, q)
    fields = scene_data._mixed_plan(fine)[0].fields
    cut = np.full(len(fine.index), fine.margin)
    assert hfield_rows(fine, fields, R, p, cut) is None and scene_data.scene_slot_data(fine, q) is None
    hits = sd.collide(fine, q)
    assert sum(a == "box" for a, _ in hits.pairs) > 16


def test_in_data_slots_a_new_slot_key_is_one_native_call_and_grows_when_read(monkeypatch):
    """The arm held up 5 cm, touching only itself, then lying on the floor: the floor's contacts are
    slot keys the layout has no slots for, which a step in data slots does not read: one native call
    (from plain lists and tuples), the layout as it was, the Python road's step bit for bit (a twin
    scene that grew its layout on that road); the derivatives there read the per-body slots: the
    layout grows to the twin's, and from then on they are the twin's bit for bit.  A rollout dropped
    from 5 mm (the floor's contacts new slot keys from its first step) is one native chain of steps,
    and the Python road's rollout bit for bit."""
    from test_scene_fused import ARM, DT, FLOOR, _Spy, _arm, _python_road, _python_road_rollout, _same
    from sparsedyn.contact import scene_fused
    scene, q, v, tau = _arm()
    twin = sd.Scene(ARM, world=[FLOOR], friction=0.8)
    up = q + np.r_[0, 0, 0.05, np.zeros(6)]
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    with sd.use_backend("native", deterministic=True):
        first = sd.contact_step(ARM, up, v, tau, scene, DT)        # the Python road: the self pair's slots
        layout, spy.answered = dict(scene.cache["step_slots"]), 0
        s = sd.contact_step(ARM, list(q), tuple(v), list(tau), scene, DT)        # (plain sequences)
        assert spy.answered == 1 and scene.cache["step_slots"] == layout
        _python_road(monkeypatch, ARM, up, v, tau, twin, DT)
        ref = _python_road(monkeypatch, ARM, q, v, tau, twin, DT)
        sd.contact_step_derivatives(ARM, q, v, tau, scene, DT)          # (the Python road: the layout grows)
        grown = dict(scene.cache["step_slots"])
        d = sd.contact_step_derivatives(ARM, q, v, tau, scene, DT)
        dref = sd.contact_step_derivatives(ARM, q, v, tau, twin, DT)
        dropped = sd.Scene(ARM, world=[FLOOR], friction=0.8)
        low = q + np.r_[0, 0, 0.005, np.zeros(6)]
        sd.contact_step(ARM, up, v, tau, dropped, DT)              # (its layout: the self pair's)
        spy.answered = 0
        r = sd.rollout(ARM, list(low), list(v), tuple(tau), dropped, DT, 80)
        chained = spy.answered
        rref = _python_road_rollout(monkeypatch, ARM, low, v, tau, sd.Scene(ARM, world=[FLOOR], friction=0.8),
                                    DT, 80)
    assert len(layout) == 1 and len(first.impulses) >= 1 and len(s.impulses) >= len(first.impulses) + 2
    assert len(twin.cache["step_slots"]) > len(layout) and _same(s, ref)
    assert grown == twin.cache["step_slots"]
    assert all(np.asarray(a).tobytes() == np.asarray(b).tobytes() for a, b in zip(d[:6], dref[:6]))
    assert chained == 80 and len(r.impulses[0]) >= len(first.impulses) + 2     # the floor's too, all native
    assert r.q.tobytes() == rref.q.tobytes() and r.iterations.tobytes() == rref.iterations.tobytes()
