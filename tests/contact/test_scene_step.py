"""Steps in a scene on the default road (sparsedyn.contact.scene_step): the compiled step's structure
is the scene's (each body that has touched the world keeps the slots its most contacts needed), so
the native step equals the NumPy step to rounding with the same iterations, and a trajectory whose
contacts come and go within those slots builds nothing."""

import re

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.codegen import build, native
from sparsedyn.contact import scene_step as scene_step_module
from sparsedyn.contact.friction_problem import ContactSlots
from sparsedyn.contact.scene_step import FoundContacts, scene_contacts, scene_slots
from test_friction_kernel import _rounding, assert_impulses_agree
from test_scene import DT, G, MASS, SIDE, box_model

TABLE = sd.Shape("box", (1.0, 1.0, 0.2), placement=(np.eye(3), [0, 0, 0.1]), name="table")


def _scene(on_table):
    return sd.Scene(box_model(), world=[sd.Shape("plane", name="floor")] + ([TABLE] if on_table else []), friction=0.5)


@pytest.fixture
def own_compiled_models(monkeypatch):
    """The compiled models of this test's own calls (another test of the process may have built
    another step variant of an equal model, which :func:`_step_variants` would count)."""
    monkeypatch.setattr(native, "_entries", type(native._entries)())


def _step_variants(model):
    """The native step kernels built for ``model``'s fingerprint without external forces (another
    test of the run may have built the ``f_ext`` variant of an equal model)."""
    return [n for n in native.shared(model).kernels if n.startswith("contact_step_kernel") and "_f_ext" not in n]


def test_free_slots_are_open_and_hold_the_contacts_in_body_order():
    """The box resting flat: four corners in its four slots; tilted onto an edge, two corners in the
    same four slots, the other two free (1000 km above their plane) and open with zero impulse."""
    scene = _scene(False)
    flat = scene_slots(scene, scene_contacts(scene, [0, 0, SIDE / 2, 0, 0, 0, 1]))
    s, c = np.sin(0.2), np.cos(0.2)
    edge_q = [0, 0, SIDE / 2 * (c + s) + 1e-4, s, 0, 0, c]                   # on one edge (rotated 0.4 rad about x)
    contacts = scene_contacts(scene, edge_q)
    edge = scene_slots(scene, contacts)
    assert len(flat.frames) == len(edge.frames) == 4 and flat.frames == edge.frames
    assert len(contacts) == 2 and sorted(edge.index) == [0, 1]
    assert np.all(edge.data[2:, 4:] == [0, 0, 1, -1e6])
    with sd.use_backend("numpy"):
        step = sd.contact_step(scene.model, edge_q, np.zeros(6), np.zeros(6), scene, DT)
    assert step.impulses.shape == (2, 3) and list(step.modes) != ["open"] * 2


@pytest.mark.usefixtures("own_compiled_models")
@pytest.mark.parametrize("on_table", [False, True])
def test_native_scene_step_equals_the_numpy_scene_step(on_table):
    """A box sliding and turning on the floor, and on a box (the table) on the floor: the default
    (native) road makes the NumPy road's iterations, modes, ``v+``, ``q+`` and impulses to the rounding
    bound of the step (test_friction_kernel's), and it ran the native step."""
    scene = _scene(on_table)
    top = 0.2 if on_table else 0.0
    q = [0.1, -0.2, top + SIDE / 2, 0, 0, 0, 1]                             # a plain list
    v = np.array([0.3, -0.1, 0.2, 0.05, 0.02, -0.4])
    with sd.use_backend("numpy"):
        ref = sd.contact_step(scene.model, q, v, np.zeros(6), scene, DT)
        contacts = scene_contacts(scene, np.array(q))
    with sd.use_backend("native", deterministic=True):
        one = sd.contact_step(scene.model, q, v, np.zeros(6), scene, DT)
    assert len(_step_variants(scene.model)) == 1                            # it ran native
    bound = _rounding(scene.model, np.array(q), v, np.zeros(6), contacts, None, ref)
    assert len(contacts) == 4 and int(one.iterations) == int(ref.iterations)
    assert list(one.modes) == list(ref.modes)
    assert np.abs(one.v - ref.v).max() <= bound * max(1.0, np.abs(ref.v).max())
    assert np.abs(one.q - ref.q).max() <= DT * bound * max(1.0, np.abs(ref.v).max()) + 4 * np.finfo(float).eps
    assert_impulses_agree(one.impulses, ref.impulses, scene.model, np.array(q), v, np.zeros(6), contacts, None, bound)


@pytest.mark.usefixtures("own_compiled_models")
@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_native_rollout_in_a_scene_builds_one_step(monkeypatch):
    """A tilted box dropped on the table after one step resting on its face (four slots): free fall
    (no hit), one corner, an edge, then the face all fit those slots, so the whole rollout runs that
    one native step (no library assembled) and ends at rest on its face carrying its weight
    (``m g dt`` a step)."""
    scene = _scene(True)
    axis = np.array([1.0, 1.0, 0]) / np.sqrt(2)
    q0 = np.r_[0, 0, 0.2 + 0.15, np.sin(0.15) * axis, np.cos(0.15)]
    built = []
    real = build.build_library
    with sd.use_backend("native", deterministic=True):
        rest = [0, 0, 0.2 + SIDE / 2, 0, 0, 0, 1]
        sd.contact_step(scene.model, rest, np.zeros(6), np.zeros(6), scene, DT)   # builds what the steps run
        monkeypatch.setattr(build, "build_library", lambda *a, **kw: built.append(a[0]) or real(*a, **kw))
        r = sd.rollout(scene.model, q0, np.zeros(6), np.zeros(6), scene, DT, 400)
    counts = {len(imp) for imp in r.impulses}
    assert {0, 4} <= counts and len(counts) >= 3                              # contacts came and went
    assert len(_step_variants(scene.model)) == 1
    assert built == []
    assert np.abs(r.v[-1]).max() <= 1e-6 and abs(r.q[-1][2] - 0.2 - SIDE / 2) <= 1e-6
    assert abs(r.impulses[-1][:, 2].sum() - MASS * G * DT) <= 1e-6 * MASS * G * DT


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_a_native_rollout_takes_the_kernels_road_with_the_matched_warm_start(monkeypatch):
    """The tilted box dropped on the floor (every pair the collision kernel's): the rollout makes no
    Contact object, and each of its steps is the step laid out from Contact objects, warm-started
    from the matched impulses of the step before as :func:`matched_warm_start` matches them (the
    general road, run here step by step from the rollout's own states): the same warm start (each
    road's recorded as its solve receives it), the same modes, ``v+`` to the solver's tolerance (100 tol
    times the velocity scale, as the warm and cold steps of the rollout test below).  Not the same
    iterations: the two roads' data agree to rounding only, and ADMM's choices (a new penalty past a
    ratio, Anderson's step taken or refused) are discontinuous in them."""
    from sparsedyn.contact import friction as friction_module
    from sparsedyn.contact.friction import _options, _slotted_step

    def recorded(into):
        def step(*args, **options):
            into.append(options.get("warm_start"))
            return _slotted_step(*args, **options)
        return step
    scene = _scene(False)
    axis = np.array([1.0, 1.0, 0]) / np.sqrt(2)
    q0 = np.r_[0, 0, 0.15, np.sin(0.15) * axis, np.cos(0.15)]
    made = []
    objects = scene_step_module.scene_contacts
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(scene.model, [0, 0, SIDE / 2, 0, 0, 0, 1], np.zeros(6), np.zeros(6), scene, DT)
        monkeypatch.setattr(scene_step_module, "scene_contacts", lambda *a: made.append(1) or objects(*a))
        rolled, stepped = [], []
        monkeypatch.setattr(friction_module, "_slotted_step", recorded(rolled))
        # the Python road's rollout (the fused call's equals it bit for bit: test_scene_fused)
        monkeypatch.setattr(friction_module, "fused_step", lambda *a, **k: None)
        monkeypatch.setattr(friction_module, "trajectory_plan", lambda *a, **k: None)
        r = sd.rollout(scene.model, q0, np.zeros(6), np.zeros(6), scene, DT, 200)
        assert made == [] and len(rolled) == 200
        previous, compared = None, 0
        for k in range(200):
            s, found = scene_step_module.scene_step(recorded(stepped), scene.model, r.q[k], r.v[k], np.zeros(6), scene,
                                                    DT, previous=previous, want_contacts=True,
                                                    **_options({}, r.impulses[k - 1] if k else None))
            previous = (found, r.impulses[k])                # the rollout's impulses start the next step
            assert len(found) == len(r.impulses[k]) and list(s.modes) == list(r.modes[k])
            # (matched from the same impulses: equal, or both none)
            assert (rolled[k] is None) == (stepped[k] is None) and (
                rolled[k] is None or np.array_equal(rolled[k], stepped[k]))
            # both solve one problem (data equal to rounding) to the tolerance from one warm start
            assert np.abs(s.v - r.v[k + 1]).max() <= 100 * 1e-8 * max(1.0, np.abs(r.v[k]).max())
            compared += int(s.iterations) > 0
    # (the steps at rest whose warm start already solves them make no iteration: most of the others)
    assert compared >= 80 and {len(x) for x in r.impulses} >= {1, 4}


def _found(cs):
    """The contacts ``cs`` ``[(point, (normal, offset))]`` (three) on the kernel's road: pairs 3, 5, 8."""
    data = np.array([[0.5, *p, *n, offset] for p, (n, offset) in cs])
    return FoundContacts(np.array([3, 5, 8]), ContactSlots((0, 0, 0), None, data))


def _objects(cs):
    """The contacts ``cs`` of :func:`_found` as Contact objects (the general nearest-point matching)."""
    return [sd.Contact(0, "3d", friction=0.5, point=p, plane=plane, name=f"pair{k}/floor#{k}")
            for k, (p, plane) in enumerate(cs)]


def test_matched_warm_start_of_the_same_pairs_each_once_takes_each_contact_its_own_within_the_radius():
    """The kernel's road with the same pairs in the same order, each pair once (a humanoid's limbs on a
    floor): by hand, a point moved 1 mm keeps its impulse, one moved 2 radii starts from zero, one
    whose normal turned +z -> +y reads its world impulse (1, 2, 3) as (1, -3, 2) (as in the test
    above); and the same contacts as Contact objects (the general nearest-point matching) give the same."""
    from sparsedyn.contact.scene_step import WARM_RADIUS, matched_warm_start
    up, side = ((0, 0, 1.0), 0.0), ((0, 1.0, 0), 0.0)
    before = [((0.1, 0.1, -0.1), up), ((-0.1, 0.1, -0.1), up), ((0.1, -0.1, -0.1), up)]
    after = [((0.1, 0.101, -0.1), up), ((-0.1, 0.1 + 2 * WARM_RADIUS, -0.1), up), ((0.1, -0.1, -0.1), side)]
    impulses = np.array([[0.5, 0.5, 4.0], [0.1, 0.2, 5.0], [1.0, 2.0, 3.0]])
    want = [[0.5, 0.5, 4.0], [0, 0, 0], [1.0, -3.0, 2.0]]

    got = matched_warm_start(_found(before), impulses, _found(after))
    np.testing.assert_allclose(got, want, atol=4 * np.finfo(float).eps)
    np.testing.assert_allclose(matched_warm_start(_objects(before), impulses, _objects(after)), got, atol=0)
    # unmoved: each its own impulse, exactly
    assert np.array_equal(matched_warm_start(_found(before), impulses, _found(before)), impulses)


def test_matched_warm_start_on_one_floor_takes_each_contact_its_own_within_the_radius():
    """The kernel's road with the same pairs in the same order, each pair once, all on one floor (same
    normals): points each moved by less than half the radius along every axis keep their impulses,
    exactly; a point moved 0.6 radius along x and y (0.85 radius) keeps its own, one moved 0.6 along
    x, y and z (1.04 radius) starts from zero; as the general nearest-point matching of the same
    contacts as Contact objects gives."""
    from sparsedyn.contact.scene_step import WARM_RADIUS, matched_warm_start
    up, R = ((0, 0, 1.0), 0.0), WARM_RADIUS
    before = [((0.1, 0.1, -0.1), up), ((-0.1, 0.1, -0.1), up), ((0.1, -0.1, -0.1), up)]
    impulses = np.array([[0.5, 0.5, 4.0], [0.1, 0.2, 5.0], [1.0, 2.0, 3.0]])

    def moved(steps):
        return [(tuple(np.add(p, np.multiply(R, d))), n) for (p, n), d in zip(before, steps)]
    for steps, want in (([(0.49, -0.49, 0.49), (0.0, 0.3, -0.2), (-0.1, 0.0, 0.0)], impulses),
                        ([(0.6, 0.6, 0.0), (0.6, 0.6, 0.6), (0.0, 0.0, 0.0)], [impulses[0], [0, 0, 0], impulses[2]])):
        after = moved(steps)
        got = matched_warm_start(_found(before), impulses, _found(after))
        assert np.array_equal(got, want) and np.array_equal(matched_warm_start(_objects(before), impulses,
                                                                                 _objects(after)), got)


def _steps_one_by_one(model, q, v, tau, scene, steps, dt=DT):
    """``steps`` public ``contact_step`` calls from ``(q, v)``, each warm-started from the impulses of
    the step before (what a rollout's matched warm start gives a contact set that persists in order;
    ``contact_step`` drops a warm start of another contact count): the rollout's fields."""
    qs, vs, imps, modes, its = [np.asarray(q, float)], [np.asarray(v, float)], [], [], []
    warm = None
    for _ in range(steps):
        s = sd.contact_step(model, q, v, tau, scene, dt, warm_start=warm)
        q, v, warm = s.q, s.v, s.impulses
        qs.append(q), vs.append(v), imps.append(s.impulses), modes.append(list(s.modes)), its.append(int(s.iterations))
    return qs, vs, imps, modes, its


def _assert_rollout_is_its_steps(r, steps):
    qs, vs, imps, modes, its = steps
    assert np.array_equal(r.q, np.array(qs)) and np.array_equal(r.v, np.array(vs))
    assert all(np.array_equal(a, b) for a, b in zip(r.impulses, imps, strict=True))
    assert [list(m) for m in r.modes] == modes and r.iterations.tolist() == its


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_a_native_rollout_in_a_scene_is_its_steps_one_by_one():
    """The box dropped flat onto the floor from 8 mm while sliding and turning: once its four corners
    touch they persist, in order, so the rollout (each step warm-started from the matched impulses of
    the step before) equals bit for bit a loop of public ``contact_step`` calls each warm-started from
    the impulses of the step before: its states, impulses, modes (the rollout computes them for all
    steps at once) and iterations.  The default (native) road, plain lists as inputs."""
    scene = _scene(False)
    q0, v0, tau = [0.0, 0.0, SIDE / 2 + 0.008, 0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.8, 0.4, -0.3, 0.0], [0.0] * 6
    steps = 100
    with sd.use_backend("native", deterministic=True):
        r = sd.rollout(scene.model, q0, v0, tau, scene, DT, steps)
        # a scene of its own: its layout grows as the rollout's did (a step with free slots only is not
        # the free step a scene that never had a contact takes)
        fresh = sd.Scene(scene.model, world=[sd.Shape("plane", name="floor")], friction=0.5)
        one_by_one = _steps_one_by_one(scene.model, q0, v0, tau, fresh, steps)
    counts = [len(x) for x in r.impulses]
    assert counts[0] == 0 and counts[-1] == 4 and counts == sorted(counts) and set(counts) == {0, 4}
    assert {"slide", "stick"} & {m for x in r.modes for m in x}
    _assert_rollout_is_its_steps(r, one_by_one)


def test_a_warm_start_in_a_scene_is_impulses_as_any_sequence_and_anything_else_is_refused_by_name():
    """The box resting on the floor (four corners): its step's impulses as a warm start solve the same
    step in no iteration whether given as an array, a list or a tuple of rows; impulses of another
    contact count are a guess for another contact set, dropped (the cold step's iterations); a step's
    result or a string are refused with the argument's name."""
    scene = _scene(False)
    q, v, tau = [0.0, 0.0, SIDE / 2 - 1e-4, 0.0, 0.0, 0.0, 1.0], [0.0] * 6, [0.0] * 6
    with sd.use_backend("native", deterministic=True):
        cold = sd.contact_step(scene.model, q, v, tau, scene, DT)
        assert len(cold.impulses) == 4 and cold.iterations >= 1
        for warm in (cold.impulses, cold.impulses.tolist(), tuple(map(tuple, cold.impulses.tolist()))):
            s = sd.contact_step(scene.model, q, v, tau, scene, DT, warm_start=warm)
            assert s.iterations == 0 and np.array_equal(s.v, cold.v)
        other = sd.contact_step(scene.model, q, v, tau, scene, DT, warm_start=np.ones((3, 3)))
        assert other.iterations == cold.iterations and np.array_equal(other.v, cold.v)
        with pytest.raises(TypeError, match="warm_start takes impulses.*step.impulses"):
            sd.contact_step(scene.model, q, v, tau, scene, DT, warm_start=cold)
        with pytest.raises(TypeError, match="warm_start: expected a numeric array"):
            sd.contact_step(scene.model, q, v, tau, scene, DT, warm_start="previous")
        for shape in ((4, 2), (12,)):
            with pytest.raises(ValueError, match=rf"warm_start takes impulses \(nc, 3\).*{re.escape(str(shape))}"):
                sd.contact_step(scene.model, q, v, tau, scene, DT, warm_start=np.zeros(shape))
        with pytest.raises(ValueError, match="warm_start must be finite.*NaN or infinite"):
            sd.contact_step(scene.model, q, v, tau, scene, DT, warm_start=np.where(cold.impulses, np.nan, 0))


def test_a_batch_in_a_scene_refuses_velocities_and_forces_of_another_batch_by_name():
    """Two states in a scene: v and tau of shape (nv,) or (2, nv) are taken; (3, nv) is refused naming the
    argument and the shapes expected."""
    scene = _scene(False)
    Q = np.array([[0, 0, SIDE / 2 - 1e-4, 0, 0, 0, 1.0]] * 2)
    with sd.use_backend("native", deterministic=True):
        s = sd.contact_step(scene.model, Q, [0.0] * 6, np.zeros((2, 6)), scene, DT)
        assert s.v.shape == (2, 6) and [len(x) for x in s.impulses] == [4, 4]
        for name, args in (("v", (np.zeros((3, 6)), np.zeros(6))), ("tau", (np.zeros(6), np.zeros((3, 6))))):
            with pytest.raises(ValueError, match=rf"batch of 2 states in a scene takes {name} of shape \(6,\) or "
                                                 r"\(2, 6\); got shape \(3, 6\)"):
                sd.contact_step(scene.model, Q, *args, scene, DT)


def test_a_batch_in_a_scene_takes_its_own_impulses_as_a_warm_start_and_refuses_others_by_name():
    """Two resting boxes (four corners each): the batch's impulses given
    back (a list of per-state arrays, or one array (B, 4, 3)) solve it in no iteration; another
    batch's count of states, rows that are not impulses (nc, 3) and NaN are refused naming the state."""
    scene = _scene(False)
    Q = np.array([[0, 0, SIDE / 2 - 1e-4, 0, 0, 0, 1.0]] * 2)
    with sd.use_backend("native", deterministic=True):
        cold = sd.contact_step(scene.model, Q, np.zeros(6), np.zeros(6), scene, DT)
        assert [len(x) for x in cold.impulses] == [4, 4] and cold.iterations.min() >= 1
        for warm in (cold.impulses, np.stack(cold.impulses), [x.tolist() for x in cold.impulses]):
            s = sd.contact_step(scene.model, Q, np.zeros(6), np.zeros(6), scene, DT, warm_start=warm)
            assert s.iterations.tolist() == [0, 0] and np.array_equal(s.v, cold.v)
        bad = [(list(cold.impulses) * 3, r"a batch of 2 states takes warm_start .* got list of length 6"),
               (0.5, "got float$"), ([np.zeros((4, 2))] * 2, r"state 0's impulses .* got shape \(4, 2\)$"),
               ([cold.impulses[0], np.full((4, 3), np.nan)], r"state 1's impulses .* got shape \(4, 3\), not finite")]
        for warm, message in bad:
            with pytest.raises(ValueError, match=message):
                sd.contact_step(scene.model, Q, np.zeros(6), np.zeros(6), scene, DT, warm_start=warm)


def test_a_rollout_in_a_scene_of_one_state_and_a_batch_of_forces_is_that_batchs():
    """One state with joint forces for two (2, nv): the rollout is a batch of two from the same state,
    each its own rollout; forces for a batch of two against states of three are refused by name."""
    scene = _scene(False)
    q0, T = [0.0, 0.0, SIDE / 2 + 0.01, 0.0, 0.0, 0.0, 1.0], np.array([[0, 0, 0, 0.5, 0, 0], [0, 0, 0, 0, -0.5, 0]])
    with sd.use_backend("native", deterministic=True):
        sd.rollout(scene.model, np.array([q0] * 2), np.zeros(6), T, scene, DT, 30)        # lays the slots out
        r = sd.rollout(scene.model, q0, np.zeros(6), T, scene, DT, 30)
        ones = [sd.rollout(scene.model, q0, np.zeros(6), t, scene, DT, 30) for t in T]
        assert r.q.shape == (31, 2, 7)
        for i, one in enumerate(ones):
            assert np.array_equal(r.iterations[:, i], one.iterations)
            assert np.abs(r.v[:, i] - one.v).max() <= 30 * 1e-12 * max(1.0, np.abs(one.v).max())
        with pytest.raises(ValueError, match=r"rollout: a rollout in a scene takes one state or a batch.*\(3, 7\)"):
            sd.rollout(scene.model, np.array([q0] * 3), np.zeros(6), T, scene, DT, 3)


def test_matched_warm_start_follows_each_contact_and_turns_its_impulse_into_the_new_frame():
    """By hand: the previous step had contacts A, B (box/floor) and C (box/table); the new one has C'
    (C's point moved 1 mm, its plane's normal turned from +z to +y), B (the same) and D (a new point of
    the pair of A, farther than the radius from A): C' takes C's impulse turned into its frame, B keeps
    its own, D starts from zero, and A (gone) gives nothing.  A normal +z -> +y turns the contact frame
    [t_x, t_y, n] = [x, y, z] into [x, -z, y] (plane_basis: t_x the world x projected, t_y = n x t_x),
    so C's world impulse (1, 2, 3) reads (1, -3, 2)."""
    from sparsedyn.contact.scene_step import WARM_RADIUS, matched_warm_start
    up = ((0, 0, 1.0), 0.0)
    A = sd.Contact(0, "3d", friction=0.5, point=(0.1, 0.1, -0.1), plane=up, name="box/floor#0")
    B = sd.Contact(0, "3d", friction=0.5, point=(-0.1, 0.1, -0.1), plane=up, name="box/floor#1")
    C = sd.Contact(0, "3d", friction=0.5, point=(0.1, -0.1, -0.1), plane=up, name="box/table#2")
    C2 = sd.Contact(0, "3d", friction=0.5, point=(0.1, -0.099, -0.1), plane=((0, 1.0, 0), 0.0), name="box/table#0")
    D = sd.Contact(0, "3d", friction=0.5, point=(0.1, 0.1 + 2 * WARM_RADIUS, -0.1), plane=up, name="box/floor#2")
    previous = [A, B, C]
    impulses = np.array([[0.5, 0.5, 4.0], [0.1, 0.2, 5.0], [1.0, 2.0, 3.0]])
    warm = matched_warm_start(previous, impulses, [C2, B, D])
    np.testing.assert_allclose(warm, [[1.0, -3.0, 2.0], [0.1, 0.2, 5.0], [0, 0, 0]], atol=4 * np.finfo(float).eps)
    assert not matched_warm_start([], np.zeros((0, 3)), [B]).any()
    # the same contacts as the kernel's road keeps them (pair 0: box/floor, 1: box/table), and mixed: none
    found = []
    for pair, cs in (([0, 0, 1], previous), ([1, 0, 0], [C2, B, D])):
        data, index = np.zeros((4, 8)), np.array([3, 1, 0])                 # in slots 3, 1, 0; slot 2 free
        data[:, 4:] = (0, 0, 1, -1e6)
        data[index] = [[0.5, *c.point, *c.plane[0], c.plane[1]] for c in cs]
        found.append(FoundContacts(np.array(pair), ContactSlots((0,) * 4, index, data)))
    np.testing.assert_allclose(matched_warm_start(found[0], impulses, found[1]), warm, atol=0)
    assert not matched_warm_start(previous, impulses, found[1]).any()
    assert not matched_warm_start(found[0], impulses, [C2, B, D]).any()


def test_matched_warm_start_keeps_a_persisting_set_and_matches_a_changed_one_by_nearest_point():
    """The same contacts in the same order keep their impulses exactly; reordered, each takes its own;
    two points of one pair 4 mm apart whose successors lie at 0 and 0.5 mm of the other one's point:
    the first takes the nearest (the second's), the second what is left within the radius (the first's)."""
    from sparsedyn.contact.scene_step import matched_warm_start
    up = ((0, 0, 1.0), 0.0)
    A, B, C = (sd.Contact(0, "3d", friction=0.5, point=p, plane=up, name=f"box/floor#{k}")
               for k, p in enumerate([(0.1, 0.1, -0.1), (-0.1, 0.1, -0.1), (0.1, -0.1, -0.1)]))
    impulses = np.array([[0.5, 0.5, 4.0], [0.1, 0.2, 5.0], [1.0, 2.0, 3.0]])
    assert np.array_equal(matched_warm_start([A, B, C], impulses, [A, B, C]), impulses)
    assert np.array_equal(matched_warm_start([A, B, C], impulses, [B, C, A]), impulses[[1, 2, 0]])
    P, Q, P2, Q2 = (sd.Contact(0, "3d", friction=0.5, point=(x, 0, -0.1), plane=up, name=f"box/floor#{k}")
                    for k, x in enumerate([0.0, 0.004, 0.004, 0.0045]))
    assert np.array_equal(matched_warm_start([P, Q], impulses[:2], [P2, Q2]), impulses[[1, 0]])


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_rollout_warm_starts_persisting_contacts_same_answer_fewer_iterations():
    """The tilted box dropped on the table (one corner, then its face; contacts come and go): each step
    of the rollout, warm-started from the matched impulses of the step before, gives the cold step's
    ``v+`` from the same state to the solver's tolerance (each is within ``tol`` of Coulomb's law: 100 tol
    times the velocity scale leaves room for the conditioning of the step), and the warm steps take
    fewer iterations in all.  Steps where either solve stopped at its iteration limit are left out
    (their answers are only as good as the residuals the warning reports).  Where the face rests on
    four corners Coulomb's law has a continuum of solutions (the normal impulses can be shared in many
    ways: two diagonal corners carry the weight, or all four), so there the two solves may report
    different modes (a corner with zero impulse and zero velocity is "stick" or "open" by which of the
    solutions each solve found), and still the same ``v+``."""
    scene = _scene(True)
    axis = np.array([1.0, 1.0, 0]) / np.sqrt(2)
    q0 = np.r_[0, 0, 0.2 + 0.15, np.sin(0.15) * axis, np.cos(0.15)]
    warm, cold, other = [], [], []
    with sd.use_backend("native", deterministic=True):
        r = sd.rollout(scene.model, q0, np.zeros(6), np.zeros(6), scene, DT, 300)
        limit = 1000 * 10 + 300                                                # ADMM budget, then Gauss-Seidel
        for k in range(300):
            if not len(r.impulses[k]):
                continue
            c = sd.contact_step(scene.model, r.q[k], r.v[k], np.zeros(6), scene, DT)
            if max(int(c.iterations), int(r.iterations[k])) >= limit:
                continue
            scale = max(1.0, np.abs(r.v[k]).max())
            assert np.abs(c.v - r.v[k + 1]).max() <= 100 * 1e-8 * scale
            if list(c.modes) != list(r.modes[k]):
                other.append(k)
            warm.append(int(r.iterations[k])), cold.append(int(c.iterations))
    assert len(warm) > 200 and sum(warm) < sum(cold)
    # the modes differ only where the face rests on its four corners (the continuum): which steps those
    # are depends on rounding upstream (the trajectory is chaotic once the box slides on its face)
    assert all(len(r.impulses[k]) == 4 for k in other)


def test_a_batch_of_scene_steps_equals_the_single_steps():
    """Four boxes in one call: sliding and spinning on the floor, on an edge, in free fall (no hit) and
    pressed onto the table; the batch lays them in one layout of slots, so each state's step, taken
    alone afterwards (the scene's layout only grows), makes the same iterations and modes and agrees
    with it to the rounding bound of the step."""
    scene = _scene(True)
    s, c = np.sin(0.2), np.cos(0.2)
    Q = np.array([[2, 0, SIDE / 2, 0, 0, 0, 1], [2, 0, SIDE / 2 * (c + s) + 1e-4, s, 0, 0, c],
                  [0, 0, 1.0, 0, 0, 0, 1], [0.1, 0, 0.2 + SIDE / 2, 0, 0, 0, 1]])
    V = np.array([[0, 0, 0.5, 0.3, 0, 0], [0, 0, 0, 0, 0, -0.1], [0, 0, 0, 0, 0, 0], [0.1, 0, 0, 0, 0, -0.2]])
    with sd.use_backend("native", deterministic=True):
        batch = sd.contact_step(scene.model, Q, V, np.zeros(6), scene, DT)
        ones = [sd.contact_step(scene.model, Q[i], V[i], np.zeros(6), scene, DT) for i in range(len(Q))]
    assert [len(x) for x in batch.impulses] == [4, 2, 0, 4]
    for i, one in enumerate(ones):
        assert int(batch.iterations[i]) == int(one.iterations) and list(batch.modes[i]) == list(one.modes)
        bound = max(1.0, np.abs(one.v).max()) * (4 * np.finfo(float).eps if not len(one.impulses) else
                                                  _rounding(scene.model, Q[i], V[i], np.zeros(6),
                                                            scene_contacts(scene, Q[i]), None, one))
        assert np.abs(batch.v[i] - one.v).max() <= bound
        assert np.abs(batch.q[i] - one.q).max() <= DT * bound + 4 * np.finfo(float).eps
        if len(one.impulses):
            assert np.abs(batch.impulses[i] - one.impulses).max() <= bound * np.abs(one.impulses).max()


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_a_batch_rollout_in_a_scene_equals_the_single_rollouts():
    """Two boxes dropped at once (one flat on the floor, one tilted onto the table): the batch rollout's
    states, per step, are those of each box's own rollout in the same layout of slots (a first run lays
    it out: the tilted box lands on more corners than four for a while, and free slots change the
    iterations), to rounding, with the same iterations, up to a step where rounding flips one of the
    solver's discontinuous choices (a stopping test met one iteration later: the tilted box landing flat
    on four sliding corners, a redundant set); from there both solve each step to the solver's tolerance
    (100 tol times the velocity scale, as the warm and cold steps below), carried at most linearly."""
    scene = _scene(True)
    axis = np.array([1.0, 1.0, 0]) / np.sqrt(2)
    Q0 = [[2, 0, SIDE / 2 + 0.05, 0, 0, 0, 1], list(np.r_[0, 0, 0.2 + 0.15, np.sin(0.15) * axis, np.cos(0.15)])]
    with sd.use_backend("native", deterministic=True):
        sd.rollout(scene.model, Q0, np.zeros(6), np.zeros(6), scene, DT, 150)
        layout = dict(scene.cache["step_slots"])
        batch = sd.rollout(scene.model, Q0, np.zeros(6), np.zeros(6), scene, DT, 150)
        ones = [sd.rollout(scene.model, q0, np.zeros(6), np.zeros(6), scene, DT, 150) for q0 in Q0]
    assert batch.q.shape == (151, 2, 7) and len(batch.impulses[-1]) == 2 and scene.cache["step_slots"] == layout
    for i, one in enumerate(ones):
        same = batch.iterations[:, i] == one.iterations
        k = len(same) if same.all() else int(np.argmin(same))      # the first step whose iterations differ
        # each step differs at most by the rounding bound of the step (at the resting state, where the
        # Delassus matrix of four corners is the worst conditioned), carried at most linearly
        last = sd.contact_step(scene.model, one.q[-2], one.v[-2], np.zeros(6), scene, DT)
        step = _rounding(scene.model, one.q[-2], one.v[-2], np.zeros(6), scene_contacts(scene, one.q[-2]), None, last)
        scale = max(1.0, np.abs(one.v).max())
        assert np.abs(batch.v[:k + 1, i] - one.v[:k + 1]).max() <= 150 * step * scale
        assert np.abs(batch.v[k + 1:, i] - one.v[k + 1:]).max(initial=0.0) <= 100 * 1e-8 * (150 - k) * scale
        assert [len(x[i]) for x in batch.impulses] == [len(x) for x in one.impulses]
