"""The compiler's view of kernels: a name, or a :class:`~sparsedyn.kernels.Kernel`, to build.

* Every function of the registry :data:`sparsedyn.kernels.REGISTRY` is built
  from its declaration, one :meth:`~sparsedyn.kernels.Kernel.variant` per
  choice of its static arguments (a frame, a reference) and of the optional
  arrays that are given (``f_ext``, ``gravity``: those left out are folded as
  constants, e.g. ``model.gravity``).  There is no list of compiled kernels kept
  by hand: a function registered with ``@kernel`` has a compiled form.
* The kernels of an owner object (the online phase of a sparse problem, an
  estimator's algebra, constrained dynamics) and a user's function are
  :class:`~sparsedyn.kernels.Kernel` objects too
  (:meth:`~sparsedyn.kernels.Kernel.of_arrays`); their *check* outputs are
  per-state quantities a wrapper inspects, and :func:`trace` then also counts
  the flops of the other outputs alone (``Program.result_flops``).

Every kernel is traced by :func:`sparsedyn.symbolic.trace.trace_kernel`.
Nothing here knows any physics.  Names: ``"rnea"`` is the registered ``rnea``
with gravity folded; ``"rnea_ext"`` takes every optional array as an input.
"""

from __future__ import annotations

from collections.abc import Mapping

from ..kernels import REGISTRY, Kernel
from ..symbolic.ir import Program
from ..symbolic.trace import trace_kernel

__all__ = ["KERNELS", "DEFAULT_KERNELS", "as_kernel", "variant", "trace"]


def variant(name, static=None, optional=()) -> Kernel:
    """Registered kernel ``name`` with the static arguments ``static`` (a dict) and the optional
    arrays ``optional`` (names) as inputs (:meth:`~sparsedyn.kernels.Kernel.variant`)."""
    try:
        k = REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; registered kernels: {', '.join(REGISTRY)}") from None
    return k.variant(static, optional)


class _Registered(Mapping):
    """``name -> Kernel`` of the registered kernels without static arguments (and their ``_ext``
    forms): a view of :data:`sparsedyn.kernels.REGISTRY`, not a list kept by hand."""

    def _names(self):
        for n, k in REGISTRY.items():
            if not k.static:
                yield n
                if k.optional:
                    yield n + "_ext"

    def __getitem__(self, name):
        if name in REGISTRY and not REGISTRY[name].static:
            return variant(name)
        if name.endswith("_ext") and name[:-4] in REGISTRY and REGISTRY[name[:-4]].optional:
            k = REGISTRY[name[:-4]]
            if not k.static:
                return variant(k.name, optional=tuple(k.optional))
        raise KeyError(name)

    def __iter__(self):
        return self._names()

    def __len__(self):
        return sum(1 for _ in self._names())


KERNELS = _Registered()
#: Kernels built by ``sparsedyn compile MODEL`` (:func:`~sparsedyn.codegen.api.compile_report`).
DEFAULT_KERNELS = ("rnea", "nonlinear_effects", "aba", "crba", "minv", "forward_kinematics")


def as_kernel(name) -> Kernel:
    """``name`` itself if it is a :class:`~sparsedyn.kernels.Kernel`, else the kernel of :data:`KERNELS`
    of that name."""
    if isinstance(name, Kernel):
        return name
    try:
        return KERNELS[name]
    except KeyError:
        raise ValueError(f"unknown kernel {name!r}; known kernels: {', '.join(KERNELS)}") from None


def trace(model, name) -> Program:
    """Trace kernel ``name`` (a name of :data:`KERNELS` or a :class:`~sparsedyn.kernels.Kernel`) of
    ``model`` into a dead-code-free :class:`Program`.  ``Program.result_flops``: flop counts of the
    outputs that are not checks (``None`` when the kernel has no checks)."""
    return trace_kernel(as_kernel(name), model)
