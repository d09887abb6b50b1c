"""A rollout's states as rows (sparsedyn.contact.rollout_rows): the native chain of a rollout's steps
(``scene_fused.chained_steps``, the extension's ``scene_rollout``) copies each step's next ``q``, next
``v`` and report into rows laid out once, which are then the rollout's ``q`` and ``v``: the rows equal
the steps' own arrays byte for byte, the rollout's states equal a loop of single steps' (each from the
one before, its warm start matched in the step) byte for byte, and rows that do not fit are refused
by name."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact import friction, scene_fused
from sparsedyn.contact.rollout_rows import rollout_rows, stacked_states
from sparsedyn.contact.scene_step import step_in_scene
from test_scene import DT
from test_scene_fused import _arm, _box


def _chain(scene, q, v, tau, steps, into):
    """``chained_steps`` of ``steps`` steps from ``(q, v)`` under ``tau`` with the rows ``into``."""
    model = scene.model
    sd.contact_step(model, q, v, tau, scene, DT)                 # (the builds, the layout)
    plan = scene_fused.trajectory_plan(scene, model, DT)
    opts = friction._options({}, None)
    settings = friction._step_settings("contact_step", DT, opts["tol"], opts["max_iterations"], opts["solver"],
                                       opts["margin"])
    return scene_fused.chained_steps(plan, q, v, tau, settings, None, None, steps,
                                     scene_fused.general_matching(scene, plan), into)


@pytest.mark.parametrize("make", [_box, _arm])
def test_the_chains_rows_are_its_steps_arrays(make):
    """Rows k + 1 of Q and V and row k of R are step k's next q, next v and report, byte for byte (a
    copy: the same numbers), the first rows the initial state's."""
    scene, q, v, tau = make()
    steps = 12
    with sd.use_backend("native", deterministic=True):
        rows = rollout_rows(scene.model, steps, q, v)
        runs = _chain(scene, q, v, tau, steps, rows)
    assert len(runs) == steps
    assert rows[0][0].tobytes() == q.tobytes() and rows[1][0].tobytes() == v.tobytes()
    for k, got in enumerate(runs):
        assert rows[0][k + 1].tobytes() == got[0][0].tobytes()
        assert rows[1][k + 1].tobytes() == got[0][1].tobytes()
        assert rows[2][k].tobytes() == got[0][4].tobytes()


def test_a_rollout_is_a_loop_of_single_steps():
    """The box's rollout (its steps one native chain, its states those rows) equals a loop of
    contact_step calls in the scene, each from the state and the contacts and impulses of the one
    before (scene_step's ``previous``: the warm start matched as in the chain), byte for byte."""
    scene, q, v, tau = _box()
    twin = sd.Scene(scene.model, world=[x for x in scene.shapes if x.body < 0], friction=scene.friction)
    steps = 15
    with sd.use_backend("native", deterministic=True):
        r = sd.rollout(scene.model, q, v, tau, scene, DT, steps)
        qs, vs, previous, x, y = [q], [v], None, q, v
        for _ in range(steps):
            opts = dict(tol=1e-8, max_iterations=None, solver="admm", f_ext=None, gravity=None, warm_start=None,
                        margin=0.005)
            s, found = step_in_scene(friction._slotted_step, scene.model, x, y, tau, twin, DT, opts, previous)
            previous, x, y = (found, s.impulses), s.q, s.v
            qs.append(x), vs.append(y)
    assert type(r.q) is np.ndarray and r.q.shape == (steps + 1, 7) and r.v.shape == (steps + 1, 6)
    assert r.q.tobytes() == np.array(qs).tobytes() and r.v.tobytes() == np.array(vs).tobytes()


def test_rows_that_do_not_fit_are_refused():
    """Rows of another dtype, too few or of another width: a TypeError naming ``into``."""
    scene, q, v, tau = _box()
    steps = 4
    nq, nv = scene.model.nq, scene.model.nv
    bad = [(np.zeros((steps + 1, nq), np.float32), np.zeros((steps + 1, nv)), np.zeros((steps, 8))),
           (np.zeros((steps, nq)), np.zeros((steps + 1, nv)), np.zeros((steps, 8))),
           (np.zeros((steps + 1, nq)), np.zeros((steps + 1, nv)), np.zeros((steps, 7))),
           (np.zeros((steps + 1, nq + 1)), np.zeros((steps + 1, nv)), np.zeros((steps, 8)))]
    with sd.use_backend("native", deterministic=True):
        for into in bad:
            with pytest.raises(TypeError, match="into"):
                _chain(scene, q, v, tau, steps, into)


def test_stacked_states_keep_the_order_of_blocks_and_single_states():
    """Where a chain's block of rows sits among single states (a step of another road between two
    chains), the states are the rows in turn; where every step was chained, the rows themselves."""
    Q = np.arange(5 * 2, dtype=float).reshape(5, 2)
    V = -Q
    qs = [Q[0], Q[1:3], Q[3], Q[4:5]]
    vs = [V[0], V[1:3], V[3], V[4:5]]
    got = stacked_states(qs, vs, (Q, V, None), 3, 4)
    assert [x.tolist() for x in got[0]] == Q.tolist() and [x.tolist() for x in got[1]] == V.tolist()
    whole = stacked_states([Q[0], Q[1:]], [V[0], V[1:]], (Q, V, None), 4, 4)
    assert whole[0] is Q and whole[1] is V
    plain = [Q[0], Q[1]]
    assert stacked_states(plain, plain, None, 0, 1) == (plain, plain)
