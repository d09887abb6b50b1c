"""Forward dynamics through the joint-space equation of motion (RBDA section 6.1)::

    C = bias(q, v, f_ext)           (RNEA with qdd = 0)
    H = crba(q)                     (composite-rigid-body algorithm)
    H = L^T D L                     (sparse LTDL, no fill-in)
    qdd = L^-1 D^-1 L^-T (tau - C)

Same result as :func:`sparsedyn.algorithms.aba.aba`; cost O(n d^2) for the factorization
instead of O(n).
"""

from __future__ import annotations

import numpy as np

from .. import _checks
from ..kernels import kernel
from .aba import own_inertia_scales, pivot_checker
from .crba import bias_kernel, crba_kernel
from .ltdl import dof_lambda, ltdl, ltdl_solve

__all__ = ["fd_crb", "fd_crb_kernel", "ltdl_checker"]


def fd_crb_kernel(model, q, v, tau, f_ext=None, gravity=None, check=None):
    """Unchecked CRBA + LTDL forward dynamics.

    ``check(H)``, if given, returns a ``check(k, D_k)`` callback that sees each LTDL
    pivot (see :func:`ltdl_checker`); ``None`` when tracing.
    """
    lam = dof_lambda(model)
    H = crba_kernel(model, q)
    C = bias_kernel(model, q, v, f_ext, gravity)
    L, D = ltdl(model.topology, H, None if check is None else check(H))
    return ltdl_solve(lam, L, D, tau - C)


def ltdl_checker(model, H):
    """Pivot check for float input: ``D_k <= aba.PIVOT_RTOL * scale`` (``H`` numerically singular)
    raises :class:`~sparsedyn.algorithms.aba.SingularInertiaError` naming the joint of dof ``k``.

    The LTDL pivots of ``H`` are the articulated inertias ``D_i`` of ABA, so the scale is the same:
    the body's own inertia where it has inertia along its joint's motion, else ``max|H|``
    (:func:`~sparsedyn.algorithms.aba.own_inertia_scales`)."""
    Hmax = np.max(np.abs(H), axis=(-2, -1), initial=0.0)
    own = own_inertia_scales(model)

    def check(k, pivot):
        i = int(model.dof_body[k])
        scale = Hmax if own[i] is None else np.full(np.shape(Hmax), own[i])
        pivot_checker(model, i, scale, what="joint-space inertia H (its LTDL pivot)")(k - int(model.v_start[i]), pivot)
    return check


@kernel(inputs={"q": ("nq",), "v": ("nv",), "tau": ("nv",)}, optional={"f_ext": ("nb", 6), "gravity": (3,)}, outputs={"a": ("nv",)})
def fd_crb(model, q, v, tau, f_ext=None, gravity=None):
    """Joint accelerations ``qdd`` (..., nv) by CRBA + sparse LTDL (same contract as ``aba``)."""
    q, v, tau, f_ext, g, shape, symbolic = _checks.dynamics(model, q, v, tau, f_ext, gravity, "tau",
                                                            "nv joint forces")
    check = None if symbolic else (lambda H: ltdl_checker(model, H))
    qdd = fd_crb_kernel(model, q, v, tau, f_ext, g, check)
    return np.broadcast_to(qdd, shape + (model.nv,)).copy()
