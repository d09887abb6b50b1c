"""The contact solver on a box tilted onto one edge, the opposite edge a few microns above the floor: a
speculative contact that lands while the other edge sticks (closing its gap turns the box, which slips the
two edges against each other by about ``gap^2 / (r dt)``, ``r`` their distance).  The box of the tests
(``tests/contact/test_friction.py``: 0.2 m, 2 kg, dt = 1 ms) on its four corners, 9 or 16 points of its bottom
face, at rest, sliding at 1 mm/s, turning, or falling; two steps from a cold start (the second warm-started from
the first).  Per gap: the steps that ran past ADMM's budget (a :class:`~sparsedyn.ContactStepWarning`), the
iterations in all and the most of one step, on the NumPy road (the native road runs the same stages).

    PYTHONPATH=src .venv/bin/python benchmarks/tilted_box.py
    PYTHONPATH=src .venv/bin/python benchmarks/tilted_box.py --gaps 1e-6 3e-5

Nothing here is a test: numbers are reported, never asserted.
"""

import argparse
import warnings

import numpy as np
from scipy.spatial.transform import Rotation

import sparsedyn as sd

H, MASS, DT = 0.1, 2.0, 1e-3
#: The box's velocities ``[omega; v]``: at rest, sliding along y, turning about y, the turn of a fall.
MOTIONS = ((0, 0, 0, 0, 0, 0), (0, 0, 0, 0, 1e-3, 0), (0, 0, 0, 3e-3, 0, 0), (0.02, 0, 0, 0, 0, 0))


def box():
    b = sd.ModelBuilder("box").add_body("box", None, sd.make_joint("free"), mass=MASS,
                                        rot_inertia=MASS * (2 * H) ** 2 / 6 * np.eye(3))
    return b.add_frame("box", "box").build()


def points(n, mu):
    """``n x n`` contacts on the box's bottom face (``n = 2``: its corners)."""
    grid = [(x, y) for x in np.linspace(-H, H, n) for y in np.linspace(-H, H, n)]
    return [sd.Contact("box", "3d", friction=mu, point=(x, y, -H), name=f"p{i}") for i, (x, y) in enumerate(grid)]


def tilted(gap):
    """The box turned about y so that its edge x = -h touches the floor and the edge x = +h is ``gap`` above it."""
    R = Rotation.from_rotvec([0.0, np.arcsin(gap / (2 * H)), 0.0])
    low = R.apply([(x, y, -H) for x in (-H, H) for y in (-H, H)])[:, 2].min()
    return np.concatenate([[0.0, 0.0, -low], R.as_quat()])


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gaps", nargs="+", type=float, default=[5e-7, 1e-6, 2e-6, 4e-6, 3e-5, 1e-4])
    a = p.parse_args()
    model, tau = box(), np.zeros(6)
    print(f"{'gap [m]':>9s} {'steps':>6s} {'warned':>7s} {'iterations':>11s} {'most':>6s}")
    for gap in a.gaps:
        warned, its = 0, []
        for n in (2, 3, 4):
            for mu in (0.4, 1.0):
                for motion in MOTIONS:
                    with sd.use_backend("numpy"), warnings.catch_warnings(record=True) as caught:
                        warnings.simplefilter("always", sd.ContactStepWarning)
                        s = sd.contact_step(model, tilted(gap), np.array(motion, float), tau, points(n, mu), DT)
                        s2 = sd.contact_step(model, s.q, s.v, tau, points(n, mu), DT, warm_start=s.impulses)
                    warned += len(caught)
                    its += [int(s.iterations), int(s2.iterations)]
        print(f"{gap:9.1e} {len(its):6d} {warned:7d} {sum(its):11d} {max(its):6d}")


if __name__ == "__main__":
    main()
