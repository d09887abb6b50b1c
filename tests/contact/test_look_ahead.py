"""How far a scene step looks for contacts (sparsedyn.contact.look_ahead): each pair's cutoff is the
margin plus ``dt`` times a bound on its closing speed, per body ``|v_o| + |omega| rho``.

Oracle: the bound derived by hand for free bodies (a free joint's velocity is the body's own,
``[omega; v_o]`` in body axes, whose norms are frame-free) and a shape placed off its body's origin
(``rho``: the offset plus the box's half diagonal); and a contact beyond the margin that both roads
find, the same on each.
"""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact.look_ahead import cutoffs_and_spins, pair_cutoffs, pair_spins, step_hits, within_capacity
from sparsedyn.contact.scene_data import scene_slot_data
from sparsedyn.codegen import native
from sparsedyn.contact import scene_step as scene_step_module
from sparsedyn.contact.scene_step import scene_contacts, scene_slots
from test_friction_kernel import _rounding, assert_impulses_agree
from sparsedyn.model.spatial import Transform
from test_scene_physics import FLOOR

SIZES, MASSES = [(0.2, 0.3, 0.4), (0.1, 0.1, 0.1)], [1.0, 2.0]
OFFSET = np.array([0.3, 0.0, 0.4])                    # box1's shape off its body's origin: |OFFSET| = 0.5
EPS = np.finfo(float).eps


def _two_boxes():
    """Two free boxes, box1's shape at ``OFFSET`` in its body."""
    b = sd.ModelBuilder("boxes")
    for k, (s, m) in enumerate(zip(SIZES, MASSES)):
        x, y, z = np.square(s)
        b.add_body(f"box{k}", None, sd.make_joint("free"), mass=m, rot_inertia=m / 12 * np.diag([y + z, x + z, x + y]))
        b.add_frame(f"box{k}", f"box{k}")
    g = [sd.Geometry("box0", 0, Transform(np.eye(3), np.zeros(3)), "box", SIZES[0], "collision"),
         sd.Geometry("box1", 1, Transform(np.eye(3), OFFSET), "box", SIZES[1], "collision")]
    return b.build().with_geometry(*g)


def _by_hand(scene, v, dt):
    """The cutoffs derived by hand, in the scene's pair order."""
    rho = [np.linalg.norm(SIZES[0]) / 2, np.linalg.norm(OFFSET) + np.linalg.norm(SIZES[1]) / 2]
    s = [np.linalg.norm(v[6 * k + 3:6 * k + 6]) + np.linalg.norm(v[6 * k:6 * k + 3]) * rho[k] for k in range(2)]
    speed = {"box0": s[0], "box1": s[1], "floor": 0.0}
    return np.array([scene.margin + dt * (speed[a] + speed[b]) for a, b in scene.pairs])


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_pair_cutoffs_are_the_margin_plus_dt_times_the_bodies_speed_bounds(backend):
    """Two free boxes (one turned, one with its shape off its origin) moving and spinning: each pair's
    cutoff is the hand bound, for plain lists and for a batch; bodies at rest: the margin alone."""
    scene = sd.Scene(_two_boxes(), world=[FLOOR])
    assert {frozenset(p) for p in scene.pairs} == {frozenset(p) for p in
                                                   [("box0", "floor"), ("box1", "floor"), ("box0", "box1")]}
    q = [0, 0, 1, np.sin(0.3), 0, 0, np.cos(0.3), 1, 0, 1, 0, 0, 0, 1]
    v = [1.0, -2.0, 0.5, 3.0, 0.0, -4.0, 0.0, 0.0, 7.0, 0.5, 0.5, 0.0]
    dt = 2e-3
    want = _by_hand(scene, np.array(v), dt)
    with sd.use_backend(backend):
        got = pair_cutoffs(scene, q, v, dt)
        both = pair_cutoffs(scene, np.array([q, q]), np.array([v, np.zeros(12)]), dt)
    assert got.shape == (3,) and np.abs(got - want).max() <= 64 * EPS * want.max()
    assert both.shape == (2, 3) and np.abs(both[0] - want).max() <= 64 * EPS * want.max()
    assert np.all(both[1] == scene.margin)
    assert np.all(pair_cutoffs(scene, q, v[:5], dt) == scene.margin)      # a bad v: the step names it
    # with the spins (a step's float arrays: the bodies' velocities once; lists: each function's checks)
    with sd.use_backend(backend):
        for x, y in ((np.array(q, float), np.array(v, float)), (q, v)):
            cut = cutoffs_and_spins(scene, x, y, dt)[0]
            assert cut.shape == (3,) and np.abs(cut - want).max() <= 64 * EPS * want.max()
        assert np.all(cutoffs_and_spins(scene, np.array(q, float), np.array(v[:5]), dt)[0] == scene.margin)


@pytest.mark.parametrize("backend", ["numpy", "native"])
def test_pair_spins_are_each_pairs_relative_rotation_over_the_step_in_world_axes(backend):
    """The two free boxes, each turned about its own axis and spinning: a pair's rotation over the step
    is ``(R_a omega_a - R_b omega_b) dt`` by hand (a free joint's ``omega`` in its body's axes, ``R``
    its world rotation from the quaternion ``x y z w``; the floor's zero), for plain lists, one state
    or a batch (each state's own; one ``v`` for all); a bad ``v`` or ``dt``: unknown (NaN)."""
    scene = sd.Scene(_two_boxes(), world=[FLOOR])
    c, s = np.cos(0.3), np.sin(0.3)
    q = [0, 0, 1, s, 0, 0, c, 1, 0, 1, 0, 0, s, c]              # box0 turned 0.6 rad about x, box1 about z
    v = [1.0, -2.0, 0.5, 3.0, 0.0, -4.0, 0.0, 2.0, 7.0, 0.5, 0.5, 0.0]
    dt = 2e-3
    Rx = np.array([[1, 0, 0], [0, np.cos(0.6), -np.sin(0.6)], [0, np.sin(0.6), np.cos(0.6)]])
    Rz = np.array([[np.cos(0.6), -np.sin(0.6), 0], [np.sin(0.6), np.cos(0.6), 0], [0, 0, 1]])
    w = {"box0": Rx @ v[0:3] * dt, "box1": Rz @ v[6:9] * dt, "floor": np.zeros(3)}
    want = np.array([w[a] - w[b] for a, b in scene.pairs])
    with sd.use_backend(backend):
        got = pair_spins(scene, q, v, dt)
        both = pair_spins(scene, [q, q], [v, [0.0] * 12], dt)     # a batch: the same state, then at rest
        shared = pair_spins(scene, [q, q], v, dt)                  # one v for both states
    assert got.shape == (3, 3) and np.abs(got - want).max() <= 64 * EPS * np.abs(want).max()
    assert both.shape == (2, 3, 3) and np.abs(both[0] - want).max() <= 64 * EPS * np.abs(want).max()
    assert np.all(both[1] == 0)
    assert shared.shape == (2, 3, 3) and np.abs(shared - want).max() <= 64 * EPS * np.abs(want).max()
    assert np.isnan(pair_spins(scene, q, v[:5], dt)).all() and np.isnan(pair_spins(scene, q, v, -1.0)).all()
    with sd.use_backend(backend):                              # beside the cutoffs: the same spins
        for x, y in ((np.array(q, float), np.array(v, float)), (q, v)):
            spin = cutoffs_and_spins(scene, x, y, dt)[1]
            assert spin.shape == (3, 3) and np.abs(spin - want).max() <= 64 * EPS * np.abs(want).max()
        assert np.isnan(cutoffs_and_spins(scene, np.array(q, float), np.array(v, float), -1.0)[1]).all()


def test_both_roads_find_the_contact_beyond_the_margin_that_the_step_will_close():
    """A box falling at 8 m/s 6 mm above the floor (beyond the 5 mm margin), a 2 ms step: within the
    look-ahead the native road's slot data are the NumPy road's (its four bottom corners at 6 mm, to
    rounding), and collide at q alone (within the margin) finds nothing."""
    scene = sd.Scene(_two_boxes(), world=[FLOOR], self_collision=False)
    q = np.array([0, 0, SIZES[0][2] / 2 + 0.006, 0, 0, 0, 1, 3, 0, 1, 0, 0, 0, 1.0])
    v = np.r_[0, 0, 0, 0, 0, -8.0, np.zeros(6)]
    cut = pair_cutoffs(scene, q, v, 2e-3)
    with sd.use_backend("numpy"):
        contacts = scene_contacts(scene, q, cutoff=cut)
        ref = scene_slots(scene, contacts)
        assert len(sd.collide(scene, q).distances) == 0
    with sd.use_backend("native"):
        pair, got = scene_slot_data(scene, q, cut)
        assert len(sd.collide(scene, q).distances) == 0
    assert len(contacts) == len(pair) == 4 and got.frames == ref.frames
    assert np.array_equal(*(np.arange(4) if s.index is None else s.index for s in (got, ref)))     # None: in order
    assert np.abs(got.data - ref.data).max() <= 64 * EPS * np.abs(ref.data).max()
    assert np.allclose([c.plane[1] for c in contacts], 0.0, atol=1e-12)


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_a_batch_looks_ahead_state_by_state():
    """A batch of the same box 6 mm above the floor, falling at 8 m/s and at rest: on the kernel's road
    the falling state's step holds its four bottom corners, the resting one none (each state's own
    look-ahead, not the batch's largest), and each equals its single step's contacts."""
    scene = sd.Scene(_two_boxes(), world=[FLOOR], self_collision=False)
    q = np.array([0, 0, SIZES[0][2] / 2 + 0.006, 0, 0, 0, 1, 3, 0, 1, 0, 0, 0, 1.0])
    V = np.array([np.r_[0, 0, 0, 0, 0, -8.0, np.zeros(6)], np.zeros(12)])
    with sd.use_backend("native", deterministic=True):
        batch = sd.contact_step(scene.model, [q, q], V, np.zeros(12), scene, 2e-3)
        ones = [sd.contact_step(scene.model, q, V[b], np.zeros(12), scene, 2e-3) for b in range(2)]
    assert [len(x) for x in batch.impulses] == [len(x.impulses) for x in ones] == [4, 0]
    assert list(batch.modes[0]) == list(ones[0].modes) and "open" not in list(ones[0].modes)


def test_a_native_step_looks_ahead_in_the_collision_kernels_call(monkeypatch):
    """The box falling at 8 m/s 6 mm above the floor, one state (plain lists) on the native road: its
    look-ahead is computed in the collision kernel's call (``collision_candidates_ahead`` ran,
    ``pair_cutoffs`` never called), its four bottom corners enter the step, and the step is the NumPy
    road's (which takes ``pair_cutoffs``): iterations, modes, ``v+`` and impulses to the step's rounding
    bound (test_friction_kernel's; the impulses along the Delassus matrix's null space to the polish's)."""
    scene = sd.Scene(_two_boxes(), world=[FLOOR], self_collision=False)
    q = [0, 0, SIZES[0][2] / 2 + 0.006, 0, 0, 0, 1, 3, 0, 1, 0, 0, 0, 1.0]
    v = [0, 0, 0, 0, 0, -8.0] + [0.0] * 6
    with sd.use_backend("numpy"):
        ref = sd.contact_step(scene.model, q, v, np.zeros(12), scene, 2e-3)
        contacts = scene_contacts(scene, np.array(q), cutoff=pair_cutoffs(scene, q, v, 2e-3))
    monkeypatch.setattr(scene_step_module, "pair_cutoffs", None)          # a call would fail
    with sd.use_backend("native", deterministic=True):
        one = sd.contact_step(scene.model, q, v, np.zeros(12), scene, 2e-3)
    assert [n for n in native.shared(scene.model).kernels if n.startswith("collision_candidates_ahead")]
    bound = _rounding(scene.model, np.array(q), np.array(v), np.zeros(12), contacts, None, ref)
    assert len(contacts) == len(one.impulses) == 4 and int(one.iterations) == int(ref.iterations)
    assert list(one.modes) == list(ref.modes) and "open" not in list(one.modes)
    assert np.abs(one.v - ref.v).max() <= bound * max(1.0, np.abs(ref.v).max())
    assert_impulses_agree(one.impulses, ref.impulses, scene.model, np.array(q), np.array(v), np.zeros(12), contacts,
                          None, bound)


def test_within_capacity_leaves_out_the_widest_gaps_beyond_the_steps_reach():
    """Five contacts for a capacity of three: gaps (mm) -1, 2, 0.01, 4 and 3, the look-ahead 0.5 mm
    beyond the margin of 5 mm, so the step can close 0.5 mm (plus PATCH_DEPTH): the gaps 2, 4 and 3 are
    out of reach, and the two widest of them, 4 and 3, are left out; a set that fits keeps all, and
    one whose reachable contacts exceed the capacity keeps those (the fifth's 3 mm is the only one out)."""
    margin, cut = 5e-3, np.full(5, 5.5e-3)
    d = np.array([-1.0, 2.0, 0.01, 4.0, 3.0]) * 1e-3
    assert within_capacity(d, cut, margin, capacity=5) is None
    assert within_capacity(d, cut, margin, capacity=3).tolist() == [0, 1, 2]
    assert within_capacity([-1e-3, 0.0, 1e-4, 2e-4, 3e-3], cut, margin, capacity=3).tolist() == [0, 1, 2, 3]
    assert within_capacity(list(d), list(cut), margin, capacity=4).tolist() == [0, 1, 2, 4]    # plain lists


#: talos (example-robot-data's talos_reduced) fallen across a box in front of it (0.5 x 1 x 0.3 m,
#: its centre at (0.55, 0, 0.15)) and the floor: the configuration MuJoCo settles into in 1.5 s from
#: standing without torque, the same collision shapes (each mesh's convex hull), rounded to 1e-6
TALOS_ON_BOX = [
    6.595240e-02, 1.479901e-03, 2.840375e-01, -8.769870e-03, 4.015648e-01, -2.811120e-02, 9.153571e-01,
    -1.887964e-01, -2.266345e-01, -2.457214e+00, 3.159453e+00, -1.557920e+00, 6.314296e-01, 5.757452e-02,
    -1.592513e-01, -2.328827e+00, 2.935333e+00, -1.438839e+00, -1.673679e+00, 3.124983e-01, -2.903838e+00,
    2.505230e+00, 9.181516e-01, -3.720579e+00, 1.528636e+00, 2.534055e+00, -6.893430e-01, 3.707775e+00,
    -2.371713e-01, -4.118895e-01, 2.527129e+00, 7.679653e-01, 1.850551e+00, -4.942127e+00, -1.845783e+00,
    6.054131e+00, -1.439480e+00, 4.072828e+00, -4.768597e-01]


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_talos_fallen_across_a_box_steps_natively_and_equals_the_numpy_step():
    """talos lying across the floor and a box finds more hits within its look-ahead than the step's
    capacity (``STEP_CAPACITY``, 32; 34, 25 of them penetrating); the step leaves out the widest gaps beyond its reach (the
    others all kept) and runs natively in the 32 data slots (no fallback warning, one native step
    built), converging in a few hundred iterations.  Run to the same iteration (a tolerance of 1e-12
    stops neither road early: 50 ADMM iterations and 500 sweeps), it makes the NumPy road's modes,
    ``v+`` and ``q+`` to the rounding bound of the step (test_friction_kernel's).  The impulses are
    compared through ``v+``: with 96 rows on 38 joints ``G`` is singular, and they are determined only
    up to the null space of ``J^T``.  What it left out was beyond reach, and a pair of which every hit
    was left out is still apart after the step."""
    import warnings
    from sparsedyn.contact.collision import collide_within
    from sparsedyn.contact import friction_polish as polishing
    from sparsedyn.contact.look_ahead import STEP_CAPACITY
    from sparsedyn.io.resolve import example_robot_data_dir
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")            # the URDF's unsupported tags
        model = sd.load_urdf(example_robot_data_dir() / "talos_data/robots/talos_reduced.urdf", floating_base=True,
                             geometry=True)
    box = sd.Shape("box", (0.5, 1.0, 0.3), placement=(np.eye(3), [0.55, 0.0, 0.15]), name="box")
    scene = sd.Scene(model, world=[sd.Shape("plane", name="floor"), box], self_collision=False)
    q, v, tau, dt = np.array(TALOS_ON_BOX), np.zeros(model.nv), np.zeros(model.nv), 1e-3
    # (the state is written to 7 digits: its quaternion made unit, which both roads assume; the collision
    # kernel's placements and the forward kinematics of the slot frames read a non-unit one differently)
    q[3:7] /= np.linalg.norm(q[3:7])
    same = dict(tol=1e-12, max_iterations=50)
    with sd.use_backend("numpy"):
        cut = pair_cutoffs(scene, q, v, dt)
        hits = collide_within(scene, q, cut, pair_spins(scene, q, v, dt))
        ref = sd.contact_step(model, q, v, tau, scene, dt, **same)
        contacts = scene_contacts(scene, q, step_hits(scene, q, v, dt))
    assert len(hits.distances) > STEP_CAPACITY and len(contacts) == STEP_CAPACITY
    with sd.use_backend("native", deterministic=True), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)                      # a fallback to NumPy warns
        warnings.simplefilter("ignore", sd.ContactStepWarning)             # tol 1e-12: not reached, as meant
        one = sd.contact_step(model, q, v, tau, scene, dt, **same)
        default = sd.contact_step(model, q, v, tau, scene, dt)
    built = [n for n in native.shared(model).kernels if n.startswith("contact_step_kernel")]
    assert len(built) == 1 and scene.cache["data_slot_count"] == STEP_CAPACITY
    assert int(default.iterations) < 1000                                  # converged (else a warning)
    # (and the polishes: at most ROUNDS rounds of LONGEST, none accepted at tol 1e-12)
    assert int(one.iterations) == int(ref.iterations) and list(one.modes) == list(ref.modes)
    assert 50 + 500 <= int(one.iterations) <= 50 + 500 + polishing.ROUNDS * polishing.LONGEST
    bound = _rounding(model, q, v, tau, contacts, None, ref)
    assert np.abs(one.v - ref.v).max() <= bound * max(1.0, np.abs(ref.v).max())
    assert np.abs(one.q - ref.q).max() <= dt * bound * max(1.0, np.abs(ref.v).max()) + 4 * EPS
    # the hits left out were all beyond reach; those of a pair with no other hit stay open at q+
    taken = step_hits(scene, q, v, dt)
    kept = set(zip(taken.pair.tolist(), taken.distances.tolist()))
    out = [k for k, x in enumerate(zip(hits.pair.tolist(), hits.distances.tolist())) if x not in kept]
    assert len(out) == len(hits.distances) - STEP_CAPACITY
    assert all(hits.distances[k] > cut[hits.pair[k]] - scene.margin for k in out)
    alone = sorted(set(hits.pair[out].tolist()) - set(taken.pair.tolist()))
    assert alone
    with sd.use_backend("numpy"):
        after = sd.collide(scene, ref.q)
    assert all(after.distances[after.pair == p].min(initial=np.inf) > 0 for p in alone)


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_reachable_contacts_beyond_the_capacity_step_natively_in_48_data_slots_as_the_numpy_step():
    """Three planks lying across three supports (test_scene_physics's :func:`planks_on_supports`), pushed
    along their length and pressed down: 36 contacts at gap 0, all within the step's reach, so
    :func:`within_capacity` keeps every one though they are more than ``STEP_CAPACITY``.  The step runs
    natively in the scene's 48 data slots (no fallback warning, one native step built: the least of
    the counts 32, 48, 64 that holds 36), and, solved to tol 1e-12, makes the NumPy road's iterations, modes (sliding
    along x, or open: with 108 rows on 18 joints the impulses are determined only up to the null space
    of ``J^T``, so they are compared through ``v+``), ``v+`` and ``q+`` to the rounding bound of the
    step (test_friction_kernel's), which stops the planks' fall, carrying their weight and their
    momentum down, ``3 m (w + g dt)``, and takes ``mu`` times that per plank off their sliding speed."""
    import warnings
    from sparsedyn.contact.friction_kernel import MAX_COMPILED_CONTACTS
    from sparsedyn.contact.look_ahead import STEP_CAPACITY
    from test_scene_physics import G, PLANK_MASS, planks_on_supports
    scene, q = planks_on_supports()
    model, dt = scene.model, 1e-3
    v, tau = np.tile([0.0, 0.0, 0.0, 0.2, 0.0, -0.05], 3), np.zeros(model.nv)
    same = dict(tol=1e-12, max_iterations=50)
    with sd.use_backend("numpy"):
        hits = step_hits(scene, q, v, dt)
        cut = pair_cutoffs(scene, q, v, dt)
        ref = sd.contact_step(model, q, v, tau, scene, dt, **same)
        contacts = scene_contacts(scene, q, hits)
    assert STEP_CAPACITY < len(hits.distances) == 36 <= MAX_COMPILED_CONTACTS
    assert within_capacity(hits.distances, cut[hits.pair], scene.margin).tolist() == list(range(36))
    with sd.use_backend("native", deterministic=True), warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)                      # a fallback to NumPy warns
        one = sd.contact_step(model, q, v, tau, scene, dt, **same)
    built = [n for n in native.shared(model).kernels if n.startswith("contact_step_kernel")]
    assert len(built) == 1 and scene.cache["data_slot_count"] == 48
    assert int(one.iterations) == int(ref.iterations) and list(one.modes) == list(ref.modes)
    assert set(ref.modes) == {"open", "slide"}           # (108 rows on 18 joints: some corners carry nothing)
    bound = _rounding(model, q, v, tau, contacts, None, ref)
    assert np.abs(one.v - ref.v).max() <= bound * max(1.0, np.abs(ref.v).max())
    assert np.abs(one.q - ref.q).max() <= dt * bound * max(1.0, np.abs(ref.v).max()) + 4 * EPS
    assert np.abs(ref.v[5::6]).max() <= bound                              # the fall stopped
    assert np.abs(ref.v[3::6] - (0.2 - 0.6 * (0.05 + G * dt))).max() <= bound         # friction mu times it
    assert abs(ref.impulses[:, 2].sum() - 3 * PLANK_MASS * (0.05 + G * dt)) <= bound * PLANK_MASS


def test_both_roads_leave_out_the_same_contacts_beyond_the_capacity(monkeypatch):
    """A box at rest tilted by 0.01 rad about x on the floor: two corners touch (gap 0) and two are
    ``SIDE sin(0.01)`` = 2 mm up, within the 5 mm margin but beyond what a step from rest can close.
    With a capacity of 2 (the limit patched down) the collision kernel's road and the Contact-object
    road keep the two touching corners alone (the same pairs, gaps and points), and after the step
    (the box tipping onto its face) the two left out are still above the floor."""
    from sparsedyn.contact import look_ahead, scene_data
    from test_scene import SIDE, DT, box_model
    monkeypatch.setattr(look_ahead, "STEP_CAPACITY", 2)
    monkeypatch.setattr(scene_data, "STEP_CAPACITY", 2)
    a = 0.01
    s, c = np.sin(a / 2), np.cos(a / 2)
    z = SIDE / 2 * (np.cos(a) + np.sin(a))                  # the two low corners on the floor
    q, v = np.array([0.0, 0.0, z, s, 0.0, 0.0, c]), np.zeros(6)
    scene = sd.Scene(box_model(), world=[FLOOR], friction=0.5)
    with sd.use_backend("numpy"):
        every = sd.collide(scene, q)
        hits = step_hits(scene, q, v, DT)
        step = sd.contact_step(scene.model, q, v, np.zeros(6), scene, DT)
    assert len(every.distances) == 4 and sorted(every.distances.round(12).tolist())[2:] == \
        [round(SIDE * np.sin(a), 12)] * 2
    assert len(hits.distances) == 2 and np.abs(hits.distances).max() <= 1e-15
    with sd.use_backend("native", deterministic=True):
        pair, slots = scene_slot_data(scene, q, ahead=(v, DT))
    assert pair.tolist() == hits.pair.tolist()
    R = np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]])
    body = (hits.witness_a - q[:3]) @ R                         # the corners in the box's axes
    got = slots.data[slots.index, 1:4] if slots.index is not None else slots.data[:, 1:4]
    assert np.abs(np.sort(got, 0) - np.sort(body, 0)).max() <= 1e-12
    # the box tips onto its face; within the step the two corners left out come down by less than their gap
    after = sd.collide(scene, step.q)
    assert len(step.impulses) == 2 and np.sort(after.distances)[2:].min() > 0
