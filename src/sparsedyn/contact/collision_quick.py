""":func:`~sparsedyn.collide`'s quick call: a scene's road bound once into one function of ``q``.

Where :func:`~sparsedyn.collide` has laid out a road of fixed slots for a scene (every pair the
collision kernel's and pairs of two boxes: :mod:`~sparsedyn.contact.box_box_road`), each call looks
up the road, its thread's buffer, the native callables and the scene's tables before the native calls
that do the work, and a few microseconds of that Python is as long as the work itself on a small
scene.  :func:`quick_collide` binds all of them once per scene and thread into a closure (kept in
``scene.cache``): the native placements, the collision kernel's candidates and the road's routine
written into the thread's buffer, then the compiler extension's ``pick`` and the hits' pair names
remembered per selection.  The same calls on the same numbers: the road's hits, bit for bit.
"""

from __future__ import annotations

import threading

from ..kernels import native_function
from .box_box_road import BoxBoxRoad, _table_scratch

__all__ = ["QUICK", "quick_collide"]

#: ``scene.cache``'s key of the quick calls: ``{thread id: (q's shape, the call or None)}``
QUICK = "collide quick"

#: A scene's remembered pair names are forgotten when this many selections are held (a simulation's
#: contact sets recur, but their number is not bounded).
NAMES_HELD = 256

#: The collision kernel's static ``pairs`` is passed as a plain tuple where it has at most this many:
#: its hash, in C, costs less than a call of :class:`~sparsedyn.contact.collision_kernel.Pairs`'
#: remembered one (a Python method); a longer one is hashed once and kept by ``Pairs``.
PLAIN_PAIRS = 16


def quick_collide(scene, road, hits):
    """This thread's quick call of ``scene`` (module docstring): a function of ``q`` (nq,) float64 that
    returns its ``hits`` (the :class:`~sparsedyn.contact.collision.Hits` type, built from ``pick``'s
    arrays) or None where the general road must answer; None where ``road`` (``scene.cache``'s
    collide road) has no quick call or its native pieces are not built.  Made once per scene and
    thread, kept in ``scene.cache[QUICK]``."""
    per = scene.cache.setdefault(QUICK, {})
    me = threading.get_ident()
    got = per.get(me)
    if got is None:
        got = per[me] = (road[2], _make(scene, road, hits))
    return got[1]


def _make(scene, road, hits):
    """The call of :func:`quick_collide`, or None."""
    kp = road[1]
    pick = native_function("pick")
    if road[0] is not None or type(kp) is not BoxBoxRoad or pick is None:
        return None
    got = kp.tables.get(threading.get_ident()) or _table_scratch(scene, kp)
    if got is None:
        return None
    f, plan, buf, outs, kern, rows, gp = got[:7]
    g, shapes, pairs = None, None, None
    if kern is not None:
        g, plan_k = kp.kernel
        shapes, pairs = plan_k.shapes, plan_k.pairs
        table = getattr(g, "__table__", None)
        if len(pairs) <= PLAIN_PAIRS and table is not None and (pairs,) in table:
            pairs = tuple(pairs)
    cutoff, order, every, names_of = kp.cutoff, kp.order, kp.every, scene.pair_names
    memo, new = {}, tuple.__new__

    def call(q):
        if outs is not None:
            gp(q, "collision", out=outs)
        if kern is not None:
            g(q, shapes, cutoff, pairs, out=kern)
        f(plan, buf)
        picked = pick(rows, cutoff, order, every)
        if picked is None:
            return None
        x, n, d, sel, k = picked
        key = sel.tobytes()
        names = memo.get(key)
        if names is None:
            if len(memo) >= NAMES_HELD:
                memo.clear()
            names = memo[key] = tuple([names_of[i] for i in k.tolist()])
        return new(hits, (list(names), x, n, d, k))
    return call
