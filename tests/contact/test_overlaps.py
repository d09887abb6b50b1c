"""Tests of :mod:`sparsedyn.contact.overlaps`: the robot's own pairs that overlap at a configuration,
against Pinocchio's ``computeCollisions`` on the same URDF (coal's collision tests)."""

import warnings

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn.interop.pinocchio import q_to_pinocchio

from erd import robots_dir

ANYMAL = "anymal_b_simple_description/robots/anymal.urdf"


def anymal():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # its URDF's base inertia (the triangle inequality)
        return sd.load_urdf(robots_dir() / ANYMAL, floating_base=True, geometry=True)


def pinocchios_overlaps(model, q):
    """The pairs of anymal's collision shapes that Pinocchio (coal) finds in collision at ``q``."""
    share = str(robots_dir().parent.parent)
    pm, gm, _ = pin.buildModelsFromUrdf(str(robots_dir() / ANYMAL), [share], pin.JointModelFreeFlyer())
    gm.addAllCollisionPairs()
    gd = pin.GeometryData(gm)
    pin.computeCollisions(pm, pm.createData(), gm, gd, q_to_pinocchio(model, q), False)
    names = [g.name for g in gm.geometryObjects]
    return {frozenset((names[p.first], names[p.second])) for k, p in enumerate(gm.collisionPairs)
            if gd.collisionResults[k].isCollision()}


def test_anymals_thighs_in_its_base_at_the_neutral_configuration_are_pinocchios_overlaps():
    """anymal's URDF without its SRDF: each thigh's cylinder lies in the base at every configuration
    (its hip axis); those four pairs, and no pair with the floor it stands in, are listed, and the
    scene without them has none left."""
    model = anymal()
    scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")])
    q = model.neutral()
    found = sd.overlapping_pairs(scene)
    ours = {frozenset(p) for p in scene.pairs}
    assert {frozenset(p) for p in found} == pinocchios_overlaps(model, q) & ours
    assert sorted(found) == [("base_1", "LF_THIGH_2"), ("base_2", "RF_THIGH_2"), ("base_3", "LH_THIGH_2"),
                             ("base_4", "RH_THIGH_2")]
    hits = sd.collide(scene, q)
    assert np.any(hits.distances[[p[1] == "floor" for p in hits.pairs]] < 0)    # in the floor, not listed
    rest = scene.with_pairs(remove=found)
    assert len(rest.pairs) == len(scene.pairs) - 4 and sd.overlapping_pairs(rest) == []


def test_a_configuration_of_the_users_is_checked_as_given():
    """At random configurations (``q`` given as a list), the pairs listed are Pinocchio's overlaps among
    the scene's pairs."""
    model = anymal()
    scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")])
    rng = np.random.default_rng(3)
    for _ in range(5):
        q = model.random_configuration(rng)
        ours = {frozenset(p) for p in scene.pairs}
        assert {frozenset(p) for p in sd.overlapping_pairs(scene, list(q))} == pinocchios_overlaps(model, q) & ours


def test_bad_input_is_named():
    with pytest.raises(TypeError, match="overlapping_pairs: scene must be a sd.Scene"):
        sd.overlapping_pairs(anymal())
    scene = sd.Scene(anymal())
    with pytest.raises(ValueError, match="q"):
        sd.overlapping_pairs(scene, [0.0, 1.0])
