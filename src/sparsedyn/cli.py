"""Command line: ``sparsedyn info | sparsity | estimate | identify | compile | build | bench | demo | view``.

Exit codes: 0 success; 1 an error of the library or of the input (one line on
stderr, ``sparsedyn: error: ...``); 2 a usage error (bad arguments, unknown model
name); 3 the analysis ran but the problem cannot be solved (``estimate``: ill-posed
sensors; ``sparsity``: structurally singular), the report saying why is printed.
"""

from __future__ import annotations

import argparse
import sys
import textwrap
import warnings

import numpy as np

from .io.resolve import find_example_robot, resolve_model
from .plots import sparsity_text

__all__ = ["main", "load_model", "find_example_robot", "benchmark_module", "compiled_estimate_lines", "demo", "demo_lines",
           "EXIT_OK", "EXIT_ERROR", "EXIT_USAGE", "EXIT_ILL_POSED"]

EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_ILL_POSED = 0, 1, 2, 3

#: Width of wrapped report lines.
WIDTH = 100


class UsageError(Exception):
    """A command-line argument names nothing usable (exit code 2)."""


def load_model(spec: str, floating_base: bool = False, invalid_inertia: str = "error", geometry: bool = False):
    """A model from a command-line argument: :func:`sparsedyn.io.resolve.resolve_model`, raising
    :class:`UsageError` when ``spec`` names no model."""
    return resolve_model(spec, floating_base, invalid_inertia, error=UsageError, geometry=geometry)


def benchmark_module(name: str):
    """The module ``benchmarks/<name>.py`` of the source checkout this package runs from.  The
    benchmarks ship with the repository, never inside the library; :class:`UsageError` where
    they are absent (an installed wheel)."""
    import importlib.util
    from pathlib import Path
    path = Path(__file__).resolve().parents[2] / "benchmarks" / f"{name}.py"
    if not path.is_file():
        raise UsageError(f"{path} not found: the benchmarks ship with the source repository of sparsedyn, "
                         f"not with the installed package")
    spec = importlib.util.spec_from_file_location(f"_sparsedyn_benchmark_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _num(x: float) -> float:
    """``x`` with structurally tiny values (rounding residue of sin/cos, below 1e-12) shown as 0."""
    return 0.0 if abs(x) < 1e-12 else float(x)


def _vec(x) -> str:
    return "(" + ", ".join(f"{_num(c):.3g}" for c in x) + ")"


def format_tree(model) -> str:
    """One line per body: indentation by depth, joint type and axis, dofs, mass."""
    lines = [f"{model.root_name}"]
    for i in range(model.nbodies):
        j = model.joints[i]
        axis = "" if j.type in ("spherical", "free", "planar", "fixed") else f" axis={_vec(j.axis)}"
        lines.append(f"{'  ' * (model.depth[i] + 1)}{model.body_names[i]}  [{model.joint_names[i]}: {j.type}"
                     f"{axis}, nq={j.nq} nv={j.nv}]  mass={model.mass[i]:.4g} kg")
    return "\n".join(lines)


def _wrapped(head: str, items, width=WIDTH) -> list:
    return textwrap.wrap(head + ", ".join(items), width, subsequent_indent="    ", break_on_hyphens=False)


def info(model) -> str:
    """``sparsedyn info``: sizes, joint types, the tree, frames, sensors and mimic couplings."""
    counts = {}
    for j in model.joints:
        counts[j.type] = counts.get(j.type, 0) + 1
    extra = [f for f in model.frames if f.name not in model.body_names]
    out = [f"model {model.name!r}: {model.nbodies} bodies, nq={model.nq}, nv={model.nv}, "
           f"depth={int(model.depth.max()) + 1 if model.nbodies else 0}, total mass {model.total_mass:.4g} kg",
           "joints: " + ", ".join(f"{n} {t}" for t, n in sorted(counts.items())),
           format_tree(model)]
    if extra:
        out += _wrapped(f"frames ({len(extra)} besides the bodies, as frame@body): ",
                        [f"{f.name}@{model.body_names[f.body] if f.body >= 0 else model.root_name}" for f in extra])
    sensors = list(getattr(model, "sensors", ()))
    if sensors:
        out.append(f"sensors ({len(sensors)}, measured by default by sparsedyn.estimation.EstimationProblem):")
        for x in sensors:
            out += textwrap.wrap(f"{x.name}: {x.describe()}", WIDTH, initial_indent="  ", subsequent_indent="      ")
    else:
        out.append("sensors: none in the model (give them to EstimationProblem or in a sensor file)")
    if model.mimic:
        out += _wrapped("mimic couplings (kept as data; joints independent): ", [
            f"{model.joint_names[m.joint]} = {m.multiplier:g}*{model.joint_names[m.mimicked]}{m.offset:+g}"
            for m in model.mimic])
    return "\n".join(out)


def demo(seed: int = 0, plot: str | None = "humanoid_H_sparsity.png") -> str:
    """The demo's report as one string (see :func:`demo_lines`)."""
    return "\n".join(demo_lines(seed, plot))


def plain_call_lines(model, q, v, a):
    """What a plain call runs: native code (built on the first call of a function on a model, or
    loaded from the cache) or the NumPy functions."""
    import timeit

    from . import kernels
    from .algorithms.rnea import rnea
    if kernels.use_backend.current() == "numpy":
        yield "Plain calls run the NumPy functions here (SPARSEDYN_BACKEND=numpy)."
        return
    from .codegen import build, compile as sd_compile
    k = sd_compile(model)
    t = min(timeit.repeat(lambda: rnea(model, q, v, a), number=200, repeat=5)) / 200
    if not k.compiled:
        yield f"Plain calls run the NumPy functions: no C compiler ({t * 1e6:.0f} us per rnea call)."
        return
    now = (f"rnea takes {t * 1e6:.1f} us per call" if "rnea" in k.kernels else
           f"rnea's build is still running, NumPy answers meanwhile ({t * 1e6:.0f} us per call)")
    yield from textwrap.wrap(
        f"Plain calls run native code: the first call of a function on a model builds it (or loads it "
        f"from the cache {build.cache_dir()}); a build longer than half a second goes on in the "
        f"background while NumPy answers. Now {now}.", WIDTH)


def demo_lines(seed: int = 0, plot: str | None = "humanoid_H_sparsity.png"):
    """Yields the lines of ``sparsedyn demo`` as they are computed: the classical algorithms on the
    built-in humanoid, closed loops, and the estimation case study.  ``plot``: PNG path for H's
    sparsity picture (None: no file).  Lines are at most 100 characters."""
    from .algorithms.crba import HandC
    from .model import builders

    model = builders.humanoid()
    rng = np.random.default_rng(seed)
    q = builders.humanoid_standing_configuration()
    v = 0.3 * rng.standard_normal(model.nv)
    a = rng.standard_normal(model.nv)
    yield (f"sparsedyn demo: built-in humanoid ({model.nbodies} bodies, nq={model.nq}, nv={model.nv}, "
           f"{model.total_mass:.1f} kg)")
    yield from _kinematics_and_rnea_lines(model, q, v, a, rng)
    yield from plain_call_lines(model, q, v, a)
    H, C = HandC(model, q, v)
    labels = [f"{model.joint_names[model.dof_body[k]]}" + (f"[{k - model.v_start[model.dof_body[k]]}]"
              if model.joints[model.dof_body[k]].nv > 1 else "") for k in range(model.nv)]
    yield from _sparsity_lines(model, q, H, labels, plot)
    yield from _forward_dynamics_lines(model, q, v, a, H, C, labels, rng)

    from .constraints.demo import constraints_demo_lines
    from .estimation.casestudy import estimation_demo_lines
    yield ""
    yield from constraints_demo_lines()
    yield ""
    yield from estimation_demo_lines()


def _kinematics_and_rnea_lines(model, q, v, a, rng):
    """The demo's frame positions, gravity wrench, inverse dynamics, its checks and a batch."""
    from .algorithms.kinematics import body_velocities, frame_jacobian, frame_placement, frame_velocity
    from .algorithms.rnea import generalized_gravity, nonlinear_effects, rnea

    yield ""
    yield "Standing configuration, frame positions in the world [m]:"
    for name in ("l_sole", "r_sole", "l_hand", "r_hand"):
        _, p = frame_placement(model, q, name)
        yield f"  {name:8s} {_num(p[0]):+.3f} {_num(p[1]):+.3f} {_num(p[2]):+.3f}"
    g = generalized_gravity(model, q)
    yield ""
    yield (f"Gravity wrench on the floating base [n; f] (body frame): "
           f"{np.array2string(g[:6] + 0.0, precision=2, suppress_small=True)}")
    yield f"  vertical force {g[3:6] @ np.array([0, 0, 1]):.2f} N = m g = {model.total_mass * 9.81:.2f} N"
    tau = rnea(model, q, v, a)
    C = nonlinear_effects(model, q, v)
    yield ""
    yield "Inverse dynamics (RNEA) at a random velocity and acceleration, largest joint torques [N m]:"
    joints = [(abs(tau[model.v_start[i]]), model.joint_names[i], tau[model.v_start[i]])
              for i in range(1, model.nbodies)]
    for _, name, t in sorted(joints, reverse=True)[:5]:
        yield f"  {name:18s} {t:+9.3f}"
    yield f"  |C(q, v)| = {np.linalg.norm(C):.3f}"
    J = frame_jacobian(model, q, "r_hand", "local_world_aligned")
    err = np.abs(J @ v - frame_velocity(model, q, v, "r_hand", "local_world_aligned")).max()
    vb = body_velocities(model, q, v)
    ke = 0.5 * sum(vb[i] @ model.inertia[i] @ vb[i] for i in range(model.nbodies))
    yield ""
    yield (f"Checks: |J v - v_hand| = {err:.1e};  kinetic energy {ke:.4f} J;  "
           f"RNEA linear in a: {np.abs(rnea(model, q, v, 2 * a) - 2 * tau + C).max():.1e}")
    Q = np.stack([model.random_configuration(rng) for _ in range(100)])
    T = rnea(model, Q, np.zeros(model.nv), np.zeros(model.nv))
    yield f"Batched: gravity torques for {Q.shape[0]} random configurations in one call -> {T.shape}"


def _sparsity_lines(model, q, H, labels, plot):
    """The demo's joint-space inertia matrix, its branch-induced sparsity and the LTDL factor."""
    from .algorithms.ltdl import ltdl, sparsity_pattern
    from .algorithms.minv import minv

    pattern = sparsity_pattern(model)
    L, D = ltdl(model, H)
    # Fill-in counted independently of the sparse kernel: a dense Cholesky factor in the same
    # (reversed) elimination order, H = Ld^T Ld, has no entry outside H's pattern.
    Ld = np.linalg.cholesky(H[::-1, ::-1])[::-1, ::-1].T
    fill = int(np.count_nonzero((np.abs(Ld) > 1e-12 * np.abs(Ld).max()) & ~pattern))
    yield ""
    yield (f"Joint-space inertia H ({model.nv} x {model.nv}) by CRBA: {int(pattern.sum())} structural "
           f"nonzeros of {model.nv ** 2} ({100 * pattern.mean():.0f}%),")
    yield "branch-induced sparsity (# structural nonzero, . zero for every configuration):"
    yield sparsity_text(pattern, labels)
    yield (f"LTDL factor: {int(np.count_nonzero(np.tril(pattern)))} nonzeros in L (with the diagonal), "
           f"fill-in = {fill} (dense factor in the same order)")
    yield (f"  |H - L^T D L| = {np.abs(L.T @ (D[:, None] * L) - H).max():.1e};  "
           f"|Minv H - I| = {np.abs(minv(model, q) @ H - np.eye(model.nv)).max():.1e}")
    if plot:
        yield "Drawing the sparsity picture of H (matplotlib) ..."
        try:
            from .plots import plot_sparsity
            plot_sparsity(H, pattern, plot, f"humanoid: H at the standing configuration ({model.nv} dofs)",
                          labels)
            yield f"Sparsity picture written to {plot}"
        except ImportError:
            yield "Sparsity picture skipped: matplotlib is not installed (pip install 'sparsedyn[plot]')"


def _forward_dynamics_lines(model, q, v, a, H, C, labels, rng):
    """The demo's forward dynamics two ways, side by side: ABA and CRBA + LTDL."""
    from .algorithms.aba import aba
    from .algorithms.fd import fd_crb
    from .algorithms.rnea import rnea

    tau_fd = rnea(model, q, v, a) + 5.0 * rng.standard_normal(model.nv) * (np.arange(model.nv) >= 6)
    a_aba, a_crb = aba(model, q, v, tau_fd), fd_crb(model, q, v, tau_fd)
    yield ""
    yield "Forward dynamics at a random state and torque: ABA and CRBA + LTDL side by side (first 10 dofs):"
    yield f"  {'dof':18s} {'ABA':>11s} {'CRBA+LTDL':>11s}"
    for k in range(10):
        yield f"  {labels[k]:18s} {a_aba[k]:+11.5f} {a_crb[k]:+11.5f}"
    yield (f"  max |ABA - CRBA+LTDL| over all {model.nv} dofs = {np.abs(a_aba - a_crb).max():.1e};  "
           f"|H a + C - tau| = {np.abs(H @ a_aba + C - tau_fd).max():.1e}")


def compiled_estimate_lines(solver, q, v, y, repeat=5) -> list:
    """Lines for ``sparsedyn estimate``: the compiled estimator's flops and, with a C compiler, its
    time per solve of one state next to the NumPy solver's (best of ``repeat``).

    The report above these lines counts the flops of the sparse algorithm as written; the
    compiled program is the same solve traced with its structural zeros and ones folded away
    and shared subexpressions computed once, so it needs fewer."""
    import timeit

    from .codegen import CompilerNotFoundWarning
    from .codegen import compile as sd_compile
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CompilerNotFoundWarning)
        k = sd_compile(solver)
    r, f = k.flops("result"), k.flops()
    mad = r["mul"] + r["add"] + r["div"]
    extra = ", ".join(f"{r[x]} {x}" for x in ("sqrt", "sin", "cos") if r[x])
    lines = textwrap.wrap(
        f"compiled: {mad:,} flops per solve (mul+add+div" + (f"; also {extra}" if extra else "")
        + f"), the count above after folding structural zeros and ones and sharing common "
        f"subexpressions; {f['total'] - r['total']:,} more for the run-time check values", WIDTH,
        subsequent_indent="    ")
    if not k.compiled:
        why = "no working C compiler" if caught else "not compiled"
        return lines + textwrap.wrap(f"compiled solve: {why}, so sparsedyn.compile falls back to the NumPy "
                                     f"solver (set SPARSEDYN_CC or CC to a C compiler)", WIDTH,
                                     subsequent_indent="    ")

    def best(fn, n):
        fn()
        return min(timeit.repeat(fn, number=n, repeat=repeat)) / n

    t_numpy = best(lambda: solver.solve(q, v, y), 3)
    t_comp = best(lambda: k.solve(q, v, y), 200)
    args = (q, v, y) if k.problem.ny else (q, v)
    t_kernel = best(lambda: k.raw(*args), 2000)
    return lines + textwrap.wrap(
        f"compiled solve: {t_comp * 1e6:.1f} us per state from Python (input validation, checks and the "
        f"Estimate included; the native kernel alone {t_kernel * 1e6:.1f} us, "
        f"{f['total'] / t_kernel / 1e9:.2f} GFLOP/s) vs {t_numpy * 1e6:.0f} us for the NumPy solver "
        f"({t_numpy / t_comp:.0f}x)", WIDTH, subsequent_indent="    ")


DESCRIPTION = """\
Rigid-body dynamics of articulated bodies (robots, humans, mechanisms).

MODEL is a built-in name (humanoid, chain7, ...), a URDF or MJCF (.xml) file, or the name of a URDF of the
example-robot-data package (panda, talos_reduced, ur5_robot, icub, ...: pip install
example-robot-data).
"""

EPILOG = """\
examples:
  sparsedyn info panda
  sparsedyn sparsity humanoid --problem fd --plot fd.png
  sparsedyn estimate humanoid --sensors examples/humanoid_ankle_ft.toml
  sparsedyn view talos_reduced --floating-base --q motion.npy --dt 0.001
  sparsedyn estimate humanoid --sensors examples/humanoid_ankle_ft.toml --recording log.zarr --out est.zarr --workers 2
  sparsedyn identify panda --recording rec.npz --sigma 0.1 --out panda_parameters.npz

exit codes: 0 success; 1 error (one line on stderr); 2 usage error; 3 the analysis ran but the
problem cannot be solved (ill-posed sensors, structurally singular system): the report says why.
"""


def _parser() -> argparse.ArgumentParser:
    from . import __version__
    parser = argparse.ArgumentParser(prog="sparsedyn", description=DESCRIPTION, epilog=EPILOG,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"sparsedyn {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", title="commands")
    _model_commands(sub)
    _recording_commands(sub)
    _build_commands(sub)
    _view_and_demo_commands(sub)
    return parser


MODEL_HELP = "a built-in model name, a URDF or MJCF file, or an example-robot-data name (e.g. panda)"
FLOATING_BASE_HELP = "attach a URDF's root link by a free joint (floating base)"


def _model_commands(sub):
    """``info`` and ``sparsity``: what a model is."""
    p_info = sub.add_parser("info", help="a model's tree, dofs per joint, masses, frames and sensors")
    p_info.add_argument("model", help=MODEL_HELP)
    p_info.add_argument("--floating-base", action="store_true", help=FLOATING_BASE_HELP)
    p_info.add_argument("--srdf", default=None, help="an SRDF file: show its reference configurations, rotor "
                        "parameters and disabled collision pairs")
    p_info.add_argument("--invalid-inertia", choices=("error", "warn"), default="error",
                        help="inertia matrices with a negative eigenvalue: refuse (default) or load as written")
    p_info.add_argument("--build", action="store_true", help="also say how native kernels are built here: the C "
                                                             "compiler (system or pip), the CPU target, the cache")
    p_sp = sub.add_parser("sparsity", help="the sparse Newton-Euler system of a model: structure, orderings, "
                                           "fill-in, pivot safety, flops, and a picture")
    p_sp.add_argument("model", help=MODEL_HELP)
    p_sp.add_argument("--problem", choices=("id", "fd"), default="id", help="inverse or forward dynamics")
    p_sp.add_argument("--ordering", default="auto", help="elimination order of non-triangular blocks "
                                                         "(auto, articulated, colamd, mmd_ata, mmd_at_plus_a, natural)")
    p_sp.add_argument("--plot", default=None, help="PNG file for the before/after sparsity picture")
    p_sp.add_argument("--floating-base", action="store_true", help=FLOATING_BASE_HELP)


def _recording_commands(sub):
    """``estimate`` and ``identify``: a sensor file or a recording on a model."""
    p_est = sub.add_parser("estimate", help="well-posedness verdict, unknowns and flops of an estimation problem, "
                                            "and a solve of a simulated sample")
    p_est.add_argument("model", help=MODEL_HELP)
    p_est.add_argument("--sensors", required=True, help="sensor file (.toml or .json; format in the README)")
    p_est.add_argument("--floating-base", action="store_true", help=FLOATING_BASE_HELP)
    p_est.add_argument("--recording", default=None, help="estimate every state of a recording (.npz or Zarr store "
                                                         "with q, v, y; see sparsedyn.estimate_recording) into --out")
    p_est.add_argument("--out", default=None, help="with --recording: where to write the estimates (.npz or .zarr)")
    p_est.add_argument("--workers", type=int, default=0, help="with --recording: Dask worker processes on this "
                                                             "machine (default 0: in this process)")
    p_est.add_argument("--chunk", type=int, default=None, help="with --recording: states per batched call")
    p_est.add_argument("--force", action="store_true", help="with --out: replace an existing output")
    p_id = sub.add_parser("identify", help="inertial parameters from a recording of states and joint forces "
                                           "(.npz or Zarr with q, v, a, tau)")
    p_id.add_argument("model", help=MODEL_HELP)
    p_id.add_argument("--recording", required=True, help="the recording: q, v, a, tau (N, ...) and an (N, 6) array "
                                                         "per --ft sensor")
    p_id.add_argument("--out", required=True, help="where to write the parameters (.npz or .zarr)")
    p_id.add_argument("--ft", nargs="*", default=(), help="force/torque sensors of the model whose readings the "
                                                         "recording holds (arrays named after them)")
    p_id.add_argument("--sigma", type=float, default=None, help="joint force noise (default: estimated)")
    p_id.add_argument("--physically-consistent", action="store_true", help="a physically consistent fit")
    p_id.add_argument("--workers", type=int, default=0, help="Dask worker processes on this machine (default 0)")
    p_id.add_argument("--chunk", type=int, default=None, help="states per chunk")
    p_id.add_argument("--force", action="store_true", help="replace an existing --out")
    p_id.add_argument("--floating-base", action="store_true", help=FLOATING_BASE_HELP)


def _build_commands(sub):
    """``compile``, ``build`` and ``bench``: native kernels."""
    p_comp = sub.add_parser("compile", help="compile a model's kernels to native code (C compiler: CC or "
                                            "SPARSEDYN_CC); print flop counts and build times")
    p_comp.add_argument("model", help=MODEL_HELP)
    p_comp.add_argument("--floating-base", action="store_true", help=FLOATING_BASE_HELP)
    p_comp.add_argument("--no-batch", action="store_true", help="build only the single-state library")
    p_build = sub.add_parser("build", help="prebuild a model's native kernels into a build cache (for a cluster "
                                           "image or a robot's computer of the same platform and CPU)")
    p_build.add_argument("model", help=MODEL_HELP)
    p_build.add_argument("--kernels", nargs="+", default=None, metavar="NAME",
                         help="functions to build (default: rnea nonlinear_effects aba crba minv forward_kinematics)")
    p_build.add_argument("--cache-dir", default=None, metavar="DIR",
                         help="the cache to fill (default: SPARSEDYN_CACHE_DIR or ~/.cache/sparsedyn); point "
                              "SPARSEDYN_CACHE_DIR at it where it is used")
    p_build.add_argument("--floating-base", action="store_true", help=FLOATING_BASE_HELP)
    p_build.add_argument("--no-batch", action="store_true", help="build only the single-state libraries")
    p_bench = sub.add_parser("bench", help="compiled sparsedyn vs Pinocchio (and MuJoCo), side by side in one run "
                                          "(a few minutes)")
    p_bench.add_argument("--models", nargs="+", help="model names or URDF paths (default: panda, talos_reduced, "
                                                     "chains of 10, 30, 100 links)")
    p_bench.add_argument("--batch", type=int, default=10000, help="states per batch (default: %(default)s)")
    p_bench.add_argument("--cache", action="store_true", help="reuse the user's build cache (default: a fresh one)")


def _view_and_demo_commands(sub):
    """``view`` (the browser viewer) and ``demo``."""
    p_view = sub.add_parser("view", help="the model in the browser: a configuration, a trajectory or a recording "
                                         "(pip install 'sparsedyn[viewer]')")
    p_view.add_argument("model", help=MODEL_HELP)
    src = p_view.add_mutually_exclusive_group()
    src.add_argument("--q", metavar="FILE", help="a configuration (nq numbers) or a trajectory (one per row) in "
                                                 "a .npy, .txt or .csv file")
    src.add_argument("--recording", metavar="REC", help="a recording (.npz or Zarr store, sparsedyn.io.recordings): "
                                                        "its states q, and contact[<frame>] forces if it has them")
    p_view.add_argument("--estimates", metavar="EST", help="with --recording: the estimates of its states (the "
                                                           "output of sparsedyn estimate --recording), contact forces "
                                                           "drawn at their frames")
    p_view.add_argument("--dt", type=float, default=None, help="seconds between rows (default 0.01)")
    p_view.add_argument("--collision", action="store_true", help="show the collision shapes")
    p_view.add_argument("--port", type=int, default=8080, help="first port to try (default: %(default)s)")
    p_view.add_argument("--save", metavar="FILE", help="write a standalone page (.html) or .viser file and exit")
    p_view.add_argument("--seconds", type=float, default=None, help="serve this long (default: until Ctrl-C)")
    p_view.add_argument("--floating-base", action="store_true", help=FLOATING_BASE_HELP)
    p_demo = sub.add_parser("demo", help="a tour on the built-in humanoid (about 10 s)")
    p_demo.add_argument("--seed", type=int, default=0)
    p_demo.add_argument("--plot", default="humanoid_H_sparsity.png",
                        help="PNG file for the sparsity picture of H (default: %(default)s; '' for none)")


def _progress_line():
    """``progress(message)`` for slow commands: one status line on stderr, rewritten in place on a
    terminal; elsewhere (a log file, a pipe) only the first message is written."""
    tty = sys.stderr.isatty()
    state = {"first": True}

    def progress(message):
        if tty:
            print(f"\r\033[K.. {message[:110]}", end="", file=sys.stderr, flush=True)
        elif state["first"]:
            print(f".. {message} (one progress line; more on a terminal)", file=sys.stderr, flush=True)
        state["first"] = False

    def done():
        if tty and not state["first"]:
            print("\r\033[K", end="", file=sys.stderr, flush=True)
    progress.done = done
    return progress


def _fit(text: str, width=120) -> str:
    """Prose lines wrapped at ``width``; table rows (with ``|``) and indented rows kept as they are."""
    out = []
    for line in text.splitlines():
        if len(line) <= width or "|" in line:
            out.append(line)
        else:
            out += textwrap.wrap(line, width, subsequent_indent="    ")
    return "\n".join(out)


def _error_line(e: BaseException) -> str:
    return " ".join(str(e).split()) or type(e).__name__


def view(args) -> int:
    """``sparsedyn view``: serve the viewer (or write ``--save``) for a model and an optional motion."""
    import time
    from .viewer import Viewer
    from .viewer.motion import read_motion
    model = load_model(args.model, args.floating_base, geometry=True)
    motion = read_motion(model, args.q, args.recording, args.dt, args.estimates) if (args.q or args.recording) \
        else None
    viewer = Viewer(model, kind="collision" if args.collision else "visual", port=args.port, verbose=False,
                    q=None if motion is None else motion[0][0])
    try:
        if motion is None and any(p < 0 and j.type == "free" for p, j in zip(model.parent, model.joints)):
            viewer.stand()                   # a floating base on the floor, not at z = 0
        if args.save:
            progress = _progress_line() if motion is not None and len(motion[0]) > 1 else None
            if motion is None:
                viewer.record(args.save)
            else:
                viewer.record(args.save, motion[0], motion[1], contacts=motion[2], progress=progress)
            if progress is not None:
                progress.done()
            print(f"sparsedyn: wrote {args.save}", flush=True)
            return EXIT_OK
        print(f"sparsedyn: viewer of {model.name!r} at {viewer.url} (Ctrl-C to stop)", flush=True)
        if motion is not None and len(motion[0]) > 1:
            viewer.play(motion[0], motion[1], contacts=motion[2])
        end = None if args.seconds is None else time.monotonic() + args.seconds
        try:
            while end is None or time.monotonic() < end:
                time.sleep(min(0.2, max(0.0, end - time.monotonic())) if end is not None else 0.2)
        except KeyboardInterrupt:
            pass
        return EXIT_OK
    finally:
        viewer.close()


def _run(args) -> int:
    """Run the parsed command ``args``; returns the exit code."""
    if args.command == "info":
        model = load_model(args.model, args.floating_base, args.invalid_inertia)
        print(info(model))
        if args.srdf:
            from .io.srdf import load_srdf
            print(load_srdf(model, args.srdf).summary())
        if args.build:
            from .codegen.api import build_info
            print("native kernels:\n" + "\n".join("  " + ln for ln in build_info().splitlines()))
    elif args.command == "estimate" and (args.recording or args.out):
        if not (args.recording and args.out):
            raise UsageError("--recording and --out go together")
        from .cli_recordings import recording_report
        print(recording_report(load_model(args.model, args.floating_base), args.sensors, args.recording,
                               args.out, workers=args.workers, chunk=args.chunk, force=args.force))
    elif args.command == "identify":
        from .cli_recordings import identify_report
        print(identify_report(load_model(args.model, args.floating_base), args.recording, args.out,
                              sensors=args.ft, sigma=args.sigma, physically_consistent=args.physically_consistent,
                              workers=args.workers, chunk=args.chunk, force=args.force))
    elif args.command == "estimate":
        from .estimation import estimate_report
        text = estimate_report(load_model(args.model, args.floating_base), args.sensors,
                               extra=compiled_estimate_lines)
        print(text)
        return EXIT_ILL_POSED if "ILL-POSED" in text.splitlines()[0] else EXIT_OK
    elif args.command == "sparsity":
        from .sparse import sparsity_report
        text = sparsity_report(load_model(args.model, args.floating_base), args.problem, args.plot, args.ordering)
        print(text)
        return EXIT_ILL_POSED if text.startswith("structurally singular") else EXIT_OK
    elif args.command == "compile":
        from .codegen import compile_report
        print(compile_report(load_model(args.model, args.floating_base), progress=True,
                             vectorize=not args.no_batch))
    elif args.command == "build":
        import os
        from .codegen.api import prebuild_report
        from .codegen.trace import DEFAULT_KERNELS
        if args.cache_dir:
            os.environ["SPARSEDYN_CACHE_DIR"] = os.path.abspath(args.cache_dir)
        print(prebuild_report(load_model(args.model, args.floating_base), args.kernels or DEFAULT_KERNELS,
                              progress=True, vectorize=not args.no_batch))
    elif args.command == "bench":
        bench = benchmark_module("bench_compiled")
        DEFAULT_MODELS, bench_report = bench.DEFAULT_MODELS, bench.bench_report
        progress = _progress_line()
        text = bench_report(args.models or DEFAULT_MODELS, batch=args.batch, cold=not args.cache,
                            progress=progress)
        progress.done()
        print(_fit(text))
    elif args.command == "view":
        return view(args)
    else:
        from .codegen.native import announcements_held
        with announcements_held():       # the builds' lines after the report, not inside it
            for line in demo_lines(args.seed, args.plot or None):
                print(line, flush=True)
    return EXIT_OK


def main(argv=None) -> int:
    """Run the command line with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:                     # --help, --version (0) or a usage error (2)
        return int(e.code or 0)
    from .model import ModelError
    # One line per warning on the command line, without Python's source-line echo.
    warnings.formatwarning = lambda message, category, *rest, **kw: f"sparsedyn: warning: {message}\n"
    try:
        return _run(args)
    except UsageError as e:
        parser.print_usage(sys.stderr)
        print(f"sparsedyn: error: {_error_line(e)}", file=sys.stderr)
        return EXIT_USAGE
    except (ModelError, ImportError, OSError, ValueError, KeyError, TypeError, RuntimeError, ArithmeticError) as e:
        if isinstance(e, BrokenPipeError):
            # The reader went away (e.g. `sparsedyn info robot.urdf | head`): not an error of ours.
            sys.stderr.close()
            return EXIT_OK
        print(f"sparsedyn: error: {_error_line(e)}", file=sys.stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        print("sparsedyn: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
