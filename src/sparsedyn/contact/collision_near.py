"""The closed-form pairs of a scene with a broad phase: :func:`collision_candidates_near`.

:func:`~sparsedyn.collision_candidates` computes every candidate of every pair, one straight-line
program: on dm_control's humanoid (161 pairs, 100 of them capsule-capsule) that is 23,000 operations
a call, most of them on pairs far apart.  Here the same closed forms run only for the pairs that may
be within a ``cutoff``, as MuJoCo's collision detection does (a bounding test before the narrow
phase).  The program is an iterative kernel (:mod:`sparsedyn.symbolic.loop`):

* ``init``: the forward kinematics, every shape's world pose, and each pair's lower bound ``b`` of
  its distance (bounding spheres for two shapes; for a shape against a plane its support along the
  normal: exact for spheres, capsules, boxes and ellipsoids, a bounding sphere for a cylinder; against a
  box the other shape's bounding sphere's distance to the box); a pair is *near*
  where ``b <= cutoff + SLACK``; the loop state holds every candidate row, ``[b, 0, ...]`` to begin
  with, and a table of jumps from each stage to the next near pair's;
* one stage per pair: its candidates' rows (those of :func:`~sparsedyn.collision_candidates`), and
  the jump to the next near pair (the driver skips the stages between);
* ``finish``: the rows.

So a near pair's candidates are :func:`~sparsedyn.collision_candidates`' own (to rounding), and a
far pair's rows are ``[b, 0, ...]`` with ``b > cutoff``: a caller keeping the candidates closer than
``cutoff`` gets the same hits.
"""

from __future__ import annotations

from functools import partial

import numpy as np

from .. import _checks
from .. import backend as bk
from ..algorithms.kinematics import joint_transforms, velocity_pass
from ..kernels import kernel, native_calls
from ..symbolic.loop import run_stages
from .collision_kernel import _check_pairs, _max, _pair_rows, _per_pair, _posers, _shape_count

__all__ = ["collision_candidates_near", "collision_candidates_ahead", "near_call", "near_rows", "NEAR_COLUMNS", "SLACK",
           "hit_rows", "free_rows"]

#: Columns of a row of :func:`collision_candidates_near`: ``[d, x (3), n (3), w_a in body a (3), n . w_b]``,
#: ``x = (w_a + w_b) / 2`` the midpoint of the witness points (world; ``w_a = x + d n / 2``); the others
#: those of :func:`~sparsedyn.collision_candidates`.
NEAR_COLUMNS = 11


def free_rows(shape):
    """Rows of :data:`NEAR_COLUMNS` columns that hold no candidate: ``shape`` (..., k) of them, each with
    ``d`` +inf and zeros elsewhere (a new array)."""
    out = np.zeros(tuple(shape) + (NEAR_COLUMNS,))
    out[..., 0] = np.inf
    return out

#: The entries of a shape's world pose kept in the constants, by kind: ``R``'s columns (the axis
#: alone for a capsule and a plane's normal, none for a sphere), then ``p``.
_KEPT = {"sphere": (), "capsule": (2,), "plane": (2,), "box": (0, 1, 2), "cylinder": (0, 1, 2),
         "ellipsoid": (0, 1, 2)}

#: A pair is computed where its lower bound is at most ``cutoff`` plus this [m], so that the rounding
#: of the bound (a formula other than the candidates') never leaves out a candidate within ``cutoff``.
SLACK = 1e-9


def hit_rows(scene, a, Ra, pa, d, wa, wb, n):
    """Hits as rows of :data:`NEAR_COLUMNS` (m, 11) ``[d, x (3), n (3), w_a in a's body axes (3), n . w_b]``
    (:func:`collision_candidates_near`'s columns): each hit's shape ``a`` (m,) (the pair's first) at
    its world placement ``Ra`` (m, 3, 3), ``pa`` (m, 3), signed distance ``d`` (m,), witness points
    ``wa`` on ``a`` and ``wb`` (m, 3) and unit normal ``n`` (m, 3) from ``b`` towards ``a`` (world),
    ``x`` their midpoint; ``w_a`` is taken into ``a``'s frame, then through the shape's placement in its
    body."""
    E, r = _in_bodies(scene)
    E, r = E[a], r[a]
    local = np.einsum("kji,kj->ki", Ra, wa - pa)
    out = np.empty((len(d), NEAR_COLUMNS))
    out[:, 0], out[:, 1:4], out[:, 4:7] = d, (wa + wb) / 2, n
    out[:, 7:10], out[:, 10] = np.einsum("kij,kj->ki", E, local) + r, (n * wb).sum(1)
    return out


def _in_bodies(scene):
    """Every shape's placement in its body (world shapes: in the world): ``(R (S, 3, 3), p (S, 3))``, kept by
    the scene."""
    got = scene.cache.get("shapes in bodies")
    if got is None:
        got = scene.cache["shapes in bodies"] = (np.array([x.R for x in scene.shapes], float).reshape(-1, 3, 3),
                                                 np.array([x.p for x in scene.shapes], float).reshape(-1, 3))
    return got


class _Layout:
    """Where each piece lives in the constants ``K`` and the loop state ``S`` of the pairs ``pairs``."""

    def __init__(self, model, pairs, ahead=False):
        self.model, self.pairs = model, pairs
        on, kind = {}, {}
        for p in pairs:
            on[p[2]], on[p[3]], kind[p[2]], kind[p[3]] = p[4], p[5], p[0], p[1]
        self.shapes = sorted(on)                               # shape rows used, their bodies and kinds
        self.shape_body, self.kind = on, kind
        self.bodies = sorted({p[4] for p in pairs if p[4] >= 0})
        self.at_shape, base = {}, 0
        for i in self.shapes:
            self.at_shape[i] = base
            base += 3 * len(_KEPT[kind[i]]) + 3
        self.at_body = {j: base + 12 * k for k, j in enumerate(self.bodies)}
        self.jumps = base + 12 * len(self.bodies)              # P + 1 jumps, one per stage
        self.cuts = self.jumps + len(pairs) + 1                 # with a look-ahead: P cutoffs, one per pair
        self.nK = self.cuts + (len(pairs) if ahead else 0)
        self.moving = sorted({j for p in pairs for j in p[4:6] if j >= 0})    # the bodies whose speed counts
        self.per = [_per_pair(p) for p in pairs]
        self.rows = np.concatenate([[0], np.cumsum(self.per)]).astype(int)   # first row of each pair


def _pose(K, at):
    return K[at:at + 9].reshape(3, 3), K[at + 9:at + 12]


def _kept(R, p, kind):
    """The entries of the world pose ``(R, p)`` of a ``kind`` shape kept in the constants."""
    return [R[:, c] for c in _KEPT[kind]] + [p]


def _shape_pose(K, at, kind):
    """``(R, p)`` of a ``kind`` shape from the constants (the columns of ``R`` not kept are 0: unused)."""
    cols = _KEPT[kind]
    R = np.zeros((3, 3), dtype=K.dtype)
    for k, c in enumerate(cols):
        R[:, c] = K[at + 3 * k:at + 3 * k + 3]
    return R, K[at + 3 * len(cols):at + 3 * len(cols) + 3]


def _abs(x):
    return bk.copysign(x, 1.0)


def _bound(pair, A, B):
    """A lower bound of the distance of the shapes ``A``, ``B`` ``(R, p, size)`` of ``pair``'s kinds."""
    kind_a, kind_b = pair[:2]
    if kind_a == "plane":
        kind_a, kind_b, A, B = kind_b, kind_a, B, A
    (Ra, pa, sa), (Rb, pb, _) = A, B
    if kind_b == "plane":
        n = Rb[:, 2]
        h = n[0] * (pa[0] - pb[0]) + n[1] * (pa[1] - pb[1]) + n[2] * (pa[2] - pb[2])
        if kind_a == "sphere":
            return h - sa[0]
        if kind_a == "capsule":
            return h - sa[0] - (sa[1] / 2) * _abs(Ra[0, 2] * n[0] + Ra[1, 2] * n[1] + Ra[2, 2] * n[2])
        if kind_a == "box":
            return h - sum((sa[i] / 2) * _abs(Ra[0, i] * n[0] + Ra[1, i] * n[1] + Ra[2, i] * n[2]) for i in range(3))
        if kind_a == "ellipsoid":                                        # its support along -n, exact
            m = [sa[i] * (Ra[0, i] * n[0] + Ra[1, i] * n[1] + Ra[2, i] * n[2]) for i in range(3)]
            return h - bk.sqrt(m[0] * m[0] + m[1] * m[1] + m[2] * m[2])
        return h - bk.sqrt(sa[0] * sa[0] + sa[1] * sa[1] / 4)             # a cylinder: its bounding sphere
    if "box" in (kind_a, kind_b):                                        # the other's bounding sphere and the box
        (R, p, s), (c, r) = (B, (pa, _radius(kind_a, sa))) if kind_b == "box" else (A, (pb, _radius(kind_b, B[2])))
        w = c - p
        x = [R[0, i] * w[0] + R[1, i] * w[1] + R[2, i] * w[2] for i in range(3)]
        out = [_relu(_abs(x[i]) - s[i] / 2) for i in range(3)]
        return bk.sqrt(out[0] * out[0] + out[1] * out[1] + out[2] * out[2]) - r
    w = pa - pb
    return bk.sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]) - _radius(kind_a, sa) - _radius(kind_b, B[2])


def _relu(x):
    return 0.5 * (x + _abs(x))


def _radius(kind, s):
    """The radius of a sphere, capsule, cylinder or ellipsoid's bounding sphere about its centre."""
    if kind == "cylinder":
        return bk.sqrt(s[0] * s[0] + s[1] * s[1] / 4)
    if kind == "ellipsoid":                                              # (its largest semi-axis)
        return _max(_max(s[0], s[1]), s[2])
    return s[0] if kind == "sphere" else s[0] + s[1] / 2


def _init(lay, q, shapes, cutoff):
    """``(K, S)``: the shapes' and bodies' world poses and the jumps; every row ``[b, 0, ...]``."""
    Xup, _ = joint_transforms(lay.model, q)
    return _poses_and_jumps(lay, q, Xup, shapes, [cutoff] * len(lay.pairs))


def _init_ahead(lay, q, v, shapes, reach, look):
    """:func:`_init` with each pair's own cutoff (:func:`_pair_cutoffs`), kept in ``K`` too."""
    Xup, S = joint_transforms(lay.model, q)
    cuts = _pair_cutoffs(lay, velocity_pass(lay.model, Xup, S, v)[0], reach, look)
    K, S = _poses_and_jumps(lay, q, Xup, shapes, cuts)
    for k, c in enumerate(cuts):
        K[lay.cuts + k] = c
    return K, S


def _norm(x):
    return bk.sqrt(x[0] * x[0] + x[1] * x[1] + x[2] * x[2])


def _pair_cutoffs(lay, vb, reach, look):
    """Each pair's cutoff ``margin + dt (s_a + s_b)``, ``look = [margin, dt]``, ``s = |v_o| + |omega| rho``
    per body (``vb[j] = [omega; v_o]`` its spatial velocity, ``rho = reach[j]``; a world shape's 0):
    :func:`~sparsedyn.contact.look_ahead.pair_cutoffs`' bound."""
    speed = {j: _norm(vb[j][3:6]) + _norm(vb[j][0:3]) * reach[j] for j in lay.moving}
    out = []
    for p in lay.pairs:
        s = [speed[j] for j in p[4:6] if j >= 0]
        out.append(look[0] + look[1] * (s[0] + s[1] if len(s) == 2 else s[0] if s else 0.0))
    return out


def _poses_and_jumps(lay, q, Xup, shapes, cuts):
    """``(K, S)`` of :func:`_init`, pair ``k`` near where its bound is within ``cuts[k]``."""
    body, shape = _posers(lay.model, q, shapes, Xup)
    K = np.zeros(lay.nK, dtype=object if bk.is_symbolic(q) else float)
    for i in lay.shapes:
        R, p, _ = shape(i, lay.shape_body[i])
        kept = np.concatenate(_kept(R, p, lay.kind[i]))
        K[lay.at_shape[i]:lay.at_shape[i] + len(kept)] = kept
    for j in lay.bodies:
        R, o = body(j)
        K[lay.at_body[j]:lay.at_body[j] + 12] = np.concatenate([np.reshape(R, -1), o])
    S = np.zeros((lay.rows[-1], NEAR_COLUMNS), dtype=K.dtype)
    P = len(lay.pairs)
    nxt = P + 1.0                                              # the stage after the last: the end
    for k in range(P - 1, -1, -1):                             # stage k + 1 computes pair k
        p = lay.pairs[k]
        b = _bound(p, shape(p[2], p[4]), shape(p[3], p[5]))
        S[lay.rows[k]:lay.rows[k + 1], 0] = b
        # the first near pair's stage from k on: k + 1 where pair k is near, else the one after;
        # one product and one sum on the chain from pair to pair
        far = 0.5 - 0.5 * bk.copysign(1.0, cuts[k] + SLACK - b)
        nxt = (1.0 - far) * (k + 1.0) + far * nxt
        K[lay.jumps + k] = nxt - k
    K[lay.jumps + P] = 1.0                                     # the last stage ends the loop
    return K, S.reshape(-1)


def _stage(lay, s, q, shapes, cutoff, K, S):
    """Stage ``s``: pair ``s - 1``'s candidate rows (stage 0 computes nothing); the jump to the next."""
    flag = K[lay.jumps + s]
    if s == 0:
        return S, flag
    k = s - 1
    p = lay.pairs[k]
    A = _shape_pose(K, lay.at_shape[p[2]], p[0]) + (shapes[p[2], 12:15],)
    B = _shape_pose(K, lay.at_shape[p[3]], p[1]) + (shapes[p[3], 12:15],)
    rows = _pair_rows(p, A, B, lambda j: _pose(K, lay.at_body[j]))
    out = S.copy().reshape(-1, NEAR_COLUMNS)
    for r, row in zip(range(lay.rows[k], lay.rows[k + 1]), rows):
        out[r] = np.concatenate([row[:1], (row[1:4] + row[4:7]) / 2, row[10:13], row[7:10], row[13:14]])
    return out.reshape(-1), flag


def _finish(lay, q, shapes, cutoff, K, S):
    return S.reshape(-1, NEAR_COLUMNS)


def _stage_ahead(lay, s, q, v, shapes, reach, look, K, S):
    return _stage(lay, s, q, shapes, None, K, S)


def _finish_ahead(lay, q, v, shapes, reach, look, K, S):
    """The rows and each candidate's cutoff (its pair's)."""
    return S.reshape(-1, NEAR_COLUMNS), K[lay.cuts + np.repeat(np.arange(len(lay.pairs)), lay.per)]


def _pieces(model, pairs, ahead=False):
    lay = _Layout(model, pairs, ahead)
    init, stage, finish = (_init_ahead, _stage_ahead, _finish_ahead) if ahead else (_init, _stage, _finish)
    return partial(init, lay), [partial(stage, lay, s) for s in range(len(pairs) + 1)], partial(finish, lay)


def _candidate_count(model, pairs, **_):
    return sum(_per_pair(p) for p in pairs)


def _near_program(model, static, optional, ahead=False):
    """The :class:`~sparsedyn.symbolic.loop.LoopProgram` of :func:`collision_candidates_near` (with
    ``ahead``, :func:`collision_candidates_ahead`) at ``static["pairs"]``."""
    from ..symbolic.loop import trace_loop
    pairs = tuple(tuple(p) for p in static["pairs"])
    k = (collision_candidates_ahead if ahead else collision_candidates_near).__kernel__
    _check_pairs(model, pairs, k.name)
    shapes = k.shapes(model, pairs=pairs)
    init, stages, finish = _pieces(model, pairs, ahead)
    return trace_loop(k.variant({"pairs": pairs}).name, [(n, shapes[n]) for n in k.inputs],
                      [(n, shapes[n]) for n in k.outputs], init, stages, finish, cap=len(pairs) + 2)


@kernel(inputs={"q": ("nq",), "shapes": (_shape_count, 15), "cutoff": ()}, static=("pairs",),
        sequences=("pairs",), outputs={"candidates": (_candidate_count, NEAR_COLUMNS)}, program=_near_program)
def collision_candidates_near(model, q, shapes, cutoff, pairs):
    """:func:`~sparsedyn.collision_candidates` with a broad phase
    (:mod:`~sparsedyn.contact.collision_near`): ``candidates`` (..., K, 11), per candidate
    ``[d, x (3), n (3), w_a in body a (3), n . w_b]`` (:data:`NEAR_COLUMNS`: ``x`` the midpoint of
    the witness points, the others as there) for the pairs that may be within ``cutoff`` [m]; the
    rows of a pair farther apart are ``[b, 0, ..., 0]``, ``b > cutoff`` a lower bound of its distance.  ``q``, ``shapes`` and
    ``pairs`` as there; ``cutoff`` (...,) a number.

    >>> import numpy as np, sparsedyn as sd
    >>> b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=1.0,
    ...                                       rot_inertia=np.eye(3) * 0.004)
    >>> shapes = np.zeros((3, 15)); shapes[:, [0, 4, 8]] = 1; shapes[0, 12] = 0.1    # a ball, a floor, a ball
    >>> shapes[2, 9:13] = [5, 0, 0.09, 0.1]
    >>> pairs = [("sphere", "plane", 0, 1, 0, -1), ("sphere", "sphere", 0, 2, 0, -1)]
    >>> c = sd.collision_candidates_near(b.build(), [0, 0, 0.09, 0, 0, 0, 1], shapes, 0.01, pairs)
    >>> c[:, 0].round(12).tolist(), c[0, 1:4].round(12).tolist()      # the far ball: its bound, 4.8 m
    ([-0.01, 4.8], [0.0, 0.0, -0.005])
    """
    pairs = tuple(tuple(p) if isinstance(p, list) else p for p in pairs)
    _check_pairs(model, pairs, "collision_candidates_near")
    q = _checks.configuration(model, q)
    S = _shape_count(model, pairs)
    shapes = _checks.numeric("shapes", shapes, f"shape placements and sizes (..., {S}, 15)")
    cutoff = _checks.numeric("cutoff", cutoff, "a number (...,)")
    if shapes.shape[-2:] != (S, 15):
        raise ValueError(f"collision_candidates_near: shapes must have shape (..., {S}, 15), got {shapes.shape}")
    for name, x in (("shapes", shapes), ("cutoff", cutoff)):
        if not bk.is_symbolic(x) and not np.all(np.isfinite(x)):
            raise ValueError(f"collision_candidates_near: {name} must be finite, got {x!r}")
    init, stages, finish = _pieces(model, pairs)
    batch = np.broadcast_shapes(q.shape[:-1], shapes.shape[:-2], cutoff.shape)
    qb, sb = np.broadcast_to(q, batch + q.shape[-1:]), np.broadcast_to(shapes, batch + (S, 15))
    cb = np.broadcast_to(cutoff, batch)
    out = [run_stages(init, stages, finish, [qb[i], sb[i], cb[i]])[0] for i in np.ndindex(batch)]
    return np.stack(out).reshape(batch + (-1, NEAR_COLUMNS)) if out else np.zeros(batch + (0, NEAR_COLUMNS))


@kernel(inputs={"q": ("nq",), "v": ("nv",), "shapes": (_shape_count, 15), "reach": ("nb",), "look": (2,)},
        static=("pairs",), sequences=("pairs",),
        outputs={"candidates": (_candidate_count, NEAR_COLUMNS), "cutoff": (_candidate_count,)},
        program=partial(_near_program, ahead=True))
def collision_candidates_ahead(model, q, v, shapes, reach, look, pairs):
    """:func:`collision_candidates_near` with a cutoff per pair from the velocity ``v`` (nv,): a time
    step's look-ahead (:func:`~sparsedyn.contact.look_ahead.pair_cutoffs`) in the same call.  Pair
    ``k`` of bodies ``a``, ``b`` may enter a step of ``dt`` where its distance is below
    ``margin + dt (s_a + s_b)``, ``s = |v_o| + |omega| reach[body]`` a bound on a body's speed
    (``[omega; v_o]`` its spatial velocity at ``(q, v)``, ``reach`` (..., nb) the radius about its
    origin of a sphere holding its shapes [m]; a world shape adds nothing), ``look = [margin, dt]``
    (..., 2) [m, s].  ``(candidates, cutoff)``: the rows (..., K, 11) of
    :func:`collision_candidates_near` with each pair computed within its own cutoff (a farther
    pair's rows ``[b, 0, ..., 0]``, ``b`` above it), and the cutoff of each candidate's pair
    (..., K): a candidate enters where ``candidates[..., 0] < cutoff``.

    >>> import numpy as np, sparsedyn as sd
    >>> b = sd.ModelBuilder("ball").add_body("ball", None, sd.make_joint("free"), mass=1.0,
    ...                                       rot_inertia=np.eye(3) * 0.004)
    >>> shapes = np.zeros((2, 15)); shapes[:, [0, 4, 8]] = 1; shapes[0, 12] = 0.1    # a ball, a floor
    >>> v = [0, 0, 0, 0, 0, -3.0]                                   # falling at 3 m/s: 6 mm in a 2 ms step
    >>> c, cut = sd.collision_candidates_ahead(b.build(), [0, 0, 0.108, 0, 0, 0, 1], v, shapes, [0.1],
    ...                                        [0.005, 0.002], [("sphere", "plane", 0, 1, 0, -1)])
    >>> c[:, 0].round(12).tolist(), cut.round(12).tolist()
    ([0.008], [0.011])
    """
    who = "collision_candidates_ahead"
    pairs = tuple(tuple(p) if isinstance(p, list) else p for p in pairs)
    _check_pairs(model, pairs, who)
    q = _checks.configuration(model, q)
    v = _checks.velocity(model, v)
    S = _shape_count(model, pairs)
    shapes = _checks.numeric("shapes", shapes, f"shape placements and sizes (..., {S}, 15)")
    reach = _checks.numeric("reach", reach, f"radii (..., {model.nbodies})")
    look = _checks.numeric("look", look, "[margin, dt] (..., 2)")
    for name, x, tail in (("shapes", shapes, (S, 15)), ("reach", reach, (model.nbodies,)), ("look", look, (2,))):
        if x.shape[x.ndim - len(tail):] != tail:
            raise ValueError(f"{who}: {name} must have shape (..., {', '.join(map(str, tail))}), got {x.shape}")
        if not bk.is_symbolic(x) and not np.all(np.isfinite(x)):
            raise ValueError(f"{who}: {name} must be finite, got {x!r}")
    init, stages, finish = _pieces(model, pairs, ahead=True)
    batch = np.broadcast_shapes(q.shape[:-1], v.shape[:-1], shapes.shape[:-2], reach.shape[:-1], look.shape[:-1])
    args = [np.broadcast_to(x, batch + x.shape[-n:]) for x, n in ((q, 1), (v, 1), (shapes, 2), (reach, 1), (look, 1))]
    out = [run_stages(init, stages, finish, [x[i] for x in args])[0] for i in np.ndindex(batch)]
    K = _candidate_count(model, pairs)
    if not out:
        return np.zeros(batch + (K, NEAR_COLUMNS)), np.zeros(batch + (K,))
    return (np.stack([c for c, _ in out]).reshape(batch + (K, NEAR_COLUMNS)),
            np.stack([np.asarray(x, float) for _, x in out]).reshape(batch + (K,)))


def near_call(model, ahead=True):
    """The ready native :func:`collision_candidates_near` of ``model`` (called ``f(q, shapes, cutoff, pairs,
    out=None)`` at one state), or with ``ahead`` where only :func:`collision_candidates_ahead` is built, a
    callable of the same arguments running that one at ``v = 0`` and ``look = [cutoff, 0]``: each pair's
    cutoff is then ``cutoff + 0`` and each body's speed bound 0 (so the radii ``reach`` are zeros), the
    same rows to the bit.  None where neither is built.  ``ahead``: whether the scene's steps run the
    look-ahead's kernel (every pair the collision kernel's; the others' steps run this one)."""
    calls = native_calls(model)
    if calls is None:
        return None
    f = calls.get(_NEAR)
    g = calls.get(_AHEAD) if ahead and f is None else None
    if g is None:
        return f
    v, reach, look = np.zeros(model.nv), np.zeros(model.nbodies), np.zeros(2)

    def near(q, shapes, cutoff, pairs, out=None):
        look[0] = cutoff
        c = g(q, v, shapes, reach, look, pairs)[0]
        if out is None:
            return c
        out[...] = c
        return out
    return near


def near_rows(model, q, shapes, cutoff, pairs, ahead=True):
    """:func:`collision_candidates_near`'s rows (..., K, 11) of ``q`` (nq,) or (..., nq) within the number
    ``cutoff``, by the kernel the scene's steps run: :func:`near_call`'s callable where one is built (a
    state as a float64 array), else with ``ahead`` :func:`collision_candidates_ahead` at ``v = 0`` and
    ``look = [cutoff, 0]`` (the same rows; built on the default road where it is not, NumPy answering
    meanwhile), without it :func:`collision_candidates_near`.  So a scene's :func:`~sparsedyn.collide`
    and its steps build one collision kernel, in whichever order they come."""
    if type(q) is np.ndarray and q.dtype == np.float64 and q.shape == (model.nq,):
        f = near_call(model, ahead)
        if f is not None:
            return f(q, shapes, cutoff, pairs)
    if not ahead:
        return collision_candidates_near(model, q, shapes, cutoff, pairs)
    lead = np.shape(q)[:-1]
    return collision_candidates_ahead(model, q, np.zeros(lead + (model.nv,)), shapes, np.zeros(model.nbodies),
                                      np.array([float(cutoff), 0.0]), pairs)[0]


_NEAR, _AHEAD = collision_candidates_near.__name__, collision_candidates_ahead.__name__
