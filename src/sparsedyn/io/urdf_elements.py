"""URDF elements: reading the XML safely and parsing ``<link>``, ``<inertial>``, ``<origin>`` and
``<joint>`` with errors that name the source and the element (see :mod:`sparsedyn.io.urdf` for the
conventions; :func:`~sparsedyn.io.urdf.load_urdf` assembles the model from them)."""

from __future__ import annotations

import math
import os
import re
import sys
import warnings

import defusedxml.ElementTree as DET
import numpy as np

from .. import _checks
from ..model import spatial
from ..model.model import MAX_LENGTH, MAX_MASS, ModelError
from .files import clip, max_file_bytes, read_bytes, shorten, xml_errors

__all__ = ["UrdfError", "UrdfWarning"]

JOINT_TYPE_MAP = {"revolute": "revolute", "continuous": "continuous", "prismatic": "prismatic",
                  "floating": "free", "planar": "planar", "fixed": None}
INERTIA_KEYS = ("ixx", "ixy", "ixz", "iyy", "iyz", "izz")
EIG_TOL = 1e-12         # negative principal moments tolerated, relative to the robot's largest one
TRIANGLE_TOL = 1e-3     # relative slack in a + b >= c (inertias are often printed with few digits)
DBL_MAX = sys.float_info.max
_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")
_NONFINITE = re.compile(r"[+-]?(?:nan|inf|infinity)\Z", re.IGNORECASE)


class UrdfError(ModelError):
    """A URDF that cannot be loaded; the message names the file, the element and the problem."""

    def __init__(self, message):
        super().__init__(shorten(str(message)))


class UrdfWarning(UserWarning):
    """A URDF that loads but has physically implausible data."""


# --- reading ----------------------------------------------------------------------

def _read_xml(source, max_bytes=None):
    """``(label, root element)``; ``label`` is the path or ``'<string>'`` for error messages."""
    head = source.lstrip("\ufeff \t\r\n") if isinstance(source, str) else ""
    if head.startswith("<"):
        # An XML declaration must open the document; otherwise keep the text so line numbers stay right.
        label, text = "<string>", head if head.startswith("<?xml") else source
        limit = max_file_bytes(max_bytes)
        if len(text) > limit:
            raise UrdfError(f"<string>: the URDF has {len(text)} characters, more than the limit of {limit} "
                            f"(pass max_bytes= or set SPARSEDYN_MAX_FILE_BYTES to read larger ones)")
    elif isinstance(source, (str, os.PathLike)):
        label = os.fspath(source)
        if not isinstance(label, str):
            label = os.fsdecode(label)
        text = read_bytes(label, UrdfError, "URDF file", max_bytes)
    else:
        raise TypeError(f"load_urdf: expected a path or a URDF XML string, got {type(source).__name__}")
    with xml_errors(label, UrdfError, "URDF"):
        root = DET.fromstring(text)
    for el in root.iter():
        if isinstance(el.tag, str) and el.tag.startswith("{"):
            el.tag = el.tag.split("}", 1)[1]   # a namespaced <robot xmlns=...> reads like a plain one
    if root.tag != "robot":
        raise UrdfError(f"{label}: root element is <{root.tag}>, expected <robot>")
    return label, root


_ZERO3 = (0.0, 0.0, 0.0)
_EYE3 = np.eye(3)
_EYE3.setflags(write=False)


class _Parser:
    """Attribute parsing with error messages that name the source and element."""

    def __init__(self, label):
        self.label = label

    def fail(self, where, problem):
        raise UrdfError(f"{self.label}: {where}: {problem}")

    def name(self, el, where, attr="name"):
        value = el.get(attr)
        if not value:
            self.fail(where, f"missing required attribute {attr!r}")
        return value

    def floats(self, el, attr, where, n, default=None, bound=MAX_LENGTH, unit="m"):
        """``n`` whitespace-separated finite numbers of magnitude at most ``bound`` (None: any finite
        value); ``default`` if the attribute is absent."""
        text = el.get(attr)
        if text is None:
            if default is None:
                self.fail(where, f"missing required attribute {attr!r}")
            return np.array(default, float)
        tokens = text.split()
        if len(tokens) != n:
            self.fail(where, f"{attr}={clip(text)}: expected {n} number{'s' if n > 1 else ''}, got "
                             f"{len(tokens) if len(tokens) < 10 else 'more'}")
        return np.array(self._values(tokens, text, attr, where, bound, unit))

    def _values(self, tokens, text, attr, where, bound, unit):
        values = []
        for t in tokens:
            if not _NUMBER.match(t):
                if _NONFINITE.match(t):
                    self.fail(where, f"{attr}={clip(text)}: NaN and infinite values are not allowed")
                self.fail(where, f"{attr}={clip(text)}: {clip(t, 40)} is not a number")
            x = float(t)
            if not math.isfinite(x):
                self.fail(where, f"{attr}={clip(text)}: value out of floating-point range")
            if bound is not None and abs(x) > bound:
                self.fail(where, f"{attr}={clip(text)}: {t} is out of range (magnitude at most {bound:g} {unit})")
            values.append(x)
        return values

    def scalar(self, el, attr, where, default=None, bound=MAX_LENGTH, unit="m"):
        text = el.get(attr)
        if text is None:
            if default is None:
                self.fail(where, f"missing required attribute {attr!r}")
            return float(default)
        tokens = text.split()
        if len(tokens) != 1:
            self.fail(where, f"{attr}={clip(text)}: expected 1 number, got {len(tokens) if len(tokens) < 10 else 'more'}")
        return self._values(tokens, text, attr, where, bound, unit)[0]

    def limit(self, el, attr, where, default=None):
        """A limit value; the largest double stands for infinity (see the module docstring)."""
        x = self.scalar(el, attr, where, default, bound=None)
        return math.copysign(math.inf, x) if abs(x) >= DBL_MAX else x

    def origin(self, parent, where):
        """Pose ``(R, p)`` of an optional ``<origin xyz rpy>`` child of ``parent``."""
        el = parent.find("origin")
        if el is None:
            return np.eye(3), np.zeros(3)
        where = f"{where} <origin>"
        rpy = self.floats(el, "rpy", where, 3, _ZERO3, bound=MAX_LENGTH, unit="rad")
        R = _EYE3 if rpy is _ZERO3 or not rpy.any() else spatial.rpy_to_rot(rpy)
        return R, self.floats(el, "xyz", where, 3, _ZERO3)


def _parse_link(P, el):
    """``(name, spatial inertia about the link origin in link axes, principal moments ascending)``."""
    name = P.name(el, "<link>")
    inertial = el.find("inertial")
    if inertial is None:
        return name, np.zeros((6, 6)), np.zeros((3, 3))
    where = f"link {name!r} <inertial>"
    R, com = P.origin(inertial, where)
    mass_el, inertia_el = inertial.find("mass"), inertial.find("inertia")
    if mass_el is None:
        P.fail(where, "missing required element <mass>")
    if inertia_el is None:
        P.fail(where, "missing required element <inertia>")
    m = P.scalar(mass_el, "value", f"{where} <mass>", bound=MAX_MASS, unit="kg")
    if m < 0:
        P.fail(where, f"negative mass {m}")
    ixx, ixy, ixz, iyy, iyz, izz = (P.scalar(inertia_el, k, f"{where} <inertia>", bound=MAX_MASS * MAX_LENGTH ** 2,
                                             unit="kg m^2") for k in INERTIA_KEYS)
    I = np.array([[ixx, ixy, ixz], [ixy, iyy, iyz], [ixz, iyz, izz]])
    return name, _spatial_inertia(m, com, I if R is _EYE3 else R @ I @ R.T), I


def _spatial_inertia(m, c, Ic):
    """:func:`sparsedyn.model.spatial.mcI` for one float body, the same operations without batch machinery
    (a URDF of thousands of links calls it once per link)."""
    cx, cy, cz = c
    C = np.array([[0.0, -cz, cy], [cz, 0.0, -cx], [-cy, cx, 0.0]])
    out = np.zeros((6, 6))
    out[:3, :3] = Ic + m * (C @ C.T)
    out[:3, 3:] = m * C
    out[3:, :3] = m * C.T
    out[3, 3] = out[4, 4] = out[5, 5] = m
    return out


def _check_moments(P, moments, invalid_inertia):
    """Reject negative principal moments (or warn, if asked); warn once about triangle-inequality violations.

    Tolerances are relative to the largest principal moment of the whole robot,
    so that exporter noise (icub has moments of +-1e-20 kg m^2) reads as zero.
    """
    noise = EIG_TOL * max((abs(lam).max() for lam in moments.values()), default=0.0)
    negative = [name for name, lam in moments.items() if lam[0] < -noise]
    if negative and invalid_inertia == "error":
        name = negative[0]
        P.fail(f"link {name!r} <inertial>",
               f"inertia matrix has a negative eigenvalue {moments[name][0]:.6g} (principal moments "
               f"{moments[name].tolist()}); it must be positive semi-definite (pass invalid_inertia='warn', "
               f"or --invalid-inertia warn on the command line, to load the file as written)")
    if negative:
        warnings.warn(f"{P.label}: inertia matrices with a negative eigenvalue (not a physical rigid body; "
                      f"loaded as written, dynamics involving them are meaningless) on links: "
                      f"{', '.join(negative)}", UrdfWarning, stacklevel=_checks.user_stacklevel())
    bad = [name for name, (a, b, c) in moments.items() if c > noise and a + b < c * (1 - TRIANGLE_TOL)]
    if bad:
        warnings.warn(f"{P.label}: principal moments of inertia violate the triangle inequality a + b >= c "
                      f"(not a physical rigid body) on links: {', '.join(bad)}", UrdfWarning,
                      stacklevel=_checks.user_stacklevel())


class _JointSpec:
    """One URDF ``<joint>``, parsed and checked."""

    def __init__(self, P, el):
        self.name = name = P.name(el, "<joint>")
        where = f"joint {name!r}"
        urdf_type = P.name(el, where, "type")
        if urdf_type not in JOINT_TYPE_MAP:
            P.fail(where, f"unknown joint type {urdf_type!r}; known types: {', '.join(sorted(JOINT_TYPE_MAP))}")
        self.type = JOINT_TYPE_MAP[urdf_type]
        for tag in ("parent", "child"):
            link_el = el.find(tag)
            if link_el is None:
                P.fail(where, f"missing required element <{tag}>")
            setattr(self, tag, P.name(link_el, f"{where} <{tag}>", "link"))
        R, p = P.origin(el, where)
        self.X = spatial.from_pose(R, p)           # child_X_parent at q = 0
        axis_el = el.find("axis")
        self.axis = (np.array([1.0, 0.0, 0.0]) if axis_el is None
                     else P.floats(axis_el, "xyz", f"{where} <axis>", 3))
        if self.type in ("revolute", "continuous", "prismatic") and np.linalg.norm(self.axis) < 1e-12:
            P.fail(f"{where} <axis>", "axis must be a nonzero vector")
        if self.type == "planar" and not (abs(self.axis[0]) + abs(self.axis[1]) == 0 and self.axis[2] > 0):
            P.fail(where, f"planar joints are supported only with <axis xyz=\"0 0 1\"> (motion in the xy plane "
                          f"of the joint frame), got axis {self.axis.tolist()}")
        self.lower, self.upper, self.velocity, self.effort = -math.inf, math.inf, math.inf, math.inf
        limit_el = el.find("limit")
        if limit_el is not None and self.type in ("revolute", "continuous", "prismatic"):
            lw = f"{where} <limit>"
            self.effort = P.limit(limit_el, "effort", lw)
            self.velocity = P.limit(limit_el, "velocity", lw)
            if self.type != "continuous":
                self.lower = P.limit(limit_el, "lower", lw, 0.0)
                self.upper = P.limit(limit_el, "upper", lw, 0.0)
                if self.lower > self.upper:
                    P.fail(lw, f"lower limit {self.lower} is greater than upper limit {self.upper}")
        self.mimic = None
        mimic_el = el.find("mimic")
        if mimic_el is not None:
            mw = f"{where} <mimic>"
            self.mimic = (P.name(mimic_el, mw, "joint"), P.scalar(mimic_el, "multiplier", mw, 1.0, unit=""),
                          P.scalar(mimic_el, "offset", mw, 0.0, unit=""))
