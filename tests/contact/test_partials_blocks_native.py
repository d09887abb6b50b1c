"""The pieces of a step's derivatives and their six blocks in one native call
(sparsedyn.contact.partials_blocks_native): the compiled pieces' kernel (scene_step_partials' one-state
kernel) followed by the blocks' routine (derivative_blocks_native), bit for bit, on the pressed box
(stick, position correction, a slot open), the sliding box (the general solve) and the hand on the
torso (a two-body contact); an input the fast path declines (a NaN) goes to those two calls.  And the
slots' routines folded into that call (folded_call), bit for bit the calls one after the other."""

import numpy as np

import sparsedyn as sd
from test_friction_derivatives import DT, TOL
from test_scene_derivatives import _box_on_table, _box_pressed_into_table, _hand_scene
from test_state_derivatives_native import OPEN
from sparsedyn.contact.derivative_blocks_native import blocks_call
from sparsedyn.contact.derivative_replay import pieces_kernel
from sparsedyn.contact.partials_blocks_native import folded_call, partials_blocks_call
from sparsedyn.contact.scene_derivatives import scene_step_partials
from sparsedyn.contact.scene_slotted import slotted_scene_step
from sparsedyn.contact.slot_modes_native import slot_modes_call
from sparsedyn.kernels import native_calls, native_function


def _case(case, open_slots=()):
    """``(model, pieces kernel, inputs of the one call, shapes)`` of the step of ``case``, the slots
    ``open_slots`` declared open; the pieces' kernel built (native) for the step's slots."""
    model, scene, q, v, tau, opt = case()
    with sd.use_backend("numpy"):
        step, _, s = slotted_scene_step(model, model, q, v, tau, scene, DT, dict(opt, tol=TOL))
    weights = np.ascontiguousarray(s.weights[0])
    for i in open_slots:
        weights[i, :3] = OPEN
    g = np.asarray(opt.get("gravity", model.gravity), float)
    args = (q, v, step.v, s.impulses[0], s.correction[0], weights, s.data[0])
    with sd.use_backend("native", deterministic=True):
        scene_step_partials(model, *args, s.shapes[0], g, [DT], s.frames, s.kinds)       # (builds the kernel)
    assert native_function("Kernel") is not None
    pieces = pieces_kernel(native_calls(model)[scene_step_partials.__name__], tuple(s.frames), s.kinds)
    assert isinstance(getattr(pieces, "entry", None), int)
    return model, pieces, tuple(np.ascontiguousarray(x, float) for x in args) + (g,), np.asarray(s.shapes[0], float)


def test_one_call_is_the_two_calls():
    for case, open_slots in ((_box_pressed_into_table, (1,)), (_box_on_table, ()), (_hand_scene, ())):
        model, pieces, ins, shapes = _case(case, open_slots)
        nv, ns, dt1 = model.nv, len(shapes), np.array([DT])
        blocks, bpar = blocks_call(nv, ns, DT)
        call, par = partials_blocks_call(pieces, shapes, model.nq, nv, ns, DT, blocks, bpar, dt1)
        p = pieces(*ins[:7], shapes, ins[7], dt1)
        two = blocks(p[0], p[1], ins[5], ins[4], bpar)
        one = call(*ins, par)
        assert len(one) == 7 and one[6].tolist() == two[6].tolist() == [0.0]
        for a, b in zip(one[:6], two[:6]):
            assert a.shape == (nv, nv) and a.flags.c_contiguous and np.array_equal(a, b)
        # a NaN velocity: declined by the fast path, the two calls' answer (here: their error or result)
        bad = list(ins)
        bad[1] = ins[1].copy()
        bad[1][0] = np.nan
        try:
            p = pieces(*bad[:7], shapes, bad[7], dt1)
            expected = blocks(p[0], p[1], bad[5], bad[4], bpar)
        except Exception as e:                               # noqa: BLE001 (the two calls' own error)
            expected = type(e)
        try:
            got = call(*bad, par)
        except Exception as e:                               # noqa: BLE001
            got = type(e)
        if isinstance(expected, type):
            assert got is expected
        else:
            assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(got, expected))


def _kernel_rows(lam, corr, ns):
    """The step kernel's rows of the slots' impulses ``lam`` (ns, 3) and corrections ``corr`` (ns,) in the
    reverse order (slot ``j`` reads row ``ns - 1 - j``, correction entry ``j``), one row sliding (a
    tangential velocity above the routine's threshold, the others at rest): ``(lam, u, report, corr, at)``."""
    order = np.arange(ns)[::-1]
    u = np.zeros((ns, 3))
    u[0, 0] = 1.0
    report = np.array([0.0, 0, 0, 0, 1, 1e-12, 1e-12])            # the impulse and velocity scales (5, 6)
    at = np.stack([order, np.arange(ns)], -1).astype(float)
    return np.ascontiguousarray(lam[order]), u, report, np.ascontiguousarray(corr), at


def test_the_slots_routines_folded_in_are_the_calls_one_after_the_other():
    """The slots' modes (slot_modes_native) or the gathering of their data and modes (derivative_replay)
    run in the call of the pieces and blocks (folded_call) give what the routine's own call followed by
    the pieces' and blocks' call gives, bit for bit (the same routines on the same values); an input the
    fast path declines (a NaN velocity) goes to the fallback, the calls one after the other."""
    for case in (_box_pressed_into_table, _hand_scene):
        model, pieces, ins, shapes = _case(case)
        q, v, vn, lam, corr, _, data, g = ins
        nq, nv, ns, dt1 = model.nq, model.nv, len(shapes), np.array([DT])
        blocks, bpar = blocks_call(nv, ns, DT)
        call, par = partials_blocks_call(pieces, shapes, nq, nv, ns, DT, blocks, bpar, dt1)
        rows = _kernel_rows(lam, corr, ns)
        spar = np.array([TOL, ns])
        w, lam_s, corr_s = (x[0] for x in slot_modes_call(ns, ns, ns, 7)(*rows, data, spar)[:3])
        assert w[-1, :3].tolist() == [0, 0, 1] and np.array_equal(lam_s, lam)       # the sliding row: slot ns - 1
        expected = call(q, v, vn, lam_s, corr_s, w, data, g, par)
        fell = []
        shapes_in = ((nq,), (nv,), (nv,), (ns, 3), (ns, 3), (7,), (ns,), (ns, 2))
        f, fpar = folded_call(par, spar, shapes_in + ((ns, 8), (3,)), False, lambda *a: fell.append(a))
        got = f(q, v, vn, *rows, data, g, fpar)
        assert not fell and all(np.array_equal(a, b) for a, b in zip(got, expected))
        # the gathering routine: the slots' data from taken entries (each entry 1 x + 0: the same value)
        n = 8 * ns
        gather = np.concatenate([np.zeros(n), np.arange(n), np.arange(n), np.ones(n), np.zeros(n)])
        f, fpar = folded_call(par, [TOL, ns, n, 0.0], shapes_in + ((n,), (len(gather),), (3,)), True,
                              lambda *a: fell.append(a))
        got = f(q, v, vn, *rows, data.reshape(-1), gather, g, fpar)
        assert not fell and all(np.array_equal(a, b) for a, b in zip(got, expected))
        bad = v.copy()
        bad[0] = np.nan
        assert f(q, bad, vn, *rows, data.reshape(-1), gather, g, fpar) is None and len(fell) == 1
        assert np.isnan(fell[0][1][0]) and fell[0][-1] is fpar
