"""A fused step's layout met again (sparsedyn.contact.derivative_replay): the derivatives of a state
whose step returns the candidates, slots and kernel rows of one met before take the plan, the pieces'
callable and the slots' data kept for them, and equal those the first road makes (the step's
FoundContacts, slots and plan lookup; the memo cleared) bit for bit, in per-body slots (in order, with
free slots) and in the scene's data slots (a two-body contact); they equal central differences of the
step and the NumPy road; a layout not met before, and another road (a new time step), take the first
road."""

import numpy as np
import pytest

import sparsedyn as sd
from conftest import rel_err
from test_friction_derivatives import DT, FIELDS, NATURAL, TOL, check_against_differences, lifted
from test_fused_derivatives import _equal
from test_scene_derivatives import NOISE, _bound
from test_slot_modes_native import SCENES
from sparsedyn.contact import derivative_replay, fused_derivatives

#: Scenes on the fused road: per-body slots in order, a two-body contact (the scene's data slots), a
#: layout with free slots.
FUSED = ("box on floor", "hand on torso, gravity", "tilted box, free slots")


def _counting(monkeypatch):
    """A list that gets, per call of fused_derivatives' replay lookup, whether it answered."""
    hits, real = [], derivative_replay.replayed

    def counted(*args):
        got = real(*args)
        hits.append(got is not None)
        return got
    monkeypatch.setattr(fused_derivatives, "replayed", counted)
    return hits


def _moved(model, q, dz):
    return lifted(q, dz) if model.nq == 7 else q + dz


@pytest.mark.parametrize("name", FUSED)
def test_a_layout_met_again_is_replayed_bit_for_bit(name, monkeypatch):
    model, scene, q, v, tau, opt = SCENES[name]()
    opt = dict(opt, tol=TOL)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step_derivatives(model, q, v, tau, scene, DT, **opt)          # (builds, grows the layout)
        sd.contact_step_derivatives(model, q, v, tau, scene, DT, **opt)          # the layout kept
        hits = _counting(monkeypatch)
        again = _moved(model, q, 1e-7)                                             # the same contacts
        d = sd.contact_step_derivatives(model, again, v, tau, scene, DT, **opt)
        assert hits == [True]
        scene.cache.pop(derivative_replay._KEY)                                  # the first road's
        first = sd.contact_step_derivatives(model, again, v, tau, scene, DT, **opt)
        assert hits == [True, False]
        assert scene.cache[derivative_replay._KEY][2]                             # kept again by that road
    _equal(d, first, name)


@pytest.mark.parametrize("name", FUSED)
def test_replayed_derivatives_equal_central_differences_and_the_numpy_road(name, monkeypatch):
    model, scene, q, v, tau, opt = SCENES[name]()
    with sd.use_backend("native", deterministic=True):
        for _ in range(2):
            sd.contact_step_derivatives(model, q, v, tau, scene, DT, tol=TOL, **opt)
        hits = _counting(monkeypatch)
        d = check_against_differences(model, q, v, tau, scene, 1e-6, extra_noise=NOISE.get(name), **opt)
        assert hits == [True]
    with sd.use_backend("numpy"):
        ref = sd.contact_step_derivatives(model, q, v, tau, scene, DT, tol=TOL, **opt)
    bound = _bound(model, q, v, tau, scene, opt)
    for f in FIELDS:
        assert rel_err(getattr(d, f) / NATURAL[f], getattr(ref, f) / NATURAL[f]) <= bound, (f, bound)


def test_another_layout_or_time_step_takes_the_first_road(monkeypatch):
    """A state whose contacts are others (the box lifted clear of the floor: no contact kept) is not
    answered from the memo; a new time step (another road of the step) starts a memo of its own."""
    model, scene, q, v, tau, opt = SCENES["box on floor"]()
    with sd.use_backend("native", deterministic=True):
        for _ in range(2):
            sd.contact_step_derivatives(model, q, v, tau, scene, DT, tol=TOL)
        road = scene.cache[derivative_replay._KEY][0]
        hits = _counting(monkeypatch)
        half = sd.contact_step_derivatives(model, q, v, tau, scene, DT / 2, tol=TOL)
        assert hits[-1:] == [False] and scene.cache[derivative_replay._KEY][0] is not road
        scene.cache.pop(derivative_replay._KEY)                                  # the first road's
        ref = sd.contact_step_derivatives(model, q, v, tau, scene, DT / 2, tol=TOL)
        assert hits[-1:] == [False]
        hits.clear()
        tilted = SCENES["tilted box, free slots"]()[2]                             # two corners: other slots
        sd.contact_step_derivatives(model, tilted, v, tau, scene, DT, tol=TOL)
        assert hits == [False]
    _equal(half, ref, "dt / 2")
