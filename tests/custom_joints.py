"""A custom joint written by hand for the tests of the layers that take every joint (the sparse system,
the Coriolis matrix): a universal joint about x then y, and a model carrying it."""

import numpy as np

import sparsedyn as sd
from sparsedyn import spatial as sp

EX, EY = np.eye(3)[0], np.eye(3)[1]


def xy_jcalc(q):
    """parent_R_child = Rx(q0) Ry(q1); omega (child frame) = Ry^T e_x qd0 + e_y qd1, so
    S = [Ey e_x, e_y; 0, 0] with Ey = Ry^T."""
    Ex, Ey = sp.axis_rotation(EX, q[..., 0]), sp.axis_rotation(EY, q[..., 1])
    c0 = sp.mv(Ey, np.broadcast_to(EX, q.shape[:-1] + (3,)))
    S = np.concatenate([np.stack([c0, np.broadcast_to(EY, c0.shape)], -1), np.zeros(q.shape[:-1] + (3, 2))], -2)
    return sp.Transform(Ey @ Ex, 0 * c0), S


def xy_bias(q, qd):
    """``Sdot qd`` by hand: d/dt (Ey e_x) = -qd1 e_y x (Ey e_x); the second column is constant."""
    Ey = sp.axis_rotation(EY, q[..., 1])
    c0 = sp.mv(Ey, np.broadcast_to(EX, q.shape[:-1] + (3,)))
    w = -(qd[..., 1:2] * qd[..., 0:1]) * sp.cross3(np.broadcast_to(EY, c0.shape), c0)
    return np.concatenate([w, 0 * w], -1)


def custom_universal():
    return sd.CustomJoint(2, 2, xy_jcalc, xy_bias, name="my_universal")


def with_joints(base, joint, name="custom"):
    """``base`` with two more bodies on ``joint`` (one on its last body, one on its root)."""
    b = sd.ModelBuilder(f"{base.name}_{name}", gravity=base.gravity)
    for i in range(base.nbodies):
        b.add_body(base.body_names[i], None if base.parent[i] < 0 else base.body_names[base.parent[i]],
                   base.joints[i], base.Xtree[i], base.inertia[i], joint_name=base.joint_names[i])
    rng = np.random.default_rng(7)
    for k, parent in enumerate((base.body_names[-1], base.body_names[0])):
        b.add_body(f"{name}{k}", parent, joint, sp.Transform(sp.rotx(0.3 + k), rng.normal(size=3)), mass=1.0 + k,
                   com=rng.normal(size=3) / 5, rot_inertia=np.diag([0.1, 0.2, 0.15]))
    return b.build()
