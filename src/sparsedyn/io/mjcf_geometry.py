"""The geoms of a compiled MJCF model as :class:`~sparsedyn.model.Geometry`, with MuJoCo's collision filter.

:func:`geometries` is what ``load_mjcf(..., geometry=True)`` keeps (shapes, sizes, colours and
frictions: :mod:`sparsedyn.io.mjcf`'s docstring).  Each collision geometry also carries what decides,
in MuJoCo's ``mj_collision``, which geom pairs are checked, so that a :class:`~sparsedyn.Scene` of the
model checks the same pairs:

* ``contype`` / ``conaffinity``: the geom's bit masks; two geoms may touch when
  ``(contype_a & conaffinity_b) | (contype_b & conaffinity_a)`` is non-zero;
* ``exclude``: the geoms of the bodies MuJoCo never pairs with the geom's body, which are

  - the parent-child filter, on weld groups (a body and the bodies welded to it, without joints in
    between): a body's weld group and the weld group of its parent, unless one of the two is welded
    to the world (a fixed base touches its first links) or the file disables it
    (``<flag filterparent="disable"/>``);
  - the body pairs of ``<contact><exclude body1 body2/>``.

  Geoms of one weld group are on one body of the Model, which a scene never pairs with itself;
* ``pairs``: ``<contact><pair geom1 geom2/>``, checked whatever the masks and filters, with the pair's
  sliding friction (0 where the pair's own ``condim`` is 1).  A geom named in a pair is a collision geometry even with zero masks.
"""

from __future__ import annotations

import numpy as np

from ..model import Geometry
from .mjcf_joints import _list, _name, _pose, _quat_wxyz, _transform

__all__ = ["geometries"]

# mjtGeom values -> our shape names (SDFs have none)
_GEOM_SHAPES = {0: "plane", 1: "hfield", 2: "sphere", 3: "capsule", 4: "ellipsoid", 5: "cylinder", 6: "box",
                7: "mesh"}
_DEFAULT_RGBA = (0.5, 0.5, 0.5, 1.0)


def geometries(m, model, extra):
    """``(geometries, notes)`` of the compiled model ``m`` translated to ``model`` (``extra``: what
    the translation kept, per MuJoCo body its host body and pose); ``notes`` lists what has no shape here."""
    names = [_name(m, "geom", g) for g in range(m.ngeom)]
    shaped = [g for g in range(m.ngeom) if int(m.geom_type[g]) in _GEOM_SHAPES]
    pairs, notes = {}, []
    for k in range(m.npair):
        g1, g2 = int(m.pair_geom1[k]), int(m.pair_geom2[k])
        if g1 in shaped and g2 in shaped:
            mu = 0.0 if int(m.pair_dim[k]) == 1 else float(m.pair_friction[k][0])     # condim 1: frictionless
            pairs.setdefault(g1, []).append((names[g2], mu))
        else:
            notes.append(f"{_name(m, 'pair', k)} ({names[g1]}, {names[g2]})")
    in_pair = {int(g) for g in m.pair_geom1} | {int(g) for g in m.pair_geom2}
    colliding = [g for g in shaped if int(m.geom_contype[g]) or int(m.geom_conaffinity[g]) or g in in_pair]
    filtered = _filtered_bodies(m)
    out = []
    for g in shaped:
        exclude = tuple(names[h] for h in colliding if filtered(int(m.geom_bodyid[g]), int(m.geom_bodyid[h])))
        collision = dict(contype=int(m.geom_contype[g]), conaffinity=int(m.geom_conaffinity[g]), exclude=exclude,
                         pairs=tuple(pairs.get(g, ())))
        geometry = _geometry(m, model, extra, g, names[g])
        if int(m.geom_group[g]) <= 2:
            out.append(geometry)
        if g in colliding:
            out.append(geometry._replace(kind="collision", **collision))
    skipped = [names[g] for g in range(m.ngeom) if g not in shaped]
    if skipped:
        notes = [f"{len(skipped)} SDF geom(s) ({_list(skipped)})"] + \
            ([f"contact pairs naming them ({_list(notes)})"] if notes else [])
    return out, notes


def _geometry(m, model, extra, g, name):
    """The visual :class:`~sparsedyn.model.Geometry` of geom ``g``."""
    b = int(m.geom_bodyid[g])
    host, T = extra["host"][b], extra["T_host"][b] @ _pose(_quat_wxyz(m.geom_quat[g]), m.geom_pos[g])
    size = np.array(m.geom_size[g], float)
    shape, vertices, faces, heights = _GEOM_SHAPES[int(m.geom_type[g])], None, None, None
    size = {"plane": 2 * size[:2], "sphere": size[:1], "capsule": [size[0], 2 * size[1]], "ellipsoid": size,
            "cylinder": [size[0], 2 * size[1]], "box": 2 * size, "mesh": np.ones(3), "hfield": None}[shape]
    if shape == "hfield":
        size, heights = _hfield(m, int(m.geom_dataid[g]))
    if shape == "mesh":
        k = int(m.geom_dataid[g])
        v0, f0 = int(m.mesh_vertadr[k]), int(m.mesh_faceadr[k])
        vertices = np.array(m.mesh_vert[v0:v0 + int(m.mesh_vertnum[k])], float)
        faces = np.array(m.mesh_face[f0:f0 + int(m.mesh_facenum[k])], int)
    rgba = tuple(float(c) for c in m.geom_rgba[g])
    if int(m.geom_matid[g]) >= 0 and np.allclose(rgba, _DEFAULT_RGBA, rtol=0, atol=1e-6):
        rgba = tuple(float(c) for c in m.mat_rgba[int(m.geom_matid[g])])
    body = -1 if host is None else model.body(host)
    return Geometry(name, body, _transform(T), shape, tuple(size), "visual", None, rgba, extra["body_names"][b],
                    vertices, faces, float(m.geom_friction[g][0]), priority=int(m.geom_priority[g]), heights=heights,
                    condim=int(m.geom_condim[g]))


def _hfield(m, k):
    """``(size (sx, sy, top, base), heights (nrow, ncol))`` of height field ``k``, as MuJoCo's compiler
    normalised it (a PNG file or the inline ``elevation``, scaled to [0, 1]; ``hfield_data``: row 0 at
    ``y = -sy``)."""
    nrow, ncol, adr = int(m.hfield_nrow[k]), int(m.hfield_ncol[k]), int(m.hfield_adr[k])
    H = np.array(m.hfield_data[adr:adr + nrow * ncol], float).reshape(nrow, ncol)
    return np.array(m.hfield_size[k], float), np.clip(H, 0.0, 1.0)     # float32 data: kept in [0, 1]


def _filtered_bodies(m):
    """``filtered(b1, b2)``: whether MuJoCo never pairs the geoms of MuJoCo bodies ``b1`` and ``b2`` of
    different weld groups (the parent-child filter on weld groups, ``<exclude>``)."""
    import mujoco
    weld, parent = np.asarray(m.body_weldid, int), np.asarray(m.body_parentid, int)
    filter_parent = not int(m.opt.disableflags) & int(mujoco.mjtDisableBit.mjDSBL_FILTERPARENT)
    excluded = set()
    for s in np.asarray(m.exclude_signature, np.int64):
        a, b = int(s) >> 16, int(s) & 0xFFFF
        excluded |= {(a, b), (b, a)}

    def filtered(b1, b2):
        w1, w2 = weld[b1], weld[b2]
        if w1 == w2:
            return False                      # one body of the Model (or both the world): never paired anyway
        if filter_parent and w1 != 0 and w2 != 0 and (w1 == weld[parent[w2]] or w2 == weld[parent[w1]]):
            return True
        return (b1, b2) in excluded
    return filtered
