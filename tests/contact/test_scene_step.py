"""Steps in a scene on the default road (sparsedyn.contact.scene_step): the compiled step's structure
is the scene's (each body that has touched the world keeps the slots its most contacts needed), so
the native step equals the NumPy step to rounding with the same iterations, and a trajectory whose
contacts come and go within those slots builds nothing."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.codegen import build, native
from sparsedyn.contact.scene_step import scene_contacts, scene_slots
from test_friction_kernel import _rounding
from test_scene import DT, G, MASS, SIDE, box_model

TABLE = sd.Shape("box", (1.0, 1.0, 0.2), placement=(np.eye(3), [0, 0, 0.1]), name="table")


def _scene(on_table):
    return sd.Scene(box_model(), world=[sd.Shape("plane", name="floor")] + ([TABLE] if on_table else []), friction=0.5)


def _step_variants(model):
    return [n for n in native.shared(model).kernels if n.startswith("contact_step_kernel")]


def test_free_slots_are_open_and_hold_the_contacts_in_body_order():
    """The box resting flat: four corners in its four slots; tilted onto an edge, two corners in the
    same four slots, the other two free (1000 km above their plane) and open with zero impulse."""
    scene = _scene(False)
    flat = scene_slots(scene, scene_contacts(scene, [0, 0, SIDE / 2, 0, 0, 0, 1]))
    s, c = np.sin(0.2), np.cos(0.2)
    edge_q = [0, 0, SIDE / 2 * (c + s) + 1e-4, s, 0, 0, c]                   # on one edge (rotated 0.4 rad about x)
    contacts = scene_contacts(scene, edge_q)
    edge = scene_slots(scene, contacts)
    assert len(flat.frames) == len(edge.frames) == 4 and flat.frames == edge.frames
    assert len(contacts) == 2 and sorted(edge.index) == [0, 1]
    assert np.all(edge.data[2:, 4:] == [0, 0, 1, -1e6])
    with sd.use_backend("numpy"):
        step = sd.contact_step(scene.model, edge_q, np.zeros(6), np.zeros(6), scene, DT)
    assert step.impulses.shape == (2, 3) and list(step.modes) != ["open"] * 2


@pytest.mark.parametrize("on_table", [False, True])
def test_native_scene_step_equals_the_numpy_scene_step(on_table):
    """A box sliding and turning on the floor, and on a box (the table) on the floor: the default
    (native) road makes the NumPy road's iterations, modes, ``v+``, ``q+`` and impulses to the rounding
    bound of the step (test_friction_kernel's), and it ran the native step."""
    scene = _scene(on_table)
    top = 0.2 if on_table else 0.0
    q = [0.1, -0.2, top + SIDE / 2, 0, 0, 0, 1]                             # a plain list
    v = np.array([0.3, -0.1, 0.2, 0.05, 0.02, -0.4])
    with sd.use_backend("numpy"):
        ref = sd.contact_step(scene.model, q, v, np.zeros(6), scene, DT)
        contacts = scene_contacts(scene, np.array(q))
    with sd.use_backend("native", deterministic=True):
        one = sd.contact_step(scene.model, q, v, np.zeros(6), scene, DT)
    assert len(_step_variants(scene.model)) == 1                            # it ran native
    bound = _rounding(scene.model, np.array(q), v, np.zeros(6), contacts, None, ref)
    assert len(contacts) == 4 and int(one.iterations) == int(ref.iterations)
    assert list(one.modes) == list(ref.modes)
    assert np.abs(one.v - ref.v).max() <= bound * max(1.0, np.abs(ref.v).max())
    assert np.abs(one.q - ref.q).max() <= DT * bound * max(1.0, np.abs(ref.v).max()) + 4 * np.finfo(float).eps
    assert np.abs(one.impulses - ref.impulses).max() <= bound * np.abs(ref.impulses).max()


@pytest.mark.filterwarnings("ignore::sparsedyn.ContactStepWarning")
def test_native_rollout_in_a_scene_builds_one_step(monkeypatch):
    """A tilted box dropped on the table after one step resting on its face (four slots): free fall
    (no hit), one corner, an edge, then the face all fit those slots, so the whole rollout runs that
    one native step (no library assembled) and ends at rest on its face carrying its weight
    (``m g dt`` a step)."""
    scene = _scene(True)
    axis = np.array([1.0, 1.0, 0]) / np.sqrt(2)
    q0 = np.r_[0, 0, 0.2 + 0.15, np.sin(0.15) * axis, np.cos(0.15)]
    built = []
    real = build.build_library
    with sd.use_backend("native", deterministic=True):
        rest = [0, 0, 0.2 + SIDE / 2, 0, 0, 0, 1]
        sd.contact_step(scene.model, rest, np.zeros(6), np.zeros(6), scene, DT)   # builds what the steps run
        monkeypatch.setattr(build, "build_library", lambda *a, **kw: built.append(a[0]) or real(*a, **kw))
        r = sd.rollout(scene.model, q0, np.zeros(6), np.zeros(6), scene, DT, 400)
    counts = {len(imp) for imp in r.impulses}
    assert {0, 4} <= counts and len(counts) >= 3                              # contacts came and went
    assert len(_step_variants(scene.model)) == 1
    assert built == []
    assert np.abs(r.v[-1]).max() <= 1e-6 and abs(r.q[-1][2] - 0.2 - SIDE / 2) <= 1e-6
    assert abs(r.impulses[-1][:, 2].sum() - MASS * G * DT) <= 1e-6 * MASS * G * DT
