"""The opcodes of the IR (:mod:`sparsedyn.symbolic.ir`): one node per scalar operation."""

__all__ = ["INPUT", "CONST", "NEG", "ADD", "SUB", "MUL", "DIV", "SIN", "COS", "SQRT", "ATAN2", "COPYSIGN", "MATMUL",
           "OPS", "FLOP_KINDS", "UNARY"]

# Opcodes.  INPUT nodes carry (argument index, flat element index); CONST nodes a float.
# ATAN2 (y, x) and COPYSIGN (magnitude, sign) are binary; COPYSIGN is a sign operation (no flop),
# the one way a kernel picks a branch by sign without branching (e.g. the shortest rotation).
# MATMUL (block, element) is an element of a dense block product (Graph.matmul): its operands are
# the block's (sparsedyn.symbolic.block), not x and y.
INPUT, CONST, NEG, ADD, SUB, MUL, DIV, SIN, COS, SQRT, ATAN2, COPYSIGN, MATMUL = range(13)
OPS = ("input", "const", "neg", "add", "sub", "mul", "div", "sin", "cos", "sqrt", "atan2", "copysign", "matmul")
#: Flop categories reported by :meth:`~sparsedyn.symbolic.ir.Program.flops` (``neg`` is a sign flip, not a flop).
FLOP_KINDS = ("mul", "add", "div", "sqrt", "sin", "cos", "atan2", "neg")
#: The unary opcodes.
UNARY = (NEG, SIN, COS, SQRT)
