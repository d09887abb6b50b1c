"""Derivatives of a frictional contact step (:func:`~sparsedyn.contact_step`) in its current mode.

The step (semi-implicit Euler; :mod:`sparsedyn.contact.friction`) maps ``(q, v, tau)`` to::

    H (v+ - v) = dt (tau - C(q, v)) + J^T lambda,        q+ = q (+) dt v+

(for a free joint ``v+`` in the body's axes before the step, its free velocity with the transport and backward
gyroscopic terms ``dt T(v) + Y(v)`` of :mod:`~sparsedyn.contact.transport`, and the step's own ``v+`` that
velocity turned into the axes after it: its derivatives are these times
:func:`~sparsedyn.contact.transport.next_axes_jacobian`) with the impulses ``lambda`` (contact frames ``[t_x,
t_y, n]``) solving Coulomb's law.  Away from a change of mode the solution is a smooth function of the state,
and the implicit function theorem differentiates it: each contact keeps the equations of its mode,

* ``open``: ``lambda_i = 0``;
* ``stick``: ``u_i = 0`` (the point's next velocity, all three directions; as impulse dynamics);
* ``slide``: ``u_n = 0`` and ``lambda_t = -mu lambda_n t``, ``t = u_t / |u_t|`` the sliding direction, whose
  derivative ``dt = (I - t t^T) du_t / |u_t|`` is part of the linearisation;

with ``u = J(q) v+ + b(q)``, ``b`` the speculative gap term ``[0, 0, gap / dt]`` for ``gap >= TOUCHING_GAP``
(5 um), else 0.  Differentiating the balance ``r = dt (RNEA(q, v, (v+ - v) / dt) - tau) - J(q)^T lambda = 0``::

    dv+ = H^-1 (J^T dlambda - r_x dx)          r_q = dt dRNEA/dq - d(J^T lambda)/dq,
                                               r_v = dt dRNEA/dv - H (1 + dt T' + Y'),   r_tau = -dt I
    du  = G dlambda + c dx                     c = J dv+|_(dlambda=0) + d(J v+ + b)/dq

and the mode equations give one small linear system ``(A + B G) dlambda = -B c dx`` (``m = 3 nc`` unknowns),
solved in the least-squares sense, so a redundant contact set (a box's four corners: ``G`` singular) gives the
unique ``dv+`` (``J^T dlambda`` is unique where ``v+`` is).  Where the Coulomb problem itself has a continuum
of solutions (four corners sliding while the box turns: the normal impulses can be shared in many ways, each
turning the box differently), the step returns one and the derivative is the minimum-norm change of impulses.

The per-state pieces are one traced program (cached per model and contact set; on ``sd.compile(model)``
a user kernel of the compiled model, built once): the contact rows ``J`` and gaps, ``H^-1``
(:func:`~sparsedyn.minv`'s recursion), RNEA's analytic derivatives (Carpentier and Mansard, "Analytical
derivatives of rigid body dynamics algorithms", 2018) and the tangent-space derivative of the rows
``dJ/dq`` (m, nv, nv) (the traced rows differentiated by the symbolic layer), contracted with ``v+`` and
``lambda`` for ``d(J v+)/dq`` and ``d(J^T lambda)/dq``.  Then ``q+ = q (+) dt v+`` by
:func:`~sparsedyn.integrate_derivatives`.  A penetration removed from the configuration (the split-impulse correction,
a function of ``q`` alone) is differentiated alike (its active normal rows held on the plane, or at the band's top).

Conventions: every derivative is ``(..., nv, nv)``; ``d/dq`` is on the tangent space (``d/d(dq) f(q (+)
dq)`` at ``dq = 0``, as :func:`~sparsedyn.aba_derivatives`), and ``d q+`` is expressed on the tangent space
at ``q+`` (``q+ (+) dq+``), as Pinocchio's ``dIntegrate``.  At a contact at ``gap = TOUCHING_GAP`` the step
jumps in ``q`` (the speculative term switches on), and where the correction's held rows or active rows
change it has a kink: the derivative is the one of the branch the step took.  ``f_ext`` and ``gravity``
are held constant; the joints' springs and dampers (``passive=True``) by the chain rule through ``tau``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .. import _checks
from ..algorithms.configuration import integrate_derivatives
from ..algorithms.dynamics_derivatives import rnea_derivatives
from ..algorithms.minv import minv
from ..kernels import native_calls, use_backend
from .friction import contact_step
from .correction import correction_impulses, correction_targets, held_rows
from .min_norm import min_norm_solve, psd_solve
from .passive_step import passive_derivatives, passive_flag
from .point_partials import contact_step_partials, point_contacts_only
from .friction_problem import _TINY, PENETRATION_SLOP, ContactStep, _model_and_kernels, _positive, point_contacts
from .scene import Scene
from .scene_derivatives import MODE_COLUMNS, mode_system, rows_mode_equations, scene_step_partials
from .scene_slotted import MODE_WEIGHTS, slotted_scene_step
from .derivative_blocks_native import scene_blocks_call
from .derivative_replay import pieces_kernel
from .fused_derivatives import fused_derivatives
from .state_derivatives_native import native_state_derivatives, native_states_derivatives
from .transport import gyroscopic, gyroscopic_jacobian, next_axes_jacobian, to_old_axes, transport, transport_jacobian

__all__ = ["ContactStepDerivatives", "contact_step_derivatives", "MIN_DT"]

_NONE, _PARTIALS = {}, scene_step_partials.__name__

#: Smallest time step [s] of :func:`contact_step_derivatives`: the acceleration ``(v+ - v) / dt`` it
#: differentiates has a relative rounding error of about ``eps |v| / (dt |a|)``, 2e-8 at a nanosecond
#: for ordinary velocities and accelerations, and no digit left a few decades below.
MIN_DT = 1e-9


class ContactStepDerivatives(NamedTuple):
    """Result of :func:`contact_step_derivatives` (batch shape ``...`` of the inputs).

    ``dv_dq``, ``dv_dv``, ``dv_dtau``: derivatives of the next velocity ``v+``; ``dq_dq``,
    ``dq_dv``, ``dq_dtau``: of the next configuration ``q+`` (on the tangent space at ``q+``);
    each (..., nv, nv), ``d/dq`` on the tangent space at ``q``.  ``step``: the
    :class:`~sparsedyn.ContactStep` they are taken at (its ``modes`` are the modes held).
    """

    dv_dq: np.ndarray
    dv_dv: np.ndarray
    dv_dtau: np.ndarray
    dq_dq: np.ndarray
    dq_dv: np.ndarray
    dq_dtau: np.ndarray
    step: ContactStep


# --- the step's derivatives ---------------------------------------------------------------------

def contact_step_derivatives(model, q, v, tau, contacts, dt, **options):
    """Derivatives of one :func:`~sparsedyn.contact_step` (a :class:`ContactStepDerivatives`).

    Arguments as :func:`~sparsedyn.contact_step` (``q`` (..., nq), ``v``/``tau`` (..., nv), the one-sided
    contacts, ``dt`` >= :data:`MIN_DT`, and its options ``tol``, ``max_iterations``, ``solver``, ``f_ext``,
    ``gravity``, ``warm_start``, ``margin``, ``passive``: the joints' springs and dampers, their own change
    with ``q`` and ``v`` included); the step is taken, then differentiated in the mode each contact is in
    (``step.modes``), by the implicit function theorem (module docstring).  Returns ``dv_dq``, ``dv_dv``,
    ``dv_dtau``, ``dq_dq``, ``dq_dv``, ``dq_dtau`` (..., nv, nv) and ``step``.  ``d/dq`` is on the tangent
    space, ``dq+`` on the tangent space at ``q+``; ``f_ext`` and ``gravity`` are held constant.  The derivatives are those of the exact
    solution in the current modes; at a change of mode (a contact on the edge of its friction
    cone, a point that just touches, a sliding velocity crossing zero) the step is not
    differentiable and these are one-sided.  A batch of states (leading axes) is differentiated at
    once; ``model`` may be ``sd.compile(model)``.  ``step`` is :func:`~sparsedyn.contact_step`'s for
    the same arguments and options bit for bit: a loop needing both calls this alone.

    ``contacts`` may be a :class:`~sparsedyn.Scene` (``q`` (nq,) or a batch (B, nq)): the step is the
    scene's and the derivatives include how its contact points and normals move with ``q``
    (:mod:`~sparsedyn.contact.scene_derivatives`: exact for a vertex on a plane or a face, spheres,
    capsules and boxes against each other, an ellipsoid or a cylinder's rim on a face; a mesh's or a
    field's edge is held where it was found), with the active pairs held (a pair that starts or stops
    touching under the perturbation is a change of mode).  Their per-state pieces are one kernel on the step's slots
    (:func:`~sparsedyn.contact.scene_derivatives.scene_step_partials`: native on the default road,
    built once per slot layout as the step).

    >>> import numpy as np, sparsedyn as sd
    >>> puck = sd.ModelBuilder("puck").add_body("puck", None, sd.make_joint("free"), mass=1.0,
    ...                                          rot_inertia=np.eye(3) / 100).add_frame("puck", "puck").build()
    >>> d = sd.contact_step_derivatives(puck, np.array([0, 0, 0, 0, 0, 0, 1.0]), np.array([0, 0, 0, 1.0, 0, 0]),
    ...                                 np.zeros(6), [sd.Contact("puck", "3d", friction=0.5)], 1e-3)
    >>> d.step.modes.tolist(), round(float(d.dv_dv[3, 3]), 12)     # sliding: the speed carries over
    (['slide'], 1.0)
    """
    if "passive" in options and (p := passive_flag("contact_step_derivatives", options.pop("passive"))):
        return passive_derivatives(contact_step_derivatives, model, q, v, tau, contacts, dt, options, p)
    got = fused_derivatives(model, q, v, tau, contacts, dt, options, ContactStepDerivatives) if type(contacts) is \
        Scene and model is contacts.model and type(dt) is float and MIN_DT <= dt < math.inf else None
    if got is not None and got[3] is not None:       # one state in a scene on the fused road: two native calls
        return got[3]
    _checks.model_first(who := "contact_step_derivatives", model, "model, q, v, tau")
    model, kernels = _model_and_kernels(model, who)
    if (scene := contacts if isinstance(contacts, Scene) else None) is None:
        contacts = point_contacts(model, contacts, who, friction=True)
    dt = _positive(who, "dt", dt)
    if dt < MIN_DT:
        raise ValueError(f"{who}: dt must be at least {MIN_DT:g} s (the derivatives divide the velocity change by "
                         f"dt, which loses every digit below it), got {dt!r}")
    if scene is not None:                            # (got: the fused road's step, its derivatives not made)
        step, contacts, slotted = got[:3] if got else slotted_scene_step(model, kernels, q, v, tau, scene, dt, options)
        if slotted is not None and options.get("f_ext") is None:       # (the step checked q, v, tau, gravity)
            return _scene_result(model, kernels, q, v, step, slotted, dt, options.get("gravity"), scene)
    else:
        step, slotted = contact_step(kernels, q, v, tau, contacts, dt, **options), None     # (checks the others)
    d = differentiate_step(model, kernels, q, v, tau, contacts, dt, step, options.get("f_ext"),
                           options.get("gravity"), slotted)
    _checks.finite_result(who, d, (2,) * 6)          # an overflow (a velocity of 1e150) is an error, not NaN
    return d


def _scene_result(model, kernels, q, v, step, slotted, dt, gravity, scene=None):
    """:func:`contact_step_derivatives` of a step in a scene laid out in slots (``slotted``), without
    ``f_ext``, whose arguments the step has checked: :func:`_scene_derivatives`, checked finite."""
    nv, shape = model.nv, step.v.shape[:-1]
    B = len(slotted.data)
    if B == 1:
        d = _one_state_result(model, kernels, q, v, step, slotted, dt, gravity, scene)
        if d is not None:
            return d
    qb = np.asarray(q, float).reshape(B, model.nq)
    vb, g = (_rows_of(x, B, n) for x, n in ((v, nv), (model.gravity if gravity is None else gravity, 3)))
    dv, dq = _scene_derivatives(kernels, qb, vb, step.v.reshape(B, nv), slotted, g, None, dt)
    d = _split(dv, dq, shape, step)
    if not math.isfinite(float(dv.sum() + dq.sum())):      # (one sum: an overflow of it looks at each)
        _checks.finite_result("contact_step_derivatives", d, (2,) * 6)
    return d


def _one_state_result(model, kernels, q, v, step, slotted, dt, gravity, scene=None):
    """:func:`_scene_result` of one state on the native road: the pieces' built kernel for the slots and the
    hand-written routine of the rest (:func:`_one_state`; with ``scene``, its one-state call writing the six
    blocks, kept per slot layout, :func:`~sparsedyn.contact.derivative_blocks_native.scene_blocks_call`),
    whose return says the result is finite; None off that road (the NumPy backend, a kernel not built)."""
    f = (native_calls(kernels) or _NONE).get(_PARTIALS) if use_backend.current() != "numpy" else None
    if f is None:
        return None
    nv = model.nv
    g = model.gravity if gravity is None and type(model.gravity) is np.ndarray else \
        _rows_of(model.gravity if gravity is None else gravity, 1, 3)[0]
    weights = _mode_weights(slotted.modes, slotted.mu) if slotted.weights is None else slotted.weights
    w, corr = weights[0], slotted.correction[0]
    call = None if scene is None else scene_blocks_call(scene, nv, len(slotted.frames), dt)
    one = type(q) is np.ndarray and q.shape == (model.nq,) and type(v) is np.ndarray and v.shape == (nv,)
    pieces = pieces_kernel(f, slotted.frames, slotted.kinds)(   # (the slots' built kernel: no lookup, no checks)
        q if one and q.dtype == float else np.asarray(q, float).reshape(model.nq),
        v if one and v.dtype == float else np.asarray(v, float).reshape(nv), step.v.reshape(nv),
        slotted.impulses[0], corr, w, slotted.data[0], slotted.shapes[0], g, call[2] if call else
        np.array([float(dt)]))
    got = None if call is None else call[0](pieces[0], pieces[1], w, corr, call[1])
    if got is not None and got[6][0] >= 0:                      # the six blocks (nv, nv) and the return code
        finite = got[6][0] == 0
        d = tuple.__new__(ContactStepDerivatives, got[:6] + (step,))
    else:
        dv, dq, finite = _one_state(pieces, w, slotted.modes[0], corr, nv, dt)
        d = _split(dv, dq, (), step)
    if not finite:
        _checks.finite_result("contact_step_derivatives", d, (2,) * 6)
    return d


def _rows_of(x, B, n):
    """``x`` (n,) or (B, n) as (B, n) floats: a reshape where it holds B rows (a view), else broadcast."""
    x = np.asarray(x, float)
    return x.reshape(B, n) if x.size == B * n else np.broadcast_to(x, (B, n))


def _split(dv, dq, shape, step):
    """The :class:`ContactStepDerivatives` of ``dv = [dv_dq, dv_dv, dv_dtau]`` and ``dq`` likewise (B, nv,
    3 nv), batch ``shape``: views of their column blocks (no copy)."""
    nv = dv.shape[-2]
    dv, dq = dv.reshape(shape + (nv, 3 * nv)), dq.reshape(shape + (nv, 3 * nv))
    return ContactStepDerivatives(dv[..., :nv], dv[..., nv:2 * nv], dv[..., 2 * nv:], dq[..., :nv],
                                  dq[..., nv:2 * nv], dq[..., 2 * nv:], step)


def differentiate_step(model, kernels, q, v, tau, contacts, dt, step, f_ext=None, gravity=None, slotted=None):
    """The derivatives of a step already taken (``step``, :func:`contact_step` of these arguments) as
    :func:`contact_step_derivatives`; ``model`` a Model, ``kernels`` where its kernels run (the model
    or its compiled form), ``contacts`` checked.  (What :func:`contact_step_derivatives` costs beyond
    the step.)  ``slotted``: a step in a scene, its contacts in their slots (:class:`~sparsedyn.contact.scene_slotted.Slotted`), whose
    points and normals move with ``q``."""
    q, v, tau, f_ext, _, _, _ = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau", "nv joint forces")
    nv, nq = model.nv, model.nq
    shape = step.v.shape[:-1]
    B = int(np.prod(shape, dtype=int))
    if B == 0:                                       # no state: empty derivatives of the batch shape
        return ContactStepDerivatives(*(np.zeros(shape + (nv, nv)),) * 6, step)
    def flat(x, tail):
        return (x if x.shape == shape + tail else np.broadcast_to(x, shape + tail)).reshape((B,) + tail)
    qb, vb = flat(q, (nq,)), flat(v, (nv,))
    if slotted is not None:
        g = flat(model.gravity if gravity is None else np.asarray(gravity, float), (3,))
        fx = None if f_ext is None else flat(f_ext, f_ext.shape[-2:])
        return _split(*_scene_derivatives(kernels, qb, vb, step.v.reshape(B, nv), slotted, g, fx, dt), shape, step)
    nc = len(contacts)
    lam3, modes = np.asarray(step.impulses, float).reshape(B, nc, 3), np.asarray(step.modes).reshape(B, nc)  # (a list)
    mu = np.array([c.friction for c in contacts], float).reshape(1, nc)
    m = 3 * nc
    vp = to_old_axes(model, step.v.reshape(B, nv), dt)          # the step's velocity w, in the old axes
    lam = lam3.reshape(B, m)
    fx = None if f_ext is None else flat(f_ext, f_ext.shape[-2:])

    # the balance r = dt (RNEA(q, v, (w - v - Y(v)) / dt - T(v)) - tau) - J^T lambda (T, Y: the free joints'
    # transport and backward gyroscopic terms, module transport), H^-1 and the contact rows
    a = (vp - vb - gyroscopic(model, vb, dt)) / dt - transport(model, vb)
    g = flat(model.gravity if gravity is None else np.asarray(gravity, float), (3,))

    def pieces(rows, v, a, w, lam, modes, g, f_ext, h, velocity=True):
        return _point_pieces(model, kernels, contacts, qb[rows], v, a, w, lam, g, f_ext, h, velocity)
    if nc:
        weights = _mode_weights(modes, mu)
        P = pieces(slice(None), vb, a, vp, lam, weights, g, fx, dt)
        W = P.W
    else:
        Tq, Tv, _ = rnea_derivatives(kernels, qb, vb, a, f_ext=fx, gravity=gravity)
        Minv = minv(kernels, qb)
        # dv+ = H^-1 J^T dlambda + W dx,  x = [q, v, tau]
        Wv = np.eye(nv) - dt * (Minv @ Tv) + dt * transport_jacobian(model, vb) + gyroscopic_jacobian(model, vb, dt)
        W = np.concatenate([-(Minv @ (dt * Tq)), Wv, dt * Minv], -1)                               # (B, nv, 3 nv)
    if nc:
        W = W + _impulse_response(P, vp, lam3, modes, mu, dt)
    dv = W.reshape(shape + (nv, 3 * nv))
    dv_dq, dv_dv, dv_dtau = dv[..., :nv], dv[..., nv:2 * nv], dv[..., 2 * nv:]

    # q+ = q (+) dt (v+ + correction)
    dcorr = np.zeros((B, nv, nv))
    if not nc:
        Dq, Dd = integrate_derivatives(kernels, qb, dt * vp)
    else:
        Dq, Dd = P.Dq, P.Dd                     # at q (+) dt v+ (in a scene: at the corrected step)
        ln = _point_correction(P, modes, dt)
        pen = np.flatnonzero(np.any(ln != 0.0, -1)) if ln is not None else np.zeros(0, int)
        if pen.size:                                            # at the corrected step
            corr, dcorr[pen] = _point_correction_derivative(P, pieces, pen, ln[pen], dt)
            Dq, Dd = Dq.copy(), Dd.copy()
            if B == 1:                                          # one state: the native fast path
                Dq[0], Dd[0] = integrate_derivatives(kernels, qb[0], dt * (vp[0] + corr[0]))
            else:
                Dq[pen], Dd[pen] = integrate_derivatives(kernels, qb[pen], dt * (vp[pen] + corr))
    Dd = Dd.reshape(shape + (nv, nv))
    dq_dq = Dq.reshape(shape + (nv, nv)) + dt * (Dd @ (dv_dq + dcorr.reshape(shape + (nv, nv))))
    N = next_axes_jacobian(model, vp, dt).reshape(shape + (nv, nv))       # v+ = w in the new axes
    return ContactStepDerivatives(N @ dv_dq, N @ dv_dv, N @ dv_dtau, dq_dq, dt * (Dd @ dv_dv), dt * (Dd @ dv_dtau),
                                  step)


def _impulse_response(P, vp, lam, modes, mu, dt):
    """``H^-1 J^T dlambda`` (B, nv, 3 nv): the impulses' change from the linearised mode equations
    (:func:`~sparsedyn.contact.scene_derivatives.mode_system`), at the step's ``v+`` (B, nv), impulses
    ``lam`` (B, nc, 3), modes (B, nc) and friction ``mu`` (B or 1, nc); ``P`` the :class:`_Pieces` of
    the step.  An open contact's rows say
    ``dlambda_i = 0``: the system is solved on the others' rows (:func:`min_norm_solve`; a redundant
    contact set: the minimum-norm change of the impulses)."""
    K, R = mode_system(P.J, P.G, P.C, P.gap, vp, lam, _mode_weights(modes, mu), dt)
    out = np.zeros((len(K), P.JMinv.shape[-1], R.shape[-1]))
    modes = np.asarray(modes).reshape(len(K), -1)
    for b in range(len(K)):
        held = np.flatnonzero(modes[b] != "open")
        stick = not np.any(modes[b] == "slide")                  # sticking and open alone: K = s G, symmetric
        if held.size == modes.shape[-1]:
            out[b] = P.JMinv[b].T @ _mode_solve(K[b], -R[b], stick)
        elif held.size:
            rows = (3 * held[:, None] + np.arange(3)).reshape(-1)
            out[b] = P.JMinv[b, rows].T @ _mode_solve(K[b][np.ix_(rows, rows)], -R[b, rows], stick)
    return out


def _mode_solve(K, R, stick):
    """The minimum-norm ``dlambda`` of ``K dlambda = R``, the mode equations of the held contacts: with
    sticking (and open) contacts alone ``K = s J H^-1 J^T`` is symmetric positive semidefinite
    (:func:`psd_solve`: a pivoted Cholesky factorisation; a non-finite diagonal gives NaN), else
    :func:`min_norm_solve` (a complete orthogonal factorisation).  Where the rows are redundant (``G``
    singular, a box's four corners) the system has no unique solution, and may have none where ``R``
    leaves ``K``'s range (``d(J w)/dq`` need not lie in the rows' span): the minimum-norm least-squares
    one, whose ``H^-1 J^T dlambda`` is the same for every least-squares solution where ``K = s G``
    (they differ by a null vector of ``G``, one of ``J^T``)."""
    return psd_solve(K, R) if stick else min_norm_solve(K, R)


def _mode_weights(modes, mu):
    """``[open, stick, slide, mu]`` (B, nc, 4) of the modes (B, nc) and friction ``mu`` (B or 1, nc)."""
    if (modes := np.asarray(modes)).ndim == 2 and len(modes) == 1:     # one state: on Python lists (faster)
        return np.array([w for x, m in zip(modes[0].tolist(), np.ravel(mu).tolist())
                         for w in MODE_WEIGHTS[x] + (m,)]).reshape(1, -1, 4)
    return np.stack([modes == "open", modes == "stick", modes == "slide", np.broadcast_to(mu, modes.shape)],
                    -1).astype(float)


def _correction_derivative(J, JMinv, G, ln, Wq, Cq, dt):
    """The ``q`` derivative (nv, nv) of the split-impulse position correction ``dv_c = H^-1 J_A^T l``
    of one state (its normal impulses ``ln`` (nc,)), the active normal rows ``A`` (``l != 0``) held on the
    plane (or, ``l < 0``, at a constant height above it), ``J_A dv_c + gap_A / dt = const``: ``W_c + H^-1 J_A^T dl`` with ``G_AA dl = -(C_c + J / dt)_A``
    (:func:`psd_solve`: a redundant set, the minimum-norm change; :func:`_correction_system`); the
    state's rows ``J`` (m, nv), ``JMinv = J H^-1``, ``G = J H^-1 J^T`` (m, m), and ``Wq`` (nv, nv), ``Cq``
    (m, nv): the change of ``dv_c`` and of ``J dv_c`` at fixed ``l``."""
    system = _correction_system(J, G, ln, Cq, dt)
    if system is None:
        return np.array(Wq, float)
    active, Ga, rhs = system
    return Wq - (JMinv[active] if type(active) is slice else JMinv.take(active, 0)).T @ psd_solve(Ga, rhs)


def _correction_system(J, G, ln, Cq, dt):
    """``(active, G_AA, (C_c + J / dt)_A)`` of :func:`_correction_derivative` (``active`` the rows ``A``: a
    slice or indices), or None where no normal row is active."""
    ln = [abs(x) for x in ln.tolist()]                          # (a few floats: Python's, not NumPy's calls)
    cut = 1e-9 * max(max(ln), _TINY)
    held = [i for i, x in enumerate(ln) if x > cut]             # inactive rows: l stays zero (held rows pull: < 0)
    if len(held) == len(ln):                                    # (every normal row: slices, no copies)
        active = slice(2, None, 3)
        return active, G[active, active], Cq[active] + J[active] / dt
    if not held:
        return None
    active = np.array([3 * i + 2 for i in held])                # (takes: fewer NumPy calls than np.ix_)
    return active, G.take(active, 0).take(active, 1), Cq.take(active, 0) + J.take(active, 0) / dt


def _point_correction(P, modes, dt):
    """The position correction's normal impulses (B, nc) of a step with point contacts (the step's own
    sweeps, :func:`~sparsedyn.contact.correction.correction_impulses`; ``modes`` (B, nc): the load-bearing
    touching contacts are held), or None where no contact could move (none penetrating past the slop,
    none load-bearing above half of it)."""
    nc = P.gap.shape[-1]
    gap = P.gap.reshape(-1, nc)
    pen = np.any(gap < -PENETRATION_SLOP, -1, keepdims=True)
    loaded = (np.asarray(modes).reshape(gap.shape) != "open").astype(float)
    if not (pen.any() or np.any(loaded * (gap > 0.5 * PENETRATION_SLOP))):
        return None
    n_rows = 3 * np.arange(nc) + 2
    c = np.where(pen, gap, 0.5 * (gap + np.abs(gap))) / dt                 # the kernel's cn (its trust region)
    c = np.array([correction_targets(x, J[n_rows], dt) for x, J in zip(c, P.J.reshape(-1, 3 * nc, P.J.shape[-1]))])
    return correction_impulses(P.G.reshape(-1, 3 * nc, 3 * nc)[:, n_rows[:, None], n_rows[None, :]], c,
                               held_rows(c, loaded, 0.5, dt), PENETRATION_SLOP / (2.0 * dt))


def _point_correction_derivative(P, pieces, rows, ln, dt):
    """The split-impulse position correction of the corrected states ``rows`` of a step with point
    contacts (its impulses ``ln`` (k, nc), :func:`_point_correction`) and its ``q`` derivative: ``(dv_c
    (k, nv), d dv_c / dq (k, nv, nv))`` (:func:`_correction_derivative`), the change at fixed impulses
    from ``pieces`` (the function that gives the :class:`_Pieces` at other arguments)."""
    nc = P.gap.shape[-1]
    m = 3 * nc
    k = rows.size
    lam = np.zeros((k, nc, 3))
    lam[..., 2] = ln
    dvc = (lam.reshape(k, 1, m) @ P.JMinv[rows])[:, 0]
    nv = dvc.shape[-1]
    # at w = dv_c (no velocity, no gravity, h = 1): Wq = -H^-1 Rq, Rq = d(H w - J^T l)/dq, Cq = J Wq + d(J w)/dq
    C = pieces(rows, np.zeros((k, nv)), dvc, dvc, lam.reshape(k, m), np.zeros((k, nc, 4)), np.zeros((k, 3)), None,
               1.0, False)                          # (the q columns alone are read: no velocity's terms)
    return dvc, np.array([_correction_derivative(P.J[b], P.JMinv[b], P.G[b], ln[k], C.W[k, :, :nv],
                                                 C.C[k, :, :nv], dt) for k, b in enumerate(rows.tolist())])


class _Pieces(NamedTuple):
    """The per-state pieces of the derivatives (B leading, ``m = 3 nc``): the contact rows ``J``
    (B, m, nv), ``JMinv = J H^-1``, ``G = J H^-1 J^T``, ``C`` (B, m, 3 nv) the change of ``J v+`` at
    fixed impulses (``J W + [d(J v+)/dq, 0, 0]``), ``gap`` (B, nc), ``W`` (B, nv, 3 nv) the change of ``v+``
    at fixed impulses, ``Dq``, ``Dd`` the derivatives of ``q (+) dt v+``."""

    J: np.ndarray
    JMinv: np.ndarray
    G: np.ndarray
    C: np.ndarray
    gap: np.ndarray
    W: np.ndarray
    Dq: np.ndarray
    Dd: np.ndarray


def _scene_derivatives(kernels, q, v, v_next, slotted, gravity, f_ext, dt):
    """``([dv_dq, dv_dv, dv_dtau], [dq_dq, dq_dv, dq_dtau])`` (B, nv, 3 nv) of a step in a scene laid out in its
    slots (:class:`~sparsedyn.contact.scene_slotted.Slotted`) from ``q`` (B, nq), ``v`` (B, nv) to the next velocity ``v_next`` (B, nv):
    the per-state pieces from one call of :func:`~sparsedyn.contact.scene_derivatives.scene_step_partials`
    (the mode equations' blocks among them; on the default road its ready native callable for one
    state), then per state the impulses' change (:func:`_mode_solve`) and that of the position
    correction (:func:`_correction_derivative`), and the products with ``N`` and ``dint_ddq``: on the
    native road, in one hand-written C routine, a batch's states in one call on the machine's cores
    (:mod:`~sparsedyn.contact.state_derivatives_native`; at these sizes NumPy's and LAPACK's calls
    from Python cost more than their arithmetic)."""
    B, nv = v.shape
    weights = _mode_weights(slotted.modes, slotted.mu) if slotted.weights is None else slotted.weights
    args = (q, v, v_next, slotted.impulses, slotted.correction, weights, slotted.data, slotted.shapes, gravity)
    if B == 1 and f_ext is None:              # one state: the ready native callable, as the step calls its own
        one = [x[0] for x in args]
        one.append(np.array([float(dt)]))
        f = (native_calls(kernels) or _NONE).get(_PARTIALS) if use_backend.current() != "numpy" else None
        if f is None:
            out = scene_step_partials(kernels, *one, slotted.frames, slotted.kinds)
            dv, dq = _state_derivatives(*out, slotted.modes[0].tolist(), slotted.correction[0], nv, dt)
            return dv[None], dq[None]
        out = f(*one, slotted.frames, slotted.kinds)
        dv, dq, _ = _one_state(out, weights[0], slotted.modes[0], slotted.correction[0], nv, dt)
        return dv[None], dq[None]
    rows, state, gap = scene_step_partials(kernels, *args, np.full((B, 1), float(dt)), slotted.frames, slotted.kinds,
                                           f_ext=f_ext)
    # on the native road every state in one call of the routine (a state it leaves: the NumPy road)
    got = native_states_derivatives(rows, state, weights, slotted.correction, nv, dt) \
        if use_backend.current() != "numpy" else None
    dv, dq, rc = got if got is not None else (*np.empty((2, B, nv, 3 * nv)), np.full(B, -1.0))
    modes = slotted.modes.tolist()
    for b in np.flatnonzero(rc < 0).tolist():
        dv[b], dq[b] = _state_derivatives(rows[b], state[b], gap[b], modes[b], slotted.correction[b], nv, dt)
    return dv, dq


def _one_state(pieces, weights, modes, correction, nv, dt):
    """``(dv, dq, finite)`` of one state on the native road (``finite``: the sum of their entries is):
    the hand-written routine
    (:func:`~sparsedyn.contact.state_derivatives_native.native_state_derivatives`) where it takes the
    state, else :func:`_state_derivatives`."""
    rows, state, gap = (np.ascontiguousarray(x, float) for x in pieces)
    got = native_state_derivatives(rows, state, np.ascontiguousarray(weights, float),
                                   np.ascontiguousarray(correction, float), nv, dt)
    if got is not None:
        return got
    dv, dq = _state_derivatives(rows, state, gap, list(modes), correction, nv, dt)
    return dv, dq, math.isfinite(float(dv.sum() + dq.sum()))


def _state_derivatives(rows, state, gap, modes, correction, nv, dt):
    """``(dv, dq)`` (nv, 3 nv) of one state of :func:`_scene_derivatives` from its pieces (``rows``
    (3 ns, ...), ``state`` (nv, ...), ``gap`` (ns,): :class:`~sparsedyn.contact.scene_derivatives.SlotPartials`),
    its slots' modes (a list of ns names) and position correction impulses ``correction`` (ns,)."""
    m = 3 * len(gap)
    J, JMinv, G = rows[:, :nv], rows[:, nv:2 * nv], rows[:, 5 * nv:5 * nv + m]
    W, Dq, Dd, N = state[:, :3 * nv], state[:, 3 * nv:4 * nv], state[:, 4 * nv:5 * nv], state[:, 6 * nv + 1:]
    dv = W
    held = [i for i, x in enumerate(modes) if x != "open"]
    if held:                                                    # K dlambda = -R: the solve of R, negated
        K, R = rows_mode_equations(rows, nv)
        stick = "slide" not in modes                           # sticking and open alone: K = s G, symmetric
        if len(held) == len(modes):
            dv = W - JMinv.T @ _mode_solve(K, R, stick)
        else:
            r = np.array([3 * i + k for i in held for k in range(3)])
            dv = W - JMinv.take(r, 0).T @ _mode_solve(K.take(r, 0).take(r, 1), R.take(r, 0), stick)
    # v+ = N w (the new axes), q+ = q (+) dt (w + dv_c)
    if any(x != 0.0 for x in correction.tolist()):             # the position correction's change with q
        dv_c = dv.copy()
        dv_c[:, :nv] += _correction_derivative(J, JMinv, G, correction, state[:, 5 * nv:6 * nv],
                                               rows[:, 5 * nv + m + MODE_COLUMNS:], dt)
        dq = dt * (Dd @ dv_c)
    else:
        dq = dt * (Dd @ dv)
    dq[:, :nv] += Dq
    return N @ dv, dq


def _point_pieces(model, kernels, contacts, q, v, a, w, lam, gravity, f_ext, dt, velocity=True):
    """:class:`_Pieces` of a step with point contacts: the pieces of
    :func:`~sparsedyn.contact_step_partials` for a batch (B leading), where ``kernels`` runs them (the
    plain call's road: native by default; one state as one state, its fast path); ``velocity`` False:
    ``W``'s and ``C``'s ``v`` columns zero (a caller that reads the others alone)."""
    one, static = len(q) == 1, point_contacts_only(contacts)
    args = [x[0] if one else x for x in (q, v, a, dt * w, gravity)] + [static]
    fx = f_ext[0] if one and f_ext is not None else f_ext
    try:
        out = contact_step_partials(kernels, *args, f_ext=fx)
    except _checks.NonFiniteResultError:       # (an overflow: carried on, the derivatives' own error names it)
        out = contact_step_partials.__kernel__.fn(model, *args, f_ext=fx)
    if one:
        out = [x[None] for x in out]
    J, gap, Minv, Tq, Tv, dJ, Dq, Dd = out
    nv = Minv.shape[-1]
    # dv+ = H^-1 J^T dlambda + W dx,  x = [q, v, tau]
    # free joints: the old axes, the backward gyroscopic term (module transport)
    Wv = np.eye(nv) - dt * (Minv @ Tv) + dt * transport_jacobian(model, v) + gyroscopic_jacobian(model, v, dt) \
        if velocity else np.zeros(Tv.shape)
    W = np.concatenate([-(Minv @ (dt * Tq - np.einsum("bijk,bi->bjk", dJ, lam))), Wv, dt * Minv], -1)
    C = J @ W
    C[..., :nv] += np.einsum("bijk,bj->bik", dJ, w)
    JMinv = J @ Minv
    return _Pieces(J, JMinv, JMinv @ np.swapaxes(J, -1, -2), C, gap, W, Dq, Dd)
