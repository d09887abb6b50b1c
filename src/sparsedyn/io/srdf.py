"""SRDF reader (the Semantic Robot Description Format of MoveIt, as Pinocchio reads it).

``load_srdf(model, path)`` reads what the dynamics of ``model`` can use and keeps the rest as data:

* ``<group_state name=... group=...>`` with ``<joint name=... value=.../>``: named reference
  configurations (``half_sitting`` of Talos, ``standing`` of Solo), as full configurations (nq,)
  starting from ``model.neutral()`` (Pinocchio's ``loadReferenceConfigurations``).  A joint takes
  as many values as its ``nq`` in *our* layout (a continuous joint one angle; a free joint
  ``x y z qx qy qz qw``); quaternions must have unit norm (within ``QUAT_TOL``) and are normalised.
* ``<rotor_params>`` with ``<joint name=... mass=... gear_ratio=.../>``: rotor inertias and gear
  ratios per dof (Pinocchio's ``loadRotorParameters``: ``mass`` is the rotor inertia); the
  reflected inertia ``rotor_inertia * gear_ratio**2`` is the armature that
  :meth:`Srdf.with_armature` applies on request.
* ``<disable_collisions link1 link2 reason/>``: kept as data (``disabled_collisions``).

Joints the model does not have (or that it merged as fixed joints) are skipped with one
:class:`SrdfWarning` naming them.  An SRDF is untrusted input, read like a URDF
(:mod:`sparsedyn.io.urdf`): ``defusedxml`` (no entities, no external references), regular files of
bounded size only (:mod:`sparsedyn.io.files`), and every problem raises one :class:`SrdfError` naming
the file, the line and the element.
"""

from __future__ import annotations

import math
import re
import textwrap
import warnings
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field

import defusedxml.ElementTree as DET
import numpy as np

from .. import _checks
from .._checks import QUAT_TOL
from ..model import Model, ModelError
from .files import checked_path, clip, clip_list, read_bytes, shorten, xml_errors

__all__ = ["load_srdf", "Srdf", "SrdfError", "SrdfWarning"]

_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?\Z")


class SrdfError(ModelError):
    """An SRDF that cannot be read; the message names the file, the line and the element."""

    def __init__(self, message):
        super().__init__(shorten(str(message)))


class SrdfWarning(UserWarning):
    """An SRDF that names joints the model does not have."""


@dataclass(frozen=True)
class Srdf:
    """What :func:`load_srdf` read for ``model``.

    ``reference_configurations``: name -> configuration (nq,) (group states, in file order);
    ``rotor_inertia``, ``gear_ratio`` (nv,): per dof, 0 and 1 where the file says nothing;
    ``disabled_collisions``: ``(link1, link2, reason)`` triples; ``groups``: group name -> the joint
    names it lists; ``unknown_joints``: names the file uses that ``model`` has no moving joint for.
    """

    model: Model
    source: str
    robot_name: str
    reference_configurations: dict
    rotor_inertia: np.ndarray
    gear_ratio: np.ndarray
    disabled_collisions: tuple = ()
    groups: dict = field(default_factory=dict)
    unknown_joints: tuple = ()

    @property
    def armature(self) -> np.ndarray:
        """The reflected rotor inertia ``rotor_inertia * gear_ratio**2`` (nv,) [kg m^2 or kg]."""
        return self.rotor_inertia * self.gear_ratio ** 2

    def with_armature(self, model: Model | None = None) -> Model:
        """``model`` (default the model read for) with the armature of the dofs that have rotor
        parameters set to :attr:`armature`; other dofs keep theirs."""
        model = self.model if model is None else model
        if model.nv != self.model.nv or model.joint_names != self.model.joint_names:
            raise ValueError(f"with_armature: model {model.name!r} does not have the joints of the model "
                             f"{self.model.name!r} the SRDF was read for")
        has = self.rotor_inertia != 0
        return model.with_armature(np.where(has, self.armature, model.armature))

    def summary(self) -> str:
        """A few lines for people (``sparsedyn info MODEL --srdf FILE``): the reference
        configurations, the rotor parameters and the disabled collision pairs."""
        m = self.model
        out = [f"SRDF {self.source} (robot {self.robot_name!r}):"]
        for name, q in self.reference_configurations.items():
            out.append(f"  reference configuration {name!r}: " + ", ".join(
                f"{m.joint_names[i]}={_fmt(q[m.q_slice(i)])}" for i in range(m.nbodies)
                if not np.array_equal(q[m.q_slice(i)], m.joints[i].neutral())) or "  (neutral)")
        has = np.flatnonzero(self.rotor_inertia)
        if len(has):
            out.append(f"  rotor parameters on {len(has)} dofs (inertia, gear ratio -> armature I g^2): " + ", ".join(
                f"{m.joint_names[m.dof_body[k]]} ({self.rotor_inertia[k]:.3g}, {self.gear_ratio[k]:.3g} -> "
                f"{self.armature[k]:.3g})" for k in has))
        else:
            out.append("  rotor parameters: none")
        out.append(f"  disabled collision pairs: {len(self.disabled_collisions)}"
                   + (" (" + ", ".join(f"{a}-{b}" for a, b, _ in self.disabled_collisions[:4])
                      + (", ..." if len(self.disabled_collisions) > 4 else "") + ")" if self.disabled_collisions else ""))
        if self.unknown_joints:
            out.append(f"  joints the model lacks (ignored): {clip_list(self.unknown_joints)}")
        return "\n".join(textwrap.fill(line, 110, subsequent_indent="      ") for line in out)

    def __repr__(self):
        return (f"Srdf({self.robot_name!r}, reference_configurations={list(self.reference_configurations)}, "
                f"rotor dofs={int(np.count_nonzero(self.rotor_inertia))}, "
                f"disabled collision pairs={len(self.disabled_collisions)})")


def _parse(source, max_bytes):
    """``(label, root, line)``: ``line(element)`` is the line where ``element`` starts."""
    label = checked_path(source, SrdfError, "SRDF file")
    text = read_bytes(label, SrdfError, "SRDF file", max_bytes)
    lines = {}

    class Builder(ET.TreeBuilder):
        def start(self, tag, attrs):
            el = super().start(tag, attrs)
            lines[el] = parser.parser.CurrentLineNumber
            return el

    parser = DET.DefusedXMLParser(target=Builder())
    with xml_errors(label, SrdfError, "SRDF"):
        parser.feed(text)
        root = parser.close()
    if root.tag != "robot":
        raise SrdfError(f"{label}, line {lines.get(root, 1)}: root element is <{root.tag[:40]}>, expected <robot>")
    return label, root, lambda el: lines.get(el, 0)


def load_srdf(model: Model, path, max_bytes=None) -> Srdf:
    """Read the SRDF file ``path`` for ``model`` (see the module docstring): an :class:`Srdf` with
    ``reference_configurations``, ``rotor_inertia``, ``gear_ratio`` (and ``armature``,
    ``with_armature()``), ``disabled_collisions`` and ``groups``.

    >>> import sparsedyn as sd                                             # doctest: +SKIP
    >>> srdf = sd.load_srdf(talos, robots / "talos_data/srdf/talos.srdf")  # doctest: +SKIP
    >>> q0 = srdf.reference_configurations["half_sitting"]                 # doctest: +SKIP
    """
    if not isinstance(model, Model):
        raise TypeError(f"load_srdf: model must be a Model, got {type(model).__name__}")
    label, root, line = _parse(path, max_bytes)
    read = _Reader(model, label, line)
    refs = read.reference_configurations(root)
    rotor, gear = read.rotor_params(root)
    pairs = read.disabled_collisions(root)
    groups = {}
    for g in root.findall("group"):         # top level (a <group name=.../> inside one refers to another)
        groups[read.name(g)] = tuple(read.name(j) for j in g.findall("joint"))
    if read.unknown:
        warnings.warn(f"{label}: model {model.name!r} has no joint {clip_list(read.unknown)}; "
                      f"the SRDF's values for them are ignored", SrdfWarning, stacklevel=_checks.user_stacklevel())
    return Srdf(model, label, root.get("name", ""), refs, rotor, gear, tuple(pairs), groups, tuple(read.unknown))


class _Reader:
    """The elements of one SRDF file for ``model``: errors name the file (``label``), the line
    (``line(element)``) and the element; ``unknown`` collects the joint names the model lacks."""

    def __init__(self, model, label, line):
        self.model, self.label, self.line = model, label, line
        self.moving = set(model.joint_names)
        self.fixed = {fj.name for fj in model.fixed_joints}
        self.unknown = []

    def fail(self, el, problem):
        raise SrdfError(f"{self.label}, line {self.line(el)}: <{el.tag}{_name_attr(el)}>: {problem}")

    def numbers(self, el, attr, n=None):
        text = el.get(attr)
        if text is None:
            self.fail(el, f"missing required attribute {attr!r}")
        tokens = text.split()
        if n is not None and len(tokens) != n:
            self.fail(el, f"{attr}={clip(text)}: expected {n} number{'s' if n != 1 else ''}, got "
                          f"{len(tokens) if len(tokens) < 100 else 'more'}")
        out = []
        for t in tokens:
            if not _NUMBER.match(t) or not math.isfinite(float(t)):
                self.fail(el, f"{attr}={clip(text)}: {clip(t, 40)} is not a finite number")
            out.append(float(t))
        return out

    def name(self, el):
        n = el.get("name")
        if not n:
            self.fail(el, "missing required attribute 'name'")
        return n

    def joint_of(self, el):
        """The model's index of the joint ``el`` names, or ``None`` (a fixed joint, or one it lacks)."""
        n = self.name(el)
        if n in self.moving:
            return self.model.joint(n)
        if n not in self.fixed and n not in self.unknown:
            self.unknown.append(n)
        return None

    def reference_configurations(self, root) -> dict:
        """``{name: q}`` of the ``<group_state>`` elements (the neutral configuration elsewhere)."""
        model, refs = self.model, {}
        for gs in root.iter("group_state"):
            q = model.neutral()
            for jel in gs.findall("joint"):
                i = self.joint_of(jel)
                if i is None:
                    continue
                j = model.joints[i]
                vals = np.array(self.numbers(jel, "value", j.nq))
                if j.type in ("spherical", "free"):
                    quat = vals[-4:]
                    if abs(quat @ quat - 1.0) > QUAT_TOL:
                        self.fail(jel, f"the quaternion [x, y, z, w] {quat.tolist()} of joint {j.type!r} is not "
                                       f"of unit norm")
                    vals[-4:] = quat / np.linalg.norm(quat)
                q[model.q_slice(i)] = vals
            refs[self.name(gs)] = q
        return refs

    def rotor_params(self, root):
        """``(rotor mass, gear ratio)`` (nv,) each of the ``<rotor_params>`` elements."""
        model = self.model
        rotor, gear = np.zeros(model.nv), np.ones(model.nv)
        for rp in root.iter("rotor_params"):
            for jel in rp.findall("joint"):
                i = self.joint_of(jel)
                if i is None:
                    continue
                m, g = self.numbers(jel, "mass", 1)[0], self.numbers(jel, "gear_ratio", 1)[0]
                if m < 0:
                    self.fail(jel, f"mass={m:g}: a rotor inertia must be non-negative")
                if not np.isfinite(m * g * g):
                    self.fail(jel, f"mass={m:g}, gear_ratio={g:g}: the armature mass * gear_ratio**2 = "
                                   f"{m * g * g:g} is not finite")
                rotor[model.v_slice(i)], gear[model.v_slice(i)] = m, g
        return rotor, gear

    def disabled_collisions(self, root) -> list:
        """``[(link1, link2, reason)]`` of the ``<disable_collisions>`` elements."""
        pairs = []
        for dc in root.iter("disable_collisions"):
            l1, l2 = dc.get("link1"), dc.get("link2")
            if not l1 or not l2:
                self.fail(dc, "expected attributes 'link1' and 'link2'")
            pairs.append((l1, l2, dc.get("reason", "")))
        return pairs


def _fmt(x):
    return f"{x[0]:.6g}" if len(x) == 1 else "[" + " ".join(f"{v:.6g}" for v in x) + "]"


def _name_attr(el):
    n = el.get("name")
    return f" name={clip(n, 60)}" if n else ""
