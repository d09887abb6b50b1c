"""Command line: ``sparsedyn info MODEL`` and ``sparsedyn demo``."""

from __future__ import annotations

import argparse
import sys
import warnings

import numpy as np

from .plots import sparsity_text

__all__ = ["main", "load_model", "compiled_estimate_lines"]


def load_model(spec: str, floating_base: bool = False, invalid_inertia: str = "error"):
    """A built-in model by name, or a URDF or MJCF file (see :func:`sparsedyn.load_model` for the options)."""
    from .builders import BUILTIN_MODELS, builtin
    if spec in BUILTIN_MODELS:
        return builtin(spec)
    if spec.endswith((".urdf", ".xml", ".mjcf")) or "/" in spec or "\\" in spec:
        from .io.load import load_model as load_file
        return load_file(spec, floating_base=floating_base, invalid_inertia=invalid_inertia)
    raise SystemExit(f"sparsedyn: {spec!r} is neither a built-in model ({', '.join(sorted(BUILTIN_MODELS))}) "
                     f"nor a .urdf or MJCF .xml file")


def format_tree(model) -> str:
    """One line per body: indentation by depth, joint type, dofs, mass."""
    lines = [f"{model.root_name}"]
    for i in range(model.nbodies):
        j = model.joints[i]
        axis = "" if j.type in ("spherical", "free", "planar") else f" axis=({j.axis[0]:+.3g},{j.axis[1]:+.3g},{j.axis[2]:+.3g})"
        lines.append(f"{'  ' * (model.depth[i] + 1)}{model.body_names[i]}  [{model.joint_names[i]}: {j.type}"
                     f"{axis}, nq={j.nq} nv={j.nv}]  mass={model.mass[i]:.4g} kg")
    return "\n".join(lines)


def info(model) -> str:
    counts = {}
    for j in model.joints:
        counts[j.type] = counts.get(j.type, 0) + 1
    extra = [f for f in model.frames if f.name not in model.body_names]
    out = [f"model {model.name!r}: {model.nbodies} bodies, nq={model.nq}, nv={model.nv}, "
           f"depth={int(model.depth.max()) + 1 if model.nbodies else 0}, total mass {model.total_mass:.4g} kg",
           "joints: " + ", ".join(f"{n} {t}" for t, n in sorted(counts.items())),
           format_tree(model)]
    if extra:
        out.append(f"frames ({len(extra)} besides the bodies): " +
                   ", ".join(f"{f.name}@{model.body_names[f.body]}" for f in extra))
    if model.mimic:
        out.append("mimic couplings (kept as data; joints independent): " + ", ".join(
            f"{model.joint_names[m.joint]} = {m.multiplier:g}*{model.joint_names[m.mimicked]}{m.offset:+g}"
            for m in model.mimic))
    return "\n".join(out)


def demo(seed: int = 0, plot: str | None = "humanoid_H_sparsity.png") -> str:
    """Short report on the built-in humanoid; ``plot``: PNG path for H's sparsity (None: no file)."""
    from . import builders
    from .algorithms.aba import aba
    from .algorithms.crba import HandC
    from .algorithms.fd import fd_crb
    from .algorithms.ltdl import ltdl, sparsity_pattern
    from .algorithms.minv import minv
    from .algorithms.kinematics import body_velocities, frame_jacobian, frame_placement, frame_velocity
    from .algorithms.rnea import generalized_gravity, nonlinear_effects, rnea

    model = builders.humanoid()
    rng = np.random.default_rng(seed)
    q = builders.humanoid_standing_configuration()
    v = 0.3 * rng.standard_normal(model.nv)
    a = rng.standard_normal(model.nv)
    out = [f"sparsedyn demo: built-in humanoid ({model.nbodies} bodies, nq={model.nq}, nv={model.nv}, "
           f"{model.total_mass:.1f} kg)", ""]
    out.append("Standing configuration, frame positions in the world [m]:")
    for name in ("l_sole", "r_sole", "l_hand", "r_hand"):
        _, p = frame_placement(model, q, name)
        out.append(f"  {name:8s} {p[0]:+.3f} {p[1]:+.3f} {p[2]:+.3f}")
    g = generalized_gravity(model, q)
    out.append("")
    out.append(f"Gravity wrench on the floating base [n; f] (body frame): "
               f"{np.array2string(g[:6], precision=2, suppress_small=True)}")
    out.append(f"  vertical force {g[3:6] @ np.array([0, 0, 1]):.2f} N = m g = {model.total_mass * 9.81:.2f} N")
    tau = rnea(model, q, v, a)
    C = nonlinear_effects(model, q, v)
    out.append("")
    out.append("Inverse dynamics (RNEA) at a random velocity and acceleration, largest joint torques [N m]:")
    joints = [(abs(tau[model.v_start[i]]), model.joint_names[i], tau[model.v_start[i]])
              for i in range(1, model.nbodies)]
    for _, name, t in sorted(joints, reverse=True)[:5]:
        out.append(f"  {name:18s} {t:+9.3f}")
    out.append(f"  |C(q, v)| = {np.linalg.norm(C):.3f}")
    J = frame_jacobian(model, q, "r_hand", "local_world_aligned")
    err = np.abs(J @ v - frame_velocity(model, q, v, "r_hand", "local_world_aligned")).max()
    vb = body_velocities(model, q, v)
    ke = 0.5 * sum(vb[i] @ model.inertia[i] @ vb[i] for i in range(model.nbodies))
    out.append("")
    out.append(f"Checks: |J v - v_hand| = {err:.1e};  kinetic energy {ke:.4f} J;  "
               f"RNEA linear in a: {np.abs(rnea(model, q, v, 2 * a) - 2 * tau + C).max():.1e}")
    Q = np.stack([model.random_configuration(rng) for _ in range(100)])
    T = rnea(model, Q, np.zeros(model.nv), np.zeros(model.nv))
    out.append(f"Batched: gravity torques for {Q.shape[0]} random configurations in one call -> {T.shape}")

    # Joint-space inertia matrix, its branch-induced sparsity and the LTDL factor.
    H, C = HandC(model, q, v)
    pattern = sparsity_pattern(model)
    L, D = ltdl(model, H)
    # Fill-in counted independently of the sparse kernel: a dense Cholesky factor in the same
    # (reversed) elimination order, H = Ld^T Ld, has no entry outside H's pattern.
    Ld = np.linalg.cholesky(H[::-1, ::-1])[::-1, ::-1].T
    fill = int(np.count_nonzero((np.abs(Ld) > 1e-12 * np.abs(Ld).max()) & ~pattern))
    labels = [f"{model.joint_names[model.dof_body[k]]}" + (f"[{k - model.v_start[model.dof_body[k]]}]"
              if model.joints[model.dof_body[k]].nv > 1 else "") for k in range(model.nv)]
    out += ["", f"Joint-space inertia H ({model.nv} x {model.nv}) by CRBA: {int(pattern.sum())} structural nonzeros "
            f"of {model.nv ** 2} ({100 * pattern.mean():.0f}%), branch-induced sparsity:",
            sparsity_text(pattern, labels),
            f"LTDL factor: {int(np.count_nonzero(np.tril(pattern)))} nonzeros in L (with the diagonal), "
            f"fill-in = {fill} (dense factor in the same order);  |H - L^T D L| = {np.abs(L.T @ (D[:, None] * L) - H).max():.1e};  "
            f"|Minv H - I| = {np.abs(minv(model, q) @ H - np.eye(model.nv)).max():.1e}"]
    if plot:
        try:
            from .plots import plot_sparsity
            plot_sparsity(H, pattern, plot, f"humanoid: H at the standing configuration ({model.nv} dofs)", labels)
            out.append(f"Sparsity picture written to {plot}")
        except ImportError:
            out.append("Sparsity picture skipped: matplotlib is not installed (pip install 'sparsedyn[plot]')")

    # Forward dynamics two ways, side by side.
    tau_fd = rnea(model, q, v, a) + 5.0 * rng.standard_normal(model.nv) * (np.arange(model.nv) >= 6)
    qdd_aba, qdd_crb = aba(model, q, v, tau_fd), fd_crb(model, q, v, tau_fd)
    out += ["", "Forward dynamics at a random state and torque: ABA and CRBA + LTDL side by side (first 10 dofs):",
            f"  {'dof':18s} {'ABA':>11s} {'CRBA+LTDL':>11s}"]
    for k in range(10):
        out.append(f"  {labels[k]:18s} {qdd_aba[k]:+11.5f} {qdd_crb[k]:+11.5f}")
    out.append(f"  max |ABA - CRBA+LTDL| over all {model.nv} dofs = {np.abs(qdd_aba - qdd_crb).max():.1e};  "
               f"|H qdd + C - tau| = {np.abs(H @ qdd_aba + C - tau_fd).max():.1e}")

    from .constraints import constraints_demo
    from .estimation import estimation_demo
    out += ["", constraints_demo(), "", estimation_demo()]
    return "\n".join(out)


def compiled_estimate_lines(solver, q, qd, y, repeat=5) -> list:
    """Lines for ``sparsedyn estimate``: the compiled estimator's flops from its IR and, with a C
    compiler, its time per solve of one state next to the NumPy solver's (best of ``repeat``)."""
    import timeit

    from .codegen import CompilerNotFoundWarning
    from .codegen import compile as sd_compile
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", CompilerNotFoundWarning)
        k = sd_compile(solver)
    r, f = k.flops("result"), k.flops()
    mad = r["mul"] + r["add"] + r["div"]
    extra = ", ".join(f"{r[x]} {x}" for x in ("sqrt", "sin", "cos") if r[x])
    lines = [f"flops per solve from the compiled program's IR (after folding and CSE): {mad} (mul+add+div"
             + (f"; also {extra}" if extra else "") + f"), {f['total'] - r['total']} more for the run-time "
             f"check values"]
    if not k.compiled:
        why = "no working C compiler" if caught else "not compiled"
        return lines + [f"compiled solve: {why}, so sparsedyn.compile falls back to the NumPy solver "
                        f"(set SPARSEDYN_CC to a C compiler)"]

    def best(fn, n):
        fn()
        return min(timeit.repeat(fn, number=n, repeat=repeat)) / n

    t_numpy = best(lambda: solver.solve(q, qd, y), 3)
    t_comp = best(lambda: k.solve(q, qd, y), 200)
    args = (q, qd, y) if k.problem.ny else (q, qd)
    t_kernel = best(lambda: k.raw(*args), 2000)
    lines.append(f"compiled solve: {t_comp * 1e6:.1f} us per state from Python (input validation, checks and the "
                 f"Estimate included; the native kernel alone {t_kernel * 1e6:.1f} us, "
                 f"{f['total'] / t_kernel / 1e9:.2f} GFLOP/s) vs {t_numpy * 1e6:.0f} us for the NumPy solver "
                 f"({t_numpy / t_comp:.0f}x)")
    return lines


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="sparsedyn", description="Rigid-body dynamics: model info and demo.")
    sub = parser.add_subparsers(dest="command", required=True)
    p_info = sub.add_parser("info", help="print a model's tree, dofs per joint, masses and depth")
    p_info.add_argument("model", help="a URDF or MJCF path or a built-in model name (e.g. humanoid)")
    p_info.add_argument("--floating-base", action="store_true", help="attach a URDF's root link by a free joint")
    p_info.add_argument("--invalid-inertia", choices=("error", "warn"), default="error",
                        help="inertia matrices with a negative eigenvalue: refuse (default) or load as written")
    p_sp = sub.add_parser("sparsity", help="the sparse Newton-Euler system of a model: structure, orderings, "
                                            "fill-in, pivot safety, flops, and a picture")
    p_sp.add_argument("model", help="a URDF or MJCF path or a built-in model name")
    p_sp.add_argument("--problem", choices=("id", "fd"), default="id", help="inverse or forward dynamics")
    p_sp.add_argument("--ordering", default="auto", help="elimination order of non-triangular blocks "
                                                         "(auto, articulated, colamd, mmd_ata, mmd_at_plus_a, natural)")
    p_sp.add_argument("--plot", default=None, help="PNG file for the before/after sparsity picture")
    p_sp.add_argument("--floating-base", action="store_true", help="attach a URDF's root link by a free joint")
    p_est = sub.add_parser("estimate", help="well-posedness verdict, unknowns and flops of an estimation problem, "
                                            "and a solve of a simulated sample")
    p_est.add_argument("model", help="a URDF or MJCF path or a built-in model name")
    p_est.add_argument("--sensors", required=True, help="sensor file (.toml or .json; see sparsedyn.estimation.files)")
    p_est.add_argument("--floating-base", action="store_true", help="attach a URDF's root link by a free joint")
    p_comp = sub.add_parser("compile", help="compile a model's kernels to native code; print flop counts and build times")
    p_comp.add_argument("model", help="a URDF or MJCF path or a built-in model name")
    p_comp.add_argument("--floating-base", action="store_true", help="attach a URDF's root link by a free joint")
    p_comp.add_argument("--no-batch", action="store_true", help="build only the single-state library")
    p_bench = sub.add_parser("bench", help="compiled sparsedyn vs Pinocchio (and MuJoCo), side by side in one run")
    p_bench.add_argument("--models", nargs="+", help="built-in names or URDF paths (default: panda, talos, chains)")
    p_bench.add_argument("--batch", type=int, default=10000, help="states per batch (default: %(default)s)")
    p_bench.add_argument("--cache", action="store_true", help="reuse the user's build cache (default: a fresh one)")
    p_demo = sub.add_parser("demo", help="run the demo on the built-in humanoid")
    p_demo.add_argument("--seed", type=int, default=0)
    p_demo.add_argument("--plot", default="humanoid_H_sparsity.png",
                        help="PNG file for the sparsity picture of H (default: %(default)s; '' for none)")
    args = parser.parse_args(argv)
    from .model import ModelError
    # One line per warning on the command line, without Python's source-line echo.
    warnings.formatwarning = lambda message, category, *rest, **kw: f"sparsedyn: warning: {message}\n"
    try:
        if args.command == "info":
            print(info(load_model(args.model, args.floating_base, args.invalid_inertia)))
        elif args.command == "estimate":
            from .estimation import estimate_report
            text = estimate_report(load_model(args.model, args.floating_base), args.sensors,
                                   extra=compiled_estimate_lines)
            print(text)
            return 1 if "ILL-POSED" in text.splitlines()[0] else 0
        elif args.command == "sparsity":
            from .sparse import sparsity_report
            text = sparsity_report(load_model(args.model, args.floating_base), args.problem, args.plot, args.ordering)
            print(text)
            return 1 if text.startswith("structurally singular") else 0
        elif args.command == "compile":
            from .codegen import compile_report
            print(compile_report(load_model(args.model, args.floating_base), progress=True,
                                 vectorize=not args.no_batch))
        elif args.command == "bench":
            from .codegen.bench import DEFAULT_MODELS, bench_report
            print(bench_report(args.models or DEFAULT_MODELS, batch=args.batch, cold=not args.cache,
                               progress=lambda m: print(f"  .. {m}", file=sys.stderr, flush=True)))
        else:
            print(demo(args.seed, args.plot or None))
    except (ModelError, FileNotFoundError, ValueError, KeyError, ImportError) as e:
        print(f"sparsedyn: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader went away (e.g. `sparsedyn info robot.urdf | head`): not an error of ours.
        sys.stderr.close()
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
