"""Sensors and contacts: what an estimation problem measures and what it leaves unknown.

Every sensor owns an *address* (offset, size) into one flat measurement vector
``y`` (as MuJoCo's ``sensordata``); an estimator sees one ``y``
(..., ny).  A sensor is a linear map of the Newton-Euler variables ``d``
(:mod:`sparsedyn.sparse.variables`) plus an optional velocity-dependent bias::

    y_s = sum_k M_k d[var_k] + bias_s(q, v)          (Nori, eq. 16: D_Y d + b_Y = 0)

Spatial vectors are angular first: a wrench is ``[n; f]``; components are named
``nx ny nz fx fy fz``.  A wrench "at a frame" is expressed in that frame's axes
about its origin: ``w_frame = frame_X*_body w_body``.

Sensors (all take ``name``, optional ``covariance`` and ``exact``):

* :class:`ForceTorque` - 6-axis F/T sensor on a moving or a *fixed* joint: the
  wrench the parent side exerts on the child side across it (Nori's ``f_i`` for a
  moving joint ``i``), or its negative (``direction="child_to_parent"``, Gazebo's
  default), expressed in ``frame`` (default: the joint frame, i.e. the child link
  frame), optionally with its axes turned by ``rotation``.
* :class:`ContactLoad` - load cells / 3-axis foot sensors and any selection of a
  contact wrench: ``components`` of the contact wrench at ``frame`` (Nori's eq.
  18: ``("nx", "ny", "fz")``; eq. 23 five components) or a selection matrix
  ``(m, 6)`` (Nori's ``Y^T``, written angular first).
* :class:`JointTorque` - joint torque sensors on ``joints``.
* :class:`JointAcceleration` - known joint accelerations on ``joints`` (exact by default).
* :class:`KnownWrench` - a known external wrench at ``frame`` (exact by default).
* :class:`Accelerometer` - 3-axis linear accelerometer at ``frame``: the proper
  acceleration (classical acceleration of the frame origin minus gravity) in
  frame axes.  The velocity term ``omega x v`` goes in ``b_Y``.
* :class:`Prior` - a Gaussian prior on variables (MAP, as in BERDY): a soft
  measurement with a constant value ``mean`` and no address.

:class:`Contact` is not a sensor: it declares an *unknown* contact wrench at a
frame (reported at that frame).  Bodies with neither a contact nor a known
wrench have zero external wrench.

A sensor's rows may depend on the problem it is used in: :meth:`Sensor.rows`
gets a :class:`SensorContext` (which frames carry an external wrench); a
:class:`ForceTorque` on a fixed joint needs it to know on which side of the joint
each body's external wrench acts.

``covariance``: ``None`` (unit variance), a scalar variance, per-component
variances (size,) or a full matrix (size, size).  ``exact=True`` makes the
sensor a hard constraint (its covariance is then unused by least squares).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .contacts import CONTACT_KINDS, MAX_CONTACT_LENGTH, MAX_NORMAL2, MIN_NORMAL2, Contact
from .contacts import body_frame as _frame
from .model import UnknownNameError
from .spatial import (Transform, apply_force, apply_motion, compose, cross3, cross_force, force_matrix,
                      motion_matrix, mv)

__all__ = ["COMPONENTS", "DIRECTIONS", "Sensor", "SensorContext", "ForceTorque", "ContactLoad", "JointTorque",
           "JointAcceleration", "KnownWrench", "Accelerometer", "Prior", "Contact", "CONTACT_KINDS", "LOAD_CELLS",
           "sensor_from_dict", "SENSOR_TYPES", "MIN_NORMAL2", "MAX_NORMAL2", "MAX_CONTACT_LENGTH"]

#: Component names of a wrench (angular first).
COMPONENTS = ("nx", "ny", "nz", "fx", "fy", "fz")
#: The normal force and the two in-plane moments of a sole (z = sole normal), Nori's eq. (18).
LOAD_CELLS = ("nx", "ny", "fz")
#: Measurement directions of a :class:`ForceTorque` (Gazebo's ``measure_direction``).
DIRECTIONS = ("parent_to_child", "child_to_parent")


class SensorContext(NamedTuple):
    """What a sensor's rows may need to know about the problem it is used in.

    ``wrench_frames``: ``{body index: (frame names, ...)}``, the frames at which
    an external wrench acts on that body (unknown contacts and known wrenches);
    bodies not listed have none.
    """

    wrench_frames: dict


def _joint(model, who, joint):
    try:
        return model.joint(joint)
    except KeyError as e:
        raise UnknownNameError(f"{who}: {e}") from None


def _selection(who, components):
    """(m, 6) selection matrix from component names/indices or a matrix."""
    if components is None:
        return np.eye(6)
    arr = np.asarray(components, dtype=object)
    if arr.ndim == 2:
        M = np.asarray(components, float)
        if M.shape[1] != 6 or not np.all(np.isfinite(M)):
            raise ValueError(f"{who}: a selection matrix must be finite with 6 columns ([n; f]), got {M.shape}")
        return M
    rows = []
    for c in np.atleast_1d(arr):
        if isinstance(c, str):
            if c not in COMPONENTS:
                raise ValueError(f"{who}: unknown wrench component {c!r}; expected one of {COMPONENTS}")
            rows.append(COMPONENTS.index(c))
        else:
            if not 0 <= int(c) < 6:
                raise ValueError(f"{who}: wrench component index {c} out of range 0..5")
            rows.append(int(c))
    return np.eye(6)[rows]


class Sensor:
    """Base class.  Subclasses define ``kind``, ``size`` and :meth:`rows`."""

    kind = "sensor"
    default_exact = False

    def __init__(self, name, covariance=None, exact=None):
        if not isinstance(name, str) or not name:
            raise ValueError(f"a sensor needs a non-empty name, got {name!r}")
        self.name = name
        self._cov = covariance
        self.exact = self.default_exact if exact is None else bool(exact)

    @property
    def addressed(self) -> bool:
        """Has a slot in the flat measurement vector (a :class:`Prior` has not)."""
        return True

    def covariance(self, size) -> np.ndarray:
        """The (size, size) covariance of the sensor's noise, in the units of its readings squared
        (unit variance when none was given)."""
        c = self._cov
        if c is None:
            return np.eye(size)
        c = np.asarray(c, float)
        if c.ndim == 0:
            C = float(c) * np.eye(size)
        elif c.shape == (size,):
            C = np.diag(c)
        elif c.shape == (size, size):
            if np.any(np.abs(c - c.T) > 1e-9 * np.max(np.abs(c), initial=0.0)):
                raise ValueError(f"sensor {self.name!r}: the covariance matrix must be symmetric")
            C = 0.5 * (c + c.T)
        else:
            raise ValueError(f"sensor {self.name!r}: covariance of shape {c.shape}; expected a scalar, "
                             f"({size},) or ({size}, {size})")
        if not np.all(np.isfinite(C)) or np.min(np.linalg.eigvalsh(C)) <= 0:
            raise ValueError(f"sensor {self.name!r}: the covariance must be finite and positive definite")
        return C

    def rows(self, model, layout, context=None):
        """``(terms, size, bias)``: terms ``[(Variable, M)]``, bias ``kin -> (..., size)`` or None.

        ``context``: a :class:`SensorContext` (``None``: no external wrench anywhere).
        """
        raise NotImplementedError

    def describe(self) -> str:
        """What the sensor measures, in a few words (for reports and ``sparsedyn info``)."""
        return self.kind

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r})"


class ForceTorque(Sensor):
    """6-axis force/torque sensor across ``joint``, a moving or a merged fixed joint.

    Measures ``w`` = the wrench the parent side exerts on the child side across the
    joint (``direction="parent_to_child"``, the default) or ``-w``
    (``"child_to_parent"``, Gazebo's default), about the origin of ``frame`` and
    in its axes turned by ``rotation``: ``y = +-R^T [n; f]_frame`` with ``R``
    (3, 3) the orientation of the measurement axes in ``frame`` (default
    identity; moving the axes, not the point, is what Gazebo's ``<frame>`` does).
    ``components`` keeps some of the six (names from :data:`COMPONENTS` or
    indices; default all): MuJoCo's ``force`` sensor is ``("fx", "fy", "fz")``,
    its ``torque`` sensor ``("nx", "ny", "nz")``.
    ``frame``: a frame rigidly attached to the joint's child link (a frame on the
    child body of a moving joint; any frame of the body a fixed joint was merged
    into); default the joint frame, which is also the child link frame.

    *Moving joint* ``i``: ``y = +-X*_{S<-i} f_i`` (``f_i`` is a variable).

    *Fixed joint* ``J`` merged into body ``B``: let ``P`` be the merged links on
    its child side (spatial inertia ``I_P``, moving child bodies ``C_P``) and
    ``Q`` the rest of ``B`` (``I_Q = I_B - I_P``, moving child bodies ``C_Q``).
    Both pieces move with ``B`` (velocity ``v``, acceleration ``a_B`` including
    ``-g``).  Newton-Euler for ``P`` (all in body coordinates)::

        w + fx_P - sum_{c in C_P} Xup_c^T f_c = I_P a_B + v x* I_P v

    and for ``Q``, which receives ``f_B`` from its parent and ``-w`` from ``P``::

        f_B - w + fx_Q - sum_{c in C_Q} Xup_c^T f_c = I_Q a_B + v x* I_Q v

    ``Xup_c`` depends on ``q``, and measurement rows have constant matrices
    (:mod:`sparsedyn.sparse.measurements`), so the side without moving children
    is used: ``C_P`` empty (a foot sensor)::

        y = +-X*_{S<-B} [ I_P a_B - fx_P + v x* I_P v ]

    else ``C_Q`` empty (a sensor between two links of a limb)::

        y = +-X*_{S<-B} [ f_B - I_Q a_B + fx_Q - v x* I_Q v ]

    (``v x* I v`` goes into the bias).  A fixed joint with moving bodies on both
    sides inside ``B`` raises ``ValueError``.  ``fx_B`` (one variable per body) is
    ``fx_P`` when every frame carrying an external wrench on ``B`` (the
    problem's contacts and known wrenches, from the :class:`SensorContext`) is
    on the child side (``FixedJoint.frames``), ``fx_Q`` when none is; frames on
    both sides raise ``ValueError``.
    """

    kind = "force_torque"

    def __init__(self, name, joint, frame=None, direction="parent_to_child", rotation=None, covariance=None,
                 exact=None, components=None):
        super().__init__(name, covariance, exact)
        who = f"sensor {name!r}"
        self.components = components
        self.selection = None if components is None else _selection(who, components)
        if direction not in DIRECTIONS:
            raise ValueError(f"{who}: direction {direction!r}; expected one of {DIRECTIONS}")
        R = None
        if rotation is not None:
            try:
                R = np.array(rotation, float)
            except (TypeError, ValueError):
                raise ValueError(f"{who}: rotation must be a (3, 3) rotation matrix") from None
            if R.shape != (3, 3) or not np.all(np.isfinite(R)) or not np.allclose(R.T @ R, np.eye(3), atol=1e-9) \
                    or np.linalg.det(R) < 0:
                raise ValueError(f"{who}: rotation must be a (3, 3) rotation matrix (orthonormal, det +1), "
                                 f"got {R.tolist() if R.size <= 9 else R.shape}")
            R.setflags(write=False)
        self.joint, self.frame, self.direction, self.rotation = joint, frame, direction, R

    def measurement_frame(self, model, who, body, X_default, what):
        """``S_X_body``: the sensor's frame relative to ``body``: ``frame`` (default ``X_default``) with its axes
        turned by ``rotation``; ``who`` and ``what`` name the sensor and the body in an error (``frame`` on
        another body)."""
        X = X_default
        if self.frame is not None:
            fr = _frame(model, who, self.frame)
            if fr.body != body:
                raise ValueError(f"{who}: frame {self.frame!r} is on body {model.body_names[fr.body]!r}, not on "
                                 f"{model.body_names[body]!r}, {what}")
            X = fr.X
        if self.rotation is not None:
            X = compose(Transform(self.rotation.T, np.zeros(3)), X)
        return X

    def rows(self, model, layout, context=None):
        who = f"sensor {self.name!r}"
        sign = 1.0 if self.direction == "parent_to_child" else -1.0
        fj = next((f for f in model.fixed_joints if f.name == self.joint), None)   # else a moving joint
        if fj is None:
            i = _joint(model, who, self.joint)
            X = self.measurement_frame(model, who, i, Transform(np.eye(3), np.zeros(3)),
                                       f"the child body of joint {self.joint!r}")
            return self._selected([(layout.var("f", i), sign * force_matrix(X))], 6, None)
        b = fj.body
        X = self.measurement_frame(model, who, b, fj.X, f"the body fixed joint {self.joint!r} was merged into")
        F = sign * force_matrix(X)
        other = [c for c in range(b + 1, model.nbodies) if model.parent[c] == b and c not in fj.children]
        if fj.children and other:
            raise ValueError(f"{who}: fixed joint {self.joint!r} has moving bodies on both sides inside body "
                             f"{model.body_names[b]!r} (child side: {[model.body_names[c] for c in fj.children]}, "
                             f"parent side: {[model.body_names[c] for c in other]}); the wrench across it would "
                             f"need configuration-dependent coefficients, which measurement rows cannot have")
        frames = (context.wrench_frames if context is not None else {}).get(b, ())
        child = [n for n in frames if n in fj.frames]
        parent = [n for n in frames if n not in fj.frames]
        if child and parent:
            raise ValueError(f"{who}: body {model.body_names[b]!r} has external wrenches on both sides of fixed "
                             f"joint {self.joint!r} (child side: {child}, parent side: {parent}); one external "
                             f"wrench variable per body cannot tell them apart")
        if not fj.children:                               # child side: no moving children
            I, s = fj.inertia, 1.0
            terms = [(layout.var("a", b), F @ I)]
            if child:
                terms.append((layout.var("fx", b), -F))
        else:                                             # parent side
            I, s = model.inertia[b] - fj.inertia, -1.0
            terms = [(layout.var("f", b), F), (layout.var("a", b), -(F @ I))]
            if parent:
                terms.append((layout.var("fx", b), F))
        terms = [(v, M) for v, M in terms if np.any(M)]
        Xs, k = X, s * sign

        def bias(kin):
            v = kin.v[b]
            w = apply_force(Xs, cross_force(v, mv(I, v)))
            return w if k > 0 else -w
        return self._selected(terms, 6, bias)

    def _selected(self, terms, size, bias):
        """The rows of :attr:`components` only."""
        P = self.selection
        if P is None:
            return terms, size, bias
        terms = [(v, P @ M) for v, M in terms if np.any(P @ M)]
        return terms, P.shape[0], None if bias is None else (lambda kin: mv(P, bias(kin)))

    def describe(self):
        what = "6-axis F/T" if self.selection is None else f"F/T [{','.join(map(str, self.components))}]"
        return (f"{what} across joint {self.joint}" + (f" at frame {self.frame}" if self.frame else "")
                + ("" if self.direction == "parent_to_child" else " (child to parent)")
                + (" (rotated axes)" if self.rotation is not None else ""))


class ContactLoad(Sensor):
    """Load cells or a foot sensor: selected components of the unknown contact wrench at ``frame``.

    The contact wrench ``[n; f]`` acts on the robot at ``frame`` (a :class:`Contact` must be
    declared on that frame's body), expressed in the frame's axes about its origin [N m; N].
    ``components``: names among ``nx ny nz fx fy fz`` (default :data:`LOAD_CELLS`, Nori's
    eq. 18: the normal force and the two moments in the sole plane), or a selection matrix
    (m, 6) of combinations (angular columns first).  Reading ``y`` (m,) = the selected components.

    Example: ``ContactLoad("l_cells", "l_sole")`` with ``Contact("l_sole")``.
    """

    kind = "contact_load"

    def __init__(self, name, frame, components=LOAD_CELLS, covariance=None, exact=None):
        super().__init__(name, covariance, exact)
        self.frame, self.components = frame, components
        self.selection = _selection(f"sensor {name!r}", components)

    def rows(self, model, layout, context=None):
        fr = _frame(model, f"sensor {self.name!r}", self.frame)
        M = self.selection @ force_matrix(fr.X)
        return [(layout.var("fx", fr.body), M)], M.shape[0], None

    def describe(self):
        c = self.components
        what = ",".join(c) if c is not None and np.asarray(c, dtype=object).ndim == 1 else \
            f"{self.selection.shape[0]} combinations"
        return f"contact wrench [{what}] at {self.frame}"


class _JointSensor(Sensor):
    var_kind = "tau"

    def __init__(self, name, joints=None, covariance=None, exact=None):
        super().__init__(name, covariance, exact)
        self.joints = None if joints is None else ([joints] if isinstance(joints, str) else list(joints))

    def bodies(self, model):
        who = f"sensor {self.name!r}"
        return [_joint(model, who, j) for j in self.joints]

    def rows(self, model, layout, context=None):
        idx = self.bodies(model)
        size = sum(model.joints[i].nv for i in idx)
        terms, r = [], 0
        for i in idx:
            nv = model.joints[i].nv
            M = np.zeros((size, nv))
            M[r:r + nv] = np.eye(nv)
            terms.append((layout.var(self.var_kind, i), M))
            r += nv
        if not size:
            raise ValueError(f"sensor {self.name!r}: measures no degree of freedom")
        return terms, size, None


class JointTorque(_JointSensor):
    """Joint torque sensors: the forces ``tau`` (one per dof) of ``joints`` (names; default all
    joints with dofs), in joint order [N m for revolute, N for prismatic dofs].

    Example: ``JointTorque("knees", ["l_knee", "r_knee"], covariance=0.5**2)``.
    """

    kind = "joint_torque"

    def describe(self):
        return f"torque of {len(self.joints)} joint(s)"


class JointAcceleration(_JointSensor):
    """Known joint accelerations ``a`` (one per dof) of ``joints`` [rad/s^2 or m/s^2]; exact by default.

    Every joint acceleration that is neither declared unknown nor measured by such a sensor
    is known and read from the implicit entry ``"qdd"`` at the front of ``y`` (see
    :meth:`~sparsedyn.estimation.EstimationProblem.known_accelerations`).  A free joint's
    acceleration is ``[domega; dv]`` in its body frame (see
    :func:`~sparsedyn.estimation.imu_base_state` to get it from an IMU).
    """

    kind = "joint_acceleration"
    var_kind = "qdd"
    default_exact = True

    def describe(self):
        return f"acceleration of {len(self.joints)} joint(s)"


class KnownWrench(Sensor):
    """A known external wrench ``[n; f]`` acting on the robot at ``frame`` (in the frame's axes,
    about its origin) [N m; N]: a carried load, a handle pushed with a measured force.  Exact by
    default; reading ``y`` (6,) = the wrench.

    Example: ``KnownWrench("push", "r_hand")``.
    """

    kind = "known_wrench"
    default_exact = True

    def __init__(self, name, frame, covariance=None, exact=None):
        super().__init__(name, covariance, exact)
        self.frame = frame

    def resolve_frame(self, model):
        """The :class:`~sparsedyn.model.Frame` the wrench acts at."""
        return _frame(model, f"sensor {self.name!r}", self.frame)

    def rows(self, model, layout, context=None):
        fr = self.resolve_frame(model)
        return [(layout.var("fx", fr.body), force_matrix(fr.X))], 6, None

    def describe(self):
        return f"known external wrench at {self.frame}"


class Accelerometer(Sensor):
    """Proper acceleration of the origin of ``frame`` in frame axes.

    With ``a_i`` the variable of the body (which includes ``-g``, Featherstone's
    base-acceleration trick, so it *is* proper), ``a_F = F_X_i a_i`` and
    ``v_F = F_X_i v_i``: ``y = lin(a_F) + omega_F x lin(v_F)``.
    """

    kind = "accelerometer"

    def __init__(self, name, frame, covariance=None, exact=None):
        super().__init__(name, covariance, exact)
        self.frame = frame

    def rows(self, model, layout, context=None):
        fr = _frame(model, f"sensor {self.name!r}", self.frame)
        i, X = fr.body, fr.X
        M = motion_matrix(X)[3:]

        def bias(kin):
            vF = apply_motion(X, kin.v[i])
            return cross3(vF[..., :3], vF[..., 3:])
        return [(layout.var("a", i), M)], 3, bias

    def describe(self):
        return f"3-axis accelerometer at {self.frame}"


class Prior(Sensor):
    """Gaussian prior ``d[kind of bodies] ~ N(mean, covariance)`` (soft rows with a constant value).

    ``kind``: which dynamic variable of Nori's sparse system (:mod:`sparsedyn.sparse.variables`) the
    prior is on, each in its own body's coordinates, angular first:

    * ``"a"``: the body's spatial acceleration ``a_i = [alpha; a]`` (6 per body) with gravity folded in,
      as the sparse system carries it (the base's fictitious acceleration ``-g``; Pinocchio's ``a_gf``):
      a body at rest has ``a_i = [0; -R_i^T g]``, ``R_i`` its orientation in the world;
    * ``"f"``: the wrench ``f_i = [n; f]`` the parent exerts on the body across its joint (6 per body);
    * ``"tau"``: the joint force ``tau_i`` (the joint's ``nv_i`` components, one for a revolute joint);
    * ``"fx"``: the external wrench ``fx_i`` on the body (6; the ``f_ext[i]`` of :func:`sparsedyn.rnea`,
      e.g. an unknown contact wrench expected near zero);
    * ``"qdd"``: the joint acceleration (``nv_i`` components).

    ``bodies``: body or joint names (or indices), one or a list; the rows stack their variables in
    that order.  ``mean``: a scalar or one value per row; ``covariance``: as for every sensor (a scalar
    variance, one per row, or a matrix).
    """

    kind = "prior"

    def __init__(self, name, kind, bodies, mean=0.0, covariance=None):
        super().__init__(name, covariance, False)
        self.var_kind = kind
        self.bodies_ = [bodies] if isinstance(bodies, (str, int)) else list(bodies)
        self.mean = mean

    @property
    def addressed(self):
        return False

    def rows(self, model, layout, context=None):
        vars_ = [layout.var(self.var_kind, b) for b in self.bodies_]
        size = sum(v.size for v in vars_)
        terms, r = [], 0
        for v in vars_:
            M = np.zeros((size, v.size))
            M[r:r + v.size] = np.eye(v.size)
            terms.append((v, M))
            r += v.size
        return terms, size, None

    def value(self, size):
        """The prior's mean as a (size,) vector."""
        m = np.broadcast_to(np.asarray(self.mean, float), (size,)).copy()
        return m

    def describe(self):
        return f"prior on {self.var_kind} of {len(self.bodies_)} bodies/joints"


#: The sensor kinds of a sensor file's ``type`` entry (and their aliases): name -> class.
SENSOR_TYPES = {"force_torque": ForceTorque, "ft": ForceTorque, "contact_load": ContactLoad, "load_cells": ContactLoad,
          "wrench_selection": ContactLoad, "joint_torque": JointTorque, "joint_acceleration": JointAcceleration,
          "known_wrench": KnownWrench, "accelerometer": Accelerometer}


def sensor_from_dict(entry: dict, where="sensor file") -> Sensor:
    """A sensor from one ``[[sensor]]`` table of a sensor file (see :mod:`sparsedyn.estimation.files`)."""
    e = dict(entry)
    t = e.pop("type", None)
    name = e.get("name", "?")
    if t not in SENSOR_TYPES:
        raise ValueError(f"{where}: sensor {name!r} has type {t!r}; expected one of {sorted(SENSOR_TYPES)}")
    cls = SENSOR_TYPES[t]
    if "std" in e:
        if "covariance" in e:
            raise ValueError(f"{where}: sensor {name!r}: give std or covariance, not both")
        std = np.asarray(e.pop("std"), float)
        if std.ndim > 1 or not np.all(np.isfinite(std)) or np.any(std <= 0):
            raise ValueError(f"{where}: sensor {name!r}: std must be positive standard deviation(s) (a number "
                             f"or one per component)")
        e["covariance"] = np.square(std)
    if "variance" in e:
        raise ValueError(f"{where}: sensor {name!r}: give std (standard deviations) or covariance, not variance")
    if cls is ContactLoad and "selection" in e:
        e["components"] = e.pop("selection")
    if t == "load_cells" and "components" not in e:
        e["components"] = LOAD_CELLS
    try:
        return cls(**e)
    except TypeError as err:
        raise ValueError(f"{where}: sensor {name!r} of type {t!r}: {err}") from None
