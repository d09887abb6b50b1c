"""URDF loading: sparsedyn.load_urdf next to Pinocchio's buildModelFromUrdf, side by side in one run.

    .venv/bin/python benchmarks/bench_urdf_load.py                    # chains of 1,000 .. 20,000 links
    .venv/bin/python benchmarks/bench_urdf_load.py --links 500 5000

Each model is a serial chain of 1 kg, 0.1 m links on revolute joints, written to a temporary file.
Reports the best of ``--repeat`` wall times, milliseconds per link (constant per link: the loader
is linear) and the ratio to Pinocchio.  Pinocchio runs in a child process: its recursive URDF
parser overflows the stack on chains of a few thousand links (reported as "crashed").
"""

import argparse
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import sparsedyn as sd

LINK = ('<link name="l{i}"><inertial><origin xyz="0.05 0 0"/><mass value="1"/>'
        '<inertia ixx="0.001" iyy="0.001" izz="0.001" ixy="0" ixz="0" iyz="0"/></inertial></link>')
JOINT = ('<joint name="j{i}" type="revolute"><parent link="{p}"/><child link="l{i}"/><origin xyz="{x} 0 0"/>'
         '<axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')


def chain_urdf(n):
    parts = ['<robot name="chain">', '<link name="base"/>']
    for i in range(n):
        parts += [LINK.format(i=i), JOINT.format(i=i, p="base" if i == 0 else f"l{i - 1}", x=0 if i == 0 else 0.1)]
    return "\n".join(parts + ["</robot>"])


def best_of(f, repeat):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        f()
        best = min(best, time.perf_counter() - t)
    return best


PIN = """
import sys, time, pinocchio as pin
best = float("inf")
for _ in range(int(sys.argv[2])):
    t = time.perf_counter(); pin.buildModelFromUrdf(sys.argv[1]); best = min(best, time.perf_counter() - t)
print(best)
"""


def pinocchio_time(path, repeat):
    r = subprocess.run([sys.executable, "-c", PIN, str(path), str(repeat)], capture_output=True, text=True)
    return float(r.stdout) if r.returncode == 0 else None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--links", nargs="+", type=int, default=[1000, 5000, 20000])
    p.add_argument("--repeat", type=int, default=3)
    a = p.parse_args(argv)
    print(f"{'links':>7} {'sparsedyn s':>12} {'ms/link':>8} {'pinocchio s':>12} {'ratio':>6}")
    with tempfile.TemporaryDirectory() as d:
        for n in a.links:
            path = Path(d) / f"chain{n}.urdf"
            path.write_text(chain_urdf(n))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                ours = best_of(lambda: sd.load_urdf(path, max_bytes=1 << 30), a.repeat)
            theirs = pinocchio_time(path, a.repeat)
            pin_s, ratio = ("crashed", "-") if theirs is None else (f"{theirs:.3f}", f"{ours / theirs:.1f}")
            print(f"{n:>7} {ours:>12.3f} {1e3 * ours / n:>8.3f} {pin_s:>12} {ratio:>6}")


if __name__ == "__main__":
    main()
