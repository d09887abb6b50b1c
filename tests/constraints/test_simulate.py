"""Forced constrained dynamics and simulation (:mod:`sparsedyn.constraints.forward`,
:mod:`sparsedyn.constraints.simulate`) against an oracle that shares none of their code.

The oracle is built from Pinocchio alone: the mass matrix (``crba``), the bias with external
forces (``rnea`` at zero acceleration with ``fext``), and the loop-closure terms from Pinocchio
frames placed at the constrained points (positions ``oMf``, ``LOCAL_WORLD_ALIGNED`` Jacobians,
classical accelerations at zero joint acceleration).  Forward dynamics is then the KKT system::

    [M  G^T] [ a ]   [ tau - b                              ]
    [G   0 ] [-l ] = [ -(Gdot v + 2 alpha G v + beta^2 g)   ]

solved by SciPy's least squares (the planar loops have redundant rows: ``a`` is still unique).
The simulation (no projection, so the Baumgarte terms are what keeps the loop closed) is
compared with SciPy's adaptive DOP853 on that ODE.  The mechanisms have revolute and prismatic
joints only, numbered as in Pinocchio, so ``dq/dt = v`` and no conversion is involved.
Pinocchio is a test dependency: these tests fail (never skip) without it.
"""

import numpy as np
import pinocchio as pin
import pytest
import scipy.linalg
from scipy.integrate import solve_ivp

from conftest import rel_err
from sparsedyn.constraints import PointCoincidence, constrained_forward_dynamics, example, simulate
from sparsedyn.interop import pinocchio as conv


class PinocchioLoop:
    """The KKT forward dynamics of a mechanism whose constraints are point coincidences, from Pinocchio."""

    def __init__(self, mech):
        model, cs = mech.model, mech.constraints
        assert model.nq == model.nv and all(j.type in ("revolute", "prismatic") for j in model.joints)
        assert np.array_equal(conv.v_to_pinocchio(model, np.arange(model.nv)), np.arange(model.nv))
        self.model, self.pm = model, conv.to_pinocchio(model)
        self.points = []                   # (frame id a, frame id b or None, world point b, rows)
        for k, c in enumerate(cs):
            assert isinstance(c, PointCoincidence)
            fa = self._frame(f"loop{k}_a", c.body_a, c.r_a)
            fb = None if c.body_b < 0 else self._frame(f"loop{k}_b", c.body_b, c.r_b)
            self.points.append((fa, fb, np.asarray(c.r_b, float), list(c.index)))
        self.pd = self.pm.createData()

    def _frame(self, name, body, r):
        joint = self.pm.getJointId(self.model.joint_names[body])
        return self.pm.addFrame(pin.Frame(name, joint, self.pm.getFrameId(self.model.joint_names[body]),
                                          pin.SE3(np.eye(3), np.asarray(r, float)), pin.FrameType.OP_FRAME))

    def terms(self, q, v, f_ext=None):
        """``(M, b, g, G, Gdot v)`` at ``(q, v)``: ``M a + b = tau + G^T lambda`` with the external forces in ``b``."""
        pm, pd, nv = self.pm, self.pd, self.model.nv
        M = pin.crba(pm, pd, q)
        M = np.triu(M) + np.triu(M, 1).T
        fext = None if f_ext is None else conv.fext_to_pinocchio(self.model, f_ext)
        b = pin.rnea(pm, pd, q, v, np.zeros(nv)) if fext is None else pin.rnea(pm, pd, q, v, np.zeros(nv), fext)
        pin.computeJointJacobians(pm, pd, q)
        pin.updateFramePlacements(pm, pd)
        lwa = pin.ReferenceFrame.LOCAL_WORLD_ALIGNED
        pos = {f: pd.oMf[f].translation.copy() for fa, fb, _, _ in self.points for f in (fa, fb) if f is not None}
        jac = {f: pin.getFrameJacobian(pm, pd, f, lwa)[:3] for f in pos}
        pin.forwardKinematics(pm, pd, q, v, np.zeros(nv))
        acc = {f: pin.getFrameClassicalAcceleration(pm, pd, f, lwa).linear.copy() for f in pos}
        g, G, gam = [], [], []
        for fa, fb, rb, rows in self.points:
            pb, Jb, ab = (rb, np.zeros((3, nv)), np.zeros(3)) if fb is None else (pos[fb], jac[fb], acc[fb])
            g.append((pos[fa] - pb)[rows])
            G.append((jac[fa] - Jb)[rows])
            gam.append((acc[fa] - ab)[rows])
        return M, b, np.concatenate(g), np.vstack(G), np.concatenate(gam)

    def forward(self, q, v, tau, f_ext=None, baumgarte=(0.0, 0.0)):
        """``a`` of the KKT system above (SciPy's least squares: exact for a consistent, singular system)."""
        M, b, g, G, gam = self.terms(q, v, f_ext)
        alpha, beta = baumgarte
        m, nv = len(g), len(v)
        K = np.block([[M, G.T], [G, np.zeros((m, m))]])
        rhs = np.concatenate([tau - b, -(gam + 2 * alpha * G @ v + beta * beta * g)])
        return scipy.linalg.lstsq(K, rhs, cond=1e-13)[0][:nv]


def _forces(mech, rng):
    nv, nb = mech.model.nv, mech.model.nbodies
    tau = rng.normal(scale=0.5, size=nv)
    f_ext = rng.normal(scale=0.3, size=(nb, 6))
    return tau, f_ext


def _off_the_loop(mech, rng):
    """A state near the loop but off it (``g != 0``, ``G v != 0``), so that Baumgarte's terms act."""
    q, v, _ = mech.random_state(rng)
    return q + rng.normal(scale=2e-3, size=q.shape), v + rng.normal(scale=0.2, size=v.shape)


@pytest.mark.parametrize("name", ["four_bar", "slider_crank", "five_bar"])
def test_forced_forward_dynamics_with_baumgarte_equals_a_pinocchio_kkt_solve(name):
    mech = example(name)
    oracle = PinocchioLoop(mech)
    rng = np.random.default_rng(3)
    for _ in range(4):
        q, v = _off_the_loop(mech, rng)
        tau, f_ext = _forces(mech, rng)
        ab = (4.0, 6.0)
        ours = constrained_forward_dynamics(mech.constraints, q, v, tau, f_ext=f_ext, baumgarte=ab).a
        want = oracle.forward(q, v, tau, f_ext, ab)
        M, b, g, G, gam = oracle.terms(q, v, f_ext)
        assert np.max(np.abs(g)) > 1e-4 and np.max(np.abs(G @ v)) > 1e-3       # off the loop: the terms act
        # Both are backward-stable solves of one system (null-space QR vs. SciPy's least squares on the
        # KKT matrix); on the constraint-consistent subspace the KKT matrix has condition number about
        # cond(M) cond(G)^2, so the two agree to that times a few eps times the dimension.
        s = np.linalg.svd(G, compute_uv=False)
        s = s[s > 1e-9 * s[0]]
        kappa = np.linalg.cond(M) * (s[0] / s[-1]) ** 2
        n = len(v) + len(g)
        assert rel_err(ours, want) < 64 * n * np.finfo(float).eps * kappa
        # each force changes the answer: none is ignored or mis-signed
        for kw in (dict(f_ext=None, baumgarte=ab), dict(f_ext=f_ext, baumgarte=None)):
            other = constrained_forward_dynamics(mech.constraints, q, v, tau, **kw).a
            assert rel_err(other, want) > 1e-6


def _ode(oracle, tau, f_ext, ab):
    nv = oracle.model.nv

    def rhs(t, x):
        q, v = x[:nv], x[nv:]
        return np.concatenate([v, oracle.forward(q, v, tau, f_ext, ab)])
    return rhs


@pytest.mark.parametrize("name", ["four_bar", "slider_crank"])
def test_forced_simulation_with_baumgarte_follows_an_independent_integration(name):
    """``simulate`` without projection (fixed-step DOP853, our dynamics) against SciPy's adaptive DOP853 on
    the Pinocchio KKT dynamics, under torques, external forces and Baumgarte's terms, from a state off the
    loop.  The reference's own error is estimated from a run at a 1000 times looser tolerance; ours
    (order 8 at 2 ms) is far smaller, so the two must agree to within that estimate."""
    mech = example(name)
    oracle = PinocchioLoop(mech)
    rng = np.random.default_rng(7)
    q0, v0 = _off_the_loop(mech, rng)
    tau, f_ext = _forces(mech, rng)
    ab, T, dt = (20.0, 20.0), 0.1, 2e-3
    tr = simulate(mech.constraints, q0, v0, T, dt, tau=tau, f_ext=f_ext, baumgarte=ab, project=False, every=5)
    nv = mech.model.nv

    def reference(rtol, tau=tau, f_ext=f_ext):
        sol = solve_ivp(_ode(oracle, tau, f_ext, ab), (0.0, T), np.concatenate([q0, v0]), method="DOP853",
                        t_eval=tr.t, rtol=rtol, atol=rtol)
        assert sol.success
        return sol.y.T[:, :nv], sol.y.T[:, nv:]

    q_ref, v_ref = reference(1e-12)
    q_loose, v_loose = reference(1e-9)
    err_ref = max(rel_err(q_loose, q_ref), rel_err(v_loose, v_ref))
    assert 0 < err_ref < 1e-6
    assert rel_err(tr.q, q_ref) < err_ref and rel_err(tr.v, v_ref) < err_ref
    # Baumgarte's terms make every residual row obey g'' + 2 alpha g' + beta^2 g = 0 exactly (that is the
    # acceleration constraint), critically damped for alpha = beta: g(t) = (g0 + (g0' + alpha g0) t) e^(-alpha t)
    # with g0' = G v0.  The residuals of the simulated states (Pinocchio's frames) follow that curve to
    # within the trajectory's error times the Jacobian's size.
    alpha = ab[0]
    _, _, g0, G0, _ = oracle.terms(q0, v0)
    gs = np.array([oracle.terms(q, v)[2] for q, v in zip(tr.q, tr.v)])
    t = tr.t[:, None]
    exact = (g0 + (G0 @ v0 + alpha * g0) * t) * np.exp(-alpha * t)
    Gmax = max(np.abs(oracle.terms(q, v)[3]).sum(-1).max() for q, v in zip(tr.q[::5], tr.v[::5]))
    bound = 10 * Gmax * err_ref * max(1.0, np.abs(tr.q).max())
    assert bound < 1e-3 * np.max(np.abs(gs))                              # a test with power: g moves far more
    assert np.max(np.abs(gs - exact)) < bound
    # the forces act: without them the motion is another one, so ours took them in
    assert rel_err(reference(1e-12, np.zeros(nv), None)[1], v_ref) > 1e3 * err_ref
