"""Oracle: CRBA, bias forces, ABA, CRBA+LTDL forward dynamics and Minv against Pinocchio
on the URDFs shipped by example-robot-data, fixed and floating base.

Pinocchio is a test dependency: this module imports it unconditionally, so a missing
Pinocchio is a failure, never a skip.  Conventions are converted with
``sparsedyn.interop.pinocchio`` (free-joint velocity ``[v; omega]`` vs our
``[omega; v]``, continuous joints ``[cos, sin]`` vs an angle); matrices are permuted on
both axes.  Pinocchio fills only the upper triangle of ``crba`` and ``computeMinverse``.
"""


import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn.interop import pinocchio as ip
from conftest import rel_err
import erd

TOL = 1e-9

# romeo.urdf (the full model) has massless finger links on revolute joints: H is singular there,
# so the forward-dynamics oracle uses romeo_small and the full file has a test of its own.
ROBOTS = {**{k: v for k, v in erd.ROBOTS.items() if k != "romeo"},
          "romeo_small": "romeo_description/urdf/romeo_small.urdf"}
ROMEO = erd.ROBOTS["romeo"]


def load_pair(rel, floating_base):
    model, pm = erd.load_pair(rel, floating_base)
    assert tuple(pm.names)[1:] == model.joint_names
    assert pm.nv == model.nv
    return model, pm, pm.createData()


def from_pin_matrix(model, M):
    """A Pinocchio (nv, nv) matrix in our dof order (rows and columns)."""
    return ip.tau_from_pinocchio(model, ip.v_from_pinocchio(model, M).T).T


def upper_to_symmetric(M):
    return np.triu(M) + np.triu(M, 1).T


def states(model, n=3, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(n):
        yield (model.random_configuration(rng), rng.normal(size=model.nv), 10 * rng.normal(size=model.nv),
               rng.normal(size=(model.nbodies, 6)))


CASES = [(name, fb) for name in ROBOTS for fb in (False, True)]


@pytest.fixture(scope="module", params=CASES, ids=[f"{n}-{'floating' if fb else 'fixed'}" for n, fb in CASES])
def robot(request):
    name, fb = request.param
    return load_pair(ROBOTS[name], fb)


def test_crba(robot):
    model, pm, pd = robot
    for q, _, _, _ in states(model):
        H_pin = from_pin_matrix(model, upper_to_symmetric(pin.crba(pm, pd, ip.q_to_pinocchio(model, q))))
        assert rel_err(sd.crba(model, q), H_pin) < TOL


def test_bias(robot):
    model, pm, pd = robot
    for q, v, _, f in states(model):
        qp, vp = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v)
        C_pin = ip.tau_from_pinocchio(model, pin.nonLinearEffects(pm, pd, qp, vp))
        assert rel_err(sd.nonlinear_effects(model, q, v), C_pin) < TOL
        Cf_pin = ip.tau_from_pinocchio(model, pin.rnea(pm, pd, qp, vp, np.zeros(model.nv), ip.fext_to_pinocchio(model, f)))
        assert rel_err(sd.nonlinear_effects(model, q, v, f), Cf_pin) < TOL


def test_aba_and_fd_crb(robot):
    model, pm, pd = robot
    for q, v, tau, f in states(model):
        qp, vp, tp = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.tau_to_pinocchio(model, tau)
        a_pin = ip.v_from_pinocchio(model, pin.aba(pm, pd, qp, vp, tp))
        assert rel_err(sd.aba(model, q, v, tau), a_pin) < TOL
        assert rel_err(sd.fd_crb(model, q, v, tau), a_pin) < TOL
        af_pin = ip.v_from_pinocchio(model, pin.aba(pm, pd, qp, vp, tp, ip.fext_to_pinocchio(model, f)))
        assert rel_err(sd.aba(model, q, v, tau, f), af_pin) < TOL
        assert rel_err(sd.fd_crb(model, q, v, tau, f), af_pin) < TOL


def test_minv(robot):
    model, pm, pd = robot
    for q, _, _, _ in states(model):
        Minv_pin = from_pin_matrix(model, upper_to_symmetric(pin.computeMinverse(pm, pd, ip.q_to_pinocchio(model, q))))
        assert rel_err(sd.minv(model, q), Minv_pin) < TOL


@pytest.mark.parametrize("floating_base", [False, True], ids=["fixed", "floating"])
def test_romeo_with_massless_fingers(floating_base):
    """Full romeo.urdf: H and C agree; forward dynamics and Minv are undefined (massless finger
    links on revolute joints make H singular).  Pinocchio returns non-finite numbers; we raise
    an error naming the joint."""
    model, pm, pd = load_pair(ROMEO, floating_base)
    (q, v, tau, _), = states(model, 1)
    qp, vp, tp = ip.q_to_pinocchio(model, q), ip.v_to_pinocchio(model, v), ip.tau_to_pinocchio(model, tau)
    H = sd.crba(model, q)
    assert rel_err(H, from_pin_matrix(model, upper_to_symmetric(pin.crba(pm, pd, qp)))) < TOL
    assert rel_err(sd.nonlinear_effects(model, q, v), ip.tau_from_pinocchio(model, pin.nonLinearEffects(pm, pd, qp, vp))) < TOL
    massless = [model.joint_names[i] for i in range(model.nbodies)
                if not model.inertia[i:model.subtree_end[i]].any()]
    assert "RThumb3" in massless and "LFinger13" in massless
    for fn in (lambda: sd.aba(model, q, v, tau), lambda: sd.fd_crb(model, q, v, tau), lambda: sd.minv(model, q)):
        with pytest.raises(sd.SingularInertiaError, match="joint '([RL]Thumb|[RL]Finger)") as e:
            fn()
        assert str(e.value).split("'")[1] in massless
    with np.errstate(all="ignore"):
        assert not np.all(np.isfinite(pin.aba(pm, pd, qp, vp, tp)))
        assert not np.all(np.isfinite(pin.computeMinverse(pm, pd, qp)))
