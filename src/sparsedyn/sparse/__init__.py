"""Dynamics as a sparse linear system (F. Nori, *Inverse, forward and other dynamic computations
computationally optimized with sparse matrix factorizations*, 2017, arXiv:1705.04658).

The Newton-Euler equations of a kinematic tree over ``d = {a_i, f_i, tau_i, fx_i, qdd_i}``
plus measurement rows, ``[D; D_Y] d + [b; b_Y] = 0``, solved with an offline
structure analysis and an online phase that only does arithmetic::

    import sparsedyn as sd
    from sparsedyn import sparse

    st = sparse.inverse_dynamics_problem(model).analyze()      # offline, once
    y = st.problem.values(qdd=a, fx=f_ext)                     # the known qdd_i, fx_i
    d = st.solve(q, v, y)                                       # online, batched
    tau = st.unpack(d)["tau"]

    fd = sparse.Problem(model).known("tau").known("fx").analyze()
    hd = sparse.Problem(model).known("tau", joints=A).known("qdd", joints=B).known("fx").analyze()

Modules: :mod:`.variables` (named variables and row blocks), :mod:`.measurements`
(measurement rows, problems), :mod:`sparsedyn.sparse.assembly` (worst-case pattern, value and
right-hand-side kernels), :mod:`.matching` (matching, block triangular form),
:mod:`.ordering` (static pivot orders, symbolic LU), :mod:`.articulated` (the numeric
phase of articulated blocks, body by body), :mod:`.solver` (analysis, numeric phase), :mod:`.checks`
(the online phase's pivot and backward-error checks, float and traced), :mod:`.compiled` (the online
phase as a kernel, ``sparsedyn.compile(structure)``), :mod:`.fingerprint` (its build-cache key),
:mod:`.hybrid` (hybrid, inverse and forward dynamics), :mod:`.flops` (exact operation counts), :mod:`.plots`
(pictures and the ``sparsedyn sparsity`` report).
"""

from .variables import EQUATION_KINDS, KINDS, Equation, Layout, Variable
from .measurements import Kinematics, Measurement, Problem, forward_dynamics_problem, inverse_dynamics_problem
from .assembly import SystemPattern
from .ordering import ORDERINGS, BlockFactor
from .solver import (BERR_TOL, PIVOT_RTOL, OverdeterminedError, SolveInfo, SparsePivotWarning, Structure,
                     StructurallySingularError, analyze)
from .hybrid import hybrid_dynamics_problem, sparse_forward_dynamics, sparse_hybrid_dynamics, sparse_inverse_dynamics
from .compiled import CompiledStructure

__all__ = [
    "KINDS", "EQUATION_KINDS", "Variable", "Equation", "Layout", "Measurement", "Problem", "Kinematics",
    "inverse_dynamics_problem", "forward_dynamics_problem", "SystemPattern", "ORDERINGS", "BlockFactor",
    "analyze", "Structure", "SolveInfo", "StructurallySingularError", "OverdeterminedError", "SparsePivotWarning",
    "PIVOT_RTOL", "BERR_TOL", "sparse_inverse_dynamics", "sparse_forward_dynamics", "hybrid_dynamics_problem",
    "sparse_hybrid_dynamics", "CompiledStructure",
]
from .plots import plot_system, sparsity_report

__all__ += ["plot_system", "sparsity_report"]
