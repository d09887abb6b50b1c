"""One state's fused step laid out in its derivatives' slots by one native call
(sparsedyn.contact.slot_modes_native): the same :class:`Slotted` as the Python road's (the step's
modes by :func:`~sparsedyn.contact.lazy_modes.mode_codes`, laid out by
:func:`~sparsedyn.contact.scene_slotted.one_state_slots`), field by field and bit for bit, in per-body
slots filled in order, in data slots (a two-body contact), with sliding, sticking and open contacts,
and in a layout with free slots; and the derivatives it feeds equal to the Python road's."""

import os

import numpy as np
import pytest

import sparsedyn as sd
from test_friction_derivatives import DT, H, MU, TOL, hand_scene, lifted
from test_scene_derivatives import CASES, _box_on_table
from sparsedyn.contact import friction_derivatives, scene_slotted, slot_modes_native
from sparsedyn.contact.data_slots import runs_per_body
from sparsedyn.contact.scene_slotted import slotted_scene_step


def _box_on_floor():
    """The box sliding on a floor plane (a box on a box tells its corner's kind at ``q``: the Python road)."""
    model, _, q, v, tau, opt = _box_on_table()
    scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")], friction=MU)
    return model, scene, lifted(q, -0.2), v, tau, opt


def _hand_with_gravity():
    """The hand on the torso (a two-body contact: the scene's data slots) under the model's gravity (the
    fused road's: no gravity given)."""
    return (*hand_scene(), {})


def _tilted_box():
    """The box on the floor turned 0.2 rad about x, its lower edge's two corners touching: after a flat
    step (four contacts) its body's slots hold four, two of them free now."""
    model, scene, q, v, tau, opt = _box_on_floor()
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(model, q, v, tau, scene, DT, tol=TOL)                 # the layout: four slots
    q = np.array([0.0, 0.0, H * (np.cos(0.2) + np.sin(0.2)) + 1e-5,          # the lower edge 10 um above it
                  np.sin(0.1), 0.0, 0.0, np.cos(0.1)])                        # [x, y, z, w]: 0.2 rad about x
    return model, scene, q, v, tau, opt


SCENES = dict(CASES, **{"hand on torso, gravity": _hand_with_gravity, "box on floor": _box_on_floor,
                        "tilted box, free slots": _tilted_box})
#: Those whose shapes are told at q (a pair of boxes, an ellipsoid or a cylinder on a face, an ellipsoid
#: and a sphere, a sphere, a capsule, a box or a cylinder touching with another feature than its pair's own:
#: an edge, a capsule's or a cylinder's side): the Python road lays them out.  (The hand on the torso's face is its pair's
#: own: the native road.)
TOLD = ("box on table", "box pressed into table", "egg on floor", "egg on ramp", "egg on table", "wheel on floor",
        "wheel tilted on ramp", "capsule across log", "box edge across ridge", "ball on ridge's edge",
        "box corner on log", "forearm across torso", "egg on globe", "ball on egg", "ball on egg, egg on floor",
        "ball on drum", "wheel on globe")
#: Of those, the ones whose kinds are their pairs' own, their sliding or turning point's ``K`` alone told at q
#: (an ellipsoid or a cylinder on a face, an ellipsoid and a sphere): their derivatives' fused road puts
#: each state's shapes in its parameters.
K_TOLD = ("egg on floor", "egg on ramp", "egg on table", "wheel on floor", "wheel tilted on ramp", "egg on globe",
          "ball on egg", "ball on egg, egg on floor")


def _both(model, scene, q, v, tau, opt, monkeypatch):
    """``(fused, python)``: the Slotted of the step on the fused road's native call and on the Python
    road (the routine's call refused), and the number of native calls made."""
    calls = []
    real = slot_modes_native.fused_slotted

    def counted(*args):
        got = real(*args)
        calls.append(got is not None)
        return got
    options = dict(opt, tol=TOL)
    with sd.use_backend("native", deterministic=True):
        sd.contact_step(model, q, v, tau, scene, DT, **options)                # (builds)
        monkeypatch.setattr(scene_slotted, "fused_slotted", counted)
        step, _, fused = slotted_scene_step(model, model, q, v, tau, scene, DT, options)
        monkeypatch.setattr(scene_slotted, "fused_slotted", lambda *args: None)
        step2, _, python = slotted_scene_step(model, model, q, v, tau, scene, DT, options)
        monkeypatch.setattr(scene_slotted, "fused_slotted", real)
    assert np.array_equal(step.v, step2.v) and list(step.modes) == list(step2.modes)
    return fused, python, calls, step


@pytest.mark.parametrize("name", list(SCENES))
def test_the_native_layout_is_the_python_roads(name, monkeypatch):
    model, scene, q, v, tau, opt = SCENES[name]()
    fused, python, calls, step = _both(model, scene, q, v, tau, opt, monkeypatch)
    if opt.get("gravity") is not None:                # a gravity given: no fused step, no native layout
        assert calls == []
        return
    assert calls == [name not in TOLD]                                       # the native call made the layout
    assert fused.frames == python.frames and fused.kinds == python.kinds
    for field in ("data", "shapes", "mu", "impulses", "modes", "correction", "weights"):
        a, b = getattr(fused, field), getattr(python, field)
        assert a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b), field
    assert set(python.modes[0]) >= set(step.modes)                            # each contact's mode, in its slot
    if name == "hand on torso, gravity":
        assert not runs_per_body(scene)                                       # the step ran in data slots
    if name.startswith("tilted"):
        assert len(step.modes) == 2 and list(python.modes[0]).count("open") >= 2


def test_the_derivatives_equal_the_python_roads(monkeypatch):
    """The derivatives from the native layout equal those from the Python road's bit for bit (the same
    pieces, the same routine): the box sliding on the floor, tilted onto two of its four slots, the
    rolling ball and the composite arm (the road of the layout's Slotted: fused_derivatives' four calls
    refused)."""
    for name in ("box on floor", "tilted box, free slots", "ball", "composite arm", "hand on torso, gravity"):
        model, scene, q, v, tau, opt = SCENES[name]()
        with sd.use_backend("native", deterministic=True):
            sd.contact_step_derivatives(model, q, v, tau, scene, DT, tol=TOL)          # (builds, grows the layout)
            monkeypatch.setattr(friction_derivatives, "fused_derivatives", lambda *args: None)
            d = sd.contact_step_derivatives(model, q, v, tau, scene, DT, tol=TOL)
            monkeypatch.setattr(scene_slotted, "fused_slotted", lambda *args: None)
            ref = sd.contact_step_derivatives(model, q, v, tau, scene, DT, tol=TOL)
            monkeypatch.undo()
        for a, b in zip(d[:6], ref[:6]):
            assert np.array_equal(a, b), name


def test_the_routine_on_hand_made_rows():
    """The routine's modes, by hand: kernel row 0 at the impulse cut (``lambda_n = tol s_lambda``: open),
    row 1 pressed and sliding just above the speed cut (slide), row 2 pressed and just below it (stick);
    slots reading rows 2, 0, none (free) and 1, the correction read from other entries; a NaN in the
    open contact's velocity (an input the fast path declines: the ctypes fallback) changes nothing."""
    model = _box_on_floor()[0]
    with sd.use_backend("native", deterministic=True):                       # (the compiler's extension loaded)
        sd.rnea(model, model.neutral(), np.zeros(model.nv), np.zeros(model.nv))
    tol, s_lam, s_u = 1e-3, 2.0, 0.5
    cut = 100 * tol * s_u                                                     # the speed cut, 0.05 m/s
    lam = np.array([[0.1, 0.0, tol * s_lam], [0.3, 0.2, 1.0], [0.0, 0.1, 2.0]])
    u = np.array([[1.0, 1.0, 0.0], [0.6 * cut, 0.81 * cut, 0.0], [0.6 * cut, 0.79 * cut, 0.0]])
    report = np.array([0, 0, 0, 4, 1, s_lam, s_u, 0.0])
    corr = np.array([0.5, 0.25, 0.125, 0.0625])
    at = np.array([[2, 3], [0, 0], [-1, -1], [1, 2]], float)
    data = np.arange(32.0).reshape(4, 8)
    call = slot_modes_native.slot_modes_call(3, 4, 4, 8)
    if call is None:
        # CI installs a compiler (the pip compiler comes with the package): none there is a failure
        (pytest.fail if os.environ.get("CI") else pytest.skip)("no C compiler here")
    par = np.array([tol, 4.0])
    for velocities in (u, np.where(np.arange(3)[:, None] == 0, np.nan, u)):
        weights, lam_s, corr_s, codes, data_s, mu = call(lam, velocities, report, corr, at, data, par)
        assert codes.tolist() == [1.0, 0.0, 0.0, 2.0]                         # stick, open, free (open), slide
        assert weights[0, :, :3].tolist() == [[0, 1, 0], [1, 0, 0], [1, 0, 0], [0, 0, 1]]
        assert weights[0, :, 3].tolist() == mu[0].tolist() == data[:, 0].tolist()
        assert np.array_equal(lam_s[0], np.stack([lam[2], lam[0], np.zeros(3), lam[1]]))
        assert corr_s[0].tolist() == [0.0625, 0.5, 0.0, 0.125] and np.array_equal(data_s[0], data)
