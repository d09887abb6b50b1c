"""Slots whose body is data (sparsedyn.contact.data_slots, DATA_SLOT in friction_problem.problem_of):
the rows against the world Jacobian of the body (sd.frame_jacobian, "world"), the step against the
per-body layout's step (the same problem: the same solution), and the builds of a humanoid falling
onto stairs bounded by the slot counts."""

import warnings

import numpy as np
import pytest

import sparsedyn as sd
import sparsedyn.contact.friction as friction
from sparsedyn.contact.collision import collide_within
from sparsedyn.contact.data_slots import MIN_DATA_SLOTS, _rows, data_slot_count, least_slots, runs_per_body
from sparsedyn.contact.friction_kernel import RHO_START
from sparsedyn.contact.friction_problem import (ADMM_BUDGET, DATA_SLOT, ContactSlots, contact_data, contact_slots,
                                                plane_basis, problem_of, slot_weights)
import sparsedyn.contact.data_slots as data_slots_module
import sparsedyn.contact.scene_data as scene_data_module
import sparsedyn.contact.scene_step as scene_step_module
from sparsedyn.contact.scene_step import scene_contacts
from tests.conftest import dm_control_humanoid, rounding_bound, solve_bound
from test_friction_kernel import assert_impulses_agree

DT = 0.005


def _body_frame(model, body):
    return next(k for k, f in enumerate(model.frames) if f.body == body)


def test_data_slot_rows_are_the_world_jacobian_at_the_point_of_body_a_less_b(rng):
    """A world contact's rows: ``R_c^T (v - x x w)`` of the body's world Jacobian (sd.frame_jacobian,
    "world": the spatial velocity at the world origin) at the world point ``x``; a two-body one the same
    of ``a`` less ``b``'s; the gap ``n . x - offset``; ``J H^-1`` and ``G`` from sd.crba."""
    model = sd.humanoid()
    q = model.random_configuration(rng)
    v, tau = rng.normal(size=model.nv), rng.normal(size=model.nv)
    hand, foot, torso = (model.frames[model.frame(n)].body for n in ("r_hand", "l_foot", "torso"))
    pairs = [(hand, None), (foot, None), (hand, torso), (torso, foot)]
    x = rng.normal(size=(4, 3))
    planes = np.array([[0, 0, 1, 0.1], [0.2, -0.5, 1, 0.3], [1, 0.3, 0, -0.2], [0, 1, 0.1, 0.0]])
    W = np.array([slot_weights(model, a, b) for a, b in pairs])
    P = problem_of(model, q, v, tau, (DATA_SLOT,) * 4, x, planes, weights=list(W))
    H = sd.crba(model, q)
    J = []
    for (a, b), xi, plane in zip(pairs, x, planes):
        Rc, n, offset = plane_basis(plane)
        rows = 0
        for body, sign in ((a, 1.0), (b, -1.0)):
            if body is not None:
                Jw = sd.frame_jacobian(model, q, _body_frame(model, body), "world")
                rows = rows + sign * (Jw[3:] - np.cross(xi, Jw[:3], axisb=0, axisc=0))
        J.append(Rc.T @ rows)
    J = np.concatenate(J)
    gap = np.array([xi @ (p[:3] / np.linalg.norm(p[:3])) - p[3] / np.linalg.norm(p[:3]) for xi, p in zip(x, planes)])
    bound = rounding_bound(model.nv, 4.0)
    assert np.abs(P.J - J).max() <= bound * max(1.0, np.abs(J).max())
    assert np.abs(P.gap - gap).max() <= bound * max(1.0, np.abs(gap).max())
    JMinv = np.linalg.solve(H, J.T).T
    assert np.abs(P.JMinv - JMinv).max() <= solve_bound(H, JMinv[0]) * 4 * max(1.0, np.abs(JMinv).max()) + \
        rounding_bound(model.nv, np.linalg.cond(H)) * np.abs(JMinv).max()
    assert np.abs(P.G - J @ JMinv.T).max() <= rounding_bound(model.nv, np.linalg.cond(H)) * max(1.0, np.abs(P.G).max())


def test_weights_are_one_on_a_less_b_and_zero_on_the_joints_they_share():
    """``slot_weights``: the joints from the root to ``a`` (1), to ``b`` (-1), the shared ones 0."""
    model = sd.humanoid()
    hand, torso = (model.frames[model.frame(n)].body for n in ("r_hand", "torso"))
    w = slot_weights(model, hand, torso)
    for j in range(model.nbodies):
        on_a, on_b = j in model.ancestors(hand), j in model.ancestors(torso)
        assert (w[model.v_slice(j)] == float(on_a) - float(on_b)).all()


def _stairs(n=3, rise=0.15, run=0.35, start=0.45):
    """``n`` boxes, each one ``rise`` higher than the one before, ``run`` deep, from ``x = start``."""
    return [sd.Shape("box", (run + 0.05, 1.2, rise * (k + 1)),
                     placement=(np.eye(3), (start + run * k, 0.0, rise * (k + 1) / 2)), name=f"stair{k}")
            for k in range(n)]


@pytest.fixture(scope="module")
def humanoid_scene():
    return sd.Scene(dm_control_humanoid(), world=_stairs())


def _lying(model):
    """The humanoid lying on its back on the floor, a knee raised (a dozen contacts)."""
    q = np.zeros(model.nq)
    q[2], q[3:7] = 0.11, (np.sin(np.pi / 4), 0.0, 0.0, np.cos(np.pi / 4))   # x y z w: 90 degrees about x
    return q


def _standing(scene):
    """The humanoid standing, its feet 1 mm above the floor (within the margin: a few contacts)."""
    q = np.zeros(scene.model.nq)
    q[6] = 1.0
    q[2] = 2.0
    hits = collide_within(scene, q, np.full(len(scene.pairs), 10.0))
    q[2] -= min(d for d, pair in zip(hits.distances, hits.pairs) if "floor" in pair) - 0.001
    return q


@pytest.mark.parametrize("pose", ["standing", "lying"])
def test_a_step_in_data_slots_equals_the_step_in_per_body_slots(humanoid_scene, pose):
    """The humanoid standing and lying on the floor: its contacts laid out per body (their points
    fixed in their bodies' frames, one build per set of bodies) and the same slots as data slots (the
    point in the world, the body by joint weights; free slots where the per-body layout has them) are
    the same problem: the same modes, ``v+`` and the impulses to the rounding bound of the step (the
    impulses along the Delassus matrix's range; :func:`assert_impulses_agree`) and the same iterations
    where ADMM converges: a handful of steps.  The default (native) road."""
    scene = humanoid_scene
    model = scene.model
    q = _standing(scene) if pose == "standing" else _lying(model)
    v, tau = np.zeros(model.nv), np.zeros(model.nv)
    contacts = scene_contacts(scene, q)
    assert len(contacts) >= 2
    checked = friction._frictional(model, contacts, "test")[0]
    options = friction._options({}, None)
    per = contact_slots(model, checked)
    R, p = sd.frame_placements(model, q)
    same = ContactSlots((DATA_SLOT,) * len(per.frames), per.index, _rows(scene, per.frames, per.data, R, p))
    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        per_body = friction._slotted_step(model, q, v, tau, checked, per, DT, **options)
        data = friction._slotted_step(model, q, v, tau, checked, same, DT, **options)
    if int(per_body.iterations) < ADMM_BUDGET:
        assert int(per_body.iterations) == int(data.iterations)
    assert list(per_body.modes) == list(data.modes)
    frames, _, points, planes = contact_data(model, checked)
    P = problem_of(model, q, v, tau, frames, points, planes)
    m = P.G.shape[-1]
    A = P.G + (RHO_START * np.trace(P.G) / m) * np.eye(m)
    H = sd.crba(model, q)
    bound = solve_bound(H, P.a) * DT * np.abs(P.a).max() + rounding_bound(m, np.linalg.cond(A))
    scale = max(1.0, np.abs(per_body.v).max())
    assert np.abs(data.v - per_body.v).max() <= bound * scale
    # impulses: to the bound along G's range; along its null space (a resting face's redundant corners)
    # the polish's least squares carry rounding amplified by 1 / POLISH_EPS
    assert_impulses_agree(data.impulses, per_body.impulses, model, q, v, tau, checked, None, bound,
                          sliding="slide" in list(per_body.modes))


def test_a_batch_runs_each_state_in_the_least_slots_that_hold_it_as_its_single_step_in_a_fresh_scene(monkeypatch):
    """A batch in data slots of the humanoid lying (a dozen contacts: 16 slots), standing (a few: 8)
    and in the air (none: 8), as plain lists: the layout grows to 16 slots, and the step runs each
    state in the least count that holds its contacts, one call per count (two states in 8 slots, one
    in 16), so each state's step is, to the bit, its single step in a fresh scene (which runs in that
    count): ``q+``, ``v+``, impulses, modes and iterations.  The default (native) road."""
    model = dm_control_humanoid()
    scene = sd.Scene(model)
    air = _lying(model)
    air[2] += 1.0
    Q = [list(_lying(model)), list(_standing(scene)), list(air)]
    V, tau = [[0.0] * model.nv] * 3, [0.0] * model.nv
    runs = []
    least = friction.in_least_slots

    def spy(run, q, v, tau, warm, slots):
        return least(lambda *a: runs.append((len(a[0]), len(a[4].frames))) or run(*a), q, v, tau, warm, slots)
    monkeypatch.setattr(friction, "in_least_slots", spy)
    with warnings.catch_warnings(), sd.use_backend("native", deterministic=True):
        warnings.simplefilter("ignore", sd.ContactStepWarning)
        batch = sd.contact_step(model, Q, V, tau, scene, DT)
        ones = [sd.contact_step(model, q, v, tau, sd.Scene(model), DT) for q, v in zip(Q, V)]
    counts = [len(x) for x in batch.impulses]
    assert counts[0] > MIN_DATA_SLOTS and 0 < counts[1] <= MIN_DATA_SLOTS and counts[2] == 0
    assert data_slot_count(scene, 0, False) == 2 * MIN_DATA_SLOTS
    assert sorted(runs) == [(1, 2 * MIN_DATA_SLOTS), (2, MIN_DATA_SLOTS)]
    for i, one in enumerate(ones):
        assert batch.q[i].tobytes() == one.q.tobytes() and batch.v[i].tobytes() == one.v.tobytes()
        assert batch.impulses[i].tobytes() == one.impulses.tobytes() and list(batch.modes[i]) == list(one.modes)
        assert int(batch.iterations[i]) == int(one.iterations)


def test_the_slot_count_starts_at_its_least_and_grows_only_when_the_contacts_outgrow_it():
    scene = sd.Scene(dm_control_humanoid())
    assert data_slot_count(scene, 0) == 0
    assert data_slot_count(scene, 3) == MIN_DATA_SLOTS == 8
    assert data_slot_count(scene, 8) == 8
    assert data_slot_count(scene, 2) == 8                                     # it never shrinks below 8
    assert data_slot_count(scene, 9) == 12
    assert data_slot_count(scene, 13) == 16


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_a_humanoid_pushed_onto_stairs_builds_a_step_per_slot_count_and_never_sinks_below_the_margin(
        humanoid_scene, monkeypatch):
    """The dm_control humanoid, standing, pushed forwards and pitched onto three stair boxes (its
    hands, arms, torso and knees touch the floor and the stairs: sets of touching bodies that change
    step by step).  On the default (native) road the steps run in at most four layouts of data slots
    (8, 12, 16, 24: ``least_slots``), whichever bodies touch (the per-body layout made a build each time
    a body touched for the first time or outgrew its slots: 14 in a 400-step rollout); and no shape
    of the humanoid ever sinks into the floor or a stair more than the scene's margin."""
    scene = sd.Scene(humanoid_scene.model, world=_stairs())          # a fresh layout
    model = scene.model
    counts = []
    counted = data_slots_module.data_slot_count

    def recorded(scene, nc, step=True):         # each count of data slots a step is laid out in (a layout is
        n = counted(scene, nc, step)            # made here first, then kept: the native call's too)
        counts.append(n)
        return n
    for module in (data_slots_module, scene_data_module):
        monkeypatch.setattr(module, "data_slot_count", recorded)
    q0 = np.zeros(model.nq)
    q0[2], q0[6] = 1.35, 1.0                                          # standing (x y z w quaternion)
    v0 = np.zeros(model.nv)
    v0[1], v0[3] = 2.0, 1.2                    # pitching over at 2 rad/s, forwards at 1.2 m/s ([omega; v], base axes)
    with sd.use_backend("native", deterministic=True):
        r = sd.rollout(model, q0, v0, [0.0] * model.nv, scene, DT, 240)
    kinds = {n for n in counts if n}                  # a step with no slot runs no kernel
    touching = max(len(x) for x in r.impulses)
    assert touching > MIN_DATA_SLOTS                                  # more than the least layout holds
    assert not runs_per_body(scene)                                   # every step in data slots
    assert kinds <= {8, 12, 16, 24, 32} and len(kinds) <= 4 and max(kinds) == least_slots(touching)
    assert min(sd.collide(scene, q).distances.min(initial=1.0) for q in r.q) >= -scene.margin


def _dumbbell():
    """Two balls (radius 0.05 m) 0.3 m apart: one on a free body, the other on a body hinged to it
    about y (two robot bodies touch: a scene's steps run in data slots), each with a frame."""
    b = sd.ModelBuilder("dumbbell")
    b.add_body("a", None, sd.make_joint("free"), mass=1.0, rot_inertia=1e-3 * np.eye(3))
    b.add_body("b", "a", sd.make_joint("revolute", axis=[0, 1, 0]), mass=1.0, rot_inertia=1e-3 * np.eye(3),
               Xtree=(np.eye(3), [0.3, 0, 0]))
    model = b.add_frame("a", "a").add_frame("b", "b").build()
    at = sd.spatial.Transform(np.eye(3), np.zeros(3))
    return model.with_geometry(*(sd.Geometry(n, k, at, "sphere", (0.05,), "collision", link=n) for k, n in
                                 enumerate("ab")))


def test_the_data_slots_of_the_kernels_rows_are_the_per_body_slots_problem():
    """The dumbbell's balls pressed into the floor, sliding and turning: the default (native) step,
    whose data slots come straight from the collision kernel's rows (each point in the world the
    witness point on the ball), and the step of the same contacts as Contact objects in per-body slots
    (each point fixed in its body's frame) solve the same problem: the same modes and iterations,
    ``v+`` and the impulses to the rounding bound of the step."""
    model = _dumbbell()
    scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")], friction=0.3)
    q = np.array([0, 0, 0.0497, 0, 0.05, 0, np.sqrt(1 - 0.05 ** 2), 0.1])
    v, tau = np.array([0.2, -0.3, 0.5, 0.4, 0.1, -0.2, 2.0]), np.zeros(model.nv)
    made = []
    objects = scene_step_module.scene_contacts
    with sd.use_backend("native", deterministic=True):
        with pytest.MonkeyPatch.context() as m:
            m.setattr(scene_step_module, "scene_contacts", lambda *a, **kw: made.append(1) or objects(*a, **kw))
            data = sd.contact_step(model, q, v, tau, scene, DT)
        assert made == []
        contacts = scene_contacts(scene, q, cutoff=np.full(len(scene.pairs), 0.05))
        assert len(contacts) == 2
        checked = friction._frictional(model, contacts, "test")[0]
        per_body = friction._slotted_step(model, q, v, tau, checked, contact_slots(model, checked), DT,
                                          **friction._options({}, None))
    assert list(per_body.modes) == list(data.modes)
    frames, _, points, planes = contact_data(model, checked)
    P = problem_of(model, q, v, tau, frames, points, planes)
    m = P.G.shape[-1]
    A = P.G + (RHO_START * np.trace(P.G) / m) * np.eye(m)
    bound = solve_bound(sd.crba(model, q), P.a) * DT * np.abs(P.a).max() + rounding_bound(m, np.linalg.cond(A))
    # The layouts' slot counts differ (2 against 8), so do the solver's Anderson memories and its
    # iterates: each answer meets the stopping test, residuals below tol times the impulse scale, and
    # in the same modes the impulses are a linear solve in G's active rows away from the exact ones,
    # so the two differ by at most 2 tol cond(G) times that scale (G is positive definite here).
    lam = np.abs(per_body.impulses).max()
    gap = 2 * 1e-8 * np.linalg.cond(P.G) * lam
    assert np.abs(data.impulses - per_body.impulses).max() <= gap + bound * lam
    Minv_JT = np.abs(P.JMinv).sum(0).max()                  # |H^-1 J^T| in the infinity norm
    assert np.abs(data.v - per_body.v).max() <= Minv_JT * gap + bound * max(1.0, np.abs(per_body.v).max())


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_a_native_rollout_in_data_slots_is_its_steps_one_by_one():
    """The dumbbell's balls on the floor (every pair the collision kernel's: the steps run in data
    slots laid out straight from the kernel's rows, no Contact object made) sliding, turning and
    rolling: both contacts persist, in order, so the rollout (each step warm-started from the matched
    impulses of the step before) equals bit for bit a loop of public ``contact_step`` calls each
    warm-started from the impulses of the step before (its states, impulses, modes, iterations).  The
    default (native) road, plain lists as inputs."""
    from test_scene_step import _assert_rollout_is_its_steps, _steps_one_by_one
    model = _dumbbell()
    floor = [sd.Shape("plane", name="floor")]
    q0, v0, tau = [0, 0, 0.0499, 0, 0, 0, 1, 0.0], [0, 0, 0.5, 0.4, 0.1, 0, 2.0], [0.0] * model.nv
    steps = 80
    made = []
    objects = scene_step_module.scene_contacts
    with sd.use_backend("native", deterministic=True), pytest.MonkeyPatch.context() as m:
        m.setattr(scene_step_module, "scene_contacts", lambda *a, **kw: made.append(1) or objects(*a, **kw))
        r = sd.rollout(model, q0, v0, tau, sd.Scene(model, world=floor, friction=0.3), DT, steps)
        one_by_one = _steps_one_by_one(model, q0, v0, tau, sd.Scene(model, world=floor, friction=0.3), steps, DT)
    assert made == []
    assert [len(x) for x in r.impulses] == [2] * steps
    _assert_rollout_is_its_steps(r, one_by_one)
