"""Triangle meshes of a model's shapes for the viewer (read with trimesh, on first use).

Every :class:`~sparsedyn.model.Geometry` becomes one ``trimesh.Trimesh`` in its own frame: primitives
are built by ``trimesh.creation``, mesh files are read once per path (cached) and scaled, MJCF's
compiled triangles are used as they are.  A mesh file that does not exist or cannot be read is
reported, not raised: :func:`shape_meshes` returns ``None`` for it and lists it, and the viewer shows
the rest.
"""

from __future__ import annotations

import functools
import os

import numpy as np

__all__ = ["shape_mesh", "shape_meshes", "read_mesh", "need", "MeshReadError", "VIEWER_INSTALL_HINT"]

#: What to install when the viewer's dependencies are missing.
VIEWER_INSTALL_HINT = "pip install 'sparsedyn[viewer]' (viser and trimesh)"


class MeshReadError(ValueError):
    """A mesh file that cannot be read (unsupported format or corrupt); the message names the file."""


def need(name):
    """The module ``name`` (``"viser"``, ``"trimesh"``), or an ImportError saying what to install."""
    import importlib
    try:
        return importlib.import_module(name)
    except ImportError:
        raise ImportError(f"sparsedyn's viewer needs {name}: {VIEWER_INSTALL_HINT}") from None


def _trimesh():
    return need("trimesh")


@functools.lru_cache(maxsize=512)
def read_mesh(path: str):
    """The triangles of the mesh file ``path`` as one ``trimesh.Trimesh`` (cached per path; the
    file's own colours kept where the format has them).  Raises ``FileNotFoundError`` or
    :class:`MeshReadError` naming the file."""
    trimesh = _trimesh()
    if not os.path.isfile(path):
        raise FileNotFoundError(f"mesh file not found: {path}")
    try:
        loaded = trimesh.load(path, force="scene")
        mesh = loaded.to_mesh() if hasattr(loaded, "to_mesh") else loaded.dump(concatenate=True)
    except Exception as e:        # trimesh raises many kinds for foreign or damaged files
        raise MeshReadError(f"{path}: cannot read the mesh ({type(e).__name__}: {e})") from None
    if not isinstance(mesh, trimesh.Trimesh) or len(mesh.faces) == 0 or not np.all(np.isfinite(mesh.vertices)):
        raise MeshReadError(f"{path}: the file holds no finite triangles (unsupported format or corrupt)")
    return mesh


def shape_mesh(g):
    """``trimesh.Trimesh`` of one :class:`~sparsedyn.model.Geometry` in the shape's own frame."""
    trimesh = _trimesh()
    c = trimesh.creation
    s = g.size
    if g.shape == "box":
        return c.box(extents=s)
    if g.shape == "sphere":
        return c.icosphere(subdivisions=3, radius=s[0])
    if g.shape == "ellipsoid":
        m = c.icosphere(subdivisions=3, radius=1.0)
        m.apply_scale(s)
        return m
    if g.shape == "cylinder":
        return c.cylinder(radius=s[0], height=s[1], sections=32)
    if g.shape == "capsule":
        return c.capsule(height=s[1], radius=s[0], count=[32, 16])
    if g.shape == "plane":
        return c.box(extents=(s[0] or 20.0, s[1] or 20.0, 1e-3))     # an unbounded plane: 20 m wide
    if g.shape == "hfield":                                          # its surface's triangles
        from ..contact.heightfield import hfield_mesh
        return trimesh.Trimesh(*hfield_mesh(s, g.heights), process=False)
    if g.vertices is not None:
        mesh = trimesh.Trimesh(g.vertices, g.faces, process=False)
    else:
        mesh = read_mesh(g.mesh).copy()
    scale = np.asarray(s, float)
    if np.any(scale != 1.0):
        mesh.apply_transform(np.diag(np.append(scale, 1.0)))            # a negative scale mirrors
    return mesh


def shape_meshes(geometries):
    """``(meshes, missing, unreadable)``: one mesh per geometry (``None`` where its file is missing
    or unreadable), the geometries whose mesh file does not exist, and ``(geometry, reason)`` for the
    files that cannot be read."""
    meshes, missing, unreadable = [], [], []
    for g in geometries:
        try:
            meshes.append(shape_mesh(g))
        except FileNotFoundError:
            meshes.append(None)
            missing.append(g)
        except MeshReadError as e:
            meshes.append(None)
            unreadable.append((g, str(e)))
    return meshes, missing, unreadable
