"""A touching patch as a few points: :func:`reduce_patches`, and a mesh against a plane with it
(:func:`mesh_plane_reduced`).

A convex mesh resting on a plane touches along a face (a foot's sole, a link lying flat), and every
hull vertex of that face within the margin is a candidate contact: dozens on a curved link, each a
row of the contact problem.  A rigid body's rest needs no more than its support polygon (the convex
hull of the touching points, in the plane): the normal impulses can be any non-negative weights of
the points whose resultant passes through the polygon, so points inside it add rows but no new
resting state.  Each pair keeps at most :data:`MAX_PATCH_POINTS`:

1. ``p0``, the deepest point (the pair's signed distance: coal's closest pair, unchanged);
2. ``p1``, the point farthest from ``p0`` in the plane (the patch's diameter from ``p0``);
3. ``p2`` and ``p3``, the points farthest from the line ``p0 p1`` on either side (the largest
   triangles ``p0 p1 p2`` and ``p0 p1 p3``).

The quadrilateral ``p0 p2 p1 p3`` is the patch's support polygon where the patch is one (a
rectangular sole: its four corners, whichever is deepest) and otherwise the largest one through the
deepest point and the diameter from it that the patch holds.  This is the rule of MuJoCo's mesh-plane
contacts in spirit (the deepest vertex and up to a few others, three in all there) with the others
chosen to span the patch rather than taken in the mesh graph's order.  A point closer than
:data:`SPAN` to the line (or to ``p0``) spans nothing and is left out.

``p1``, ``p2`` and ``p3`` are chosen among the points that touch with ``p0``: those no higher than
``max(d0, 0) + depth`` (``d0`` the deepest point's distance).  A point higher than that is above the
plane (a gap the step treats as speculative: it may close, no more), so at rest it carries nothing
and the support polygon is that of the touching points alone; a link lying on its curved side
touches along a line, and the vertices of its flanks within the margin are rows the solve does not
need (MuJoCo keeps only penetrating vertices).  In motion a left-out point stays above ``p0``, which
is kept, as long as the body's rotation cannot bring it down by more than ``depth`` relative to
``p0`` within the step: ``|omega| |r_i - r_0| dt <= 2 rho |omega| dt``, twice the pair's look-ahead
(:mod:`~sparsedyn.contact.look_ahead`: its cutoff is ``margin + dt (|v_o| + |omega| rho)``).  So a
step's pair takes ``depth = PATCH_DEPTH + 2 (cutoff - margin)``, where :data:`PATCH_DEPTH` holds
what the step's accelerations tip a body by (``g dt^2 = 1e-5`` m at ``dt = 1`` ms) and the spread of
a face resting on the plane (the solver's position correction leaves it level to the slop, 1 nm).
A point left out that comes down faster (a longer step, a body tipping hard) is found at the next
step, below the plane by at most what it moved beyond ``depth``, and the step's position correction
lifts it out.

That allowance is loose: the translation moves the whole patch together, and the rotation lowers a
point relative to ``p0`` by ``|omega| |r_i - r_0| dt`` only where ``omega`` is across ``r_i - r_0``
and in the falling sense.  Where the step knows the rotation vector of the mesh relative to its plane,
``theta = omega dt`` (world, :func:`~sparsedyn.contact.look_ahead.pair_spins`), each point gets its
own allowance (:func:`rotation_depth`): with ``r = x_i - x_0`` (world, at the step's start) and the
mesh turning by ``R(t theta)`` about a fixed axis ``u = theta / |theta|``, the height of ``x_i`` above
that of ``x_0`` is ``h_i - h_0 + n . (R(t theta) - I) r``, and
``R(t theta) r - r = t theta x r + (sin - t|theta|) u x r + (1 - cos) u x (u x r)`` (Rodrigues, at the
angle ``t |theta|``), so for ``0 <= t <= 1``

    ``h_i(t) - h_0(t) >= h_i - h_0 + min(0, n . (theta x r)) - |r| (|theta| - sin|theta| + 1 - cos|theta|)``.

A point left out (``h_i > max(h_0, 0) + depth_i``) with ``depth_i = PATCH_DEPTH + max(0, -n . (theta x
r)) + |r| (|theta| - sin|theta| + 1 - cos|theta|)`` so stays above ``p0`` through the step (by
``PATCH_DEPTH``, which holds what the step's accelerations add).  A resting mesh (``theta = 0``) takes
``PATCH_DEPTH``, a falling one too: its translation adds nothing.
"""

from __future__ import annotations

import numpy as np

__all__ = ["reduce_patches", "mesh_plane_reduced", "mesh_plane_patches", "plane_axes", "tangents", "MAX_PATCH_POINTS",
           "SPAN", "PATCH_DEPTH", "patch_depth", "rotation_depth", "mesh_box_patch", "close_patches"]

#: The most points a touching patch of one pair keeps.
MAX_PATCH_POINTS = 4

#: A point nearer than this [m] to ``p0`` or to the line ``p0 p1`` spans nothing (collision's SAME_POINT).
SPAN = 1e-7

#: The most entries of the table of patches' indices padded to the longest (:func:`_blocks`).
PADDED = 1 << 16

#: How far [m] above ``max(d0, 0)`` a point of a patch still touches with its deepest point ``p0`` (module docstring).
PATCH_DEPTH = 1e-5


def tangents(n):
    """Two unit tangents ``(t1, t2)`` (..., 3) of the planes of unit normals ``n`` (..., 3), ``t1 x t2 = n``."""
    n = np.asarray(n, float)
    x, y, z = n[..., 0], n[..., 1], n[..., 2]
    first = np.abs(x) < 0.9                                # n x e_x where n is far from e_x, else n x e_y
    t1 = np.where(first[..., None], np.stack([0.0 * x, z, -y], -1), np.stack([-z, 0.0 * x, x], -1))
    t1 = t1 / np.linalg.norm(t1, axis=-1, keepdims=True)
    u, w, s = t1[..., 0], t1[..., 1], t1[..., 2]
    return t1, np.stack([y * s - z * w, z * u - x * s, x * w - y * u], -1)


def _blocks(g):
    """``(starts, seg, idx)`` of the sorted patch labels ``g`` (m,) (m > 0): each patch's first index,
    each point's patch counted from 0, and (S, L) each patch's indices padded to the longest patch's
    length ``L`` with its last index repeated (a repeat comes after what it repeats, so a patch's first
    least of a key is its row's first least: :func:`_least`), or None where that table would exceed
    :data:`PADDED` entries (a batch's many patches: :func:`_least` then passes over the segments)."""
    m = len(g)
    change = np.empty(m + 1, bool)
    change[0] = change[m] = True
    np.not_equal(g[1:], g[:-1], out=change[1:m])
    bounds = change.nonzero()[0]
    starts, stop = bounds[:-1], bounds[1:]
    count = stop - starts
    L = int(count.max())
    idx = np.minimum(starts[:, None] + np.arange(L), (stop - 1)[:, None]) if len(starts) * L <= PADDED else None
    return starts, np.arange(len(starts)).repeat(count), idx


def _least(key, blocks, largest=False):
    """The index of the first least (or largest) finite ``key`` (m,) of each patch of ``blocks`` (:func:`_blocks`)."""
    starts, seg, idx = blocks
    if idx is not None:
        k = key.take(idx)
        return starts + (k.argmax(1) if largest else k.argmin(1))
    key = -key if largest else key          # two passes over the segments (no sort)
    least = np.minimum.reduceat(key, starts)
    return np.minimum.reduceat(np.where(key == least.take(seg), np.arange(len(key)), len(key)), starts)


def reduce_patches(d, T, g, depth=None):
    """The points each patch keeps (module docstring): ``d`` (m,) the points' signed distances, ``T``
    (m, 2) their coordinates in the plane [m], ``g`` (m,) their patch (sorted: a patch's points
    contiguous), ``depth`` (m,) each point's allowance above ``max(d0, 0)`` of its patch's deepest
    point (None: every point is a candidate).  Returns the kept indices (sorted), at most
    :data:`MAX_PATCH_POINTS` a patch, the deepest point of each always among them."""
    if len(d) == 0:
        return np.zeros(0, int)
    d, T = np.asarray(d, float), np.asarray(T, float)
    blocks = _blocks(np.asarray(g))
    p0 = _least(d, blocks)
    return _reduce(d, T - T.take(p0.take(blocks[1]), 0), blocks, p0, depth)


def _reduce(d, rel, blocks, p0, depth):
    """:func:`reduce_patches` given the blocks (:func:`_blocks`), each patch's deepest point ``p0``
    and ``rel`` (m, 2) each point's coordinates in the plane from its patch's ``p0``."""
    seg = blocks[1]
    D = np.einsum("ij,ij->i", rel, rel)
    touch = None if depth is None else d <= np.maximum(d.take(p0), 0.0).take(seg) + depth
    if touch is not None:
        D = np.where(touch, D, 0.0)                                     # a point above the patch spans nothing
    p1 = _least(D, blocks, True)
    e = rel.take(p1, 0).take(seg, 0)
    L = np.sqrt(D.take(p1))
    A = (e[:, 0] * rel[:, 1] - e[:, 1] * rel[:, 0]) / np.where(L > 0, L, 1.0).take(seg)   # signed distance to the line
    if touch is not None:
        A = np.where(touch, A, 0.0)
    if blocks[2] is not None:                           # (one table of A for both)
        Ab = A.take(blocks[2])
        p2, p3 = blocks[0] + Ab.argmax(1), blocks[0] + Ab.argmin(1)
    else:
        p2, p3 = _least(A, blocks, True), _least(A, blocks)
    keep = np.zeros(len(d), bool)                      # sorted and each once
    keep[p0] = True
    keep[p1[D.take(p1) > SPAN ** 2]] = True
    keep[p2[A.take(p2) > SPAN]] = True
    keep[p3[A.take(p3) < -SPAN]] = True
    return keep.nonzero()[0]


def mesh_plane_reduced(V, nb, pb, cutoff, margin=None):
    """A mesh of world vertices ``V`` (N, 3) (those of its convex hull suffice) against the plane
    through ``pb`` (3,) of unit normal ``nb`` (3,): ``(d, w_a, w_b, n)`` of the vertices within
    ``cutoff`` [m] reduced to its patch's points (:func:`reduce_patches`, at most
    :data:`MAX_PATCH_POINTS`, each within :func:`patch_depth` of the deepest), the deepest vertex (the
    hull's signed distance to the plane) among them."""
    V = np.asarray(V, float)
    _, d, wa, wb, n, _ = mesh_plane_patches(V, [(0, len(V))], np.eye(3)[None], np.zeros((1, 3)),
                                            plane_axes(np.asarray(nb, float)[None]), np.asarray(pb, float)[None],
                                            np.array([cutoff], float), margin)
    return d, wa, wb, n


def plane_axes(nb):
    """``(P, 3, 3)``: per plane of unit normal ``nb[k]`` (P, 3) the columns ``n``, ``t1``, ``t2``
    (:func:`tangents`), what :func:`mesh_plane_patches` takes."""
    nb = np.asarray(nb, float)
    t1, t2 = tangents(nb)
    return np.stack([nb, t1, t2], 2)


def patch_depth(cutoff, margin=None):
    """Each pair's allowance above its deepest point (module docstring): ``PATCH_DEPTH`` plus twice
    its look-ahead, ``cutoff`` (P,) [m] less the scene's ``margin`` [m] (None: ``cutoff``, no look-ahead)."""
    cutoff = np.asarray(cutoff, float)
    return PATCH_DEPTH + (0.0 * cutoff if margin is None else 2.0 * np.maximum(cutoff - margin, 0.0))


def rotation_depth(x, g, theta):
    """Each point's allowance above its patch's deepest point given the patch's rotation over the
    step (module docstring): ``x`` (m, 3) the points' coordinates ``(h, t1, t2)`` along their plane's
    axes (normal first) [m], ``g`` (m,) their patch (sorted), ``theta`` (m, 3) their patch's rotation
    vector relative to the plane over the step, in the same axes [rad].  Returns (m,) [m]."""
    x, theta = np.asarray(x, float), np.asarray(theta, float)
    blocks = _blocks(np.asarray(g))
    r = x - x.take(_least(x[:, 0], blocks).take(blocks[1]), 0)           # from the deepest point
    w, c = _spin_terms(theta)
    return _rotation_depth(r, w, c)


def _spin_terms(theta):
    """``(w, c)`` of rotation vectors ``theta`` (k, 3) (plane axes, normal first): ``r . w = -e_n . (theta
    x r)`` (k, 3) and ``c = |theta| - sin|theta| + 1 - cos|theta|`` (k,) (module docstring)."""
    a = np.sqrt(np.einsum("ij,ij->i", theta, theta))
    w = theta.take([0, 2, 1], 1) * np.array([0.0, 1.0, -1.0])      # (0, theta_2, -theta_1)
    return w, a - np.sin(a) + 1.0 - np.cos(a)


def _rotation_depth(r, w, c):
    """:func:`rotation_depth` of the points at ``r`` (m, 3) from their patch's deepest point, ``(w, c)``
    (m, 3), (m,) their patch's :func:`_spin_terms`."""
    lowering = np.einsum("ij,ij->i", r, w)                          # -e_n . (theta x r): first order
    return PATCH_DEPTH + np.maximum(0.0, lowering) + np.sqrt(np.einsum("ij,ij->i", r, r)) * c


def mesh_plane_patches(V, ranges, Rm, pm, axes, pb, cutoff, margin=None, spin=None):
    """Mesh-plane pairs at once, each reduced to its patch (:func:`reduce_patches`): pair ``k``'s
    vertices are the rows ``start:stop`` of ``V`` (N, 3), ``ranges[k] = (start, stop)``, given in a
    frame whose world pose is ``(Rm[k] (3, 3), pm[k] (3,))``, against the plane through ``pb[k]`` of
    unit normal ``axes[k][:, 0]`` (world; ``axes`` (P, 3, 3): :func:`plane_axes`); the vertices within
    ``cutoff[k]`` [m] count, those within :func:`patch_depth` ``(cutoff, margin)`` of the deepest span
    the patch (``margin`` [m]: the scene's, or None: no look-ahead).  Returns ``(k, d, w_a, w_b, n,
    local)`` per hit, by pair: the pair (its position in ``ranges``), the signed distance, the vertex
    and its foot on the plane (world), the normal (world, from the plane towards the mesh) and the
    vertex in its frame (``V``'s row).  ``spin`` (P, 3): each pair's rotation vector of the mesh
    relative to its plane over the step (world, rad), where known: each point's allowance is then
    :func:`rotation_depth`'s (a row of NaN: unknown, :func:`patch_depth`'s)."""
    ranges = np.asarray(ranges, int).reshape(-1, 2)
    if not (ranges[:, 1] - ranges[:, 0]).sum():
        z = np.zeros((0, 3))
        return np.zeros(0, int), np.zeros(0), z, z, z, z
    # each vertex's height above its plane and coordinates along its tangents, n . (R v + p - pb) and
    # likewise: (R^T n) . v + n . (p - pb); one product per pair on its block of V, no vertex moved
    A = np.einsum("kji,kjc->kic", Rm, axes)
    off = np.einsum("kjc,kj->kc", axes, pm - pb)
    g, row, x = _close(V, ranges, A, off, cutoff)                      # x (m, 3): h, t1, t2
    return close_patches(g, x, V[row], Rm, pm, axes, cutoff, margin, spin)


def close_patches(g, x, Vl, Rm, pm, axes, cutoff, margin=None, spin=None):
    """:func:`mesh_plane_patches` from the vertices within their pair's cutoff: ``g`` (m,) their
    pair (sorted, each pair's vertices in order), ``x`` (m, 3) their height and coordinates along
    their plane's tangents, ``Vl`` (m, 3) the vertices in their mesh's frame; ``Rm``, ``pm``,
    ``axes``, ``cutoff``, ``margin``, ``spin`` (per pair) and the result as there.  The blocks and
    each patch's deepest point are found once, for :func:`rotation_depth` and :func:`reduce_patches` both."""
    if not len(g):
        z = np.zeros((0, 3))
        return np.zeros(0, int), np.zeros(0), z, z, z, z
    blocks = _blocks(g)
    h = x[:, 0]
    p0 = _least(h, blocks)
    r = x - x.take(p0.take(blocks[1]), 0)                                    # from each patch's deepest point
    if spin is None or margin is None:
        depth = patch_depth(cutoff, margin).take(g)
    else:
        theta = np.einsum("kji,kj->ki", axes, np.asarray(spin, float))          # in the plane's axes
        unknown = np.isnan(theta).any(axis=1) if np.isnan(theta).any() else None
        w, c = _spin_terms(theta if unknown is None else np.where(unknown[:, None], 0.0, theta))
        depth = _rotation_depth(r, w.take(g, 0), c.take(g))
        if unknown is not None:
            depth = np.where(unknown.take(g), patch_depth(cutoff, margin).take(g), depth)
    keep = _reduce(h, r[:, 1:], blocks, p0, depth)
    g, h, Vl = g.take(keep), h.take(keep), Vl.take(keep, 0)
    W = np.einsum("kij,kj->ki", Rm.take(g, 0), Vl) + pm.take(g, 0)     # the kept vertices in the world
    n = axes[:, :, 0].take(g, 0)
    return g, h, W, W - h[:, None] * n, n, Vl


def _close(V, ranges, A, off, cutoff):
    """``(g, row, x)`` of the vertices within their pair's cutoff (``ranges`` (P, 2): each pair's rows
    of ``V``), by pair (each pair's in order): the
    pair, the vertex's row of ``V`` and its coordinates ``V[row] @ A[g] + off[g]`` (m, 3) (height,
    tangents).  The pairs of one block of ``V`` (a batch of states: a mesh once per state) in one
    product of the heights, the tangents of the vertices within the cutoff alone (to rounding the
    single pair's products)."""
    R = ranges
    if len(R) < 2 or len(np.unique(R[:, 0])) == len(R):
        x = np.concatenate([V[a:b] @ A[k] + off[k] for k, (a, b) in enumerate(R.tolist())])
        count = R[:, 1] - R[:, 0]
        g = np.repeat(np.arange(len(R)), count)
        row = np.arange(len(g)) + np.repeat(R[:, 0] - (np.cumsum(count) - count), count)
        close = np.flatnonzero(x[:, 0] < cutoff[g])
        return g[close], row[close], x[close]
    order = np.argsort(R[:, 0], kind="stable")
    first = np.flatnonzero(np.r_[True, R[order[1:], 0] != R[order[:-1], 0]])
    gs, rows = [], []
    for ks in np.split(order, first[1:]):                 # one mesh: all its pairs (states) at once
        a, b = R[ks[0]]
        h = A[ks, :, 0] @ V[a:b].T + off[ks, :1]          # (G, n): the heights, one product
        k, i = np.nonzero(h < cutoff[ks][:, None])
        gs.append(ks[k]), rows.append(a + i)
    g, row = np.concatenate(gs), np.concatenate(rows)
    at = np.argsort(g, kind="stable")                    # by pair, each pair's vertices in order
    g, row = g[at], row[at]
    return g, row, np.einsum("ij,ijc->ic", V[row], A[g]) + off[g]


def mesh_box_patch(W, Rb, pb, half, closest, cutoff, depth, same):
    """A mesh's hull vertices ``W`` (N, 3) (world) against a box of axes ``Rb`` (3, 3), centre ``pb``
    (3,) and half sizes ``half`` (3,), given the pair's closest points ``closest = (d, w_a, w_b, n)``
    (coal's signed distance, witnesses on the mesh and on the box, unit normal from the box towards
    the mesh): ``(d, w_a, w_b, n)`` (k,), (k, 3) of the patch, the deepest first.  Where ``n`` is a
    face's normal (to 1e-9) the patch holds the hull vertices within ``cutoff`` [m] of that face whose
    feet lie on it, reduced as a plane's (:func:`reduce_patches`, ``depth`` [m] their allowance), and
    the closest pair unless a vertex is as deep (within ``same`` [m]: a face on the face, whose
    closest pair is any of its points, the vertices its corners), and so where the box's witness lies
    inside a face (off its edges by more than ``same``); on an edge or a corner the closest pair alone
    (the box's edge is the patch)."""
    d0, wa0, wb0, n0 = closest
    wa0, wb0, n0 = np.asarray(wa0, float), np.asarray(wb0, float), np.asarray(n0, float)
    one = (np.array([d0]), wa0[None], wb0[None], n0[None])
    nb = (Rb.T @ n0).tolist()                            # the normal in the box's axes
    xb = (Rb.T @ (wb0 - pb)).tolist()                    # the box's witness in its axes
    hl = np.asarray(half, float).tolist()
    out = [abs(xb[j]) - hl[j] for j in range(3)]
    k = max(range(3), key=out.__getitem__)               # (the first largest, as argmax)
    # A witness inside a face (off its edges by more than `same`) is on that face, whatever the normal:
    # between shapes that touch (d0 about 0) coal's normal is poorly determined.
    inside = out[k] > -same and max(out[j] for j in range(3) if j != k) < -same and nb[k] * xb[k] > 0
    if not inside:
        k = max(range(3), key=lambda j: abs(nb[j]))
        if abs(nb[k]) < 1.0 - 1e-9:
            return one
    w = xb[k] if inside else nb[k]
    s = float(w > 0) - float(w < 0)                      # (np.sign)
    nf = s * Rb[:, k]                                    # the face's outward normal (world)
    x = (W - pb) @ Rb                                    # the vertices in the box's axes
    h = x[:, k] * s - hl[k]                              # their heights above the face
    other = [j for j in range(3) if j != k]
    o1, o2 = other
    on = np.flatnonzero((h < cutoff) & (np.abs(x[:, o1]) <= hl[o1]) & (np.abs(x[:, o2]) <= hl[o2]))
    if not len(on):
        return one
    first = int(h[on].min() > d0 + same)                 # 1: the closest pair leads the patch
    T = np.concatenate([((wa0 - pb) @ Rb[:, other])[None][:first], x[on][:, other]])
    dd = np.concatenate([one[0][:first], np.maximum(h[on], d0)])      # the closest pair the deepest (ties: the first)
    keep = reduce_patches(dd, T, np.zeros(len(dd), int), np.full(len(dd), depth))
    keep = keep[np.argsort(dd[keep], kind="stable")]     # the deepest first
    rest = on[keep[keep >= first] - first]
    Wv, hv = W[rest], h[rest]
    return (np.concatenate([one[0][:first], hv]), np.concatenate([one[1][:first], Wv]),
            np.concatenate([one[2][:first], Wv - hv[:, None] * nf]),
            np.concatenate([one[3][:first], np.repeat(nf[None], len(rest), 0)]))
