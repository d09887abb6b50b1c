"""A step's candidates of robot meshes on world planes beside the collision kernel's pairs, bound once
(sparsedyn.contact.mesh_plane_step): ``plane_step_rows`` gives the general road's candidates and
look-ahead (``scene_data._mixed_candidates`` with it switched off: the step's look-ahead and rows of
``mesh_plane_step_rows``, the kernel's candidates of ``near_candidates``, the other pairs' rows of
``scene_data._other_rows``) bit for bit: the same routines and kernel on the same numbers."""

from functools import partial

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact import mesh_plane_step, scene_batch, scene_data, scene_fused
from sparsedyn.kernels import native_function
from test_scene import DT
import test_scene_fused
from test_scene_fused import FLOOR, _pose, _python_road, _python_road_rollout, _same, _talos_scene

talos = test_scene_fused.talos                      # (its fixture: talos on a floor, shared)


def _general(monkeypatch, scene, mixed, q, v):
    """``_mixed_candidates`` of a step on the general road (this module's road switched off)."""
    with monkeypatch.context() as m:
        m.setattr(scene_data, "plane_step_rows", lambda *args, **kwargs: None)
        return scene_data._mixed_candidates(scene, mixed, q, None, (v, DT))


@pytest.mark.parametrize("pose", ["standing", "on its head", "on its gripper"])
def test_talos_candidates_are_the_general_roads_bit_for_bit(talos, pose, monkeypatch):
    """talos on the floor (its meshes' rows from the loop, its camera's box and cylinders the kernel's):
    at its pose and at nine more of random velocities (some large: the look-ahead reaches the floor from
    far), the candidates and each one's look-ahead are the general road's, byte for byte (new arrays or
    the road's buffers, ``fresh=False``); the kernel's
    and the mesh-plane pairs' rows both present; a ``v`` with a NaN is refused by name on both roads."""
    model = talos
    scene = _talos_scene(model)
    q, v = _pose(model, scene, pose)
    rng = np.random.default_rng(3)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(model, q, v, np.zeros(model.nv), scene, DT)           # (the builds, the plan)
        mixed = scene_data._mixed_plan(scene)[0]
        assert mixed.kernel.pairs and mixed.mesh is not None
        finite = 0
        for s in range(10):
            vs = v if s == 0 else v + rng.normal(0.0, 0.5 * s, model.nv)
            got = mesh_plane_step.plane_step_rows(scene, mixed, q, vs, DT)
            want = _general(monkeypatch, scene, mixed, q, vs)
            assert got is not None and want is not None
            assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
            held = mesh_plane_step.plane_step_rows(scene, mixed, q, vs, DT, fresh=False)   # (its buffers)
            assert held[0].tobytes() == want[0].tobytes() and held[1].tobytes() == want[1].tobytes()
            finite += int(np.isfinite(got[0][:, 0]).sum())
        assert finite >= 4
        bad = v.copy()
        bad[0] = np.nan
        for road in (lambda: mesh_plane_step.plane_step_rows(scene, mixed, q, bad, DT),
                     lambda: _general(monkeypatch, scene, mixed, q, bad)):
            with pytest.raises(ValueError, match="v: contains NaN"):
                road()


def test_a_batch_finds_each_states_rows_in_one_call_as_its_single_road(talos, monkeypatch):
    """A batch of talos on the floor, standing and on its head at random velocities: one native call
    (``found_batch``) runs the stages of the single step's call at each state, and each state's candidates
    and look-ahead are its own ``plane_step_rows``', byte for byte; a state whose velocity holds a NaN makes
    the call decline (False: the batch then takes each state's road, which names it), arguments of other
    shapes do not fit it (None)."""
    model = talos
    scene = _talos_scene(model)
    poses = [_pose(model, scene, p) for p in ("standing", "on its head")]
    rng = np.random.default_rng(7)
    Q = np.array([poses[b % 2][0] for b in range(6)])
    V = np.array([poses[b % 2][1] + rng.normal(0.0, 0.3 * b, model.nv) for b in range(6)])
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(model, Q, V, np.zeros(model.nv), scene, DT)          # (the builds, the plan)
        mixed = scene_data._mixed_plan(scene)[0]
        got = scene_batch._staged(scene, mixed, Q, V, DT)
        for b in range(len(Q)):
            want = mesh_plane_step.plane_step_rows(scene, mixed, Q[b], V[b], DT)
            assert got[0][b].tobytes() == want[0].tobytes() and got[1][b].tobytes() == want[1].tobytes()
        assert (np.isfinite(got[0][:, :, 0]).sum(1) > 0).all()             # (each state's rows near)
        found = mesh_plane_step.found_stages(scene, mixed, Q[0], V[0])[0]
        assert got[2].tobytes() == np.ascontiguousarray(got[0][..., 0]).tobytes()     # (the distances apart)
        run, c, within, d = native_function("found_batch"), np.empty_like(got[0]), *np.empty((2,) + got[1].shape)
        bad = V.copy()
        bad[3, 0] = np.nan
        assert run(found, Q, bad, c, within, d) is False
        assert run(found, Q, V[:5], c, within, d) is None and run(found, Q, V, c[:, :-1], within, d) is None
        with pytest.raises(ValueError, match="v: contains NaN"):
            scene_batch._each_state(scene, mixed, Q, bad, DT)


def test_a_batch_on_threads_finds_each_states_rows_as_on_one(talos, monkeypatch):
    """The batch's states in three runs (``PER_THREAD`` two states, three CPUs), the first on the caller's
    thread, the others on the batch pool's, each run on its thread's own buffers: each state's candidates and
    look-ahead are its own ``plane_step_rows``', byte for byte, as on one thread."""
    import threading
    model = talos
    scene = _talos_scene(model)
    q, v = _pose(model, scene, "standing")
    V = v + np.random.default_rng(8).normal(0.0, 0.4, (7, model.nv))
    Q = np.repeat(q[None], 7, 0)
    threads, stages = set(), mesh_plane_step.found_stages
    monkeypatch.setattr(scene_batch, "found_stages", lambda *a: threads.add(threading.get_ident()) or stages(*a))
    monkeypatch.setattr(scene_batch, "PER_THREAD", 2)
    monkeypatch.setattr(scene_batch.os, "cpu_count", lambda: 3)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(model, q, v, np.zeros(model.nv), scene, DT)          # (the builds, the plan)
        mixed = scene_data._mixed_plan(scene)[0]
        got = scene_batch._staged(scene, mixed, Q, V, DT)
        assert threading.get_ident() in threads and len(threads) >= 2
        for b in range(len(Q)):
            want = mesh_plane_step.plane_step_rows(scene, mixed, Q[b], V[b], DT)
            assert got[0][b].tobytes() == want[0].tobytes() and got[1][b].tobytes() == want[1].tobytes()


def test_other_plans_and_states_decline(talos):
    """A state not one float64 state's (a batch, float32, a bad ``dt``) declines: None (the general
    road answers); so does a base sliding at 1e307 m/s, whose bodies' velocities (each finite) sum
    past the largest float (the routine's check: the general road's look-ahead then)."""
    model = talos
    scene = _talos_scene(model)
    q, v = _pose(model, scene, "standing")
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(model, q, v, np.zeros(model.nv), scene, DT)
        mixed = scene_data._mixed_plan(scene)[0]
        assert mesh_plane_step.plane_step_rows(scene, mixed, q, v, DT) is not None
        huge = v.copy()
        huge[3] = 1e307                             # (the free joint's linear velocity: [omega, v])
        for args in ((q[None], v[None], DT), (q.astype(np.float32), v, DT), (q, v, 0.0), (q, v, np.inf),
                     (q, huge, DT)):
            assert mesh_plane_step.plane_step_rows(scene, mixed, *args) is None
    with sd.use_backend("numpy"):
        assert mesh_plane_step.plane_step_rows(scene, mixed, q, v, DT) is None


def test_talos_with_a_sole_on_a_box_has_the_general_roads_candidates(talos, monkeypatch):
    """talos standing with its left sole 2 mm into a world box on the floor (a mesh on a box beside the meshes
    on the floor and the kernel's pairs): at its pose and at five more velocities the candidates and their
    look-ahead are the general road's byte for byte, the mesh-box pair's rows among them; without the other
    pairs' rows (``rest``) the road declines, and there are no stages of the step's call."""
    model = talos
    q, v = _pose(model, _talos_scene(model), "standing")
    R, p = sd.geometry_placements(model, q, "collision")
    sole = [g.name for g in model.geometry("collision")].index(
        next(g.name for g in model.geometry("collision") if g.link == "leg_left_6_link"))
    box = sd.Shape("box", (0.3, 0.2, 0.02), placement=(np.eye(3), (p[sole][0], p[sole][1], -0.008)), name="step")
    scene = sd.Scene(model, world=[FLOOR, box], self_collision=False)
    rng = np.random.default_rng(4)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(model, q, v, np.zeros(model.nv), scene, DT)           # (the builds, the plan)
        mixed = scene_data._mixed_plan(scene)[0]
        assert len(mixed.boxes) and mixed.mesh is not None
        on_box = np.isin(mixed.pair, mixed.boxes)          # (each row's pair, in the rows' order)
        for s in range(6):
            vs = v if s == 0 else v + rng.normal(0.0, 0.2 * s, model.nv)
            rest = partial(scene_data._other_rows, scene, mixed, q, mesh=True)
            got = mesh_plane_step.plane_step_rows(scene, mixed, q, vs, DT, rest=rest)
            want = _general(monkeypatch, scene, mixed, q, vs)
            assert got is not None and want is not None
            assert got[0].tobytes() == want[0].tobytes() and got[1].tobytes() == want[1].tobytes()
            assert np.isfinite(got[0][on_box, 0]).sum() >= 3
        assert mesh_plane_step.plane_step_rows(scene, mixed, q, v, DT) is None
        assert mesh_plane_step.plane_stages(scene, mixed, q, v) is False     # (rows from Python: no stages)


def _counted(monkeypatch, module, name, count):
    """``module.name`` counting its calls in ``count[name]``."""
    f = getattr(module, name)

    def spied(*args, **kwargs):
        count[name] += 1
        return f(*args, **kwargs)
    monkeypatch.setattr(module, name, spied)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")      # (the Python road's, at 1e307)
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("pose", ["standing", "on its head"])
def test_a_talos_step_finds_its_mesh_rows_in_its_native_call(talos, pose, monkeypatch):
    """After the step that grows the layout, a step of talos on the floor finds its candidates in its native
    call (``plane_stages``: the bodies' velocities, poses, the routine, the collision kernel; no rows from
    Python, no general road) at steps of two sizes in turn (the routine reads each step's dt), and is the
    Python road's bit for bit; so is a rollout's; a ``v`` with a NaN is refused by name, and a base sliding
    at 1e307 m/s (the routine declines: the bodies' velocities sum past the largest float) is refused as on
    the Python road."""
    model = talos
    scene = _talos_scene(model)
    q, v = _pose(model, scene, pose)
    tau = np.zeros(model.nv)
    huge = v.copy()
    huge[3] = 1e307
    with sd.use_backend("native", deterministic=True):
        for _ in range(2):                                                    # (the builds, the layout, the plan)
            sd.contact_step(model, q, v, tau, scene, DT)
        count = {"plane_step_rows": 0, "_mixed_candidates": 0}
        _counted(monkeypatch, scene_fused, "plane_step_rows", count)
        _counted(monkeypatch, scene_data, "_mixed_candidates", count)
        none = {"plane_step_rows": 0, "_mixed_candidates": 0}
        for dt in (DT, 2 * DT, DT):
            count.update(none)
            got = sd.contact_step(model, q, v, tau, scene, dt)
            assert count == none
            assert _same(got, _python_road(monkeypatch, model, q, v, tau, scene, dt)) and len(got.impulses) >= 4
        count.update(none)
        r = sd.rollout(model, q, v, tau, scene, DT, 8)
        assert count == none
        ref = _python_road_rollout(monkeypatch, model, q, v, tau, _talos_scene(model), DT, 8)
        assert r.q.tobytes() == ref.q.tobytes() and r.v.tobytes() == ref.v.tobytes()
        bad = v.copy()
        bad[0] = np.nan
        with pytest.raises(ValueError, match="v: contains NaN"):
            sd.contact_step(model, q, bad, tau, scene, DT)
        for road in (sd.contact_step, partial(_python_road, monkeypatch)):
            with pytest.raises(sd.NonFiniteResultError, match="too large for double precision"):
                road(model, q, huge, tau, scene, DT)
        mixed = scene_data._mixed_plan(scene)[0]
        found = mesh_plane_step.plane_stages(scene, mixed, q, v)[0]
        assert len(found[2]) == 4 and found[0].shape == (len(mixed.pair), 11)     # velocities, poses, routine, kernel
