import contextlib
import os
import signal
from pathlib import Path

import numpy as np
import pytest

# The suite tests the NumPy functions (the reference) through plain calls, on hundreds of models: a
# native build for each would dominate its time.  The native default of plain calls is tested in
# tests/compile/test_native.py; SPARSEDYN_BACKEND=native runs the whole suite on it.
os.environ.setdefault("SPARSEDYN_BACKEND", "numpy")

import sparsedyn as sd  # noqa: E402 - after the backend is chosen


def dm_control_humanoid():
    """dm_control's ``humanoid.xml`` with its collision geometry (its sensors and sites, which the model does
    not represent, warned of and ignored)."""
    import warnings
    import dm_control
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return sd.load_mjcf(str(Path(dm_control.__file__).parent / "suite" / "humanoid.xml"), geometry=True)


def rel_err(x, y):
    """max |x - y| / max(1, max |y|): relative for large values, absolute near zero."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    assert x.shape == y.shape, (x.shape, y.shape)
    return float(np.max(np.abs(x - y), initial=0.0) / max(1.0, float(np.max(np.abs(y), initial=0.0))))


EPS = np.finfo(float).eps


def rounding_bound(n, kappa=1.0, c=16.0):
    """Largest difference (in :func:`rel_err`'s measure) between two float64 evaluations of one algorithm
    that differ only in rounding: operation order, fused multiply-add, SIMD reductions (the compiled
    kernels are built with ``-march=native``, so this differs between CPUs).

    Wilkinson's bound ``gamma_n = n eps`` for a chain of ``n`` dependent operations (``n`` ~ the number
    of dofs for a recursion over the tree), times the condition number ``kappa`` of the problem (1 for
    products of well-scaled factors such as RNEA or CRBA; ``cond(H)`` for a solve with the mass
    matrix), times a small constant ``c`` for the few operations per step.  Never a measured digit.
    """
    return c * n * EPS * kappa


def solve_bound(A, x, c=2.0):
    """Bound on the difference between two backward-stable solutions of ``A x = b`` (one per state of a
    batch: ``A`` (..., n, n), ``x`` (..., n)), relative as in :func:`rel_err`: each is within
    ``gamma_n cond(A, x)`` of the exact solution (Skeel's componentwise condition number
    ``|| |A^-1| |A| |x| || / ||x||``; Higham, Accuracy and Stability of Numerical Algorithms, 2002, 7.2),
    so two of them differ by at most ``c gamma_n cond(A, x)``."""
    A, x = np.asarray(A, float), np.asarray(x, float)
    n = A.shape[-1]
    Ai = np.linalg.inv(A)
    s = np.abs(Ai) @ (np.abs(A) @ np.abs(x)[..., None])
    skeel = np.max(s[..., 0], axis=-1) / np.maximum(1.0, np.max(np.abs(x), axis=-1))
    return c * n * EPS * skeel


@pytest.fixture(scope="session", autouse=True)
def build_cache(tmp_path_factory):
    """One private build cache for the whole test run (never the user's own cache): every test
    that compiles shares its libraries, so a model and kernel compiled by one module load in a
    moment in the next (tests that need a fresh cache set SPARSEDYN_CACHE_DIR themselves).  Under
    pytest-xdist the workers share it too (the run's base directory, above each worker's own): a
    kernel two workers' files need is built once, the second waiting on the build's lock.
    ``$SPARSEDYN_TEST_CACHE`` names another such directory (CI's: the docs' build reads it after)."""
    given = os.environ.get("SPARSEDYN_TEST_CACHE")
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent
    d = Path(given) if given else base / "sparsedyn-cache"
    d.mkdir(mode=0o700, parents=True, exist_ok=True)
    os.chmod(d, 0o700)
    old = os.environ.get("SPARSEDYN_CACHE_DIR")
    os.environ["SPARSEDYN_CACHE_DIR"] = str(d)
    yield d
    if old is None:
        os.environ.pop("SPARSEDYN_CACHE_DIR", None)
    else:
        os.environ["SPARSEDYN_CACHE_DIR"] = old


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


def constant_subspace_types():
    """The joint types whose motion subspace does not depend on q (no composite or universal joint):
    the seeded trees of tests written before the joints with an ``S(q)``."""
    from sparsedyn.model.joint_types import Composite, Universal
    return tuple(t for t, cls in sd.JOINT_TYPES.items()
                 if not issubclass(cls, (Composite, Universal)) and sd.make_joint(t).constant_subspace)


def random_trees(joint_types="all"):
    """Seeded random trees covering chains and branched trees, every joint type (or those of
    ``joint_types``), fixed and floating."""
    from sparsedyn.model.builders import random_tree
    return [
        random_tree(8, branching=1.0, joint_types=joint_types, seed=1),
        random_tree(12, branching=2.0, skew=0.4, taper=0.9, joint_types=joint_types, seed=2),
        random_tree(10, branching=1.5, joint_types=joint_types, seed=3, floating_base=True),
        random_tree(9, branching=3.0, joint_types=("revolute", "prismatic"), seed=4, floating_base=True),
    ]


def quaternion_blocks(model):
    """The index arrays (4,) of every unit quaternion in ``model``'s q (free, spherical, composite parts)."""
    return [np.arange(4) + model.q_slice(i).start + o for i, j in enumerate(model.joints) for o in j.quaternions()]


@pytest.fixture(params=range(4), ids=["chain", "binary", "floating", "floating-bf3"], scope="module")
def tree(request):
    return random_trees()[request.param]


def random_state(model, rng, batch=()):
    q = np.stack([model.random_configuration(rng) for _ in range(int(np.prod(batch, dtype=int)))])
    q = q.reshape(batch + (model.nq,))
    v = rng.normal(size=batch + (model.nv,))
    a = rng.normal(size=batch + (model.nv,))
    return q, v, a


def pendulum(m=2.0, l=0.7, Iy=0.05):
    """A body of mass m, CoM at distance l below a revolute joint about y, inertia Iy about its CoM.

    Returns ``(model, gravity_moment)``: ``gravity_moment(q)`` is the moment of gravity about +y,
    derived by hand (CoM at R_y(q) (0, 0, -l) = (-l sin q, 0, -l cos q)).
    """
    import sparsedyn as sd
    b = sd.ModelBuilder("pendulum")
    b.add_body("link", None, sd.make_joint("revolute", (0, 1, 0)), mass=m, com=[0, 0, -l],
               rot_inertia=np.diag([Iy, Iy, Iy]))
    return b.build(), lambda q: np.cross([-l * np.sin(q), 0, -l * np.cos(q)], [0, 0, -9.81 * m])[1]


def near_singular_state(st, rng, target=1e-13):
    """A configuration where a static pivot of ``st`` is ``target`` times its typical size, found by
    bisection along the path between two random configurations (or None)."""
    model = st.model
    for _ in range(20):
        q0, q1 = model.random_configuration(rng), model.random_configuration(rng)
        hits = [h for h in st.hunt_vanishing_pivots(q0, q1) if h["relative"] < 1e-12]
        if hits:
            h = hits[0]
            dq = sd.difference(model, q0, q1)
            # step off the zero until the pivot is about `target` of its typical size
            k, t0, typical = h["pivot"], h["t"], h["value"] / max(h["relative"], 1e-300)
            for dt in np.geomspace(1e-16, 1e-6, 200):
                q = sd.integrate(model, q0, (t0 + dt) * dq)
                if abs(st.pivots(q)[k]) > target * typical:
                    return q, h
    return None


@contextlib.contextmanager
def time_limit(seconds, what):
    """A hang is a failure: ``TimeoutError`` naming ``what`` after ``seconds`` (SIGALRM; fuzzing cases)."""
    def handler(signum, frame):
        raise TimeoutError(f"took more than {seconds} s: {what}")
    old = signal.signal(signal.SIGALRM, handler)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)
