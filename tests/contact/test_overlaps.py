"""Tests of :mod:`sparsedyn.contact.overlaps`: the robot's own pairs that overlap at a configuration,
against Pinocchio's ``computeCollisions`` on the same URDF (coal's collision tests)."""

import re
import warnings

import numpy as np
import pinocchio as pin
import pytest

import sparsedyn as sd
from sparsedyn.interop.pinocchio import q_to_pinocchio

from erd import convex_meshes, robots_dir

ANYMAL = "anymal_b_simple_description/robots/anymal.urdf"


def anymal():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # its URDF's base inertia (the triangle inequality)
        return sd.load_urdf(robots_dir() / ANYMAL, floating_base=True, geometry=True)


def pinocchios_overlaps(model, q, urdf=ANYMAL, hulls=False):
    """The pairs of the collision shapes of ``urdf`` (anymal's) that Pinocchio (coal) finds in collision
    at ``q``; with ``hulls``, each mesh replaced by its convex hull (coal's, as collide takes a mesh)."""
    share = str(robots_dir().parent.parent)
    pm, gm, _ = pin.buildModelsFromUrdf(str(robots_dir() / urdf), [share], pin.JointModelFreeFlyer())
    if hulls:
        convex_meshes(gm)
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
    with pytest.warns(sd.SelfOverlapWarning, match=r"4 pairs of robot 'anymal''s own shapes penetrate at its neutral "
                                                   r"configuration: \(base_1, LF_THIGH_2\) by 2\.5 mm"):
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


@pytest.mark.filterwarnings("ignore::sparsedyn.SelfOverlapWarning")        # anymal without its SRDF
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


@pytest.mark.filterwarnings("ignore::sparsedyn.SelfOverlapWarning")        # anymal without its SRDF
def test_bad_input_is_named():
    with pytest.raises(TypeError, match="overlapping_pairs: scene must be a sd.Scene"):
        sd.overlapping_pairs(anymal())
    scene = sd.Scene(anymal())
    with pytest.raises(ValueError, match="q"):
        sd.overlapping_pairs(scene, [0.0, 1.0])


def _link(name, x):
    """A link with a box of 0.2 m sides centred ``x`` metres along its joint's x axis."""
    return (f'<link name="{name}"><inertial><mass value="1"/><inertia ixx="0.01" iyy="0.01" izz="0.01" ixy="0" '
            f'ixz="0" iyz="0"/></inertial><collision><origin xyz="{x} 0 0"/><geometry><box size="0.2 0.2 0.2"/>'
            f'</geometry></collision></link>')


def _joint(name, child, z):
    return (f'<joint name="{name}" type="revolute"><parent link="base"/><child link="{child}"/>'
            f'<origin xyz="0 0 {z}"/><axis xyz="0 0 1"/><limit lower="-3" upper="3" effort="1" velocity="1"/></joint>')


# A fixed base with three arms on hinges about z (siblings: each pair is checked).  At the neutral
# configuration the box of "left" spans x in [-0.1, 0.1] and that of "right" [0.05, 0.25] at the same
# height: they overlap by 0.2 m in y and z and by 0.05 m in x, a penetration depth of 50 mm (the
# smallest push that parts two boxes); "high" is 1 m above both.
BOXES = ('<robot name="boxes"><link name="base"/>' + _link("left", 0.0) + _link("right", 0.15) + _link("high", 0.0)
         + _joint("j_left", "left", 0.0) + _joint("j_right", "right", 0.0) + _joint("j_high", "high", 1.0) + '</robot>')


def _boxes():
    return sd.load_urdf(BOXES, geometry=True)


def test_a_scene_whose_robot_overlaps_itself_at_neutral_says_which_pair_and_how_deep():
    """The pair of boxes that overlap by 50 mm (by hand: ``BOXES``) is named with its depth, the count
    is one (the boxes in the floor through the base are no pair of the robot's own), and the remedy is
    given; ``overlapping_pairs`` lists that pair alone."""
    model = _boxes()
    with pytest.warns(sd.SelfOverlapWarning) as got:
        scene = sd.Scene(model, world=[sd.Shape("plane", name="floor")])
    assert len(got) == 1 and issubclass(sd.SelfOverlapWarning, UserWarning)
    text = str(got[0].message)
    assert text.startswith("Scene: 1 pair of robot 'boxes''s own shapes penetrate at its neutral configuration: "
                           "(left_0, right_0) by 50.0 mm.")
    assert "scene.with_pairs(remove=sd.overlapping_pairs(scene))" in text and "srdf=" in text
    assert got[0].filename == __file__                         # it points at the line that made the scene
    assert sd.overlapping_pairs(scene) == [("left_0", "right_0")]
    hits = sd.collide(scene, model.neutral())
    own = [p == ("left_0", "right_0") for p in hits.pairs]
    assert abs(hits.distances[own].min() + 0.05) <= 1e-12
    assert np.all(hits.distances[[p[1] == "floor" for p in hits.pairs]] < 0)  # in the floor: not counted


def test_no_warning_without_the_pair_with_an_srdf_or_without_self_collision(tmp_path):
    """The pair removed (``with_pairs``: not checked again), disabled by an SRDF (its links, as
    ``srdf=`` takes them, or the file read by ``load_srdf``), or no self-collision: no warning; without
    self-collision nothing is collided (the scene's cache stays empty)."""
    model = _boxes()
    with pytest.warns(sd.SelfOverlapWarning):
        scene = sd.Scene(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error", sd.SelfOverlapWarning)
        rest = scene.with_pairs(remove=sd.overlapping_pairs(scene))
        assert ("left_0", "right_0") not in rest.pairs and ("left_0", "high_0") in rest.pairs
        assert sd.overlapping_pairs(rest) == []
        disabled = sd.Scene(model, srdf=[("left", "right")])
        assert disabled.pairs == rest.pairs
        path = tmp_path / "boxes.srdf"
        path.write_text('<robot name="boxes"><disable_collisions link1="right" link2="left" reason="Default"/></robot>')
        assert sd.Scene(model, srdf=sd.load_srdf(model, path)).pairs == rest.pairs
        alone = sd.Scene(model, world=[sd.Shape("plane")], self_collision=False)
        assert alone.cache == {} and len(alone.pairs) == 3 and {b for _, b in alone.pairs} == {"plane"}


# At a turn of the right arm by pi / 4 its box is a diamond centred 0.15 m from the axis on the diagonal,
# a corner towards the left box: the least push that parts them is along the diagonal (the separating
# axes of two boxes that share their z axis are those of the square cross-sections), 0.1 sqrt(2) (the
# left box's half-width along the diagonal) + 0.1 (the diamond's) - 0.15 = 91.4 mm.
QUARTER = 0.1 * np.sqrt(2.0) + 0.1 - 0.15


def test_the_check_is_at_the_srdfs_reference_configuration_or_neutral_within_the_limits(tmp_path):
    """With an SRDF, at its first reference configuration (``half_sitting``'s role): the right arm
    turned by pi / 4 puts the pair 91.4 mm deep (``QUARTER``, by hand) where neutral has 50 mm; without
    one, at neutral moved into the joint limits (the right arm's range starting at pi / 4)."""
    model = _boxes()
    path = tmp_path / "boxes.srdf"
    path.write_text('<robot name="boxes"><group name="all"><joint name="j_right"/></group>'
                    f'<group_state name="home" group="all"><joint name="j_right" value="{np.pi / 4!r}"/></group_state>'
                    '</robot>')
    with pytest.warns(sd.SelfOverlapWarning) as got:
        sd.Scene(model, srdf=sd.load_srdf(model, path))
    text = str(got[0].message)
    assert f"at its SRDF's reference configuration 'home': (left_0, right_0) by {1e3 * QUARTER:.1f} mm." in text
    assert "sd.overlapping_pairs(scene, srdf.reference_configurations['home'])" in text
    right = _joint("j_right", "right", 0.0)
    limited = sd.load_urdf(BOXES.replace(right, right.replace('lower="-3"', f'lower="{np.pi / 4!r}"')), geometry=True)
    with pytest.warns(sd.SelfOverlapWarning) as got:
        scene = sd.Scene(limited)
    text = str(got[0].message)
    assert (f"at its neutral configuration (moved into its joint limits): (left_0, right_0) by {1e3 * QUARTER:.1f} mm"
            in text)
    q = np.clip(limited.neutral(), limited.lower, limited.upper)
    hits = sd.collide(scene, q)
    own = [p == ("left_0", "right_0") for p in hits.pairs]
    assert abs(hits.distances[own].min() + QUARTER) <= 1e-9


TIAGO = "tiago_description/robots/tiago.urdf"


def test_tiagos_hand_in_its_safety_box_is_warned_of_as_pinocchio_finds_it():
    """tiago (example-robot-data, no SRDF) at its neutral configuration: its hand's safety box encloses
    the fingers, and more of its shapes overlap.  The warning counts the pairs :func:`overlapping_pairs`
    lists, and those are Pinocchio's (coal on the same shapes, meshes as their convex hulls) among the
    scene's pairs, pairs of two meshes among them.  The five deepest are named, the deepest a finger's box
    58.9 mm into the safety box (by coal: 58.93 mm)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", sd.io.urdf.UrdfWarning)         # its antennas' inertias
        model = sd.load_urdf(robots_dir() / TIAGO, floating_base=True, geometry=True, invalid_inertia="warn",
                             package_dirs=[robots_dir()])
    with pytest.warns(sd.SelfOverlapWarning) as got:
        scene = sd.Scene(model)
    found = sd.overlapping_pairs(scene)
    kind = {s.name: s.kind for s in scene.shapes}
    pins = pinocchios_overlaps(model, model.neutral(), TIAGO, hulls=True) & {frozenset(p) for p in scene.pairs}
    assert {frozenset(p) for p in found} == pins
    assert any(kind[a] == kind[b] == "mesh" for a, b in found)
    text = str(got[0].message)
    assert text.startswith(f"Scene: {len(found)} pairs of robot 'tiago''s own shapes penetrate at its neutral "
                           "configuration: (hand_thumb_virtual_1_link_0, hand_safety_box_0) by 58.9 mm, ")
    assert f"and {len(found) - 5} more." in text and len(found) > 30
    named = [frozenset(m.split(", ")) for m in re.findall(r"\(([^()]*)\) by", text)]
    assert len(named) == 5 and set(named) <= pins
