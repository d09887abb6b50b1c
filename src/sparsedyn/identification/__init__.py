"""Inertial-parameter identification: base parameters, least squares, physical consistency.

Joint forces and the wrenches F/T sensors measure are linear in the inertial
parameters ``pi`` (10 per body, :meth:`sparsedyn.Model.inertial_parameters`)::

    tau = Y(q, v, a) pi                    (:func:`sparsedyn.joint_torque_regressor`)
    y_s = Y_s(q, v, a) pi_s                (:func:`force_torque_regressor`, :func:`force_torque_parameters`)

(``pi_s`` is ``pi`` followed, for a sensor on a merged fixed joint, by the 10 parameters of the links
on its child side.)

Not every parameter moves these measurements: some columns of ``Y`` are zero for
every state, others are combinations of the rest.  The *base parameters* are the
identifiable combinations (Gautier, *Numerical calculation of the base inertial
parameters of robots*, 1991): a QR decomposition with column pivoting of
regressors stacked from random states (joint limits ignored: they are data, not
structure) splits ``pi`` into independent ``pi_1`` and dependent ``pi_2`` with
``Y_2 = Y_1 K`` for every state, so ``Y pi = Y_1 beta`` with::

    beta = pi_1 + K pi_2                   (:meth:`BaseParameters.base`)

:func:`identify` solves the (weighted) least squares for ``beta`` and returns its
covariance; with ``physically_consistent=True`` it instead fits the full ``pi``
under the constraint that every body's pseudo-inertia (Wensing, Kim and Slotine,
*Linear matrix inequalities for physically consistent inertial parameter
identification*, 2017)::

    J = [[Sigma, h], [h^T, m]],  Sigma = tr(I)/2 1 - I    (I about the body origin)

is positive semidefinite: a convex problem (a linear matrix inequality per body), solved by
a log-barrier interior-point method (Boyd and Vandenberghe, *Convex Optimization*, 2004,
chapter 11) with Newton steps on the barrier problem.  SciPy is imported when these functions run, not when
:mod:`sparsedyn` is imported.

Modules: :mod:`.least_squares` (base parameters, the streamed least squares), :mod:`.gram` (the
Gram matrix of the rows, by groups), :mod:`.force_torque` (F/T sensor regressors),
:mod:`.consistency` (pseudo-inertias, the constrained fit).
"""

from .consistency import parameters_from_pseudo_inertia, pseudo_inertia
from .force_torque import (fixed_joint_parameters, force_torque_parameters, force_torque_regressor, inertia_parameters,
                           model_parameters)
from .least_squares import (PARAMETER_NAMES, BaseParameters, Identification, IdentificationData, base_parameters,
                            identify, parameter_names, random_states)

__all__ = ["PARAMETER_NAMES", "BaseParameters", "base_parameters", "random_states", "force_torque_regressor",
           "force_torque_parameters",
           "fixed_joint_parameters", "inertia_parameters", "model_parameters", "parameter_names",
           "pseudo_inertia", "parameters_from_pseudo_inertia", "Identification", "IdentificationData", "identify"]
