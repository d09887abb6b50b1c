"""The per-state pieces of the derivatives of a step in a scene, as one kernel on the step's slots.

A step in a :class:`~sparsedyn.Scene` lays its contacts out in the scene's slots
(:func:`~sparsedyn.contact.scene_step.scene_slots`: a body frame per slot, or a pair of them for a
self-collision); its derivatives (:func:`~sparsedyn.contact_step_derivatives`) need, per state, the
contact rows ``J`` as functions of ``q`` with the contact points and normals moving with it, the
derivatives on the tangent space of their products with the step's velocities and impulses (``d(J
w)/dq``, ``d(J^T lambda)/dq``: :func:`slot_products`, never the rows' own derivative), ``H^-1``,
RNEA's derivatives and those of ``q (+) dq``, and the change of the step's position correction at its
impulses (those the step's kernel returns).  They are one traced program,
:func:`~sparsedyn.scene_step_partials`, built per tuple of slot frames (so once per layout,
as the step) and the kinds of contact each slot may hold, whose data are the step's slot data and each
slot's radii and kind (:func:`~sparsedyn.contact.scene_geometry.slot_shapes`), placed in the slots'
frames inside the program (:func:`~sparsedyn.contact.scene_geometry.slot_geometry_of`), so a new
contact set in the same slots is not a new build.

Each slot's geometry (21,) is ``[c_a (3), r_a, c_b (3), r_b, n (3), w_pp, w_pb, w_ap, w_ll, K (6)]``: a
centre ``c_a`` fixed in the slot's frame ``a`` (a sphere's centre of radius ``r_a``, or a vertex:
``r_a = 0``), one ``c_b`` fixed in ``b`` (the world where the slot has no second frame), a normal
``n``, the weights of its kind (one of them 1, the others 0; a kernel has no branch) and six numbers
``K``: a symmetric matrix (its entries ``[K_xx, K_yy, K_zz, K_xy, K_xz, K_yz]``) for ``pb``, two lines'
directions ``e_a = K[0:3]`` (a's axes) and ``e_b = K[3:6]`` (b's axes) for ``pp`` and ``ll``::

    pp:  n = (x_a - x_b) / |x_a - x_b|    two spheres: the normal along the centres
    pb:  n = R_b n_b                      a sphere or vertex of a against a plane fixed in b
    ap:  n = R_a n_a                      a plane fixed in a against a sphere or vertex of b
    ll:  n = (e_a x e_b) / |e_a x e_b|    two lines (a capsule's side, a box's edge): their common normal
    gap = n . (x_a - x_b) - r_a (pp, pb, ll) - r_b (pp, ap, ll)
    x = x_a - r_a n  (pp, pb, ll)         x = x_b + (r_b + gap) n  (ap)

with ``x_a = o_a + R_a c_a``, ``x_b = o_b + R_b c_b`` but where they slide: in ``pb``, ``x_a = o_a + R_a
(c_a + K R_a^T n)``, ``K`` how a curved shape's point on a face (an ellipsoid's, a cylinder's rim)
slides over its surface as the normal turns in its axes (the derivative of its support point; zero at
the normal found, ``K R_a^T n = 0``, so the geometry at ``q`` is the hit's; left out of the slots whose
kinds do not hold :data:`~sparsedyn.contact.scene_geometry.SLIDING`); in ``ap``, ``n = R_a (n_a + K R_a^T
(x_b - o_a))`` where a's normal turns as b's centre moves over a curved surface (an ellipsoid's against a
sphere: ``K`` the derivative of the closest point's normal, ``n_a`` the hit's less ``K`` at b's centre, so the
geometry at ``q`` is the hit's), and in ``pb`` likewise ``n = R_b (n_b + K R_b^T (x_a - o_b))`` where b's
normal turns as a's centre moves (a sphere against an ellipsoid: ``r_a`` not zero tells it from a sliding
vertex); in ``pp``, a centre on a line (a capsule's side against a
sphere, a capsule's end or a box's vertex, a box's edge against a sphere or a capsule's end) is the line's
point nearest the other centre (``e`` zero for a point); in ``ll``, ``x_a`` is a's line's point nearest b's
line.  The rows are those of ``a``'s point at ``x`` relative to ``b``'s point there, in the contact frame of
``n`` (:func:`~sparsedyn.contact.friction_problem.plane_basis`).  Points (a sphere, a capsule's end, a box's
or a mesh's vertex) on a plane or a face (a cylinder's cap too), a sphere or a capsule's end against a sphere,
a capsule's or a cylinder's side or a box's edge (a cylinder's side is its axis a radius away), a box's vertex
against a sphere or a capsule's side, lines (a capsule's side, a box's edge) crossing, an ellipsoid or a
cylinder's rim on a plane or a face, and an ellipsoid and a sphere in either order move so exactly; a mesh's
or a field's edge, a mesh's vertex against a sphere or a capsule, an ellipsoid's or a cylinder's point
against an edge or a vertex and a cylinder's rim against a sphere are held at the point found at ``q`` (their
contact point slides on the shape as it turns), as are two parallel lines (a capsule lying on a face or along
another: its witness point is one of many).  A free slot has the geometry of a vertex on a plane below it (its
rows finite; it is open).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .. import _checks
from .. import backend as bk
from ..algorithms.configuration import integrate_derivatives
from ..algorithms.derivatives import derivative_program
from ..algorithms.kinematics import frame_world_transform, joint_transforms, world_transforms
from ..algorithms.crba import crba_kernel
from ..algorithms.ltdl import dof_lambda, ltdl, ltdl_solve, mpyLi
from ..kernels import Kernel, kernel
from ..model.spatial import cross3, mtv, mv, pose, symmetric_mv
from ..symbolic.ad import inline
from ..symbolic.ir import Graph
from ..symbolic.trace import trace_kernel
from .dynamics import _cached, _run, rnea_partials
from .friction_problem import TOUCHING_GAP, _TINY, _Points, _step, _vmax, plane_basis, slot_frames, slot_structure
from .scene_geometry import KINDS, ROUND_A, SHAPES, SLIDING, GEOMETRY, slot_geometry_of
from .transport import gyroscopic, gyroscopic_jacobian, next_axes_jacobian, to_old_axes, transport, transport_jacobian

__all__ = ["scene_step_partials", "SlotPartials", "slot_rows", "slot_products", "mode_system", "mode_blocks",
           "mode_equations", "rows_mode_equations", "MODE_COLUMNS"]



def slot_rows(model, q, geometry, frames, kinds=None):
    """``(J (3 ns, nv), gap (ns,))``: the contact rows (contact frames ``[t_x, t_y, n]``) and gaps of
    the slots ``frames`` (the step's slot frames: a frame index, or a pair ``(frame_a, frame_b)``)
    whose geometry (ns, 21) is given (module docstring); at the configuration the geometry was found
    at, the rows and gaps of the step.  ``kinds``: per slot the kinds of contact it may hold (a sorted
    tuple of 0 ``pp``, 1 ``pb``, 2 ``ap``, 3 ``ll``, 4 a sliding ``pb`` or a turning normal;
    :func:`~sparsedyn.contact.scene_geometry.slot_kinds`; None: every one), the others' terms left out
    (a slot against the floor: ``pb`` alone, its rows' derivatives a third of the general ones').
    One state (kernel use; no checks)."""
    Xup, S = joint_transforms(model, q)
    ends = [slot_frames(f) for f in frames]
    pts = _Points(model, Xup, S, [k for e in ends for k in e])
    contacts = _slot_contacts(geometry, ends, kinds, pts.pose)
    rows = [pts.relative(Rc, ka, kb, pts.pose[ka][0].T @ (x - pts.pose[ka][1]), x) for Rc, ka, kb, x, _ in contacts]
    return np.concatenate(rows, -2), np.stack([c[4] for c in contacts], -1)


def _slot_contacts(geometry, ends, kinds, poses):
    """Per slot ``(Rc, ka, kb, x, gap)``: the contact frame (3, 3) (world axes, columns ``[t_x, t_y,
    n]``), the slot's frames, its contact point (3,) (world) and gap, from its geometry (module
    docstring) and the frames' ``poses`` (``{frame: (R, o)}``): each kind's the slot may hold, weighted."""
    eye = (np.eye(3), np.zeros(3))
    out = []
    for i, (ka, kb) in enumerate(ends):
        g, kind = geometry[i], (KINDS + (SLIDING,)) if kinds is None else kinds[i]
        (Ra, oa), (Rb, ob) = poses[ka], (eye if kb is None else poses[kb])
        sliding, kind = SLIDING in kind, tuple(k for k in kind if k != SLIDING)
        xa, xb = oa + Ra @ g[0:3], ob + Rb @ g[4:7]
        parts = [_CONTACT[k](g, Ra, Rb, xa, xb, sliding) for k in kind]
        n, gap, x = parts[0] if len(parts) == 1 else \
            (sum(g[11 + k] * part[j] for k, part in zip(kind, parts)) for j in range(3))
        Rc = plane_basis(np.concatenate([n, np.zeros(1, dtype=n.dtype)]))[0]
        out.append((Rc, ka, kb, x, gap))
    return out


def _pp(g, Ra, Rb, xa, xb, sliding):
    """``(n, gap, x)`` of two spheres (``pp``), a's centre on its line ``e_a = R_a K[0:3]`` nearest b's
    and b's on its line ``e_b = R_b K[3:6]`` (a capsule's side, a box's edge; zero for a point)."""
    ea, eb = Ra @ g[15:18], Rb @ g[18:21]
    xa = xa + (ea @ (xb - xa)) * ea
    xb = xb + (eb @ (xa - xb)) * eb
    d = xa - xb
    n = d / bk.sqrt(d @ d + _TINY)                               # (not zero: a slot of another kind)
    return n, n @ d - g[3] - g[7], xa - g[3] * n


def _pb(g, Ra, Rb, xa, xb, sliding):
    """``(n, gap, x)`` of a's sphere or vertex on a plane fixed in b (``pb``), a vertex's point sliding by
    ``K`` or b's normal turning by ``K`` as a sphere's centre moves in b's axes (an ellipsoid's)."""
    if not sliding:
        n = Rb @ g[8:11]
    else:                                                        # (K is zero but on a sliding or turning hit)
        turn = g[3] / (g[3] + ROUND_A)                           # (1 for a sphere, 0 for a vertex: exactly)
        n = Rb @ (g[8:11] + turn * symmetric_mv(g[15:21], Rb.T @ (xa - xb) + g[4:7]))
        xa = xa + (1.0 - turn) * (Ra @ symmetric_mv(g[15:21], Ra.T @ n))
    return n, n @ (xa - xb) - g[3], xa - g[3] * n


def _ap(g, Ra, Rb, xa, xb, sliding):
    """``(n, gap, x)`` of a plane fixed in a against b's sphere or vertex (``ap``), its normal turning by ``K``
    as b's centre moves in a's axes (an ellipsoid's against a sphere)."""
    n = Ra @ (g[8:11] + symmetric_mv(g[15:21], Ra.T @ (xb - xa) + g[0:3])) if sliding else Ra @ g[8:11]
    gap = n @ (xa - xb) - g[7]
    return n, gap, xb + (g[7] + gap) * n


def _ll(g, Ra, Rb, xa, xb, sliding):
    """``(n, gap, x)`` of two lines (``ll``: a capsule's side or a box's edge each) through ``x_a`` along
    ``e_a = R_a K[0:3]`` and ``x_b`` along ``e_b = R_b K[3:6]``: the normal ``e_a x e_b`` (unit), a's
    point nearest b's line."""
    ea, eb = Ra @ g[15:18], Rb @ g[18:21]
    m = cross3(ea, eb)
    mm = m @ m + _PARALLEL                                       # (not zero: a slot of another kind)
    n = m / bk.sqrt(mm)
    s = cross3(xb - xa, eb) @ m / mm
    return n, n @ (xa - xb) - g[3] - g[7], xa + s * ea - g[3] * n


#: Each kind's contact (module docstring), by its number.
_CONTACT = (_pp, _pb, _ap, _ll)

#: Added to ``|e_a x e_b|^2`` of two lines: a slot's other kinds' zero lines stay finite, through their
#: derivatives' squares too (``_TINY``'s would not); two lines that are a contact's cross at 1e-3 rad at
#: least (``|e_a x e_b|^2 >= 1e-6``), so it changes no contact's normal beyond 1e-24.
_PARALLEL = 1e-30


def slot_products(model, q, geometry, w, lam, frames, kinds=None):
    """``(J w (3 ns, 2), J^T lam (nv, 2))``: the rows of :func:`slot_rows` times two velocities ``w``
    (nv, 2) and their transpose times two impulses ``lam`` (3 ns, 2), without the rows: the slots'
    points' velocities from Featherstone's velocity pass, and the impulses' joint forces from the
    backward pass of their body forces (RNEA's), so that their derivatives in ``q`` are those of two
    recursions (what a step's derivatives contract the rows' derivative with, a fraction of the
    rows' own: a row's entry depends on each of its bodies' ancestors).  Both recursions run in world
    axes (:func:`_world_velocities`, :func:`_joint_forces`): a value's derivative then meets each
    body's rotation once, where in body coordinates it passed every transform between a contact and
    a joint (a fifth of the derivatives' operations).  One state (kernel use; no checks)."""
    Xup, S = joint_transforms(model, q)
    ends = [slot_frames(f) for f in frames]
    X0 = world_transforms(model, Xup)
    poses = {k: pose(frame_world_transform(model, X0, k)) for e in ends for k in e if k is not None}
    contacts = _slot_contacts(geometry, ends, kinds, poses)
    vb = [_world_velocities(model, Xup, X0, S, w[:, c]) for c in range(2)]
    Jw, forces = [], [{}, {}]
    for i, (Rc, ka, kb, x, _) in enumerate(contacts):
        u = []
        for c in range(2):
            F = Rc @ lam[3 * i:3 * i + 3, c]                     # the impulse in world axes, on a at x
            ua = _point(model, vb[c], forces[c], ka, x, F, X0)
            ub = 0.0 if kb is None else _point(model, vb[c], forces[c], kb, x, -F, X0)
            u.append(Rc.T @ (ua - ub))
        Jw.append(np.stack(u, -1))
    JtL = np.stack([_joint_forces(model, Xup, X0, S, forces[c], q.dtype) for c in range(2)], -1)
    return np.concatenate(Jw, -2), JtL


def _point(model, vb, forces, k, x, F, X0):
    """The world velocity (3,) of frame ``k``'s body's point at ``x`` (world) at the body velocities
    ``vb`` (:func:`_world_velocities`), and the force ``F`` (world axes) applied there added to ``forces``
    (``{body: spatial force}``, world axes, the moment about the body's origin; ``X0``
    :func:`~sparsedyn.algorithms.kinematics.world_transforms`)."""
    b = model.frames[k].body
    if b < 0:                                                    # a world frame: still, and holds its force
        return np.zeros(3)
    arm = x - X0[b].r
    fw = np.concatenate([cross3(arm, F), F])
    forces[b] = fw if b not in forces else forces[b] + fw
    return vb[b][1] + cross3(vb[b][0], arm)


def _world_velocities(model, Xup, X0, S, w):
    """Per body ``(omega, v)`` (3,) each: its angular velocity and its origin's velocity (world axes) at
    the joint velocities ``w`` (nv,), Featherstone's velocity pass in world axes (``Xup``, ``S`` of
    :func:`~sparsedyn.algorithms.kinematics.joint_transforms`, ``X0`` the bodies' world transforms): a
    body's origin moves with its parent's and the parent's rotation at the offset between them
    (rotated, never a difference of world positions: no symbol of a translation it does not have)."""
    out = []
    for i in range(model.nbodies):
        vJ = mv(S[i], w[model.v_slice(i)])
        E = X0[i].E
        wi, vi = mtv(E, vJ[:3]), mtv(E, vJ[3:])
        p = model.parent[i]
        if p >= 0:
            wp, vp = out[p]
            wi, vi = wp + wi, vp + cross3(wp, mtv(X0[p].E, Xup[i].r)) + vi
        out.append((wi, vi))
    return out


def _joint_forces(model, Xup, X0, S, forces, dtype):
    """``tau`` (nv,): the joint forces of the body ``forces`` (``{body: spatial force}``, world axes, the
    moment about the body's origin), RNEA's backward pass in world axes: a body's forces move to its
    parent's origin by the offset between them (rotated, never a difference of world positions), and
    a joint's force is its motion subspace ``S`` (body coordinates) against them turned into its
    body's axes (``X0``)."""
    tau = np.zeros(model.nv, dtype=dtype) * 0.0
    f = dict(forces)
    for i in range(model.nbodies - 1, -1, -1):
        if i not in f:
            continue
        E = X0[i].E
        tau[model.v_slice(i)] = mtv(S[i], np.concatenate([E @ f[i][:3], E @ f[i][3:]]))
        p = model.parent[i]
        if p >= 0:
            fp = np.concatenate([f[i][:3] + cross3(mtv(X0[p].E, Xup[i].r), f[i][3:]), f[i][3:]])
            f[p] = fp if p not in f else f[p] + fp
    return tau


def _ns(model, frames, **_):
    return len(tuple(frames))


def _m(model, frames, **_):
    return 3 * len(tuple(frames))


_ROWS = Kernel("scene_slot_rows", slot_rows, {"q": ("nq",), "geometry": (_ns, GEOMETRY)},
               {"J": (_m, "nv"), "gap": (_ns,)}, {}, ("frames", "kinds"))
_PRODUCTS = Kernel("scene_slot_products", slot_products, {"q": ("nq",), "geometry": (_ns, GEOMETRY), "w": ("nv", 2),
                                                          "lam": (_m, 2)},
                   {"Jw": (_m, 2), "JtL": ("nv", 2)}, {}, ("frames", "kinds"))


def _unit(i, j):
    e = np.zeros((3, 3))
    e[i, j] = 1.0
    return e


def mode_system(J, G, C, gap, vp, lam, modes, dt):
    """``(K (..., m, m), R (..., m, 3 nv))``: the linearised mode equations of a step's contacts, ``K
    dlambda = -R dx`` (``m = 3 nc``), the impulses' change for a change ``dx = [dq, dv, dtau]`` of the
    state (:mod:`~sparsedyn.contact.friction_derivatives`): per contact ``A dlambda + B du = 0`` with
    ``du = G dlambda + c dx``, ``c`` the change of the contact velocities at fixed impulses (``C``
    (..., m, 3 nv), plus the speculative ``gap / dt`` of a contact above its plane), ``K = A + B G``,
    ``R = B c``::

        open:   A = I,                     B = 0
        stick:  A = 0,                     B = s I
        slide:  A = I_t + [mu t] e_n^T,    B = s e_n e_n^T + mu lambda_n / |u_t| (I_t - t t^T)

    ``t = u_t / |u_t|`` the sliding direction of ``u = J v+`` (``vp`` (..., nv)), ``s = 1 / max diag G``
    (the rows that hold velocities in N s, as the others).  ``J`` (..., m, nv), ``G`` (..., m, m), ``gap``
    (..., nc), ``lam`` (..., nc, 3), ``modes`` (..., nc, 4) ``[open, stick, slide, mu]`` (the mode's
    weight, one of them 1, and the friction coefficient): :func:`mode_blocks`, then
    :func:`mode_equations`.  Written once for floats (any batch) and traced values (one state)."""
    nc = gap.shape[-1]
    u = (J @ vp[..., None])[..., 0].reshape(gap.shape[:-1] + (nc, 3))
    A, B, f = mode_blocks(u, np.diagonal(G, axis1=-2, axis2=-1), gap, lam, modes, dt)
    return mode_equations(A, B, f, J, G, C)


def mode_blocks(u, d, gap, lam, modes, dt):
    """``(A (..., nc, 3, 3), B (..., nc, 3, 3), f (..., nc))``: each contact's blocks of the mode equations
    (:func:`mode_system`) at its velocity ``u = J v+`` (..., nc, 3) (contact frame ``[t_x, t_y, n]``),
    ``d`` (..., 3 nc) the diagonal of ``G``, ``gap`` (..., nc), ``lam`` (..., nc, 3), ``modes`` (..., nc, 4),
    and the speculative factor ``f`` (``1 / dt`` where a contact is above its plane, ``gap >
    TOUCHING_GAP``, else 0): ``c`` is ``C`` plus ``f J`` on the normal rows.  What the mode equations
    need beside ``J``, ``G`` and ``C``: 19 numbers a contact (the native routine forms ``K`` and ``R`` of
    the held contacts from them, :mod:`~sparsedyn.contact.state_derivatives_native`)."""
    symbolic = bk.is_symbolic(u)
    top = _vmax([_vmax(list(d)), _TINY]) if symbolic else np.maximum(np.max(d, -1), _TINY)
    scale = (1.0 / top)[..., None, None, None] if not symbolic else 1.0 / top
    op, st, sl, mu = (modes[..., k][..., None, None] for k in range(4))
    tx, ty = u[..., 0], u[..., 1]
    speed = bk.sqrt(tx * tx + ty * ty)
    moving = _step(speed - _TINY)
    safe = speed * moving + (1.0 - moving)
    tx, ty = (x / safe for x in (tx, ty))
    e = {(i, j): _unit(i, j) for i in range(3) for j in range(3)}
    w = (lam[..., 2] / safe)[..., None, None]
    tt = w * ((1.0 - tx * tx)[..., None, None] * e[0, 0] - (tx * ty)[..., None, None] * (e[0, 1] + e[1, 0])
              + (1.0 - ty * ty)[..., None, None] * e[1, 1])
    tn = tx[..., None, None] * e[0, 2] + ty[..., None, None] * e[1, 2]
    A = op * np.eye(3) + sl * (e[0, 0] + e[1, 1] + mu * tn)
    B = scale * (st * np.eye(3) + sl * e[2, 2]) + sl * mu * tt
    return A, B, _step(gap - TOUCHING_GAP) / dt


def mode_equations(A, B, f, J, G, C):
    """``(K, R)`` of :func:`mode_system` from the contacts' blocks ``A``, ``B`` (..., nc, 3, 3) and
    speculative factors ``f`` (..., nc) (:func:`mode_blocks`), the rows ``J`` (..., m, nv), ``G`` (..., m, m)
    and ``C`` (..., m, 3 nv)."""
    nc, nv = f.shape[-1], J.shape[-1]
    m, lead = 3 * nc, f.shape[:-1]
    n_rows = 3 * np.arange(nc) + 2
    c = C.copy()
    c[..., n_rows, :nv] = c[..., n_rows, :nv] + f[..., None] * J[..., n_rows, :]
    block = (A[..., :, :, None, :] * np.eye(nc)[:, None, :, None]).reshape(lead + (m, m))
    K = block + (B @ G.reshape(lead + (nc, 3, m))).reshape(lead + (m, m))
    R = (B @ c.reshape(lead + (nc, 3, 3 * nv))).reshape(lead + (m, 3 * nv))
    return K, R


def rows_mode_equations(rows, nv):
    """``(K, R)`` of one state's :class:`SlotPartials` ``rows`` (m, 6 nv + m + 7): :func:`mode_equations` of
    the contacts' blocks and ``J``, ``G``, ``C`` held there."""
    at = 5 * nv + len(rows)
    AB = rows[:, at:at + MODE_COLUMNS]
    return mode_equations(AB[:, :3].reshape(-1, 3, 3), AB[:, 3:6].reshape(-1, 3, 3), AB[2::3, 6], rows[:, :nv],
                          rows[:, 5 * nv:at], rows[:, 2 * nv:5 * nv])


class SlotPartials(NamedTuple):
    """Result of :func:`~sparsedyn.scene_step_partials` (batch shape ``...``; ``m = 3 ns``): ``rows``
    (..., m, 6 nv + m + 7) ``[J | J H^-1 | C | G | A_r B_r f | C_c]`` (``A_r``, ``B_r`` (3 each) the row's
    entries of its contact's blocks of the mode equations, ``f`` the contact's speculative factor:
    :func:`mode_blocks`;
    ``C_c`` on the normal rows, zero on the tangential ones), ``state`` (..., nv, 7 nv + 1) ``[W | dint_dq |
    dint_ddq | W_c | dv_c | N]`` and ``gap`` (..., ns)."""

    rows: np.ndarray
    state: np.ndarray
    gap: np.ndarray


#: The columns of :class:`SlotPartials`' rows that hold :func:`mode_blocks` (``[A_r, B_r, f]``): the mode
#: equations' ``K`` (m, m) and ``R`` (m, 3 nv) are formed where they are solved, of the held contacts alone
#: (:func:`mode_equations`), not in the traced program.
MODE_COLUMNS = 7


#: Multiplications from which a traced product of the derivatives' dense linear algebra (``H^-1``
#: times RNEA's derivatives, the rows times those) is one block product, a loop in the compiled code
#: (:func:`~sparsedyn.backend.matmul`): the program then grows with the square of ``nv``, not its cube
#: (the dm_control humanoid's kernel: 350,000 operations unrolled).
BLOCK_PAIRS = 256


def _mm(A, B):
    """``A @ B`` of traced matrices, one block product from :data:`BLOCK_PAIRS` multiplications."""
    return bk.matmul(A, B, min_pairs=BLOCK_PAIRS)


def _inverse_of_factor(model, q):
    """``(H^-1 (nv, nv), solve)`` at traced ``q`` (``solve(b)``: ``H^-1 b`` (nv,) by substitutions) from
    the branch-induced sparse factor ``H = L^T D L`` (Featherstone, "Efficient factorization of the
    joint-space inertia matrix for branched kinematic trees", 2005): ``X = D^-1/2 L^-T`` (the tree's
    pattern) in straight-line code, then ``H^-1 = X^T X`` one block product (a loop summing its lower
    triangle): half the straight-line code of the analytical inverse, and the compiled pieces' cost
    follows the size of their straight-line code."""
    lam = dof_lambda(model)
    L, D = ltdl(model.topology, crba_kernel(model, q))
    Lit = mpyLi(lam, L[None], np.eye(model.nv), unit=True)                     # row r: L^-1 e_r, so L^-T
    X = (1.0 / bk.sqrt(D))[:, None] * Lit
    return _mm(X.T, X), lambda b: ltdl_solve(lam, L, D, b)


def _correction_partials(model, q, solve, JtL):
    """``(dv_c (nv,), -R_c (nv, nv))`` of the position correction whose impulses' joint forces ``J^T l``
    and their change with ``q`` at fixed ``l`` are ``JtL = (J^T l, d(J^T l)/dq)`` (graph arrays), ``solve``
    :func:`_inverse_of_factor`'s:
    ``dv_c = H^-1 J^T l`` and ``R_c = d(H w - J^T l)/dq`` at ``w = dv_c`` and fixed ``l`` (RNEA's
    derivatives at zero velocity and gravity: ``d(H(q) w)/dq``), whose change of ``dv_c`` with ``q``
    is ``W_c = -H^-1 R_c`` and that of ``J dv_c`` ``C_c = J W_c + d(J w)/dq`` (formed with the step's
    own products in :func:`_program`, on the normal rows)."""
    nv = model.nv
    dvc = solve(JtL[0])
    zero = np.zeros(nv, dtype=object) * 0.0
    Tq = rnea_partials(model, q, zero, dvc, None, np.zeros(3, dtype=object) * 0.0)[0]
    return dvc, JtL[1] - Tq


def _program(model, static, optional):
    """The program of :func:`scene_step_partials` at ``static["frames"]``, inputs the kernel's then
    ``f_ext`` where given."""
    frames = tuple(slot_structure(model, f) for f in static["frames"])
    kinds = _kinds_of(static.get("kinds"), len(frames))
    opt = ("f_ext",) if "f_ext" in set(optional) else ()

    def build():
        nq, nv, ns = model.nq, model.nv, len(frames)
        m = 3 * ns
        sizes = [(nq,), (nv,), (nv,), (ns, 3), (ns,), (ns, 4), (ns, 8), (ns, SHAPES), (3,), (1,)] + \
            [(model.nbodies, 6)] * len(opt)
        g = Graph()
        q, v, v_next, lam, ln, modes, data, shapes, gravity, dt, *f_ext = [g.inputs(j, s) for j, s in enumerate(sizes)]
        dt = dt[0]
        with g.phase("rows"):                                                        # (phases: operation counts)
            geometry = slot_geometry_of(model, q, data, shapes, frames, kinds)       # held fixed in the frames
            static_rows = {"frames": frames, "kinds": kinds}
            J, gap = inline(trace_kernel(_ROWS, model, static_rows), [q, geometry])
        # the step's velocity w in the old axes, and the acceleration of the balance (module transport)
        w = to_old_axes(model, v_next, dt)
        a = (w - v - gyroscopic(model, v, dt)) / dt - transport(model, v)
        with g.phase("H^-1"):
            Minv, solve = _inverse_of_factor(model, q)
        with g.phase("RNEA's derivatives"):
            Tq, Tv = rnea_partials(model, q, v, a, f_ext[0] if f_ext else None, gravity)
        # the rows' derivative contracted where it is used: d(J w)/dq, d(J dv_c)/dq, d(J^T lambda)/dq and
        # d(J^T l)/dq, the derivatives of two velocity passes and two force passes (slot_products)
        lc = np.zeros(m, dtype=object) * 0.0
        lc[2::3] = ln
        L = np.stack([lam.reshape(m), lc], -1)
        dprod = derivative_program(_PRODUCTS, model, ("q",), static_rows)
        with g.phase("the correction's derivatives"):
            JtL = inline(dprod, [q, geometry, np.zeros((nv, 2)), L])[1]
            JtLc = (J.T @ lc, np.asarray(JtL).reshape(nv, 2, nv)[:, 1])
            dvc, nRc = _correction_partials(model, q, solve, JtLc)
        Dq, Dd = inline(trace_kernel(integrate_derivatives.__kernel__, model), [q, dt * (w + dvc)])
        with g.phase("the rows' products' derivatives"):
            dJw, dJtL = (np.asarray(x, dtype=object) for x in inline(dprod, [q, geometry, np.stack([w, dvc], -1), L]))
        dJw, dJtL = dJw.reshape(m, 2, nv), dJtL.reshape(nv, 2, nv)
        Uq, Fq = dJw[:, 0], dJtL[:, 0]                                     # d(J w)/dq, d(J^T lambda)/dq
        # H^-1 and J H^-1 times the three right sides at once (W's q and v columns, W_c), so that the rows'
        # products C = J W and C_c = J W_c are those of J H^-1 (m nv^2 each, not m nv 3 nv); as one product
        # R3^T [H^-1, (J H^-1)^T] (H^-1 symmetric, node for node) whose compressed rows skip the structural
        # zeros of R3 (RNEA's derivatives: a joint's row is zero off its ancestors and descendants), the
        # same sums in the same order as H^-1 R3 and J H^-1 R3
        # (the three right sides negated, and the second scaled by dt, where they are formed: the products
        # then are W's and C's columns as they are used, with no pass over them)
        with g.phase("dense products"):
            JMinv = _mm(J, Minv)
            R3 = np.concatenate([Fq - dt * Tq, -dt * Tv, nRc], -1)
            MRt = _mm(R3.T, np.concatenate([Minv, JMinv.T], -1))
        MR, JMR = MRt[:, :nv].T, MRt[:, nv:].T
        # free joints: the old axes, the backward gyroscopic term (module transport)
        Tj = dt * transport_jacobian(model, v) + gyroscopic_jacobian(model, v, dt)
        Wv = np.eye(nv) + MR[:, nv:2 * nv] + Tj
        W = np.concatenate([MR[:, :nv], Wv, dt * Minv], -1)
        Wc = MR[:, 2 * nv:]
        Cc = np.zeros((m, nv), dtype=object)             # (the normal rows alone: all the correction reads)
        Cc[2::3] = JMR[2::3, 2 * nv:] + dJw[2::3, 1]
        C = np.concatenate([JMR[:, :nv] + Uq, J + JMR[:, nv:2 * nv] + J @ Tj, dt * JMinv], -1)
        with g.phase("dense products"):
            G = _mm(J, JMinv.T).T                       # (the sparse rows of J skipped: G's sums, transposed)
        with g.phase("mode system"):
            A, B, f = mode_blocks((J @ w).reshape(ns, 3), np.diagonal(G), gap, lam, modes, dt)
        blocks = np.concatenate([A.reshape(m, 3), B.reshape(m, 3), np.repeat(f, 3)[:, None]], -1)
        rows = np.concatenate([J, JMinv, C, G, blocks, Cc], -1)
        state = np.concatenate([W, Dq, Dd, Wc, dvc[:, None], next_axes_jacobian(model, w, dt)], -1)
        return g.program([rows, state, gap], sizes, name="scene_step_partials",
                         input_names=("q", "v", "v_next", "impulses", "correction", "modes", "contact_data", "shapes",
                                      "gravity", "dt") + opt,
                         output_names=SlotPartials._fields)
    return _cached(("scene_step_partials", frames, kinds, opt), model, build)


def _kinds_of(kinds, ns):
    """``kinds`` (empty or None, or per slot a sequence of kinds of contact) as a tuple of ``ns`` sorted
    tuples of distinct kinds (0, 1, 2, and 3 :data:`~sparsedyn.contact.scene_geometry.SLIDING`), checked;
    None where every slot may hold every kind."""
    if kinds is None or (isinstance(kinds, (tuple, list)) and not kinds):
        return None
    try:
        out = tuple(tuple(sorted(set(int(k) for k in x))) for x in kinds)
    except (TypeError, ValueError):
        out = None
    if out is None or len(out) != ns or not all(set(x) - {SLIDING} and set(x) <= {*KINDS, SLIDING} for x in out):
        raise ValueError(f"scene_step_partials: kinds must be empty or, per slot ({ns}), a non-empty sequence of "
                         f"the kinds of contact {KINDS} (0 pp, 1 pb, 2 ap, 3 ll) and {SLIDING} where a pb contact "
                         f"may slide or a normal turn, got {kinds!r}")
    return None if all(x == KINDS + (SLIDING,) for x in out) else out


def _cols(model, frames, **_):
    return 6 * model.nv + 3 * len(tuple(frames)) + MODE_COLUMNS


def _state_cols(model, **_):
    return 7 * model.nv + 1


@kernel(inputs={"q": ("nq",), "v": ("nv",), "v_next": ("nv",), "impulses": (_ns, 3), "correction": (_ns,),
                "modes": (_ns, 4), "contact_data": (_ns, 8), "shapes": (_ns, SHAPES), "gravity": (3,), "dt": (1,)},
        optional={"f_ext": ("nb", 6)}, static=("frames", "kinds"), sequences=("frames", "kinds"),
        outputs={"rows": (_m, _cols), "state": ("nv", _state_cols), "gap": (_ns,)},
        program=_program, result=SlotPartials)
def scene_step_partials(model, q, v, v_next, impulses, correction, modes, contact_data, shapes, gravity, dt, frames,
                        kinds=(), *, f_ext=None):
    """The per-state pieces of the derivatives of a step in a scene (a :class:`~sparsedyn.SlotPartials`), for
    the slots ``frames`` (a frame index or name per slot, or a pair of them for a two-body contact;
    the step's slots) whose contacts are the step's slot data ``contact_data`` (..., ns, 8) (``[mu, p_a
    (3), n (3), offset]``: a's witness point in its frame's axes, the world normal, the plane ``n . x =
    offset`` through b's witness point) and ``shapes`` (..., ns, 12) (``[r_a, r_b, w_pp, w_pb, w_ap, w_ll, K
    (6)]``: the radii, 0 for a vertex, the one-hot weights of the kind and a sliding point's or turning
    normal's ``K``;
    :func:`~sparsedyn.contact.scene_geometry.slot_shapes`), their geometry held fixed in the slots'
    frames as ``q`` moves (module docstring; :func:`~sparsedyn.contact.scene_geometry.slot_geometry_of`),
    of the step from
    ``(q, v)`` whose next velocity is ``v_next`` (nv,): the contact
    rows ``J`` (3 ns, nv) and gaps (ns,), ``J H^-1`` and the Delassus matrix ``G = J H^-1 J^T``; the
    change of the step's velocity ``w`` (``v_next`` in the old axes, :mod:`~sparsedyn.contact.transport`) at fixed
    impulses ``W = [-H^-1 (dt dtau/dq - d(J^T lambda)/dq), I - dt H^-1 dtau/dv + dt dT/dv + dY/dv,
    dt H^-1]`` (nv, 3 nv) (RNEA's derivatives at ``(q, v, a)`` under ``gravity`` (3,) and ``f_ext``,
    held constant, ``a = (w - v) / dt - T(v) - Y(v) / dt`` with ``T`` and ``Y`` the free joints'
    :func:`~sparsedyn.contact.transport.transport` and :func:`~sparsedyn.contact.transport.gyroscopic`;
    ``lambda`` the ``impulses`` (ns, 3)), that of the contact
    velocities ``C = J W + [d(J w)/dq, 0, 0]`` (3 ns, 3 nv) at fixed ``w``, the derivatives of
    ``q (+) dt (w + dv_c)`` (:func:`~sparsedyn.integrate_derivatives`), and ``N = dv_next / dw`` (nv, nv)
    (:func:`~sparsedyn.contact.transport.next_axes_jacobian`); ``dt`` (1,).  And the blocks of the
    mode equations (:func:`~sparsedyn.contact.scene_derivatives.mode_blocks`, from which
    :func:`~sparsedyn.contact.scene_derivatives.mode_equations` forms them) of the step whose
    impulses and ``modes`` (ns, 4) are given.  The position correction of the step
    (split impulse), its normal impulses ``correction`` (ns,) (zero where no point penetrates): its
    velocity ``dv_c = H^-1 J_n^T l`` (nv,), and at fixed impulses its change with ``q`` ``W_c`` (nv, nv)
    and that of ``J dv_c``, ``C_c`` (3 ns, nv) (on the normal rows, those the correction holds; zero on the
    tangential ones).  Packed as :class:`~sparsedyn.SlotPartials` says.
    ``kinds``: per slot the kinds of contact it may hold (0 ``pp``, 1 ``pb``, 2 ``ap``, 3 ``ll``, and 4
    where a ``pb`` contact may slide or its normal or an ``ap`` normal turn, its ``K`` not zero; a free slot is
    ``pb``), every one where empty (the default); the program leaves out the terms of the others, so
    each slot's weights must be of one of them (:func:`~sparsedyn.contact.scene_geometry.slot_kinds`:
    those of a scene's slots).  One traced program per tuple of slot frames and kinds (the rows'
    products with the step's velocities and impulses differentiated by the symbolic layer; RNEA's
    derivatives those of Carpentier and Mansard, "Analytical derivatives of rigid body dynamics
    algorithms", 2018; its dense products compiled as loops)."""
    m = getattr(model, "model", model)
    ns = len(tuple(frames))
    q, v, v_next, f_ext, gravity, _, _ = _checks.dynamics(m, q, v, v_next, f_ext, gravity, "v_next",
                                                          "nv joint velocities")
    given = {"impulses": (impulses, (ns, 3)), "correction": (correction, (ns,)), "modes": (modes, (ns, 4)),
             "contact_data": (contact_data, (ns, 8)), "shapes": (shapes, (ns, SHAPES)), "dt": (dt, (1,))}
    for name, (x, tail) in given.items():
        x = _checks.numeric(name, x, f"(..., {', '.join(map(str, tail))})")
        if x.ndim < len(tail) or x.shape[x.ndim - len(tail):] != tail:
            raise ValueError(f"scene_step_partials: {name} must have shape (..., {', '.join(map(str, tail))}), got "
                             f"{x.shape}")
        given[name] = x
    impulses, correction, modes, data, shapes, dt = (given[n] for n in ("impulses", "correction", "modes",
                                                                        "contact_data", "shapes", "dt"))
    opt = ("f_ext",) if f_ext is not None else ()
    prog = _program(m, {"frames": frames, "kinds": kinds}, opt)
    args = [q, v, v_next, impulses, correction, modes, data, shapes, gravity, dt] + ([f_ext] if opt else [])
    arrays = [np.asarray(x, dtype=object if any(bk.is_symbolic(y) for y in args) else float) for x in args]
    tails = [1, 1, 1, 2, 1, 2, 2, 2, 1, 1] + [2] * len(opt)
    shape = np.broadcast_shapes(*(x.shape[:x.ndim - t] for x, t in zip(arrays, tails)))
    flat = [np.broadcast_to(x, shape + x.shape[x.ndim - t:]).reshape((-1,) + x.shape[x.ndim - t:])
            for x, t in zip(arrays, tails)]
    out = _run(prog, flat)
    return SlotPartials(*(np.reshape(o, shape + np.shape(o)[1:]) for o in out))
