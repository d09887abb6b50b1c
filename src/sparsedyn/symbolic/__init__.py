"""The symbolic layer: one traced scalar and one straight-line IR.

:mod:`.ir` records every operation a generic kernel performs on object arrays
of :class:`~sparsedyn.symbolic.ir.Sym` scalars, folding constants and merging
common subexpressions.  The resulting program is the one source of structure
(sparsity patterns), flop counts and emitted code.  This layer knows no
physics, no files and no C.
"""

from .ir import FLOP_KINDS, OPS, Graph, Program, Sym

__all__ = ["Sym", "Graph", "Program", "OPS", "FLOP_KINDS"]
