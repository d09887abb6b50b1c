"""A call's arguments checked and bound against a function's parameters, as Python binds them.

The public functions and a compiled model's methods take ``(*args, **kwargs)`` and forward them;
:class:`Parameters` gives a wrong call the error Python gives a function with those parameters
(``rnea() missing 1 required positional argument: 'a'``), at a fraction of the cost of
:meth:`inspect.Signature.bind`, and binds a call to ``{name: value}`` with the defaults filled in.
"""

from __future__ import annotations

import inspect

__all__ = ["Parameters"]


def _listed(names) -> str:
    """``'a'``, ``'a' and 'b'``, ``'a', 'b', and 'c'``, as in Python's own messages."""
    quoted = [repr(n) for n in names]
    if len(quoted) < 3:
        return " and ".join(quoted)
    return ", ".join(quoted[:-1]) + ", and " + quoted[-1]


class Parameters:
    """The parameters of a function called as ``name(...)``: ``params``, a sequence of
    :class:`inspect.Parameter` (positional-or-keyword and keyword-only; no ``*args``, ``**kwargs``
    or positional-only ones)."""

    def __init__(self, name, params):
        params = list(params)
        bad = [p.name for p in params if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
        if bad:
            raise TypeError(f"{name}: parameters {bad} are *args, **kwargs or positional-only")
        self.name = name
        self.names = [p.name for p in params]
        self.index = {p.name: j for j, p in enumerate(params)}
        self.npositional = sum(p.kind == p.POSITIONAL_OR_KEYWORD for p in params)
        self.defaults = {p.name: p.default for p in params if p.default is not p.empty}
        self.required = [(j, p.name) for j, p in enumerate(params) if p.default is p.empty]

    def check(self, args, kwargs) -> None:
        """Raise Python's :class:`TypeError` for a call ``name(*args, **kwargs)`` that does not fit."""
        n = len(args)
        if n > self.npositional:
            most = self.npositional
            least = sum(j < most for j, _ in self.required)
            takes = f"{most}" if least == most else f"from {least} to {most}"
            raise TypeError(f"{self.name}() takes {takes} positional argument{'s' * (most != 1)} but {n} "
                            f"{'was' if n == 1 else 'were'} given")
        for key in kwargs:
            j = self.index.get(key)
            if j is None:
                raise TypeError(f"{self.name}() got an unexpected keyword argument {key!r}")
            if j < n:
                raise TypeError(f"{self.name}() got multiple values for argument {key!r}")
        missing = [(j, p) for j, p in self.required if j >= n and p not in kwargs]
        if missing:
            for kind, group in (("positional", [p for j, p in missing if j < self.npositional]),
                                ("keyword-only", [p for j, p in missing if j >= self.npositional])):
                if group:
                    raise TypeError(f"{self.name}() missing {len(group)} required {kind} argument"
                                    f"{'s' * (len(group) != 1)}: {_listed(group)}")

    def bind(self, args, kwargs) -> dict:
        """``{name: value}`` of every parameter of the call ``name(*args, **kwargs)`` (defaults
        filled in); a call that does not fit raises as :meth:`check`."""
        self.check(args, kwargs)
        values = dict(self.defaults)
        values.update(zip(self.names, args))
        values.update(kwargs)
        return values

    @classmethod
    def of(cls, fn, name=None, skip=0) -> "Parameters":
        """The parameters of ``fn`` after its first ``skip``, called as ``name`` (default ``fn``'s)."""
        params = list(inspect.signature(fn).parameters.values())[skip:]
        return cls(name or fn.__name__, params)
