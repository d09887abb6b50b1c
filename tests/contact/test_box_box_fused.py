"""A step in a scene of the collision kernel's pairs and pairs of two boxes as one native call
(sparsedyn.contact.box_box_fused: the four calls that find the box pairs' rows run inside the step's
call): its q+, v+, impulses, modes, residuals and iterations are the Python road's bit for bit (the same
routines on the same numbers) for two cubes stacked on a table (robot boxes placed by the native
placements, data slots) and a cube on a table (per-body slots), at steps of two sizes in turn (the
look-ahead follows each step's dt); a NaN velocity is named as on the Python road."""

import numpy as np
import pytest

import sparsedyn as sd
import sparsedyn.contact.friction as friction
import sparsedyn.contact.scene_data as scene_data
import sparsedyn.contact.scene_batch as scene_batch
import sparsedyn.contact.scene_fused as scene_fused
from test_box_box_native import _stack, _stack_by_a_post
from test_box_box_road import _poses
from test_box_box_step import _turned_stack
from test_scene_fused import _box_on_box

DT = 1e-3


def _python_road(monkeypatch, *args):
    """The step on the Python road (the fused call switched off)."""
    with monkeypatch.context() as m:
        m.setattr(friction, "fused_step", lambda *a, **k: None)
        return sd.contact_step(*args)


def _same(a, b):
    """Whether two steps hold the same numbers, bit for bit, and the same modes."""
    return all(np.asarray(x).tobytes() == np.asarray(y).tobytes() for x, y in zip(a, b)) and \
        list(a.modes) == list(b.modes)


def _spied(monkeypatch):
    """Counts of the roads a step in a scene may take besides the call's stages (the mixed call binds
    them once per thread, ``found_stages``): ``rows`` the steps whose rows were found from Python (the
    four calls), ``general`` the steps whose candidates came from the general road, ``python`` the
    steps on contact_step's Python road; ``stages`` the times the mixed call asked for its stages."""
    count = {"stages": 0, "rows": 0, "general": 0, "python": 0}

    def spy(name, module, f):
        def spied(*args, **kwargs):
            count[name] += 1
            return f(*args, **kwargs)
        monkeypatch.setattr(module, f.__name__, spied)
    spy("stages", scene_fused, scene_fused.found_stages)
    spy("rows", scene_fused, scene_fused.box_box_step_rows)
    spy("general", scene_data, scene_data._mixed_candidates)
    spy("python", friction, friction.step_in_scene)
    return count


def _one_call(count, step):
    """Whether ``step()`` (a fused step) ran as one call whose stages found the rows: no rows from
    Python, no general candidates, no Python road (the mixed call's only other roads)."""
    seen = dict(count)
    got = step()
    ran = {k: count[k] - seen[k] for k in count}
    return got, ran["rows"] == ran["general"] == ran["python"] == 0


def _stack_states(make):
    """(scene, [(q, v, tau)]): the stacked cubes at poses of their own, moving a little."""
    rng = np.random.default_rng(5)
    return make(), [(q, rng.normal(scale=0.05, size=12), np.zeros(12)) for q in _poses(rng, 6)]


def _table_states():
    """(scene, [(q, v, tau)]): the cube on a table, sliding and turning, then at rest."""
    scene, q, v, tau = _box_on_box()
    return scene, [(q, v, tau), (q, np.zeros(6), tau)]


@pytest.mark.parametrize("states", [lambda: _stack_states(_stack), lambda: _stack_states(_turned_stack),
                                    _table_states])
def test_a_step_with_box_pairs_is_one_call_and_the_python_roads(states, monkeypatch):
    scene, runs = states()
    model = scene.model
    with sd.use_backend("native", deterministic=True):
        for q, v, tau in runs:                          # the layouts grown, the kernels built
            sd.contact_step(model, q, v, tau, scene, DT)
        count = _spied(monkeypatch)
        for dt in (DT, 2 * DT, DT):                     # (a new dt: the routine's look-ahead follows it)
            for q, v, tau in runs:
                got, one = _one_call(count, lambda: sd.contact_step(model, q, v, tau, scene, dt))
                want = _python_road(monkeypatch, model, q, v, tau, scene, dt)
                # every step one call whose stages found the rows (none found from Python)
                assert one and len(want.impulses) >= 4 and _same(got, want)
    assert count["stages"] >= 1


def test_a_batch_finds_each_states_box_rows_in_one_call_as_its_single_step(monkeypatch):
    """A batch of the stacked cubes' six states (one native call, ``found_batch``, runs the stages of the
    single step's call at each state): each state's candidates and look-ahead are its own
    ``box_box_step_rows``', byte for byte, and the batch step takes that call once a step, its states given as
    arrays or as plain lists (the same step, bit for bit)."""
    scene, runs = _stack_states(_turned_stack)
    model = scene.model
    Q, V = (np.array([r[k] for r in runs]) for k in (0, 1))
    calls = []
    native_function = scene_batch.native_function
    monkeypatch.setattr(scene_batch, "native_function", lambda name: calls.append(name) or native_function(name))
    with sd.use_backend("native", deterministic=True):
        step = sd.contact_step(model, Q, V, np.zeros(12), scene, DT)        # (the builds, the plan)
        assert calls == ["found_batch"]
        listed = sd.contact_step(model, Q.tolist(), V.tolist(), [0.0] * 12, scene, DT)      # (plain lists)
        assert calls == ["found_batch"] * 2
        assert np.array_equal(listed.q, step.q) and np.array_equal(listed.v, step.v)
        assert all(np.array_equal(a, b) for a, b in zip(listed.impulses, step.impulses))
        mixed = scene_data._mixed_plan(scene)[0]
        got = scene_batch._staged(scene, mixed, Q, V, DT)
        for b in range(len(Q)):
            want = scene_fused.box_box_step_rows(scene, mixed, scene_fused.box_box_poses, Q[b], V[b], DT)
            assert got[0][b].tobytes() == want[0].tobytes() and got[1][b].tobytes() == want[1].tobytes()
    assert sum(np.isfinite(got[0][:, :, 0]).sum(1) > 0) >= 4            # (the cubes touch)


def test_a_nan_velocity_is_named_as_on_the_python_road(monkeypatch):
    scene, runs = _stack_states(_stack)
    q, v, tau = runs[0]
    model = scene.model
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(model, q, v, tau, scene, DT)
        sd.contact_step(model, q, v, tau, scene, DT)
        bad = v.copy()
        bad[4] = np.nan
        with pytest.raises(ValueError, match="v: contains NaN"):
            sd.contact_step(model, q, bad, tau, scene, DT)
        with pytest.raises(ValueError, match="v: contains NaN"):
            _python_road(monkeypatch, model, q, bad, tau, scene, DT)
        count = _spied(monkeypatch)
        got, one = _one_call(count, lambda: sd.contact_step(model, q, v, tau, scene, DT))
        assert one and _same(got, _python_road(monkeypatch, model, q, v, tau, scene, DT))


def test_a_step_with_pairs_for_coal_beside_box_pairs_is_the_python_roads(monkeypatch):
    """The stacked cubes by a world post (a box and a cylinder: coal's closest pair): the call's stages
    cannot hold coal's queries, so each step's rows are found from Python (the four calls, then the
    post's pairs within their look-ahead) and handed to the step's call: the Python road's bit for bit."""
    scene, runs = _stack_states(_stack_by_a_post)
    model = scene.model
    with sd.use_backend("native", deterministic=True):
        for q, v, tau in runs:
            sd.contact_step(model, q, v, tau, scene, DT)
        count, touched = _spied(monkeypatch), 0
        for q, v, tau in runs:
            seen = dict(count)
            got = sd.contact_step(model, q, v, tau, scene, DT)
            assert count["rows"] - seen["rows"] == 1 and count["general"] == seen["general"]
            assert _same(got, _python_road(monkeypatch, model, q, v, tau, scene, DT))
            touched += any("post" in pair for pair in sd.collide(scene, q).pairs)
    assert touched >= 2                                 # (the lower cube against the post)


def test_a_step_with_pairs_on_a_height_field_is_the_python_roads(monkeypatch):
    """``test_box_box_road.field_scene`` (no pair of two boxes; coal's pairs and a height field's): each
    step's rows come from the bound-once calls (the routine's look-ahead alone), then the step's native
    call: the Python road's bit for bit, some states touching."""
    from test_box_box_road import field_scene
    scene, poses = field_scene()
    model = scene.model
    rng = np.random.default_rng(3)
    runs = [(q, rng.normal(scale=0.3, size=12), np.zeros(12)) for q in poses[:8]]
    with sd.use_backend("native", deterministic=True):
        for q, v, tau in runs:
            sd.contact_step(model, q, v, tau, scene, DT)
        touched = 0
        for q, v, tau in runs:
            got = sd.contact_step(model, q, v, tau, scene, DT)
            assert _same(got, _python_road(monkeypatch, model, q, v, tau, scene, DT))
            touched += len(got.impulses) > 0
    assert touched >= 3
