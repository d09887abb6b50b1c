"""The humanoid case study of Nori's paper on any two-footed model, and the CLI reports.

F. Nori, "Inverse, forward and other dynamic computations computationally optimized
with sparse matrix factorizations", 2017, section VI.

Cases (:func:`case_problems`), with contacts at the two sole frames:

1. ``"eq18"``: load cells under each foot (normal force, two in-plane moments), all
   joint accelerations known.  Square, structurally full rank, numerically ill-posed.
2. ``"eq23"``: the "slippery" variant, five wrench components per foot, the accelerations
   of the two joints next to each foot unknown (square, as in the paper's experiment).
   The paper's matrices are written [force; moment]; read with *its own* angular-first
   convention the unmeasured component ``H = e6`` is the normal force (``"eq23-fz"``),
   read as intended ("torques on the z axis") it is the moment about the sole normal
   (``"eq23-nz"``).  ``"eq23-fz-allqdd"``/``"eq23-nz-allqdd"``: all accelerations known
   (over-determined by 4).
3. ``"ankle-ft"``: 6-axis F/T sensors across both ankle joints (the joint of each
   sole's body), floating-base acceleration unknown (no IMU): square.
   ``"ankle-ft-imu"``: the same with the base acceleration known (over-determined by 6).
4. ``"redundant"``: ankle F/T, load cells and knee torque sensors, all noisy, base
   acceleration known: weighted least squares.
"""

from __future__ import annotations

import textwrap
import time
import warnings

import numpy as np

from ..algorithms.configuration import integrate
from .problem import EstimationProblem, ModelViolationWarning
from ..model.sensors import LOAD_CELLS, ContactLoad, ForceTorque, JointTorque

__all__ = ["FEET", "PAPER", "DEMO_CASES", "case_problems", "consistent_state", "sample_noise", "estimate_report",
           "estimation_demo", "estimation_demo_lines"]

#: Sole frames of the robots the case study knows (left, right).
FEET = {"humanoid": ("l_sole", "r_sole"), "talos": ("left_sole_link", "right_sole_link"),
        "iCub": ("l_sole", "r_sole")}

SLIPPERY_NZ = ("nx", "ny", "fx", "fy", "fz")     # moment about the sole normal unknown (the paper's intent)
SLIPPERY_FZ = ("nx", "ny", "nz", "fx", "fy")     # eq. 23 read angular-first: the normal force unknown


def _feet(model, feet):
    if feet is None:
        if model.name not in FEET:
            raise KeyError(f"case study: give the two sole frames of model {model.name!r} (feet=(left, right))")
        feet = FEET[model.name]
    return tuple(feet)


def case_problems(model, feet=None, std_force=2.0, std_moment=0.2, std_torque=0.5) -> dict:
    """``{case name: EstimationProblem}`` (see the module docstring)."""
    lf, rf = _feet(model, feet)
    fb = [model.frames[model.frame(f)].body for f in (lf, rf)]
    ankles = [model.joint_names[b] for b in fb]
    near = [model.joint_names[b] for b in fb] + [model.joint_names[model.parent[b]] for b in fb]
    base = [model.joint_names[i] for i in range(model.nbodies) if model.joints[i].type == "free"]
    knees = [j for j in model.joint_names if "knee" in j] or [model.joint_names[model.parent[model.parent[b]]]
                                                             for b in fb]
    contacts = [lf, rf]

    def cells(comp, tag=""):
        return [ContactLoad(f"{f}{tag}_cells", f, comp) for f in contacts]

    cov_w = np.array([std_moment] * 3 + [std_force] * 3) ** 2
    cases = {
        "eq18": EstimationProblem(model, cells(LOAD_CELLS), contacts, name="(1) load cells (eq. 18)"),
        "eq23-nz": EstimationProblem(model, cells(SLIPPERY_NZ), contacts, near,
                                     name="(2) slippery, normal moment unknown, ankle qdd unknown"),
        "eq23-fz": EstimationProblem(model, cells(SLIPPERY_FZ), contacts, near,
                                     name="(2') slippery as printed (angular-first: normal force unknown), "
                                          "ankle qdd unknown"),
        "eq23-nz-allqdd": EstimationProblem(model, cells(SLIPPERY_NZ), contacts,
                                            name="(2a) slippery, normal moment unknown, all qdd known"),
        "eq23-fz-allqdd": EstimationProblem(model, cells(SLIPPERY_FZ), contacts,
                                            name="(2b) slippery as printed, all qdd known"),
        "ankle-ft": EstimationProblem(model, [ForceTorque(f"{a}_ft", a) for a in ankles], contacts, base,
                                      name="(3) ankle F/T, base acceleration unknown"),
        "ankle-ft-imu": EstimationProblem(model, [ForceTorque(f"{a}_ft", a) for a in ankles], contacts,
                                          name="(3') ankle F/T, base acceleration known"),
        "redundant": EstimationProblem(
            model, [ForceTorque(f"{a}_ft", a, covariance=cov_w) for a in ankles]
            + [ContactLoad(f"{f}_cells", f, LOAD_CELLS, covariance=np.array([std_moment, std_moment, std_force]) ** 2)
               for f in contacts]
            + [JointTorque("knee_torques", knees, covariance=std_torque ** 2)], contacts,
            name="(4) redundant noisy sensors: ankle F/T + load cells + knee torques"),
    }
    return cases


def consistent_state(problem, rng, q=None, batch=(), scale=1.0):
    """A random state and contact wrenches consistent with an unactuated floating base.

    Returns ``(q, v, a, contact_wrenches)``: ``q`` (..., nq) (random unless given), ``v``
    and ``a`` (..., nv) normal with standard deviation ``scale``, and ``{contact name:
    wrench (..., 6) [n; f] at the contact frame, in its axes}``.  The wrenches of all
    contacts but the last are random around an even share of the weight; the last one
    makes the floating base's joint force vanish (computed by superposition).
    """
    model = problem.model
    n = int(np.prod(batch, dtype=int))
    if q is None:
        q = np.stack([model.random_configuration(rng) for _ in range(n)]).reshape(batch + (model.nq,))
    q = np.broadcast_to(q, batch + (model.nq,))
    v = scale * rng.normal(size=batch + (model.nv,))
    a = scale * rng.normal(size=batch + (model.nv,))
    names = [c.name for c in problem.contacts]
    weight = model.total_mass * 9.81 / max(1, len(names))
    w = {}
    for c in names[:-1]:
        w[c] = np.concatenate([rng.normal(size=batch + (3,)), 20 * rng.normal(size=batch + (3,))], -1)
        w[c][..., 5] += weight
    if not names or not problem.unactuated:
        return q, v, a, w
    last = names[-1]
    base = model.v_slice(problem.unactuated[0])
    zero = np.zeros(batch + (6,))
    with warnings.catch_warnings():                 # the superposition's pieces load the base on purpose
        warnings.simplefilter("ignore", ModelViolationWarning)
        tau0 = problem.measurements(q, v, a, {**w, last: zero})[1]["tau"][..., base]
        B = np.stack([problem.measurements(q, v, a, {**w, last: zero + e})[1]["tau"][..., base] - tau0
                      for e in np.eye(6)], -1)
    w[last] = np.linalg.solve(B, -tau0[..., None])[..., 0]
    return q, v, a, w


def sample_noise(problem, rng, shape=()):
    """Gaussian noise (..., ny) with each soft sensor's covariance (zero on exact sensors)."""
    out = np.zeros(shape + (problem.ny,))
    for e in problem.entries:
        if not e.exact:
            L = np.linalg.cholesky(e.cov)
            out[..., e.slot] = rng.normal(size=shape + (e.size,)) @ L.T
    return out


def _errors(e, truth):
    def rel(x, y):
        return float(np.max(np.abs(x - y)) / max(1.0, float(np.max(np.abs(y)))))
    return rel(e.tau, truth["tau"]), max(rel(e.contacts[k], truth["contacts"][k]) for k in e.contacts) \
        if e.contacts else 0.0


#: How the paper is cited in reports.
PAPER = ('F. Nori, "Inverse, forward and other dynamic computations computationally optimized with sparse '
         'matrix factorizations", 2017')

#: The cases the demo runs (a subset of :func:`case_problems`), with one line on what each shows.
DEMO_CASES = {
    "eq18": "Section VI's first sensor set: a load cell under each foot measures the normal force and the "
            "two moments in the sole plane; every joint acceleration is known.",
    "eq23-nz": "The 'slippery' set of eq. 23: five wrench components per foot (the moment about the sole "
               "normal is not measured); the accelerations of the two joints next to each foot are unknown.",
    "ankle-ft": "A six-axis force/torque sensor across each ankle joint; no IMU, so the floating base's "
                "acceleration is unknown.",
    "ankle-ft-imu": "The same ankle F/T sensors with the base acceleration known (from an IMU: see "
                    "sparsedyn.estimation.imu_base_state): six more equations than unknowns.",
    "redundant": "Ankle F/T, load cells and knee torque sensors, all noisy, base acceleration known: weighted "
                 "least squares; the error falls in proportion to the noise.",
}


def _wrap(text, indent="  ", width=100):
    return textwrap.wrap(text, width, initial_indent=indent, subsequent_indent=indent + "  ")


def _flop_lines(solver, indent="  "):
    """The estimator's cost per solve in a sentence (flops = multiplications + additions + divisions)."""
    f = solver.flops()
    if solver.square:
        text = (f"cost per solve: {f['total']:,} flops on the fixed sparse pattern, against {f['dense']:,} for "
                f"a dense LU of the {f['n']} x {f['n']} system ({f['dense'] / f['total']:,.0f}x fewer)")
    else:
        text = (f"cost per solve: {f['total']:,} flops (one sparse factorization, {f['k'] + 1} substitutions, "
                f"the {f['k']} x {f['k']} normal equations and one refinement step), against {f['dense']:,} "
                f"for a dense QR least squares of the {f['rows']} x {f['n']} system "
                f"({f['dense'] / f['total']:,.0f}x fewer)")
    return _wrap(text, indent)


def estimate_report(model, sensors_path, seed=0, flops=True, extra=None) -> str:
    """``sparsedyn estimate MODEL --sensors FILE``: verdict, unknowns, flops, one simulated sample.

    Lines are at most 100 characters.  ``extra(solver, q, v, y) -> [lines]``: more lines
    after the flop count, given the estimator and the simulated sample (the command line
    adds the compiled solver's time this way; this layer knows nothing of compilation).
    """
    from .files import problem_from_file
    prob = problem_from_file(model, sensors_path)
    v = prob.verdict()
    if not v.ok:
        return "\n".join(v.lines() + ["no estimate: the problem is ill-posed (no numbers are returned for it)"])
    solver = prob.analyze()
    lines = solver.report(flops=flops).splitlines()
    rng = np.random.default_rng(seed)
    q, vel, a, w = consistent_state(prob, rng)
    y, truth = prob.measurements(q, vel, a, w)
    if extra is not None:
        lines += list(extra(solver, q, vel, y))
    e = solver.solve(q, vel, y)
    et, ec = _errors(e, truth)
    lines += _wrap(f"simulated sample (classical Newton-Euler, noise-free): max relative error joint torques "
                   f"{et:.2e}, contact wrenches {ec:.2e}", "")
    return "\n".join(lines)


def _case_lines(name, prob, rng, q_stand, flops, posture="standing"):
    """Yields the lines of one case of the demo (the verdict first, then the numbers)."""
    v = prob.verdict(check_at=[q_stand])
    if not v.ok:
        yield from _wrap(f"finding: these sensors cannot determine the unknowns. {v.headline()}.")
        for d in v.directions:
            yield from _wrap(f"what no sensor sees: {d}.")
        for note in v.notes:
            yield from _wrap(note.replace("at given configuration 0", f"at the {posture} posture") + ".")
        yield from _wrap("sparsedyn refuses to return numbers for such a problem (compile() raises "
                         "IllPosedError with this explanation); a sensor that measures the direction above, or "
                         "a prior on it, makes it well posed.")
        return
    solver = prob.analyze()
    yield from _wrap(f"verdict: {v.headline()}")
    for note in v.notes:
        yield from _wrap(note.replace("at given configuration 0", f"at the {posture} posture"))
    yield from _wrap("measurement vector y: " + prob.layout_text())
    if flops:
        yield from _flop_lines(solver)
    q = integrate(prob.model, q_stand, 0.2 * rng.normal(size=prob.model.nv))
    q, vel, a, w = consistent_state(prob, rng, q=q)
    y, truth = prob.measurements(q, vel, a, w)
    if name != "redundant":
        e = solver.solve(q, vel, y)
        et, ec = _errors(e, truth)
        yield f"  near-standing sample, noise-free: relative error torques {et:.1e}, contact wrenches {ec:.1e}"
    else:
        for s in (1.0, 0.1, 0.01):
            noise = s * sample_noise(prob, rng, (20,))
            e = solver.solve(q, vel, y + noise)            # 20 noisy samples of one state in one batched call
            errs = [_errors(_index(e, k), truth) for k in range(20)]
            et, ec = np.sqrt(np.mean(np.square(errs), 0))
            yield f"  noise x{s:g} (20 samples): rms relative error torques {et:.1e}, contact wrenches {ec:.1e}"


class _index:
    """Sample ``k`` of a batched :class:`Estimate` (the fields :func:`_errors` reads)."""

    def __init__(self, e, k):
        self.tau = e.tau[k]
        self.contacts = {c: w[k] for c, w in e.contacts.items()}


def estimation_demo_lines(model=None, feet=None, seed=0, flops=True, cases=None):
    """The lines of :func:`estimation_demo`, yielded as they are computed (the CLI prints them at once)."""
    from ..model.builders import humanoid, humanoid_standing_configuration
    t0 = time.perf_counter()
    if model is None:
        model, q_stand = humanoid(), humanoid_standing_configuration()
    else:
        q_stand = model.neutral()
    rng = np.random.default_rng(seed)
    posture = "standing" if model.name == "humanoid" else "neutral"
    yield f"Joint torques and contact wrenches from sensors, on {model.name!r}"
    yield from _wrap(f"The case study of {PAPER}, section VI: the Newton-Euler equations and the sensors' "
                     f"equations form one sparse linear system.  Two feet on the ground, contact wrenches "
                     f"unknown; the sensor data are simulated by the classical Newton-Euler recursion.", "")
    problems = case_problems(model, feet)
    for k, name in enumerate(cases or DEMO_CASES):
        prob = problems[name]
        yield ""
        yield f"({k + 1}) {prob.name.split(') ', 1)[-1]}"
        if name in DEMO_CASES:
            yield from _wrap(DEMO_CASES[name])
        yield from _case_lines(name, prob, rng, q_stand, flops, posture)
    yield ""
    yield (f"({len(cases or DEMO_CASES)} cases in {time.perf_counter() - t0:.1f} s; more in "
           f"sparsedyn.estimation.case_problems)")


def estimation_demo(model=None, feet=None, seed=0, flops=True, cases=None) -> str:
    """Nori's humanoid case study end to end (verdicts, flops, estimates), as a report.

    ``model``: a two-footed model (default: the built-in humanoid at its standing
    posture); ``feet``: its two sole frames (default from :data:`FEET`); ``cases``: keys
    of :func:`case_problems` (default: the demo's five, :data:`DEMO_CASES`).  Lines are
    at most 100 characters.
    """
    return "\n".join(estimation_demo_lines(model, feet, seed, flops, cases))
