"""What the viewer adds to a scene beside the model: contact forces given as arguments (checked), and
:class:`Animation`, a recorded scene as one standalone page."""

from __future__ import annotations

import numpy as np

__all__ = ["Animation", "contact_items", "contact_forces"]


class Animation:
    """A recorded scene and trajectory as one standalone HTML page (:meth:`~sparsedyn.viewer.recording.Recording.animation`): shown
    inline by notebooks and sphinx-gallery (``_repr_html_``), written with :meth:`save`."""

    def __init__(self, html, height=400):
        self.html, self.height = html, int(height)

    def save(self, path):
        """Write the page to ``path`` (opened by any browser, without Python); returns the path."""
        from pathlib import Path
        path = Path(path)
        path.write_text(self.html, encoding="utf-8")
        return path

    def _repr_html_(self):
        import html
        return (f'<iframe srcdoc="{html.escape(self.html, quote=True)}" width="100%" height="{self.height}" '
                f'style="border:1px solid #ddd"></iframe>')

    def __repr__(self):
        return f"Animation({len(self.html)} characters of HTML)"


def contact_items(model, forces):
    """``[(frame name, forces)]`` from a dict or an estimate (its contacts at their frames)."""
    problem = getattr(forces, "problem", None)
    if problem is not None and hasattr(forces, "contacts"):
        by_name = {c.name: c.frame for c in problem.contacts}
        return [(by_name[name], w) for name, w in forces.contacts.items()]
    if not isinstance(forces, dict):
        raise TypeError(f"contacts: expected {{frame name: force}} or an estimate, got {type(forces).__name__}")
    for name in forces:
        model.frame(name)                            # a clear error naming the frame
    return list(forces.items())


def contact_forces(model, forces):
    """``(frame names, forces (nc, 3 or 6))`` of one configuration."""
    items = contact_items(model, forces)
    names, rows = [], []
    for name, F in items:
        F = np.asarray(F, float)
        if F.shape not in ((6,), (3,)) or not np.all(np.isfinite(F)):
            raise ValueError(f"contacts[{name!r}]: expected a finite wrench (6,) or force (3,), got shape {F.shape}")
        names.append(name)
        rows.append(F if F.shape == (6,) else np.concatenate([np.zeros(3), F]))
    return names, np.array(rows).reshape(len(rows), 6)
