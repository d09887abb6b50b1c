"""Anderson's acceleration of the contact step's ADMM (:mod:`~sparsedyn.contact.friction_kernel`): one
extrapolated iterate of a fixed-point map from a memory of its last iterates, safeguarded, branch-free
(a stage of the traced loop and the same function of floats)."""

from __future__ import annotations

import numpy as np

from .. import backend as bk
from .friction_linalg import Slots, _mm, _mv, _solve_small
from .friction_problem import _TINY, _relu, _step

__all__ = ["anderson_step", "ANDERSON_REG", "FAR"]

#: Tikhonov regularisation of Anderson's least squares, relative to the trace of its normal matrix
#: (the differences are nearly parallel on a slow tail).
ANDERSON_REG = 1e-10
#: The smallest residual norm of an empty Anderson memory (no step is refused).
FAR = 1e300


def anderson_step(k, S, w, Tw, clear, slots=None):
    """Anderson's next iterate (type II, Walker and Ni 2011) of the ADMM map ``w -> Tw`` (``w`` (m,):
    Douglas-Rachford's governing point ``z + y / rho``): ``Tw - (dW + dF)^T gamma`` (the memory holds
    ``dW + dF``, the differences of ``Tw``), ``gamma`` the least-squares weights that make the residual
    ``f = Tw - w`` small in the span of the memory's residual differences ``dF``.  The projection
    onto the cones makes the map nonsmooth, where plain extrapolation can stall; so the step is taken
    only while ``|f|`` stays below its smallest value since the memory was last cleared, else the plain
    ``Tw`` and an empty memory (the safeguard of Zhang, O'Donoghue and Boyd, "Globally convergent type-I
    Anderson acceleration for nonsmooth fixed-point iterations", 2020).  ``clear``: 1 when ``rho``
    changes (a new map): the memory is emptied; ``k``: the memory's length; ``slots``: the slots in use
    (:class:`~sparsedyn.contact.friction_linalg.Slots`).  Updates ``S``'s memory in place."""
    slots = Slots(None, 0) if slots is None else slots
    n = w.shape[0]
    f = Tw - w
    fn = bk.sqrt(f @ f)
    have, fbest = S["have"][0], S["fbest"][0]
    keep = 1.0 - _step(fn - fbest)                                 # 0: the residual grew, start afresh
    # the memory's columns are shifted, never zeroed: ``c`` marks those kept (their rows of A and of
    # dF f are zero, so their weights are exactly 0), which spares multiplying 2 k n elements by it
    df, dT = f - S["fp"], Tw - S["Tp"]                               # dT = dW + dF: the differences of T(w)
    dW = np.concatenate([S["dW"].reshape(k, n)[1:], dT[None]])
    dF = np.concatenate([S["dF"].reshape(k, n)[1:], df[None]])
    c = np.concatenate([S["c"][1:], [have]])
    # the new row of dF dF^T and dF f: one block product (a loop in the compiled code, not 2 k dot products)
    Ff = _mm(dF, np.stack([df, f], 1), slots.mm(0, 3, 0))
    row = Ff[:, 0] * c * have
    A = np.zeros((k, k), dtype=object if bk.is_symbolic(w) else float)
    A[:k - 1, :k - 1] = S["A"].reshape(k, k)[1:, 1:]
    A[k - 1, :], A[:, k - 1] = row, row
    gamma = _solve_small(A + (ANDERSON_REG * np.trace(A) + _TINY) * np.eye(k), Ff[:, 1] * c)
    out = Tw - keep * _mv(dW.T, gamma, slots.mm(3, 0))              # (keep = 0: the plain step)
    # the memory kept: emptied where the residual grew (keep = 0) or rho changes (clear = 1); the
    # smallest residual min(fn, fbest) as fn - relu(fn - fbest) (no cancellation against _FAR); the
    # refusals in a row since the last accepted step (friction_kernel's STALL of them change rho)
    stay = 1.0 - clear
    held = keep * stay
    S.update(dW=dW.reshape(-1), dF=dF.reshape(-1), c=c * held, A=A.reshape(-1) * held, Tp=Tw, fp=f,
             have=stay, fbest=stay * (keep * (fn - _relu(fn - fbest)) + (1.0 - keep) * fbest) + clear * FAR,
             refused=(S["refused"][0] + 1.0) * (1.0 - keep) * stay)
    return out
