"""Sparse ``L^T D L`` and ``L^T L`` factorizations exploiting branch-induced sparsity.

Featherstone, *Rigid Body Dynamics Algorithms* (RBDA) section 6.5, Tables 6.3
and 6.4 (and R. Featherstone, *Computational Robot Dynamics, Part 4: Forward Dynamics -- the
Composite Rigid Body Algorithm*, lecture notes).  ``lambda`` is the parent
array of the *expanded* tree, one entry per dof (``model.dof_parent``; -1 for a
dof whose joint hangs from the world), so multi-dof joints are chains of
1-dof joints and the per-dof algorithm covers every joint type.

``H[i, j]`` can be nonzero only when ``j`` is an ancestor-or-self of ``i`` or
vice versa (:func:`sparsity_pattern`).  Factorizing ``H = L^T D L`` (or
``L^T L``) with the outer loop running *backwards* keeps exactly that pattern
in ``L``: no fill-in.  The inner loops visit only the ancestors of ``k``::

    for k = n-1 down to 0:
        i = lambda(k)
        while i != -1:
            a = H[k, i] / H[k, k]
            j = i
            while j != -1:
                H[i, j] = H[i, j] - H[k, j] * a
                j = lambda(j)
            H[k, i] = a
            i = lambda(i)

Operation count: with ``d_k`` the number of proper ancestors of dof ``k``, the
factorization performs ``sum_k d_k`` divisions and ``sum_k d_k (d_k + 1) / 2``
multiplications; for an unbranched chain of ``n`` dofs that is ``(n^2 - n)/2``
and ``(n^3 - n)/6`` (RBDA Table 10.1), for a tree ``O(n d^2)``.

Storage: the book factorizes ``H`` *in situ*.  Here kernels never modify their
input: :func:`ltdl_kernel` returns the *packed* factor, a new array in which the
lower triangle (within the pattern) holds ``L``'s strictly lower part and the
diagonal holds ``D`` (entries above the diagonal are ``H``'s, unread).
:func:`ltdl` unpacks it into ``L`` (unit diagonal, zeros outside the pattern)
and ``D`` (..., n).  All functions accept leading batch axes and NumPy
``dtype=object`` arrays; control flow depends on ``lambda`` only.
"""

from __future__ import annotations

import functools

import numpy as np

from .. import _checks
from .. import backend as bk
from ..kernels import kernel
from ..model.topology import Topology, dof_ancestors

__all__ = ["dof_lambda", "chain_lambda", "sparsity_pattern", "ltdl", "ltl", "ltdl_kernel", "ltl_kernel",
           "mpyL", "mpyLt", "mpyLi", "mpyLit", "ltdl_solve", "ltl_solve", "spd_inverse", "ltdl_inverse_factor"]


def dof_lambda(model_or_lambda) -> list:
    """The expanded-tree parent array ``lambda`` (a list of ints, -1 = world).

    Accepts a Model (uses ``model.dof_parent``) or a parent array with
    ``lambda[i] < i``.
    """
    lam = getattr(model_or_lambda, "dof_parent", model_or_lambda)
    lam = [int(x) for x in np.asarray(lam).reshape(-1)]
    for i, p in enumerate(lam):
        if not -1 <= p < i:
            raise ValueError(f"lambda: expected lambda[i] in [-1, i), got lambda[{i}] = {p}")
    return lam


def chain_lambda(n: int) -> list:
    """``lambda`` of an unbranched chain of ``n`` dofs (a dense matrix)."""
    return list(range(-1, n - 1))


def sparsity_pattern(model_or_lambda) -> np.ndarray:
    """Branch-induced pattern (nv, nv) bool: ``(i, j)`` may be nonzero iff ``j`` is an
    ancestor-or-self of ``i`` or ``i`` of ``j``.  ``H`` and the LTDL/LTL factors
    (lower triangle) live inside it."""
    lam = dof_lambda(model_or_lambda)
    n = len(lam)
    P = np.zeros((n, n), dtype=bool)
    for i in range(n):
        j = i
        while j >= 0:
            P[i, j] = P[j, i] = True
            j = lam[j]
    return P


def _check_square(H, n, name="H"):
    if H.ndim < 2 or H.shape[-2:] != (n, n):
        raise ValueError(f"{name}: expected shape (..., {n}, {n}) (one row and column per dof of lambda), "
                         f"got shape {H.shape}")


def _tree(model_or_lambda):
    """``(lambda, plan)``: the expanded-tree parent array and, per dof, the entries the inner loops
    visit (:func:`~sparsedyn.model.topology.dof_ancestors`): a model's own (its
    :class:`~sparsedyn.model.topology.Topology`), or derived from a parent array on each call."""
    topology = getattr(model_or_lambda, "topology", model_or_lambda)
    if isinstance(topology, Topology):
        return topology.dof_parent, topology.ltdl_plan
    lam = dof_lambda(model_or_lambda)
    return lam, dof_ancestors(lam)


def ltdl_kernel(model_or_lambda, H, check=None):
    """Packed ``L^T D L`` factor of ``H`` (..., n, n) (see the module docstring), for a Model, its
    :class:`~sparsedyn.model.topology.Topology` or a parent array ``lambda``.

    ``check(k, D_k)``, if given, is called with each pivot before it is divided by
    (the checked wrappers use it to reject singular matrices; kernels never branch
    on values themselves).
    """
    return _factor(*_tree(model_or_lambda), H, check)


def _factor(lam, plan, H, check):
    """The loops of the module docstring, the two inner ones as one array operation: every ``(i, j)``
    with ``j`` an ancestor-or-self of ``i``, both ancestors of ``k``, reads only the not-yet-overwritten
    row ``k``, so the operations per entry are the book's.  ``plan``: :func:`_tree`'s."""
    H = H.copy()
    for k in range(len(lam) - 1, -1, -1):
        if check is not None:
            check(k, H[..., k, k])
        anc, I, J, pos = plan[k]                  # i = lambda(k), lambda(i), ...; the pairs (i, j)
        if len(anc):
            a = H[..., k, anc] / H[..., k, k, None]                       # a = H[k, i] / H[k, k]
            H[..., I, J] = H[..., I, J] - H[..., k, J] * a[..., pos]      # H[i, j] -= H[k, j] a
            H[..., k, anc] = a
    return H


@functools.lru_cache(maxsize=None)
def _chain(n):
    """``(lambda, plan)`` of a dense ``n x n`` block (a chain of ``n`` dofs): a function of ``n`` alone,
    kept per size for :func:`spd_inverse`, which the kernels call for every joint's small block."""
    lam = tuple(chain_lambda(n))
    return lam, dof_ancestors(lam)


def ltl_kernel(lam, H, check=None):
    """Packed ``L^T L`` factor of ``H``: lower triangle (within the pattern) holds ``L``."""
    H = H.copy()
    for k in range(len(lam) - 1, -1, -1):
        if check is not None:
            check(k, H[..., k, k])
        H[..., k, k] = bk.sqrt(H[..., k, k])
        i = lam[k]
        while i >= 0:
            H[..., k, i] = H[..., k, i] / H[..., k, k]
            i = lam[i]
        i = lam[k]
        while i >= 0:
            j = i
            while j >= 0:
                H[..., i, j] = H[..., i, j] - H[..., k, i] * H[..., k, j]
                j = lam[j]
            i = lam[i]
    return H


def _unpack(lam, P, unit):
    """``L`` from a packed factor: pattern entries below the diagonal, zeros elsewhere."""
    L = np.zeros(P.shape, dtype=P.dtype)
    for k in range(len(lam)):
        L[..., k, k] = 1 if unit else P[..., k, k]
        i = lam[k]
        while i >= 0:
            L[..., k, i] = P[..., k, i]
            i = lam[i]
    return L


def _diagonal(P):
    n = P.shape[-1]
    D = np.zeros(P.shape[:-1], dtype=P.dtype)
    for k in range(n):
        D[..., k] = P[..., k, k]
    return D


@kernel(inputs={"H": ("nv", "nv")}, outputs={"L": ("nv", "nv"), "D": ("nv",)})
def ltdl(model_or_lambda, H, check=None):
    """``H = L^T D L``: returns ``L`` (..., n, n), unit lower triangular, nonzero only
    in :func:`sparsity_pattern`, and ``D`` (..., n).

    Only the lower triangle of ``H`` within the pattern is read.  ``check(k, D_k)``:
    see :func:`ltdl_kernel`.
    """
    lam = dof_lambda(model_or_lambda)
    H = _square("H", H, len(lam))
    _check_square(H, len(lam))
    P = ltdl_kernel(model_or_lambda, H, check)
    return _unpack(lam, P, unit=True), _diagonal(P)


@kernel(inputs={"H": ("nv", "nv")}, outputs={"L": ("nv", "nv")})
def ltl(model_or_lambda, H, check=None):
    """``H = L^T L``: returns ``L`` (..., n, n), lower triangular, nonzero only in the pattern.

    Only the lower triangle of ``H`` within the pattern is read.
    """
    lam = dof_lambda(model_or_lambda)
    H = _square("H", H, len(lam))
    _check_square(H, len(lam))
    return _unpack(lam, ltl_kernel(lam, H, check), unit=False)


# --- products and solves with L (RBDA Table 6.4) -------------------------------

def _assemble(parts, *like):
    """Stack per-dof components (each of shape ``(...)``) into an array (..., n)."""
    dtype = np.result_type(*(x.dtype for x in like), np.float64)
    shape = np.broadcast_shapes(*(np.shape(p) for p in parts)) if parts else ()
    out = np.zeros(shape + (len(parts),), dtype=dtype)
    for i, p in enumerate(parts):
        out[..., i] = p
    return out


def _square(name, A, n):
    return _checks.numeric(name, A, f"(..., {n}, {n})")


def _prepare(model_or_lambda, L, x, xname="x"):
    lam = dof_lambda(model_or_lambda)
    L, x = _square("L", L, len(lam)), _checks.numeric(xname, x, f"(..., {len(lam)})")
    _check_square(L, len(lam), "L")
    if x.ndim == 0 or x.shape[-1] != len(lam):
        raise ValueError(f"{xname}: expected shape (..., {len(lam)}), got shape {x.shape}")
    return lam, L, x


@kernel(inputs={"L": ("nv", "nv"), "x": ("nv",)}, static=("unit",), outputs={"y": ("nv",)})
def mpyL(model_or_lambda, L, x, unit=False):
    """``L x``.  ``unit=True`` takes ``L``'s diagonal as ones (the LTDL factor)."""
    lam, L, x = _prepare(model_or_lambda, L, x)
    y = []
    for i in range(len(lam)):
        yi = x[..., i] if unit else L[..., i, i] * x[..., i]
        j = lam[i]
        while j >= 0:
            yi = yi + L[..., i, j] * x[..., j]
            j = lam[j]
        y.append(yi)
    return _assemble(y, L, x)


@kernel(inputs={"L": ("nv", "nv"), "x": ("nv",)}, static=("unit",), outputs={"y": ("nv",)})
def mpyLt(model_or_lambda, L, x, unit=False):
    """``L^T x``."""
    lam, L, x = _prepare(model_or_lambda, L, x)
    y = [x[..., i] if unit else L[..., i, i] * x[..., i] for i in range(len(lam))]
    for i in range(len(lam)):
        j = lam[i]
        while j >= 0:
            y[j] = y[j] + L[..., i, j] * x[..., i]
            j = lam[j]
    return _assemble(y, L, x)


@kernel(inputs={"L": ("nv", "nv"), "x": ("nv",)}, static=("unit",), outputs={"y": ("nv",)})
def mpyLi(model_or_lambda, L, x, unit=False):
    """``L^-1 x`` (forward substitution over ancestors)."""
    lam, L, x = _prepare(model_or_lambda, L, x)
    y = []
    for i in range(len(lam)):
        yi = x[..., i]
        j = lam[i]
        while j >= 0:
            yi = yi - L[..., i, j] * y[j]
            j = lam[j]
        y.append(yi if unit else yi / L[..., i, i])
    return _assemble(y, L, x)


@kernel(inputs={"L": ("nv", "nv"), "x": ("nv",)}, static=("unit",), outputs={"y": ("nv",)})
def mpyLit(model_or_lambda, L, x, unit=False):
    """``L^-T x`` (back substitution, each dof pushing into its ancestors)."""
    lam, L, x = _prepare(model_or_lambda, L, x)
    y = [x[..., i] for i in range(len(lam))]
    for i in range(len(lam) - 1, -1, -1):
        if not unit:
            y[i] = y[i] / L[..., i, i]
        j = lam[i]
        while j >= 0:
            y[j] = y[j] - L[..., i, j] * y[i]
            j = lam[j]
    return _assemble(y, L, x)


@kernel(inputs={"L": ("nv", "nv"), "D": ("nv",), "b": ("nv",)}, outputs={"x": ("nv",)})
def ltdl_solve(model_or_lambda, L, D, b):
    """``x = H^-1 b`` for ``H = L^T D L`` (``L``, ``D`` from :func:`ltdl`)."""
    _, L, b = _prepare(model_or_lambda, L, b, "b")
    _, _, D = _prepare(model_or_lambda, L, D, "D")
    y = mpyLit(model_or_lambda, L, b, unit=True)
    return mpyLi(model_or_lambda, L, y / D, unit=True)


@kernel(inputs={"L": ("nv", "nv"), "b": ("nv",)}, outputs={"x": ("nv",)})
def ltl_solve(model_or_lambda, L, b):
    """``x = H^-1 b`` for ``H = L^T L`` (``L`` from :func:`ltl`)."""
    _, L, b = _prepare(model_or_lambda, L, b, "b")
    return mpyLi(model_or_lambda, L, mpyLit(model_or_lambda, L, b))


def ltdl_inverse_factor(model_or_lambda, P):
    """``(W, Dinv)``: ``W = L^-1`` (..., n, n) and ``Dinv = D^-1`` (..., n) of the packed factor ``P``
    of :func:`ltdl_kernel`, so that ``H^-1 = W diag(Dinv) W^T``.

    On a tree ``L^-1`` keeps ``L``'s pattern (no fill-in): row ``i`` of ``W`` is
    ``e_i - sum_{j in ancestors(i)} L[i, j] W[j, :]`` and is nonzero only on the ancestors of ``i``
    and ``i`` itself, so the structural zeros stay exact zeros (a traced program never multiplies
    them).  Then ``H^-1 B = W (Dinv * (W^T B))`` costs ``O(nnz(L))`` per column of ``B`` instead
    of the ``n^2`` of a dense ``H^-1``.  One array operation per row.
    """
    _, plan = _tree(model_or_lambda)
    W = np.zeros(P.shape, dtype=P.dtype)
    for i, (anc, _, _, _) in enumerate(plan):
        W[..., i, i] = 1
        if len(anc):
            W[..., i, :] = W[..., i, :] - np.sum(P[..., i, anc, None] * W[..., anc, :], -2)
    return W, 1 / _diagonal(P)


def spd_inverse(A, check=None):
    """Inverse (..., n, n) of small symmetric positive definite matrices ``A`` (..., n, n).

    The generic small solve of the kernels (ABA's ``D^-1``, Minv's diagonal blocks):
    dense ``A = L^T D L`` (:func:`ltdl_kernel` on a chain), then
    ``A^-1 = L^-1 D^-1 L^-T`` column by column.  No pivoting, no ``np.linalg``;
    ``check(k, D_k)`` sees each pivot before it is divided by.
    """
    n = A.shape[-1]
    if n == 1:
        if check is not None:
            check(0, A[..., 0, 0])
        return 1 / A
    lam, plan = _chain(n)
    P = _factor(lam, plan, A, check)
    L, D = _unpack(lam, P, unit=True), _diagonal(P)
    E = np.eye(n, dtype=int).astype(A.dtype)          # rows = unit vectors (structural 0/1)
    L = L[..., None, :, :]
    Y = mpyLi(lam, L, mpyLit(lam, L, E, unit=True) / D[..., None, :], unit=True)
    return Y                                           # row c = A^-1 e_c; symmetric
