"""The opcodes of the IR's nodes (:mod:`sparsedyn.symbolic.ir`): ``nodes[i] = (op, x, y)``.

``INPUT`` nodes carry (argument index, flat element index); ``CONST`` nodes a float.  ``ATAN2``
(y, x) and ``COPYSIGN`` (magnitude, sign) are binary; ``COPYSIGN`` is a sign operation (no flop),
the one way a kernel picks a branch by sign without branching (e.g. the shortest rotation).
``MATMUL`` (block, element) is an element of a dense block product
(:meth:`~sparsedyn.symbolic.ir.Graph.matmul`): its operands are the block's
(:mod:`sparsedyn.symbolic.block`), not ``x`` and ``y``.
"""

__all__ = ["INPUT", "CONST", "NEG", "ADD", "SUB", "MUL", "DIV", "SIN", "COS", "SQRT", "ATAN2", "COPYSIGN", "MATMUL",
           "OPS"]

INPUT, CONST, NEG, ADD, SUB, MUL, DIV, SIN, COS, SQRT, ATAN2, COPYSIGN, MATMUL = range(13)
#: The opcodes' names, by opcode.
OPS = ("input", "const", "neg", "add", "sub", "mul", "div", "sin", "cos", "sqrt", "atan2", "copysign", "matmul")
