"""Conversions to and from other rigid-body-dynamics libraries.

* :mod:`sparsedyn.interop.pinocchio` -- Pinocchio's configuration, velocity and
  force layouts, and :class:`pinocchio.Model` in both directions.

These modules import the other library lazily, so they can be imported (and
their array conversions used) without it.
"""
