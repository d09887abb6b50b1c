"""One state's step in its derivatives' slots in one native call: :func:`fused_slotted`.

A step in a scene that took the fused road (:func:`~sparsedyn.contact.scene_fused.fused_step`) leaves
its impulses, contact velocities, stopping scales and position correction in the step kernel's rows;
its derivatives (:func:`~sparsedyn.contact_step_derivatives`) want them in their own slots with each
slot's mode weights ``[open, stick, slide, mu]``
(:class:`~sparsedyn.contact.scene_slotted.Slotted`).  What depends on the layout alone (which kernel
row and which correction entry each slot reads, its shapes and kinds) is kept in ``scene.cache``;
the per-state rest is one hand-written C routine (:func:`~sparsedyn.kernels.c_library`), called as
the compiled kernels' one-state fast path calls a kernel: per slot ``j`` reading kernel row ``r``
(none: a free slot, open with zero impulse)::

    open   where lambda_n <= tol s_lambda
    stick  where u_x^2 + u_y^2 <= (100 tol s_u)^2
    slide  otherwise

the test of :func:`~sparsedyn.contact.friction_problem._modes` (``s_lambda``, ``s_u`` the step's
impulse and velocity scales, its report's entries 5 and 6) as
:meth:`~sparsedyn.contact.lazy_modes._Modes.codes` writes it on Python floats, in the same order:
the same modes.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..kernels import c_routine, native_function
from .friction_problem import MODE_NAMES, STICKING_SLIP
from .mesh_plane_loop import _at
from .scene_base import remembered
from .scene_geometry import in_order, layout_key, slot_kinds, slot_shapes, told_at_hit

__all__ = ["fused_slotted", "slot_modes_call", "SOURCE"]

#: The C routine ``sd_slot_modes(lam (nk, 3), u (nk, 3), report (nq,), corr (nr,), at (ns, 2), data (ns, 8),
#: par [tol, ns], weights (ns, 4), lam_s (ns, 3), corr_s (ns,), codes (ns,), data_s (ns, 8), mu (ns,))``:
#: per slot ``j`` the kernel row ``at[j, 0]`` and correction entry ``at[j, 1]`` it reads (``-1``: none),
#: its mode weights (``mu`` the slot data's first column), impulses, correction impulse and mode code (an
#: index of ``MODE_NAMES``), and a copy of the slots' data and their friction (the outputs a batch of
#: one's: :class:`~sparsedyn.contact.scene_slotted.Slotted`'s arrays without a NumPy call).
SOURCE = r"""
SD_EXPORT void sd_slot_modes(const double *lam, const double *u, const double *rep, const double *corr,
                             const double *at, const double *data, const double *par, double *weights,
                             double *lam_s, double *corr_s, double *codes, double *data_s, double *mu)
{
  double tol = par[0], lo = tol * rep[5], vo = STICKING_SLIP * tol * rep[6];
  long long ns = (long long)par[1];
  vo = vo * vo;
  for (long long j = 0; j < ns; j++) {
    long long r = (long long)at[2 * j], c = (long long)at[2 * j + 1];
    double code = 0.0;
    for (int k = 0; k < 3; k++) lam_s[3 * j + k] = r < 0 ? 0.0 : lam[3 * r + k];
    if (r >= 0 && !(lam[3 * r + 2] <= lo))
      code = u[3 * r] * u[3 * r] + u[3 * r + 1] * u[3 * r + 1] <= vo ? 1.0 : 2.0;
    weights[4 * j] = code == 0.0;
    weights[4 * j + 1] = code == 1.0;
    weights[4 * j + 2] = code == 2.0;
    weights[4 * j + 3] = data[8 * j];
    corr_s[j] = c < 0 ? 0.0 : corr[c];
    codes[j] = code;
    mu[j] = data[8 * j];
    for (int k = 0; k < 8; k++) data_s[8 * j + k] = data[8 * j + k];
  }
}
""".replace("STICKING_SLIP", repr(STICKING_SLIP))


def slot_modes_call(nk, nr, ns, nq):
    """``g(lam (nk, 3), u (nk, 3), report (nq,), corr (nr,), at (ns, 2), data (ns, 8), par (2,)) -> (weights
    (1, ns, 4), lam (1, ns, 3), corr (1, ns), codes (ns,), data (1, ns, 8), mu (1, ns))``: the routine for
    ``nk`` kernel rows, ``nr`` correction entries, ``ns`` slots and a report of ``nq`` entries (at least
    7), through the compiled kernels' fast path where the compiler's extension is there (ctypes its
    fallback, and the road where it is not); None where the routine cannot be built."""
    f = c_routine(SOURCE, "sd_slot_modes", [ctypes.POINTER(ctypes.c_double)] * 13)
    if f is None:
        return None

    def through_ctypes(lam, u, rep, corr, at, data, par):
        outs = np.zeros((1, ns, 4)), np.zeros((1, ns, 3)), np.zeros((1, ns)), np.zeros(ns), np.zeros((1, ns, 8)), \
            np.zeros((1, ns))
        f(*(_at(x) for x in (lam, u, rep, corr, at, data, par)), *(_at(x) for x in outs))
        return outs
    fast = native_function("Kernel")
    if fast is None:
        return through_ctypes
    entry = ctypes.cast(f, ctypes.c_void_p).value
    ins = ((nk, 3), (nk, 3), (nq,), (nr,), (ns, 2), (ns, 8), (2,))
    outs = ((1, ns, 4), (1, ns, 3), (1, ns), (ns,), (1, ns, 8), (1, ns))
    return fast(entry, ins, outs, through_ctypes)


def fused_slotted(scene, q, out, index, found, in_data, tol, slotted):
    """The :class:`~sparsedyn.contact.scene_slotted.Slotted` (B = 1) of a fused step at ``q`` (nq,) in
    ``scene``: the kernel's arrays ``out`` (a :class:`~sparsedyn.contact.friction.StepArrays` of one
    state), ``index`` (the contacts' kernel rows; None: row ``k`` holds contact ``k``), its contacts
    ``found`` (a :class:`~sparsedyn.contact.scene_step.FoundContacts`), ``in_data`` (the step ran in the
    scene's data slots: the correction's entry ``k`` is contact ``k``'s) and its tolerance ``tol``;
    ``slotted`` the class.  The slot plan (:func:`_plan`) kept in ``scene.cache``; None where the
    routine cannot be built or a contact tells its shapes at ``q``
    (:func:`~sparsedyn.contact.scene_geometry.told_at_hit`: the caller's road then)."""
    if type(tol) is not float or told_at_hit(scene, found.pair, q, found.slots):
        return None
    pair, slots, rep, corr = found.pair, found.slots, out.report, out.correction
    if type(pair) is not np.ndarray or pair.dtype != np.intp:
        pair = np.asarray(pair, np.intp)
    key = layout_key(slots, pair) + (None if index is None else np.asarray(index).tobytes(), in_data, len(out.impulses),
                                     corr.size, rep.size, tol)
    plan = remembered(scene, "fused slot plan", key, lambda: _plan(scene, q, pair, slots, index, in_data, key[-4:]))
    if plan is None:
        return None
    call, at, par, shapes, kinds = plan
    weights, lam, corr, codes, data, mu = call(out.impulses, out.velocities, rep, corr.reshape(-1), at, slots.data,
                                               par)
    names = remembered(scene, "slot mode names", codes.tobytes(), lambda: _names(codes))
    return tuple.__new__(slotted, (slots.frames, data, shapes, mu, lam, names, corr, kinds, weights))


def _plan(scene, q, pair, slots, index, in_data, sizes):
    """``(call, at (ns, 2), par (2,), shapes (1, ns, 12), kinds)`` of the contacts of the scene pairs ``pair``
    (nc,) laid out in ``slots``, the kernel's ``sizes`` ``(rows, correction entries, report entries,
    tol)``: the routine's call (:func:`slot_modes_call`), per slot the kernel row and correction entry
    it reads (-1: a free slot) as :func:`~sparsedyn.contact.scene_slotted.one_state_slots` places them,
    the routine's ``[tol, ns]``, :func:`~sparsedyn.contact.scene_geometry.slot_shapes` and
    :func:`~sparsedyn.contact.scene_geometry.slot_kinds`; None where the routine cannot be built or the
    report is not a step kernel's one state's."""
    nc, ns = len(pair), len(slots.frames)
    (nk, nr, nq, tol), pair = sizes, np.asarray(pair, np.intp)
    call = slot_modes_call(nk, nr, ns, nq) if nq >= 7 else None
    if call is None:
        return None
    contact = np.full(ns, -1, np.intp)                           # the contact in each slot (-1: free)
    if in_order(slots, nc):
        contact[:] = np.arange(ns)
    else:
        contact[np.arange(nc) if slots.index is None else np.asarray(slots.index)] = np.arange(nc)
    filled = contact >= 0
    rows = np.asarray(index)[contact] if index is not None and nc else contact      # (no contact: every slot free)
    at = np.stack([np.where(filled, rows, -1), np.where(filled, contact if in_data else np.arange(ns), -1)], -1)
    shapes, at, par = slot_shapes(scene, q, pair, slots)[None], at.astype(float), np.array([tol, ns], float)
    for x in (at, par, shapes):
        x.flags.writeable = False
    return call, at, par, shapes, slot_kinds(scene, slots.frames)


def _names(codes):
    """The modes' names (1, ns) of the slots' ``codes`` (ns floats), read-only."""
    names = np.array([MODE_NAMES[int(c)] for c in codes.tolist()], "<U5")[None]
    names.flags.writeable = False
    return names
