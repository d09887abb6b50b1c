"""A batch of states of a scene on the collision kernel's road (sparsedyn.contact.scene_batch): the
contacts of all states from one call of the kernel, laid out in the scene's slots by array operations.
Each state's data equal those laid out from Contact objects found on the NumPy road (the vectorised
closed forms), the layout grows as the single steps of the states would grow it, and the batch step
equals the single steps (the existing batch test runs a scene with a pair for coal, which takes the
road of Contact objects)."""

from collections.abc import Sequence

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rounding_bound
from sparsedyn.codegen import native, runtime
from sparsedyn.contact import scene_batch
from sparsedyn.contact import scene_step as scene_step_module
from sparsedyn.contact.friction import _options, _slotted_step
from sparsedyn.contact.friction_problem import ContactSlots
from sparsedyn.contact.data_slots import runs_per_body
from sparsedyn.contact.scene_batch import batch_contacts, scene_batch_slot_data
from sparsedyn.contact.scene_data import scene_slot_data
from sparsedyn.model.spatial import Transform
from sparsedyn.contact.scene_step import FoundContacts, scene_contacts, scene_slots
from test_friction_kernel import _rounding
from test_scene import DT, G, MASS, SIDE
from test_scene_step_bodies import MODEL as ARM, Q_TOUCH, R

S, C = np.sin(0.2), np.cos(0.2)
#: Box states (plain lists): flat on the floor (4 corners), on an edge (2), in free fall (0), on a corner
#: (1, tilted about x and y), pressed flat 1 mm into the floor (4).
BOX_Q = [[2, 0, SIDE / 2, 0, 0, 0, 1], [2, 0, SIDE / 2 * (C + S) + 1e-4, S, 0, 0, C], [0, 0, 1.0, 0, 0, 0, 1],
         [0, 0.5, 0.17, 0.3, 0.2, 0, float(np.sqrt(1 - 0.13))], [0.1, 0, SIDE / 2 - 1e-3, 0, 0, 0, 1]]
BOX_V = [[0, 0, 0.5, 0.3, 0, 0], [0, 0, 0, 0, 0, -0.1], [0, 0, 0, 0, 0, 0], [0, 0, 0, 0.1, 0, -0.2],
         [0.1, 0, 0, 0, 0, -0.2]]
BOX_CONTACTS = [4, 2, 0, 1, 4]


def box_model(frame=None):
    """test_scene's box, under a name of its own (the layouts built here are not test_scene_step's, which
    counts its step's builds); ``frame``: the pose of its only frame in the body (the slot frame: its
    contacts' points are then in that frame's axes)."""
    I = MASS * SIDE ** 2 / 6 * np.eye(3)
    b = sd.ModelBuilder("batch box").add_body("box", None, sd.make_joint("free"), mass=MASS, rot_inertia=I)
    model = b.add_frame("box", "box", frame).build()
    return model.with_geometry(sd.Geometry("box", 0, Transform(np.eye(3), np.zeros(3)), "box", (SIDE,) * 3,
                                           "collision"))


def _tilted():
    a = 0.3
    return np.array([[1, 0, 0], [0, np.cos(a), -np.sin(a)], [0, np.sin(a), np.cos(a)]]), np.array([0.01, 0.02, 0.03])


def _box_scene(frame=None):
    return sd.Scene(box_model(frame), world=[sd.Shape("plane", name="floor")], friction=0.5)


def _arm_scene():
    """The arm of test_scene_step_bodies lying on a floor, its forearm's tip on its torso: world and
    two-body (self-collision) contacts."""
    floor = sd.Shape("plane", placement=(np.eye(3), [0, 0, -R]), name="floor")
    return sd.Scene(ARM, world=[floor], friction=0.5)


def _arm_states():
    """Arm states (plain lists): the tip on the torso and both capsules on the floor, lifted off the
    floor (the tip only), swung away (the floor only), and both lifted and swung away (none)."""
    up = np.r_[0, 0, 0.05, np.zeros(6)]
    away = np.r_[np.zeros(8), -0.3]
    return [list(Q_TOUCH), list(Q_TOUCH + up), list(Q_TOUCH + away), list(Q_TOUCH + up + away)]


def _bound(*arrays):
    return rounding_bound(64) * max(1.0, max((np.abs(x).max(initial=0.0) for x in arrays), default=1.0))


def _mesh_scene_and_states():
    """test_reduction's mesh prism over a world box (top at z = 0.1) and a floor, and 12 states about
    the box's top and edges (its contacts on the no-Contact-object road: the mesh's hull vertices)."""
    from test_reduction import prism_scene, random_poses
    box = sd.Shape("box", (0.4, 0.4, 0.1), placement=(np.eye(3), [0.0, 0.0, 0.05]), name="top")
    scene = sd.Scene(prism_scene().model, world=[sd.Shape("plane", name="floor"), box], friction=0.8)
    return scene, [q.tolist() for q in random_poses(np.random.default_rng(2), 12, 0.3, (0.1, 0.16))]


@pytest.mark.parametrize("which", ["box", "box, tilted frame", "arm", "mesh"])
def test_batch_slot_data_are_each_states_slots_from_contact_objects(which):
    """The batch's data, state by state, equal the slots laid out from the Contact objects that the
    NumPy road finds at that state (the vectorised closed forms, not the kernel) in the grown layout:
    the same slot frames, the same slot for each contact, the same scene pairs, the same rows to
    rounding (a point in the axes of a slot frame that is not the body's own; two-body slots of the
    self-collision pair); the free slots' rows are the layout's free rows."""
    if which == "mesh":
        scene, Q = _mesh_scene_and_states()
    else:
        scene = _arm_scene() if which == "arm" else _box_scene(_tilted() if "tilted" in which else None)
        Q = _arm_states() if which == "arm" else BOX_Q
    with sd.use_backend("native", deterministic=True):
        pair, slot, ends, slots = scene_batch_slot_data(scene, Q)
    assert slots.data.shape == (len(Q), len(slots.frames), 8) and slots.index is None
    assert ends[0] == 0 and ends[-1] == len(pair) == len(slot) and len(ends) == len(Q) + 1
    pairs, index = ([x[ends[b]:ends[b + 1]] for b in range(len(Q))] for x in (pair, slot))
    counts = []
    for b, q in enumerate(Q):
        with sd.use_backend("numpy"):
            contacts = scene_contacts(scene, np.array(q))
            want = scene_slots(scene, contacts)
        counts.append(len(contacts))
        assert want.frames == slots.frames                          # the layout already holds every state
        assert np.array_equal(index[b], np.arange(len(contacts)) if want.index is None else want.index)
        assert ["/".join(scene.pairs[k]) for k in pairs[b].tolist()] == [c.name.rpartition("#")[0] for c in contacts]
        assert np.abs(slots.data[b] - want.data).max(initial=0.0) <= _bound(want.data[:, :4], want.data[:, 4:7])
    if which == "mesh":
        assert sum(n > 0 for n in counts) >= 6 and max(counts) >= 2
    elif which == "arm":
        assert counts[0] >= 3 and counts[-1] == 0 and len(set(counts)) >= 3
        assert any(isinstance(k, tuple) for k in slots.frames)      # a two-body slot
    else:
        assert counts == BOX_CONTACTS


def test_a_batch_of_mesh_states_is_laid_out_as_each_single_step(monkeypatch):
    """The mesh prism over a box and a floor, 12 states moving (each pair's look-ahead and the patches'
    allowances from the state's own velocity): each state's rows found by its single step's native routine
    (no patch in NumPy; where that road declines, all states' patches in one call), and each state's contacts,
    pairs and slots those its single step lays out (``scene_slot_data`` with the step's look-ahead), their data
    to rounding (the per-body rows turned into the slot frames for all states at once)."""
    from sparsedyn.contact import scene_data
    scene, Q = _mesh_scene_and_states()
    V = np.random.default_rng(4).normal(scale=0.3, size=(len(Q), 6))
    calls, patches = [], scene_data.mesh_plane_patches
    for each, many in ((True, 0), (False, 1)):
        calls.clear()
        with sd.use_backend("native", deterministic=True):
            with monkeypatch.context() as m:
                m.setattr(scene_data, "mesh_plane_patches", lambda *a, **k: calls.append(1) or patches(*a, **k))
                if not each:                                # (the batch's own road: all states at once)
                    m.setattr(scene_batch, "_each_state", lambda *a: None)
                pair, slot, ends, slots = scene_batch_slot_data(scene, np.array(Q), None, (V, DT))
            assert len(calls) == many
        with sd.use_backend("native", deterministic=True):
            for b, q in enumerate(Q):
                want_pair, want = scene_slot_data(scene, np.array(q), ahead=(V[b], DT))
                assert want.frames == slots.frames
                assert pair[ends[b]:ends[b + 1]].tolist() == want_pair.tolist()
                assert slot[ends[b]:ends[b + 1]].tolist() == (np.arange(len(want_pair)) if want.index is None
                                                              else want.index).tolist()
                assert np.abs(slots.data[b] - want.data).max() <= _bound(want.data[:, :4], want.data[:, 4:7])
        assert len(pair) >= 12 and len(set(np.diff(ends).tolist())) >= 3


def test_the_batch_grows_the_layout_as_the_single_steps_of_its_states():
    """A fresh scene: the layout a batch of states lays out is the one that single steps of the same
    states, one after the other, grow in another fresh scene (each body's slots the power of two that
    holds its most contacts)."""
    batch, single = _box_scene(), _box_scene()
    with sd.use_backend("native", deterministic=True):
        scene_batch_slot_data(batch, BOX_Q[1:4])                    # 2, 0, 1 contacts: two slots
        assert list(batch.cache["step_slots"].values()) == [2]
        scene_batch_slot_data(batch, BOX_Q)                         # 4 contacts: four
        for q in BOX_Q[1:4] + BOX_Q:
            sd.contact_step(single.model, q, np.zeros(6), np.zeros(6), single, DT)
    assert batch.cache["step_slots"] == single.cache["step_slots"] and list(single.cache["step_slots"].values()) == [4]


def _forbid_contact_objects(monkeypatch):
    def refuse(*a, **k):
        raise AssertionError("the batch took the road of Contact objects")
    monkeypatch.setattr(scene_step_module, "scene_contacts", refuse)


def _scene_and_states(which):
    """A fresh scene and its states ``Q``, ``V`` (plain lists): the box's (4, 2, 0, 1, 4 contacts) or the
    arm's (world and self-collision contacts, then fewer, then none; one velocity)."""
    if which == "arm":
        return _arm_scene(), _arm_states(), [[0.05, -0.02, 0.01, 0.1, 0.0, -0.05, 0.3, 3.0]] * 4
    return _box_scene(), BOX_Q, BOX_V


@pytest.mark.parametrize("which", ["box", "arm"])
def test_a_batch_of_scene_steps_is_each_states_single_step_bit_for_bit(which, monkeypatch):
    """A batch of plain lists on the native road (no Contact object made; ``sd.contact_step`` and the
    scene step it runs, whose contacts are the states' FoundContacts): each state's contacts come from
    the collision kernel's look-ahead at its own velocity (as its single step finds them) and are laid
    out in the slots its single step runs in (the box: per body; the arm, several bodies: the scene's
    data slots, each contact's point ``x + d n / 2`` of the kernel's row), so each state's step is its
    single step's to the bit: ``q+``, ``v+``, impulses, modes and iterations.  One velocity (nv,) for
    all states is each state's own."""
    scene, Q, V = _scene_and_states(which)
    model = scene.model
    tau = [0.0] * model.nv
    with sd.use_backend("native", deterministic=True):
        with monkeypatch.context() as m:
            _forbid_contact_objects(m)
            batch, found = scene_step_module.scene_step(_slotted_step, model, Q, V, tau, scene, DT,
                                                        **_options({}, None))
            shared = sd.contact_step(model, Q, V[0], tau, scene, DT)
        ones = [sd.contact_step(model, Q[i], V[i], tau, scene, DT) for i in range(len(Q))]
        shared_ones = [sd.contact_step(model, Q[i], V[0], tau, scene, DT) for i in range(len(Q))]
    assert all(isinstance(f, FoundContacts) for f in found)
    assert [len(x) for x in batch.impulses] == [len(f) for f in found]
    assert which == "arm" or [len(f) for f in found] == BOX_CONTACTS
    assert runs_per_body(scene) == (which == "box")
    assert sum(len(x) for x in batch.impulses) >= len(Q) and len({len(x) for x in batch.impulses}) >= 3
    if which == "arm":                    # the data slots the step ran in: each state's single step's
        with sd.use_backend("native", deterministic=True):
            laid = scene_batch_slot_data(scene, np.array(Q), None, (np.array(V), DT), data_slots=True)[4]
            for i in range(len(Q)):
                one = scene_slot_data(scene, np.array(Q[i]), ahead=(np.array(V[i]), DT), data_slots=True)[2]
                assert laid.frames == one.frames and laid.data[i].tobytes() == one.data.tobytes()
    for got, want in ((batch, ones), (shared, shared_ones)):
        for i, one in enumerate(want):
            assert got.q[i].tobytes() == one.q.tobytes() and got.v[i].tobytes() == one.v.tobytes()
            assert got.impulses[i].tobytes() == one.impulses.tobytes()
            assert list(got.modes[i]) == list(one.modes) and int(got.iterations[i]) == int(one.iterations)


@pytest.mark.parametrize("frame", [None, "tilted"])
def test_an_even_batch_is_laid_out_and_split_as_the_same_states_among_others(frame):
    """A batch whose every state has four contacts in its first four per-body slots (the box flat on
    the floor, and pressed 1 mm into it: ``even`` 4) places its rows and splits its step's impulses
    and modes per state without an index per contact: its data are those of the same states in a
    batch with others (an edge, free fall, a corner: ``even`` -1, each contact placed by its slot),
    bit for bit, and so is each state's step (q+, v+, impulses, modes, iterations); with the body's own
    slot frame, each state's single step's too."""
    scene = _box_scene(_tilted() if frame else None)
    model, tau = scene.model, np.zeros(6)
    Q, V = [BOX_Q[0], BOX_Q[4], BOX_Q[0]], [BOX_V[0], BOX_V[4], BOX_V[1]]
    with sd.use_backend("native", deterministic=True):
        mixed = batch_contacts(scene, np.array(BOX_Q + Q), None, (np.array(BOX_V + V), DT))
        even = batch_contacts(scene, np.array(Q), None, (np.array(V), DT))
        among = sd.contact_step(model, np.array(BOX_Q + Q), np.array(BOX_V + V), tau, scene, DT)
        batch = sd.contact_step(model, np.array(Q), np.array(V), tau, scene, DT)
        ones = [sd.contact_step(model, np.array(Q[i]), np.array(V[i]), tau, scene, DT) for i in range(len(Q))]
    assert runs_per_body(scene) and even.even == 4 and mixed.even == -1
    assert even.frames == mixed.frames and even.data.tobytes() == mixed.data[len(BOX_Q):].tobytes()
    assert isinstance(batch.impulses, Sequence) and [len(x) for x in batch.impulses] == [4, 4, 4]
    n = len(BOX_Q)
    for i, one in enumerate([sd.ContactStep(among.q[n + k], among.v[n + k], among.impulses[n + k],
                                            among.modes[n + k], None, among.iterations[n + k]) for k in range(3)]
                            + (ones if frame is None else [])):
        i %= 3
        assert batch.q[i].tobytes() == one.q.tobytes() and batch.v[i].tobytes() == one.v.tobytes()
        assert batch.impulses[i].tobytes() == one.impulses.tobytes() and batch.impulses[i].flags.writeable
        assert list(batch.modes[i]) == list(one.modes) and int(batch.iterations[i]) == int(one.iterations)


def test_the_public_batch_step_takes_plain_lists_and_runs_no_contact_object(monkeypatch):
    """``sd.contact_step`` with a scene and a batch of plain lists: the states' impulses and modes per
    state, each state's count its own, with no Contact object made; an empty batch (B = 0) answers an
    empty batch."""
    scene = _box_scene()
    with sd.use_backend("native", deterministic=True):
        _forbid_contact_objects(monkeypatch)
        s = sd.contact_step(scene.model, BOX_Q, BOX_V, [0.0] * 6, scene, DT)
    assert [len(x) for x in s.impulses] == BOX_CONTACTS == [len(x) for x in s.modes]
    assert s.v.shape == (5, 6) and list(s.modes[2]) == []
    # the falling box's step is free fall: v+ = v + dt g (a free joint's v: angular, then linear)
    np.testing.assert_allclose(s.v[2], [0, 0, 0, 0, 0, -G * DT], rtol=0, atol=4 * np.finfo(float).eps)
    with sd.use_backend("native", deterministic=True):                   # an empty batch: an empty answer
        empty = sd.contact_step(scene.model, np.zeros((0, 7)), np.zeros((0, 6)), [0.0] * 6, scene, DT)
    assert empty.v.shape == (0, 6) and empty.q.shape == (0, 7) and list(empty.impulses) == []


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_a_batch_rollout_on_the_kernel_road_equals_the_single_rollouts(monkeypatch):
    """Two boxes dropped on the floor at once (one flat, one tilted onto a corner): the batch rollout,
    warm-started state by state from the kernel road's contacts, makes each box's own rollout's
    iterations and contact counts, and its velocities to rounding carried linearly over the steps."""
    scene = _box_scene()
    axis = np.array([1.0, 1.0, 0]) / np.sqrt(2)
    Q0 = [[2, 0, SIDE / 2 + 0.02, 0, 0, 0, 1], list(np.r_[0, 0, SIDE / 2 * 1.3, np.sin(0.3) * axis, np.cos(0.3)])]
    steps = 120
    with sd.use_backend("native", deterministic=True):
        sd.rollout(scene.model, Q0, np.zeros(6), np.zeros(6), scene, DT, steps)           # lays out the slots
        with monkeypatch.context() as m:
            _forbid_contact_objects(m)
            batch = sd.rollout(scene.model, Q0, np.zeros(6), np.zeros(6), scene, DT, steps)
        ones = [sd.rollout(scene.model, q0, np.zeros(6), np.zeros(6), scene, DT, steps) for q0 in Q0]
    assert batch.q.shape == (steps + 1, 2, 7)
    for i, one in enumerate(ones):
        assert [len(x[i]) for x in batch.impulses] == [len(x) for x in one.impulses]
        assert max(len(x) for x in one.impulses) >= 1
        assert np.array_equal(batch.iterations[:, i], one.iterations)
        last = sd.contact_step(scene.model, one.q[-2], one.v[-2], np.zeros(6), scene, DT)
        step = _rounding(scene.model, one.q[-2], one.v[-2], np.zeros(6), scene_contacts(scene, one.q[-2]), None, last)
        assert np.abs(batch.v[:, i] - one.v).max() <= steps * step * max(1.0, np.abs(one.v).max())


def test_a_batch_of_the_iterative_step_builds_no_second_library():
    """The contact step is an iterative kernel: its batch (more states than two vectors' lanes, which
    a straight-line kernel runs in its vectorised batch library) runs the single library's loop entry
    (the same scalar driver), so a batch builds no batch library of it."""
    scene = _box_scene()
    cm = native.shared(scene.model)
    Q, V = BOX_Q * 8, BOX_V * 8
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(scene.model, BOX_Q[0], BOX_V[0], np.zeros(6), scene, DT)      # builds the step
        assert len(Q) >= 2 * cm.lanes
        sd.contact_step(scene.model, Q, V, np.zeros(6), scene, DT)
    step_tags = [t for t in cm.built if t.startswith("contact_step_kernel")]
    assert step_tags and not [t for t in step_tags if t.endswith("batch")]


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_without_openmp_the_step_batch_runs_in_chunks_on_threads_and_equals_openmps(monkeypatch):
    """A library built without OpenMP (the pip compiler's) runs an iterative kernel's batch (the
    collision kernel with its broad phase, then the step) in chunks that two threads take as they come free; each state runs the same scalar code as under OpenMP, so
    the results are equal bit for bit."""
    scene = _box_scene()
    Q, V = BOX_Q * 8, BOX_V * 8
    with sd.use_backend("native", deterministic=True):
        ref = sd.contact_step(scene.model, Q, V, np.zeros(6), scene, DT)
        cm = native.shared(scene.model)
        monkeypatch.setattr(cm._compiler, "openmp", False)
        monkeypatch.setattr(cm, "_threads_for", lambda kname, N: 2)
        calls, dynamic = [], runtime._in_threads_dynamic
        monkeypatch.setattr(runtime, "_in_threads_dynamic", lambda call, N, *a: calls.append(N) or dynamic(call, N, *a))
        got = sd.contact_step(scene.model, Q, V, np.zeros(6), scene, DT)
    assert calls == [len(Q), len(Q)]               # the collision kernel's broad phase (iterative too), the step
    assert got.v.tobytes() == ref.v.tobytes() and got.q.tobytes() == ref.q.tobytes()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(got.impulses, ref.impulses))


def test_dynamic_threads_run_every_state_once_in_chunks():
    """Without OpenMP an iterative kernel's batch runs in chunks that threads take as they come free:
    every state is passed exactly once, at its own address (pointer plus the state's offset), each
    array advanced by its own size, the results in chunk order."""
    N, sizes, base = 1003, [7, 3], [1000, 500000]
    seen = []

    def call(n, p):
        s = (p[0] - base[0]) // (8 * sizes[0])
        assert p[1] == base[1] + s * 8 * sizes[1]
        seen.append((s, n))
        return s

    got = runtime._in_threads_dynamic(call, N, base, sizes, 2)
    starts = sorted(s for s, _ in seen)
    assert got == starts and len(got) >= 2 * runtime.DYNAMIC_CHUNKS - 1
    covered = np.zeros(N, int)
    for s, n in seen:
        covered[s:s + n] += 1
    assert np.all(covered == 1)


def _flat(found):
    """``(state, pair, points, planes)`` of per-state FoundContacts, all states in order."""
    state = np.concatenate([np.full(len(f), b) for b, f in enumerate(found)]).astype(int)
    return (state, np.concatenate([f.pair for f in found]).astype(int),
            np.concatenate([f.points for f in found]).reshape(-1, 3),
            np.concatenate([f.planes for f in found]).reshape(-1, 4))


def _found(pair, points, planes):
    n = len(pair)
    data = np.zeros((n, 8))
    data[:, 1:4], data[:, 4:] = points, planes
    return FoundContacts(np.array(pair, int), ContactSlots((0,) * n, np.arange(n), data))


def test_batch_warm_start_by_hand_takes_the_nearest_not_taken():
    """By hand (one pair, the floor's plane: the impulses keep their frame): before, A at the origin and
    B 8 mm along x; now c1 4 mm along x (as near A as B: the first, A, is taken) and c2 3 mm along x
    (A taken: B, 5 mm away, within the radius); in a second state the same with c2 first: c2 takes A,
    c1 then B."""
    from sparsedyn.contact.scene_batch import batch_warm_start
    from sparsedyn.contact.scene_step import WARM_RADIUS
    up = [0, 0, 1.0, 0]
    A, B, c1, c2 = [0, 0, 0], [0.008, 0, 0], [0.004, 0, 0], [0.003, 0, 0]
    before = [_found([0, 0], [A, B], [up, up])] * 2
    now = [_found([0, 0], [c1, c2], [up, up]), _found([0, 0], [c2, c1], [up, up])]
    lam = np.array([[1.0, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5, 6]])
    got = batch_warm_start(_flat(before), lam, _flat(now), WARM_RADIUS)
    assert got.tolist() == [[1, 2, 3], [4, 5, 6], [1, 2, 3], [4, 5, 6]]


def test_batch_warm_start_equals_the_single_matching_state_by_state(monkeypatch):
    """Random states (0 to 5 contacts before and now, two pairs, points within about a radius so that
    contacts compete for the same one before; random planes, or in every other state one floor before and
    now): the batch's warm start equals matched_warm_start state by state, to the bit (the same distances,
    the impulses turned by the same sums where a state's normals turn, kept where they stay); states where
    two contacts have the same nearest one before were met (and matched in order)."""
    from sparsedyn.contact.scene_step import WARM_RADIUS, matched_warm_start
    greedy, in_order = [], scene_batch._greedy
    monkeypatch.setattr(scene_batch, "_greedy", lambda *a: greedy.append(1) or in_order(*a))
    rng = np.random.default_rng(3)
    before, now, lam = [], [], []
    for b in range(100):
        for out in (before, now):
            n = int(rng.integers(0, 6))
            normals = rng.normal(size=(n, 3))
            normals /= np.linalg.norm(normals, axis=1, keepdims=True)
            planes = np.c_[normals, rng.normal(size=n)] if b % 2 else np.tile([0.0, 0.0, 1.0, 0.0], (n, 1))
            out.append(_found(rng.integers(0, 2, n), WARM_RADIUS * rng.random((n, 3)), planes))
        lam.append(rng.normal(size=(len(before[-1]), 3)))
    got = scene_batch.batch_warm_start(_flat(before), np.concatenate(lam), _flat(now), WARM_RADIUS)
    want = np.concatenate([matched_warm_start(b, x, c) for b, x, c in zip(before, lam, now)])
    assert np.array_equal(got, want)                        # (the same sums, the same frames)
    assert np.count_nonzero(want.any(axis=1)) >= 100 and len(greedy) >= 5



def test_batch_warm_start_keeps_the_states_whose_contacts_persist():
    """As many contacts in each state before and now (the batch's rows aligned state by state): the states
    whose pairs, points and planes are those before (a box resting on the floor) keep their impulses, the
    others (a point moved, a normal turned, a pair changed) are matched; all equal matched_warm_start state
    by state, to the bit."""
    from sparsedyn.contact.scene_step import WARM_RADIUS, matched_warm_start
    rng = np.random.default_rng(8)
    before, now, lam = [], [], []
    for b in range(60):
        n = int(rng.integers(1, 5))
        planes = np.tile([0.0, 0.0, 1.0, 0.0], (n, 1))
        pair, points = rng.integers(0, 2, n), WARM_RADIUS * rng.random((n, 3))
        before.append(_found(pair, points, planes))
        lam.append(rng.normal(size=(n, 3)))
        moved, turned, other = points.copy(), planes.copy(), pair.copy()
        k = b % 4                                           # 0: persists; 1: a point moves; 2: turns; 3: a pair
        moved[-1] += WARM_RADIUS * (0.3 if k == 1 else 0.0)
        turned[-1, :3] = [0.6, 0.0, 0.8] if k == 2 else turned[-1, :3]
        other[-1] = 2 if k == 3 else other[-1]
        now.append(_found(other, moved, turned))
    got = scene_batch.batch_warm_start(_flat(before), np.concatenate(lam), _flat(now), WARM_RADIUS)
    want = np.concatenate([matched_warm_start(b, x, c) for b, x, c in zip(before, lam, now)])
    ends = np.cumsum([0] + [len(x) for x in lam])
    assert np.array_equal(got, want)
    assert all(np.array_equal(got[ends[b]:ends[b + 1]], lam[b]) for b in range(0, 60, 4))
    assert all(not np.array_equal(got[ends[b]:ends[b + 1]], lam[b]) for b in range(3, 60, 4))

def test_bad_batches_are_refused_naming_the_argument():
    """A batch with a NaN position or velocity, a quaternion off the unit sphere, or a ``previous`` of
    another number of states: the library's errors, naming the argument (no NaN step, no NumPy error)."""
    scene = _box_scene()
    nan_q = [list(q) for q in BOX_Q]
    nan_q[3][2] = float("nan")
    long_q = [list(q) for q in BOX_Q]
    long_q[1][6] = 2.0
    with sd.use_backend("native", deterministic=True):
        for Q, V, what in ((nan_q, BOX_V, "q: contains NaN"), (BOX_Q, np.full((5, 6), np.nan), "v: contains NaN"),
                           (long_q, BOX_V, "q: the quaternion of joint 'box'")):
            with pytest.raises(ValueError, match=what):
                sd.contact_step(scene.model, Q, V, np.zeros(6), scene, DT)
        s, found = scene_step_module.scene_step(_slotted_step, scene.model, BOX_Q, BOX_V, np.zeros(6), scene, DT,
                                                **_options({}, None))
        with pytest.raises(ValueError, match="previous holds 5 states for a batch of 2"):
            scene_step_module.scene_step(_slotted_step, scene.model, BOX_Q[:2], BOX_V[:2], np.zeros(6), scene, DT,
                                         previous=scene_step_module.batch_previous(found, s.impulses),
                                         **_options({}, None))


def _quat(axis, a):
    return np.r_[np.sin(a / 2) * np.asarray(axis, float), np.cos(a / 2)]


def _rotation(quat):
    """The rotation of a unit quaternion ``[x, y, z, w]`` (the free joint's order)."""
    u, w = quat[:3], quat[3]
    K = np.array([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    return np.eye(3) + 2 * w * K + 2 * K @ K


def _capacity_states(scene):
    """Box states at a capacity of 2 (each corner within the 5 mm margin): flat at rest (4 touching:
    reachable, all kept), tilted 0.01 rad about x at rest (2 touching, 2 up 2 mm beyond the step's
    reach: those 2 left out), tilted about x and y at rest (gaps 0, about 0.8, 2 and 2.8 mm: the 2
    widest left out), on an edge (2), in free fall (0), and tilted about x falling at 3 m/s (all 4
    reachable: kept).  Each tilted state is lowered until its lowest corner touches."""
    x, y = _quat([1, 0, 0], 0.01), _quat([0, 1, 0], 0.004)        # y * x (Hamilton product, [x, y, z, w])
    both = np.r_[y[3] * x[:3] + x[3] * y[:3] + np.cross(y[:3], x[:3]), y[3] * x[3] - y[:3] @ x[:3]]
    Q = []
    for quat in (_quat([1, 0, 0], 0.0), x, both):
        q = np.r_[0.1, 0.0, 0.5, quat]
        with sd.use_backend("numpy"):
            q[2] -= sd.collide(sd.Scene(scene.model, world=[sd.Shape("plane")], margin=1.0), q).distances.min()
        Q.append(q.tolist())
    Q += [BOX_Q[1], BOX_Q[2], Q[1]]
    V = [[0.0] * 6] * 5 + [[0.0, 0.0, 0.0, 0.0, 0.0, -3.0]]
    return Q, V


def test_a_batch_beyond_the_capacity_leaves_out_each_states_contacts_as_its_single_step(monkeypatch):
    """The step's capacity (``STEP_CAPACITY``) patched down to 2 contacts: each state of a batch on the collision
    kernel's road keeps the contacts its single step keeps (those beyond the step's reach left out,
    widest gap first, only as many as exceed the capacity): 4, 2, 2, 2, 0 and 4 contacts (by hand, see
    :func:`_capacity_states`), the two lowest corners of the state tilted about both axes, the same
    pairs, slots and data as ``scene_slot_data`` of the state, and the batch step each state's single
    step to the bit."""
    from sparsedyn.contact import look_ahead, scene_batch, scene_data
    for module in (look_ahead, scene_data, scene_batch):
        monkeypatch.setattr(module, "STEP_CAPACITY", 2)
    scene = _box_scene()
    model = scene.model
    Q, V = _capacity_states(scene)
    with sd.use_backend("numpy"):
        every = [sd.collide(scene, np.array(q)) for q in Q]
    assert [len(h.distances) for h in every] == [4, 4, 4, 2, 0, 4]
    with sd.use_backend("native", deterministic=True):
        pair, slot, ends, slots = scene_batch_slot_data(scene, np.array(Q), None, (np.array(V), DT))
        assert np.diff(ends).tolist() == [4, 2, 2, 2, 0, 4]
        for b, q in enumerate(Q):
            want_pair, want = scene_slot_data(scene, np.array(q), ahead=(np.array(V[b]), DT))
            assert want.frames == slots.frames
            assert pair[ends[b]:ends[b + 1]].tolist() == want_pair.tolist()
            assert slot[ends[b]:ends[b + 1]].tolist() == (np.arange(len(want_pair)) if want.index is None
                                                          else want.index).tolist()
            assert slots.data[b].tobytes() == want.data.tobytes()
        tau = [0.0] * model.nv
        with monkeypatch.context() as m:
            _forbid_contact_objects(m)
            batch, found = scene_step_module.scene_step(_slotted_step, model, Q, V, tau, scene, DT,
                                                        **_options({}, None))
        ones = [sd.contact_step(model, Q[i], V[i], tau, scene, DT) for i in range(len(Q))]
    # the state tilted about both axes keeps its two lowest corners (gaps 0 and SIDE sin(0.004), 0.8 mm)
    low = np.sort(every[2].distances)
    assert abs(low[1] - SIDE * np.sin(0.004)) <= 1e-12 and low[2] > 1.5e-3
    R = _rotation(np.array(Q[2][3:]))
    corners = slots.data[2, slot[ends[2]:ends[3]], 1:4] @ R.T + Q[2][:3]         # the kept points in the world
    assert np.abs(np.sort(corners[:, 2]) - low[:2]).max() <= 1e-12
    assert [len(f) for f in found] == [4, 2, 2, 2, 0, 4]
    for i, one in enumerate(ones):
        assert batch.q[i].tobytes() == one.q.tobytes() and batch.v[i].tobytes() == one.v.tobytes()
        assert batch.impulses[i].tobytes() == one.impulses.tobytes()
        assert list(batch.modes[i]) == list(one.modes) and int(batch.iterations[i]) == int(one.iterations)


def test_a_batch_in_data_slots_gives_each_state_its_single_steps_contacts_and_warm_start():
    """The arm (several bodies: the scene's data slots), a batch given as tuples: once with the states'
    contact counts 5, 1, 4, 0 (each state's impulses a slice of its own), once with the touching state
    three times (every state as many contacts: the impulses cut at once).  Each state's impulses are
    its single step's to the bit; the contacts a batch hands on (their points in the slot frame and
    planes, made from the kernel's rows only when read) are the single step's to rounding; and the
    next batch step, warm-started from them (``batch_previous``), starts each state from its single
    step's warm start (``matched_warm_start``) to rounding."""
    scene = _arm_scene()
    model = scene.model
    V = (0.05, -0.02, 0.01, 0.1, 0.0, -0.05, 0.3, 3.0)
    tau = (0.0,) * model.nv
    warm = []

    def step(*args, warm_start=None, **kwargs):
        warm.append(warm_start)
        return _slotted_step(*args, warm_start=warm_start, **kwargs)

    for Q in (tuple(map(tuple, _arm_states())), (tuple(Q_TOUCH),) * 3):
        with sd.use_backend("native", deterministic=True):
            batch, found = scene_step_module.scene_step(_slotted_step, model, Q, V, tau, scene, DT,
                                                        **_options({}, None))
            ones = [scene_step_module.scene_step(_slotted_step, model, q, V, tau, scene, DT, **_options({}, None))
                    for q in Q]
            warm.clear()
            scene_step_module.scene_step(step, model, batch.q, batch.v, tau, scene, DT, **_options({}, None),
                                         previous=scene_step_module.batch_previous(found, batch.impulses))
            nxt = [scene_step_module.scene_step(step, model, s.q, s.v, tau, scene, DT, **_options({}, None),
                                                previous=(f, s.impulses)) for s, f in ones]
        assert not runs_per_body(scene) and isinstance(batch.impulses, Sequence) and len(found) == len(Q)
        for b, (one, f) in enumerate(ones):
            assert batch.impulses[b].tobytes() == one.impulses.tobytes()
            assert found[b].pair.tolist() == f.pair.tolist()
            assert np.abs(found[b].points - f.points).max(initial=0.0) <= _bound(f.points)
            assert np.abs(found[b].planes - f.planes).max(initial=0.0) <= _bound(f.planes)
            nc = len(nxt[b][1])
            assert np.abs(warm[0][b, :nc] - warm[1 + b]).max(initial=0.0) <= _bound(warm[1 + b])
            assert not warm[0][b, nc:].any()                   # free slots start from zero
        counts = [len(x) for x in batch.impulses]
        assert counts == [len(f) for _, f in ones] and counts in ([5, 1, 4, 0], [5] * 3)
        assert sum(np.abs(w).max(initial=0.0) > 0 for w in warm[1:]) >= 1     # a contact persisted


def test_a_batch_rollout_of_a_mesh_on_a_floor_is_each_states_own_rollout_to_the_bit():
    """A mesh prism dropped on a floor (a robot's mesh feet): a rollout of four states in one batch equals each
    state's own rollout bit for bit (states, impulses, iterations): each step of the batch finds each state's rows
    by the single step's routine and warm-starts each state as the single step does."""
    from test_reduction import prism_scene, random_poses
    model, shapes = prism_scene().model, [sd.Shape("plane", name="floor")]
    Q = np.array(list(random_poses(np.random.default_rng(2), 4, 0.3, (0.0, 0.06))))
    V = np.random.default_rng(3).normal(scale=0.2, size=(4, model.nv))
    with sd.use_backend("native", deterministic=True):
        batch = sd.rollout(model, Q, V, np.zeros(model.nv), sd.Scene(model, world=shapes, friction=0.8), DT, 15)
        for b in range(4):
            one = sd.rollout(model, Q[b], V[b], np.zeros(model.nv), sd.Scene(model, world=shapes, friction=0.8), DT, 15)
            assert np.array_equal(batch.q[:, b], one.q) and np.array_equal(batch.v[:, b], one.v)
            assert np.array_equal(np.asarray(batch.iterations)[:, b], one.iterations)
            assert all(np.array_equal(x[b], y) for x, y in zip(batch.impulses, one.impulses))
    assert sum(len(x[b]) for x in batch.impulses for b in range(4)) >= 40      # (they touch)
