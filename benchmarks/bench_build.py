"""Cold build times of compiled kernels, split into trace / emit / C compile.

    nice -n 10 .venv/bin/python benchmarks/bench_build.py                      # the default table
    nice -n 10 .venv/bin/python benchmarks/bench_build.py --models chain100 --kernels rnea aba --timeout 120
    nice -n 10 .venv/bin/python benchmarks/bench_build.py --models g1 --compilers system pip \
        --kernels rnea minv rnea_derivatives aba_derivatives         # zig cc beside cc, compilers hidden

Each (model, kernel) cell runs in its own process with a fresh build cache
(``SPARSEDYN_CACHE_DIR`` a new temporary directory) and a wall-clock limit
(``--timeout``, seconds; a cell that does not finish is reported as ``>T``):

The library builds as the library's own builds do (:func:`sparsedyn.codegen.build.build_library`
with the units as an iterator): each translation unit compiles while Python writes the next.

* ``trace``: tracing the kernel into the IR (:func:`sparsedyn.codegen.trace.trace`);
* ``emit``: Python writing the C translation units (single-state variant), while the first ones
  compile;
* ``cc``: the C compiler after the last unit was written (the rest of the translation units, in
  parallel on the machine's cores) and the link;
* ``build``: the build's own wall-clock seconds, from the trace's start to the library loaded
  (``trace`` + ``emit`` + ``cc``): the figure of the build-time goals, on an idle machine;
* ``cpu py``, ``cpu cc``: CPU seconds of this process (the trace and emission, and starting the
  compilers) and of the C compiler processes, from the trace's start to the library loaded: on a
  machine that other work shares, wall-clock times grow, CPU times hardly do;
* ``idle``: ``cpu py + cpu cc / cores``, the wall-clock seconds of the trace, emission and
  compilation on this machine idle if they ran one after the other (without the process's start
  and imports), as builds did before the emission overlapped the compilers;
* ``ovl``: the same for the overlapped build: this process's CPU seconds until the first unit is
  written (the trace and the analysis of the program, on one core), plus the rest of its CPU
  seconds and the compilers' shared by the cores: the figure to read when the machine is loaded,
  about ``build`` on this machine idle (a little under it: the last units' compilers may not
  share the cores evenly);
* ``wall``: the cell's wall-clock seconds, the process's start and imports included;
* ``mode``: the code shape chosen for the program (``unrolled`` or ``loops``: see
  ``sparsedyn.codegen.cemit``), ``nodes``: the program's IR nodes, ``units``: translation units;
* ``MB py``, ``MB cc``: peak resident memory (MiB) of the cell's process (the trace, the emission and
  the run) and of the largest compiler process it ran;
* ``run us``: microseconds of one state through the built library's loop entry (``sd_K_loop``, 200
  states, one thread: no Python in the timing; best of 20 rounds), or with ``--variant batch`` of one
  state of the vectorised entry (``sd_K_batch``, 256 states, one thread);
* ``compiler``: ``system`` (the first of ``cc``, ``gcc``, ``clang`` on ``PATH``) or ``pip``
  (``zig cc`` of the ``ziglang`` package), run as on a machine without a C compiler: the cell's
  ``PATH`` an empty directory and ``CC`` unset, as the suite's test of the pip compiler runs it.
  zig's once-per-machine setup (the C library's stubs, in the fresh cache's ``zig-<version>``) is
  part of the probe, before the timed build, and reported apart as ``setup``: the compiler's
  probe, in seconds of wall clock.

Models: ``chainN`` (:func:`sparsedyn.serial_chain`, N revolute links), ``treeN`` (a random
branched tree of N bodies), ``humanoid`` (the built-in one), ``g1`` (Unitree G1, 35 dof),
``talos_reduced`` (38 dof) and ``talos_full`` (50 dof) from example-robot-data, floating base.  Numbers are reported, never
asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
import warnings

KERNELS = ("rnea", "aba", "crba", "minv", "rnea_derivatives", "aba_derivatives", "forward_kinematics",
           "frame_jacobian")
MODELS = ("chain100", "talos_full", "chain400")

_ERD = {"talos_reduced": "talos_data/robots/talos_reduced.urdf", "talos_full": "talos_data/robots/talos_full_v2.urdf",
        "g1": "g1_description/urdf/g1_29dof_rev_1_0.urdf"}


def load(name):
    import sparsedyn as sd
    if name.startswith("chain") and name[5:].isdigit():
        return sd.serial_chain(int(name[5:]), name=name)
    if name.startswith("tree") and name[4:].isdigit():
        return sd.random_tree(int(name[4:]), branching=2.0, joint_types="all", seed=5, name=name)
    if name == "humanoid":
        return sd.humanoid()
    from sparsedyn.io.resolve import example_robot_data_dir
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sd.load_urdf(example_robot_data_dir() / _ERD[name], floating_base=True)


def kernel_of(model, name):
    from sparsedyn.codegen.trace import variant
    if name == "frame_jacobian":             # the frame of the last body: the longest path
        return variant(name, {"frame": model.frames[model.nbodies - 1].name})
    return variant(name)


def cell(model_name, kernel_name, variant="single"):
    """Times of one cold build, in this process (a fresh cache directory)."""
    import uuid
    from sparsedyn.codegen import build, cemit
    from sparsedyn.codegen.trace import trace
    model = load(model_name)
    spec = kernel_of(model, kernel_name)
    t_probe = time.perf_counter()
    compiler = build.find_compiler()
    setup = time.perf_counter() - t_probe
    salt = f"/* {uuid.uuid4()} */\n"            # a source no compiler cache has seen

    def cpu():              # CPU seconds of this process and of the compiler processes it ran
        me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
        return me.ru_utime + me.ru_stime, kids.ru_utime + kids.ru_stime
    c0, t0 = cpu(), time.perf_counter()
    prog = trace(model, spec)
    t1 = time.perf_counter()
    emit, units, first = [0.0], [0], []

    def sources():          # as the library builds them: each unit compiles while the next is written
        it = cemit.emit_units(prog, spec.name, variant)
        while True:
            ts = time.perf_counter()
            u = next(it, None)
            emit[0] += time.perf_counter() - ts
            if u is None:
                break
            units[0] += 1
            if units[0] == 1:
                first.append(cpu()[0])      # this process's CPU seconds before any compiler ran
            yield salt + cemit.emit_unit([u])
        emit.append(time.perf_counter())
        yield salt + cemit.emit_unit([], key="0" * 40)
    with tempfile.TemporaryDirectory() as d:
        os.chmod(d, 0o700)
        lib, _ = build.build_library("0" * 40, sources(), compiler, directory=build.Path(d))
        c3, t3 = cpu(), time.perf_counter()
        run = run_time(lib, model, spec, variant)
    rss = [resource.getrusage(w).ru_maxrss / 1024 for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return {"trace": t1 - t0, "emit": emit[0], "cc": t3 - emit[1], "build": t3 - t0, "nodes": len(prog.nodes),
            "units": units[0], "mode": cemit.code_shape(prog, variant), "cpu_py": c3[0] - c0[0],
            "cpu_cc": c3[1] - c0[1], "cpu_first": first[0] - c0[0], "setup": setup, "run": run,
            "compiler": build.describe(compiler), "mem_py": rss[0], "mem_cc": rss[1]}


def run_time(lib, model, spec, variant):
    """Seconds of one state through the library's loop entry (``single``) or its vectorised batch
    entry (``batch``), one thread, best of 20 rounds."""
    import ctypes

    import numpy as np
    rng = np.random.default_rng(0)
    n = 200 if variant == "single" else 256
    shapes = spec.shapes(model)
    xs = []
    for name in spec.inputs:
        shape = tuple(shapes[name])
        one = (lambda: model.random_configuration(rng)) if shape == (model.nq,) and name.startswith("q") \
            else (lambda: rng.normal(size=shape))
        xs.append(np.ascontiguousarray(np.stack([one() for _ in range(n)])))
    ys = [np.zeros((n,) + tuple(shapes[name])) for name in spec.outputs]
    ptrs = [ctypes.c_void_p(a.ctypes.data) for a in xs + ys]
    if variant == "single":
        f = getattr(lib, f"sd_{spec.name}_loop")
        call = lambda: f(ctypes.c_long(n), *ptrs, ctypes.c_int(1))                 # noqa: E731
    else:
        f = getattr(lib, f"sd_{spec.name}_batch")
        call = lambda: f(ctypes.c_long(n), *ptrs, ctypes.c_int(1), ctypes.c_int(0))  # noqa: E731
    call()
    best = float("inf")
    for _ in range(20):
        t0 = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - t0)
    return best / n


def compiler_env(which):
    """The environment of a cell built by the ``system`` or the ``pip`` compiler."""
    env = dict(os.environ)
    if which == "pip":
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))
        from sparsedyn.codegen import build
        if build.pip_compiler() is None:
            raise SystemExit("the pip compiler is not installed (pip install ziglang)")
        for var in ("CC", "SPARSEDYN_CC", "SPARSEDYN_CFLAGS", "ZIG_GLOBAL_CACHE_DIR", "ZIG_LOCAL_CACHE_DIR"):
            env.pop(var, None)
        empty = tempfile.mkdtemp(prefix="sparsedyn-no-compiler-")      # a PATH without cc, gcc, clang
        env["PATH"] = empty
    return env


def run_cell(model_name, kernel_name, timeout, which="system", variant="single"):
    with tempfile.TemporaryDirectory() as cache:
        os.chmod(cache, 0o700)
        env = dict(compiler_env(which), SPARSEDYN_CACHE_DIR=cache)
        t0 = time.perf_counter()
        try:
            r = subprocess.run([sys.executable, __file__, "--cell", model_name, kernel_name, variant], env=env,
                               capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return {"timeout": timeout}
        wall = time.perf_counter() - t0
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else f"exit {r.returncode}"}
    out = json.loads(r.stdout.strip().splitlines()[-1])
    out["wall"] = wall
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS))
    ap.add_argument("--kernels", nargs="+", default=list(KERNELS))
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per cell")
    ap.add_argument("--compilers", nargs="+", choices=("system", "pip"), default=["system"])
    ap.add_argument("--variant", choices=("single", "batch"), default="single")
    ap.add_argument("--cell", nargs=3, help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.cell:
        print(json.dumps(cell(*a.cell)))
        return
    print(f"cold builds ({a.variant} variant, fresh cache, one kernel per process), {os.cpu_count()} CPUs, "
          f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}; seconds")
    print(f"{'model':<14}{'kernel':<20}{'cc':<7}{'mode':<9}{'nodes':>9}{'units':>6}{'trace':>7}{'emit':>7}{'cc':>8}"
          f"{'build':>7}{'wall':>8}{'cpu py':>8}{'cpu cc':>8}{'idle':>7}{'ovl':>7}{'setup':>7}{'run us':>9}{'MB py':>7}"
          f"{'MB cc':>7}")
    used, rows, cores = {}, {}, os.cpu_count() or 1
    for m in a.models:
        for k in a.kernels:
            for c in a.compilers:
                r = run_cell(m, k, a.timeout, c, a.variant)
                head = f"{m:<14}{k:<20}{c:<7}"
                if "timeout" in r:
                    print(f"{head}{'':<9}{'':>9}{'':>6}{'':>7}{'':>7}{'':>8}{'':>7}{'>' + str(int(r['timeout'])):>8}",
                          flush=True)
                elif "error" in r:
                    print(f"{head}error: {r['error']}", flush=True)
                else:
                    used[c], rows[(m, k, c)] = r["compiler"], r
                    print(f"{head}{r['mode']:<9}{r['nodes']:>9}{r['units']:>6}{r['trace']:>7.2f}{r['emit']:>7.2f}"
                          f"{r['cc']:>8.2f}{r['build']:>7.2f}{r['wall']:>8.2f}{r['cpu_py']:>8.2f}{r['cpu_cc']:>8.2f}"
                          f"{r['cpu_py'] + r['cpu_cc'] / cores:>7.2f}"
                          f"{r['cpu_first'] + (r['cpu_py'] - r['cpu_first'] + r['cpu_cc']) / cores:>7.2f}{r['setup']:>7.2f}"
                          f"{r['run'] * 1e6:>9.2f}{r['mem_py']:>7.0f}{r['mem_cc']:>7.0f}", flush=True)
    for c, desc in used.items():
        print(f"{c}: {desc}")
    if {"system", "pip"} <= set(a.compilers):
        print("pip / system:  cc wall, cpu cc, run")
        for m in a.models:
            for k in a.kernels:
                s, p = rows.get((m, k, "system")), rows.get((m, k, "pip"))
                if s and p:
                    print(f"{m:<14}{k:<20}{p['cc'] / s['cc']:>6.2f}{p['cpu_cc'] / s['cpu_cc']:>8.2f}"
                          f"{p['run'] / s['run']:>6.2f}")
    print(f"load average at the end {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
