"""The browser viewer (viser): a model's shapes posed by its own kinematics, trajectories with a
timeline, overlays (frames, centre of mass, contact forces, joint names), recordings.

``pip install 'sparsedyn[viewer]'`` installs viser and trimesh; nothing here is imported with
``sparsedyn`` itself (``sd.Viewer`` imports it on first use).
"""

from .meshes import MeshReadError, read_mesh, shape_mesh, shape_meshes
from .viewer import Animation, Viewer, ViewerWarning

__all__ = ["Viewer", "ViewerWarning", "Animation", "MeshReadError", "read_mesh", "shape_mesh", "shape_meshes"]
