"""The closed-form pairs of a scene as one kernel: :func:`collision_candidates`.

:func:`~sparsedyn.collide` finds the hits of primitive pairs with closed forms vectorised over the
pairs of a kind (:mod:`~sparsedyn.contact.collision`), a few dozen NumPy calls a query.  The same
closed forms written on 3-vectors without a branch (a choice is a product with a 0/1 step, as in the
contact step's solver) make one straight-line program of ``q``: the shapes' world poses (the forward
kinematics of :func:`~sparsedyn.geometry_placements`) and, for every pair, a fixed number of
*candidates* (a sphere or a capsule's end against a plane, a box's eight corners, the eight rim
points of a cylinder, an ellipsoid's support point, the closest points of two spheres or capsules, a
sphere or a capsule against a box: :mod:`~sparsedyn.contact.box_pairs`, a sphere against a cylinder or
an ellipsoid), each with its signed distance.  The compiler traces it and a plain call runs it as one
native call; a hit is a candidate closer than the scene's margin.  Every candidate's distance is at
least the pair's, so computing all of them leaves out no broad phase: the hits are those of the
vectorised closed forms.

The pairs are the static argument (their kinds, shape indices and bodies: the structure); the
shapes' placements in their bodies (or the world) and their sizes are data, ``shapes`` (S, 15)
``[R (3, 3) row by row, p (3,), size (up to 3, zero padded)]``, so a scene with other sizes or world
poses reuses the build.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .. import backend as bk
from ..algorithms.kinematics import joint_transforms, world_transforms
from ..kernels import kernel
from ..model.spatial import compose, from_pose, pose
from .box_pairs import _clip, _clip01, _pick, box_candidates, merge_close
from .ellipsoid import _FLOOR
from .friction_problem import _TINY, _abs, _step

__all__ = ["collision_candidates", "CANDIDATES", "CANDIDATE_COLUMNS", "MIN_FEATURE", "KernelPlan", "kernel_plan"]

#: ``(kind_a, kind_b) -> candidates per pair`` of the pairs :func:`collision_candidates` computes (either
#: order of the kinds).
CANDIDATES = {("sphere", "plane"): 1, ("capsule", "plane"): 2, ("box", "plane"): 8, ("cylinder", "plane"): 8,
              ("sphere", "sphere"): 1, ("sphere", "capsule"): 1, ("capsule", "capsule"): 1, ("sphere", "box"): 1,
              ("capsule", "box"): 3, ("sphere", "cylinder"): 1, ("ellipsoid", "plane"): 1, ("ellipsoid", "sphere"): 1}

#: Newton's iterations of an ellipsoid's closest point to a sphere's centre (:func:`_ellipsoid_sphere`).  The
#: NumPy road (:func:`~sparsedyn.contact.ellipsoid.ellipsoid_closest`) stops where the iterate no longer rises;
#: from its start (where ``F <= 2``) it stopped within 15 on 300,000 random points (inside, outside, on planes
#: of symmetry) of ellipsoids of aspect up to 1,000.  Past that stop each iteration here keeps its iterate, so
#: the two agree wherever the NumPy road stops within these.
ELLIPSOID_NEWTON = 40

#: The number of columns of a candidate, in order ``d``, the witness points ``w_a`` and ``w_b`` (world),
#: ``w_a`` in the axes of ``a``'s body about its origin, the unit normal ``n`` from ``b`` towards ``a``
#: (world) and ``n . w_b`` (the plane through ``w_b`` is ``n . x = n . w_b``).
CANDIDATE_COLUMNS = 14

_EZ = np.array([0.0, 0.0, 1.0])
_SIGNS = [(sx, sy, sz) for sx in (-1.0, 1.0) for sy in (-1.0, 1.0) for sz in (-1.0, 1.0)]


# --- branch-free arithmetic on 3-vectors (floats or traced values; _pick, _clip, _clip01: box_pairs') -----

def _dot(x, y):
    return x[0] * y[0] + x[1] * y[1] + x[2] * y[2]


def _mv(R, x):
    return np.array([R[i, 0] * x[0] + R[i, 1] * x[1] + R[i, 2] * x[2] for i in range(3)], dtype=R.dtype)


def _cross(x, y):
    return np.array([x[1] * y[2] - x[2] * y[1], x[2] * y[0] - x[0] * y[2], x[0] * y[1] - x[1] * y[0]],
                    dtype=np.result_type(x, y))


# --- the closed forms: each returns [(d, w_a, w_b, n)], n from b towards a (those of collision.py) ------

def _sphere_sphere(ca, ra, cb, rb):
    w = ca - cb
    L = bk.sqrt(_dot(w, w))
    pos = _step(L - _TINY)
    n = pos * (w / _pick(pos, L, 1.0)) + (1.0 - pos) * _EZ
    return [(L - ra - rb, ca - ra * n, cb + rb * n, n)]


def _sphere_capsule(ca, ra, pb, ub, hb, rb):
    t = _clip(_dot(ca - pb, ub), -hb, hb)
    return _sphere_sphere(ca, ra, pb + t * ub, rb)


def _capsule_capsule(pa, ua, ha, ra, pb, ub, hb, rb):
    """Ericson, "Real-Time Collision Detection", 2005, section 5.1.9, as in ``collision.capsule_capsule``."""
    P0, d1 = pa - ha * ua, (2 * ha) * ua
    Q0, d2 = pb - hb * ub, (2 * hb) * ub
    r = P0 - Q0
    a, e, f, c, b = _dot(d1, d1), _dot(d2, d2), _dot(d2, r), _dot(d1, r), _dot(d1, d2)
    den = a * e - b * b
    par = _step(1e-12 * a * e - den)                              # parallel segments
    s = (1.0 - par) * _clip01((b * f - c * e) / _pick(par, 1.0, den))
    t = (b * s + f) / e
    below, above = 1.0 - _step(t), 1.0 - _step(1.0 - t)
    s = _pick(below, _clip01(-c / a), _pick(above, _clip01((b - c) / a), s))
    t = _clip01(t)
    return _sphere_sphere(P0 + s * d1, ra, Q0 + t * d2, rb)


def _sphere_cylinder(ca, ra, Rb, pb, hb, rb):
    """``collision.sphere_cylinder`` without a branch: the centre's nearest point of the solid cylinder
    (its axis ``Rb``'s z, half length ``hb``, radius ``rb``), or from inside the nearer of the side and the
    caps (on the axis, the side along the cylinder's x)."""
    w = ca - pb
    x = [Rb[0, i] * w[0] + Rb[1, i] * w[1] + Rb[2, i] * w[2] for i in range(3)]     # the centre, cylinder axes
    r = bk.sqrt(x[0] * x[0] + x[1] * x[1])
    pos = _step(r - _TINY)
    e = [pos * (x[0] / _pick(pos, r, 1.0)) + (1.0 - pos), pos * (x[1] / _pick(pos, r, 1.0))]   # radial
    out = 1.0 - _step(rb - r)                                     # beyond the side
    y = [_pick(out, rb * e[0], x[0]), _pick(out, rb * e[1], x[1]), _clip(x[2], -hb, hb)]
    g = [x[i] - y[i] for i in range(3)]
    L = bk.sqrt(g[0] * g[0] + g[1] * g[1] + g[2] * g[2])
    side_gap, cap_gap = rb - r, hb - _abs(x[2])
    inside = _step(side_gap) * _step(cap_gap)                     # (decided on the coordinates, as there)
    up = 2.0 * _step(x[2]) - 1.0
    side = 1.0 - _step(side_gap - cap_gap)                        # (inside) the side nearer than the caps
    n_in = [side * e[0], side * e[1], (1.0 - side) * up]
    y_in = [_pick(side, rb * e[0], x[0]), _pick(side, rb * e[1], x[1]), _pick(side, x[2], up * hb)]
    inv = 1.0 / _pick(inside, 1.0, L)
    n = [_pick(inside, n_in[i], g[i] * inv) for i in range(3)]
    d = _pick(inside, -_pick(_step(cap_gap - side_gap), side_gap, cap_gap), L) - ra
    nw, yw = _mv(Rb, np.array(n, dtype=Rb.dtype)), _mv(Rb, np.array([_pick(inside, y_in[i], y[i]) for i in range(3)],
                                                                      dtype=Rb.dtype))
    return [(d, ca - ra * nw, pb + yw, nw)]


def _max(a, b):
    return _pick(_step(a - b), a, b)


def _ellipsoid_sphere(Ra, pa, e, cb, rb):
    """``ellipsoid.ellipsoid_sphere`` without a branch: the closest point of the ellipsoid of orientation
    ``Ra``, centre ``pa`` and semi-axes ``e`` to the sphere's centre ``cb`` (Eberly's root by
    :data:`ELLIPSOID_NEWTON` of Newton's iterations, each kept only where it rises, in
    ``ellipsoid._closest_one``'s order), less the radius ``rb``; ``n`` from the sphere towards the ellipsoid."""
    w = cb - pa
    y = [Ra[0, i] * w[0] + Ra[1, i] * w[1] + Ra[2, i] * w[2] for i in range(3)]       # the centre, its axes
    sign = [2.0 * _step(c) - 1.0 for c in y]
    b = [x * x for x in e]
    low = _FLOOR * _pick(_step(e[1] - e[0]), _pick(_step(e[2] - e[0]), e[0], e[2]),
                         _pick(_step(e[2] - e[1]), e[1], e[2]))
    z = [_max(_abs(c), low) for c in y]
    a2 = [(x * c) * (x * c) for x, c in zip(e, z)]
    t = _max(_max(e[0] * z[0] - b[0], e[1] * z[1] - b[1]), e[2] * z[2] - b[2])
    for _ in range(ELLIPSOID_NEWTON):
        v = [1.0 / (t + bx) for bx in b]
        F = a2[0] * v[0] * v[0] + a2[1] * v[1] * v[1] + a2[2] * v[2] * v[2] - 1.0
        s = F / (2.0 * (a2[0] * v[0] * v[0] * v[0] + a2[1] * v[1] * v[1] * v[1] + a2[2] * v[2] * v[2] * v[2]))
        t = _pick(_step((t + s) - t), t + s, t)                 # (t + s == t: either is t)
    u = [sg * c / (t + bx) for sg, c, bx in zip(sign, z, b)]
    L = bk.sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2])
    x = [bx * c for bx, c in zip(b, u)]
    r = [c / ex for c, ex in zip(x, e)]
    h = bk.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2])
    n = -_mv(Ra, np.array([c / L for c in u], dtype=Ra.dtype))
    return [(t * L - rb, _mv(Ra, np.array([c / h for c in x], dtype=Ra.dtype)) + pa, cb + rb * n, n)]


def _on_plane(x, r, nb, pb):
    h = _dot(x - pb, nb)
    return h - r, x - r * nb, x - h * nb, nb


def _ellipsoid_plane(R, p, e, nb, pb):
    """``closed_forms.ellipsoid_plane``: the support point along ``-nb`` of the ellipsoid of semi-axes ``e``
    (its frame's axes), ``p - R E^2 R^T nb / |E R^T nb|``, against the plane."""
    m = [e[i] * (R[0, i] * nb[0] + R[1, i] * nb[1] + R[2, i] * nb[2]) for i in range(3)]     # E R^T n
    h = bk.sqrt(m[0] * m[0] + m[1] * m[1] + m[2] * m[2])
    x = p - _mv(R, np.array([e[i] * m[i] for i in range(3)], dtype=R.dtype)) / h
    d = _dot(p - pb, nb) - h
    return d, x, x - d * nb, nb


def _shape_plane(kind, R, p, size, nb, pb):
    """The candidates of a ``kind`` shape of pose ``(R, p)`` against the plane ``(nb, pb)``."""
    if kind == "sphere":
        return [_on_plane(p, size[0], nb, pb)]
    if kind == "capsule":
        h, u = size[1] / 2, R[:, 2]
        return [_on_plane(p - h * u, size[0], nb, pb), _on_plane(p + h * u, size[0], nb, pb)]
    if kind == "ellipsoid":
        return [_ellipsoid_plane(R, p, size, nb, pb)]
    if kind == "box":
        half = [size[0] / 2, size[1] / 2, size[2] / 2]
        return [_on_plane(p + _mv(R, np.array([sx * half[0], sy * half[1], sz * half[2]], dtype=R.dtype)), 0.0, nb,
                          pb) for sx, sy, sz in _SIGNS]
    # a cylinder: four points of each rim (collision.cylinder_plane)
    u, h, r = R[:, 2], size[1] / 2, size[0]
    w = nb - _dot(nb, u) * u
    L = bk.sqrt(_dot(w, w))
    up = _step(1e-12 - L)                                         # upright: any radial direction
    w = _pick(up, R[:, 0], w / _pick(up, 1.0, L))
    v = _cross(u, w)
    return [_on_plane(p + (s * h) * u + r * d, 0.0, nb, pb) for s in (-1.0, 1.0) for d in (-w, w, v, -v)]


def _pair(kind_a, kind_b, A, B):
    """The candidates of shapes ``A = (R, p, size)`` of ``kind_a`` and ``B`` of ``kind_b`` (a key of
    :data:`CANDIDATES` in this order)."""
    (Ra, pa, sa), (Rb, pb, sb) = A, B
    if kind_a == "ellipsoid" and kind_b == "sphere":
        return _ellipsoid_sphere(Ra, pa, sa, pb, sb[0])
    if kind_b == "plane":
        return _shape_plane(kind_a, Ra, pa, sa, Rb[:, 2], pb)
    if kind_b == "box":
        return box_candidates(kind_a, Ra, pa, sa, Rb, pb, sb)
    if kind_b == "cylinder":
        return _sphere_cylinder(pa, sa[0], Rb, pb, sb[1] / 2, sb[0])
    if kind_b == "sphere":
        return _sphere_sphere(pa, sa[0], pb, sb[0])
    if kind_a == "sphere":
        return _sphere_capsule(pa, sa[0], pb, Rb[:, 2], sb[1] / 2, sb[0])
    return _capsule_capsule(pa, Ra[:, 2], sa[1] / 2, sa[0], pb, Rb[:, 2], sb[1] / 2, sb[0])


# --- the kernel --------------------------------------------------------------------------------------

def _shape_count(model, pairs, **_):
    return 1 + max((max(p[2], p[3]) for p in pairs), default=-1)


def _candidate_count(model, pairs, **_):
    return sum(_per_pair(p) for p in pairs)


def _per_pair(p):
    n = CANDIDATES.get((p[0], p[1]), CANDIDATES.get((p[1], p[0])))
    if n is None:
        raise ValueError(f"collision_candidates: pair {p!r}: kinds ({p[0]!r}, {p[1]!r}) have no closed form here "
                         f"(pairs of {sorted({k for key in CANDIDATES for k in key})}: {list(CANDIDATES)})")
    return n


def _check_pairs(model, pairs, who="collision_candidates"):
    for p in pairs:
        if not (isinstance(p, tuple) and len(p) == 6 and all(isinstance(x, (int, np.integer)) for x in p[2:])):
            raise ValueError(f"{who}: each pair is (kind_a, kind_b, shape_a, shape_b, body_a, body_b) "
                             f"(two kinds, four integers), got {p!r}")
        _per_pair(p)
        if min(p[2], p[3]) < 0 or p[2] == p[3] or not -1 <= min(p[4], p[5]) <= max(p[4], p[5]) < model.nbodies:
            raise ValueError(f"{who}: pair {p!r}: shape indices must be distinct and >= 0 and bodies "
                             f"in [-1, {model.nbodies}) (-1: the world)")


@kernel(inputs={"q": ("nq",), "shapes": (_shape_count, 15)}, static=("pairs",), sequences=("pairs",),
        outputs={"candidates": (_candidate_count, CANDIDATE_COLUMNS)})
def collision_candidates(model, q, shapes, pairs):
    """Signed distances and witness points of closed-form shape pairs at ``q``
    (:mod:`~sparsedyn.contact.collision_kernel`):
    ``candidates`` (..., K, 14), per candidate ``[d, w_a (3), w_b (3), w_a in body a (3), n (3), n . w_b]``
    (world; ``n`` unit, from ``b`` towards ``a``; ``d`` negative: penetration), the pairs in order and
    the candidates of a pair as :mod:`~sparsedyn.contact.collision` orders its hits.

    ``q`` (..., nq); ``shapes`` (..., S, 15): per shape its placement in its body (or the world)
    ``[R row by row (9), p (3)]`` and its size (the :class:`~sparsedyn.Shape` vocabulary, zero
    padded to 3); ``pairs`` (static): ``(kind_a, kind_b, shape_a, shape_b, body_a, body_b)``, kinds
    among :data:`CANDIDATES` (either order), rows of ``shapes`` and bodies (-1: the world).  ``w_a``
    in body a: in the body's axes about its origin (the world's for body -1).

    >>> import numpy as np, sparsedyn as sd
    >>> b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=1.0,
    ...                                       rot_inertia=np.eye(3) * 0.004)
    >>> shapes = np.zeros((2, 15)); shapes[:, [0, 4, 8]] = 1; shapes[0, 12] = 0.1    # a ball, a floor
    >>> c = sd.collision_candidates(b.build(), [0, 0, 0.09, 0, 0, 0, 1], shapes, [("sphere", "plane", 0, 1, 0, -1)])
    >>> c[:, 0].round(12).tolist(), c[:, 7:10].round(12).tolist(), c[:, 10:13].tolist()
    ([-0.01], [[0.0, 0.0, -0.1]], [[0.0, 0.0, 1.0]])
    """
    pairs = tuple(tuple(p) if isinstance(p, list) else p for p in pairs)
    _check_pairs(model, pairs)
    q = _checks.configuration(model, q)
    S = _shape_count(model, pairs)
    shapes = _checks.numeric("shapes", shapes, f"shape placements and sizes (..., {S}, 15)")
    if shapes.shape[-2:] != (S, 15):
        raise ValueError(f"collision_candidates: shapes must have shape (..., {S}, 15), got {shapes.shape}")
    if not bk.is_symbolic(shapes) and not np.all(np.isfinite(shapes)):
        raise ValueError(f"collision_candidates: shapes must be finite, got a non-finite value in row "
                         f"{int(np.argwhere(~np.isfinite(shapes))[0][-2])}")
    batch = np.broadcast_shapes(q.shape[:-1], shapes.shape[:-2])
    if batch:                                     # one state at a time (the compiled form batches itself)
        qb, sb = np.broadcast_to(q, batch + q.shape[-1:]), np.broadcast_to(shapes, batch + (S, 15))
        return np.stack([collision_candidates.__kernel__.fn(model, qb[i], sb[i], pairs)
                         for i in np.ndindex(batch)]).reshape(batch + (-1, CANDIDATE_COLUMNS))
    body, shape = _posers(model, q, shapes)
    rows = [r for p in pairs for r in _pair_rows(p, shape(p[2], p[4]), shape(p[3], p[5]), body)]
    if not rows:
        return np.zeros((0, CANDIDATE_COLUMNS), dtype=object if bk.is_symbolic(q) else float)
    return np.stack(rows)


def _posers(model, q, shapes, Xup=None):
    """``(body, shape)``: ``body(j)`` the world pose ``(R, o)`` of body ``j`` at ``q``; ``shape(i, j)``
    the world pose and size ``(R, p, size)`` of row ``i`` of ``shapes`` on body ``j`` (-1: the world);
    each computed once.  ``Xup``: :func:`~sparsedyn.algorithms.kinematics.joint_transforms`' at ``q``
    if known."""
    if Xup is None:
        Xup, _ = joint_transforms(model, q)
    X0 = world_transforms(model, Xup)
    bodies = {}                                   # body -> (R, o) world pose
    placed = {}                                   # shape -> (R, p, size) world pose and size

    def body(j):
        if j not in bodies:
            bodies[j] = pose(X0[j])
        return bodies[j]

    def shape(i, j):
        if i not in placed:
            R, p = shapes[i, :9].reshape(3, 3), shapes[i, 9:12]
            if j >= 0:
                R, p = pose(compose(from_pose(R, p), X0[j]))
            placed[i] = (R, p, shapes[i, 12:15])
        return placed[i]
    return body, shape


def _pair_rows(pair, A, B, body):
    """The candidate rows (14 columns each) of ``pair`` ``(kind_a, kind_b, a, b, body_a, body_b)`` whose
    shapes are ``A``, ``B`` ``(R, p, size)`` (world); ``body(j)``: the world pose of body ``j``."""
    kind_a, kind_b, _, _, ja, _ = pair
    swap = (kind_a, kind_b) not in CANDIDATES
    got = _pair(kind_b, kind_a, B, A) if swap else _pair(kind_a, kind_b, A, B)
    Rb, ob = body(ja) if ja >= 0 else (np.eye(3), np.zeros(3))
    rows = []
    if swap:
        got = [(d, wb, wa, -n) for d, wa, wb, n in got]
    if {kind_a, kind_b} == {"capsule", "box"}:                 # its candidates may share a point on a
        got = merge_close(got)
    for d, wa, wb, n in got:
        local = (wa - ob) @ Rb if ja >= 0 else wa
        n = np.broadcast_to(n, (3,))
        rows.append(np.concatenate([np.reshape(d, (1,)), wa, wb, local, n, np.reshape(_dot(n, wb), (1,))]))
    return rows


# --- a scene's pairs for the kernel ----------------------------------------------------------------------

#: A shape with several candidates (a capsule's ends, a box's corners, a cylinder's rim points) goes to
#: the kernel only where they are farther apart than this [m]: then no two round to one hit (collision's
#: ``SAME_POINT``), so the kernel's candidates are the vectorised road's hits without its merge of close points.
MIN_FEATURE = 1e-6


class Pairs(tuple):
    """The static argument ``pairs`` as a scene keeps it: a tuple that computes its hash and its repr
    once.  A plain call looks its compiled kernel up by its static arguments, hashing them (a batch:
    by their repr); a tuple hashes its items at every call (on the humanoid's 161 pairs, a third of
    the collision kernel's time) and writes them out (70 us)."""

    def __hash__(self):
        h = self.__dict__.get("hash")
        if h is None:
            h = self.__dict__["hash"] = tuple.__hash__(self)
        return h

    def __repr__(self):
        r = self.__dict__.get("repr")
        if r is None:
            r = self.__dict__["repr"] = tuple.__repr__(self)
        return r


class KernelPlan:
    """What the kernel road of a scene needs, computed once and kept by the scene
    (:func:`kernel_plan`): ``pairs`` (the static argument), ``shapes`` (S, 15), ``pair`` (K,) the
    scene pair of each candidate, ``inside`` (P,) bool, whether each scene pair is in the kernel,
    ``complete``: whether all are, ``cutoff`` (a 0-d array) the scene's margin."""

    __slots__ = ("pairs", "shapes", "pair", "inside", "complete", "cutoff")

    def __init__(self, pairs, shapes, pair, inside, cutoff=0.0):
        self.pairs, self.shapes, self.pair, self.inside = pairs, shapes, pair, inside
        self.complete = bool(inside.all())
        self.cutoff = np.array(float(cutoff))


def _separated(s):
    """Whether the candidates of shape ``s`` against a plane are :data:`MIN_FEATURE` apart."""
    if s.kind == "capsule":
        return s.size[1] >= MIN_FEATURE
    if s.kind in ("box", "cylinder"):
        return min(s.size) >= MIN_FEATURE
    return True


def kernel_plan(scene, world_only=False) -> KernelPlan:
    """The pairs of ``scene`` (with ``world_only``, its robot-world pairs) that :func:`collision_candidates`
    computes: those of :data:`CANDIDATES`' kinds whose shapes' candidates are :data:`MIN_FEATURE` apart."""
    key = ("kernel plan", world_only)
    plan = scene.cache.get(key)
    if plan is not None:
        return plan
    shapes = scene.shapes
    pairs, pair, inside = [], [], np.zeros(len(scene.index), bool)
    for k, (i, j) in enumerate(scene.index.tolist()):
        a, b = shapes[i], shapes[j]
        kinds = (a.kind, b.kind)
        n = CANDIDATES.get(kinds, CANDIDATES.get(kinds[::-1]))
        if n is None or (world_only and b.body >= 0) or not (_separated(a) and _separated(b)):
            continue
        pairs.append((a.kind, b.kind, i, j, a.body, b.body))
        pair += [k] * n
        inside[k] = True
    table = np.zeros((_shape_count(None, pairs), 15))
    for i in range(len(table)):
        s = shapes[i]
        size = s.size[:3]       # (a height field's four, between the pairs' shapes, are no kernel pair's)
        table[i, :9], table[i, 9:12], table[i, 12:12 + len(size)] = s.R.reshape(-1), s.p, size
    plan = scene.cache[key] = KernelPlan(Pairs(pairs), table, np.array(pair, int), inside, scene.margin)
    return plan
