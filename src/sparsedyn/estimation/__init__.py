"""Estimation of joint torques, joint wrenches and contact wrenches from sensors (Nori, section VI).

A problem is a model, a set of sensors (each an address into one flat
measurement vector) and the unknowns; its offline phase gives a well-posedness
verdict before any data, and its online phase solves one state or a batch::

    from sparsedyn import estimation as est
    prob = est.EstimationProblem(model, sensors=[...], contacts=["l_sole", "r_sole"])
    print(prob.verdict())
    solver = prob.analyze()                      # raises IllPosedError if ill-posed
    e = solver.solve(q, v, y)                   # e.tau, e.f, e.contacts[...], e.named()

Modules: :mod:`sparsedyn.model.sensors` (sensor kinds, contacts; model entries), :mod:`sparsedyn.estimation.files` (sensor files),
:mod:`.problem` (problem, least squares), :mod:`.verdict` (well-posedness), :mod:`.estimator`
(the offline phase done, the one online function), :mod:`.estimate` (results), :mod:`.compiled`
(the online function as a kernel, ``sparsedyn.compile(estimator)``), :mod:`.imu` (the floating base's
state from an IMU), :mod:`.truth`
(classical ground truth), :mod:`.casestudy` (Nori's humanoid case study, CLI reports).
"""

from ..model.sensors import (COMPONENTS, LOAD_CELLS, Accelerometer, Contact, ContactLoad, ForceTorque, JointAcceleration,
                      JointTorque, KnownWrench, Prior, Sensor)
from .verdict import RANK_RTOL, IllPosedError, StateSingularError, Verdict
from .estimate import Estimate
from .estimator import Estimator
from .problem import EstimationProblem, ModelViolationWarning
from .compiled import CompiledEstimator
from .truth import newton_euler, pack_d
from .files import SensorFileError, load_sensors, problem_from_file
from .casestudy import case_problems, estimate_report, estimation_demo
from .imu import frame_proper_acceleration, imu_base_state
from .derivatives import estimate_derivatives

__all__ = ["estimate_derivatives", "COMPONENTS", "LOAD_CELLS", "Sensor", "ForceTorque", "ContactLoad", "JointTorque", "JointAcceleration",
           "KnownWrench", "Accelerometer", "Prior", "Contact", "EstimationProblem", "Estimator", "Estimate",
           "Verdict", "IllPosedError", "StateSingularError", "RANK_RTOL", "newton_euler", "pack_d",
           "SensorFileError", "load_sensors", "problem_from_file", "case_problems", "estimate_report", "estimation_demo",
           "imu_base_state", "frame_proper_acceleration", "CompiledEstimator", "ModelViolationWarning"]
