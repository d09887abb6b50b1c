"""A fused step's layout met again (sparsedyn.contact.derivative_replay): the derivatives of a state
whose step returns the candidates, slots and kernel rows of one met before take the plan, the pieces'
callable and the slots' data kept for them, and equal those the first road makes (the step's
FoundContacts, slots and plan lookup; the memo cleared) bit for bit, in per-body slots (in order, with
free slots) and in the scene's data slots (a two-body contact), where a sliding point's or a turning
normal's ``K`` is told at each state too; they equal central differences of the step and the NumPy road;
a layout not met before, and another road (a new time step), take the first road.  The layout last
replayed, where its derivatives are one kernel on the step's call's arrays, is differentiated in the
step's call itself, bit for bit as the lookup's road."""

import itertools

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err
from test_friction_derivatives import DT, FIELDS, NATURAL, TOL, check_against_differences, lifted
from test_fused_derivatives import _equal
from test_scene_derivatives import NOISE, _bound, _touching
from test_slot_modes_native import SCENES
from sparsedyn.contact import derivative_replay, friction, fused_derivatives, scene_fused, slot_modes_native
from test_scene_fused import _box

#: Scenes on the fused road: per-body slots in order, a two-body contact (the scene's data slots), a
#: layout with free slots, slots whose ``K`` is told at each state (a sliding point, a turning normal, both),
#: a sphere on a cylinder's cap (its pair's own kind, told from the hits' rows: a world cylinder, a robot one).
FUSED = ("box on floor", "hand on torso, gravity", "tilted box, free slots", "egg on floor", "ball on egg",
         "ball on egg, egg on floor", "ball on post", "wheel's cap on globe")


def _counting(monkeypatch, in_the_call=False):
    """A list that gets, per call of fused_derivatives' replay lookup, whether it answered; the layout last
    replayed not handed to the step's call (:func:`~sparsedyn.contact.derivative_replay.in_the_call`: every
    layout met again asks the lookup) unless ``in_the_call``, and then ``"in the call"`` appended where it
    was handed."""
    hits, real, real_call = [], derivative_replay.replayed, derivative_replay.in_the_call

    def counted(*args):
        got = real(*args)
        hits.append(got is not None)
        return got

    def handed(*args):
        got = real_call(*args) if in_the_call else None
        if got is not None:
            hits.append("in the call")
        return got
    monkeypatch.setattr(fused_derivatives, "replayed", counted)
    monkeypatch.setattr(fused_derivatives, "in_the_call", handed)
    return hits


def _moved(model, q, dz):
    return lifted(q, dz) if model.nq == 7 else q + dz


@pytest.mark.parametrize("name", FUSED)
def test_a_layout_met_again_is_replayed_bit_for_bit(name, monkeypatch):
    model, scene, q, v, tau, opt = SCENES[name]()
    opt = dict(opt, tol=TOL)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step_derivatives(model, q, v, tau, scene, DT, **opt)          # (builds, grows the layout)
        sd.contact_step_derivatives(model, q, v, tau, scene, DT, **opt)          # the layout kept
        hits = _counting(monkeypatch)
        again = _moved(model, q, 1e-7)                                             # the same contacts
        d = sd.contact_step_derivatives(model, again, v, tau, scene, DT, **opt)
        assert hits == [True]
        scene.cache.pop(derivative_replay._KEY)                                  # the first road's
        first = sd.contact_step_derivatives(model, again, v, tau, scene, DT, **opt)
        assert hits == [True, False]
        assert scene.cache[derivative_replay._KEY][2]                             # kept again by that road
    _equal(d, first, name)


#: The scenes whose replayed derivatives are one kernel on the step's call's own arrays (per-body slots, no
#: shape told at the hit or at each state): the layout last replayed goes into the step's call.
IN_THE_CALL = ("box on floor", "tilted box, free slots")


@pytest.mark.parametrize("name", FUSED)
def test_the_layout_last_replayed_is_differentiated_in_the_steps_call_bit_for_bit(name, monkeypatch):
    """A layout met again whose replayed callable is one kernel on the call's arrays is handed to the step's
    call, which returns its blocks beside the step (the lookup not asked), equal bit for bit to the lookup's
    road, the state given as plain lists too; any other layout is never handed over.  A state of other
    contacts (lifted clear) then takes the lookup's road however the layout handed over stands."""
    model, scene, q, v, tau, opt = SCENES[name]()
    opt = dict(opt, tol=TOL)
    again = _moved(model, q, 1e-7)                                                 # the same contacts
    with sd.use_backend("native", deterministic=True):
        for _ in range(3):
            sd.contact_step_derivatives(model, q, v, tau, scene, DT, **opt)       # (builds; kept; replayed)
        hits = _counting(monkeypatch, in_the_call=True)
        d = sd.contact_step_derivatives(model, again, v, tau, scene, DT, **opt)
        assert hits == (["in the call"] if name in IN_THE_CALL else [True]), hits
        hits.clear()
        listed = sd.contact_step_derivatives(model, again.tolist(), v.tolist(), tuple(tau), scene, DT, **opt)
        assert hits == (["in the call"] if name in IN_THE_CALL else [True]), hits     # (lists: the same road)
        hits.clear()
        monkeypatch.setattr(fused_derivatives, "in_the_call", lambda *args: None)
        looked_up = sd.contact_step_derivatives(model, again, v, tau, scene, DT, **opt)
        assert hits == [True]
    _equal(d, looked_up, name)
    _equal(listed, looked_up, name)
    if name == "box on floor":
        up = lifted(q, 0.5)
        with sd.use_backend("native", deterministic=True):
            hits = _counting(monkeypatch, in_the_call=True)
            clear = sd.contact_step_derivatives(model, up, v, tau, scene, DT, **opt)
            assert hits == ["in the call", False] and len(clear.step.impulses) == 0
        with sd.use_backend("numpy"):
            ref = sd.contact_step_derivatives(model, up, v, tau, scene, DT, **opt)
        bound = _bound(model, up, v, tau, scene, opt)
        for f in FIELDS:
            assert rel_err(getattr(clear, f) / NATURAL[f], getattr(ref, f) / NATURAL[f]) <= bound, (f, bound)


def test_the_native_call_runs_the_blocks_of_the_layout_it_is_handed():
    """Handed a layout and its derivatives' blocks kernel (``derive``, beside ``chain`` True), the native call
    returns the step's arrays and index bit for bit as without it and, where the step's layout is that one,
    the kernel's answer on the step's arrays, bit for bit the kernel's own call on them; a layout of other
    contacts (one slot shifted) gets the layout's answer as without ``derive``; a ``derive`` not of seven
    entries, or without ``chain`` True, is a TypeError naming it."""
    scene, q, v, tau = _box()
    with sd.use_backend("native", deterministic=True):
        for _ in range(3):                                 # (builds; the layout kept; replayed, handed over)
            sd.contact_step_derivatives(scene.model, q, v, tau, scene, DT)
        plan = scene_fused.trajectory_plan(scene, scene.model, DT)
        settings = friction._step_settings("contact_step", DT, 1e-8, None, "admm", 0.005)
        derive = derivative_replay.in_the_call(scene, plan[1], 1e-8)
        assert derive is not None
        got = plan[0](plan[1], q, v, tau, settings, None, None, True)
        both = plan[0](plan[1], q, v, tau, settings, None, None, True, derive)
        shifted = (derive[0], derive[1] + 1) + derive[2:]
        other = plan[0](plan[1], q, v, tau, settings, None, None, True, shifted)
        blocks, at, gravity, par = derive[3:]
        out = got[0]
        own = blocks(q, v, out[1], out[2], out[3], out[4], out[5], at, got[5], gravity, par)
        for bad, chain in ((derive[:6], True), (derive, None)):
            with pytest.raises(TypeError, match="derive"):
                plan[0](plan[1], q, v, tau, settings, None, None, chain, bad)
    assert len(both) == 3 and len(other) == 6 and len(own) == 7
    assert all(x.tobytes() == y.tobytes() for x, y in zip(both[0], got[0]))
    assert all(x.tobytes() == y.tobytes() for x, y in zip(other[0], got[0]))
    assert all(x.tobytes() == y.tobytes() for x, y in zip(both[2], own))


@pytest.mark.parametrize("name", FUSED)
def test_replayed_derivatives_equal_central_differences_and_the_numpy_road(name, monkeypatch):
    model, scene, q, v, tau, opt = SCENES[name]()
    with sd.use_backend("native", deterministic=True):
        for _ in range(2):
            sd.contact_step_derivatives(model, q, v, tau, scene, DT, tol=TOL, **opt)
        hits = _counting(monkeypatch)
        d = check_against_differences(model, q, v, tau, scene, 1e-6, extra_noise=NOISE.get(name), **opt)
        assert hits == [True]
    with sd.use_backend("numpy"):
        ref = sd.contact_step_derivatives(model, q, v, tau, scene, DT, tol=TOL, **opt)
    bound = _bound(model, q, v, tau, scene, opt)
    for f in FIELDS:
        assert rel_err(getattr(d, f) / NATURAL[f], getattr(ref, f) / NATURAL[f]) <= bound, (f, bound)


def test_another_layout_or_time_step_takes_the_first_road(monkeypatch):
    """A state whose contacts are others (the box lifted clear of the floor: no contact kept) is not
    answered from the memo; a new time step (another road of the step) starts a memo of its own."""
    model, scene, q, v, tau, opt = SCENES["box on floor"]()
    with sd.use_backend("native", deterministic=True):
        for _ in range(2):
            sd.contact_step_derivatives(model, q, v, tau, scene, DT, tol=TOL)
        road = scene.cache[derivative_replay._KEY][0]
        hits = _counting(monkeypatch)
        half = sd.contact_step_derivatives(model, q, v, tau, scene, DT / 2, tol=TOL)
        assert hits[-1:] == [False] and scene.cache[derivative_replay._KEY][0] is not road
        scene.cache.pop(derivative_replay._KEY)                                  # the first road's
        ref = sd.contact_step_derivatives(model, q, v, tau, scene, DT / 2, tol=TOL)
        assert hits[-1:] == [False]
        hits.clear()
        tilted = SCENES["tilted box, free slots"]()[2]                             # two corners: other slots
        sd.contact_step_derivatives(model, tilted, v, tau, scene, DT, tol=TOL)
        assert hits == [False]
    _equal(half, ref, "dt / 2")


def test_the_gathering_routine_on_hand_made_rows():
    """The slots' data gathered from candidate rows by hand: two contacts' seven entries each put in
    slots 2 and 0 of three (slot 1 free: the base's row), plain (``data[put] = c[take]``) and turned (one
    entry of ``A`` per row: ``a c[take] + b``, a product and a sum each rounded, NumPy's); the slots'
    modes those of the plan's routine (slot_modes_native) on that data; a NaN in a candidate row the
    step does not read (an input the fast path declines: the ctypes fallback) changes nothing."""
    model = SCENES["box on floor"]()[0]
    with sd.use_backend("native", deterministic=True):                       # (the compiler's extension loaded)
        sd.rnea(model, model.neutral(), np.zeros(model.nv), np.zeros(model.nv))
    rng = np.random.default_rng(3)
    tol, ns, K = 1e-3, 3, 4
    lam = np.array([[0.1, 0.0, 1.0], [0.3, 0.2, 1.0]])
    u = np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 0.0]])                         # slide, stick
    report, corr = np.array([0, 0, 0, 4, 1, 2.0, 0.5, 0.0]), np.array([0.5, 0.25])
    at = np.array([[1, 1], [-1, -1], [0, 0]], float)
    base = np.arange(24.0).reshape(ns, 8)
    put = np.concatenate([8 * 2 + np.arange(1, 8), np.arange(1, 8)])
    take = np.concatenate([11 * 3 + np.arange(1, 8), 11 * 1 + np.arange(1, 8)])
    c = rng.standard_normal((K, 11))
    unread = c.copy()
    unread[2, 5] = np.nan                                                     # a row the slots do not read
    scale, offset = rng.standard_normal(14), rng.standard_normal(14)
    for (A, b), c in itertools.product(((None, None), (scale, offset)), (c, unread)):
        make = (base, put, take, A, b)
        call = derivative_replay._gather_call(lam.shape, u.shape, report.shape, corr.shape, at.shape, c.shape,
                                              8 * ns + 4 * 14)
        gather = np.concatenate([base.ravel(), put, take, np.ones(14) if A is None else A,
                                 np.zeros(14) if A is None else b])
        w, lam_s, corr_s, data = call(lam, u, report, corr, at, c, gather, np.array([tol, ns, 14, float(A is None)]))
        expected = base.copy()
        expected.put(put, c.take(take) if A is None else c.take(take) * A + b)
        assert np.array_equal(data, expected) and np.array_equal(data, derivative_replay._data(make, c))
        assert np.array_equal(data[1], base[1])                               # the free slot's row
        modes = slot_modes_native.slot_modes_call(2, 2, ns, 8)(lam, u, report, corr, at, data, np.array([tol, ns]))
        assert np.array_equal(w, modes[0][0]) and np.array_equal(lam_s, modes[1][0])
        assert np.array_equal(corr_s, modes[2][0])
        assert w[:, :3].tolist() == [[0, 1, 0], [1, 0, 0], [0, 0, 1]]       # stick, free (open), slide
        assert corr_s.tolist() == [0.25, 0.0, 0.5] and np.array_equal(lam_s[[0, 2]], lam[[1, 0]])


def _ball_over(x, table):
    """The ball of test_scene_derivatives' cases over ``table`` at ``x`` (its body's x), 10 um from it along
    the hit's normal, rolling towards -x."""
    model, scene, q, v, tau, opt = _touching("sphere", (0.05,), table, np.eye(3), offset=(x, 0.0, 0.0))
    return model, scene, q, np.array([0.0, 0.0, 0.0, -0.3, 0.0, -0.05]), tau, opt


def test_a_layout_met_again_where_a_ball_touches_an_edge_takes_the_edges_road(monkeypatch):
    """A ball on a box's face is its pair's own kind (a point on a face: the fused road, kept for its layout);
    the same layout (one contact of the one pair in the same slot) where the ball touches the box's edge
    is not: the kept plan answers no derivatives there, and those made equal the NumPy road's (a point
    against a line: its normal turns about the edge), to the rounding bound."""
    table = sd.Shape("box", (0.4, 0.4, 0.2), placement=(np.eye(3), [0, 0, 0.1]), name="table")
    model, scene, q, v, tau, opt = _ball_over(0.0, table)
    _, _, edge, _, _, _ = _ball_over(0.2, table)                 # the ball's centre past the edge
    hits = sd.collide(scene, edge)
    assert len(hits.pairs) == 1 and 0.1 < hits.normals[0, 0] < 0.9             # on the edge, not a face
    with sd.use_backend("native", deterministic=True):
        for _ in range(2):
            sd.contact_step_derivatives(model, q, v, tau, scene, DT, tol=TOL)
        calls = _counting(monkeypatch)
        sd.contact_step_derivatives(model, lifted(q, 1e-7), v, tau, scene, DT, tol=TOL)
        d = sd.contact_step_derivatives(model, edge, v, tau, scene, DT, tol=TOL)
        assert calls == [True, True]                             # the face's plan met, and asked at the edge
    with sd.use_backend("numpy"):
        ref = sd.contact_step_derivatives(model, edge, v, tau, scene, DT, tol=TOL)
    bound = _bound(model, edge, v, tau, scene, opt)
    for f in FIELDS:
        assert rel_err(getattr(d, f) / NATURAL[f], getattr(ref, f) / NATURAL[f]) <= bound, (f, bound)
