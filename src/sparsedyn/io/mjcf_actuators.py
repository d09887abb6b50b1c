"""An MJCF file's actuators as :class:`~sparsedyn.model.actuators.Actuators`: :func:`load_actuators`.

MuJoCo's compiler reads the file (its defaults, ``<motor>``, ``<position>``, ``<velocity>``,
``<intvelocity>``, ``<cylinder>`` and ``<general>`` resolved to gains, biases and activation dynamics);
each actuator must drive a hinge or slide joint with a fixed gain, no bias or an affine one, and no
activation state or one of a filter, an exact filter or an integrator: muscles, other activation
dynamics, tendon and site transmissions are refused with their names.
"""

from __future__ import annotations

import numpy as np

from ..model import Model
from ..model.actuators import ACTIVATIONS, Actuators
from .mjcf import _TRN_JOINT, _TRN_JOINTINPARENT, MjcfError, _compile, _mujoco
from .mjcf_joints import _list, _name

__all__ = ["load_actuators"]

#: MuJoCo's enum values (mjtJoint, mjtDyn, mjtGain, mjtBias) this reader takes; mjtDyn's first four in the
#: order of :data:`~sparsedyn.model.actuators.ACTIVATIONS`.
_HINGE_OR_SLIDE = (2, 3)
_GAIN_FIXED, _BIAS_NONE, _BIAS_AFFINE = 0, 0, 1


def load_actuators(model, source, *, assets=None) -> Actuators:
    """The actuators of the MJCF file (or XML string) ``source`` that ``model`` was loaded from
    (:func:`~sparsedyn.load_mjcf`), in ``model``'s layout: :meth:`Actuators.forces` ``(q, v, ctrl)`` are the
    joint forces of the controls, MuJoCo's ``qfrc_actuator`` (:mod:`~sparsedyn.model.actuators`).

    >>> import sparsedyn as sd
    >>> xml = ('<mujoco><worldbody><body><joint name="j" type="hinge"/><geom size=".1" mass="1"/></body>'
    ...        '</worldbody><actuator><position joint="j" kp="10" ctrlrange="-1 1"/></actuator></mujoco>')
    >>> act = sd.load_actuators(sd.load_mjcf(xml), xml)
    >>> act.forces([0.2], [0.0], [0.5]).tolist()          # kp (ctrl - q)
    [3.0]

    Raises :class:`~sparsedyn.MjcfError` naming the file and the actuators this reader cannot express, or
    a ``ValueError`` where ``model`` is not that file's (another number of coordinates or dofs)."""
    if not isinstance(model, Model):
        raise TypeError(f"load_actuators: model must be a sparsedyn Model (sd.load_mjcf's), got "
                        f"{type(model).__name__}")
    label, m = _compile(_mujoco(), source, assets)
    if (m.nq, m.nv) != (model.nq, model.nv):
        raise ValueError(f"load_actuators: {label} has nq={m.nq}, nv={m.nv}; model {model.name!r} has "
                         f"nq={model.nq}, nv={model.nv}: pass the model sd.load_mjcf read from that file")
    names = [_name(m, "actuator", a) or f"actuator {a}" for a in range(m.nu)]
    _check_supported(m, label, names)
    joints = m.actuator_trnid[:, 0].astype(int)
    limited = lambda flag, r: np.where(np.asarray(flag, bool)[:, None], r, [-np.inf, np.inf])  # noqa: E731
    joint_range = limited(m.jnt_actfrclimited, m.jnt_actfrcrange)           # per joint -> per dof
    per_dof = np.tile([-np.inf, np.inf], (model.nv, 1))
    for j in range(m.njnt):
        if int(m.jnt_type[j]) in _HINGE_OR_SLIDE:
            per_dof[int(m.jnt_dofadr[j])] = joint_range[j]
    return Actuators(names=names, dof=m.jnt_dofadr[joints], q_index=m.jnt_qposadr[joints],
                     gear=m.actuator_gear[:, 0], gain=m.actuator_gainprm[:, 0],
                     bias=np.where((m.actuator_biastype == _BIAS_AFFINE)[:, None], m.actuator_biasprm[:, :3], 0.0),
                     ctrl_range=limited(m.actuator_ctrllimited, m.actuator_ctrlrange),
                     force_range=limited(m.actuator_forcelimited, m.actuator_forcerange),
                     joint_force_range=per_dof, nv=model.nv, nq=model.nq,
                     activation=[ACTIVATIONS[int(t)] for t in m.actuator_dyntype],
                     time_constant=m.actuator_dynprm[:, 0],
                     act_range=limited(m.actuator_actlimited, m.actuator_actrange),
                     act_early=np.asarray(m.actuator_actearly, bool))


def _check_supported(m, label, names):
    """:class:`MjcfError` naming each actuator :class:`Actuators` cannot express, with what it is."""
    problems = {}
    for a, name in enumerate(names):
        trn, j = int(m.actuator_trntype[a]), int(m.actuator_trnid[a, 0])
        if trn not in (_TRN_JOINT, _TRN_JOINTINPARENT):
            problems.setdefault("a transmission other than a joint", []).append(name)
        elif int(m.jnt_type[j]) not in _HINGE_OR_SLIDE:
            problems.setdefault("a ball or free joint", []).append(name)
        if int(m.actuator_dyntype[a]) >= len(ACTIVATIONS):
            problems.setdefault("activation dynamics other than a filter or an integrator (a muscle, a user's)",
                                []).append(name)
        if int(m.actuator_gaintype[a]) != _GAIN_FIXED:
            problems.setdefault("a gain other than a fixed one", []).append(name)
        if int(m.actuator_biastype[a]) not in (_BIAS_NONE, _BIAS_AFFINE):
            problems.setdefault("a bias other than none or affine", []).append(name)
    if problems:
        raise MjcfError(f"{label}: load_actuators takes actuators on hinge and slide joints with a fixed gain, "
                        f"an affine bias and no activation, a filter's or an integrator's; " +
                        "; ".join(f"{_list(v)} ha{'ve' if len(v) > 1 else 's'} {k}" for k, v in problems.items()))
