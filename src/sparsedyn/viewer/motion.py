"""The motion ``sparsedyn view`` plays, read from files: configurations (``--q``) or a recording
(``--recording``), with the contact forces of the recording or of its estimates."""

from __future__ import annotations

from pathlib import Path

import numpy as np

__all__ = ["read_motion"]


def read_motion(model, q_file=None, recording=None, dt=None, estimates=None):
    """``(qs (T, nq), dt, contacts or None)`` of ``sparsedyn view``: ``--q FILE`` (one configuration or
    one per row: .npy, .txt, .csv), or ``--recording REC`` (a recording of :mod:`sparsedyn.io.recordings`,
    its ``q``), with contact forces ``contact[<frame>]`` (T, 6) from the recording or from ``estimates``
    (the output of ``sparsedyn estimate --recording``).  ``dt``: seconds between rows (default 0.01).
    Errors name the file and what was expected."""
    dt = 0.01 if dt is None else float(dt)
    if not (np.isfinite(dt) and dt > 0):
        raise ValueError(f"--dt: expected a positive number of seconds, got {dt}")
    contacts = None
    if recording is not None:
        from ..io.recordings import open_recording
        rec, source = open_recording(recording), recording
        if "q" not in rec.names:
            raise ValueError(f"{recording}: a recording holds the configurations 'q' (T, nq); it has {rec.names}")
        qs = rec.rows("q", 0, rec.shape("q")[0])
        contacts = {}
        for f in [rec] + ([open_recording(estimates)] if estimates else []):
            for n in f.names:
                if n.startswith("contact[") and n.endswith("]"):
                    contacts[n[len("contact["):-1]] = f.rows(n, 0, f.shape(n)[0])
        contacts = contacts or None
    else:
        if estimates:
            raise ValueError("--estimates goes with --recording (the estimates of its states)")
        source = q_file
        try:
            qs = np.load(q_file) if Path(q_file).suffix == ".npy" else \
                np.loadtxt(q_file, delimiter="," if Path(q_file).suffix == ".csv" else None, ndmin=2)
        except (OSError, ValueError) as e:
            raise ValueError(f"{q_file}: cannot read configurations (.npy, or numbers in .txt / .csv): {e}") from None
    qs = np.atleast_2d(np.asarray(qs, float))
    if qs.ndim != 2 or qs.shape[1] != model.nq:
        raise ValueError(f"{source}: expected configurations of model {model.name!r} with nq = {model.nq} numbers "
                         f"per row, got an array of shape {np.shape(qs)}")
    for name, F in (contacts or {}).items():
        if name not in model.frame_names:
            raise ValueError(f"{estimates or source}: contact[{name}]: {name!r} is no frame of model {model.name!r} "
                             f"(the viewer draws a contact at the frame of its name)")
        if np.shape(F) != (len(qs), 6):
            raise ValueError(f"{estimates or source}: contact[{name}] has shape {np.shape(F)}, expected "
                             f"({len(qs)}, 6): one wrench per configuration")
    return qs, dt, contacts
