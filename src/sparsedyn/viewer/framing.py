"""Where a model's shapes are: their points in body coordinates, posed at a configuration; the camera
that frames them and the configuration that stands a floating-base robot on the floor (z = 0).

``parts`` below is ``[(body, points (n, 3) in that body's coordinates)]``, ``body = -1`` for shapes
fixed to the world.
"""

from __future__ import annotations

import numpy as np

from ..algorithms.kinematics import forward_kinematics
from ..model.spatial import pose

__all__ = ["shape_parts", "posed_points", "camera_pose", "standing"]


def shape_parts(geometries, meshes):
    """``parts`` of shapes ``geometries`` with their meshes (:func:`~sparsedyn.viewer.shape_meshes`;
    ``None``: not drawn, skipped): each mesh's vertices placed in its body, ``R v + p``."""
    parts = []
    for g, mesh in zip(geometries, meshes):
        if mesh is None or not len(mesh.vertices):
            continue
        R, p = pose(g.X)
        parts.append((g.body, np.asarray(mesh.vertices, float) @ np.asarray(R, float).T + np.asarray(p, float)))
    return parts


def posed_points(model, q, parts):
    """The points of ``parts`` in the world at configuration ``q`` (nq,): (n, 3)."""
    R, p = forward_kinematics(model, q)
    pts = [x if b < 0 else x @ R[b].T + p[b] for b, x in parts]
    return np.concatenate(pts) if pts else np.zeros((0, 3))


def camera_pose(points, fov, direction=(1.0, -1.0, 0.45), margin=1.08):
    """``(position, look_at)`` of a camera looking along ``-direction`` at the centre of the bounding box
    of ``points`` (n, 3), as far as the sphere about that centre holding every point needs to fill
    the vertical field of view ``fov`` (radians) with ``margin``."""
    if not len(points):
        points = np.zeros((1, 3))
    centre = (points.min(0) + points.max(0)) / 2
    radius = max(float(np.max(np.linalg.norm(points - centre, axis=1))), 0.05)
    u = np.asarray(direction, float) / np.linalg.norm(direction)
    return centre + margin * radius / np.sin(fov / 2) * u, centre


def standing(model, q, parts):
    """``q`` with the floating base (the first free root joint) moved vertically so that the lowest of
    the points of ``parts`` is at z = 0.  ``ValueError`` for a model without a free root joint."""
    roots = [i for i in range(model.nbodies) if model.parent[i] < 0 and model.joints[i].type == "free"]
    if not roots:
        raise ValueError(f"stand: model {model.name!r} has no floating base (a free root joint) to move")
    if not parts:
        return np.array(q, float)
    k = model.q_slice(roots[0]).start + 2              # the joint's z: [x, y, z, qx, qy, qz, qw]
    q = np.array(q, float)
    lift = q.copy()
    lift[k] += 1.0
    low = posed_points(model, q, parts)[:, 2].min()
    # The points move rigidly with the joint's z, by the world z of its axis (1 unless the joint's
    # placement tilts it).
    per_unit = posed_points(model, lift, parts)[:, 2].min() - low
    if abs(per_unit) < 1e-9:
        raise ValueError(f"stand: the floating base of model {model.name!r} cannot move vertically (its "
                         f"joint's z axis lies in the floor)")
    q[k] -= low / per_unit
    return q
