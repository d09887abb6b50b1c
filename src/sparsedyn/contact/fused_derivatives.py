"""One state's step in a scene and its derivatives on the native road in two native calls:
:func:`fused_derivatives`.

:func:`~sparsedyn.contact_step_derivatives` of one state in a :class:`~sparsedyn.Scene` on the fused
road (:func:`~sparsedyn.contact.scene_fused.fused_step`) runs the step, then in one call lays its
contacts out in the derivatives' slots with their modes (the routine of
:mod:`~sparsedyn.contact.slot_modes_native`, or the replay's gathering routine), runs the pieces' kernel
(:func:`~sparsedyn.scene_step_partials`) and the routine that writes the six blocks
(:mod:`~sparsedyn.contact.derivative_blocks_native`) (:mod:`~sparsedyn.contact.partials_blocks_native`;
separate calls where the pieces' kernel is not a compiled one-state kernel).  What depends on the layout
alone (the routines' calls and constants, the slots' shapes and kinds, the pieces' native callable) is one plan kept in
``scene.cache`` per layout (a sliding or turning point's ``K``, told at each state, put in the calls'
parameters, also where the layout is replayed), so that a step's derivatives are the two calls and no
:class:`~sparsedyn.contact.scene_slotted.Slotted`, mode name or option dict between them: the same
routines on the same values as :func:`~sparsedyn.contact.scene_slotted.slotted_scene_step` and
:func:`~sparsedyn.contact.friction_derivatives._scene_result`, so the same results bit for bit (the
slots' routine through an entry that writes only what the derivatives read, the slots' data read where
the step wrote them).  A step whose call returns the candidates, slots and kernel rows of a step
before it (a trajectory's steps keep their contacts) skips the FoundContacts, the slots and the plan's
lookup: :mod:`~sparsedyn.contact.derivative_replay` keeps them per such layout (the data slots' per-body
data gathered in the slots' call); the layout last so replayed, where its derivatives are one kernel on the
call's arrays, goes into the step's call, which writes them too (one native call).
"""

from __future__ import annotations

import ctypes

import numpy as np

from .. import _checks
from ..kernels import c_routine, native_calls, native_function
from .data_slots import runs_per_body
from .derivative_blocks_native import scene_blocks_call
from .friction import StepArrays, _one_step, _options, _road_of, _step_settings, contact_step
from .scene_derivatives import scene_step_partials
from .derivative_replay import _data, in_the_call, keep_in_the_call, pieces_kernel, remember, replayed
from .scene_fused import _found, fused_step
from .lazy_modes import mode_codes
from .mesh_plane_loop import _at
from .partials_blocks_native import folded_call, partials_blocks_call
from .scene_geometry import kinds_fixed, own_at_witnesses, slot_shapes, told_at_hit, witnesses_tell
from .scene_slotted import Slotted, one_state_slots
from .slot_modes_native import SOURCE as SLOT_MODES
from .slot_modes_native import _plan, fused_slotted

__all__ = ["fused_derivatives", "SOURCE"]

#: :mod:`~sparsedyn.contact.slot_modes_native`'s routine and ``sd_derivative_slots(lam, u, report, corr,
#: at, data, par, weights, lam_s, corr_s)``: the routine's outputs that the derivatives read (the slots'
#: mode weights (ns, 4), impulses (ns, 3) and correction impulses (ns,)), its others on the stack.
SOURCE = SLOT_MODES + r"""
SD_EXPORT void sd_derivative_slots(const double *lam, const double *u, const double *rep, const double *corr,
                                   const double *at, const double *data, const double *par, double *weights,
                                   double *lam_s, double *corr_s)
{
  long long ns = (long long)par[1], n = ns > 0 ? ns : 1;
  double codes[n], data_s[8 * n], mu[n];
  sd_slot_modes(lam, u, rep, corr, at, data, par, weights, lam_s, corr_s, codes, data_s, mu);
}
"""

_PARTIALS, _F64, _NONE = scene_step_partials.__name__, np.dtype(float), {}
_KEY, _LAST, _BOTH = "fused derivatives", "fused derivatives last", "fused derivatives' pieces and blocks"
#: contact_step's defaults of ``tol``, ``max_iterations``, ``solver``, ``margin`` (a call with no option).
_DEFAULTS = tuple(contact_step.__kwdefaults__[k] for k in ("tol", "max_iterations", "solver", "margin"))


def fused_derivatives(model, q, v, tau, scene, dt, options, result):
    """``(step, contacts, slotted, derivatives)`` of one state ``q`` (nq,) float64 in ``scene`` (``model``
    its own, ``dt`` a checked float; no ``f_ext`` nor ``gravity``) on the fused road, ``derivatives`` a
    ``result`` (:class:`~sparsedyn.contact.friction_derivatives.ContactStepDerivatives`) where the plan's calls
    made them (``slotted`` then None), else None with the :class:`Slotted` (or None: no slot) the
    caller's road differentiates; None where the fused road does not apply (no step taken: the
    caller's road), or where the blocks made in the step's call leave the state to the caller's road (its
    step taken again there)."""
    if options:
        if options.get("f_ext") is not None or options.get("gravity") is not None:
            return None
        o = _options(options, options.get("warm_start"))
        tol, iterations, solver, margin, warm_start = o["tol"], o["max_iterations"], o["solver"], o["margin"], \
            o["warm_start"]
    else:
        (tol, iterations, solver, margin), warm_start = _DEFAULTS, None
    # the step's one native call, the contacts' layout returned beside it: contact_step's road (its call
    # and settings looked up at once; the call declines any q, v, tau but one state's float64 arrays),
    # else fused_step (which checks the options)
    road, got = _road_of(model, scene, dt, tol, iterations, solver, margin), None
    if not type(q) is type(v) is type(tau) is np.ndarray:       # (plain lists of numbers take the road too)
        q, v, tau = _checks.flat_floats(q, v, tau)
    if road is not None and type(q) is type(v) is type(tau) is np.ndarray and (
            warm_start is None or type(warm_start) is np.ndarray):
        native = in_the_call(scene, road[2], tol)
        got = road[1](road[2], q, v, tau, road[3], warm_start, None, True, native) if native else \
            road[1](road[2], q, v, tau, road[3], warm_start, None, True)
        if got is None:
            return None
        if len(got) == 3:                          # the layout last replayed: its blocks made in the step's call
            step = _one_step(got[0], got[1], solver, tol)
            d = _blocks(got[2], step, result)
            return None if d is None else (step, None, None, d)
        derive = replayed(scene, road[2], tol, got)
        if derive is not None:                     # a layout met before: no FoundContacts, no slots, no plan lookup
            step = _one_step(got[0], got[1], solver, tol)
            blocks = derive(q, v, got, model.gravity)
            d = None if blocks is None else _blocks(blocks, step, result)
            if d is not None:
                keep_in_the_call(scene, road[2], tol, got, derive, model.gravity)
                return step, None, None, d
        ran = (got[0], got[1], _found(scene, road[4], got[2], got[3], got[4], got[5], got[1]))
    elif not (type(q) is np.ndarray and q.dtype is _F64 and q.shape == (model.nq,)):
        return None
    else:
        ran = fused_step(model, q, v, tau, scene, dt, _step_settings(
            "contact_step", dt, tol, iterations, solver, margin), warm_start, contacts=True)
    if ran is None:
        return None
    out, index, found = ran                        # (out: the kernel's arrays as a plain tuple)
    step = _one_step(out, index, solver, tol)
    slots = found.slots
    if not len(slots.frames):
        return step, (), None, None
    in_data = not runs_per_body(scene)
    plan = _derivative_plan(scene, model, q, out, index, found, in_data, tol, dt)
    if plan is not None:
        sizes = (len(out[2]), out[5].size, out[4].size, model.nq)
        pieces = _pieces_blocks(scene, model, plan, pieces_kernel(plan[5], slots.frames, plan[4]), sizes)
        told = told_at_hit(scene, found.pair, q, slots)
        if told:                                   # a sliding or turning point's K: this state's (never replayed)
            pieces = _with_shapes(pieces, slot_shapes(scene, q, found.pair, slots))
        d = None if pieces is None else _four_calls(model, q, v, out, plan, pieces, slots.data, step, result)
        if d is not None:
            if got is not None and not told:       # (the step's own call: its layout met again is replayed)
                remember(scene, road[2], tol, got, plan, slots, in_data, lambda make, got: _own_features_first(
                    scene, road[4][3], found.pair, _replay_call(plan, pieces, make, got, model.nq)))
            elif got is not None and kinds_fixed(scene, found.pair):        # (each state's K, its data's)
                remember(scene, road[2], tol, got, plan, slots, in_data, lambda make, got: _told_replay_call(
                    plan, pieces, make, lambda q, data: slot_shapes(scene, q, found.pair, slots._replace(data=data))))
            return step, found, None, d
    slotted = fused_slotted(scene, q, tuple.__new__(StepArrays, out), index, found, in_data, tol, Slotted)
    return step, found, slotted if slotted is not None else one_state_slots(
        scene, q, found.pair, slots, step.impulses, mode_codes(step), out[5].reshape(-1), in_data), None


def _four_calls(model, q, v, out, plan, pieces, data, step, result):
    """The ``result`` of the derivatives of the step ``step`` (its kernel's arrays ``out``) from the
    plan's calls (:func:`_derivative_plan`'s tuple; ``pieces`` :func:`_pieces_blocks`'s tuple, the calls of
    the pieces and the blocks and its parameters) on the slots' ``data`` (ns, 8): :func:`_blocks` of them;
    None where the blocks' routine leaves the state to the caller's road."""
    nv = model.nv
    if not (type(v) is np.ndarray and v.dtype is _F64 and v.shape == (nv,)):
        v = np.asarray(v, float).reshape(nv)
    if pieces[2] is not None:                      # the slots' modes, the pieces and the blocks: one call
        got = pieces[2](q, v, out[1], out[2], out[3], out[4], out[5].reshape(-1), plan[1], data, model.gravity,
                        pieces[3])
    else:
        w, lam, c = plan[0](out[2], out[3], out[4], out[5].reshape(-1), plan[1], data, plan[2])
        got = pieces[0](q, v, out[1], lam, c, w, data, model.gravity, pieces[1])
    return _blocks(got, step, result)


def _with_shapes(pieces, shapes):
    """:func:`_pieces_blocks`'s ``pieces`` with the slots' ``shapes`` (ns, 12) of this state in the tails of
    their parameters (those of the layout's first state there); None where the pieces are two calls."""
    g, par, f, fpar = pieces
    if par is None:
        return None
    tail = shapes.reshape(-1)
    return g, np.concatenate([par[:-len(tail)], tail]), f, None if fpar is None else \
        np.concatenate([fpar[:-len(tail)], tail])


def _blocks(got, step, result):
    """The ``result`` of the six blocks (nv, nv) and the return code (1,) ``got`` of the blocks' routine and
    the step ``step``, checked finite where the code says a block may not be; None where the code is
    negative (the routine leaves the state to the caller's road)."""
    rc = float(got[6][0])                          # (a Python float: cheaper to compare than NumPy's)
    if rc < 0:
        return None
    d = tuple.__new__(result, got[:6] + (step,))
    if rc != 0:
        _checks.finite_result("contact_step_derivatives", d, (2,) * 6)
    return d


def _own_features_first(scene, pairs, pair, derive):
    """``derive`` for a layout whose contacts (of the scene pairs ``pair``) never tell their shapes at the
    hit; else ``derive`` where the hits' rows tell its contacts touch with their pairs' own features
    (:func:`~sparsedyn.contact.scene_geometry.own_at_witnesses`; ``pairs`` each candidate's scene pair),
    returning None otherwise (the caller's road); None where the rows cannot tell."""
    if not told_at_hit(scene, pair):
        return derive
    if not witnesses_tell(scene, pair):
        return None

    def checked(q, v, got, gravity):
        sel = got[2]
        return derive(q, v, got, gravity) if own_at_witnesses(scene, pairs[sel], got[4][sel]) else None
    return checked


def _replay_call(plan, pieces, make, got, nq):
    """``derive(q, v, got, gravity) -> (b0, .. b5, rc)``: the blocks' routine's outputs for a later step of
    the layout of the step whose call returned ``got`` (``(out, index, sel, slot, c, data)``: ``q``, ``v``
    the float64 arrays that call took), the same calls as :func:`_four_calls`'s from the plan's ``plan``
    and ``pieces`` (:func:`_pieces_blocks`'s) on the slots' data that :func:`~sparsedyn.contact.derivative_replay.remember`'s
    ``make`` says (None: the call's per-body data; :func:`~sparsedyn.contact.derivative_replay._gathered`'s
    4-tuple: its gathering routine, with the pieces and blocks in one call where :func:`_gathered_fold`
    makes it; else :func:`~sparsedyn.contact.derivative_replay._data` of the candidates); what depends on
    the layout alone bound once.  The correction ``out[5]`` is the one-state kernel's (nr,) as it comes."""
    at, spar, g, gpar, pb, pbpar = plan[1], plan[2], pieces[0], pieces[1], pieces[2], pieces[3]
    slot_call = plan[0]
    if make is None and pb is not None:            # per-body slots, the call's data: the slots' modes, pieces, blocks
        def derive(q, v, got, gravity):
            out = got[0]
            return pb(q, v, out[1], out[2], out[3], out[4], out[5], at, got[5], gravity, pbpar)
        derive.native = (pb, at, pbpar)            # (one kernel on the call's arrays: the step's call can run it)
        return derive
    if make is None or len(make) != 4:             # the slots' data: the call's, or made of c with NumPy (_data)
        data_of = (lambda got: got[5]) if make is None else (lambda got: _data(make, got[4]))
        if pb is not None:
            def derive(q, v, got, gravity):
                out = got[0]
                return pb(q, v, out[1], out[2], out[3], out[4], out[5], at, data_of(got), gravity, pbpar)
            return derive

        def derive(q, v, got, gravity):
            out, data = got[0], data_of(got)
            w, lam, c = slot_call(out[2], out[3], out[4], out[5], at, data, spar)
            return g(q, v, out[1], lam, c, w, data, gravity, gpar)
        return derive
    gather_call, gather, gather_par, take = make
    folded = _gathered_fold(plan, pieces, make, got, nq)
    if folded is not None:                         # the slots' data and modes, the pieces and the blocks: one call
        fold, fpar = folded

        def derive(q, v, got, gravity):
            out = got[0]
            return fold(q, v, out[1], out[2], out[3], out[4], out[5], at, got[4].take(take), gather, gravity, fpar)
        return derive

    def derive(q, v, got, gravity):
        out = got[0]
        w, lam, corr, data = gather_call(out[2], out[3], out[4], out[5], at, got[4].take(take), gather, gather_par)
        return g(q, v, out[1], lam, corr, w, data, gravity, gpar)
    return derive


def _told_replay_call(plan, pieces, make, shapes_of):
    """:func:`_replay_call`'s ``derive`` for a layout whose slots' shapes are told at each state (a sliding
    point's or a turning normal's ``K``): the slots' data made first (the call's, with NumPy, or by the
    gathering routine with their modes), then ``shapes_of(q, data)`` (ns, 12) put in the pieces'
    parameters (:func:`_with_shapes`), then the same calls; None where the pieces are two calls."""
    at, spar = plan[1], plan[2]

    def blocks(q, v, out, data, gravity, modes):
        both = _with_shapes(pieces, shapes_of(q, data))
        if both is None:
            return None
        g, gpar, pb, pbpar = both
        if modes is None and pb is not None:
            return pb(q, v, out[1], out[2], out[3], out[4], out[5], at, data, gravity, pbpar)
        w, lam, c = modes or plan[0](out[2], out[3], out[4], out[5], at, data, spar)
        return g(q, v, out[1], lam, c, w, data, gravity, gpar)
    if make is not None and len(make) == 4:        # the gathering routine: the slots' data and modes
        gather_call, gather, gather_par, take = make

        def derive(q, v, got, gravity):
            out = got[0]
            slotted = gather_call(out[2], out[3], out[4], out[5], at, got[4].take(take), gather, gather_par)
            return blocks(q, v, out, slotted[3], gravity, slotted[:3])
        return derive
    data_of = (lambda got: got[5]) if make is None else (lambda got: _data(make, got[4]))
    return lambda q, v, got, gravity: blocks(q, v, got[0], data_of(got), gravity, None)


def _derivative_plan(scene, model, q, out, index, found, in_data, tol, dt):
    """``(slot modes call, at, par, shapes, kinds, pieces' callable, blocks call, blocks par, dt (1,))``
    of a fused step's layout (:func:`~sparsedyn.contact.slot_modes_native.fused_slotted`'s plan, the
    pieces' native callable, :func:`~sparsedyn.contact.derivative_blocks_native.scene_blocks_call`), kept
    in ``scene.cache`` per layout (the last one's key compared first: a trajectory's steps keep their
    layout; the model's native callables stay once built); None where a piece is not there (a kernel not
    built, kinds told at the hit (two boxes, a sphere on a box's edge): the caller's road)."""
    pair, slots, corr = found.pair, found.slots, out[5]
    if type(pair) is not np.ndarray or pair.dtype != np.intp:
        pair = np.asarray(pair, np.intp)
    at = slots.index
    key = (slots.frames, pair.tobytes(), None if at is None else np.asarray(at).tobytes(),
           None if index is None else np.asarray(index).tobytes(), in_data, len(out[2]), corr.size,
           out[4].size, tol, dt)
    if told_at_hit(scene, pair, q, slots, kinds=True):          # (at this state: before the last layout's plan)
        return None
    last = scene.cache.get(_LAST)
    if last is not None and last[1] == key:
        return last[2]
    f = (native_calls(model) or _NONE).get(_PARTIALS)
    if f is None or type(tol) is not float or type(model.gravity) is not np.ndarray:
        return None
    memo = scene.cache.setdefault(_KEY, {})
    got = memo.get(key)
    if got is None or got[0] is not f:
        slot_plan = _plan(scene, q, pair, slots, index, in_data, key[-5:-1])
        blocks = scene_blocks_call(scene, model.nv, len(slots.frames), dt)
        call = _slots_call(*key[-5:-2], len(slots.frames))
        if slot_plan is None or blocks is None or call is None:
            return None
        if len(memo) >= 256:
            memo.clear()
        _, at, par, shapes, kinds = slot_plan
        got = memo[key] = (f, (call, at, par, shapes[0], kinds, f) + blocks)
    scene.cache[_LAST] = (f, key, got[1])
    return got[1]


def _pieces_blocks(scene, model, plan, pieces, sizes):
    """``(g, par, f, fpar)``: ``g(q, v, v_next, impulses, correction, modes, contact_data, gravity, par) -> (b0,
    .. b5, rc)``, the pieces' callable ``pieces`` (:func:`~sparsedyn.contact.derivative_replay.pieces_kernel`'s)
    and the plan's blocks call (:func:`_derivative_plan`'s tuple) as one native call
    (:func:`~sparsedyn.contact.partials_blocks_native.partials_blocks_call`) where ``pieces`` is a compiled
    kernel, else the two calls; ``f(q, v, v_next, lam, u, report, corr, at, contact_data, gravity, fpar)``
    the plan's slot call (its inputs the step kernel's rows, ``sizes`` ``(rows, correction entries, report
    entries, nq)``) and ``g`` in one native call
    (:func:`~sparsedyn.contact.partials_blocks_native.folded_call`), None (and ``fpar``) where ``g`` is not
    one; kept in ``scene.cache`` per ``pieces``, slot shapes, ``dt``, ``sizes`` and the slots' parameters."""
    shapes, blocks, bpar, dt1 = plan[3], plan[6], plan[7], plan[8]
    memo = scene.cache.setdefault(_BOTH, {})
    key = (pieces, shapes.tobytes(), float(dt1[0]), sizes, plan[2].tobytes())
    got = memo.get(key)
    if got is None:
        if len(memo) >= 64:
            memo.clear()
        got = partials_blocks_call(pieces, shapes, model.nq, model.nv, len(shapes), float(dt1[0]), blocks, bpar, dt1)
        if got is None:
            def two_calls(q, v, v_next, impulses, correction, modes, data, gravity, _):
                p = pieces(q, v, v_next, impulses, correction, modes, data, shapes, gravity, dt1)
                return blocks(p[0], p[1], modes, correction, bpar)
            got = (two_calls, None, None, None)
        else:
            got = got + (_folded(got, plan, sizes) or (None, None))
        memo[key] = got
    return got


def _folded(pb, plan, sizes):
    """:func:`~sparsedyn.contact.partials_blocks_native.folded_call` of the plan's slot call and the pieces'
    and blocks' call ``pb`` (``(g, par)``), the step kernel's ``sizes`` ``(rows, correction entries, report
    entries, nq)``; its fallback the two calls."""
    nk, nr, nrep, nq = sizes
    call, at, spar = plan[:3]
    g, gpar = pb
    ns, nv = len(at), int(gpar[0])

    def two_calls(q, v, v_next, lam, u, rep, corr, at, data, gravity, par):
        w, lam_s, corr_s = call(lam, u, rep, corr, at, data, spar)    # (the pieces' par from par: its shapes)
        return g(q, v, v_next, lam_s, corr_s, w, data, gravity, np.concatenate([par[:6], par[6 + len(spar):]]))
    ins = ((nq,), (nv,), (nv,), (nk, 3), (nk, 3), (nrep,), (nr,), (ns, 2), (ns, 8), (3,))
    return folded_call(gpar, spar, ins, False, two_calls)


def _gathered_fold(plan, pieces, make, got, nq):
    """``(call, par)``: the replay's gathering routine (``make``,
    :func:`~sparsedyn.contact.derivative_replay._gathered`'s ``(call, gather, par, take)``) of the step whose
    call returned ``got``, and the pieces' and blocks' call (``pieces``, :func:`_pieces_blocks`'s) in one
    native call (:func:`~sparsedyn.contact.partials_blocks_native.folded_call`), its fallback the two calls;
    None where ``pieces`` is not one call."""
    g, gpar = pieces[:2]
    if gpar is None:
        return None
    gather_call, gather, spar, take = make
    out = got[0]
    nv, ns = int(gpar[0]), len(plan[1])

    def two_calls(q, v, v_next, lam, u, rep, corr, at, c, gather, gravity, _):
        w, lam_s, corr_s, data = gather_call(lam, u, rep, corr, at, c, gather, spar)
        return g(q, v, v_next, lam_s, corr_s, w, data, gravity, gpar)
    ins = ((nq,), (nv,), (nv,), out[2].shape, out[3].shape, (out[4].size,), (out[5].size,), (ns, 2), (len(take),),
           (len(gather),), (3,))
    return folded_call(gpar, spar, ins, True, two_calls)


def _slots_call(nk, nr, nq, ns):
    """``g(lam (nk, 3), u (nk, 3), report (nq,), corr (nr,), at (ns, 2), data (ns, 8), par (2,)) -> (weights
    (ns, 4), lam (ns, 3), corr (ns,))``: ``sd_derivative_slots`` (:data:`SOURCE`) for ``nk`` kernel rows,
    ``nr`` correction entries, a report of ``nq`` entries and ``ns`` slots, through the compiled kernels'
    fast path (ctypes its fallback, and the road where the compiler's extension is not there); None
    where the routine cannot be built."""
    f = c_routine(SOURCE, "sd_derivative_slots", [ctypes.POINTER(ctypes.c_double)] * 10)
    if f is None:
        return None
    outs = ((ns, 4), (ns, 3), (ns,))

    def through_ctypes(*ins):
        got = tuple(np.zeros(s) for s in outs)
        f(*(_at(x) for x in ins), *(_at(x) for x in got))
        return got
    fast = native_function("Kernel")
    if fast is None:
        return through_ctypes
    ins = ((nk, 3), (nk, 3), (nq,), (nr,), (ns, 2), (ns, 8), (2,))
    return fast(ctypes.cast(f, ctypes.c_void_p).value, ins, outs, through_ctypes)
