"""A step in a scene in one native call (sparsedyn.contact.scene_fused): on the default (native) road
``sd.contact_step(model, q, v, tau, scene, dt)`` runs the collision kernel, the slot layout and the
solve in one call of the C extension where the scene's layout holds the step's contacts, and its
step is the Python road's (the same road with the fused call switched off) bit for bit: a box on a
floor (per-body slots) and a two-body arm lying on the floor, touching itself (data slots), from
arrays, plain lists and tuples, with and without a warm start.  Where the layout must grow, and on
bad input, the Python road answers (its errors name the argument)."""

import dataclasses

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact import friction, scene_fused
from sparsedyn.model.spatial import Transform
from test_scene import DT, G, SIDE
from test_scene_step_bodies import MODEL as ARM, Q_TOUCH, R

FLOOR = sd.Shape("plane", name="floor")
#: The box's mass [kg] (not test_scene's box: a model of its own, whose native steps other tests count)
MASS = 1.5


def box_model():
    """A free cube of side SIDE and mass MASS, its collision box in its body frame."""
    b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=MASS,
                                        rot_inertia=MASS * SIDE ** 2 / 6 * np.eye(3))
    return b.add_frame("box", "box").build().with_geometry(
        sd.Geometry("box", 0, Transform(np.eye(3), np.zeros(3)), "box", (SIDE,) * 3, "collision"))


def _box():
    """A box resting flat on the floor, sliding and turning about the vertical: (scene, q, v, tau)."""
    scene = sd.Scene(box_model(), world=[FLOOR], friction=0.5)
    q = np.array([0.1, -0.2, SIDE / 2 - 1e-5, 0, 0, 0, 1])
    return scene, q, np.array([0.0, 0.0, -0.4, 0.3, -0.1, 0.0]), np.zeros(6)      # [omega, v]


def _arm():
    """The arm folded, the forearm's tip touching the torso's end and swinging in, lying on the
    floor, both capsules a hair into it: robot-world and self-collision contacts, in data slots."""
    scene = sd.Scene(ARM, world=[FLOOR], friction=0.8)
    q = Q_TOUCH + np.r_[0, 0, R - 1e-5, np.zeros(6)]
    v = np.r_[0.05, 0, -0.02, 0, 0, 0, 0, 3.0]            # the forearm swinging into the torso
    return scene, q, v, np.r_[np.zeros(6), 0.5, -0.5]


def _arm_driven():
    """:func:`_arm` with its shoulder driven harder (2 N m): a contact leaves within the rollout and
    comes back (with :func:`_arm`'s torques the arm comes to rest on its five contacts)."""
    return _arm()[:3] + (np.r_[np.zeros(6), 2.0, -0.5],)


#: A table: a world box whose top face is the floor's plane (z = 0)
TABLE = sd.Shape("box", (3.0, 3.0, 0.2), placement=(np.eye(3), [0.0, 0.0, -0.1]), name="table")


def _arm_on_box():
    """:func:`_arm` on a table's top instead of the floor: capsule-box contacts (and the self-contact)."""
    _, q, v, tau = _arm()
    return sd.Scene(ARM, world=[TABLE], friction=0.8), q, v, tau


def _arm_driven_on_box():
    """:func:`_arm_driven` on :func:`_arm_on_box`'s table."""
    return _arm_on_box()[:3] + _arm_driven()[3:]


def _ball_on_box():
    """A ball resting 10 micrometres into a table's top, rolling: a sphere-box contact, per-body slots."""
    b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=MASS,
                                         rot_inertia=0.4 * MASS * 0.05 ** 2 * np.eye(3))
    model = b.add_frame("ball", "ball").build().with_geometry(
        sd.Geometry("ball", 0, Transform(np.eye(3), np.zeros(3)), "sphere", (0.05,), "collision"))
    q = np.array([0.2, -0.1, 0.05 - 1e-5, 0, 0, 0, 1])
    return sd.Scene(model, world=[TABLE], friction=0.5), q, np.array([0.0, 4.0, 0.0, 0.2, 0.0, -0.1]), np.zeros(6)


def _box_on_box():
    """:func:`_box`'s cube resting on a table (a world box) instead of the floor, sliding and turning:
    box-box contacts (the native routine's rows), per-body slots."""
    _, q, v, tau = _box()
    return sd.Scene(box_model(), world=[TABLE], friction=0.5), q, v, tau


class _Spy:
    """``native_function`` that counts the fused steps that answered (a call not None; a trajectory's
    call, ``scene_rollout``: the steps it took)."""

    def __init__(self, real):
        self.real, self.answered = real, 0

    def __call__(self, name):
        f = self.real(name)
        if f is None:
            return None

        def counted(*args):
            out = f(*args)
            self.answered += len(out) if type(out) is list else out is not None
            return out
        return counted


def _python_road(monkeypatch, *args, **kwargs):
    """The step on the Python road (the fused call switched off)."""
    with monkeypatch.context() as m:
        m.setattr(friction, "fused_step", _never)
        return sd.contact_step(*args, **kwargs)


def _never(*args, **kwargs):
    return None


def _same(a, b):
    """Whether two steps hold the same numbers, bit for bit, and the same modes."""
    return all(np.asarray(x).tobytes() == np.asarray(y).tobytes() for x, y in zip(a, b)) and \
        list(a.modes) == list(b.modes)


@pytest.mark.parametrize("make", [_box, _arm, _arm_on_box, _ball_on_box, _box_on_box])
def test_a_fused_step_is_the_python_roads_step_bit_for_bit(make, monkeypatch):
    """The first step grows the layout (the Python road); the next ones are one native call each,
    whose ``q+``, ``v+``, impulses, modes, residuals and iterations are the Python road's bit for bit,
    from arrays, plain lists and tuples."""
    scene, q, v, tau = make()
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    with sd.use_backend("native", deterministic=True):
        first = sd.contact_step(scene.model, q, v, tau, scene, DT)
        spy.answered = 0
        steps = [sd.contact_step(scene.model, f(q), f(v), f(tau), scene, DT) for f in (np.array, list, tuple)]
        assert spy.answered == 3                                              # one native call each
        ref = _python_road(monkeypatch, scene.model, q, v, tau, scene, DT)
    assert len(ref.impulses) >= (1 if make is _ball_on_box else 4) and _same(first, ref)
    if make in (_arm, _arm_on_box):                                                          # a self-contact among them
        assert any(type(k) is tuple for k in scene.cache["step_slots"])
    for s in steps:
        assert _same(s, ref)


@pytest.mark.parametrize("make", [_box, _box_on_box])
def test_the_fused_box_carries_its_weight(make, monkeypatch):
    """The box at rest on the floor or on a table (v = 0): the step's normal impulses carry its weight
    over the step, ``sum lambda_n = m g dt``, to the solver's tolerance, on the fused road."""
    scene, q, _, _ = make()
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(scene.model, q, np.zeros(6), np.zeros(6), scene, DT)
        s = sd.contact_step(scene.model, list(q), [0.0] * 6, [0.0] * 6, scene, DT)
    assert spy.answered == 1 and len(s.impulses) == 4
    assert abs(s.impulses[:, 2].sum() - MASS * G * DT) <= 1e-6 * MASS * G * DT
    assert np.abs(s.v).max() <= 1e-6


@pytest.mark.parametrize("make", [_box, _arm])
def test_a_fused_step_from_a_warm_start_is_the_python_roads(make, monkeypatch):
    """A warm start of the contacts' shape starts the solve from it (the previous step's impulses: no
    iteration); one of another shape is ignored, as on the Python road; a non-finite one is refused
    naming ``warm_start``."""
    scene, q, v, tau = make()
    with sd.use_backend("native", deterministic=True):
        cold = sd.contact_step(scene.model, q, v, tau, scene, DT)
        nc = len(cold.impulses)
        for warm in (cold.impulses, cold.impulses[:2].copy(), np.ones((nc, 3))):
            s = sd.contact_step(scene.model, q, v, tau, scene, DT, warm_start=warm)
            assert _same(s, _python_road(monkeypatch, scene.model, q, v, tau, scene, DT, warm_start=warm))
        assert int(sd.contact_step(scene.model, q, v, tau, scene, DT, warm_start=cold.impulses).iterations) == 0
        bad = cold.impulses.copy()
        bad[0, 2] = np.nan
        with pytest.raises(ValueError, match="warm_start"):
            sd.contact_step(scene.model, q, v, tau, scene, DT, warm_start=bad)


def test_where_the_layout_must_grow_the_python_road_answers(monkeypatch):
    """The box on one edge (two contacts: two slots), then flat (four): the fused call declines, the
    Python road grows the layout and steps; the step equals that of a scene that took the Python road
    all along, bit for bit, and the next step is fused again."""
    s, c = np.sin(0.2), np.cos(0.2)
    edge = np.array([0, 0, SIDE / 2 * (c + s) - 1e-5, s, 0, 0, c])
    scene, flat, v, tau = _box()
    twin = sd.Scene(box_model(), world=[FLOOR], friction=0.5)
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    with sd.use_backend("native", deterministic=True):
        for x in (edge, edge):
            sd.contact_step(scene.model, x, v, tau, scene, DT)
        assert spy.answered == 1 and sum(scene.cache["step_slots"].values()) == 2
        grown = sd.contact_step(scene.model, flat, v, tau, scene, DT)
        assert spy.answered == 1 and sum(scene.cache["step_slots"].values()) == 4
        again = sd.contact_step(scene.model, flat, v, tau, scene, DT)
        assert spy.answered == 2
        _python_road(monkeypatch, twin.model, edge, v, tau, twin, DT)
        ref = _python_road(monkeypatch, twin.model, flat, v, tau, twin, DT)
    assert len(ref.impulses) == 4 and _same(grown, ref) and _same(again, ref)


def test_bad_input_on_the_fused_road_gets_the_python_roads_errors():
    """A NaN in ``q``, a ``tau`` of the wrong length or not numbers: errors naming the argument."""
    scene, q, v, tau = _box()
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(scene.model, q, v, tau, scene, DT)
        nan = q.copy()
        nan[2] = np.nan
        with pytest.raises(ValueError, match=r"\bq\b"):
            sd.contact_step(scene.model, nan, v, tau, scene, DT)
        with pytest.raises(ValueError, match="tau"):
            sd.contact_step(scene.model, q, v, [0.0] * 5, scene, DT)
        with pytest.raises((ValueError, TypeError), match="tau"):
            sd.contact_step(scene.model, q, v, ["a"] * 6, scene, DT)


def _tilted_drop():
    """The box tilted about x and y, 1 mm above the floor, falling and turning: one corner lands, then
    an edge, then a face (contacts come and go, the layout grows on the way)."""
    scene = sd.Scene(box_model(), world=[FLOOR], friction=0.5)
    s, c = np.sin(0.15), np.cos(0.15)
    quat = np.array([s * c, s * c, -s * s, c * c])                 # [x, y, z, w]: about x, then y
    R = sd.spatial.quat_to_rot(quat)
    low = np.abs(R @ np.array([[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)]).T * SIDE / 2)
    q = np.r_[0, 0, low[2].max() + 1e-3, quat / np.linalg.norm(quat)]
    return scene, q, np.array([0.2, 0, -0.3, 1.0, 0, 0]), np.zeros(6)


def _tilted_drop_on_box():
    """:func:`_tilted_drop` onto a table (a world box) instead of the floor."""
    _, q, v, tau = _tilted_drop()
    return sd.Scene(box_model(), world=[TABLE], friction=0.5), q, v, tau


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")      # (the same step's on both roads)
def _turned_dumbbell():
    """Two balls (radius 0.05 m) 0.3 m apart, one on a free body, the other hinged to it about y (two
    robot bodies touch: data slots), each body's one frame turned and moved off its origin (each
    contact's point turned into its slot frame on the Python road: ``scene_data._plan``'s ``moved``),
    8 mm above the floor, falling, turning and the hinge swinging (contacts come and go)."""
    b = sd.ModelBuilder("dumbbell")
    b.add_body("a", None, sd.make_joint("free"), mass=1.0, rot_inertia=1e-3 * np.eye(3))
    b.add_body("b", "a", sd.make_joint("revolute", axis=[0, 1, 0]), mass=1.0, rot_inertia=1e-3 * np.eye(3),
               Xtree=(np.eye(3), [0.3, 0, 0]))
    turn = sd.spatial.quat_to_rot(np.array([0.3, -0.2, 0.1, 0.9]) / np.linalg.norm([0.3, -0.2, 0.1, 0.9]))
    # (each frame named as its body: the body's frame, turned and moved; no other frame on it)
    model = b.add_frame("a", "a", (turn, [0.01, 0.02, -0.03])).add_frame("b", "b", (turn.T, [-0.02, 0.0, 0.01])).build()
    at = Transform(np.eye(3), np.zeros(3))
    model = model.with_geometry(*(sd.Geometry(n, k, at, "sphere", (0.05,), "collision")
                                  for k, n in enumerate("ab")))
    q = np.array([0, 0, 0.058, 0, 0, 0, 1, 0.0])
    return (sd.Scene(model, world=[FLOOR], friction=0.3), q, np.array([0.4, 0.1, 0.0, 0.3, 0.0, -0.6, 2.0]),
            np.zeros(model.nv))


@pytest.mark.parametrize("make", [_tilted_drop, _arm_driven, _arm_driven_on_box, _tilted_drop_on_box,
                                  _turned_dumbbell])
def test_a_fused_rollout_is_the_python_roads_rollout_bit_for_bit(make, monkeypatch):
    """A rollout whose steps take the fused road where the layout holds their contacts (each warm-started
    in the native call from the step before's matched impulses) is the rollout on the Python road
    (a twin scene, the fused call switched off), bit for bit: states, impulses, modes, iterations; plain
    lists as the initial state.  The native call matches every warm start itself (contacts that came,
    went, turned, a pair twice): the Python matcher it could ask is never asked."""
    scene, q, v, tau = make()
    twin = sd.Scene(scene.model, world=[x for x in scene.shapes if x.body < 0], friction=scene.friction)
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    asked = []

    def matching(scene, plan):
        warm = scene_fused.general_matching(scene, plan)
        return lambda *args: asked.append(1) or warm(*args)
    monkeypatch.setattr(friction, "general_matching", matching)
    steps = 150
    with sd.use_backend("native", deterministic=True):
        r = sd.rollout(scene.model, list(q), list(v), tau, scene, DT, steps)
        ref = _python_road_rollout(monkeypatch, scene.model, q, v, tau, twin, DT, steps)
    assert spy.answered >= steps // 2 and not asked                # most steps one native call, matched in it
    assert r.q.tobytes() == ref.q.tobytes() and r.v.tobytes() == ref.v.tobytes()
    assert r.iterations.tobytes() == ref.iterations.tobytes()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(r.impulses, ref.impulses))
    assert all(list(a) == list(b) for a, b in zip(r.modes, ref.modes))
    assert max(len(x) for x in r.impulses) >= 2 and len({len(x) for x in r.impulses}) >= 2   # contacts came and went
    if make is _turned_dumbbell:                  # (the slot frames are not the bodies' own)
        from sparsedyn.contact.data_slots import runs_per_body
        from sparsedyn.contact.scene_data import _plan
        assert _plan(scene)[6] and not runs_per_body(scene)


@pytest.mark.parametrize("make", [_box, _arm])
def test_a_fused_rollout_under_a_torque_sequence_or_a_controller_is_the_python_roads(make, monkeypatch):
    """Joint forces that change from step to step, as a sequence (steps, nv) (the steps in one native
    call, row by row) and as a controller of the time (each step its own call, the controller run
    between them): both rollouts equal the Python road's bit for bit (states, impulses, iterations),
    and each other."""
    scene, q, v, tau = make()
    twin = sd.Scene(scene.model, world=[x for x in scene.shapes if x.body < 0], friction=scene.friction)
    steps = 60
    taus = np.sin(np.arange(steps)[:, None] * 0.3 + np.arange(scene.model.nv)) * 0.5      # (steps, nv) [N, N m]
    controller = lambda t, q, v: taus[int(round(t / DT))]        # noqa: E731 (t = k DT)
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    runs, answered = [], []
    with sd.use_backend("native", deterministic=True):
        for x in (taus, controller):
            runs.append(sd.rollout(scene.model, q, v, x, scene, DT, steps))
            answered.append(spy.answered - sum(answered))
        ref = _python_road_rollout(monkeypatch, scene.model, q, v, taus, twin, DT, steps)
    assert min(answered) >= steps // 2                             # most steps on the fused road
    for r in runs:
        assert r.q.tobytes() == ref.q.tobytes() and r.v.tobytes() == ref.v.tobytes()
        assert r.iterations.tobytes() == ref.iterations.tobytes()
        assert all(a.tobytes() == b.tobytes() for a, b in zip(r.impulses, ref.impulses))


def _python_road_rollout(monkeypatch, *args):
    with monkeypatch.context() as m:
        m.setattr(friction, "fused_step", _never)
        m.setattr(friction, "trajectory_plan", _never)       # (a trajectory's fused steps)
        return sd.rollout(*args)


def test_a_fused_step_with_no_contact_is_free_fall(monkeypatch):
    """The box 0.5 m above the floor at rest after a step on it (the layout holds its four slots, all
    free now): one native call, no contact, and the step is free fall from rest, ``v+ = -g dt e_z``,
    the Python road's bit for bit."""
    scene, q, v, tau = _box()
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    up, rest = q + np.r_[0, 0, 0.5, 0, 0, 0, 0], np.zeros(6)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(scene.model, q, v, tau, scene, DT)
        s = sd.contact_step(scene.model, up, rest, tau, scene, DT)
        ref = _python_road(monkeypatch, scene.model, up, rest, tau, scene, DT)
    assert spy.answered == 1 and s.impulses.shape == (0, 3) and list(s.modes) == []
    assert _same(s, ref)
    assert np.abs(s.v - np.r_[0, 0, 0, 0, 0, -G * DT]).max() <= 4 * np.finfo(float).eps * G * DT


def test_arrays_the_native_call_does_not_take_go_the_python_road(monkeypatch):
    """Joint forces as an integer array, and a batch of two states: the native call declines them (it
    takes float64 arrays of one state's shapes), the Python road steps them, and each step is that of
    the same state given as float64 arrays (a batch's: each state's single step), bit for bit."""
    scene, q, v, _ = _box()
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    with sd.use_backend("native", deterministic=True):
        one = sd.contact_step(scene.model, q, v, np.zeros(6), scene, DT)
        spy.answered = 0
        ints = sd.contact_step(scene.model, q, v, np.zeros(6, int), scene, DT)
        batch = sd.contact_step(scene.model, np.stack([q, q]), np.stack([v, v]), np.zeros(6), scene, DT)
        assert spy.answered == 0
        again = sd.contact_step(scene.model, q, v, np.zeros(6), scene, DT)
    assert spy.answered == 1 and _same(ints, one) and _same(again, one)
    for b in range(2):
        assert batch.q[b].tobytes() == one.q.tobytes() and batch.impulses[b].tobytes() == one.impulses.tobytes()


def test_plain_lists_take_the_native_call(monkeypatch):
    """``q``, ``v``, ``tau`` as plain lists of Python floats, as tuples, and as ``list(q)`` of arrays (NumPy
    floats): one native call each, the step of the same state as float64 arrays bit for bit; a list of
    strings keeps its error naming the argument."""
    scene, q, v, tau = _box()
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    with sd.use_backend("native", deterministic=True):
        one = sd.contact_step(scene.model, q, v, tau, scene, DT)
        for args in ((q.tolist(), v.tolist(), tau.tolist()), (tuple(q.tolist()), tuple(v), list(tau))):
            spy.answered = 0
            assert _same(sd.contact_step(scene.model, *args, scene, DT), one) and spy.answered == 1
        with pytest.raises(TypeError, match="q"):
            sd.contact_step(scene.model, [str(x) for x in q], v, tau, scene, DT)


@pytest.fixture(scope="module")
def talos():
    """talos (example-robot-data's talos_reduced, its 52 collision shapes: 47 meshes, 4 cylinders and a
    box) on a floor, no self-collision: its robot meshes on the floor have no closed form in the
    collision kernel (their rows: the mesh-plane loop), its other shapes do."""
    import warnings
    from erd import robots_dir
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = sd.load_urdf(robots_dir() / "talos_data" / "robots" / "talos_reduced.urdf", floating_base=True,
                             geometry=True)
    # a name of its own: its native builds are not those other tests count on talos
    return dataclasses.replace(model, name="talos on the fused road")


def _talos_scene(model):
    """A scene of its own (a step's fused plan is kept by its scene)."""
    return sd.Scene(model, world=[FLOOR], self_collision=False)


def _lowered(model, scene, q, gap):
    """``q`` lowered so that talos's lowest hull vertex is ``gap`` [m] above the floor (negative: pressed in)."""
    from sparsedyn.contact.collision import mesh_vertices
    V, rows = mesh_vertices(scene)
    R, p = sd.geometry_placements(model, q, "collision")
    q[2] -= min(float((V[a:b] @ R[i].T + p[i])[:, 2].min()) for i, (a, b) in rows.items()) - gap
    return q


def _pose(model, scene, pose):
    """``(q, v)``: talos standing on its soles, pressed 0.1 mm in and sinking; fallen onto its head
    (base pitched 0.6 pi), pressed 30 mm in: its head's mesh and its camera's box (a closed form of the
    collision kernel) on the floor; or a random configuration (seed 2) pressed 45 mm in, its left
    gripper's five meshes on the floor; each moving at random (seeded) speeds."""
    v = np.random.default_rng(5).normal(0.0, 0.1, model.nv)
    if pose == "standing":
        return _lowered(model, scene, model.neutral(), -1e-4), np.r_[0, 0, -0.05, np.zeros(model.nv - 3)]
    if pose == "on its head":
        q = model.neutral()
        q[3:7] = [0, np.sin(0.3 * np.pi), 0, np.cos(0.3 * np.pi)]
        return _lowered(model, scene, q, -0.03), v
    q = model.random_configuration(np.random.default_rng(2))
    q[:3] = 0.0
    return _lowered(model, scene, q, -0.045), v


@pytest.mark.parametrize("pose", ["standing", "on its head", "on its gripper"])
def test_a_talos_step_with_its_meshes_on_the_floor_is_one_native_call(talos, pose, monkeypatch):
    """talos on the floor (robot meshes on a plane beside closed-form pairs): after the step that
    grows the layout, a step is one native call (the mesh-plane rows and the kernel's candidates
    handed to it) whose ``q+``, ``v+``, impulses, modes, residuals and iterations are the Python
    road's bit for bit, from arrays, plain lists and tuples; from a warm start too."""
    model = talos
    scene = _talos_scene(model)
    q, v = _pose(model, scene, pose)
    tau = np.linspace(-1.0, 1.0, model.nv)
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    with sd.use_backend("native", deterministic=True):
        first = sd.contact_step(model, q, v, tau, scene, DT)
        spy.answered = 0
        steps = [sd.contact_step(model, f(q), f(v), f(tau), scene, DT) for f in (np.array, list, tuple)]
        warm = sd.contact_step(model, q, v, tau, scene, DT, warm_start=first.impulses)
        assert spy.answered == 4                                              # one native call each
        ref = _python_road(monkeypatch, model, q, v, tau, scene, DT)
        ref_warm = _python_road(monkeypatch, model, q, v, tau, scene, DT, warm_start=first.impulses)
    assert len(ref.impulses) >= {"standing": 4, "on its head": 8, "on its gripper": 16}[pose] and _same(first, ref)
    for s in steps:
        assert _same(s, ref)
    assert _same(warm, ref_warm) and int(warm.iterations) == 0


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")      # (the same step's on both roads)
def test_a_talos_rollout_onto_the_floor_is_the_python_roads_bit_for_bit(talos, monkeypatch):
    """talos dropped from 10 mm above the floor: its soles land (contacts come), and a rollout whose
    steps take the fused road where the layout holds their contacts (its robot meshes' rows found before
    each step, the steps chained in native calls) is the rollout on the Python road (a twin scene, the
    fused call switched off), bit for bit: states, impulses, modes, iterations."""
    model = talos
    scene, twin = _talos_scene(model), _talos_scene(model)
    q, v, tau = _lowered(model, scene, model.neutral(), 0.01), np.zeros(model.nv), np.zeros(model.nv)
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    single = []                                   # (steps of one native call each, outside a chain)
    monkeypatch.setattr(friction, "chained_step", lambda *a: single.append(1) or scene_fused.chained_step(*a))
    steps = 60
    with sd.use_backend("native", deterministic=True):
        r = sd.rollout(model, list(q), list(v), tau, scene, DT, steps)
        ref = _python_road_rollout(monkeypatch, model, q, v, tau, twin, DT, steps)
    touching = sum(len(x) > 0 for x in r.impulses)
    assert touching >= steps // 3 and spy.answered >= touching - 2    # once touching, one native call a step
    assert len(single) == 0                                           # ... each in a chain
    assert r.q.tobytes() == ref.q.tobytes() and r.v.tobytes() == ref.v.tobytes()
    assert r.iterations.tobytes() == ref.iterations.tobytes()
    assert all(a.tobytes() == b.tobytes() for a, b in zip(r.impulses, ref.impulses))
    assert all(list(a) == list(b) for a, b in zip(r.modes, ref.modes))
    assert len(r.impulses[0]) == 0 and len(r.impulses[-1]) >= 4                # contacts came


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")      # (the same step's on both roads)
def test_a_talos_step_beyond_the_capacity_is_one_native_call_as_the_python_road(talos, monkeypatch):
    """talos lying across the floor and a box (test_look_ahead's state: 34 hits within the look-ahead,
    more than the step's capacity, 32): the native call leaves out the widest gaps beyond the step's
    reach as the Python road does (look_ahead.capacity_mask), so after the step that grows the layout
    a step is one native call whose ``q+``, ``v+``, impulses, modes, residuals and iterations are the
    Python road's bit for bit, from a warm start too; patched down to a capacity of 20 (more contacts
    within reach than that), the call declines and the Python road answers."""
    from sparsedyn.contact import look_ahead, scene_data
    from test_look_ahead import TALOS_ON_BOX
    box = sd.Shape("box", (0.5, 1.0, 0.3), placement=(np.eye(3), [0.55, 0.0, 0.15]), name="box")
    scene = sd.Scene(talos, world=[FLOOR, box], self_collision=False)
    q, v, tau = np.array(TALOS_ON_BOX), np.zeros(talos.nv), np.zeros(talos.nv)
    q[3:7] /= np.linalg.norm(q[3:7])
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    with sd.use_backend("native", deterministic=True):
        assert len(look_ahead.step_hits(scene, q, v, DT).distances) == look_ahead.STEP_CAPACITY < \
            len(sd.collide(scene, q).distances)
        first = sd.contact_step(talos, q, v, tau, scene, DT)
        spy.answered = 0
        again = sd.contact_step(talos, q, v, tau, scene, DT)
        warm = sd.contact_step(talos, q, v, tau, scene, DT, warm_start=first.impulses)
        assert spy.answered == 2                                              # one native call each
        ref = _python_road(monkeypatch, talos, q, v, tau, scene, DT)
        ref_warm = _python_road(monkeypatch, talos, q, v, tau, scene, DT, warm_start=first.impulses)
        assert len(ref.impulses) == look_ahead.STEP_CAPACITY and _same(first, ref) and _same(again, ref)
        assert _same(warm, ref_warm) and int(warm.iterations) == 0
        monkeypatch.setattr(look_ahead, "STEP_CAPACITY", 20)
        monkeypatch.setattr(scene_data, "STEP_CAPACITY", 20)
        spy.answered = 0
        more = sd.contact_step(talos, q, v, tau, scene, DT)
        assert spy.answered == 0 and len(more.impulses) > 20          # (more within reach: all kept)
        assert _same(more, _python_road(monkeypatch, talos, q, v, tau, scene, DT))


def test_bad_input_to_a_talos_step_gets_errors_naming_the_argument(talos):
    """A NaN in ``q`` or ``v`` (which the mesh-plane routine's kinematics read before the native
    call), a ``tau`` of the wrong length: errors naming the argument, after a step that took the fused road."""
    model = talos
    scene = _talos_scene(model)
    q, v = _pose(model, scene, "standing")
    tau = np.zeros(model.nv)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(model, q, v, tau, scene, DT)
        for name, args in (("q", (np.r_[np.nan, q[1:]], v, tau)), ("v", (q, np.r_[v[:-1], np.nan], tau)),
                           ("tau", (q, v, [0.0] * 5))):
            with pytest.raises(ValueError, match=rf"^{name}: "):
                sd.contact_step(model, *args, scene, DT)


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_a_box_dropped_on_a_table_lands_as_on_the_floor():
    """The tilted cube dropped on a table whose top is the floor's plane (z = 0; its corners land well
    inside the top) lands as on the floor: the table's contacts (the box-box routine's corners, through
    the fused call) are the floor's (box-plane corners, the collision kernel's) to the 1e-9 m of the
    collision queries, so the trajectories agree to that over 0.6 s; it comes to rest on its face, its
    weight carried, no deeper than the solver's tolerance."""
    with sd.use_backend("native", deterministic=True):
        runs = [sd.rollout(s.model, q, v, tau, s, DT, 600) for s, q, v, tau in (_tilted_drop(), _tilted_drop_on_box())]
    floor, table = runs
    assert np.abs(floor.q - table.q).max() <= 1e-9 and np.abs(floor.v - table.v).max() <= 1e-9 / DT
    assert abs(table.q[-1, 2] - SIDE / 2) <= 1e-8 and np.abs(table.v[-1]).max() <= 1e-6
    assert len(table.impulses[-1]) == 4
    assert abs(table.impulses[-1][:, 2].sum() - MASS * G * DT) <= 1e-6 * MASS * G * DT


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")      # (the same step's on both roads)
def test_the_steps_options_after_a_fused_step_are_each_calls_own(monkeypatch):
    """The fused road keeps its call and settings per scene for the options last given: a step with
    other options (tolerance, margin, iteration cap, the PGS solver) is the Python road's with those
    options bit for bit (one iteration cap: it warns that the solver stopped), the defaults again the
    defaults' step; options that are not numbers > 0 (a
    bool among them, equal to 1), an unknown solver, or a NaN or a short ``q`` after a fused step get
    the Python road's errors naming them; on the NumPy backend the step is the NumPy road's."""
    scene, q, v, tau = _box()
    spy = _Spy(scene_fused.native_function)
    monkeypatch.setattr(scene_fused, "native_function", spy)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(scene.model, q, v, tau, scene, DT)
        first = sd.contact_step(scene.model, q, v, tau, scene, DT)
        spy.answered = 0
        for options in ({"tol": 1e-3}, {"margin": 0.02}, {"max_iterations": 1}, {"solver": "pgs"}, {}):
            s = sd.contact_step(scene.model, q, v, tau, scene, DT, **options)
            assert _same(s, _python_road(monkeypatch, scene.model, q, v, tau, scene, DT, **options))
        assert spy.answered == 5 and _same(s, first)
        with pytest.warns(sd.ContactStepWarning, match="stopped after"):
            sd.contact_step(scene.model, q, v, tau, scene, DT, max_iterations=1)
        sd.contact_step(scene.model, q, v, tau, scene, DT, max_iterations=1, tol=1.0)     # (options equal to bools)
        for bad, name in (({"tol": True}, "tol"), ({"max_iterations": True}, "max_iterations"),
                          ({"margin": -1.0}, "margin"), ({"solver": "newton"}, "solver")):
            with pytest.raises(ValueError, match=name):
                sd.contact_step(scene.model, q, v, tau, scene, DT, **({"max_iterations": 1, "tol": 1.0} | bad))
        nan = q.copy()
        nan[3] = np.nan
        for x in (nan, q[:6]):
            with pytest.raises(ValueError, match=r"\bq\b"):
                sd.contact_step(scene.model, x, v, tau, scene, DT)
        with pytest.raises(ValueError, match=r"\bdt\b"):
            sd.contact_step(scene.model, q, v, tau, scene, -DT)
    with sd.use_backend("numpy"):
        s = sd.contact_step(scene.model, q, v, tau, scene, DT)
        spy.answered = 0
        ref = _python_road(monkeypatch, scene.model, q, v, tau, scene, DT)
    assert spy.answered == 0 and _same(s, ref)


@pytest.mark.parametrize("make", [_box, _arm])
def test_the_native_call_returns_the_layout_its_warm_start_callable_is_given(make):
    """The fused call asked for the contacts' layout (``chain`` True: what the derivatives read) returns
    the step's arrays and index bit for bit as the call whose warm start is a callable, and beside them
    the arguments that callable is given (each contact's candidate and per-body slot, the candidates,
    the slots' data), bit for bit; no warm start is asked of Python."""
    scene, q, v, tau = make()
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(scene.model, q, v, tau, scene, DT)
        plan = scene_fused.trajectory_plan(scene, scene.model, DT)
        settings = friction._step_settings("contact_step", DT, 1e-8, None, "admm", 0.005)
        given = []
        asked = plan[0](plan[1], q, v, tau, settings, lambda *x: given.append(x), None)
        got = plan[0](plan[1], q, v, tau, settings, None, None, True)
    assert len(given) == 1 and len(got) == 6 and len(asked) == 2
    assert all(x.tobytes() == y.tobytes() for x, y in zip(asked[0], got[0]))
    assert (asked[1] is None and got[1] is None) or asked[1].tobytes() == got[1].tobytes()
    assert len(got[2]) == (len(asked[0][2]) if got[1] is None else len(got[1])) >= 1     # (one per contact)
    for x, y in zip(given[0], got[2:]):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()

