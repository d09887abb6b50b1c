"""Meshes against planes as a traced kernel: :func:`mesh_plane_heights`, and a scene's mesh-plane pairs.

A mesh touches a plane at the vertices of its convex hull (:mod:`~sparsedyn.contact.reduction`):
the height of vertex ``v`` (in the mesh's frame) above the plane through ``p_b`` of unit normal
``n`` is ``(R^T n) . v + n . (p - p_b)`` with ``(R, p)`` the mesh's world pose, three products and
three sums a vertex.  The NumPy road computes them pair by pair (a product per mesh); here they are
one iterative kernel (:mod:`sparsedyn.symbolic.loop`) of ``q``, as the closed-form pairs'
(:mod:`~sparsedyn.contact.collision_near`), which the compiler builds and differentiates as any other:

* ``init``: the forward kinematics, each pair's ``R^T n`` and ``n . (p - p_b)``, and a lower bound
  of its heights (its bounding sphere's height above the plane), every height set to the bound to
  begin with; a pair is *near* where the bound is at most ``cutoff + SLACK``, and a table of jumps
  leads from each stage to the next near pair's;
* one stage per pair: the heights of its hull vertices;
* ``finish``: the heights and each mesh's world pose.

The hull vertices are data (``hull``, each pair's block in the pair's order), their number per
pair the structure: the compiled kernel is a straight line over every vertex.  :func:`~sparsedyn.collide`
and a step in a scene take the hand-written native loop of :mod:`~sparsedyn.contact.mesh_plane_loop`
instead (the same heights and broad phase, and the patches reduced in the same call), from the
scene's pairs as :func:`mesh_plane_plan` lays them out.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from .. import _checks
from .. import backend as bk
from ..algorithms.kinematics import joint_transforms
from ..kernels import kernel
from ..symbolic.loop import run_stages
from .collision_coal import _bounds, mesh_vertices
from .collision_kernel import _posers
from .collision_near import SLACK
from .reduction import plane_axes

__all__ = ["mesh_plane_heights", "MeshPlanePlan", "mesh_plane_plan"]

#: Constants kept per pair: the mesh's world pose ``R`` (9, row by row), ``p`` (3), ``R^T n`` (3),
#: ``n . (p - p_b)`` (1).
_PER_PAIR = 16


def _shape_rows(model, pairs, **_):
    return 1 + max((max(p[0], p[1]) for p in pairs), default=-1)


def _vertex_count(model, pairs, **_):
    return sum(p[4] for p in pairs)


def _pair_count(model, pairs, **_):
    return len(pairs)


def _check_pairs(model, pairs, who="mesh_plane_heights"):
    for p in pairs:
        if not (isinstance(p, tuple) and len(p) == 5 and all(isinstance(x, (int, np.integer)) for x in p)):
            raise ValueError(f"{who}: each pair is (mesh shape, plane shape, mesh body, plane body, hull vertices) "
                             f"(five integers), got {p!r}")
        if min(p[0], p[1]) < 0 or p[0] == p[1] or not -1 <= min(p[2], p[3]) <= max(p[2], p[3]) < model.nbodies \
                or p[4] < 1:
            raise ValueError(f"{who}: pair {p!r}: shape indices must be distinct and >= 0, bodies in "
                             f"[-1, {model.nbodies}) (-1: the world) and the hull's vertices at least 1")


class _Layout:
    """Where each piece lives in the constants ``K`` (:data:`_PER_PAIR` per pair, then ``P + 1``
    jumps) and the loop state ``S`` (the heights, each pair's rows ``rows[k]:rows[k + 1]``)."""

    def __init__(self, model, pairs):
        self.model, self.pairs = model, pairs
        self.rows = np.concatenate([[0], np.cumsum([p[4] for p in pairs])]).astype(int)
        self.jumps = _PER_PAIR * len(pairs)


def _init(lay, q, shapes, hull, spheres, cutoff):
    """``(K, S)``: each pair's mesh pose, ``R^T n``, ``n . (p - p_b)`` and jump; every height its pair's bound."""
    Xup, _ = joint_transforms(lay.model, q)
    _, shape = _posers(lay.model, q, shapes, Xup)
    P = len(lay.pairs)
    K = np.zeros(lay.jumps + P + 1, dtype=object if bk.is_symbolic(q) else float)
    S = np.zeros(lay.rows[-1], dtype=K.dtype)
    nxt = P + 1.0                                              # the stage after the last: the end
    for k in range(P - 1, -1, -1):                             # stage k + 1 computes pair k
        m, pl, bm, bp, _ = lay.pairs[k]
        R, p, _ = shape(m, bm)
        Rb, pb, _ = shape(pl, bp)
        n = Rb[:, 2]
        a = [R[0, c] * n[0] + R[1, c] * n[1] + R[2, c] * n[2] for c in range(3)]        # R^T n
        w = p - pb
        off = n[0] * w[0] + n[1] * w[1] + n[2] * w[2]
        at = _PER_PAIR * k
        K[at:at + 9], K[at + 9:at + 12], K[at + 12:at + 15], K[at + 15] = np.reshape(R, -1), p, a, off
        c, r = spheres[k, :3], spheres[k, 3]
        b = a[0] * c[0] + a[1] * c[1] + a[2] * c[2] + off - r
        S[lay.rows[k]:lay.rows[k + 1]] = b
        far = 0.5 - 0.5 * bk.copysign(1.0, cutoff + SLACK - b)    # (collision_near's chain of jumps)
        nxt = (1.0 - far) * (k + 1.0) + far * nxt
        K[lay.jumps + k] = nxt - k
    K[lay.jumps + P] = 1.0                                     # the last stage ends the loop
    return K, S


def _stage(lay, s, q, shapes, hull, spheres, cutoff, K, S):
    """Stage ``s``: pair ``s - 1``'s heights (stage 0 computes nothing); the jump to the next."""
    flag = K[lay.jumps + s]
    if s == 0:
        return S, flag
    at = _PER_PAIR * (s - 1)
    a, off = K[at + 12:at + 15], K[at + 15]
    out = S.copy()
    lo, hi = lay.rows[s - 1], lay.rows[s]
    if not bk.is_symbolic(S):                     # floats (the NumPy road): the same operations, a block at once
        v = hull[lo:hi]
        out[lo:hi] = (v[:, 0] * a[0] + v[:, 1] * a[1] + v[:, 2] * a[2]) + off
        return out, flag
    for i in range(lo, hi):
        v = hull[i]
        out[i] = (v[0] * a[0] + v[1] * a[1] + v[2] * a[2]) + off
    return out, flag


def _finish(lay, q, shapes, hull, spheres, cutoff, K, S):
    P = len(lay.pairs)
    poses = K[:lay.jumps].reshape(P, _PER_PAIR)[:, :12] if P else np.zeros((0, 12), dtype=K.dtype)
    return S, poses


def _pieces(model, pairs):
    lay = _Layout(model, pairs)
    return (partial(_init, lay), [partial(_stage, lay, s) for s in range(len(pairs) + 1)], partial(_finish, lay))


def _program(model, static, optional):
    """The :class:`~sparsedyn.symbolic.loop.LoopProgram` of :func:`mesh_plane_heights` at ``static["pairs"]``."""
    from ..symbolic.loop import trace_loop
    pairs = tuple(tuple(p) for p in static["pairs"])
    k = mesh_plane_heights.__kernel__
    _check_pairs(model, pairs)
    shapes = k.shapes(model, pairs=pairs)
    init, stages, finish = _pieces(model, pairs)
    return trace_loop(k.variant({"pairs": pairs}).name, [(n, shapes[n]) for n in k.inputs],
                      [(n, shapes[n]) for n in k.outputs], init, stages, finish, cap=len(pairs) + 2)


@kernel(inputs={"q": ("nq",), "shapes": (_shape_rows, 15), "hull": (_vertex_count, 3), "spheres": (_pair_count, 4),
                "cutoff": ()}, static=("pairs",), sequences=("pairs",),
        outputs={"heights": (_vertex_count,), "poses": (_pair_count, 12)}, program=_program)
def mesh_plane_heights(model, q, shapes, hull, spheres, cutoff, pairs):
    """The heights of meshes' hull vertices above planes at ``q`` (:mod:`~sparsedyn.contact.mesh_plane`),
    with a broad phase: ``(heights, poses)``, ``heights`` (..., N) [m] per vertex of ``hull`` (negative:
    below the plane) for the pairs whose bounding sphere may come within ``cutoff`` [m] of the plane
    (a farther pair's rows hold a lower bound of its heights, above ``cutoff``), ``poses`` (..., P, 12)
    each pair's mesh world pose ``[R row by row, p]``.

    ``q`` (..., nq); ``shapes`` (..., S, 15): per shape its placement in its body (or the world)
    ``[R row by row (9), p (3)]`` and 3 entries unused here
    (:func:`~sparsedyn.collision_candidates`' table); ``hull`` (..., N, 3): the pairs' hull vertices in
    their meshes' frames, pair after pair; ``spheres`` (..., P, 4): each pair's mesh's bounding sphere
    ``[centre in its frame (3), radius]``; ``cutoff`` (...,) [m]; ``pairs`` (static): ``(mesh shape,
    plane shape, mesh body, plane body, vertices)`` (rows of ``shapes``, bodies: -1 the world; the plane
    is its shape's xy plane, normal +z).

    >>> import numpy as np, sparsedyn as sd
    >>> b = sd.ModelBuilder("cube").add_body("cube", None, sd.make_joint("free"), mass=1.0,
    ...                                       rot_inertia=np.eye(3) * 0.004)
    >>> shapes = np.zeros((2, 15)); shapes[:, [0, 4, 8]] = 1                   # a mesh, a floor
    >>> hull = np.array([[x, y, z] for x in (-.1, .1) for y in (-.1, .1) for z in (-.1, .1)])
    >>> h, poses = sd.mesh_plane_heights(b.build(), [0, 0, 0.09, 0, 0, 0, 1], shapes, hull, [[0, 0, 0, 0.18]],
    ...                                  0.005, [(0, 1, 0, -1, 8)])
    >>> h.round(12).tolist()[:4], poses[0, 9:].tolist()
    ([-0.01, 0.19, -0.01, 0.19], [0.0, 0.0, 0.09])
    """
    who = "mesh_plane_heights"
    pairs = tuple(tuple(p) if isinstance(p, list) else p for p in pairs)
    _check_pairs(model, pairs, who)
    q = _checks.configuration(model, q)
    S, N, P = _shape_rows(model, pairs), _vertex_count(model, pairs), len(pairs)
    shapes = _checks.numeric("shapes", shapes, f"shape placements (..., {S}, 15)")
    hull = _checks.numeric("hull", hull, f"hull vertices (..., {N}, 3)")
    spheres = _checks.numeric("spheres", spheres, f"bounding spheres (..., {P}, 4)")
    cutoff = _checks.numeric("cutoff", cutoff, "a number (...,)")
    for name, x, tail in (("shapes", shapes, (S, 15)), ("hull", hull, (N, 3)), ("spheres", spheres, (P, 4)),
                          ("cutoff", cutoff, ())):
        if x.shape[x.ndim - len(tail):] != tail:
            raise ValueError(f"{who}: {name} must have shape (..., {', '.join(map(str, tail))}), got {x.shape}")
        if not bk.is_symbolic(x) and not np.all(np.isfinite(x)):
            raise ValueError(f"{who}: {name} must be finite, got a non-finite value")
    init, stages, finish = _pieces(model, pairs)
    batch = np.broadcast_shapes(q.shape[:-1], shapes.shape[:-2], hull.shape[:-2], spheres.shape[:-2], cutoff.shape)
    args = [np.broadcast_to(x, batch + x.shape[x.ndim - n:]) for x, n in ((q, 1), (shapes, 2), (hull, 2),
                                                                           (spheres, 2), (cutoff, 0))]
    out = [run_stages(init, stages, finish, [x[i] for x in args])[0] for i in np.ndindex(batch)]
    if not out:
        return np.zeros(batch + (N,)), np.zeros(batch + (P, 12))
    return (np.stack([np.asarray(h, float) for h, _ in out]).reshape(batch + (N,)),
            np.stack([np.asarray(x, float) for _, x in out]).reshape(batch + (P, 12)))


# --- a scene's mesh-plane pairs ---------------------------------------------------------------------

class MeshPlanePlan:
    """What the native mesh-plane road of a scene needs, computed once and kept by the scene
    (:func:`mesh_plane_plan`): ``pairs`` (the static argument), ``shapes`` (S, 15), ``hull`` (N, 3),
    ``spheres`` (P, 4) (:func:`mesh_plane_heights`' arguments), ``pair`` (P,) each pair's scene pair,
    ``row_pair`` (N,) each hull row's
    pair, ``axes`` (P, 3, 3) the planes' :func:`~sparsedyn.contact.reduction.plane_axes` and ``pb``
    (P, 3) their points (world planes: constants), ``inside`` (scene pairs,) bool: the pairs here,
    ``margins`` (P,) the scene's margin per pair."""

    __slots__ = ("pairs", "shapes", "hull", "spheres", "pair", "row_pair", "axes", "pb", "inside", "margins")


def mesh_plane_plan(scene):
    """The scene's pairs of a robot mesh and a world plane as :func:`mesh_plane_heights` takes them
    (a :class:`MeshPlanePlan`), or None where it has none; kept by the scene."""
    key = "mesh-plane plan"
    if key in scene.cache:
        return scene.cache[key]
    shapes, idx = scene.shapes, scene.index
    V, rows = mesh_vertices(scene)
    c, r = _bounds(scene)
    mine = []                                  # (a robot shape's pair names it first: the mesh, then the plane)
    for k, (m, pl) in enumerate(idx.tolist()):
        if shapes[m].kind == "mesh" and shapes[pl].kind == "plane" and shapes[pl].body < 0 <= shapes[m].body:
            mine.append((k, m, pl))
    if not mine:
        scene.cache[key] = None
        return None
    mp = MeshPlanePlan()
    mp.pairs = tuple((m, pl, shapes[m].body, shapes[pl].body, rows[m][1] - rows[m][0]) for _, m, pl in mine)
    table = np.zeros((1 + max(max(m, pl) for _, m, pl in mine), 15))
    for i in range(len(table)):
        table[i, :9], table[i, 9:12] = shapes[i].R.reshape(-1), shapes[i].p
    mp.shapes = table
    mp.hull = np.concatenate([V[rows[m][0]:rows[m][1]] for _, m, _ in mine])
    mp.spheres = np.array([np.r_[c[m], r[m]] for _, m, _ in mine])
    mp.pair = np.array([k for k, _, _ in mine], int)
    mp.margins = np.full(len(mine), float(scene.margin))
    mp.row_pair = np.repeat(np.arange(len(mine)), [p[4] for p in mp.pairs])
    mp.axes = plane_axes(np.array([shapes[pl].R[:, 2] for _, _, pl in mine]))
    mp.pb = np.array([shapes[pl].p for _, _, pl in mine])
    mp.inside = np.zeros(len(idx), bool)
    mp.inside[mp.pair] = True
    scene.cache[key] = mp
    return mp
