"""Exact operation counts of the numeric phase, from the one symbolic layer.

A sparse solve (:meth:`Structure.online <sparsedyn.sparse.Structure.online>`),
RNEA and ABA are traced on symbolic scalars by :mod:`sparsedyn.symbolic` (the
same trace the compiler emits code from) and counted by
:meth:`Program.flops <sparsedyn.symbolic.ir.Program.flops>`, whose docstring
states the counting rule once.  In short: only operations on state-dependent
values count; structural zeros, multiplications by +-1, sign flips and dead
code are free; a value computed twice counts once.  Every flop figure of
sparsedyn (the README, ``sparsedyn sparsity``, ``sparsedyn estimate``,
``benchmarks/``) comes from that rule.

The traced inputs are ``q``, ``v`` and the measured values ``y``; ``model.gravity``
is folded in and known external forces ``fx`` are structural zeros (no external
forces, as in the published counts).  Phases of a sparse solve
(:meth:`Graph.phase <sparsedyn.symbolic.ir.Graph.phase>`): ``transforms`` (the
joint transforms and the state-dependent entries of ``D``), ``b`` (velocities
``v_i``, bias terms ``c_i``, ``nu_i``, the gravity term, measured values),
``factor`` (LU of the non-triangular blocks in the fixed order), ``solve`` (block
forward substitution).  Inverse dynamics has no ``factor`` phase: it is
triangular, solved by substitution.
"""

from __future__ import annotations

import numpy as np

from ..kernels import REGISTRY
from ..symbolic.ir import FLOP_KINDS
from ..symbolic.trace import trace_function, trace_kernel

__all__ = ["PHASES", "count_solve", "count_rnea", "count_aba", "total", "arith", "trace_solve",
           "chain_flops", "flop_table", "format_flop_table", "generic_chain", "RNEA_FORMULA", "ABA_FORMULA"]

#: Phases of a traced sparse solve, in order.
PHASES = ("transforms", "b", "factor", "solve")
#: Featherstone's published counts for a chain of n revolute joints (multiplications, additions).
RNEA_FORMULA = (lambda n: 93 * n - 108, lambda n: 81 * n - 100)
ABA_FORMULA = (lambda n: 224 * n - 259, lambda n: 205 * n - 248)


def trace_solve(structure, outputs=None):
    """The traced online phase of ``structure`` as a :class:`~sparsedyn.symbolic.ir.Program` with
    phases (inputs ``q``, ``v``, ``y``; ``model.gravity`` folded; known ``fx`` structural zeros).

    ``outputs``: variable kinds whose values are the program's outputs (default: all of ``d``).
    """
    problem = structure.problem
    model = problem.model
    grav = np.asarray(model.gravity, float)

    def solve(phase, q, v, y):
        for m, slot in zip(problem.measurements, problem.slots):
            if m.known == "fx":
                y[slot] = 0                                 # structural zeros: no external forces
        d, _, _, _ = structure.online(q, v, y, grav, (), True, None, phase)
        if outputs is not None:
            parts = structure.unpack(d)
            d = np.concatenate([np.asarray(parts[k], dtype=object).reshape(-1) for k in outputs])
        return d
    return trace_function(solve, [("q", (model.nq,)), ("v", (model.nv,)), ("y", (problem.ny,))], None,
                          name="sparse_solve", phases=True)


def count_solve(structure, outputs=None, seed=0) -> dict:
    """Counts ``{phase: flops}`` of one sparse solve with ``structure`` (a :class:`~sparsedyn.sparse.Structure`).

    ``outputs``: variable kinds whose values are counted (default: all of ``d``;
    ``("qdd",)`` for forward dynamics as ABA returns it).  Also checks that the
    traced program computes the float solve at a random state (seed ``seed``,
    joint limits ignored).  ``flops`` as :meth:`~sparsedyn.symbolic.ir.Program.flops`.
    """
    prog = trace_solve(structure, outputs)
    problem = structure.problem
    model = problem.model
    rng = np.random.default_rng(seed)
    q, v = model.random_configuration(rng, limits=False), rng.normal(size=model.nv)
    y = rng.normal(size=problem.ny)
    for m, slot in zip(problem.measurements, problem.slots):
        if m.known == "fx":
            y[slot] = 0.0
    ref = structure.solve(q, v, y)
    if outputs is not None:
        parts = structure.unpack(ref)
        ref = np.concatenate([np.asarray(parts[k]).reshape(-1) for k in outputs])
    got = prog.evaluate([q, v, y])[0]
    scale = max(1.0, float(np.max(np.abs(ref), initial=0.0)))
    if not np.allclose(got, ref, rtol=1e-6, atol=1e-6 * scale):
        raise RuntimeError("count_solve: the traced program and the float solve differ")
    return {p: c for p, c in prog.phase_flops().items()}


def count_rnea(model) -> dict:
    """Counts of the registered RNEA kernel (``model.gravity`` folded, no external forces)."""
    from ..algorithms import rnea  # noqa: F401  (registers the kernel)
    return trace_kernel(REGISTRY["rnea"], model).flops()


def count_aba(model) -> dict:
    """Counts of the registered ABA kernel (``model.gravity`` folded, no external forces)."""
    from ..algorithms import aba  # noqa: F401  (registers the kernel)
    return trace_kernel(REGISTRY["aba"], model).flops()


def total(counts) -> dict:
    """Sum over the phases of :func:`count_solve`'s result."""
    t = dict.fromkeys(FLOP_KINDS + ("total",), 0)
    for ph in counts.values():
        for k in t:
            t[k] += ph.get(k, 0)
    return t


def arith(c) -> int:
    """Multiplications, additions and divisions of a count (the kinds the published counts report)."""
    return c["mul"] + c["add"] + c["div"]


def generic_chain(n, seed=0):
    """A serial chain in the setting of the published counts: ``n`` revolute joints about
    their joint frame's z axis, general ``Xtree`` (random rotation and translation) and general
    inertias, so no transform or inertia entry is a structural zero or one by accident."""
    from ..model.joints import make_joint
    from ..model.builders import ModelBuilder
    from ..model.spatial import Transform, quat_to_rot
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


def _serial_chain(n):
    from ..model.builders import serial_chain
    return serial_chain(n)


CHAINS = {"generic": generic_chain, "serial_chain": _serial_chain}


def chain_flops(n, orderings=("articulated", "colamd"), chain="generic") -> dict:
    """Counts for a serial chain of ``n`` revolute links.

    ``chain``: ``"generic"`` (:func:`generic_chain`, the published counts' setting) or
    ``"serial_chain"`` (:func:`sparsedyn.model.builders.serial_chain`: z axes, links along x, a
    planar mechanism in which many entries fold).  Returns ``{"n", "id": phases,
    "id_fill", "rnea": totals, "aba": totals, "fd": {ordering: phases of the qdd outputs},
    "fd_all": {ordering: totals for all of d}, "fill": {ordering: fill-in}}``.
    """
    from .measurements import forward_dynamics_problem, inverse_dynamics_problem
    model = CHAINS[chain](n)
    idst = inverse_dynamics_problem(model).analyze()
    out = {"n": n, "id": count_solve(idst), "id_fill": idst.fill, "rnea": count_rnea(model),
           "aba": count_aba(model), "fd": {}, "fd_all": {}, "fill": {}}
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
    """The flop tables as text (``rows`` from :func:`flop_table`)."""
    orderings = list(rows[0]["fd"]) if rows else []
    what = ("generic_chain: revolute about each joint frame's z axis, general Xtree and inertias"
            if chain == "generic" else "serial_chain: z axes, links along x (planar; many entries fold)")
    z = {"mul": 0, "add": 0, "div": 0}
    out = [f"Serial chains of n links ({what}); no external forces.",
           "Counts mul/add/div from the IR (sparsedyn.symbolic.ir.Program.flops): operations on state-dependent",
           "values only (constant-only operations folded offline), +-1/0 free, common subexpressions and dead",
           "code counted once / not at all.", "",
           "INVERSE DYNAMICS: sparse substitution (triangular, all of d) by phase vs RNEA",
           f"{'n':>4} | {'transforms':>11} | {'b':>11} | {'solve':>11} | {'sparse total':>15} | {'fill':>4} | "
           f"{'RNEA kernel':>11} | {'93n-108/81n-100':>15}"]
    for r in rows:
        n, ph = r["n"], r["id"]
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
                f"{p}: {_mad(ph[p])}" for p in PHASES if p in ph))
    return "\n".join(out)
