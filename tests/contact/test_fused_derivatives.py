"""One state's step in a scene and its derivatives in four native calls
(sparsedyn.contact.fused_derivatives): the same derivatives and step as the roads it leaves out, bit
for bit, in per-body slots (in order, with free slots), in data slots (a two-body contact), for a
sliding, a rolling and a sticking contact, at a second state of the same layout (the plan kept in
``scene.cache``), with options given; and the caller's road where the plan has no piece (a pair of
boxes) or gravity is given."""

import numpy as np
import pytest

import sparsedyn as sd
from test_friction_derivatives import DT, TOL, lifted
from test_slot_modes_native import K_TOLD, SCENES, TOLD
from sparsedyn.contact import friction_derivatives, fused_derivatives, scene_slotted


def _roads(model, scene, q, v, tau, opt, monkeypatch):
    """``(d, took, layout, python)``: the derivatives on the default road, whether the four calls made them,
    and those with the four calls refused (the step laid out by ``fused_slotted``, differentiated by
    ``_scene_result``) and with the native layout refused too (the Python road's ``one_state_slots``)."""
    took, real = [], fused_derivatives.fused_derivatives

    def counted(*args):
        got = real(*args)
        took.append(got is not None and got[3] is not None)
        return got
    monkeypatch.setattr(friction_derivatives, "fused_derivatives", counted)
    d = sd.contact_step_derivatives(model, q, v, tau, scene, DT, **opt)
    monkeypatch.setattr(friction_derivatives, "fused_derivatives", lambda *args: None)
    layout = sd.contact_step_derivatives(model, q, v, tau, scene, DT, **opt)
    monkeypatch.setattr(scene_slotted, "fused_slotted", lambda *args: None)
    python = sd.contact_step_derivatives(model, q, v, tau, scene, DT, **opt)
    monkeypatch.undo()
    return d, took, layout, python


def _equal(a, b, name):
    for k, (x, y) in enumerate(zip(a[:6], b[:6])):
        assert x.shape == y.shape == (a.step.v.shape[-1],) * 2 and np.array_equal(x, y), (name, k)
    assert np.array_equal(a.step.v, b.step.v) and np.array_equal(a.step.q, b.step.q), name
    assert np.array_equal(a.step.impulses, b.step.impulses) and list(a.step.modes) == list(b.step.modes), name


@pytest.mark.parametrize("name", list(SCENES))
def test_the_four_calls_are_the_other_roads(name, monkeypatch):
    model, scene, q, v, tau, opt = SCENES[name]()
    opt = dict(opt, tol=TOL)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step_derivatives(model, q, v, tau, scene, DT, **opt)          # (builds, grows the layout)
        for state in (q, lifted(q, 1e-6) if model.nq == 7 else q + 1e-6):        # a second state: the plan kept
            d, took, layout, python = _roads(model, scene, state, v, tau, opt, monkeypatch)
            fused = opt.get("gravity") is None and (name not in TOLD or name in K_TOLD)
            assert took == ([fused] if opt.get("gravity") is None else [False])
            _equal(d, layout, name)
            _equal(d, python, name)
    assert np.isfinite(np.concatenate([x.ravel() for x in d[:6]])).all()


def test_default_options_and_a_warm_start(monkeypatch):
    """No option (the defaults' settings kept per time step), a warm start, a tolerance given: the same
    as the other roads; at another time step, that step's (not the settings kept for the first)."""
    model, scene, q, v, tau, _ = SCENES["box on floor"]()
    with sd.use_backend("native", deterministic=True):
        first = sd.contact_step_derivatives(model, q, v, tau, scene, DT)
        for opt in ({}, {"warm_start": first.step.impulses}, {"tol": 1e-10}):
            d, took, layout, python = _roads(model, scene, q, v, tau, opt, monkeypatch)
            assert took == [True]
            _equal(d, layout, str(opt))
            _equal(d, python, str(opt))
        half = sd.contact_step_derivatives(model, q, v, tau, scene, DT / 2)      # (the settings of DT kept)
        monkeypatch.setattr(friction_derivatives, "fused_derivatives", lambda *args: None)
        ref = sd.contact_step_derivatives(model, q, v, tau, scene, DT / 2)
    _equal(half, ref, "dt / 2")
    assert half.step.iterations == ref.step.iterations


def test_plain_lists_take_the_four_calls(monkeypatch):
    """``q``, ``v``, ``tau`` as plain lists (Python floats, and ``list(q)``'s NumPy floats): the four calls
    make the derivatives, those of the same state as float64 arrays bit for bit."""
    model, scene, q, v, tau, _ = SCENES["box on floor"]()
    with sd.use_backend("native", deterministic=True):
        sd.contact_step_derivatives(model, q, v, tau, scene, DT)              # (builds, grows the layout)
        want = sd.contact_step_derivatives(model, q, v, tau, scene, DT)
        for args in ((q.tolist(), v.tolist(), tau.tolist()), (list(q), list(v), list(tau))):
            d, took, _, _ = _roads(model, scene, *args, {}, monkeypatch)
            assert took == [True]
            _equal(d, want, "lists")


def _turned_about(q, axis, angle):
    """The free body's configuration ``q`` turned by ``angle`` about the world ``axis`` through its origin."""
    from sparsedyn.model.spatial import quat_to_rot, rot_to_quat
    c, s = np.cos(angle / 2), np.sin(angle / 2)
    turn = quat_to_rot(np.concatenate([s * axis, [c]]))
    out = np.array(q, float)
    out[3:7] = rot_to_quat(turn @ quat_to_rot(out[3:7]))
    return out


@pytest.mark.parametrize("name", list(K_TOLD))
def test_a_sliding_points_shapes_are_each_states_on_the_fused_road(name, monkeypatch):
    """A layout whose sliding or turning point's ``K`` is told at each state: the body turned by 0.05 rad
    about an axis across the hit's normal, then moved along it back to the hit's distance (the same
    contacts in the same slots, a new ``K``), the fused road's derivatives are the Python road's at each
    state, bit for bit (the layout met again and replayed, its shapes this state's)."""
    model, scene, q, v, tau, opt = SCENES[name]()
    opt = dict(opt, tol=TOL)
    hit = sd.collide(scene, q)
    n, gap = hit.normals[0], hit.distances[0]
    turned = _turned_about(q, np.linalg.svd(n[None])[2][1], 0.05)
    for _ in range(3):                                     # (the distance along n: linear in the shift but for turning)
        turned[:3] += (gap - sd.collide(scene, turned).distances[0]) * sd.collide(scene, turned).normals[0]
    shapes, real, replays, lookup = [], fused_derivatives.slot_shapes, [], fused_derivatives.replayed

    def kept(*args):                                       # (the shapes the fused road put in its parameters)
        shapes.append(real(*args))
        return shapes[-1]

    def replayed(*args):
        replays.append(lookup(*args) is not None)
        return lookup(*args)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step_derivatives(model, q, v, tau, scene, DT, **opt)          # (builds, grows the layout)
        for state in (q, turned):
            fused_derivatives.slot_shapes, fused_derivatives.replayed = kept, replayed
            try:
                d, took, layout, python = _roads(model, scene, state, v, tau, opt, monkeypatch)
            finally:
                fused_derivatives.slot_shapes, fused_derivatives.replayed = real, lookup
            assert took == [True]
            _equal(d, layout, name)
            _equal(d, python, name)
    assert len(shapes) == 2 and np.abs(shapes[0][:, 6:] - shapes[1][:, 6:]).max() > 1e-3     # (K moved)
    assert replays[-1]                                     # (the turned state's layout met again: replayed)
