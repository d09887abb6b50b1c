"""The geometry of a step's contacts in its slots (sparsedyn.contact.scene_geometry): the kinds of
contact a slot may hold, from the kinds of its scene's shape pairs, derived by hand (0 ``pp``: two
round shapes; 1 ``pb``: a point of ``a`` on ``b``'s surface (``a`` round or ``b`` a plane); 2 ``ap``:
``b`` round; two boxes: a corner of either, so ``pb`` or ``ap``; every slot also ``pb``, a free slot's).
The geometry itself is compared with the compiled kernel's and differentiated in
tests/contact/test_scene_derivatives.py."""

import numpy as np
import pytest

import sparsedyn as sd
from sparsedyn.contact.scene_geometry import slot_kinds
from test_scene import SIDE, box_model

BALL = sd.Shape("sphere", (0.1,), placement=(np.eye(3), [1.0, 0, 0.1]), name="ball")
BLOCK = sd.Shape("box", (0.4, 0.4, 0.1), placement=(np.eye(3), [-1.0, 0, 0.05]), name="block")
FLOOR = sd.Shape("plane", name="floor")


def _ball_model():
    g = sd.Geometry("ball", 0, sd.spatial.Transform(np.eye(3), np.zeros(3)), "sphere", (SIDE / 2,), "collision")
    return box_model(geometry=False).with_geometry(g)


@pytest.mark.parametrize("model, world, want", [
    (box_model, [FLOOR], (1,)),                      # a box on a plane: its corners, pb
    (box_model, [FLOOR, BALL], (1, 2)),              # a world sphere under a box: ap
    (box_model, [FLOOR, BLOCK], (1, 2)),             # two boxes: a corner of either
    (_ball_model, [FLOOR], (1,)),                    # a robot sphere on a plane: pb
    (_ball_model, [FLOOR, BALL], (0, 1)),            # two spheres: pp
    (_ball_model, [BLOCK], (1,)),                    # a sphere on a box's face: pb (a free slot's too)
])
def test_a_slots_kinds_are_its_pairs_kinds(model, world, want):
    """One-frame slots (the robot against the world) take the kinds of the world pairs; a slot of two
    frames (robot against robot) those of the robot pairs, here none: ``pb`` alone."""
    scene = sd.Scene(model(), world=world)
    assert slot_kinds(scene, (0, 0, (0, 0))) == (want, want, (1,))
