"""
A rolling wheel in a closed loop: a custom joint and a revolute closure
=======================================================================

A wheel rolls without slipping on the floor; a connecting rod pinned to it off
its centre drives a pendulum hung from a pivot above.  The rolling is a joint
written by hand, :class:`sparsedyn.CustomJoint`; the pin where the rod meets the
pendulum is the loop's closing joint, a revolute closure
(:class:`sparsedyn.Weld` on the two in-plane directions).  Released from rest,
the mechanism swings under gravity; we check what physics fixes: the loop stays
closed, the energy stays constant, and the hand-written joint and the closure
give the numbers of their built-in equivalents.
"""

# %%
# The rolling joint
# -----------------
# A disc of radius ``r`` turned by ``theta`` about z rolls along x by ``-r theta``
# (y is up, the floor is the line y = 0).  Its ``jcalc`` returns the placement
# ``child_X_parent`` (the coordinate rotation ``E`` about z and the centre's
# displacement in the parent frame) and the motion subspace ``S`` in the disc's
# frame: the angular velocity is z, the centre's velocity ``-r x`` seen in the
# turning frame, ``-r E x``.  ``S`` turns with the disc, so the joint also gives
# ``bias(q, qd) = Sdot qd``: ``d/dt (E x) = -qd z x (E x)``.  Both are written with
# the library's array functions, so the joint runs on batches and traces into
# compiled code like the built-in joints; :class:`~sparsedyn.CustomJoint` checks
# ``S`` and the bias against central differences of the placement when it is made.
import matplotlib.pyplot as plt
import numpy as np

import sparsedyn as sd
from sparsedyn import constraints as sc
from sparsedyn import spatial as sp

RADIUS = 0.1
EX, EZ = np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0])


def rolling_jcalc(q):
    E = sp.axis_rotation(EZ, q[..., 0])                    # (..., 3, 3) child_E_parent
    centre = (-RADIUS * q[..., 0:1]) * EX                  # (..., 3) in the parent (floor) frame
    lin = -RADIUS * E[..., :, 0]                           # -r E x: the centre's velocity per rad/s
    S = np.concatenate([np.broadcast_to(EZ, lin.shape), lin], -1)[..., None]     # (..., 6, 1)
    return sp.Transform(E, centre), S


def rolling_bias(q, qd):
    Ex = sp.axis_rotation(EZ, q[..., 0])[..., :, 0]
    lin = (RADIUS * qd[..., 0:1] * qd[..., 0:1]) * sp.cross3(np.broadcast_to(EZ, Ex.shape), Ex)
    return np.concatenate([0 * lin, lin], -1)              # (..., 6): [0; r qd^2 z x (E x)]


rolling = sd.CustomJoint(1, 1, rolling_jcalc, rolling_bias, name="rolling")
print(rolling.name, "nq =", rolling.nq, "nv =", rolling.nv)

# %%
# The mechanism: a tree, and the pin that closes it
# -------------------------------------------------
# Three bodies: the wheel (a uniform disc, its centre at height ``r`` above the
# floor), a rod pinned to the wheel at ``0.08`` m from its centre and a pendulum
# hung from a pivot at ``(0.3, 0.45)``.  The rod's tip and the pendulum's tip are
# frames; the loop closes there.  A revolute joint about z lets the two tips turn
# freely but keeps them together in the plane: ``Weld(..., directions=("x", "y"))``
# fixes the relative translation along the rod tip's x and y axes (a planar loop
# has no independent z, rx or ry rows).
ROD, PENDULUM, PIN, PIVOT = 0.4, 0.3, 0.08, (0.3, 0.45, 0.0)
GRAVITY = (0.0, -9.81, 0.0)


def slender(m, L, w=0.02):
    """Rotational inertia about the centre of mass of a bar of length ``L`` along x."""
    return m / 12.0 * np.diag([2 * w * w, L * L + w * w, L * L + w * w])


def wheel_linkage(wheel_joint):
    rev = sd.make_joint("revolute", (0, 0, 1))
    b = sd.ModelBuilder("rolling_linkage", gravity=GRAVITY)
    m = 1.0
    b.add_body("wheel", None, wheel_joint, sp.xlt([0.0, RADIUS, 0.0]), mass=m, com=[0, 0, 0],
               rot_inertia=np.diag([m * RADIUS**2 / 4, m * RADIUS**2 / 4, m * RADIUS**2 / 2]),
               joint_name="wheel_joint")
    b.add_body("rod", "wheel", rev, sp.xlt([PIN, 0.0, 0.0]), mass=0.4, com=[ROD / 2, 0, 0],
               rot_inertia=slender(0.4, ROD), joint_name="rod_joint")
    b.add_body("pendulum", None, rev, sp.xlt(PIVOT), mass=0.6, com=[PENDULUM / 2, 0, 0],
               rot_inertia=slender(0.6, PENDULUM), joint_name="pendulum_joint")
    b.add_frame("rod_tip", "rod", sp.xlt([ROD, 0.0, 0.0]))
    b.add_frame("pendulum_tip", "pendulum", sp.xlt([PENDULUM, 0.0, 0.0]))
    return b.build()


model = wheel_linkage(rolling)
loop = sd.ConstraintSet(model, [sd.Weld(model, "rod_tip", "pendulum_tip", directions=("x", "y"))])
print(model)
# three joint velocities, two closure rows: one degree of freedom
q_guess = np.array([0.3, 0.0, -1.0])
q0 = sc.assemble(loop, q_guess, independent=["wheel_joint"])
v0 = sc.consistent_velocity(loop, q0, np.zeros(model.nv))
print("assembled q0 =", np.round(q0, 4), "  max |g(q0)| =", np.abs(loop.residual(q0)).max())
assert q0[0] == q_guess[0] and np.abs(loop.residual(q0)).max() < 1e-12
assert model.nv - np.linalg.matrix_rank(loop.jacobian(q0)) == 1

# %%
# Released from rest
# ------------------
# :func:`sparsedyn.constraints.simulate` integrates the constrained dynamics (an
# explicit order-8 Runge-Kutta step) and projects ``q`` and ``v`` back onto the
# loop after each step, recording the drift ``max |g(q)|`` and ``max |G v|``.
# Rolling without slipping does no work and nothing drives the joints, so the
# mechanical energy must stay what it was.
traj = sc.simulate(loop, q0, v0, 1.6, 0.02)
E = np.array([sd.mechanical_energy(model, q, v) for q, v in zip(traj.q, traj.v)])
print(f"wheel angle from {traj.q[0, 0]:.3f} to {traj.q[:, 0].max():.3f} rad;  max |E - E(0)| = "
      f"{np.abs(E - E[0]).max():.1e} J;  drift max |g| = {traj.position_violation.max():.1e} m, "
      f"max |G v| = {traj.velocity_violation.max():.1e} m/s")
assert traj.q[:, 0].max() - traj.q[0, 0] > 1.0                 # it swings through a wide arc
# an order-8 step of 0.02 s on a swing of about 2 s errs by ~(0.02 / 2)^8 relative, below rounding:
# a wrong S or bias of the joint, or a closure that did work, would show far above this bound
assert np.abs(E - E[0]).max() < 1e-10 * np.abs(E).max()
assert traj.position_violation.max() < 1e-11 and traj.velocity_violation.max() < 1e-11

# %%
# The wheel's centre is where rolling puts it: at height ``r``, ``-r theta``
# along the floor, for every recorded state.
centre = sd.forward_kinematics(model, traj.q)[1][:, model.body("wheel"), :]     # (N, 3)
assert np.allclose(centre[:, 0], -RADIUS * traj.q[:, 0], rtol=0, atol=1e-14)
assert np.allclose(centre[:, 1], RADIUS, rtol=0, atol=1e-14)

# %%
# The custom joint against the built-in one it mimics
# ---------------------------------------------------
# Rolling is a screw whose translation axis is not its rotation axis: the
# built-in ``"helical"`` joint about z with ``translation_axis=(1, 0, 0)`` and
# pitch ``-r`` (RBDL's helical joint) moves the wheel the same way.  The same
# mechanism built with it has the same accelerations to rounding, and its
# simulation follows the same path.
screw = sd.make_joint("helical", (0, 0, 1), pitch=-RADIUS, translation_axis=(1, 0, 0))
builtin = wheel_linkage(screw)
loop_builtin = sd.ConstraintSet(builtin, [sd.Weld(builtin, "rod_tip", "pendulum_tip", directions=("x", "y"))])
rng = np.random.default_rng(0)
for q in traj.q[::20]:
    v = sc.consistent_velocity(loop, q, rng.normal(size=model.nv))
    a_custom = sd.constrained_forward_dynamics(loop, q, v).a
    a_builtin = sd.constrained_forward_dynamics(loop_builtin, q, v).a
    assert np.abs(a_custom - a_builtin).max() < 1e-12 * np.abs(a_builtin).max()     # rounding
traj_builtin = sc.simulate(loop_builtin, q0, v0, 1.6, 0.02)
gap = np.abs(traj.q - traj_builtin.q).max()
print(f"custom joint vs built-in helical joint: max |q difference| over the run = {gap:.1e} rad")
assert gap < 1e-10

# %%
# The revolute closure against a point coincidence
# ------------------------------------------------
# In the plane a revolute pin is the coincidence of two points:
# ``PointCoincidence(..., axes="xy")`` (in world axes) closes the loop as the
# ``Weld`` on the rod tip's x and y axes does; the accelerations are the same,
# and the forces are the same vector, once in world axes, once in the rod tip's.
point = sd.ConstraintSet(model, [sd.PointCoincidence(model, "rod_tip", "pendulum_tip", axes="xy")])
q, v = traj.q[25], traj.v[25]
by_weld = sd.constrained_forward_dynamics(loop, q, v)
by_point = sd.constrained_forward_dynamics(point, q, v)
R_tip = sd.frame_placement(model, q, "rod_tip")[0]
print("accelerations, revolute closure:", np.round(by_weld.a, 6), " point closure:", np.round(by_point.a, 6))
assert np.abs(by_weld.a - by_point.a).max() < 1e-9 * np.abs(by_point.a).max()
assert np.abs(R_tip[:2, :2] @ by_weld.lam - by_point.lam).max() < 1e-9 * np.abs(by_point.lam).max()

# %%
# The motion, and what stayed fixed
# ---------------------------------
def draw(ax, q, alpha):
    _, p = sd.forward_kinematics(model, q)
    c, pin = p[model.body("wheel")], p[model.body("rod")]
    tip = sd.frame_placement(model, q, "rod_tip")[1]
    ax.add_patch(plt.Circle(c[:2], RADIUS, fill=False, color="C0", alpha=alpha))
    ax.plot([c[0], pin[0]], [c[1], pin[1]], color="C0", alpha=alpha)
    ax.plot([pin[0], tip[0]], [pin[1], tip[1]], "o-", color="C1", alpha=alpha, ms=3)
    ax.plot([PIVOT[0], tip[0]], [PIVOT[1], tip[1]], "o-", color="C2", alpha=alpha, ms=3)


fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
swing = np.argmax(traj.q[:, 0])                       # the end of the first swing
for k, i in enumerate(np.linspace(0, swing, 5).astype(int)):
    draw(ax1, traj.q[i], 0.25 + 0.75 * k / 4)
tips = np.array([sd.frame_placement(model, q, "rod_tip")[1] for q in traj.q])
ax1.plot(tips[:, 0], tips[:, 1], "k:", lw=1, label="closing pin")
ax1.axhline(0.0, color="0.5", lw=2)
ax1.set(aspect="equal", xlabel="x (m)", ylabel="y (m)", title="wheel (custom joint), rod, pendulum")
ax1.legend(loc="upper left")
ax2.semilogy(traj.t, np.maximum(np.abs(E - E[0]), 1e-17), label="|E - E(0)| (J)")
ax2.semilogy(traj.t, np.maximum(traj.position_violation, 1e-17), label="max |g(q)| (m)")
ax2.semilogy(traj.t, np.maximum(traj.velocity_violation, 1e-17), label="max |G v| (m/s)")
ax2.semilogy(traj.t, np.maximum(np.abs(traj.q - traj_builtin.q).max(-1), 1e-17), label="custom - helical (rad)")
ax2.set(xlabel="time (s)", title="energy, drift, custom vs built-in")
ax2.legend(fontsize=8)
fig.tight_layout()
