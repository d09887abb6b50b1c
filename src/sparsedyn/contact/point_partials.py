"""The per-state pieces of the derivatives of a step with point contacts, as one kernel:
:func:`~sparsedyn.contact_step_partials`.

:func:`~sparsedyn.contact_step_derivatives` of a step with a list of point contacts needs, per state, the
contact rows ``J`` and their derivative on the tangent space, ``H^-1``, RNEA's derivatives and those of
``q (+) dq``.  They are one traced program per tuple of contacts (their points and planes; friction is
the solve's, not the pieces'), a registered kernel: native on the default road, as every plain call.
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from .. import backend as bk
from ..algorithms.configuration import integrate_derivatives
from ..algorithms.derivatives import derivative_program
from ..algorithms.minv import minv
from ..kernels import Kernel, kernel
from ..model.sensors import Contact
from ..symbolic.ad import inline
from ..symbolic.ir import Graph
from ..symbolic.trace import trace_kernel
from .dynamics import _cached, _run, rnea_partials
from .friction_problem import contact_problem

__all__ = ["contact_step_partials", "point_contacts_only"]


def _rows(model, q, contacts):
    """``(J, gap)``: the contact rows of :func:`contact_problem` (contact frames, ``[t_x, t_y, n]`` per
    contact) and the gaps, at ``q`` (kernel use; the traced program keeps only what they need)."""
    zero = np.zeros(q.shape[:-1] + (model.nv,), dtype=q.dtype)
    P = contact_problem.__kernel__.fn(model, q, zero, zero, contacts)
    return P.J, P.gap


def _m(model, contacts, **_):
    return 3 * len(tuple(contacts))


def _nc(model, contacts, **_):
    return len(tuple(contacts))


_ROWS = Kernel("friction_contact_rows", _rows, {"q": ("nq",)}, {"J": (_m, "nv"), "gap": (_nc,)}, {}, ("contacts",))


def point_contacts_only(contacts):
    """The contacts' points and planes as the pieces' static argument (a tuple of ``"3d"``
    :class:`~sparsedyn.Contact`, no friction): one program for every friction coefficient."""
    return tuple(Contact(c.frame, "3d", point=c.point, plane=c.plane) for c in contacts)


def _program(model, static, optional):
    """The program of :func:`contact_step_partials` for ``static["contacts"]``, inputs the kernel's then
    ``f_ext`` where given."""
    contacts = tuple(static["contacts"])
    bad = next((c for c in contacts if not isinstance(c, Contact) or c.kind != "3d"), None)
    if bad is not None:
        raise ValueError(f"contact_step_partials: contacts must be point contacts (sd.Contact(frame, '3d')), "
                         f"got {bad!r}")
    with_f_ext = "f_ext" in set(optional)

    def build():
        nq, nv = model.nq, model.nv
        shapes = [(nq,), (nv,), (nv,), (nv,), (3,)] + ([(model.nbodies, 6)] if with_f_ext else [])
        g = Graph()
        q, v, a, dq, grav, *rest = [g.inputs(j, s) for j, s in enumerate(shapes)]
        static_rows = {"contacts": contacts}
        J, gap = inline(trace_kernel(_ROWS, model, static_rows), [q])
        Minv = inline(trace_kernel(minv.__kernel__, model), [q])[0]
        Tq, Tv = rnea_partials(model, q, v, a, rest[0] if rest else None, grav)
        dJ = inline(derivative_program(_ROWS, model, ("q",), static_rows), [q])[0]
        Dq, Dd = inline(trace_kernel(integrate_derivatives.__kernel__, model), [q, dq])
        names = ("q", "v", "a", "dq", "gravity") + (("f_ext",) if with_f_ext else ())
        return g.program([J, gap, Minv, Tq, Tv, dJ, Dq, Dd], shapes, name="contact_step_partials",
                         input_names=names, output_names=_OUTPUTS)
    return _cached(("contact_step_partials", contacts, with_f_ext), model, build)


_OUTPUTS = ("J", "gap", "Minv", "dtau_dq", "dtau_dv", "dJ_dq", "dint_dq", "dint_ddq")
_NVxNV = ("nv", "nv")


@kernel(inputs={"q": ("nq",), "v": ("nv",), "a": ("nv",), "dq": ("nv",), "gravity": (3,)},
        optional={"f_ext": ("nb", 6)}, static=("contacts",), sequences=("contacts",),
        outputs={"J": (_m, "nv"), "gap": (_nc,), "Minv": _NVxNV, "dtau_dq": _NVxNV, "dtau_dv": _NVxNV,
                 "dJ_dq": (_m, "nv", "nv"), "dint_dq": _NVxNV, "dint_ddq": _NVxNV},
        program=_program)
def contact_step_partials(model, q, v, a, dq, gravity, contacts, *, f_ext=None):
    """The per-state pieces of the derivatives of a step with the point ``contacts`` (their points and
    planes; :func:`~sparsedyn.contact_problem`'s rows): ``(J (..., 3 nc, nv), gap (..., nc), H^-1 (..., nv,
    nv), dtau_dq, dtau_dv (..., nv, nv), dJ_dq (..., 3 nc, nv, nv), dint_dq, dint_ddq (..., nv, nv))``: the
    contact rows (contact frames ``[t_x, t_y, n]``) and gaps at ``q``, the inverse of the mass matrix,
    RNEA's derivatives at ``(q, v, a)`` under ``gravity`` (3,) and ``f_ext`` (..., nb, 6) held constant,
    the rows' derivative on the tangent space (``dJ_dq[i, j, k] = d J[i, j] / dq_k``) and the derivatives
    of ``q (+) dq`` (:func:`~sparsedyn.integrate_derivatives`).  One traced program per tuple of contacts
    (the rows differentiated by the symbolic layer; RNEA's derivatives those of Carpentier and Mansard,
    "Analytical derivatives of rigid body dynamics algorithms", 2018)."""
    m = getattr(model, "model", model)
    q, v, a, f_ext, gravity, _, _ = _checks.dynamics(m, q, v, a, f_ext, gravity, "a", "nv joint accelerations")
    dq = _checks.vector(m, "dq", dq, m.nv, "nv tangent coordinates")
    opt = ("f_ext",) if f_ext is not None else ()
    prog = _program(m, {"contacts": tuple(contacts)}, opt)
    args = [q, v, a, dq, gravity] + ([f_ext] if opt else [])
    symbolic = any(bk.is_symbolic(x) for x in args)
    arrays = [np.asarray(x, dtype=object if symbolic else float) for x in args]
    tails = [1, 1, 1, 1, 1] + [2] * len(opt)
    shape = np.broadcast_shapes(*(x.shape[:x.ndim - t] for x, t in zip(arrays, tails)))
    flat = [np.broadcast_to(x, shape + x.shape[x.ndim - t:]).reshape((-1,) + x.shape[x.ndim - t:])
            for x, t in zip(arrays, tails)]
    out = _run(prog, flat)
    return tuple(np.reshape(o, shape + np.shape(o)[1:]) for o in out)
