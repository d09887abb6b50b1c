"""interpolate and normalize against Pinocchio's (robots of example-robot-data with an SRDF, random
trees of every joint type), and their identities."""

import warnings

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn.interop import pinocchio as ip
from conftest import random_trees, rel_err, rounding_bound
import erd

TOL = 1e-9


def models():
    out = []
    for name in ("talos_reduced", "solo12", "anymal_c", "ur5", "panda"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            out.append((name, erd.load_pair(name, True)[0]))
    return out + [(f"tree{k}", m) for k, m in enumerate(random_trees())]


MODELS = models()


def near(model, q0, rng):
    """A configuration whose continuous angles differ from q0's by less than pi (Pinocchio takes the
    shorter arc of the circle, we move along the real line: the two agree there)."""
    q1 = model.random_configuration(rng)
    for i, j in enumerate(model.joints):
        if j.type == "continuous":
            s = model.q_slice(i)
            q1[s] = q0[s] + rng.uniform(-3.0, 3.0)
    return q1


def same_configuration(model, qa, qb):
    """Equal up to the sign of each quaternion (q and -q are one rotation), in Pinocchio's layout."""
    qa, qb = ip.q_to_pinocchio(model, qa), np.array(qb, float)
    joints, idx = sd._checks.quaternion_blocks(model)
    for k in range(len(joints)):
        pin_idx = idx[k] + sum(1 for j in model.joints[:joints[k]] if j.type in ("continuous", "planar"))
        if qa[pin_idx] @ qb[pin_idx] < 0:
            qb[pin_idx] = -qb[pin_idx]
    return rel_err(qa, qb) < TOL


@pytest.mark.parametrize("name, model", MODELS, ids=[n for n, _ in MODELS])
def test_interpolate_matches_pinocchio(name, model):
    pm = ip.to_pinocchio(model)
    rng = np.random.default_rng(0)
    for t in (0.0, 0.3, 0.75, 1.0, 1.6):
        q0 = model.random_configuration(rng)
        q1 = near(model, q0, rng)
        q = sd.interpolate(model, q0, q1, t)
        ref = pin.interpolate(pm, ip.q_to_pinocchio(model, q0), ip.q_to_pinocchio(model, q1), t)
        assert same_configuration(model, q, ref), t
    # batches: one t per state, broadcast against one pair
    ts = np.linspace(0, 1, 5)
    qs = sd.interpolate(model, q0, q1, ts)
    assert qs.shape == (5, model.nq)
    for k, t in enumerate(ts):
        assert rel_err(qs[k], sd.interpolate(model, q0, q1, t)) <= rounding_bound(model.nq)


def test_interpolate_endpoints_and_constant_velocity():
    model = random_trees()[2]
    rng = np.random.default_rng(1)
    q0 = model.random_configuration(rng)
    q1 = near(model, q0, rng)
    assert rel_err(sd.interpolate(model, q0, q1, 0.0), q0) <= rounding_bound(model.nq)
    d = sd.difference(model, q0, q1)
    assert rel_err(sd.difference(model, q0, sd.interpolate(model, q0, q1, 1.0)), d) < 1e-12 * max(1, np.abs(d).max())
    # equal steps along the path: the velocity from q(t) to q(t + h) is h * d for every t
    for t in (0.1, 0.5, 0.8):
        step = sd.difference(model, sd.interpolate(model, q0, q1, t), sd.interpolate(model, q0, q1, t + 0.1))
        assert rel_err(step, 0.1 * d) < 1e-12


@pytest.mark.parametrize("name, model", MODELS[:2] + MODELS[-2:], ids=[n for n, _ in MODELS[:2] + MODELS[-2:]])
def test_normalize_matches_pinocchio(name, model):
    pm = ip.to_pinocchio(model)
    rng = np.random.default_rng(2)
    q = model.random_configuration(rng)
    joints, idx = sd._checks.quaternion_blocks(model)
    q[idx] *= rng.uniform(0.5, 2.0, size=(len(joints), 1))
    qp = ip.q_to_pinocchio(model, q)
    qp = pin.normalize(pm, qp)
    out = sd.normalize(model, q)
    assert rel_err(ip.q_to_pinocchio(model, out), qp) <= rounding_bound(8)
    if joints:
        with pytest.raises(ValueError, match="sparsedyn.normalize"):
            sd.rnea(model, q, np.zeros(model.nv), np.zeros(model.nv))
    sd.rnea(model, out, np.zeros(model.nv), np.zeros(model.nv))
    # batched: each row is normalized on its own (a second, differently scaled row), the same bits as alone
    q2 = model.random_configuration(rng)
    q2[idx] *= rng.uniform(0.5, 2.0, size=(len(joints), 1))
    both = sd.normalize(model, np.stack([q, q2]))
    assert both.shape == (2, model.nq) and np.array_equal(both[0], out)
    assert np.array_equal(both[1], sd.normalize(model, q2))
    assert rel_err(ip.q_to_pinocchio(model, both[1]), pin.normalize(pm, ip.q_to_pinocchio(model, q2))) \
        <= rounding_bound(8)


def test_bad_input():
    model = sd.humanoid()
    q = model.neutral()
    with pytest.raises(ValueError, match="t: contains NaN"):
        sd.interpolate(model, q, q, np.nan)
    with pytest.raises(ValueError, match="q1: expected shape"):
        sd.interpolate(model, q, q[:-1], 0.5)
    q0 = q.copy()
    q0[3:7] = 0.0
    with pytest.raises(ValueError, match="joint 'root_joint' is zero"):
        sd.normalize(model, q0)
    with pytest.raises(ValueError, match="q0: the quaternion of joint 'root_joint'.*sparsedyn.normalize"):
        sd.interpolate(model, q0, q, 0.5)


def test_normalize_takes_the_compiled_kernels_fast_path(monkeypatch):
    """On the native road a configuration off the unit sphere is normalized by the compiled kernel's fast
    path (no general path's call: it was the only kernel left off it), to NumPy's road's rounding; a zero
    quaternion still gets the error naming its joint."""
    from sparsedyn.codegen.compiled_model import CompiledModel
    model = sd.humanoid()
    q = model.random_configuration(np.random.default_rng(4))
    q[3:7] *= 3.0
    calls, real = [], CompiledModel._call

    def counted(self, *a, **kw):
        calls.append(a[0])
        return real(self, *a, **kw)
    with sd.use_backend("numpy"):
        want = sd.normalize(model, q)
    with sd.use_backend("native", deterministic=True):
        sd.normalize(model, q)
        monkeypatch.setattr(CompiledModel, "_call", counted)
        got = sd.normalize(model, q)
        assert calls == [] and rel_err(got, want) <= rounding_bound(8)
        q[3:7] = 0.0
        with pytest.raises(ValueError, match="joint 'root_joint' is zero"):
            sd.normalize(model, q)
