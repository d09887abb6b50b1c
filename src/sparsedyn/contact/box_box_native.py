"""Two boxes' hits in one native call: :func:`box_box_hits`.

:func:`~sparsedyn.collide` finds a pair of boxes' hits with the vectorised closed forms of
:mod:`~sparsedyn.contact.closed_forms` (the closest pair, ``box_box``; each box's corners against the
other and the contact polygon of a face on a face, ``box_box_corners``), then merges them (the
closest pair left out where a corner is as deep; one hit per point): some sixty NumPy calls for
one pair.  Here a C routine written by hand (:mod:`~sparsedyn.contact.box_box_c`, built by
:func:`~sparsedyn.kernels.c_library`) does the same operations in the same order for every pair in
one call: the hits are the NumPy road's to rounding.  Without a C compiler, None: the NumPy road.
"""

from __future__ import annotations

import ctypes

import numpy as np

from ..kernels import c_routine
from .box_box_c import SOURCE
from .collision_coal import SAME_DEPTH, SAME_POINT

__all__ = ["box_box_hits", "box_box_available", "box_box_plan", "box_box_pairs", "BoxBoxPlan", "ROWS"]

#: At most this many hits a pair (the closest pair, sixteen corners, eight polygon points).
ROWS = 25

_PAR = np.array([SAME_DEPTH, SAME_POINT])


def routine(name, argtypes):
    """The C routine ``name`` of :data:`~.box_box_c.SOURCE`'s library (ctypes, typed with ``argtypes``
    on first use), or None where no C compiler builds it (the library built and loaded once per process
    by :func:`~sparsedyn.kernels.c_library`; its function object kept by ctypes)."""
    return c_routine(SOURCE, name, argtypes)


def _routine():
    """``sd_box_box_hits`` (ctypes), or None without a C compiler."""
    return routine("sd_box_box_hits", [ctypes.c_longlong] + [ctypes.c_void_p] * 5)


def box_box_available():
    """Whether the routine is built (a C compiler here)."""
    return _routine() is not None


def box_box_hits(Ra, pa, ha, Rb, pb, hb, margin, cutoff=None):
    """The hits of ``P`` box pairs as :func:`~sparsedyn.collide` finds them: boxes of rotations ``Ra``,
    ``Rb`` (P, 3, 3), centres ``pa``, ``pb`` and half extents ``ha``, ``hb`` (P, 3) (world), the
    closest pair computed where within ``margin`` [m] (a number or (P,)) and the hits within ``cutoff``
    (None: ``margin``): ``(pair, d, w_a, w_b, n)``, each hit's pair (an index of the P, sorted), signed
    distance (negative: penetration), witness points and unit normal from ``b`` towards ``a``
    (world); None where no C compiler builds the routine."""
    f = _routine()
    if f is None:
        return None
    P = len(pa)
    # one buffer for the routine's arrays: one address to look up (numpy's .ctypes costs microseconds)
    buf = np.empty(P * (33 + 10 * ROWS) + 2)
    pose, cut = buf[:30 * P].reshape(P, 30), buf[30 * P:32 * P].reshape(P, 2)
    out, count = buf[32 * P:(32 + 10 * ROWS) * P].reshape(P, ROWS, 10), buf[(32 + 10 * ROWS) * P:(33 + 10 * ROWS) * P]
    pose[:, 0:9], pose[:, 9:12], pose[:, 12:15] = np.reshape(Ra, (P, 9)), pa, ha
    pose[:, 15:24], pose[:, 24:27], pose[:, 27:30] = np.reshape(Rb, (P, 9)), pb, hb
    cut[:, 0] = margin
    cut[:, 1] = margin if cutoff is None else cutoff
    buf[-2:] = _PAR
    at = buf.ctypes.data
    f(P, at, at + 240 * P, at + 8 * (len(buf) - 2), at + 256 * P, at + 8 * (32 + 10 * ROWS) * P)
    if P == 1:                                   # (one pair: a slice, no mask)
        rows, k = out[0, :int(count[0])], np.zeros(int(count[0]), int)
    else:
        keep = np.arange(ROWS) < count[:, None]
        rows, k = out[keep], np.nonzero(keep)[0]
    return k, rows[:, 0], rows[:, 1:4], rows[:, 4:7], rows[:, 7:10]


class BoxBoxPlan:
    """A scene's pairs of two boxes as the routine takes them (:func:`box_box_plan`): ``pair`` (B,) their
    scene pairs, ``ia``, ``ib`` (B,) their shapes, ``ha``, ``hb`` (B, 3) their half extents, ``inside``
    (scene pairs,) bool: the pairs here; ``E`` (B, 3, 3), ``r`` (B, 3): each ``a``'s placement in its
    body (a point ``x`` of the shape's frame is ``E x + r`` in the body's)."""

    __slots__ = ("pair", "ia", "ib", "ha", "hb", "inside", "E", "r")


def box_box_plan(scene):
    """The :class:`BoxBoxPlan` of ``scene``'s pairs of two boxes, or None where it has none; kept by the scene."""
    key = "box-box plan"
    if key not in scene.cache:
        shapes, idx = scene.shapes, scene.index
        ks = [k for k, (i, j) in enumerate(idx.tolist()) if shapes[i].kind == shapes[j].kind == "box"]
        bp = None
        if ks:
            bp = BoxBoxPlan()
            bp.pair = np.array(ks, int)
            bp.ia, bp.ib = idx[bp.pair, 0], idx[bp.pair, 1]
            bp.ha = np.array([np.asarray(shapes[i].size, float) / 2 for i in bp.ia.tolist()])
            bp.hb = np.array([np.asarray(shapes[i].size, float) / 2 for i in bp.ib.tolist()])
            bp.E = np.array([shapes[i].R for i in bp.ia.tolist()]).reshape(-1, 3, 3)
            bp.r = np.array([shapes[i].p for i in bp.ia.tolist()]).reshape(-1, 3)
            bp.inside = np.zeros(len(idx), bool)
            bp.inside[bp.pair] = True
        scene.cache[key] = bp
    return scene.cache[key]


def box_box_pairs(bp, R, p, margin, cutoff=None):
    """:func:`~sparsedyn.collide`'s hits ``(pair, d, w_a, w_b, n)`` of the pairs of ``bp`` (a
    :class:`BoxBoxPlan`) at the shapes' world poses ``R`` (S, 3, 3), ``p`` (S, 3), ``pair`` their scene
    pairs; the closest pairs within ``margin`` [m], the hits within ``cutoff`` (P,) per scene pair
    (None: ``margin``); None without a C compiler."""
    got = box_box_hits(R[bp.ia], p[bp.ia], bp.ha, R[bp.ib], p[bp.ib], bp.hb, margin,
                       None if cutoff is None else cutoff[bp.pair])
    if got is None:
        return None
    k, d, wa, wb, n = got
    return bp.pair[k], d, wa, wb, n
