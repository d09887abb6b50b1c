"""What the collision layer needs of a :class:`~sparsedyn.Scene` without importing its module:
:class:`SceneBase`, the class :func:`~sparsedyn.collide` takes, and :func:`remembered`, the memo of
what it derives from a scene.  (A scene's constructor collides its robot at its reference configuration,
:func:`~sparsedyn.contact.overlaps.warn_self_overlaps`: so the collision modules cannot import it.)
"""

from __future__ import annotations

__all__ = ["SceneBase", "remembered"]


class SceneBase:
    """The base of :class:`~sparsedyn.Scene` (its only subclass): what the collision modules test a
    scene argument against."""

    __slots__ = ()


def remembered(scene, name, key, make, most=256):
    """``make()``, kept in ``scene.cache[name]`` under ``key`` (what depends on the scene and ``key``
    alone); the memo is emptied when it holds ``most`` entries (a simulation's contact sets recur, but
    their number is not bounded)."""
    memo = scene.cache.setdefault(name, {})
    got = memo.get(key)
    if got is None:
        if len(memo) >= most:
            memo.clear()
        got = memo[key] = make()
    return got
