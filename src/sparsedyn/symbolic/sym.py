"""The symbolic scalar :class:`Sym`: what a kernel's arithmetic on traced values calls (it records
each operation in its :class:`~sparsedyn.symbolic.ir.Graph`)."""

from __future__ import annotations

import numpy as np

from .ops import ATAN2, COPYSIGN, COS, SIN, SQRT

__all__ = ["Sym"]

_NUM_TYPES = frozenset((int, float, np.float64))

def _is_num(x):
    # booleans count as 0 / 1 (a structural mask such as ``has_parent`` multiplies like numbers)
    return isinstance(x, (int, float, np.integer, np.floating, np.bool_))


class Sym:
    """A symbolic scalar: node ``i`` of graph ``g``.  Supports ``+ - * /``, unary ``-``,
    and the ``sin``/``cos``/``sqrt`` methods NumPy's object loops call."""

    __slots__ = ("g", "i")

    def __init__(self, g, i):
        self.g = g
        self.i = i

    def __repr__(self):
        return f"Sym(t{self.i})"

    # NumPy object arrays and the kernels never compare or branch on values.
    def __bool__(self):
        raise TypeError("a traced value has no truth value: kernels must not branch on values")

    def __add__(self, o):
        if o.__class__ is Sym:
            return self.g.add(self.i, o.i)
        if o.__class__ not in _NUM_TYPES and not _is_num(o):
            return NotImplemented
        if o == 0:
            return self
        return self.g.add_const(self.i, float(o))

    __radd__ = __add__

    def __sub__(self, o):
        if o.__class__ is Sym:
            return self.g.sub(self.i, o.i)
        if o.__class__ not in _NUM_TYPES and not _is_num(o):
            return NotImplemented
        if o == 0:
            return self
        return self.g.add_const(self.i, -float(o))

    def __rsub__(self, o):
        if o.__class__ not in _NUM_TYPES and not _is_num(o):
            return NotImplemented
        if o == 0:
            return self.g.neg(self.i)
        return self.g.const_sub(float(o), self.i)

    def __mul__(self, o):
        if o.__class__ is Sym:
            return self.g.mul(self.i, o.i)
        if o.__class__ not in _NUM_TYPES and not _is_num(o):
            return NotImplemented
        if o == 0:
            return 0
        return self.g.mul_const(self.i, float(o))

    __rmul__ = __mul__

    def __truediv__(self, o):
        if o.__class__ is Sym:
            return self.g.div(self.i, o.i)
        if o.__class__ not in _NUM_TYPES and not _is_num(o):
            return NotImplemented
        if o == 0:
            raise ZeroDivisionError("traced division by a constant zero")
        return self.g.div_const(self.i, float(o))

    def __rtruediv__(self, o):
        if o.__class__ not in _NUM_TYPES and not _is_num(o):
            return NotImplemented
        if o == 0:
            return 0
        return self.g.const_div(float(o), self.i)

    def __neg__(self):
        return self.g.neg(self.i)

    def __pos__(self):
        return self

    def sin(self):
        return self.g.unary(SIN, self.i)

    def cos(self):
        return self.g.unary(COS, self.i)

    def sqrt(self):
        return self.g.unary(SQRT, self.i)

    def atan2(self, x):
        """``atan2(self, x)`` (``x`` a symbol or a number)."""
        return self.g.binary(ATAN2, self.i, self.g.operand(x))

    def copysign(self, s):
        """``|self|`` with the sign of ``s``."""
        return self.g.binary(COPYSIGN, self.i, self.g.operand(s))
