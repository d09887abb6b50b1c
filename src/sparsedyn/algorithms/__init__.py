"""The classical algorithms: model + state -> arrays.

One algorithm per module, each written once over NumPy and generic over the
array backend (float arrays with leading batch axes, and the object arrays the
symbolic layer traces): :mod:`.kinematics`, :mod:`.rnea`, :mod:`.crba`,
:mod:`.ltdl`, :mod:`.aba`, :mod:`.fd`, :mod:`.minv`, :mod:`.com` (centre of mass),
:mod:`.centroidal` (centroidal momentum), :mod:`.energy`, :mod:`.passive` (joint springs and dampers), :mod:`.regressor`
(inertial-parameter regressors), the analytical derivatives (:mod:`.dynamics_derivatives`,
:mod:`.kinematics_derivatives`, :mod:`.centroidal_derivatives`; :mod:`.derivatives` differentiates
any kernel's traced program).  Public names are
importable from :mod:`sparsedyn` itself.
"""
