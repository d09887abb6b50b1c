"""A fused step's layout met again, its derivatives' slots and plan looked up at once: :func:`replayed`.

:func:`~sparsedyn.contact.fused_derivatives.fused_derivatives` runs the step's one native call
(``scene_step``, which returns the step's candidates ``sel``, their per-body slots ``slot``, the
candidates ``c`` (K, 11), the per-body slots' data and the kernel rows' ``index``), then makes the
step's :class:`~sparsedyn.contact.scene_step.FoundContacts`, their per-body
:class:`~sparsedyn.contact.friction_problem.ContactSlots` (the derivatives' slots) and looks up the
derivatives' plan (:func:`~sparsedyn.contact.fused_derivatives._derivative_plan`) by a key of their
frames, pairs and slots.  For one scene and one road of the step (its plan: the slot layout, the data
slots' count, ``dt``, the options) all three are functions of ``(sel, slot, index)`` and the
tolerance: :func:`remember` keeps, per such tuple of a state that took that road, one callable that
runs the derivatives' calls (the plan, the pieces' callable and how the slots' data are made from the
call's arrays, bound once), and :func:`replayed` answers a later state of the same tuple with it (a
trajectory's steps keep their contacts): the same calls on the same values, so the same derivatives
bit for bit.  The slots' data are the call's
per-body data where the step runs in per-body slots, else ``base`` with the entries ``take`` of the
candidates' rows put at ``put`` (turned by ``A x + b`` where a slot frame is not its body's own), the
selection's of :mod:`~sparsedyn.contact.scene_data` (what
:func:`~sparsedyn.contact.scene_data.held_contacts` makes its per-body slots from), made in the slots'
modes' call (:data:`SOURCE`) where each row of ``A`` holds one entry, else with NumPy; a selection
whose data or modes made so differ from the first road's is not kept (that road then, each time).

Where the callable is one native kernel on the call's own arrays (per-body slots, the call's data, no
shape told at the hit), the layout last replayed goes into the step's call itself (:func:`in_the_call`,
kept by :func:`keep_in_the_call`): ``scene_step`` compares the step's layout with it and, where they are
the same, runs that kernel before it returns, so the step and its derivatives are one native call.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..kernels import c_routine, native_function
from . import scene_data
from .mesh_plane_loop import _at
from .slot_modes_native import SOURCE as SLOT_MODES

__all__ = ["replayed", "remember", "in_the_call", "keep_in_the_call", "pieces_kernel", "SOURCE"]

_KEY, _CALL = "fused derivatives replay", "fused derivatives in the step's call"

#: Layouts kept per scene and road (a trajectory meets a few; a new road starts afresh).
MAX_KEPT = 256

#: :mod:`~sparsedyn.contact.slot_modes_native`'s routine and ``sd_gathered_slots(lam, u, report, corr, at, c,
#: gather, par, weights, lam_s, corr_s, data)``: the per-body slots' data (ns, 8) made from the candidates
#: ``c`` (K, 11), read flat (the replay hands it the taken entries alone, ``take`` then ``0 .. n-1``)
#: (``gather = [base (8 ns), put (n), take (n), scale (n), offset (n)]``: ``data = base``, then
#: ``data[put_i] = c[take_i]`` where ``par[3]`` is 1, else ``scale_i c[take_i] + offset_i``, a product and a
#: sum each rounded, as NumPy's), then the slots' modes of :data:`~sparsedyn.contact.fused_derivatives.SOURCE`'s
#: ``sd_derivative_slots`` on them; ``par = [tol, ns, n, plain]``.
SOURCE = SLOT_MODES + r"""
SD_EXPORT void sd_gathered_slots(const double *lam, const double *u, const double *rep, const double *corr,
                                 const double *at, const double *c, const double *gather, const double *par,
                                 double *weights, double *lam_s, double *corr_s, double *data)
{
  long long ns = (long long)par[1], n = (long long)par[2], nn = ns > 0 ? ns : 1;
  const double *put = gather + 8 * ns, *take = put + n, *scale = take + n, *offset = scale + n;
  double codes[nn], data_s[8 * nn], mu[nn];
  for (long long i = 0; i < 8 * ns; i++) data[i] = gather[i];
  if (par[3] != 0.0)
    for (long long i = 0; i < n; i++) data[(long long)put[i]] = c[(long long)take[i]];
  else
    for (long long i = 0; i < n; i++) {
      volatile double x = scale[i] * c[(long long)take[i]];   /* (rounded before the sum: no fused multiply-add) */
      data[(long long)put[i]] = x + offset[i];
    }
  sd_slot_modes(lam, u, rep, corr, at, data, par, weights, lam_s, corr_s, codes, data_s, mu);
}
"""


def replayed(scene, road, tol, got):
    """The callable ``derive(q, v, got, gravity) -> (b0, .. b5, rc)`` that :func:`remember` kept for the
    ``(sel, slot, index)`` of the step whose ``scene_step`` call (on the road's plan ``road``, tolerance
    ``tol``) returned ``got`` (``(out, index, sel, slot, c, data)``): the derivatives' blocks of that step
    from the plan, the pieces' callable and the slots' data made from ``got``; else None."""
    memo = scene.cache.get(_KEY)
    if memo is None or memo[0] is not road or memo[1] != tol:
        return None
    index = got[1]
    return memo[2].get((got[2].tobytes(), got[3].tobytes(), None if index is None else index.tobytes()))


def in_the_call(scene, road, tol):
    """``scene_step``'s ``derive`` argument for a step on the road's plan ``road`` at tolerance ``tol``: the
    layout last replayed with its blocks' kernel (:func:`keep_in_the_call`), else None."""
    kept = scene.cache.get(_CALL)
    return kept[2] if kept is not None and kept[0] is road and kept[1] == tol else None


def keep_in_the_call(scene, road, tol, got, derive, gravity):
    """Keep for :func:`in_the_call` the layout of the step whose ``scene_step`` call returned ``got`` and
    whose derivatives ``derive`` made (a callable of :func:`remember`'s): ``(sel, slot, index, blocks, at,
    gravity, par)``, where ``derive`` is one kernel on the call's arrays (its ``native``: ``(blocks, at,
    par)``); else nothing."""
    native = getattr(derive, "native", None)
    if native is not None:
        scene.cache[_CALL] = (road, tol, (got[2], got[3], got[1], native[0], native[1], gravity, native[2]))


def remember(scene, road, tol, got, plan, slots, in_data, derive):
    """Keep for :func:`replayed` the blocks' callable of the layout of the step whose ``scene_step`` call
    returned ``got``: ``derive(make, got)`` (the caller's, on the derivatives' plan ``plan``), where
    ``make`` says how the slots' data are made of the call's arrays (None: its per-body data; the
    gathering routine's ``(call, gather, par, take)`` of :func:`_gathered` where it makes them and their
    modes; else :func:`_sparse`'s ``(base, put, take, A, b)``, for :func:`_data`), checked against the
    derivatives' ``slots`` (``in_data``: the step ran in the scene's data slots, the per-body slots made
    from the selection); nothing where the index is not an array or the data would not be the slots'."""
    index = got[1]
    if not (index is None or type(index) is np.ndarray) or type(got[2]) is not np.ndarray or \
            type(got[3]) is not np.ndarray:
        return
    make = None
    if in_data:
        c = got[4]
        mask = np.zeros(len(c), bool)
        mask[got[2]] = True
        selection = scene_data._remembered(scene, mask)
        if selection is None:
            return
        make = _sparse(*selection[2:7])
        if not np.array_equal(_data(make, c), slots.data):
            return
        make = _gathered(make, got, plan, slots.data) or make
    elif got[5] is not slots.data:
        return
    memo = scene.cache.get(_KEY)
    if memo is None or memo[0] is not road or memo[1] != tol or len(memo[2]) >= MAX_KEPT:
        memo = scene.cache[_KEY] = (road, tol, {})
    memo[2][(got[2].tobytes(), got[3].tobytes(), None if index is None else index.tobytes())] = derive(make, got)


def _gathered(make, got, plan, data):
    """``(call, gather, par, take)`` of the gathering routine (:data:`SOURCE`) for :func:`_sparse`'s ``make``
    and the step whose call returned ``got``, checked against the plan's slot call on the slots' ``data``
    (the same outputs); None where ``A`` is not one entry per row or the routine cannot be built.  The
    routine reads the taken entries ``c.take(take)`` (n,), not the candidates ``c`` (K, 11): the rows of
    the pairs not near are not finite (the compiled kernels' fast path declines such an input)."""
    base, put, take, A, b = make
    if A is not None and A.ndim != 1:
        return None
    out, c = got[0], got[4]
    n, ns, tol = len(put), len(base), plan[2][0]
    plain = A is None
    scale, offset = (np.ones(n), np.zeros(n)) if plain else (A, b)
    gather = np.concatenate([base.ravel(), put, np.arange(n), scale, offset]).astype(float)
    par = np.array([tol, ns, n, float(plain)])
    ins = (out[2], out[3], out[4], out[5].reshape(-1), plan[1], c.take(take))
    call = _gather_call(*(x.shape for x in ins), len(gather))
    if call is None:
        return None
    mine, theirs = call(*ins, gather, par), plan[0](*ins[:5], data, plan[2])
    if not (np.array_equal(mine[3], data) and all(np.array_equal(x, y) for x, y in zip(mine, theirs))):
        return None
    take = np.array(take, np.intp)
    for x in gather, par, take:
        x.flags.writeable = False
    return call, gather, par, take


def _gather_call(lam, u, rep, corr, at, c, g):
    """``f(lam, u, report, corr, at, c, gather (g,), par (4,)) -> (weights (ns, 4), lam (ns, 3), corr (ns,),
    data (ns, 8))``: ``sd_gathered_slots`` for inputs of these shapes, through the compiled kernels'
    fast path (ctypes its fallback: inputs it declines); None where the routine cannot be built."""
    f = c_routine(SOURCE, "sd_gathered_slots", [ctypes.POINTER(ctypes.c_double)] * 12)
    if f is None:
        return None
    ns = at[0]
    outs = ((ns, 4), (ns, 3), (ns,), (ns, 8))

    def through_ctypes(*ins):
        got = tuple(np.zeros(s) for s in outs)
        f(*(_at(np.ascontiguousarray(x, float)) for x in ins), *(_at(x) for x in got))
        return got
    fast = native_function("Kernel")
    if fast is None:
        return through_ctypes
    return fast(ctypes.cast(f, ctypes.c_void_p).value, (lam, u, rep, corr, at, c, (g,), (4,)), outs, through_ctypes)


def _sparse(base, put, take, A, b):
    """The selection's ``(base, put, take, A, b)`` as :func:`_data` takes it: where each row of ``A`` holds
    one entry (the slot frames' axes the bodies' turned by quarter turns, or kept), ``A x`` is that entry
    times one candidate's entry (the same product: the row's other terms are zeros), ``take`` reordered to
    it and ``A`` replaced by the entries (1-d)."""
    if A is None:
        return base, put, take, None, None
    rows, cols = A.nonzero()
    if len(rows) != len(A) or not np.array_equal(rows, np.arange(len(A))):
        return base, put, take, A, b
    scale, take = A[rows, cols], take[cols]
    for x in scale, take:
        x.flags.writeable = False
    return base, put, take, scale, b


def _data(make, c):
    """The per-body slots' data (ns, 8) of the candidates ``c`` (K, 11) from :func:`_sparse`'s ``(base, put,
    take, A, b)``, as :mod:`~sparsedyn.contact.scene_data` makes them (``A x + b`` of the taken entries ``x``:
    ``A`` (n, n), or its one entry per row (n,))."""
    base, put, take, A, b = make
    data = base.copy()
    if A is None:
        data.put(put, c.take(take))
    elif A.ndim == 1:
        x = c.take(take)
        x *= A
        x += b
        data.put(put, x)
    else:
        data.put(put, A.dot(c.take(take)) + b)
    return data


def pieces_kernel(f, frames, kinds):
    """The pieces' callable ``(q, v, v_next, impulses, correction, modes, contact_data, shapes, gravity,
    dt) -> SlotPartials tuple`` of the native method ``f`` of
    :func:`~sparsedyn.scene_step_partials` for the slots ``frames`` and ``kinds``: its built fast kernel
    for them where the method's table holds it (no lookup per call), else ``f`` with them bound."""
    table = getattr(f, "__table__", None)
    k = table.get((frames, kinds)) if table is not None else None
    if type(k).__name__ == "Kernel":
        return k
    return lambda *args: f(*args, frames, kinds)
