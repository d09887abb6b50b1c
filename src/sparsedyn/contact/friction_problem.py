"""The frictional contact problem of one time step (see :mod:`sparsedyn.contact.friction` for the
method): the contact set as structure (the frames) and data (friction, points, planes), the kernel
:func:`contact_problem` (Delassus matrix, free contact velocities) and the branch-free arithmetic
(``_step``, ``_relu``, ``_vmax``) that the solver's stages are written in."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks
from .. import backend as bk
from ..algorithms.crba import bias_kernel, crba_kernel
from ..algorithms.fd import ltdl_checker
from ..algorithms.kinematics import frame_world_transform, joint_transforms, world_transforms
from ..algorithms.ltdl import dof_lambda, ltdl, ltdl_solve, mpyLi
from ..kernels import kernel
from ..model import UnknownNameError
from ..model.sensors import Contact
from ..model.spatial import Transform, apply_motion_inv, pose, skew
from .dynamics import ContactWarning, contact_jacobian

__all__ = ["ContactProblem", "ContactStep", "ContactResiduals", "ContactStepWarning", "Rollout", "contact_problem",
           "point_contacts", "contact_basis", "contact_data", "contact_slots", "ContactSlots", "plane_basis", "SOLVERS",
           "turned_impulses", "StepArrays", "BodyContact", "slot_frames", "slot_structure", "DATA_SLOT", "slot_width"]

#: The solvers of :func:`contact_step`.
SOLVERS = ("admm", "pgs")


class ContactStepWarning(ContactWarning):
    """The contact solver stopped at ``max_iterations`` before reaching ``tol``; the message gives the residuals."""


class ContactProblem(NamedTuple):
    """Result of :func:`contact_problem` (shapes for one state; leading batch axes as the inputs).

    ``a`` (nv): the free acceleration ``H^-1 (tau - C)``; ``J`` (m, nv): the contact Jacobian in
    the contact frames (``m = 3 len(contacts)``, rows ``[t_x, t_y, n]`` per contact); ``JMinv``
    (m, nv): ``J H^-1``; ``G`` (m, m): the Delassus matrix ``J H^-1 J^T``; ``gap`` (nc): the
    signed distance of each contact point from its plane [m] (negative: penetration).
    """

    a: np.ndarray
    J: np.ndarray
    JMinv: np.ndarray
    G: np.ndarray
    gap: np.ndarray


class ContactResiduals(NamedTuple):
    """Residuals of a contact solution (see the module docstring), each (...) (the batch shape)."""

    primal: np.ndarray
    dual: np.ndarray
    complementarity: np.ndarray


class ContactStep(NamedTuple):
    """Result of :func:`contact_step` (batch shape ``...`` of the inputs).

    ``q`` (..., nq), ``v`` (..., nv): the next state; ``impulses`` (..., nc, 3): the contact
    impulses on the robot over the step [N s], contact frame ``[t_x, t_y, n]``; ``modes``
    (..., nc): ``"open"``, ``"stick"`` or ``"slide"``; ``residuals``: a
    :class:`~sparsedyn.contact.friction_problem.ContactResiduals`; ``iterations`` (...): solver iterations (ADMM's, Gauss-Seidel's sweeps, and the
    polishes of :mod:`~sparsedyn.contact.friction_polish`, each counted as one).
    The step of one state computes its ``modes`` when they are first read.
    """

    q: np.ndarray
    v: np.ndarray
    impulses: np.ndarray
    modes: np.ndarray
    residuals: ContactResiduals
    iterations: np.ndarray


class Rollout(NamedTuple):
    """Result of :func:`rollout`: ``q`` (steps + 1, ..., nq), ``v`` (steps + 1, ..., nv), ``impulses``
    (steps, ..., nc, 3), ``modes`` (steps, ..., nc), ``iterations`` (steps, ...)."""

    q: np.ndarray
    v: np.ndarray
    impulses: np.ndarray
    modes: np.ndarray
    iterations: np.ndarray


class StepArrays(NamedTuple):
    """Result of :func:`contact_step_kernel` (leading batch axes as the inputs): ``q_next`` (nq),
    ``v_next`` (nv), ``impulses`` (nc, 3), ``velocities`` (nc, 3) (``u = G lambda + g``, contact
    frames), ``report`` (8): primal, dual and complementarity residuals, iterations, converged
    (1 or 0), impulse and velocity scales, whether a point penetrated (1: the position was corrected);
    ``correction`` (nc): the normal impulses of the position correction (split impulse; zero where no
    point penetrates)."""

    q_next: np.ndarray
    v_next: np.ndarray
    impulses: np.ndarray
    velocities: np.ndarray
    report: np.ndarray
    correction: np.ndarray


# --- branch-free arithmetic: a choice on a value is a product with a 0/1 step ------------------------

_TINY = 1e-300


def _abs(x):
    return bk.copysign(x, 1.0)


def _relu(x):
    return 0.5 * (x + _abs(x))


def _step(x):
    """1 where ``x >= 0``, else 0 (elementwise; ``-0.0`` counts as negative)."""
    return 0.5 * (1.0 + bk.copysign(1.0, x))


def _vmax(xs):
    """The largest of the values ``xs`` (a max without branching: ``a + relu(b - a)``); a float array's
    pairs are reduced a level at a time in NumPy (the same operations, elementwise)."""
    if type(xs) is np.ndarray and xs.dtype == np.float64:
        xs = xs.reshape(-1)
        while len(xs) > 1:
            n = len(xs) - len(xs) % 2
            xs = np.concatenate((xs[:n:2] + _relu(xs[1:n:2] - xs[:n:2]), xs[n:]))
        return xs[0]
    xs = list(np.asarray(xs, dtype=object).reshape(-1))
    while len(xs) > 1:                                          # pairwise: a short dependency chain
        xs = [a + _relu(b - a) for a, b in zip(xs[::2], xs[1::2])] + xs[len(xs) - len(xs) % 2:]
    return xs[0]


def _norms(t):
    """``|t|`` over the last axis of ``t`` (..., 2)."""
    return bk.sqrt(t[..., 0] * t[..., 0] + t[..., 1] * t[..., 1])


# --- the contact set: structure (frames) and data (friction, points, planes) ------------------------

def point_contacts(model, contacts, who="contacts", friction=False):
    """``contacts`` as a tuple of point contacts (:class:`~sparsedyn.model.sensors.Contact` with
    ``kind="3d"``), checked against ``model``; with ``friction``, each must have a friction
    coefficient (``friction >= 0``; 0 is a frictionless one-sided contact)."""
    if isinstance(contacts, Contact):
        contacts = (contacts,)
    try:
        contacts = tuple(contacts)
    except TypeError:
        raise TypeError(f"{who}: expected a sequence of Contact objects, got {contacts!r}") from None
    for c in contacts:
        if not isinstance(c, Contact):
            raise TypeError(f"{who}: expected Contact objects (kind='3d', friction=mu), got {c!r}")
        if c.kind != "3d":
            raise ValueError(f"{who}: {c!r} is a {c.kind} contact; one-sided frictional contact is a point: "
                             "kind='3d'")
        try:
            model.frame(c.frame)
        except (KeyError, IndexError) as e:
            raise UnknownNameError(f"{who}: contact {c.name!r}: {e}") from None
        if friction and c.friction is None:
            raise ValueError(f"{who}: contact {c.name!r} needs a friction coefficient friction >= 0 (0: "
                             f"frictionless), got None")
    return tuple(contacts)


class BodyContact(NamedTuple):
    """A point contact between two bodies of the robot (self-collision): the point ``point`` fixed in
    frame ``frame`` (index; frame axes) of body ``a`` against the plane ``plane = (normal, offset)``
    through the witness point of body ``b`` (world, at the current configuration; ``normal`` from
    ``b`` towards ``a``), ``other`` a frame (index) of ``b``.  Its rows are the velocity of ``a``'s
    point relative to the point of ``b`` at the same place, ``J_a(x) - J_b(x)``; its impulse acts
    on ``a`` and the opposite one on ``b`` (the step's ``impulses`` are those on ``a``).  Friction
    ``friction >= 0``; ``kind`` is always ``"3d"``."""

    frame: int
    other: int
    friction: float
    point: tuple
    plane: tuple
    name: str = "body contact"
    kind: str = "3d"


#: The structure of a slot whose body is data (:func:`problem_of`'s ``weights``): its rows are the
#: world point's velocity from every joint, each joint's columns weighted by the slot's data, so one
#: build serves every contact set of as many slots, whichever bodies touch.
DATA_SLOT = "*"


def slot_width(model, frames, **_):
    """Columns of a slot's data in the step of the slot structures ``frames``: 8 (``[mu, p (3),
    plane (4)]``), and ``nv`` joint weights more where a slot's body is data (:data:`DATA_SLOT`)."""
    return 8 + model.nv if any(isinstance(f, str) and f == DATA_SLOT for f in frames) else 8


def slot_frames(f):
    """``(frame_a, frame_b)`` of a slot's structure ``f``: a frame index (a point against the fixed
    world: ``frame_b`` is None) or a pair of them (a :class:`BodyContact`)."""
    return (f[0], f[1]) if isinstance(f, tuple) else (f, None)


def slot_structure(model, f):
    """The structure of one slot as the step is built for it: a frame (name or index) as its index,
    a pair of frames ``(frame_a, frame_b)`` (a two-body contact) as the pair of their indices,
    :data:`DATA_SLOT` as itself."""
    if isinstance(f, str) and f == DATA_SLOT:
        return DATA_SLOT
    if isinstance(f, (tuple, list)):
        if len(f) != 2:
            raise ValueError(f"contact_step: a two-body contact slot is a pair of frames (frame_a, frame_b), got {f!r}")
        return (model.frame(f[0]), model.frame(f[1]))
    return model.frame(f)


def _slot_order(f):
    a, b = slot_frames(f)
    return (a, -1 if b is None else b)


def contact_data(model, contacts):
    """``(frames, friction, points, planes)`` of checked point contacts: the structure of a contact step
    (the frame indices, a tuple: what its compiled form is built for; a pair ``(frame, other)`` for a
    :class:`BodyContact`) and its data, ``friction`` (nc,),
    ``points`` (nc, 3) in the frames' axes, ``planes`` (nc, 4) ``[n_x, n_y, n_z, offset]`` (the plane
    ``n . x = offset``; default the ground z = 0)."""
    frames = tuple(model.frame(c.frame) if getattr(c, "other", None) is None else
                   (model.frame(c.frame), model.frame(c.other)) for c in contacts)
    mu = np.array([0.0 if c.friction is None else c.friction for c in contacts], float)
    points = np.array([c.point if c.point is not None else (0.0, 0.0, 0.0) for c in contacts], float).reshape(-1, 3)
    planes = np.array([(*c.plane[0], c.plane[1]) if c.plane is not None else (0.0, 0.0, 1.0, 0.0)
                       for c in contacts], float).reshape(-1, 4)
    return frames, mu, points, planes


class ContactSlots(NamedTuple):
    """A contact set laid out for the compiled step (:func:`contact_slots`): ``frames`` the structure
    (a body frame per slot, or a pair of them for a two-body contact, a tuple); ``index`` (nc,) the
    slot of each contact (``None`` where contact ``i`` is in slot ``i`` and there are no free slots); ``data`` (ns, 8) per
    slot ``[mu, p_x, p_y, p_z, n_x, n_y, n_z, offset]`` (the point in the slot's frame), free slots open."""

    frames: tuple
    index: np.ndarray
    data: np.ndarray


#: The plane of a free slot: 1000 km below its point, so the slot is open and leaves the problem.
FREE_PLANE = (0.0, 0.0, 1.0, -1e6)


def contact_slots(model, contacts):
    """The checked point ``contacts`` as :class:`ContactSlots`: each moved onto the frame of its body
    (its point in the body's axes), the contacts of a body in ``2^k`` slots (the fewest that hold
    them), the bodies in index order.  So the compiled step, built per tuple of slot frames, is
    reused by every contact set that fits the same slots: other frames on the same bodies, other
    points, planes and friction coefficients, fewer contacts on a body."""
    frames, mu, points, planes = contact_data(model, contacts)
    own = {}                                                     # body -> its own frame (identity placement)
    for j, f in enumerate(model.frames):
        if f.body >= 0 and f.body not in own and np.array_equal(f.X.E, np.eye(3)) and not np.any(f.X.r):
            own[f.body] = j
    keys, moved = [], []
    for k, p in zip(frames, points):
        ka, kb = slot_frames(k)
        f = model.frames[ka]
        if f.body in own:
            key = own[f.body]
            moved.append(f.X.r + f.X.E.T @ p)                    # frame axes -> body axes
        else:                                                    # a world frame: its own structure
            key = ka
            moved.append(p)
        # b's rows are taken at a's point in the world: any frame of b's body gives them
        keys.append(key if kb is None else (key, own.get(model.frames[kb].body, kb)))
    sizes = {key: 1 << (keys.count(key) - 1).bit_length() for key in set(keys)}
    slots, index, data = fill_slots(keys, sizes, np.concatenate([mu[:, None], np.array(moved).reshape(-1, 3), planes],
                                                               -1))
    same = len(slots) == len(index) and np.array_equal(index, np.arange(len(index)))
    return ContactSlots(slots, None if same else index, data)


def fill_slots(keys, sizes, rows):
    """``(frames, index, data)``: ``sizes[key]`` slots per key in key order (a tuple), the slot
    (nc,) of each contact (those of a key in its first slots, in order) and the slots' data (ns, 8),
    ``rows`` (nc, 8) in the contacts' slots, the free slots open (:data:`FREE_PLANE`)."""
    order = sorted(sizes, key=_slot_order)
    slots = tuple(key for key in order for _ in range(sizes[key]))
    first = dict(zip(order, np.cumsum([0] + [sizes[key] for key in order[:-1]]).tolist()))
    index = np.zeros(len(keys), int)
    for i, key in enumerate(keys):
        index[i] = first[key]
        first[key] += 1
    data = np.zeros((len(slots), 8))
    data[:, 4:] = FREE_PLANE
    data[index] = rows
    return slots, index, data


def plane_basis(plane):
    """``(R, n, offset)`` of a plane ``[n_x, n_y, n_z, offset]`` (..., 4) (``n`` need not be unit): the
    contact frame's axes (..., 3, 3) as columns ``[t_x, t_y, n]`` in the world (``t_x`` the world x axis
    projected onto the plane, or y where the normal is within 26 degrees of x), the unit normal and the
    offset along it (the plane is ``n . x = offset``).  Branch-free (a kernel's data)."""
    size = bk.sqrt(plane[..., 0] * plane[..., 0] + plane[..., 1] * plane[..., 1] + plane[..., 2] * plane[..., 2])
    n = [plane[..., k] / size for k in range(3)]
    w = _step(_abs(n[0]) - 0.9)                                   # 1: project the y axis
    en = (1.0 - w) * n[0] + w * n[1]
    t = [(1.0 - w) - en * n[0], w - en * n[1], -en * n[2]]
    r = bk.sqrt(t[0] * t[0] + t[1] * t[1] + t[2] * t[2])
    t = [x / r for x in t]
    b = [n[1] * t[2] - n[2] * t[1], n[2] * t[0] - n[0] * t[2], n[0] * t[1] - n[1] * t[0]]
    R = np.stack([np.stack([t[k], b[k], n[k]], -1) for k in range(3)], -2)
    return R, np.stack(n, -1), plane[..., 3] / size


def turned_impulses(planes, before, impulses):
    """Contact impulses (k, 3) turned from the frames of the planes ``before`` (k, 4) into those of
    ``planes`` (k, 4) (:func:`plane_basis`'s frames): ``R^T R_before lambda``, the world vector
    ``R_before lambda`` first, each sum left to right (as the native warm start's matcher sums them)."""
    R, R0 = plane_basis(planes)[0], plane_basis(before)[0]
    w = [R0[:, j, 0] * impulses[:, 0] + R0[:, j, 1] * impulses[:, 1] + R0[:, j, 2] * impulses[:, 2] for j in range(3)]
    return np.stack([R[:, 0, i] * w[0] + R[:, 1, i] * w[1] + R[:, 2, i] * w[2] for i in range(3)], -1)


def contact_basis(contact):
    """``(R, n, offset)`` of a :class:`~sparsedyn.model.sensors.Contact`'s plane (:func:`plane_basis`)."""
    normal, offset = contact.plane if contact.plane is not None else ((0.0, 0.0, 1.0), 0.0)
    R, n, off = plane_basis(np.array([*normal, offset], float))
    return R, n, float(off)


def _m(model, contacts, **_):
    return 3 * len(tuple(contacts))


def _nc(model, contacts, **_):
    return len(tuple(contacts))


def _out(x, shape, tail):
    return np.broadcast_to(x, shape + tail).copy()


@kernel(inputs={"q": ("nq",), "v": ("nv",), "tau": ("nv",)}, optional={"f_ext": ("nb", 6), "gravity": (3,)},
        static=("contacts",), sequences=("contacts",),
        outputs={"a": ("nv",), "J": (_m, "nv"), "JMinv": (_m, "nv"), "G": (_m, _m), "gap": (_nc,)},
        result=ContactProblem)
def contact_problem(model, q, v, tau, contacts, *, f_ext=None, gravity=None):
    """The per-state pieces of a one-sided contact step (a :class:`ContactProblem`).

    ``q`` (..., nq), ``v``/``tau`` (..., nv); ``contacts``: point contacts (``kind="3d"``; their
    ``point`` and ``plane``; friction plays no part here).  One straight-line program::

        H = L^T D L            CRBA and the branch-sparse LTDL factorization
        a = H^-1 (tau - C)     the free acceleration
        J                      rows of the contact points' velocities, contact frames [t_x, t_y, n]
        Y = L^-T J^T,  G = Z^T Z (Z = D^-1/2 Y),  J H^-1 = (L^-1 D^-1 Y)^T
        gap = n . (o + R p) - offset

    ``f_ext`` (..., NB, 6) and ``gravity`` (3,) as in :func:`~sparsedyn.aba`.  The contact step runs
    the same computation with the points and planes as data
    (:func:`~sparsedyn.contact.friction_problem.problem_of`).
    """
    frames, _, points, planes = contact_data(model, point_contacts(model, contacts, "contact_problem"))
    return problem_of(model, q, v, tau, frames, points, planes, f_ext, gravity)


def problem_of(model, q, v, tau, frames, points, planes, f_ext=None, gravity=None, weights=None, factor=False):
    """:func:`contact_problem` of the contacts at the frames ``frames`` (indices, the structure) with
    the points ``points`` (nc, 3) and planes ``planes`` (nc, 4) (:func:`contact_data`; values or
    traced data).  A slot :data:`DATA_SLOT` has its point in the world and its body as data, the
    joint weights ``weights`` (nc, nv) (1 on the joints that move body ``a``, less 1 on those that
    move ``b``, 0 elsewhere, as :func:`slot_weights`): its rows are ``R_c^T`` times the velocity of
    the world point ``x`` from joint ``j``'s world motion columns ``(w_j, v_j)``, ``v_j - x x w_j``,
    weighted: ``J_a(x) - J_b(x)``.  ``factor``: ``(problem, Z)``, ``Z`` (m, nv) the factor ``G = Z Z^T``
    (``Z = J L^-1 D^-1/2``, ``H = L^T D L``)."""
    q, v, tau, f_ext, g, shape, symbolic = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau",
                                                            "nv joint forces")
    nv, nc = model.nv, len(frames)
    lam = dof_lambda(model)
    Xup, S = joint_transforms(model, q)
    H = crba_kernel(model, q)
    L, D = ltdl(model.topology, H, None if symbolic else ltdl_checker(model, H))
    a = ltdl_solve(lam, L, D, tau - bias_kernel(model, q, v, f_ext, g))
    if not nc:
        z = np.zeros(shape + (0, nv))
        P = ContactProblem(_out(a, shape, (nv,)), z, z.copy(), np.zeros(shape + (0, 0)), np.zeros(shape + (0,)))
        return (P, z.copy()) if factor else P
    pairs = [(None, None) if _is_data(f) else slot_frames(f) for f in frames]
    pts = _Points(model, Xup, S, [k for ka, kb in pairs for k in (ka, kb)])
    W = world_columns(model, Xup, S) if any(_is_data(f) for f in frames) else None
    rows, gaps, lever = [], [], {}
    for i, (k, kb) in enumerate(pairs):
        Rc, n, offset = plane_basis(planes[i])
        if k is None:                                            # a slot whose body is data
            # its rows R_c^T (v_j - x x w_j) of the joints' world columns: [-R_c^T [x]x, R_c^T] (3, 6) W
            x = points[i]
            Rt = np.swapaxes(Rc, -1, -2)
            lever[i] = np.concatenate([-(Rt @ skew(x)), Rt], -1)
            rows.append(None)
        else:
            R, o = pts.pose[k]                                   # frame -> world, frame origin
            p = points[i]
            x = o + R @ p
            rows.append(pts.relative(Rc, k, kb, p, x))
        gaps.append(x @ n - offset)
    # the slots in use: past the last data slot with joint weights (or slot of a frame) the rows are
    # zeros, so the block products below may skip them (a scene's free slots; :class:`_Live`)
    live = _Live(frames, weights)
    if lever:                                                    # the data slots' rows: one product by W
        Jd = _product(np.concatenate(list(lever.values()), -2), W, live.mm(np.repeat(list(lever), 3), None, None))
        for r, i in enumerate(lever):
            rows[i] = Jd[..., 3 * r:3 * r + 3, :] * weights[i]
    J = np.concatenate(rows, -2)
    # L^-T (nv, nv) (upper, the tree's pattern: a column's entries on its dof's ancestors), then
    # Y = J L^-1 and J H^-1 = Y D^-1 L^-T as products by it: block products on one state (loops in the
    # compiled code that skip its structural zeros, not 2 m nnz(L) scalar operations)
    # (transposed, nv x m: each product's result is the next one's right factor where it lies, and the
    # compiled loops run along the slots, over those in use)
    Lit = mpyLi(lam, L[..., None, :, :], np.eye(nv), unit=True)
    Yt = _product(Lit, np.swapaxes(J, -1, -2), live.mm(0, 0, 3))
    # G = Z Z^T, Z = Y D^-1/2: a product X X^T, whose compiled loop sums only the lower triangle and
    # mirrors it (G exactly symmetric; half the work of Y D^-1 Y^T)
    Dh = 1.0 / bk.sqrt(D)
    Zt = _scale_rows(Dh, Yt, live.mm(0, 0, 3))
    JMinv = np.swapaxes(_product(np.swapaxes(Lit, -1, -2), _scale_rows(Dh, Zt, live.mm(0, 0, 3)), live.mm(0, 0, 3)),
                        -1, -2)
    Z = np.swapaxes(Zt, -1, -2)
    # one state (the step's kernel): a block product (a loop in the compiled code, not 3 nc^2 nv operations)
    G = _product(Z, np.swapaxes(Z, -1, -2), live.mm(3, 0, 3))
    gap = np.stack([np.broadcast_to(x, shape) for x in gaps], -1)
    P = ContactProblem(_out(a, shape, (nv,)), _out(J, shape, (3 * nc, nv)), _out(JMinv, shape, (3 * nc, nv)),
                       _out(G, shape, (3 * nc, 3 * nc)), gap)
    return (P, _out(Z, shape, (3 * nc, nv))) if factor else P


def _product(A, B, live=None):
    """``A @ B``: a block product on one state (:func:`~sparsedyn.backend.matmul`; ``live``: its slots in
    use), NumPy's on a batch."""
    return bk.matmul(A, B, min_pairs=256, live=live) if np.ndim(A) == 2 and np.ndim(B) == 2 else A @ B


def _scale_rows(d, X, live=None):
    """``d[..., :, None] * X``: the rows of ``X`` (..., k, m) scaled by ``d`` (..., k); on one traced state
    a block product by ``diag(d)`` (one product an element, the same value: a loop in the compiled code
    over the slots in use, ``live``, not ``k m`` operations of straight-line code)."""
    if np.ndim(X) == 2 and bk.is_symbolic(X):
        return _product(np.diag(np.asarray(d, dtype=object)), X, live)
    return np.asarray(d)[..., :, None] * X


class _Live:
    """The slots in use of :func:`problem_of` on one traced state: the number of leading slots
    (a traced scalar) past which every slot is a data slot whose joint weights are all zero (its
    rows of ``J``, ``J H^-1`` and ``G`` are zeros); :meth:`mm` gives a block product's ``live``
    (:attr:`~sparsedyn.symbolic.block.Block.live`), None where nothing is traced or no slot is data."""

    def __init__(self, frames, weights):
        self.nc, self.bound = len(frames), None
        if weights is None or not bk.is_symbolic(weights) or np.ndim(weights) != 2 \
                or not any(_is_data(f) for f in frames):
            return
        used = [float(i + 1) * (_step(np.sum(_abs(weights[i])) - _TINY) if _is_data(f) else 1.0)
                for i, f in enumerate(frames)]
        self.bound = _vmax(used)

    def mm(self, *per):
        """``live`` of a product whose axes (rows of ``A``, rows and columns of ``B``) have ``per``
        elements a slot (0: not slots; an array: the slot of each element)."""
        if self.bound is None:
            return None
        return (self.bound, *(p if np.ndim(p) else (np.repeat(np.arange(self.nc), p) if p else None) for p in per))


def _is_data(f):
    return isinstance(f, str) and f == DATA_SLOT


def world_columns(model, Xup, S):
    """The joints' motion columns (..., 6, nv) in the world, at its origin, ``[w; v_O]`` (kernel use)."""
    X0 = world_transforms(model, Xup)
    cols = []
    for j in range(model.nbodies):
        X = Transform(X0[j].E[..., None, :, :], X0[j].r[..., None, :])
        cols.append(np.swapaxes(apply_motion_inv(X, np.swapaxes(S[j], -1, -2)), -1, -2))     # (..., 6, nv_j)
    shape = np.broadcast_shapes(*(c.shape[:-2] for c in cols))
    return np.concatenate([np.broadcast_to(c, shape + c.shape[-2:]) for c in cols], -1)


def slot_weights(model, a, b=None):
    """The joint weights (nv,) of a data slot (:func:`problem_of`) of a point of body ``a`` against
    body ``b`` (None or a negative index: the fixed world): 1 on the velocities of ``a``'s joints and
    its ancestors', less 1 on ``b``'s (so 0 on the joints they share)."""
    w = np.zeros(model.nv)
    for body, sign in ((a, 1.0), (b, -1.0)):
        if body is not None and body >= 0:
            for j in model.ancestors(body):
                w[model.v_slice(j)] += sign
    return w


class _Points:
    """The velocities of points of the bodies of ``frames`` (indices; None: the fixed world) at one
    state (kernel use): ``pose[k]`` the frame's ``(R, o)`` (frame -> world, its origin)."""

    def __init__(self, model, Xup, S, frames):
        self.unique = list(dict.fromkeys(k for k in frames if k is not None))
        if not self.unique:                                      # data slots only
            self.pose = {}
            return
        self.J6 = contact_jacobian(model, Xup, S, tuple(Contact(k, "6d") for k in self.unique))
        X0 = world_transforms(model, Xup)
        self.pose = {k: pose(frame_world_transform(model, X0, k)) for k in self.unique}

    def velocity(self, k, p):
        """Rows (3, nv) of the velocity of the point ``p`` (frame ``k``'s axes) of ``k``'s body, frame axes."""
        j = self.unique.index(k)
        Jf = self.J6[..., 6 * j:6 * j + 6, :]
        return Jf[..., 3:, :] - skew(p) @ Jf[..., :3, :]          # v_p = v_o + omega x p

    def relative(self, Rc, k, kb, p, x):
        """Rows (3, nv) in the contact frame ``Rc`` (world axes, columns) of the velocity of the point
        ``p`` of frame ``k`` (at ``x`` in the world) relative to the point of ``kb``'s body there."""
        row = (Rc.T @ self.pose[k][0]) @ self.velocity(k, p)
        if kb is not None:                                       # less the velocity of b's point at x
            Rb, ob = self.pose[kb]
            Rbt = np.swapaxes(Rb, -1, -2)
            row = row - (Rc.T @ Rb) @ self.velocity(kb, (Rbt @ (x - ob)[..., None])[..., 0])
        return row


# --- the constants of the solver ----------------------------------------------------------------------

#: Penetration [m] below which the configuration is left as it is (rounding of a resting contact).
PENETRATION_SLOP = 1e-9

#: Gap [m] below which a contact above its plane is touching: no speculative term (``gap / dt``) in the
#: step, and, load-bearing while the position correction runs, held by it within half the slop of its
#: plane (:mod:`~sparsedyn.contact.correction`).  A sole rocking on its corners leaves micrometre gaps
#: (talos standing without torque: 2.7 and 3.5 um under two of six corners); their push ``gap / dt``
#: asks the sole to tilt, which slides the sticking corners along the plane by about ``gap^2 / (dt L)``
#: (``L`` the sole's size: 1e-7 m/s there), a target no rigid motion meets to the solver's tolerance, so
#: the step crept through ADMM's budget and the Gauss-Seidel sweeps (1,524 iterations).  A point within
#: it stops where it is (at most this far above its plane) and, carrying load, is held onto it.
TOUCHING_GAP = 5e-6

#: ADMM iterations before a state that has not converged is handed to projected Gauss-Seidel (rare:
#: a few states in a thousand random solo12 steps; one in a hundred of the dm_control humanoid's limbs
#: pressed into the floor, where Gauss-Seidel is slower still).
ADMM_BUDGET = 1000

#: ADMM's proximal term relative to the largest eigenvalue of the Delassus matrix.
PROXIMAL = 1e-8

#: A closed contact slipping within this many tolerances of the velocity scale reads as sticking.
STICKING_SLIP = 100.0


# --- the step on its own: the model and where its kernels run, the modes --------------------------

def _positive(who, name, x):
    """``x`` as a float, checked finite and > 0 (a ``ValueError`` naming ``who`` and ``name``)."""
    if type(x) is float and 0.0 < x < np.inf:
        return x
    if isinstance(x, bool) or not isinstance(x, (int, float, np.integer, np.floating)) or not np.isfinite(x) or x <= 0:
        raise ValueError(f"{who}: {name} must be a finite number > 0, got {x!r}")
    return float(x)


def _model_and_kernels(model, who):
    """``(model, where the kernels run)``: a :class:`~sparsedyn.Model` runs them itself; a compiled
    model (``sd.compile(model)``) runs its compiled kernels."""
    inner = getattr(model, "model", None)
    if inner is not None and getattr(type(model), "__sparsedyn_kernel__", None) is not None:
        return inner, model
    return model, model


#: The contact modes; a mode's code is its index here.
MODE_NAMES = ("open", "stick", "slide")


def _modes(lam, u, lscale, vscale, tol):
    """``"open"`` where the normal impulse is zero, ``"stick"`` where the tangential velocity is, else
    ``"slide"``: impulses ``lam`` and velocities ``u`` (B, nc, 3), scales (B,) (one state's:
    :meth:`~sparsedyn.contact.lazy_modes._Modes.codes`)."""
    open_ = lam[..., 2] <= tol * lscale[..., None]
    stick = u[..., 0] ** 2 + u[..., 1] ** 2 <= (STICKING_SLIP * tol * vscale[..., None]) ** 2
    code = np.where(stick, 1, 2)
    code[open_] = 0
    return _MODE_ARRAY.take(code)


_MODE_ARRAY = np.array(MODE_NAMES)
