"""Exact operation counts of the numeric phase, by tracing the generic kernels.

The kernels run on NumPy object arrays whose elements are :class:`Traced`
scalars: every arithmetic operation on a state-dependent value creates a node
that remembers its operation, operands and the *phase* it belongs to.  The
count is taken over the nodes the requested outputs depend on.

Counting rule (the same for the sparse solves and for the classical kernels
:func:`sparsedyn.algorithms.rnea.rnea_kernel` and :func:`sparsedyn.algorithms.aba.aba_kernel`):

* inputs ``q``, ``qd`` and the measured values ``y`` are state-dependent;
  everything else (``S_i``, ``I_i``, ``Xtree``, the +-1 of ``D``, gravity,
  measurement matrices) is a model constant;
* a multiplication, addition/subtraction or division is counted when at least
  one operand is state-dependent.  Operations between constants are folded
  (evaluated once, offline), as the compiler does;
* multiplications and divisions by the constants ``+1`` / ``-1``, negations,
  multiplications by a structural ``0`` and additions of ``0`` are free: a
  structural zero never costs anything, a multiplication by ``+-1`` is a sign;
* only operations the outputs depend on are counted (dead code, e.g. entries
  of a transform outside the worst-case pattern, is not);
* ``sin``, ``cos``, ``sqrt`` are counted apart (``fun``), not as flops.

Phases of a sparse solve (:func:`count_solve`): ``transforms`` (the joint
transforms and the state-dependent entries of ``D``), ``b`` (velocities ``v_i``,
bias terms ``c_i``, ``nu_i``, the gravity term, measured values), ``factor``
(LU of the non-triangular blocks with the fixed order), ``solve`` (block
forward substitution).  Inverse dynamics has an empty ``factor`` phase: it is
triangular, solved by substitution.
"""

from __future__ import annotations

import numbers
from contextlib import contextmanager

import numpy as np

__all__ = ["Traced", "phase", "trace_inputs", "count", "count_solve", "count_rnea", "count_aba",
           "chain_flops", "flop_table", "format_flop_table", "RNEA_FORMULA", "ABA_FORMULA", "OPS"]

OPS = ("mul", "add", "div")
#: Featherstone's published counts for a chain of n revolute joints (multiplications, additions).
RNEA_FORMULA = (lambda n: 93 * n - 108, lambda n: 81 * n - 100)
ABA_FORMULA = (lambda n: 224 * n - 259, lambda n: 205 * n - 248)

_phase = ["total"]


@contextmanager
def phase(name):
    """Tag the nodes created inside the ``with`` block with phase ``name``."""
    old = _phase[0]
    _phase[0] = name
    try:
        yield
    finally:
        _phase[0] = old


def _const(y):
    return isinstance(y, numbers.Number) and not isinstance(y, Traced)


class Traced:
    """A state-dependent scalar of a traced straight-line program (carries its float value ``x``)."""

    __slots__ = ("x", "op", "args", "phase")

    def __init__(self, x, op="in", args=()):
        self.x = float(x)
        self.op = op
        self.args = args
        self.phase = _phase[0]

    # --- arithmetic with the folding rules of the module docstring -------------------
    def __neg__(self):
        return Traced(-self.x, "neg", (self,))

    def __pos__(self):
        return self

    def __add__(self, y):
        if _const(y):
            return self if y == 0 else Traced(self.x + y, "add", (self,))
        return Traced(self.x + y.x, "add", (self, y))

    __radd__ = __add__

    def __sub__(self, y):
        if _const(y):
            return self if y == 0 else Traced(self.x - y, "add", (self,))
        return Traced(self.x - y.x, "add", (self, y))

    def __rsub__(self, y):
        if y == 0:
            return -self
        return Traced(y - self.x, "add", (self,))

    def __mul__(self, y):
        if _const(y):
            if y == 0:
                return 0
            if y == 1:
                return self
            if y == -1:
                return -self
            return Traced(self.x * y, "mul", (self,))
        return Traced(self.x * y.x, "mul", (self, y))

    __rmul__ = __mul__

    def __truediv__(self, y):
        if _const(y):
            if y == 1:
                return self
            if y == -1:
                return -self
            return Traced(self.x / y, "div", (self,))
        return Traced(self.x / y.x, "div", (self, y))

    def __rtruediv__(self, y):
        if y == 0:
            return 0
        return Traced(y / self.x, "div", (self,))

    def sin(self):
        return Traced(np.sin(self.x), "fun", (self,))

    def cos(self):
        return Traced(np.cos(self.x), "fun", (self,))

    def sqrt(self):
        return Traced(np.sqrt(self.x), "fun", (self,))

    def __float__(self):
        return self.x

    def __repr__(self):
        return f"Traced({self.x:.6g}, {self.op})"


def trace_inputs(x):
    """An object array of :class:`Traced` leaves with the values of float array ``x``."""
    x = np.asarray(x, float)
    out = np.empty(x.shape, dtype=object)
    for idx in np.ndindex(x.shape):
        out[idx] = Traced(x[idx])
    return out


def value(x):
    """Float values of an object array of traced scalars and constants."""
    return np.vectorize(float, otypes=[float])(x) if np.size(x) else np.zeros(np.shape(x))


def count(outputs):
    """Operation counts ``{phase: {"mul", "add", "div", "fun"}}`` of the nodes ``outputs`` depend on.

    ``outputs``: an object array (or an iterable of them); constants in it are free.
    """
    seen = set()
    stack = [x for x in np.asarray(outputs, dtype=object).reshape(-1) if isinstance(x, Traced)]
    out = {}
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if node.op not in ("in", "neg"):
            ph = out.setdefault(node.phase, {"mul": 0, "add": 0, "div": 0, "fun": 0})
            ph[node.op] += 1
        stack.extend(a for a in node.args if isinstance(a, Traced) and id(a) not in seen)
    return out


def total(counts) -> dict:
    """Sum of :func:`count`'s phases."""
    t = {"mul": 0, "add": 0, "div": 0, "fun": 0}
    for ph in counts.values():
        for k in t:
            t[k] += ph[k]
    return t


def _random_state(model, seed):
    rng = np.random.default_rng(seed)
    return model.random_configuration(rng), rng.normal(size=model.nv), rng.normal(size=model.nv)


def count_solve(structure, outputs=None, seed=0):
    """Counts per phase of one sparse solve with ``structure`` (a :class:`~sparsedyn.sparse.Structure`).

    ``outputs``: variable kinds whose values are counted (default: all of ``d``;
    ``("qdd",)`` for forward dynamics as ABA returns it).  Known variables of
    kind ``fx`` are structural zeros (no external forces, as in the published
    counts); other measured values are traced inputs.  Also checks that the
    traced values equal a float solve.  Returns ``{phase: {"mul", "add", "div", "fun"}}``.
    """
    problem = structure.problem
    model = problem.model
    q, qd, _ = _random_state(model, seed)
    yt = trace_inputs(np.random.default_rng(seed + 1).normal(size=problem.ny))
    for m, slot in zip(problem.measurements, problem.slots):
        if m.known == "fx":
            yt[slot] = 0                                   # structural zeros: no external forces
    with phase("transforms"):
        qt, qdt = trace_inputs(q), trace_inputs(qd)
    d, _, _, _ = structure._kernel(qt, qdt, yt, model.gravity, (), True, None, phase)
    ref = structure.solve(q, qd, value(yt))
    scale = max(1.0, float(np.max(np.abs(ref))))
    if not np.allclose(value(d), ref, rtol=1e-6, atol=1e-6 * scale):
        raise RuntimeError("count_solve: the traced program and the float solve differ")
    if outputs is not None:
        parts = structure.unpack(d)
        d = np.concatenate([np.asarray(parts[k], dtype=object).reshape(-1) for k in outputs])
    return count(d)


def count_rnea(model, seed=0):
    """Counts of :func:`sparsedyn.algorithms.rnea.rnea_kernel` (no external forces), phase ``total``."""
    from ..algorithms.rnea import rnea_kernel
    q, qd, a = _random_state(model, seed)
    with phase("total"):
        tau = rnea_kernel(model, trace_inputs(q), trace_inputs(qd), trace_inputs(a))
    return count(tau)


def count_aba(model, seed=0):
    """Counts of :func:`sparsedyn.algorithms.aba.aba_kernel` (no external forces), phase ``total``."""
    from ..algorithms.aba import aba_kernel
    q, qd, tau = _random_state(model, seed)
    with phase("total"):
        qdd = aba_kernel(model, trace_inputs(q), trace_inputs(qd), trace_inputs(tau))
    return count(qdd)


def generic_chain(n, seed=0):
    """A serial chain in the setting of the published counts: ``n`` revolute joints about
    their joint frame's z axis, general ``Xtree`` (random rotation and translation) and general
    inertias, so no transform or inertia entry is a structural zero or one by accident."""
    from ..joints import make_joint
    from ..model import ModelBuilder
    from ..spatial import Transform, quat_to_rot
    rng = np.random.default_rng(seed)
    b = ModelBuilder(f"generic_chain{n}")
    for i in range(1, int(n) + 1):
        quat = rng.normal(size=4)
        E = quat_to_rot(quat / np.linalg.norm(quat)).T
        R = rng.normal(size=(3, 3))
        b.add_body(f"link{i}", None if i == 1 else f"link{i - 1}", make_joint("revolute", (0.0, 0.0, 1.0)),
                   Xtree=Transform(E, rng.uniform(-0.5, 0.5, 3)), mass=rng.uniform(0.5, 2.0),
                   com=rng.uniform(-0.2, 0.2, 3), rot_inertia=R @ R.T / 10 + 0.05 * np.eye(3),
                   joint_name=f"joint{i}")
    return b.build()


CHAINS = {"generic": generic_chain, "serial_chain": lambda n: __import__("sparsedyn").builders.serial_chain(n)}


def chain_flops(n, orderings=("articulated", "colamd"), chain="generic") -> dict:
    """Counts for a serial chain of ``n`` revolute links.

    ``chain``: ``"generic"`` (:func:`generic_chain`, the published counts' setting) or
    ``"serial_chain"`` (:func:`sparsedyn.builders.serial_chain`: z axes, links along x, a
    planar mechanism in which many entries fold).  Returns ``{"n", "id": phases,
    "id_fill", "rnea": totals, "aba": totals, "fd": {ordering: phases of the qdd outputs},
    "fd_all": {ordering: totals for all of d}, "fill": {ordering: fill-in}}``.
    """
    from .measurements import forward_dynamics_problem, inverse_dynamics_problem
    model = CHAINS[chain](n)
    idst = inverse_dynamics_problem(model).analyze()
    out = {"n": n, "id": count_solve(idst), "id_fill": idst.fill, "rnea": total(count_rnea(model)),
           "aba": total(count_aba(model)), "fd": {}, "fd_all": {}, "fill": {}}
    fdp = forward_dynamics_problem(model)
    for o in orderings:
        st = fdp.analyze(ordering=o)
        out["fd"][o] = count_solve(st, outputs=("qdd",))
        out["fd_all"][o] = total(count_solve(st))
        out["fill"][o] = st.fill
    return out


def flop_table(ns=(1, 2, 5, 10, 20, 50, 100), orderings=("articulated", "colamd"), chain="generic") -> list:
    """:func:`chain_flops` for each ``n``."""
    return [chain_flops(n, orderings, chain) for n in ns]


def _mad(c, div=True):
    return f"{c['mul']}/{c['add']}" + (f"/{c['div']}" if div else "")


def format_flop_table(rows, chain="generic") -> str:
    """The flop tables of the issue's closing note, as text (``rows`` from :func:`flop_table`)."""
    orderings = list(rows[0]["fd"]) if rows else []
    what = ("generic_chain: revolute about each joint frame's z axis, general Xtree and inertias"
            if chain == "generic" else "serial_chain: z axes, links along x (planar; many entries fold)")
    out = [f"Serial chains of n links ({what}); no external forces.",
           "Counts mul/add/div by the rule of sparsedyn.sparse.flops: operations on state-dependent values",
           "only (constant-only operations folded offline), +-1/0 free, dead code not counted.", "",
           "INVERSE DYNAMICS: sparse substitution (triangular, all of d) by phase vs RNEA",
           f"{'n':>4} | {'transforms':>11} | {'b':>11} | {'solve':>11} | {'sparse total':>15} | {'fill':>4} | "
           f"{'RNEA kernel':>11} | {'93n-108/81n-100':>15}"]
    for r in rows:
        n, ph = r["n"], r["id"]
        z = {"mul": 0, "add": 0, "div": 0}
        out.append(f"{n:>4} | {_mad(ph.get('transforms', z), False):>11} | {_mad(ph.get('b', z), False):>11} | "
                   f"{_mad(ph.get('solve', z), False):>11} | {_mad(total(ph)):>15} | {r['id_fill']:>4} | "
                   f"{_mad(r['rnea'], False):>11} | {RNEA_FORMULA[0](n)}/{RNEA_FORMULA[1](n)}")
    out += ["", "FORWARD DYNAMICS: sparse LU per static ordering vs ABA.  'qdd': operations the accelerations",
            "depend on (what ABA returns); 'all d': also back-substituting a_i, f_i.  fill: L+U slots that are",
            "structural zeros of A.",
            f"{'n':>4} | " + " | ".join(f"{o + ' qdd':>19} {'all d':>17} {'fill':>5}" for o in orderings) +
            f" | {'ABA kernel':>11} | {'224n-259/205n-248':>17}"]
    for r in rows:
        n = r["n"]
        cells = [f"{_mad(total(r['fd'][o])):>19} {_mad(r['fd_all'][o]):>17} {r['fill'][o]:>5}" for o in orderings]
        out.append(f"{n:>4} | " + " | ".join(cells) + f" | {_mad(r['aba'], False):>11} | "
                   f"{ABA_FORMULA[0](n)}/{ABA_FORMULA[1](n)}")
    out += ["", "Forward dynamics by phase (qdd outputs; mul/add/div):"]
    for o in orderings:
        for r in rows:
            ph = r["fd"][o]
            out.append(f"  {o:>11} n={r['n']:<3} " + "  ".join(
                f"{p}: {_mad(ph[p])}" for p in ("transforms", "b", "factor", "solve") if p in ph))
    return "\n".join(out)
