"""What the collision layer knows of a scene (sparsedyn.contact.scene_base): the base class it tests
arguments against, and the memo of what it derives from a scene."""

import sparsedyn as sd
from sparsedyn.contact.scene_base import SceneBase, remembered


class _Holder:
    def __init__(self):
        self.cache = {}


def test_a_scene_is_a_scene_base_and_other_objects_are_not():
    urdf = ('<robot name="one"><link name="base"><collision><geometry><sphere radius="0.1"/></geometry>'
            '</collision></link></robot>')
    scene = sd.Scene(sd.load_urdf(urdf, geometry=True), world=[sd.Shape("plane")])
    assert isinstance(scene, SceneBase) and not isinstance(object(), SceneBase)


def test_remembered_makes_each_key_once_and_empties_a_full_memo():
    """Two calls with one key make it once (the second returns the first's object); a memo of ``most``
    entries is emptied before a new key enters, so the earlier keys are made again."""
    holder, made = _Holder(), []

    def make(k):
        return lambda: made.append(k) or [k]
    first = remembered(holder, "m", "a", make("a"), most=2)
    assert remembered(holder, "m", "a", make("a"), most=2) is first and made == ["a"]
    remembered(holder, "m", "b", make("b"), most=2)
    assert set(holder.cache["m"]) == {"a", "b"}
    remembered(holder, "m", "c", make("c"), most=2)                 # full: emptied, then "c" alone
    assert set(holder.cache["m"]) == {"c"}
    assert remembered(holder, "m", "a", make("a"), most=2) is not first and made == ["a", "b", "c", "a"]
