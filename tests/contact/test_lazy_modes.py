"""Results whose modes are computed when first read (sparsedyn.contact.lazy_modes): a rollout in a
scene behaves as the Rollout of the same fields, its modes each step's."""

import pickle

import numpy as np

import sparsedyn as sd
from sparsedyn.contact.friction_problem import ContactResiduals
from sparsedyn.contact.lazy_modes import MODE_NAMES, mode_codes
from test_scene import DT, SIDE
from test_scene_step import _scene, _steps_one_by_one


def test_a_rollout_in_a_scene_gives_its_modes_when_read_as_any_rollout():
    """A rollout in a scene computes its modes when first read: as a tuple (unpacked, indexed,
    pickled, ``_replace``) it is the :class:`~sparsedyn.Rollout` of the same fields, its modes each
    step's (the public ``contact_step`` calls one by one)."""
    scene = _scene(False)
    q0, v0, tau = [0.0, 0.0, SIDE / 2, 0.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.3, 0.0, 0.0], [0.0] * 6
    with sd.use_backend("native", deterministic=True):
        r = sd.rollout(scene.model, q0, v0, tau, scene, DT, 5)
        fresh = sd.Scene(scene.model, world=[sd.Shape("plane", name="floor")], friction=0.5)
        modes = _steps_one_by_one(scene.model, q0, v0, tau, fresh, 5)[3]
    q, v, impulses, unpacked, iterations = r
    assert [list(m) for m in unpacked] == [list(m) for m in r[3]] == [list(m) for m in r.modes] == modes
    assert {"slide", "stick"} & {m for x in modes for m in x}
    back = pickle.loads(pickle.dumps(r))
    assert type(back) is sd.Rollout and [list(m) for m in back.modes] == modes and np.array_equal(back.q, q)
    assert [list(m) for m in r._replace(iterations=iterations + 1).modes] == modes


def test_a_step_in_a_scene_gives_its_residuals_and_iterations_when_read_as_a_batch_step_does():
    """One state's step in a scene makes its residuals and iterations when read: read as fields, by
    index (from either end), unpacked and pickled they are those of the same state stepped as a batch
    of one (whose step builds them at once), bit for bit, their types a ContactStep's."""
    scene = _scene(False)
    # landing and sliding on its four corners
    q, v, tau = [0.0, 0.0, SIDE / 2, 0.0, 0.0, 0.0, 1.0], [0.0, 0.0, -0.2, 0.3, 0.0, 0.0], [0.0] * 6
    with sd.use_backend("native", deterministic=True):
        s = sd.contact_step(scene.model, q, v, tau, scene, DT)
        batch = sd.contact_step(scene.model, [q], [v], [tau], scene, DT)
    assert int(batch.iterations[0]) > 0
    want = [np.asarray(batch.residuals[k])[0] for k in range(3)], batch.iterations[0]
    for res, its in ((s.residuals, s.iterations), (s[4], s[5]), (s[-2], s[-1]), tuple(s)[4:], pickle.loads(
            pickle.dumps(s))[4:]):
        assert type(res) is ContactResiduals and [float(x) for x in res] == [float(x) for x in want[0]]
        assert np.ndim(res.primal) == 0 and np.ndim(its) == 0 and its.dtype.kind == "i" and int(its) == int(want[1])
    assert type(pickle.loads(pickle.dumps(s))) is sd.ContactStep


def test_a_steps_mode_codes_are_its_modes_and_leave_them_unread():
    """The modes of one state's step in a scene as codes (``mode_codes``, what the derivatives read)
    name the modes of the same state stepped as a batch of one (whose step computes its names at once,
    on arrays), before and after the step's own names are read; reading the codes leaves the names
    unread."""
    scene = _scene(False)
    seen = set()
    # landing and sliding on its four corners, and resting (sticking)
    for v in ([0.0, 0.0, -0.2, 0.3, 0.0, 0.0], [0.0] * 6):
        q, tau = [0.0, 0.0, SIDE / 2, 0.0, 0.0, 0.0, 1.0], [0.0] * 6
        with sd.use_backend("native", deterministic=True):
            s = sd.contact_step(scene.model, q, v, tau, scene, DT)
            batch = sd.contact_step(scene.model, [q], [v], [tau], scene, DT)
        codes = mode_codes(s)
        assert getattr(tuple.__getitem__(s, 3), "value", None) is None     # the names not made
        assert [MODE_NAMES[c] for c in codes] == batch.modes[0].tolist() == s.modes.tolist()
        assert mode_codes(s) == codes and len(codes) == 4
        seen.update(s.modes.tolist())
    assert seen == {"slide", "stick"}
